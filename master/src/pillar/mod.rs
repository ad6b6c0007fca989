//! Pillar, compiled on the master as Salt's master compiles it
//! (`salt.pillar.Pillar.compile_pillar`, without external pillars): the
//! top files of `pillar_roots`, matched with the grains of the minion's
//! verified registration; each SLS rendered `jinja|yaml` with those
//! grains, its `include`s first; everything merged with
//! `pillar_source_merging_strategy`; errors in `_errors`, in Salt's
//! words; inline pillar merged last.
//!
//! Rendering runs the operator's templates here, on the master, and
//! reads only `pillar_roots` ([`roots`]): `salt[...]` offers no module
//! that touches the master beyond `grains.get`/`grains.item` (the
//! minion's own grains).

pub mod deliver;
pub mod roots;
pub mod top;

use std::sync::Arc;

use maid_render::{Context, Source};
use maid_salt::{dictupdate, python, target};
use serde_json::{Map, Value};

pub use self::roots::Roots;

/// The master's settings for compiling pillar.
#[derive(Clone)]
pub struct Settings {
    /// `pillar_roots`. Each compile (one job's minions, one targeting)
    /// reads them afresh, as Salt does: an edit is seen by the next job,
    /// also in a long-running `maid api`.
    pub roots: maid_config::FileRoots,
    /// `pillar_source_merging_strategy`.
    pub strategy: String,
    /// `pillar_merge_lists`.
    pub merge_lists: bool,
    /// The master's `nodegroups`, for `- match: nodegroup` targets.
    pub nodegroups: Map<String, Value>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("pillar::Settings")
            .field("pillar_roots", &self.roots)
            .field("strategy", &self.strategy)
            .field("merge_lists", &self.merge_lists)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// From the master's configuration.
    pub fn from_config(master: &maid_config::MasterSettings) -> Self {
        Self {
            roots: master.pillar_roots.clone(),
            strategy: master.pillar_source_merging_strategy.name().to_string(),
            merge_lists: master.pillar_merge_lists,
            nodegroups: master.nodegroups.clone(),
        }
    }
}

/// Pillar compiled for targeting, once per minion for one reading of
/// the registry.
pub struct Cache {
    settings: Settings,
    /// The files, read once for all the minions compiled here.
    roots: Arc<Roots>,
    compiled: std::sync::Mutex<std::collections::HashMap<String, Arc<Map<String, Value>>>>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the pillar itself.
        f.write_str("pillar::Cache")
    }
}

impl Cache {
    pub fn new(settings: Settings) -> Self {
        Self {
            roots: Arc::new(Roots::new(settings.roots.clone())),
            settings,
            compiled: Default::default(),
        }
    }

    /// `id`'s pillar, compiled from `grains` the first time it is asked.
    pub fn get(&self, id: &str, grains: &Map<String, Value>) -> Arc<Map<String, Value>> {
        if let Some(hit) = self.compiled.lock().expect("pillar cache").get(id) {
            return hit.clone();
        }
        let req = Request {
            id: id.to_string(),
            grains: grains.clone(),
            ..Default::default()
        };
        let pillar = Arc::new(compile_in(&self.roots, &self.settings, &req));
        self.compiled
            .lock()
            .expect("pillar cache")
            .insert(id.to_string(), pillar.clone());
        pillar
    }
}

/// One minion's compile: who it is and what the run asked for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub id: String,
    /// The grains of its verified registration.
    pub grains: Map<String, Value>,
    /// The run's `saltenv` (`state.apply saltenv=dev`).
    pub saltenv: Option<String>,
    /// The run's `pillarenv`: only that environment's top file and SLS.
    pub pillarenv: Option<String>,
    /// Inline `pillar=`, merged over the compiled pillar.
    pub pillar_override: Map<String, Value>,
}

/// The pillar `req.id` receives, its files read now.
pub fn compile(settings: &Settings, req: &Request) -> Map<String, Value> {
    compile_in(&Arc::new(Roots::new(settings.roots.clone())), settings, req)
}

/// [`compile`] over `roots`, which keep what they read for the next
/// minion's compile (the same job's).
pub fn compile_in(roots: &Arc<Roots>, settings: &Settings, req: &Request) -> Map<String, Value> {
    Compiler::new(roots, settings, req).compile()
}

/// Salt's `Pillar` for one minion.
pub(crate) struct Compiler {
    roots: Arc<Roots>,
    id: String,
    nodegroups: Map<String, Value>,
    saltenv: Option<String>,
    pillarenv: Option<String>,
    strategy: String,
    merge_lists: bool,
    pillar_override: Map<String, Value>,
    /// The render context: the minion's grains, the files.
    ctx: Context,
}

