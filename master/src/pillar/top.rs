//! The pillar top file, as Salt's `Pillar.get_tops`, `merge_tops` and
//! `top_matches` read it: every environment's `top.sls` (or only the
//! run's `pillarenv`), the SLS its `include` names rendered as further
//! top files, targets merged across them (a later target overwrites an
//! earlier one of the same name, `order` sorts them), and the SLS names
//! of each environment whose targets select the minion.

use maid_salt::python;
use maid_salt::target::confirm_top;
use serde_json::{Map, Value};

use super::{Compiler, empty_as_map};

/// One environment's top data: target → its items, in order.
pub type Targets = Vec<(String, Vec<Value>)>;

/// `get_tops`: the top files by environment, and the errors in Salt's
/// words.
pub(super) fn get_tops(c: &Compiler) -> (Vec<(String, Vec<Value>)>, Vec<String>) {
    let mut tops: Vec<(String, Vec<Value>)> = Vec::new();
    let mut errors = Vec::new();
    let saltenvs: Vec<String> = match &c.pillarenv {
        Some(env) if c.roots.roots().get(env).is_empty() => Vec::new(),
        Some(env) => vec![env.clone()],
        None if c.strategy == "none" => {
            let only = c.saltenv.clone().unwrap_or_else(|| "base".into());
            c.roots.envs().into_iter().filter(|e| *e == only).collect()
        }
        None => c.roots.envs(),
    };
    // One failing top file ends the gathering, as Salt's one `try`
    // around the loop does.
    for env in &saltenvs {
        match c.render_file(super::STATE_TOP, env, "") {
            Ok(Some(data)) => push(&mut tops, env, data),
            Ok(None) => {}
            Err(e) => {
                errors.push(format!(
                    "Rendering Primary Top file failed, render error:\n{e}"
                ));
                break;
            }
        }
    }
    // The includes of those first top files, each rendered once; their
    // own includes are not followed.
    let mut include: Vec<(String, Vec<String>)> = Vec::new();
    for (env, ctops) in &mut tops {
        for ctop in ctops.iter_mut() {
            let Value::Object(o) = ctop else { continue };
            let Some(inc) = o.shift_remove("include") else {
                continue;
            };
            let names: Vec<String> = match inc {
                Value::Array(items) => items.iter().map(python::str).collect(),
                Value::Object(m) => m.keys().cloned().collect(),
                Value::String(s) => s.chars().map(String::from).collect(),
                _ => Vec::new(),
            };
            match include.iter_mut().find(|(e, _)| e == env) {
                Some((_, list)) => list.extend(names),
                None => include.push((env.clone(), names)),
            }
        }
    }
    for (env, names) in include {
        let mut done: Vec<String> = Vec::new();
        for sls in names {
            if done.contains(&sls) {
                continue;
            }
            let rendered = match c.find_sls(&sls, &env) {
                Ok(Some((path, text))) => c.render_text(&text, &path, "", &env),
                Ok(None) => Ok(Value::Object(Map::new())),
                Err(e) => Err(e),
            };
            match rendered {
                Ok(data) => push(&mut tops, &env, empty_as_map(data)),
                Err(e) => errors.push(format!(
                    "Rendering Top file {sls} failed, render error:\n{e}"
                )),
            }
            done.push(sls);
        }
    }
    (tops, errors)
}

fn push(tops: &mut Vec<(String, Vec<Value>)>, env: &str, data: Value) {
    match tops.iter_mut().find(|(e, _)| e == env) {
        Some((_, list)) => list.push(data),
        None => tops.push((env.to_string(), vec![data])),
    }
}

/// What `merge_tops` keeps besides the targets: the SLS names marked
/// `ignore_missing`, by environment.
#[derive(Default)]
pub struct Ignored(pub Vec<(String, Vec<String>)>);

impl Ignored {
    pub fn contains(&self, saltenv: &str, sls: &str) -> bool {
        self.0
            .iter()
            .any(|(e, names)| e == saltenv && names.iter().any(|n| n == sls))
    }
}

/// The merged top: environment → targets.
pub type Top = Vec<(String, Targets)>;

