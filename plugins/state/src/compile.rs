//! High data to low chunks, as Salt's `State.call_high` prepares a run:
//! `extend` merged in, the data verified, `*_in` requisites and `use`
//! turned into extends, `exclude` applied, and each state declaration
//! (each of its `names`) made a chunk (`compile_high_data`).
//!
//! High data is `{id: {state: [function, {arg: value}, ...], "__sls__",
//! "__env__"}, "__extend__": [...], "__exclude__": [...]}`: JSON objects
//! keep their order as Python's dicts do, and everything here keeps it
//! the way Salt's code does (a key popped and set again moves to the end).

use serde_json::{Map, Value, json};

use crate::py::{first_key, is_dunder, py_str};

pub type Obj = Map<String, Value>;

/// Requisites a chunk names directly (`STATE_REQUISITE_KEYWORDS`).
pub const REQUISITES: &[&str] = &[
    "onchanges",
    "onchanges_any",
    "onfail",
    "onfail_any",
    "onfail_all",
    "onfail_stop",
    "prereq",
    "prerequired",
    "watch",
    "watch_any",
    "require",
    "require_any",
    "listen",
];

/// `extend` declarations merged into the states they name
/// (`reconcile_extend`); with `strict`, a name is found only under the
/// same state type.
pub fn reconcile_extend(high: &mut Obj, strict: bool) -> Vec<String> {
    let mut errors = Vec::new();
    let Some(Value::Array(ext)) = high.shift_remove("__extend__") else {
        return errors;
    };
    let excluded: Vec<String> = match high.get("__exclude__") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|e| match e {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => o.get("sls").filter(|v| py_truthy(v)).map(py_str),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    for chunk in ext {
        let Value::Object(chunk) = chunk else {
            continue;
        };
        for (name, body) in chunk {
            let Value::Object(body) = body else { continue };
            let Some(state_type) = body.keys().find(|k| !k.starts_with("__")).cloned() else {
                continue;
            };
            let mut name = name;
            let present = high
                .get(&name)
                .and_then(Value::as_object)
                .is_some_and(|o| o.contains_key(&state_type));
            if !present {
                let ids = find_name(&name, &state_type, high, strict);
                if ids.len() != 1 {
                    errors.push(format!(
                        "Cannot extend ID '{name}' in '{}:{}'. It is not part of the high state.\n\
                         This is likely due to a missing include statement or an incorrectly typed ID.\n\
                         Ensure that a state with an ID of '{name}' is available\n\
                         in environment '{}' and to SLS '{}'",
                        body.get("__env__").map_or("base".into(), py_str),
                        body.get("__sls__").map_or("base".into(), py_str),
                        body.get("__env__").map_or("base".into(), py_str),
                        body.get("__sls__").map_or("base".into(), py_str),
                    ));
                    continue;
                }
                name = ids[0].0.clone();
            }
            if body
                .get("__sls__")
                .is_some_and(|s| excluded.iter().any(|e| Value::String(e.clone()) == *s))
            {
                continue;
            }
            let Some(Value::Object(target)) = high.get_mut(&name) else {
                continue;
            };
            for (state, run) in body {
                if state.starts_with("__") {
                    continue;
                }
                extend_state(target, state, run);
            }
        }
    }
    errors
}

/// One state declaration of an extend merged into the state's own.
fn extend_state(target: &mut Obj, state: String, run: Value) {
    let Some(Value::Array(have)) = target.get_mut(&state) else {
        target.insert(state, run);
        return;
    };
    let Value::Array(run) = run else { return };
    for arg in run {
        let mut update = false;
        for h in have.iter_mut() {
            match (&arg, &*h) {
                (Value::String(_), Value::String(_)) => {
                    *h = arg.clone();
                    update = true;
                }
                (Value::Object(a), Value::Object(ho)) => {
                    let argfirst = first_key(a).unwrap_or_default();
                    if argfirst == first_key(ho).unwrap_or_default() {
                        if REQUISITES.contains(&argfirst.as_str()) {
                            let add = a.get(&argfirst).and_then(Value::as_array).cloned();
                            if let (Some(Value::Array(list)), Some(add)) =
                                (h.as_object_mut().and_then(|o| o.get_mut(&argfirst)), add)
                            {
                                list.extend(add);
                            }
                        } else {
                            *h = arg.clone();
                        }
                        update = true;
                    }
                    let hfirst = h.as_object().and_then(first_key).unwrap_or_default();
                    if argfirst == "name" && hfirst == "names" {
                        *h = arg.clone();
                    }
                }
                _ => {}
            }
        }
        if !update {
            have.push(arg);
        }
    }
}

fn py_truthy(v: &Value) -> bool {
    maid_sdk::salt::is_true(v)
}

/// `(id, state)` of the states `name` names under `state` (`find_name`).
pub fn find_name(name: &str, state: &str, high: &Obj, strict: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let has = |id: &str| {
        high.get(id)
            .and_then(Value::as_object)
            .is_some_and(|o| o.contains_key(state))
    };
    if high.contains_key(name) && (!strict || has(name)) {
        out.push((name.to_string(), state.to_string()));
    } else if state == "sls" {
        for (nid, item) in high {
            let Some(item) = item.as_object() else {
                continue;
            };
            if item.get("__sls__").and_then(Value::as_str) == Some(name)
                && let Some(first) = first_key(item)
            {
                out.push((nid.clone(), first));
            }
        }
    } else {
        for (nid, item) in high {
            let Some(Value::Array(args)) = item.as_object().and_then(|o| o.get(state)) else {
                continue;
            };
            for arg in args {
                let Some(o) = arg.as_object().filter(|o| o.len() == 1) else {
                    continue;
                };
                if o.values().next().and_then(Value::as_str) == Some(name) {
                    out.push((nid.clone(), state.to_string()));
                }
            }
        }
    }
    out
}

/// Every `(id, state)` of SLS `sls` (`find_sls_ids`).
fn find_sls_ids(sls: &str, high: &Obj) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (nid, item) in high {
        let Some(item) = item.as_object() else {
            continue;
        };
        if item.get("__sls__").and_then(Value::as_str) == Some(sls) {
            for st in item.keys().filter(|k| !k.starts_with("__")) {
                out.push((nid.clone(), st.clone()));
            }
        }
    }
    out
}

