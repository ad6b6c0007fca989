//! A plugin's manifest as the agent keeps it: converted from the WIT types
//! once at load time and validated, so the rest of the agent never sees a
//! manifest that lies about its module or repeats a function.

use crate::protocol::is_identifier;
use serde::{Deserialize, Serialize};

use super::bindings::maid::plugin::types as wit;

/// A host capability (WIT `capability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    Exec,
    Shell,
    Fetch,
    FsRead,
    FsWrite,
}

impl Capability {
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Exec => "exec",
            Capability::Shell => "shell",
            Capability::Fetch => "fetch",
            Capability::FsRead => "fs-read",
            Capability::FsWrite => "fs-write",
        }
    }
}

impl From<wit::Capability> for Capability {
    fn from(c: wit::Capability) -> Self {
        match c {
            wit::Capability::Exec => Capability::Exec,
            wit::Capability::Shell => Capability::Shell,
            wit::Capability::Fetch => Capability::Fetch,
            wit::Capability::FsRead => Capability::FsRead,
            wit::Capability::FsWrite => Capability::FsWrite,
        }
    }
}

/// One function of a module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionDoc {
    pub name: String,
    pub doc: String,
    pub args: Vec<String>,
}

/// What a plugin says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub module: String,
    pub version: String,
    /// What jobs may call, and every listing shows.
    pub functions: Vec<FunctionDoc>,
    pub capabilities: Vec<Capability>,
    /// Functions whose name starts with `_`: private, as Salt's loader
    /// keeps them. Only the agent calls them (`grains._core`, which
    /// detects the core grains under the plugin's grants); a job naming
    /// one finds it not available, and no listing shows them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub private: Vec<FunctionDoc>,
}

impl From<Capability> for wit::Capability {
    fn from(c: Capability) -> Self {
        match c {
            Capability::Exec => wit::Capability::Exec,
            Capability::Shell => wit::Capability::Shell,
            Capability::Fetch => wit::Capability::Fetch,
            Capability::FsRead => wit::Capability::FsRead,
            Capability::FsWrite => wit::Capability::FsWrite,
        }
    }
}

impl From<&Manifest> for wit::Manifest {
    fn from(m: &Manifest) -> Self {
        wit::Manifest {
            module: m.module.clone(),
            version: m.version.clone(),
            functions: m
                .functions
                .iter()
                .map(|f| wit::FunctionInfo {
                    name: f.name.clone(),
                    doc: f.doc.clone(),
                    args: f.args.clone(),
                })
                .collect(),
            capabilities: m.capabilities.iter().map(|&c| c.into()).collect(),
        }
    }
}

/// Whether a function named `name` is private to its module (Salt's
/// loader never exposes a name that starts with `_`).
pub fn is_private(name: &str) -> bool {
    name.starts_with('_')
}

impl From<wit::Manifest> for Manifest {
    fn from(m: wit::Manifest) -> Self {
        let mut capabilities: Vec<Capability> =
            m.capabilities.into_iter().map(Into::into).collect();
        capabilities.sort();
        capabilities.dedup();
        let (private, functions) = m
            .functions
            .into_iter()
            .map(|f| FunctionDoc {
                name: f.name,
                doc: f.doc,
                args: f.args,
            })
            .partition(|f| is_private(&f.name));
        Manifest {
            module: m.module,
            version: m.version,
            functions,
            capabilities,
            private,
        }
    }
}

/// What a plugin's manifest says that no manifest may.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadManifest {
    #[error("manifest names module {named:?} but the file is {file}.wasm")]
    OtherModule { named: String, file: String },
    #[error("module name {0:?} is not an identifier")]
    ModuleName(String),
    #[error("manifest lists no functions")]
    NoFunctions,
    #[error("function name {0:?} is not an identifier")]
    FunctionName(String),
    #[error("function {0:?} is listed twice")]
    Twice(String),
}

impl Manifest {
    /// Check the manifest of the plugin loaded from a file named
    /// `<expected_module>.wasm`.
    pub fn validate(&self, expected_module: &str) -> Result<(), BadManifest> {
        if self.module != expected_module {
            return Err(BadManifest::OtherModule {
                named: self.module.clone(),
                file: expected_module.to_string(),
            });
        }
        if !is_identifier(&self.module) {
            return Err(BadManifest::ModuleName(self.module.clone()));
        }
        if self.functions.is_empty() {
            return Err(BadManifest::NoFunctions);
        }
        let mut seen = std::collections::HashSet::new();
        for f in self.functions.iter().chain(&self.private) {
            if !is_identifier(&f.name) {
                return Err(BadManifest::FunctionName(f.name.clone()));
            }
            if !seen.insert(&f.name) {
                return Err(BadManifest::Twice(f.name.clone()));
            }
        }
        Ok(())
    }

    /// The public function `name`: what a job may call.
    pub fn function(&self, name: &str) -> Option<&FunctionDoc> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// The private function `name` (`_core`): what only the agent calls.
    pub fn private_function(&self, name: &str) -> Option<&FunctionDoc> {
        self.private.iter().find(|f| f.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(module: &str, functions: &[&str]) -> Manifest {
        Manifest {
            module: module.into(),
            version: "1".into(),
            functions: functions
                .iter()
                .map(|n| FunctionDoc {
                    name: n.to_string(),
                    doc: String::new(),
                    args: vec![],
                })
                .collect(),
            capabilities: vec![],
            private: vec![],
        }
    }

    #[test]
    fn lying_module_names_are_refused() {
        assert!(manifest("test", &["ping"]).validate("test").is_ok());
        let err = manifest("cmd", &["run"]).validate("test").unwrap_err();
        assert_eq!(
            err.to_string(),
            "manifest names module \"cmd\" but the file is test.wasm"
        );
    }

    #[test]
    fn function_names_are_checked() {
        let why = |funs: &[&str]| manifest("m", funs).validate("m").unwrap_err();
        assert_eq!(why(&["a", "a"]), BadManifest::Twice("a".into()));
        assert_eq!(why(&["a.b"]), BadManifest::FunctionName("a.b".into()));
        assert_eq!(why(&[]), BadManifest::NoFunctions);
    }

    #[test]
    fn private_functions_are_kept_apart_from_what_jobs_see() {
        let wit = |names: &[&str]| wit::Manifest {
            module: "grains".into(),
            version: "1".into(),
            functions: names
                .iter()
                .map(|n| wit::FunctionInfo {
                    name: n.to_string(),
                    doc: String::new(),
                    args: vec![],
                })
                .collect(),
            capabilities: vec![],
        };
        let m = Manifest::from(wit(&["items", "_core"]));
        assert_eq!(m.functions.len(), 1);
        assert!(m.function("_core").is_none(), "a job never finds it");
        assert!(m.private_function("_core").is_some());
        assert!(m.private_function("items").is_none());
        let back = wit::Manifest::from(&m);
        assert_eq!(
            back.functions.len(),
            1,
            "plugins listing modules never see it"
        );
        // Twice across both lists is still twice.
        let mut twice = Manifest::from(wit(&["items", "_core"]));
        twice.private.push(twice.private[0].clone());
        assert_eq!(
            twice.validate("grains"),
            Err(BadManifest::Twice("_core".into()))
        );
        // Only private functions: nothing a job may call.
        assert_eq!(
            Manifest::from(wit(&["_core"])).validate("grains"),
            Err(BadManifest::NoFunctions)
        );
    }
}
