//! SLS files to high data, as Salt's `BaseHighState.render_state` and
//! `render_highstate` build it: each SLS fetched from `salt://` and
//! rendered, its `include`s rendered first (relative `.name` too; an
//! include or a mod that is a glob stands for the SLS names `salt://`
//! lists that it matches), its
//! `extend` and `exclude` set aside for the compiler, short declarations
//! (`file.managed:`) split, `__sls__`/`__env__` added, and every state
//! given its definition order (`state_auto_order`).

use serde_json::{Value, json};

use crate::compile::Obj;
use crate::py::{first_key, py_str, repr};
use crate::render::{self, Rendered};

/// One highstate being built.
pub struct Builder<'a> {
    pub ctx: &'a render::Context,
    /// The environments this run renders (the keys of Salt's `matches`).
    matches: Vec<String>,
    /// `cp.list_states` of each environment asked so far.
    avail: std::collections::BTreeMap<String, Vec<String>>,
    /// `saltenv:sls` already rendered.
    mods: Vec<String>,
    /// The next `order` `state_auto_order` gives.
    iorder: i64,
    pub high: Obj,
}

impl<'a> Builder<'a> {
    /// A build of the environments `matches`.
    pub fn new(ctx: &'a render::Context, matches: Vec<String>) -> Self {
        Self {
            ctx,
            matches,
            avail: Default::default(),
            mods: Vec::new(),
            iorder: 10000,
            high: Obj::new(),
        }
    }

    /// `render_highstate({saltenv: mods})`: the errors, in Salt's words.
    pub fn render(&mut self, saltenv: &str, mods: &[String]) -> Vec<String> {
        let mut all = Vec::new();
        for sls_match in mods {
            let statefiles = match self.available(saltenv, sls_match) {
                Ok(found) => found,
                Err(e) => {
                    all.push(e);
                    continue;
                }
            };
            for sls in &statefiles {
                if self.mods.contains(&format!("{saltenv}:{sls}")) {
                    continue;
                }
                let (state, mut errors) = self.render_state(sls, saltenv);
                if let Some(state) = state {
                    merge_included(&mut self.high, state, &mut errors);
                }
                let this = format!("SLS {sls_match} in saltenv");
                for e in errors.iter_mut() {
                    if e.contains("is not available") && e.contains(&this) {
                        *e = format!("No matching sls found for '{sls_match}' in env '{saltenv}'");
                    }
                }
                all.extend(errors);
            }
        }
        if let Some(Value::Array(ext)) = self.high.get_mut("__extend__") {
            let mut seen: Vec<Value> = Vec::new();
            for item in ext.drain(..) {
                if let Value::Object(o) = item {
                    for (k, v) in o {
                        let one = json!({ k: v });
                        if !seen.contains(&one) {
                            seen.push(one);
                        }
                    }
                }
            }
            *ext = seen;
        }
        all
    }

    /// `render_state`: one SLS and what it includes.
    fn render_state(&mut self, sls: &str, saltenv: &str) -> (Option<Obj>, Vec<String>) {
        let mut errors = Vec::new();
        let Some(Rendered { data, source }) = (match render::sls(self.ctx, sls, saltenv) {
            Ok(r) => r,
            Err(e) => {
                errors.push(e);
                self.mods.push(format!("{saltenv}:{sls}"));
                return (None, errors);
            }
        }) else {
            errors.push(format!(
                "Specified SLS {sls} in saltenv {saltenv} is not available on the salt master or \
                 through a configured fileserver"
            ));
            return (None, errors);
        };
        self.mods.push(format!("{saltenv}:{sls}"));
        let mut state = match data {
            Value::Object(o) if !o.is_empty() => o,
            Value::Null => return (Some(Obj::new()), errors),
            Value::Object(_) => return (Some(Obj::new()), errors),
            Value::Bool(false) => return (Some(Obj::new()), errors),
            Value::Array(a) if a.is_empty() => return (Some(Obj::new()), errors),
            Value::String(s) if s.is_empty() => return (Some(Obj::new()), errors),
            _ => {
                errors.push(format!("SLS {sls} does not render to a dictionary"));
                return (None, errors);
            }
        };
        let mut include = Vec::new();
        if let Some(inc) = state.get("include") {
            match inc {
                Value::Array(_) => {
                    if let Some(Value::Array(i)) = state.shift_remove("include") {
                        include = i;
                    }
                }
                _ => errors.push(format!(
                    "Include Declaration in SLS {sls} is not formed as a list"
                )),
            }
        }
        handle_extend(&mut state, sls, saltenv, &mut errors);
        handle_exclude(&mut state, sls, &mut errors);
        handle_state_decls(&mut state, sls, saltenv, &mut errors);
        for inc in include {
            self.include(&mut state, inc, sls, saltenv, &source, &mut errors);
        }
        self.handle_iorder(&mut state);
        (Some(state), errors)
    }