/// The names of a state declaration's single-key arguments (`state_args`).
fn state_args(id: &str, state: &str, high: &Obj) -> Vec<String> {
    let Some(Value::Array(args)) = high.get(id).and_then(|b| b.get(state)) else {
        return Vec::new();
    };
    args.iter()
        .filter_map(Value::as_object)
        .filter(|o| o.len() == 1)
        .filter_map(first_key)
        .collect()
}

/// `_verify_high`: the structure errors, in Salt's words.
pub fn verify_high(high: &Obj) -> Vec<String> {
    let mut errors = Vec::new();
    for (id, body) in high {
        if id.starts_with("__") {
            continue;
        }
        let Some(body) = body.as_object() else {
            errors.push(format!(
                "The type {id} in {} is not formatted as a dictionary",
                crate::py::repr(body)
            ));
            continue;
        };
        let sls = body.get("__sls__").map(py_str).unwrap_or_default();
        for (state, run) in body {
            if state.starts_with("__") {
                continue;
            }
            verify_state(id, &sls, state, run, &mut errors);
        }
    }
    errors
}

fn verify_state(id: &str, sls: &str, state: &str, run: &Value, errors: &mut Vec<String>) {
    let Value::Array(run) = run else {
        if run.is_null() {
            errors.push(format!(
                "ID '{id}' in SLS '{sls}' contains a short declaration ({state}) with a trailing \
                 colon. When not passing any arguments to a state, the colon must be omitted."
            ));
        } else {
            errors.push(format!(
                "State '{id}' in SLS '{sls}' is not formed as a list"
            ));
        }
        return;
    };
    let mut funs = 0;
    if state.contains('.') {
        funs += 1;
    }
    for arg in run {
        match arg {
            Value::String(f) => {
                funs += 1;
                if f.trim().contains(' ') {
                    errors.push(format!(
                        "The function \"{f}\" in state \"{id}\" in SLS \"{sls}\" has whitespace, \
                         a function with whitespace is not supported, perhaps this is an argument \
                         that is missing a \":\""
                    ));
                }
            }
            Value::Object(o) => verify_arg(id, sls, o, errors),
            _ => {}
        }
    }
    if funs == 0 {
        errors.push(format!(
            "No function declared in state '{id}' in SLS '{sls}'"
        ));
    } else if funs > 1 {
        let mut names: Vec<String> = state
            .split_once('.')
            .map(|(_, f)| f.to_string())
            .into_iter()
            .collect();
        names.extend(run.iter().filter_map(Value::as_str).map(str::to_string));
        errors.push(format!(
            "Too many functions declared in state '{id}' in SLS '{sls}'. Please choose one of \
             the following: {}",
            names.join(", ")
        ));
    }
}

