//! `pillar_roots` as Salt's local file client serves it to the pillar
//! compiler: `salt://PATH` of an environment is the first of its
//! directories holding PATH, and `list_states` names every `.sls` under
//! them. Files are opened beneath their root (cap-std): a path that
//! climbs out of it, or a symlink pointing out, is not served.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use maid_config::FileRoots;

/// The most files a listing walks, and how deep: a loop of bind mounts
/// or a tree of millions under a root makes an error, not a hung master.
const MAX_LISTED: usize = 100_000;
const MAX_DEPTH: usize = 64;

/// Why `pillar_roots` could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RootsError {
    #[error("{path}: {error}")]
    Io { path: String, error: String },
    #[error("salt://{0} is not UTF-8 text")]
    NotText(String),
    #[error("{0}: deeper than {MAX_DEPTH} directories")]
    TooDeep(String),
    #[error("{0}: more than {MAX_LISTED} files")]
    TooMany(String),
}

fn io(path: &Path, error: std::io::Error) -> RootsError {
    RootsError::Io {
        path: path.display().to_string(),
        error: error.to_string(),
    }
}

/// Texts read, by environment and path (`None`: no root has it).
type Texts = HashMap<(String, String), Option<Arc<str>>>;

/// `pillar_roots`, with what was read kept for the run: one `maid run`
/// compiles pillar for every targeted minion from the same files.
pub struct Roots {
    roots: FileRoots,
    texts: Mutex<Texts>,
    listed: Mutex<HashMap<String, Arc<Vec<String>>>>,
}

impl Roots {
    pub fn new(roots: FileRoots) -> Self {
        Self {
            roots,
            texts: Mutex::default(),
            listed: Mutex::default(),
        }
    }

    /// The configured roots.
    pub fn roots(&self) -> &FileRoots {
        &self.roots
    }

    /// Salt's `_get_envs`: `base`, then every environment configured.
    pub fn envs(&self) -> Vec<String> {
        let mut envs = vec!["base".to_string()];
        envs.extend(
            self.roots
                .envs()
                .map(|(e, _)| e.to_string())
                .filter(|e| e != "base"),
        );
        envs
    }

    /// Whether `saltenv` has a directory (Salt's
    /// `opts["pillar_roots"].get(saltenv)`).
    pub fn has(&self, saltenv: &str) -> bool {
        !self.roots.get(saltenv).is_empty()
    }

    /// Text of `salt://path` in `saltenv`: `None` when no root has it.
    pub fn read(&self, path: &str, saltenv: &str) -> Result<Option<Arc<str>>, RootsError> {
        let key = (saltenv.to_string(), path.to_string());
        if let Some(hit) = self.texts.lock().expect("texts").get(&key) {
            return Ok(hit.clone());
        }
        let text = self.read_uncached(path, saltenv)?;
        self.texts.lock().expect("texts").insert(key, text.clone());
        Ok(text)
    }

    fn read_uncached(&self, path: &str, saltenv: &str) -> Result<Option<Arc<str>>, RootsError> {
        let Some(rel) = relative(path) else {
            return Ok(None);
        };
        for root in self.roots.get(saltenv) {
            let dir = match Dir::open_ambient_dir(root, ambient_authority()) {
                Ok(d) => d,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(root, e)),
            };
            match dir.metadata(&rel) {
                Ok(m) if m.is_file() => {}
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                // Out of the root (`..`, a symlink leading away): not
                // served, as Salt's roots serve nothing outside them.
                Err(_) => continue,
            }
            let bytes = dir.read(&rel).map_err(|e| io(&root.join(&rel), e))?;
            let text = String::from_utf8(bytes).map_err(|_| RootsError::NotText(path.into()))?;
            return Ok(Some(Arc::from(text)));
        }
        Ok(None)
    }

    /// `list_states(saltenv)`: every `.sls` as an SLS name (`a/b.sls` is
    /// `a.b`, `a/init.sls` is `a`), sorted.
    pub fn list_states(&self, saltenv: &str) -> Result<Arc<Vec<String>>, RootsError> {
        if let Some(hit) = self.listed.lock().expect("listed").get(saltenv) {
            return Ok(hit.clone());
        }
        let mut files = BTreeSet::new();
        for root in self.roots.get(saltenv) {
            walk(root, Path::new(""), 0, &mut files)?;
        }
        let states: BTreeSet<String> = files
            .iter()
            .filter_map(|p| match p.strip_suffix("/init.sls") {
                Some(dir) => Some(dir.replace('/', ".")),
                None => p.strip_suffix(".sls").map(|p| p.replace('/', ".")),
            })
            .collect();
        let states = Arc::new(states.into_iter().collect::<Vec<_>>());
        self.listed
            .lock()
            .expect("listed")
            .insert(saltenv.to_string(), states.clone());
        Ok(states)
    }
}

/// `path` as a relative path that stays beneath its root, or `None`.
fn relative(path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// The files under `root/rel`, as `/`-separated paths relative to
/// `root`. Directories reached through a symlink are not entered.
fn walk(
    root: &Path,
    rel: &Path,
    depth: usize,
    out: &mut BTreeSet<String>,
) -> Result<(), RootsError> {
    let here = root.join(rel);
    if depth > MAX_DEPTH {
        return Err(RootsError::TooDeep(here.display().to_string()));
    }
    let entries = match std::fs::read_dir(&here) {
        Ok(e) => e,
        Err(e) if depth == 0 && e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(&here, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| io(&here, e))?;
        let name = rel.join(entry.file_name());
        let kind = entry.file_type().map_err(|e| io(&root.join(&name), e))?;
        if kind.is_dir() {
            walk(root, &name, depth + 1, out)?;
        } else if kind.is_file() || (kind.is_symlink() && root.join(&name).is_file()) {
            let Some(text) = name.to_str() else { continue };
            out.insert(text.to_string());
            if out.len() > MAX_LISTED {
                return Err(RootsError::TooMany(root.display().to_string()));
            }
        }
    }
    Ok(())
}
