//! The `state` Salt module as a maid plugin: SLS files rendered, compiled
//! and applied inside the sandbox. This plugin holds only `fetch` (the
//! SLS files, from `salt://`) and `call` (the execution functions each
//! state uses); every change is made by the module whose grant allows it.

mod apply;
mod clock;
mod compile;
mod fileserver;
mod graph;
mod highstate;
mod listen;
mod py;
mod render;
mod run;
mod show;
mod states;
mod top;

use maid_sdk::{Call, Capability, Error, Function, Plugin, export_plugin, host};
use serde_json::{Value, json};

use compile::Obj;

/// `salt.utils.args.split_input`: a comma-separated string or a list.
pub(crate) fn split_input(v: &Value) -> Vec<String> {
    match v {
        Value::Array(a) => a.iter().map(py::py_str).collect(),
        Value::Null => Vec::new(),
        other => py::py_str(other)
            .split(',')
            .map(|s| s.trim().to_string())
            .collect(),
    }
}

/// An argument by position or keyword.
pub(crate) fn arg<'a>(call: &'a Call, pos: usize, name: &str) -> Option<&'a Value> {
    call.kwargs.get(name).or_else(|| call.args.get(pos))
}

pub(crate) fn is_test(call: &Call, pos: usize) -> bool {
    arg(call, pos, "test").is_some_and(py::truthy)
}

/// The pillar the run sees: what the job carries for this minion (the
/// master compiled it, with any inline `pillar=` merged), and inline
/// `pillar=` over it where no master did (`maid call`).
pub(crate) fn job_pillar(call: &Call) -> Result<serde_json::Map<String, Value>, Error> {
    let mut pillar = host::pillar()?;
    if let Some(Value::Object(inline)) = call.kwargs.get("pillar") {
        maid_salt::dictupdate::update(&mut pillar, inline, false);
    }
    Ok(pillar)
}

/// `_get_pillar_errors`: a run stops on a pillar that failed to compile
/// (unless `force=True`): a run's return is Salt's list (retcode 5); a
/// show function fails as Salt's `CommandExecutionError` does. A pillar
/// this plugin may not read stops it too.
pub(crate) fn pillar_failed(call: &Call, run: bool) -> Option<Result<Value, Error>> {
    if call.kwargs.get("force").is_some_and(py::truthy) {
        return None;
    }
    let pillar = match job_pillar(call) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    let errors = pillar.get("_errors").filter(|e| py::truthy(e))?;
    if !run {
        return Some(Err(Error::failed("ERROR: Pillar failed to render", 1)));
    }
    let mut list = vec![json!(
        "Pillar failed to render with the following messages:"
    )];
    match errors {
        Value::Array(a) => list.extend(a.iter().cloned()),
        other => list.push(other.clone()),
    }
    host::set_retcode(5);
    Some(Ok(Value::Array(list)))
}

pub(crate) fn context(call: &Call) -> render::Context {
    let pillar = job_pillar(call).unwrap_or_default();
    // Salt's `_get_envs`: base, then what the master's file server has
    // (the signed job's `__master_opts__`, or `maid call --local`'s own
    // file_roots).
    let mut envs = vec!["base".to_string()];
    let listed = call
        .kwargs
        .get("__master_opts__")
        .and_then(|o| o.get("envs"))
        .and_then(Value::as_array);
    for env in listed.into_iter().flatten().filter_map(Value::as_str) {
        if !envs.iter().any(|e| e == env) {
            envs.push(env.to_string());
        }
    }
    render::context(
        host::grains(),
        pillar,
        call.kwargs
            .get("saltenv")
            .filter(|v| py::truthy(v))
            .map_or("base".into(), py::py_str),
        envs,
    )
}

/// A compile error's return: Salt's list of messages, retcode 1.
pub(crate) fn errors(list: Vec<String>) -> Result<Value, Error> {
    host::set_retcode(1);
    Ok(json!(list))
}