fn verify_arg(id: &str, sls: &str, arg: &Obj, errors: &mut Vec<String>) {
    let Some(first) = first_key(arg) else { return };
    let value = &arg[&first];
    if first == "names" && !value.is_array() {
        errors.push(format!(
            "The 'names' argument in state '{id}' in SLS '{sls}' needs to be formed as a list"
        ));
    }
    if REQUISITES.contains(&first.as_str()) {
        match value {
            Value::Array(reqs) => {
                for req in reqs {
                    verify_requisite(id, sls, req, errors);
                }
            }
            _ => errors.push(format!(
                "The {first} statement in state '{id}' in SLS '{sls}' needs to be formed as a list"
            )),
        }
        if arg.len() != 1 {
            errors.push(format!(
                "Multiple dictionaries defined in argument of state '{id}' in SLS '{sls}'"
            ));
        }
    }
}

fn verify_requisite(id: &str, sls: &str, req: &Value, errors: &mut Vec<String>) {
    let req = match req {
        Value::String(s) => json!({ "id": s }),
        other => other.clone(),
    };
    let Some(o) = req.as_object().filter(|o| o.len() == 1) else {
        errors.push(format!(
            "Requisite declaration {} in state {id} in SLS {sls} is not formed as a single key \
             dictionary",
            crate::py::repr(&req)
        ));
        return;
    };
    let (key, val) = o.iter().next().expect("one key");
    if let Some(dot) = key.find('.') {
        errors.push(format!(
            "Invalid requisite type '{key}' in state '{id}', in SLS '{sls}'. Requisite types must \
             not contain dots, did you mean '{}'?",
            &key[..dot]
        ));
    }
    if val.is_array() || val.is_object() {
        errors.push(format!(
            "Illegal requisite \"{}\" in SLS \"{sls}\", please check your syntax.\n",
            crate::py::repr(val)
        ));
    }
}

/// `exclude` applied: the ids it names and every id of the SLS it names
/// (globs) removed (`_apply_exclude`).
pub fn apply_exclude(high: &mut Obj) {
    let Some(Value::Array(exclude)) = high.shift_remove("__exclude__") else {
        return;
    };
    let mut ex_sls = Vec::new();
    let mut ex_id = Vec::new();
    for exc in exclude {
        match exc {
            Value::String(s) => ex_sls.push(s),
            Value::Object(o) if o.len() == 1 => {
                if let Some(v) = o.get("sls") {
                    ex_sls.push(py_str(v));
                } else if let Some(v) = o.get("id") {
                    ex_id.push(py_str(v));
                }
            }
            _ => {}
        }
    }
    if !ex_sls.is_empty() {
        for (name, body) in high.iter() {
            if name.starts_with("__") {
                continue;
            }
            let sls = body.get("__sls__").map(py_str).unwrap_or_default();
            if !sls.is_empty() && ex_sls.iter().any(|p| maid_sdk::salt::fnmatch(&sls, p)) {
                ex_id.push(name.clone());
            }
        }
    }
    for id in ex_id {
        high.shift_remove(&id);
    }
}

/// `requisite_in`: every `*_in` requisite and `use`/`use_in` turned into
/// an extend of the state it names, then reconciled strictly.
pub fn requisite_in(high: &mut Obj) -> Vec<String> {
    const REQ_IN: &[&str] = &[
        "require_in",
        "watch_in",
        "onfail_in",
        "onchanges_in",
        "use",
        "use_in",
        "prereq_in",
    ];
    let mut extend = Obj::new();
    let mut errors = Vec::new();
    let ids: Vec<String> = high.keys().cloned().collect();
    for id in ids {
        let Some(body) = high.get(&id).and_then(Value::as_object).cloned() else {
            continue;
        };
        for (state, run) in &body {
            if state.starts_with("__") {
                continue;
            }
            let Value::Array(run) = run else { continue };
            for arg in run {
                let Some(arg) = arg.as_object() else { continue };
                let Some(key) = first_key(arg) else { continue };
                if !REQ_IN.contains(&key.as_str()) {
                    continue;
                }
                let ctx = InCtx {
                    id: &id,
                    state,
                    body: &body,
                    key: &key,
                };
                match &arg[&key] {
                    Value::Object(items) => ctx.single(items, &mut extend, &mut errors),
                    Value::Array(items) => ctx.list(items, high, &mut extend, &mut errors),
                    _ => {}
                }
            }
        }
    }
    high.insert(
        "__extend__".into(),
        Value::Array(extend.into_iter().map(|(k, v)| json!({ k: v })).collect()),
    );
    errors.extend(reconcile_extend(high, true));
    errors
}