/// Salt's `state_top`: each environment's top file.
const STATE_TOP: &str = "top.sls";

/// `compile_template`'s answer for a template that renders to nothing
/// (an empty file, YAML that is only comments): `{}`.
pub(crate) fn empty_as_map(v: Value) -> Value {
    if python::truthy(&v) {
        v
    } else {
        Value::Object(Map::new())
    }
}

impl Compiler {
    fn new(roots: &Arc<Roots>, settings: &Settings, req: &Request) -> Self {
        let source = Arc::new(Files {
            roots: roots.clone(),
            grains: req.grains.clone(),
        });
        let ctx = Context {
            grains: req.grains.clone(),
            // What the master's own `opts["pillar"]` holds while it
            // compiles: nothing.
            pillar: Map::new(),
            saltenv: req.saltenv.clone().unwrap_or_else(|| "base".into()),
            envs: roots.envs(),
            source,
            vars: Map::new(),
        };
        Self {
            roots: roots.clone(),
            id: req.id.clone(),
            nodegroups: settings.nodegroups.clone(),
            saltenv: req.saltenv.clone(),
            pillarenv: req.pillarenv.clone(),
            strategy: settings.strategy.clone(),
            merge_lists: settings.merge_lists,
            pillar_override: req.pillar_override.clone(),
            ctx,
        }
    }

    fn compile(&self) -> Map<String, Value> {
        let (tops, mut top_errors) = top::get_tops(self);
        let (top, ignored) = match top::merge_tops(&tops) {
            Ok(t) => t,
            Err(e) => {
                top_errors.push(e);
                Default::default()
            }
        };
        let matches = top::top_matches(self, &top);
        let (mut pillar, mut errors) = self.render_pillar(&matches, &ignored);
        errors.extend(top_errors);
        if !errors.is_empty() {
            pillar.insert(
                "_errors".into(),
                Value::Array(errors.into_iter().map(Value::String).collect()),
            );
        }
        if !self.pillar_override.is_empty() {
            pillar = self.merge(&pillar, &self.pillar_override);
        }
        pillar
    }

    fn merge(&self, a: &Map<String, Value>, b: &Map<String, Value>) -> Map<String, Value> {
        dictupdate::merge(a, b, &self.strategy, "jinja|yaml", self.merge_lists)
            .unwrap_or_else(|| a.clone())
    }

    /// The file SLS `sls` is read from in `saltenv`, and its text.
    fn find_sls(&self, sls: &str, saltenv: &str) -> Result<Option<(String, String)>, String> {
        maid_render::find_sls(self.ctx.source.as_ref(), sls, saltenv)
    }

    /// `compile_template` of `salt://path` in `saltenv`: `None` when it
    /// does not exist.
    fn render_file(&self, path: &str, saltenv: &str, sls: &str) -> Result<Option<Value>, String> {
        let Some(text) = self.ctx.source.fetch(path, saltenv)? else {
            return Ok(None);
        };
        self.render_text(&text, path, sls, saltenv).map(Some)
    }

    fn render_text(
        &self,
        text: &str,
        path: &str,
        sls: &str,
        saltenv: &str,
    ) -> Result<Value, String> {
        self.render_with(text, path, sls, saltenv, &Map::new())
    }

    fn render_with(
        &self,
        text: &str,
        path: &str,
        sls: &str,
        saltenv: &str,
        defaults: &Map<String, Value>,
    ) -> Result<Value, String> {
        if text.trim().is_empty() {
            return Ok(Value::Object(Map::new()));
        }
        let mut ctx = self.ctx.clone();
        ctx.vars = defaults.clone();
        maid_render::render(&ctx, text, path, sls, saltenv).map(empty_as_map)
    }

    /// `render_pillar`: each environment's matched SLS (a name is a glob
    /// over the environment's SLS), rendered and merged in order.
    fn render_pillar(
        &self,
        matches: &[(String, Vec<String>)],
        ignored: &top::Ignored,
    ) -> (Map<String, Value>, Vec<String>) {
        let mut pillar = self.pillar_override.clone();
        let mut errors = Vec::new();
        for (saltenv, pstates) in matches {
            let avail = self.avail(saltenv);
            let mut files: Vec<String> = Vec::new();
            for pattern in pstates {
                let matched: Vec<String> = match &avail {
                    Some(avail) => avail
                        .iter()
                        .filter(|s| target::fnmatch(pattern, s))
                        .cloned()
                        .collect(),
                    None => {
                        errors.push(no_env(saltenv));
                        Vec::new()
                    }
                };
                if matched.is_empty() {
                    files.push(pattern.clone());
                } else {
                    files.extend(matched);
                }
            }
            let mut mods = Mods::default();
            for sls in files {
                let mut render = Render {
                    c: self,
                    saltenv,
                    avail: avail.as_deref().map(Vec::as_slice),
                    ignored,
                    mods: &mut mods,
                    errors: &mut errors,
                };
                let state = render.pstate(&sls, &Map::new());
                if let Some(Value::Object(state)) = state {
                    pillar = self.merge(&pillar, &state);
                }
            }
        }
        (pillar, errors)
    }