    fn include(
        &mut self,
        state: &mut Obj,
        inc: Value,
        sls: &str,
        saltenv: &str,
        source: &str,
        errors: &mut Vec<String>,
    ) {
        let (env_key, mut inc_sls) = match inc {
            Value::Object(o) => match o.into_iter().next_back() {
                Some((k, v)) => (k, py_str(&v)),
                None => return,
            },
            other => (saltenv.to_string(), py_str(&other)),
        };
        if !self.ctx.envs.contains(&env_key) {
            errors.push(format!(
                "Nonexistent saltenv '{env_key}' found in include of '{inc_sls}' within SLS '{saltenv}:{sls}'"
            ));
            return;
        }
        if inc_sls.starts_with('.') {
            let levels = inc_sls.chars().take_while(|c| *c == '.').count();
            let rest = inc_sls[levels..].to_string();
            let mut comps: Vec<&str> = sls.split('.').collect();
            if source.ends_with("/init.sls") {
                comps.push("init");
            }
            if levels > comps.len() {
                errors.push(format!(
                    "Attempted relative include of '{inc_sls}' within SLS '{saltenv}:{sls}' goes beyond top level package "
                ));
                return;
            }
            let mut parts: Vec<String> = comps[..comps.len() - levels]
                .iter()
                .map(|s| s.to_string())
                .collect();
            parts.push(rest);
            inc_sls = parts.join(".");
        }
        let r_env = match self.resolve(&env_key, &inc_sls, saltenv) {
            Ok(env) => env,
            Err(e) => return errors.push(e),
        };
        // Salt matches the names in the including SLS's own environment.
        let targets = match self.available(saltenv, &inc_sls) {
            Ok(found) => found,
            Err(e) => {
                errors.push(e);
                return;
            }
        };
        for target in targets {
            self.include_one(state, &target, &r_env, sls, errors);
        }
    }

    /// The environment an include of `inc_sls` (from `env_key`, in an SLS
    /// of `saltenv`) is rendered in, as `render_state` resolves it: the
    /// one named, when this run renders it or it lists the SLS; of
    /// `_xenv`, the one of this run that lists it. `Err`: Salt's words for
    /// none, or for more than one.
    fn resolve(&mut self, env_key: &str, inc_sls: &str, saltenv: &str) -> Result<String, String> {
        let resolved: Vec<String> = if env_key != "_xenv" {
            if self.matches.iter().any(|m| m == env_key) || self.lists(env_key, inc_sls)? {
                vec![env_key.to_string()]
            } else {
                Vec::new()
            }
        } else {
            let mut found = Vec::new();
            for aenv in self.matches.clone() {
                if self.lists(&aenv, inc_sls)? {
                    found.push(aenv);
                }
            }
            found
        };
        if resolved.len() == 1 {
            return Ok(resolved[0].clone());
        }
        if resolved.iter().any(|e| e == saltenv) {
            return Ok(saltenv.to_string());
        }
        Err(if resolved.is_empty() {
            let envs = if env_key == "_xenv" {
                self.matches.join(", ")
            } else {
                env_key.to_string()
            };
            format!(
                "Unknown include: Specified SLS {env_key}: {inc_sls} is not available on the \
                 salt master in saltenv(s): {envs} "
            )
        } else {
            format!(
                "Ambiguous include: Specified SLS {env_key}: {inc_sls} is available on the \
                 salt master in multiple available saltenvs: {}",
                resolved.join(", ")
            )
        })
    }

