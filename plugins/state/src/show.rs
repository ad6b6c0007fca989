//! The functions that show what a state run would do without running
//! it: `show_sls`, `show_low_sls`, `show_highstate`, `show_lowstate`,
//! `show_top`.

use maid_sdk::{Call, Error, function};
use serde_json::{Value, json};

use crate::compile::{self, Obj};
use crate::{arg, context, errors, highstate, order, render_mods, split_input, top};

/// The top file's matches for this minion, or the errors that stop them.
fn top_matches(call: &Call, topfn: &str) -> Result<Vec<(String, Vec<String>)>, Vec<String>> {
    let ctx = context(call);
    let saltenv = call.kwargs.get("saltenv").map(crate::py::py_str);
    let top = top::get_top(&ctx, topfn, saltenv.as_deref()).map_err(|e| vec![e])?;
    let errs = top::verify(&top);
    if !errs.is_empty() {
        return Err(errs);
    }
    let nodegroups = call
        .kwargs
        .get("__master_opts__")
        .and_then(|o| o.get("nodegroups"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let matcher = top::Matcher {
        grains: &ctx.grains,
        nodegroups: &nodegroups,
        envs: &ctx.envs,
    };
    Ok(top::matches(&top, &matcher, saltenv.as_deref()))
}

/// The highstate's high data; `Ok(Err(comment))` when no top file
/// matches this minion.
pub(crate) fn compile_highstate(
    call: &Call,
    topfn: &str,
) -> Result<Result<Obj, String>, Vec<String>> {
    let matches = top_matches(call, topfn)?;
    if matches.is_empty() {
        return Ok(Err(
            "No Top file or master_tops data matches found. Please see master log for details."
                .into(),
        ));
    }
    let ctx = context(call);
    let mut b = highstate::Builder::new(&ctx, matches.iter().map(|(e, _)| e.clone()).collect());
    let mut errs = Vec::new();
    for (env, mods) in &matches {
        errs.extend(b.render(env, mods));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(Ok(b.high))
}

/// `compile_high_data`'s chunks in run order, or its errors.
fn ordered(high: &Obj) -> Result<Value, Error> {
    match order(high) {
        Ok((graph, order)) => Ok(Value::Array(
            order
                .iter()
                .map(|&i| Value::Object(graph.chunks[i].clone()))
                .collect(),
        )),
        Err(e) => errors(e),
    }
}

/// Low chunks of high data, in run order (`compile_low_chunks`).
fn low_chunks(mut high: Obj) -> Result<Value, Error> {
    let mut errs = compile::reconcile_extend(&mut high, false);
    errs.extend(compile::verify_high(&high));
    let req = compile::requisite_in(&mut high);
    errs.extend(req);
    compile::apply_exclude(&mut high);
    if !errs.is_empty() {
        return errors(errs);
    }
    ordered(&high)
}

/// The high data of the SLS files `mods` names, rendered and verified
/// (`render_highstate` then `verify_high`, as `show_sls` and
/// `show_low_sls` do), or the errors that stop it.
fn verified_mods(call: &Call) -> Result<Obj, Vec<String>> {
    let mods = split_input(arg(call, 0, "mods").unwrap_or(&Value::Null));
    let high = render_mods(call, &mods)?;
    let errs = compile::verify_high(&high);
    if errs.is_empty() { Ok(high) } else { Err(errs) }
}

/// Display the state data from the SLS files named, as high data
#[function(raw, args = ["mods", "test=null", "queue=null", "**kwargs"])]
pub(crate) fn show_sls(call: &Call) -> Result<Value, Error> {
    if let Some(p) = crate::pillar_failed(call, false) {
        return p;
    }
    match verified_mods(call) {
        Ok(high) => Ok(Value::Object(high)),
        Err(e) => errors(e),
    }
}

/// Display the low state data of the SLS files named
#[function(raw, args = ["mods", "test=null", "queue=null", "**kwargs"])]
pub(crate) fn show_low_sls(call: &Call) -> Result<Value, Error> {
    if let Some(p) = crate::pillar_failed(call, false) {
        return p;
    }
    match verified_mods(call) {
        Ok(high) => ordered(&high),
        Err(e) => errors(e),
    }
}

/// Display the highstate's high data
#[function(raw, args = ["queue=null", "**kwargs"])]
pub(crate) fn show_highstate(call: &Call) -> Result<Value, Error> {
    if let Some(p) = crate::pillar_failed(call, false) {
        return p;
    }
    match compile_highstate(call, "top.sls") {
        Ok(Ok(high)) => Ok(Value::Object(high)),
        Ok(Err(_)) => Ok(json!({})),
        Err(e) => errors(e),
    }
}

/// Display the highstate's low data, in run order
#[function(raw, args = ["queue=null", "**kwargs"])]
pub(crate) fn show_lowstate(call: &Call) -> Result<Value, Error> {
    if let Some(p) = crate::pillar_failed(call, false) {
        return p;
    }
    match compile_highstate(call, "top.sls") {
        Ok(Ok(high)) => low_chunks(high),
        Ok(Err(_)) => Ok(json!([])),
        Err(e) => errors(e),
    }
}

/// Display the SLS files the top file gives this minion
#[function(raw, args = ["queue=null", "**kwargs"])]
pub(crate) fn show_top(call: &Call) -> Result<Value, Error> {
    if let Some(p) = crate::pillar_failed(call, false) {
        return p;
    }
    match top_matches(call, "top.sls") {
        Ok(m) => Ok(Value::Object(
            m.into_iter().map(|(e, s)| (e, json!(s))).collect(),
        )),
        Err(e) => errors(e),
    }
}