/// `State.call_high`: high data run; a list of errors if it does not compile.
pub(crate) fn call_high(mut high: Obj, env: &mut states::Env) -> Result<Obj, Vec<String>> {
    let mut errs = compile::reconcile_extend(&mut high, false);
    errs.extend(compile::verify_high(&high));
    if !errs.is_empty() {
        return Err(errs);
    }
    let req_errs = compile::requisite_in(&mut high);
    compile::apply_exclude(&mut high);
    if !req_errs.is_empty() {
        return Err(req_errs);
    }
    let (graph, order) = order(&high)?;
    Ok(run::Runner::new(graph, env).run(&order))
}

/// `compile_high_data`: the chunks as a graph and the order they run in.
pub(crate) fn order(high: &Obj) -> Result<(graph::Graph, Vec<usize>), Vec<String>> {
    let mut graph = graph::Graph::default();
    for mut chunk in compile::chunks(high) {
        reconcile_watch(&mut chunk);
        graph.add_chunk(chunk);
    }
    let mut errs = Vec::new();
    let mut cap: i64 = 1;
    for idx in 0..graph.chunks.len() {
        if let Some(e) = graph.add_requisites(idx) {
            errs.push(e);
        } else if let Some(o) = graph.chunks[idx].get("order").and_then(Value::as_i64)
            && o > cap - 1
            && o > 0
        {
            cap = o + 100;
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    match graph.sorted(cap as f64) {
        Ok(order) => Ok((graph, order)),
        Err(()) => Err(vec![format!(
            "Recursive requisites were found: {}",
            graph.cycles()
        )]),
    }
}

/// `_reconcile_watch_req`: `watch` is `require` for a state without
/// `mod_watch`.
fn reconcile_watch(chunk: &mut Obj) {
    let state = chunk.get("state").map(py::py_str).unwrap_or_default();
    if states::has_mod_watch(&state) {
        return;
    }
    for (from, to) in [("watch", "require"), ("watch_any", "require_any")] {
        if let Some(Value::Array(w)) = chunk.shift_remove(from)
            && let Value::Array(r) = chunk.entry(to).or_insert_with(|| json!([]))
        {
            r.extend(w);
        }
    }
}

/// `_set_retcode`: 2 when a state failed.
pub(crate) fn finish(ret: Obj) -> Result<Value, Error> {
    let failed = ret
        .values()
        .any(|r| r.get("result") == Some(&Value::Bool(false)));
    if failed || ret.is_empty() {
        host::set_retcode(2);
    }
    Ok(Value::Object(ret))
}

pub(crate) fn env(call: &Call, test_pos: usize) -> states::Env {
    states::Env {
        test: is_test(call, test_pos),
        grains: host::grains(),
        calls: Vec::new(),
        mod_init: Vec::new(),
        pkg_refresh: false,
    }
}

/// Render SLS files into high data, with `exclude=` added.
pub(crate) fn render_mods(call: &Call, mods: &[String]) -> Result<Obj, Vec<String>> {
    let ctx = context(call);
    let mut b = highstate::Builder::new(&ctx, vec![ctx.saltenv.clone()]);
    let errs = b.render(&ctx.saltenv, mods);
    if !errs.is_empty() {
        return Err(errs);
    }
    let mut high = b.high;
    if let Some(ex) = call.kwargs.get("exclude") {
        let ex: Vec<Value> = match ex {
            Value::Array(a) => a.clone(),
            other => split_input(other).into_iter().map(Value::String).collect(),
        };
        if let Value::Array(list) = high.entry("__exclude__").or_insert_with(|| json!([])) {
            list.extend(ex);
        }
    }
    Ok(high)
}

/// The state plugin.
struct StatePlugin;

impl Plugin for StatePlugin {
    const MODULE: &'static str = "state";
    const VERSION: &'static str = "0.1.0";
    const CAPABILITIES: &'static [Capability] = &[Capability::Fetch];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            apply::apply_,
            apply::sls,
            apply::highstate,
            apply::top,
            apply::sls_id,
            apply::single,
            apply::test,
            apply::running,
            show::show_sls,
            show::show_low_sls,
            show::show_highstate,
            show::show_lowstate,
            show::show_top,
        ]
    }
}

export_plugin!(StatePlugin);