    /// `fnmatch.filter(self.avail[saltenv], sls_match)`: the SLS names of
    /// `saltenv` that `sls_match` matches (`cp.list_states`, listed once
    /// per build).
    fn matching(&mut self, saltenv: &str, sls_match: &str) -> Result<Vec<String>, String> {
        if !self.avail.contains_key(saltenv) {
            let states = crate::fileserver::list_states(saltenv).map_err(|e| e.to_string())?;
            self.avail.insert(saltenv.to_string(), states);
        }
        Ok(self.avail[saltenv]
            .iter()
            .filter(|s| maid_sdk::salt::fnmatch(s, sls_match))
            .cloned()
            .collect())
    }

    /// Whether `saltenv` lists an SLS `sls_match` matches.
    fn lists(&mut self, saltenv: &str, sls_match: &str) -> Result<bool, String> {
        Ok(!self.matching(saltenv, sls_match)?.is_empty())
    }

    /// The SLS names `sls_match` stands for, as Salt finds them for an
    /// include or a run's mods: `fnmatch.filter(avail, sls_match) or
    /// [sls_match]`. Only a glob can match another name than its own, so
    /// only a glob asks for the listing.
    fn available(&mut self, saltenv: &str, sls_match: &str) -> Result<Vec<String>, String> {
        if !sls_match.contains(['*', '?', '[']) {
            return Ok(vec![sls_match.to_string()]);
        }
        let found = self.matching(saltenv, sls_match)?;
        if found.is_empty() {
            return Ok(vec![sls_match.to_string()]);
        }
        Ok(found)
    }

    /// One SLS an include names, rendered (once) and merged into `state`.
    fn include_one(
        &mut self,
        state: &mut Obj,
        inc_sls: &str,
        r_env: &str,
        sls: &str,
        errors: &mut Vec<String>,
    ) {
        if self.mods.contains(&format!("{r_env}:{inc_sls}")) {
            return;
        }
        let (nstate, err) = self.render_state(inc_sls, r_env);
        if let Some(mut nstate) = nstate {
            for (item, body) in nstate.iter_mut() {
                if item.starts_with("__") {
                    continue;
                }
                if let Value::Object(b) = body {
                    let from = b
                        .entry("__sls_included_from__")
                        .or_insert_with(|| json!([]));
                    if let Value::Array(f) = from {
                        f.push(json!(sls));
                    }
                }
            }
            merge_included(state, nstate, errors);
        }
        errors.extend(err);
    }

    /// `_handle_iorder`: each state declaration without an `order` gets
    /// the next one.
    fn handle_iorder(&mut self, state: &mut Obj) {
        for (_, body) in state.iter_mut() {
            let Value::Object(body) = body else { continue };
            for (dec, run) in body.iter_mut() {
                if dec.starts_with('_') {
                    continue;
                }
                let Value::Array(run) = run else { continue };
                let found = run
                    .iter()
                    .any(|a| a.as_object().and_then(first_key).as_deref() == Some("order"));
                if !found {
                    run.push(json!({ "order": self.iorder }));
                    self.iorder += 1;
                }
            }
        }
    }
}

/// `merge_included_states`: ids must be unique across SLS files.
pub fn merge_included(high: &mut Obj, mut state: Obj, errors: &mut Vec<String>) {
    for key in ["__extend__", "__exclude__"] {
        if let Some(Value::Array(items)) = state.shift_remove(key)
            && let Value::Array(list) = high.entry(key).or_insert_with(|| json!([]))
        {
            list.extend(items);
        }
    }
    for (id, body) in &state {
        if let Some(have) = high.get(id)
            && have != body
        {
            let f = |b: &Value, k: &str| b.get(k).map(py_str).unwrap_or_default();
            errors.push(format!(
                "Detected conflicting IDs, SLS IDs need to be globally unique.\n    The conflicting \
                 ID is '{id}' and is found in SLS '{}:{}' and SLS '{}:{}'",
                f(have, "__env__"),
                f(have, "__sls__"),
                f(body, "__env__"),
                f(body, "__sls__"),
            ));
        }
    }
    for (id, body) in state {
        high.insert(id, body);
    }
}