/// One `*_in` requisite being read.
struct InCtx<'a> {
    id: &'a str,
    state: &'a str,
    body: &'a Obj,
    key: &'a str,
}

impl InCtx<'_> {
    fn rkey(&self) -> &str {
        self.key.split('_').next().unwrap_or(self.key)
    }

    fn sls(&self) -> String {
        self.body.get("__sls__").map(py_str).unwrap_or_default()
    }

    /// `require_in: {file: /etc/x}`.
    fn single(&self, items: &Obj, extend: &mut Obj, errors: &mut Vec<String>) {
        for (st, name) in items {
            let name = py_str(name);
            let mut st = st.clone();
            if let Some(dot) = st.find('.') {
                errors.push(format!(
                    "Invalid requisite in {}: {st} for {name} in SLS '{}'. Requisites must not \
                     contain dots, did you mean '{}'?",
                    self.rkey(),
                    self.sls(),
                    &st[..dot]
                ));
                st.truncate(dot);
            }
            self.add(extend, &name, &st);
        }
    }

    /// `require_in: [{file: /etc/x}, id]`.
    fn list(&self, items: &[Value], high: &Obj, extend: &mut Obj, errors: &mut Vec<String>) {
        let mut hinges: Vec<(String, String)> = Vec::new();
        for ind in items {
            let ind = match ind {
                Value::Object(o) => o.clone(),
                other => match resolve_bare(&py_str(other), high) {
                    Some(o) => o,
                    None => continue,
                },
            };
            let Some(pstate) = first_key(&ind) else {
                continue;
            };
            let pname = py_str(&ind[&pstate]);
            if pstate == "sls" {
                hinges = find_sls_ids(&pname, high);
            } else {
                hinges.push((pname.clone(), pstate.clone()));
            }
            if let Some(dot) = pstate.find('.') {
                errors.push(format!(
                    "Invalid requisite in {}: {pstate} for {pname}, in SLS '{}'. Requisites must \
                     not contain dots, did you mean '{}'?",
                    self.rkey(),
                    self.sls(),
                    &pstate[..dot]
                ));
            }
            for (name, st) in hinges.clone() {
                match self.key {
                    "use_in" => self.use_in(&name, &st, high, extend),
                    "use" => self.use_(&name, &st, high, extend),
                    _ => self.add(extend, &name, &st),
                }
            }
        }
    }

    fn add(&self, extend: &mut Obj, name: &str, st: &str) {
        let rkey = self.rkey().to_string();
        let entry = extend
            .entry(name.to_string())
            .or_insert_with(|| Value::Object(Obj::new()))
            .as_object_mut()
            .expect("object");
        entry.entry(st.to_string()).or_insert_with(|| json!([]));
        entry.insert(
            "__env__".into(),
            self.body.get("__env__").cloned().unwrap_or(Value::Null),
        );
        entry.insert(
            "__sls__".into(),
            self.body.get("__sls__").cloned().unwrap_or(Value::Null),
        );
        let Some(Value::Array(list)) = entry.get_mut(st) else {
            return;
        };
        let me = json!({ self.state: self.id });
        let mut found = false;
        for item in list.iter_mut() {
            if let Some(Value::Array(reqs)) = item.as_object_mut().and_then(|o| {
                let first = first_key(o)?;
                (first == rkey).then(|| o.get_mut(&first)).flatten()
            }) {
                reqs.push(me.clone());
                found = true;
            }
        }
        if !found {
            list.push(json!({ rkey: [me] }));
        }
    }

    fn use_in(&self, name: &str, st: &str, high: &Obj, extend: &mut Obj) {
        for (ext_id, req_state) in find_name(name, st, high, true) {
            let ignore = state_args(&ext_id, st, high);
            let args = own_args(high, self.id, self.state, &ignore);
            push_args(extend, &ext_id, &req_state, args);
        }
    }

    fn use_(&self, name: &str, st: &str, high: &Obj, extend: &mut Obj) {
        for (ext_id, req_state) in find_name(name, st, high, true) {
            let ignore = state_args(self.id, self.state, high);
            let args = own_args(high, &ext_id, &req_state, &ignore);
            push_args(extend, self.id, self.state, args);
        }
    }
}

