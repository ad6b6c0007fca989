//! The top file: which SLS files apply to this minion, as Salt's
//! `BaseHighState.get_tops`, `_merge_tops_merge`, `verify_tops` and
//! `top_matches` decide. Targets are read with the targeting matchers
//! (`compound` unless a `- match:` item names another).

use maid_salt::target;
use serde_json::{Map, Value, json};

use crate::compile::Obj;
use crate::py::{py_str, truthy};
use crate::render::{self, Context};

/// `get_tops` then `merge_tops`: the merged top data; `Err` with Salt's
/// words when the top file does not render. Every environment's top file
/// is read (`ctx.envs`), unless the run asked for one `saltenv`.
pub fn get_top(ctx: &Context, topfn: &str, saltenv: Option<&str>) -> Result<Obj, String> {
    let envs: Vec<String> = match saltenv {
        Some(e) => vec![e.to_string()],
        None => ctx.envs.clone(),
    };
    let mut tops: Vec<(String, Vec<Value>)> = Vec::new();
    for env in envs {
        let data = match render::fetch(topfn, &env)? {
            Some(text) => render::render(ctx, &text, topfn, "", &env)
                .map_err(|e| format!("Rendering SLS '{env}:{topfn}' failed: {e}"))?,
            None => json!({}),
        };
        let mut data = match data {
            Value::Object(o) => o,
            Value::Null => Obj::new(),
            other => {
                return Err(format!(
                    "Top file {topfn} did not render to a dict: {}",
                    crate::py::repr(&other)
                ));
            }
        };
        data.shift_remove("include");
        tops.push((env, vec![Value::Object(data)]));
    }
    merge(tops)
}

/// `_merge_tops_merge`: `base` first and authoritative; another
/// environment's top file counts only for its own section.
fn merge(mut tops: Vec<(String, Vec<Value>)>) -> Result<Obj, String> {
    let mut top = Obj::new();
    let base = match tops.iter().position(|(e, _)| e == "base") {
        Some(i) => tops.remove(i).1,
        None => Vec::new(),
    };
    let add = |top: &mut Obj, saltenv: &str, targets: &Value| -> Result<(), String> {
        let Value::Object(targets) = targets else {
            return Err("Unable to render top file. No targets found.".into());
        };
        let section = top.entry(saltenv).or_insert_with(|| json!({}));
        if let Value::Object(section) = section {
            for (tgt, data) in targets {
                section.insert(tgt.clone(), data.clone());
            }
        }
        Ok(())
    };
    for ctop in &base {
        for (saltenv, targets) in ctop.as_object().into_iter().flatten() {
            if saltenv != "include" {
                add(&mut top, saltenv, targets)?;
            }
        }
    }
    for (cenv, ctops) in &tops {
        for ctop in ctops {
            for (saltenv, targets) in ctop.as_object().into_iter().flatten() {
                if saltenv == "include" || saltenv != cenv || top.contains_key(saltenv) {
                    continue;
                }
                add(&mut top, saltenv, targets)?;
            }
        }
    }
    Ok(top)
}

/// `verify_tops`: the structure errors, in Salt's words.
pub fn verify(top: &Obj) -> Vec<String> {
    let mut errors = Vec::new();
    for (saltenv, matches) in top {
        if saltenv == "include" {
            continue;
        }
        if saltenv.is_empty() {
            errors.push("Empty saltenv statement in top file".into());
        }
        let Value::Object(matches) = matches else {
            errors.push(format!(
                "The top file matches for saltenv {saltenv} are not formatted as a dict"
            ));
            continue;
        };
        for (m, mods) in matches {
            let Value::Array(mods) = mods else {
                errors.push(format!(
                    "Malformed topfile: state declarations for matcher {} in saltenv {} are not formed \
                     as a list (got {})",
                    crate::py::repr(&json!(m)),
                    crate::py::repr(&json!(saltenv)),
                    type_name(mods)
                ));
                continue;
            };
            for sm in mods {
                match sm {
                    Value::Object(o) => {
                        for v in o.values().filter(|v| !truthy(v)) {
                            errors.push(format!(
                                "Improperly formatted top file matcher in saltenv {}: {} file",
                                crate::py::repr(sm),
                                py_str(v)
                            ));
                        }
                    }
                    Value::String(s) if s.is_empty() => {
                        errors.push(format!("Environment {saltenv} contains an empty sls index"));
                    }
                    _ => {}
                }
            }
        }
    }
    errors
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "str",
        Value::Object(_) => "dict",
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::Array(_) => "list",
    }
}

/// What a minion matches top file targets with: its grains, and the
/// master's nodegroups (Salt's `opts["nodegroups"]`, which a minion asks
/// its master for; here the signed job's `__master_opts__`).
pub struct Matcher<'a> {
    pub grains: &'a Map<String, Value>,
    pub nodegroups: &'a Map<String, Value>,
    /// The environments there are: an `{env: sls}` item naming another
    /// is left out, as Salt's `self.avail` leaves it.
    pub envs: &'a [String],
}

/// `confirm_top` for this minion.
fn confirm(tgt: &str, data: &[Value], m: &Matcher) -> bool {
    let id = m.grains.get("id").map(py_str).unwrap_or_default();
    target::confirm_top(tgt, data, &id, m.grains, m.nodegroups)
}

/// `top_matches`: the SLS files for this minion, by environment.
pub fn matches(top: &Obj, m: &Matcher, saltenv: Option<&str>) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (env, body) in top {
        if saltenv.is_some_and(|s| s != env) {
            continue;
        }
        for (tgt, data) in body.as_object().into_iter().flatten() {
            filter(env, tgt, data, m, &mut out);
        }
    }
    out
}

fn entry<'a>(out: &'a mut Vec<(String, Vec<String>)>, env: &str) -> &'a mut Vec<String> {
    if let Some(i) = out.iter().position(|(e, _)| e == env) {
        return &mut out[i].1;
    }
    out.push((env.to_string(), Vec::new()));
    &mut out.last_mut().expect("pushed").1
}

fn filter(env: &str, tgt: &str, data: &Value, m: &Matcher, out: &mut Vec<(String, Vec<String>)>) {
    let data = match data {
        Value::String(s) => vec![json!(s)],
        Value::Array(a) => a.clone(),
        _ => return,
    };
    if !confirm(tgt, &data, m) {
        return;
    }
    entry(out, env);
    for item in data {
        if let Some(Value::Object(sub)) = item.get("subfilter") {
            for (k, d) in sub {
                filter(env, k, d, m, out);
            }
        }
        match item {
            Value::String(s) => entry(out, env).push(s),
            Value::Object(o) => {
                if let Some((k, v)) = o.into_iter().next_back()
                    && m.envs.contains(&k)
                {
                    entry(out, &k).push(py_str(&v));
                }
            }
            _ => {}
        }
    }
}