fn split_decls(body: &mut Obj) {
    let keys: Vec<String> = body.keys().cloned().collect();
    for key in keys {
        if key.starts_with('_') || !body[&key].is_array() {
            continue;
        }
        if let Some((state, fun)) = key.split_once('.') {
            let fun = fun.split('.').next().unwrap_or(fun).to_string();
            let mut run = body.shift_remove(&key).unwrap_or(json!([]));
            if let Value::Array(r) = &mut run {
                r.push(json!(fun));
            }
            body.insert(state.to_string(), run);
        }
    }
}

fn handle_extend(state: &mut Obj, sls: &str, saltenv: &str, errors: &mut Vec<String>) {
    let Some(ext) = state.shift_remove("extend") else {
        return;
    };
    let Value::Object(mut ext) = ext else {
        errors.push(format!(
            "Extension value in SLS '{sls}' is not a dictionary"
        ));
        return;
    };
    for (name, body) in ext.iter_mut() {
        let Value::Object(body) = body else {
            errors.push(format!(
                "Extension name '{name}' in SLS '{sls}' is not a dictionary"
            ));
            continue;
        };
        body.entry("__sls__").or_insert_with(|| json!(sls));
        body.entry("__env__").or_insert_with(|| json!(saltenv));
        split_decls(body);
    }
    if let Value::Array(list) = state.entry("__extend__").or_insert_with(|| json!([])) {
        list.push(Value::Object(ext));
    }
}

fn handle_exclude(state: &mut Obj, sls: &str, errors: &mut Vec<String>) {
    let Some(exc) = state.shift_remove("exclude") else {
        return;
    };
    let items = match exc {
        Value::Array(a) => a,
        other => {
            errors.push(format!(
                "Exclude Declaration in SLS {sls} is not formed as a list"
            ));
            match other {
                Value::String(s) => s.chars().map(|c| json!(c.to_string())).collect(),
                _ => Vec::new(),
            }
        }
    };
    if let Value::Array(list) = state.entry("__exclude__").or_insert_with(|| json!([])) {
        list.extend(items);
    }
}

fn handle_state_decls(state: &mut Obj, sls: &str, saltenv: &str, errors: &mut Vec<String>) {
    let names: Vec<String> = state.keys().cloned().collect();
    for name in names {
        if name == "__extend__" || name == "__exclude__" {
            continue;
        }
        let body = state.get_mut(&name).expect("key");
        let Value::Object(body) = body else {
            if let Value::String(s) = &*body
                && let Some((st, fun)) = s.split_once('.')
            {
                let fun = fun.split('.').next().unwrap_or(fun);
                *body = json!({ "__sls__": sls, "__env__": saltenv, st: [fun] });
                continue;
            }
            errors.push(format!("ID {name} in SLS {sls} is not a dictionary"));
            continue;
        };
        let mut seen: Vec<String> = Vec::new();
        let keys: Vec<String> = body.keys().cloned().collect();
        for key in keys {
            if key.starts_with('_') || !body[&key].is_array() {
                continue;
            }
            match key.split_once('.') {
                Some((st, fun)) => {
                    if seen.iter().any(|s| s == st) {
                        errors.push(format!(
                            "ID '{name}' in SLS '{sls}' contains multiple state declarations of the same type"
                        ));
                        continue;
                    }
                    let fun = fun.split('.').next().unwrap_or(fun).to_string();
                    let mut run = body.shift_remove(&key).unwrap_or(json!([]));
                    if let Value::Array(r) = &mut run {
                        r.push(json!(fun));
                    }
                    body.insert(st.to_string(), run);
                    seen.push(st.to_string());
                }
                None => seen.push(key),
            }
        }
        body.entry("__sls__").or_insert_with(|| json!(sls));
        body.entry("__env__").or_insert_with(|| json!(saltenv));
    }
    let _ = repr;
}