/// A bare word in a `*_in` list: an id, or a `name:` of some state.
fn resolve_bare(word: &str, high: &Obj) -> Option<Obj> {
    if let Some(body) = high.get(word).and_then(Value::as_object) {
        let first = body.keys().find(|k| !k.starts_with("__"))?;
        return Some(Obj::from_iter([(first.clone(), json!(word))]));
    }
    let mut found = None;
    for (id, body) in high {
        let Some(body) = body.as_object() else {
            continue;
        };
        for (st, run) in body.iter().filter(|(k, _)| !k.starts_with("__")) {
            for j in run.as_array().into_iter().flatten() {
                if j.get("name").and_then(Value::as_str) == Some(word) {
                    found = Some(Obj::from_iter([(st.clone(), json!(id))]));
                }
            }
        }
    }
    found
}

/// The single-key arguments of `id`'s `state` that `use` copies.
fn own_args(high: &Obj, id: &str, state: &str, ignore: &[String]) -> Vec<Value> {
    let Some(Value::Array(args)) = high.get(id).and_then(|b| b.get(state)) else {
        return Vec::new();
    };
    args.iter()
        .filter(|a| {
            let Some(o) = a.as_object().filter(|o| o.len() == 1) else {
                return false;
            };
            let k = first_key(o).unwrap_or_default();
            let internal = REQUISITES.contains(&k.as_str()) || k.ends_with("_in") || k == "use";
            !(internal || ignore.contains(&k) || k == "name" || k == "names")
        })
        .cloned()
        .collect()
}

fn push_args(extend: &mut Obj, id: &str, state: &str, args: Vec<Value>) {
    let entry = extend
        .entry(id.to_string())
        .or_insert_with(|| Value::Object(Obj::new()))
        .as_object_mut()
        .expect("object");
    if let Value::Array(list) = entry.entry(state.to_string()).or_insert_with(|| json!([])) {
        list.extend(args);
    }
}

/// The low chunks of high data, in declaration order (before ordering).
pub fn chunks(high: &Obj) -> Vec<Obj> {
    let mut chunks = Vec::new();
    for (id, body) in high {
        if id.starts_with("__") {
            continue;
        }
        let Some(body) = body.as_object() else {
            continue;
        };
        for (state, run) in body {
            if is_dunder(state) {
                continue;
            }
            let Value::Array(run) = run else { continue };
            let mut chunk = Obj::new();
            chunk.insert("state".into(), json!(state));
            chunk.insert("name".into(), json!(id));
            for key in ["__sls__", "__env__", "__sls_included_from__"] {
                if let Some(v) = body.get(key) {
                    chunk.insert(key.into(), v.clone());
                }
            }
            chunk.insert("__id__".into(), json!(id));
            let (funcs, names) = read_args(run, id, &mut chunk);
            let Some(fun) = funcs.first() else { continue };
            chunks.extend(live_chunks(&chunk, fun, &names));
        }
    }
    chunks
}

/// A state declaration's functions and `names`; its other arguments
/// set on `chunk` (a `name` that is no string is the id).
fn read_args(run: &[Value], id: &str, chunk: &mut Obj) -> (Vec<String>, Vec<Value>) {
    let mut funcs: Vec<String> = Vec::new();
    let mut names: Vec<Value> = Vec::new();
    for arg in run {
        match arg {
            Value::String(f) if !funcs.contains(f) => funcs.push(f.clone()),
            Value::Object(o) => {
                for (key, val) in o {
                    match key.as_str() {
                        "names" => {
                            for n in val.as_array().into_iter().flatten() {
                                if !names.contains(n) {
                                    names.push(n.clone());
                                }
                            }
                        }
                        "state" => {}
                        "name" if !val.is_string() => {
                            chunk.insert(key.clone(), json!(id));
                        }
                        _ => {
                            chunk.insert(key.clone(), val.clone());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    (funcs, names)
}

/// The chunk itself, or one for each of its `names` (a name may carry
/// arguments of its own: `- bonjour: [{comment: ...}]`).
fn live_chunks(chunk: &Obj, fun: &str, names: &[Value]) -> Vec<Obj> {
    if names.is_empty() {
        let mut live = chunk.clone();
        live.insert("fun".into(), json!(fun));
        return vec![live];
    }
    let mut out = Vec::new();
    for (i, entry) in names.iter().enumerate() {
        let mut live = chunk.clone();
        match entry {
            Value::Object(o) if !o.is_empty() => {
                let (low_name, extra) = o.iter().next().expect("one");
                live.insert("name".into(), json!(low_name));
                for item in extra.as_array().into_iter().flatten() {
                    for (k, v) in item.as_object().into_iter().flatten() {
                        live.insert(k.clone(), v.clone());
                    }
                }
            }
            other => {
                live.insert("name".into(), other.clone());
            }
        }
        live.insert("name_order".into(), json!(i + 1));
        live.insert("fun".into(), json!(fun));
        out.push(live);
    }
    out
}