    /// `self.avail[saltenv]`: the environment's SLS names; `None` for an
    /// environment Salt's `_get_envs` does not list.
    fn avail(&self, saltenv: &str) -> Option<Arc<Vec<String>>> {
        if !self.roots.envs().iter().any(|e| e == saltenv) {
            return None;
        }
        Some(self.roots.list_states(saltenv).unwrap_or_default())
    }
}

fn no_env(saltenv: &str) -> String {
    format!("No matching pillar environment for environment '{saltenv}' found")
}

/// The SLS rendered so far in one environment (Salt's `mods`): an
/// include of one of them takes its data as it was rendered.
#[derive(Default)]
struct Mods(Vec<(String, Option<Value>)>);

impl Mods {
    fn get(&self, sls: &str) -> Option<&Option<Value>> {
        self.0.iter().find(|(n, _)| n == sls).map(|(_, v)| v)
    }

    fn set(&mut self, sls: &str, v: Option<Value>) {
        match self.0.iter_mut().find(|(n, _)| n == sls) {
            Some((_, have)) => *have = v,
            None => self.0.push((sls.to_string(), v)),
        }
    }
}

/// `render_pstate`'s state for one environment.
struct Render<'a> {
    c: &'a Compiler,
    saltenv: &'a str,
    avail: Option<&'a [String]>,
    ignored: &'a top::Ignored,
    mods: &'a mut Mods,
    errors: &'a mut Vec<String>,
}

/// Deeper includes than this are an error, not a stack overflow.
const MAX_INCLUDE_DEPTH: usize = 64;