/// `merge_tops` then `sort_top_targets`. `Err` where Salt's raises the
/// `TypeError` that `get_top` reports.
pub(super) fn merge_tops(tops: &[(String, Vec<Value>)]) -> Result<(Top, Ignored), String> {
    const MALFORMED: &str = "Error encountered while rendering pillar top file.";
    // Each environment's targets, and the `order` of each target.
    type Orders = Vec<(String, i64)>;
    let mut top: Vec<(String, Targets, Orders)> = Vec::new();
    let mut ignored = Ignored::default();
    for (_, ctops) in tops {
        for ctop in ctops {
            let Value::Object(ctop) = ctop else {
                return Err(MALFORMED.into());
            };
            for (saltenv, targets) in ctop {
                if saltenv == "include" {
                    continue;
                }
                let Value::Object(targets) = targets else {
                    return Err(MALFORMED.into());
                };
                let at = match top.iter().position(|(e, ..)| e == saltenv) {
                    Some(i) => i,
                    None => {
                        top.push((saltenv.clone(), Vec::new(), Vec::new()));
                        top.len() - 1
                    }
                };
                for (tgt, comps) in targets {
                    let comps: Vec<Value> = match comps {
                        Value::Array(a) => a.clone(),
                        // Iterating a string visits its characters.
                        Value::String(s) => s.chars().map(|c| Value::String(c.into())).collect(),
                        _ => return Err(MALFORMED.into()),
                    };
                    let (mut items, order, ignore) = target_items(&comps);
                    if ignore {
                        let names: Vec<String> = items
                            .iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect();
                        match ignored.0.iter_mut().find(|(e, _)| e == saltenv) {
                            Some((_, list)) => list.extend(names),
                            None => ignored.0.push((saltenv.clone(), names)),
                        }
                    }
                    let (_, body, orders) = &mut top[at];
                    set(orders, tgt, order);
                    match body.iter_mut().find(|(t, _)| t == tgt) {
                        Some((_, have)) => *have = std::mem::take(&mut items),
                        None => body.push((tgt.clone(), items)),
                    }
                }
            }
        }
    }
    let sorted = top
        .into_iter()
        .map(|(env, mut body, orders)| {
            let order = |t: &str| orders.iter().find(|(n, _)| n == t).map_or(0, |(_, o)| *o);
            body.sort_by_key(|(t, _)| order(t));
            (env, body)
        })
        .filter(|(_, body): &(String, Targets)| !body.is_empty())
        .collect();
    Ok((sorted, ignored))
}

fn set(orders: &mut Vec<(String, i64)>, tgt: &str, order: i64) {
    match orders.iter_mut().find(|(t, _)| t == tgt) {
        Some((_, o)) => *o = order,
        None => orders.push((tgt.to_string(), order)),
    }
}

/// One target's items as `merge_tops` keeps them: its `match` items
/// first, then its SLS names once each; its `order` (0 unless an item
/// says; a word Python's `int` cannot read is 0); `ignore_missing`.
fn target_items(comps: &[Value]) -> (Vec<Value>, i64, bool) {
    let mut matches = Vec::new();
    let mut states: Vec<Value> = Vec::new();
    let mut order = 0;
    let mut ignore = false;
    for comp in comps {
        match comp {
            Value::Object(o) => {
                if o.contains_key("match") {
                    matches.push(comp.clone());
                }
                if let Some(v) = o.get("order") {
                    order = python_int(v).unwrap_or(0);
                }
                if o.get("ignore_missing").is_some_and(python::truthy) {
                    ignore = true;
                }
            }
            Value::String(s) if !states.iter().any(|v| v.as_str() == Some(s)) => {
                states.push(comp.clone());
            }
            _ => {}
        }
    }
    matches.extend(states);
    (matches, order, ignore)
}

/// Python's `int(v)` where it does not raise.
fn python_int(v: &Value) -> Option<i64> {
    match v {
        Value::Bool(b) => Some(i64::from(*b)),
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f.trunc() as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// `top_matches`: by environment, the SLS names of the targets that
/// select this minion, each once.
pub(super) fn top_matches(c: &Compiler, top: &Top) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (env, body) in top {
        if c.pillarenv.as_ref().is_some_and(|p| p != env) {
            continue;
        }
        for (tgt, data) in body {
            if !confirm_top(tgt, data, &c.id, &c.ctx.grains, &c.nodegroups) {
                continue;
            }
            let at = match out.iter().position(|(e, _)| e == env) {
                Some(i) => i,
                None => {
                    out.push((env.clone(), Vec::new()));
                    out.len() - 1
                }
            };
            for item in data {
                if let Value::String(s) = item
                    && !out[at].1.contains(s)
                {
                    out[at].1.push(s.clone());
                }
            }
        }
    }
    out
}