impl Render<'_> {
    /// `render_pstate(sls, saltenv, mods, defaults)`: the SLS's data,
    /// its includes merged beneath it; `None` when it is missing or
    /// failed (the reason in `errors`).
    fn pstate(&mut self, sls: &str, defaults: &Map<String, Value>) -> Option<Value> {
        self.pstate_at(sls, defaults, 0)
    }

    fn pstate_at(
        &mut self,
        sls: &str,
        defaults: &Map<String, Value>,
        depth: usize,
    ) -> Option<Value> {
        let saltenv = self.saltenv;
        let found = match self.c.find_sls(sls, saltenv) {
            Ok(found) => found,
            Err(e) => {
                tracing::error!(sls, saltenv, error = %e, "pillar SLS unreadable");
                self.errors.push(unsafe_render(sls));
                None
            }
        };
        let Some((path, text)) = found else {
            if self.ignored.contains(saltenv, sls) {
                return None;
            }
            if self.c.roots.has(saltenv) {
                self.errors.push(format!(
                    "Specified SLS '{sls}' in environment '{saltenv}' is not available on the salt master"
                ));
            }
            return None;
        };
        let state = match self.c.render_with(&text, &path, sls, saltenv, defaults) {
            Ok(v) => Some(v),
            Err(e) => {
                // Salt's `pillar_safe_render_error`: the reason goes to the
                // master's log, not to the minion.
                tracing::error!(sls, saltenv, error = %e, "pillar SLS failed to render");
                self.errors.push(unsafe_render(sls));
                None
            }
        };
        self.mods.set(sls, state.clone());
        let mut state = match state {
            Some(Value::Object(o)) if !o.is_empty() => o,
            Some(v) if python::truthy(&v) => {
                self.errors
                    .push(format!("SLS '{sls}' does not render to a dictionary"));
                return Some(v);
            }
            other => return other,
        };
        let Some(include) = state.get("include").cloned() else {
            return Some(Value::Object(state));
        };
        let Value::Array(include) = include else {
            self.errors.push(format!(
                "Include Declaration in SLS '{sls}' is not formed as a list"
            ));
            return Some(Value::Object(state));
        };
        state.shift_remove("include");
        self.mods.set(sls, Some(Value::Object(state.clone())));
        if depth >= MAX_INCLUDE_DEPTH {
            self.errors.push(format!(
                "Include Declaration in SLS '{sls}' is nested more than {MAX_INCLUDE_DEPTH} deep"
            ));
            return Some(Value::Object(state));
        }
        let from_init = path.ends_with("/init.sls");
        let mut included = self.includes(&include, sls, from_init, defaults, depth);
        included.push(state);
        let mut merged = included.remove(0);
        for s in &included {
            merged = self.c.merge(&merged, s);
        }
        Some(Value::Object(merged))
    }

    /// The data of each SLS `include` names, in order, `key`s nesting
    /// it; their errors in `errors`. A `defaults` an item gives stays for
    /// the items after it, as in Salt's loop.
    fn includes(
        &mut self,
        include: &[Value],
        sls: &str,
        from_init: bool,
        defaults: &Map<String, Value>,
        depth: usize,
    ) -> Vec<Map<String, Value>> {
        let mut defaults = defaults.clone();
        let mut included: Vec<Map<String, Value>> = Vec::new();
        let mut err: Vec<String> = Vec::new();
        for item in include {
            let (sub, key) = match item {
                Value::Object(o) => {
                    let Some((name, v)) = o.iter().next() else {
                        continue;
                    };
                    defaults = match v.get("defaults") {
                        Some(Value::Object(d)) => d.clone(),
                        _ => Map::new(),
                    };
                    (name.clone(), v.get("key").map(python::str))
                }
                other => (python::str(other), None),
            };
            for m in self.resolve(&sub, sls, from_init) {
                let nstate = match self.mods.get(&m) {
                    Some(done) => {
                        // Salt adds the errors of the last include it
                        // rendered again for one it had rendered before.
                        self.errors.extend(err.iter().cloned());
                        done.clone()
                    }
                    None => {
                        let before = self.errors.len();
                        let got = self.pstate_at(&m, &defaults, depth + 1);
                        err = self.errors[before..].to_vec();
                        got
                    }
                };
                if let Some(mut nstate) = nstate.filter(python::truthy) {
                    if let Some(key) = &key {
                        for fragment in key.rsplit(':') {
                            let mut m = Map::new();
                            m.insert(fragment.to_string(), nstate);
                            nstate = Value::Object(m);
                        }
                    }
                    if let Value::Object(o) = nstate {
                        included.push(o);
                    }
                }
            }
        }
        included
    }

    /// The SLS an `include` item names: globs over the environment's SLS
    /// (`.name` relative to the including SLS), else the name itself.
    fn resolve(&mut self, sub: &str, sls: &str, from_init: bool) -> Vec<String> {
        let Some(avail) = self.avail else {
            self.errors.push(no_env(self.saltenv));
            return vec![sub.to_string()];
        };
        let plain = sub.trim_start_matches('.').replace('/', ".");
        let mut matched: Vec<String> = avail
            .iter()
            .filter(|s| target::fnmatch(&plain, s))
            .cloned()
            .collect();
        let mut sub = sub.to_string();
        if let Some(rest) = sub.strip_prefix('.') {
            let mut parts: Vec<&str> = sls.split('.').collect();
            if !from_init {
                parts.pop();
            }
            parts.push(rest);
            sub = parts.join(".");
        }
        matched.extend(avail.iter().filter(|s| target::fnmatch(&sub, s)).cloned());
        if matched.is_empty() {
            matched.push(sub);
        }
        matched
    }
}

fn unsafe_render(sls: &str) -> String {
    format!("Rendering SLS '{sls}' failed. Please see master log for details.")
}

/// What a pillar template reads and calls: `pillar_roots`, and of
/// `salt[...]` only the minion's own grains.
struct Files {
    roots: Arc<Roots>,
    grains: Map<String, Value>,
}

impl Source for Files {
    fn fetch(&self, path: &str, saltenv: &str) -> Result<Option<String>, String> {
        match self.roots.read(path, saltenv) {
            Ok(text) => Ok(text.map(|t| t.to_string())),
            Err(e) => Err(e.to_string()),
        }
    }

    fn call(
        &self,
        fun: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> Result<Value, String> {
        let arg = |i: usize, name: &str| kwargs.get(name).or_else(|| args.get(i));
        match fun {
            "grains.get" => {
                let key = arg(0, "key").map(python::str).unwrap_or_default();
                let default = arg(1, "default")
                    .cloned()
                    .unwrap_or(Value::String(String::new()));
                let delimiter = arg(2, "delimiter").map_or(":".into(), python::str);
                Ok(maid_salt::data::traverse(&self.grains, &key, &delimiter)
                    .cloned()
                    .unwrap_or(default))
            }
            "grains.items" => Ok(Value::Object(self.grains.clone())),
            "grains.item" => Ok(Value::Object(
                args.iter()
                    .map(python::str)
                    .filter_map(|k| self.grains.get(&k).map(|v| (k.clone(), v.clone())))
                    .collect(),
            )),
            other => Err(format!(
                "'{other}' is not available: the master renders pillar and runs no execution \
                 module there (grains.get, grains.item and grains.items are)"
            )),
        }
    }
}

#[cfg(test)]
mod tests;
