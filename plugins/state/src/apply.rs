//! The functions that apply states: `state.apply`, `sls`, `highstate`,
//! `top`, `sls_id`, `single`, `test`, and `running` (what would stop a
//! run: another state run on this maid).

use maid_sdk::{Call, Error, function};
use serde_json::{Value, json};

use crate::compile::Obj;
use crate::{
    arg, call_high, env, errors, finish, graph, py, render_mods, run, split_input, states,
};

/// Salt's return when no top file selects this minion.
fn no_states(comment: &str) -> Obj {
    let mut r = Obj::new();
    r.insert(
        "no_|-states_|-states_|-None".into(),
        json!({"result": false, "comment": comment, "name": "No States", "changes": {}, "__run_num__": 0}),
    );
    r
}

/// Other state runs on this maid, in Salt's words (`state.running`).
fn others(own_jid: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(maid_sdk::host::Called::Returned {
        ret: Value::Array(active),
        ..
    }) = maid_sdk::host::call(
        "saltutil.is_running",
        &[json!("state.*")],
        &Default::default(),
    )
    else {
        return out;
    };
    for job in active {
        let jid = job.get("jid").map(py::py_str).unwrap_or_default();
        if jid == own_jid {
            continue;
        }
        out.push(format!(
            "The function \"{}\" is running as PID {} and was started at {} with jid {jid}",
            job.get("fun").map(py::py_str).unwrap_or_default(),
            job.get("pid").map(py::py_str).unwrap_or_default(),
            maid_salt::jid::jid_to_time(&jid),
        ));
    }
    out
}

/// `_check_queue`: another state run here stops this one (retcode 1).
fn conflict(call: &Call) -> Option<Result<Value, Error>> {
    if call.kwargs.get("concurrent").is_some_and(py::truthy) {
        return None;
    }
    let others = others(&call.context.jid);
    (!others.is_empty()).then(|| errors(others))
}

/// Execute the states in one or more SLS files
#[function(raw, args = ["mods", "test=null", "exclude=null", "queue=null", "**kwargs"])]
pub(crate) fn sls(call: &Call) -> Result<Value, Error> {
    if let Some(c) = conflict(call) {
        return c;
    }
    if let Some(p) = crate::pillar_failed(call, true) {
        return p;
    }
    let mods = split_input(arg(call, 0, "mods").unwrap_or(&Value::Null));
    let high = match render_mods(call, &mods) {
        Ok(h) => h,
        Err(e) => return errors(e),
    };
    let mut env = env(call, 1);
    match call_high(high, &mut env) {
        Ok(ret) => finish(ret),
        Err(e) => errors(e),
    }
}

/// Apply states: the SLS files named, or the highstate when none are
#[function(raw, name = "apply", args = ["mods=null", "**kwargs"])]
pub(crate) fn apply_(call: &Call) -> Result<Value, Error> {
    match arg(call, 0, "mods").filter(|m| !m.is_null()) {
        Some(_) => sls(call),
        None => run_highstate(call, "top.sls", 0),
    }
}

/// Apply states in test mode (state.apply test=True)
#[function(raw, args = ["*args", "**kwargs"])]
pub(crate) fn test(call: &Call) -> Result<Value, Error> {
    let mut kwargs = call.kwargs.clone();
    kwargs.insert("test".into(), json!(true));
    let call = Call {
        module: call.module,
        function: call.function.clone(),
        args: call.args.clone(),
        kwargs,
        context: call.context.clone(),
    };
    apply_(&call)
}

/// Apply the highstate: every SLS file top.sls gives this minion
#[function(raw, args = ["test=null", "queue=null", "**kwargs"])]
pub(crate) fn highstate(call: &Call) -> Result<Value, Error> {
    run_highstate(call, "top.sls", 0)
}

/// Apply the highstate of another top file
#[function(raw, args = ["topfn", "test=null", "queue=null", "**kwargs"])]
pub(crate) fn top(call: &Call) -> Result<Value, Error> {
    let topfn = arg(call, 0, "topfn").map(py::py_str).unwrap_or_default();
    run_highstate(call, &topfn, 1)
}

/// `call_highstate`: the top file's SLS files rendered and run.
fn run_highstate(call: &Call, topfn: &str, test_pos: usize) -> Result<Value, Error> {
    if let Some(c) = conflict(call) {
        return c;
    }
    if let Some(p) = crate::pillar_failed(call, true) {
        return p;
    }
    let high = match crate::show::compile_highstate(call, topfn) {
        Ok(Ok(high)) => high,
        Ok(Err(no)) => return finish(no_states(&no)),
        Err(e) => return errors(e),
    };
    let mut high = high;
    if let Some(ex) = call.kwargs.get("exclude") {
        let ex: Vec<Value> = split_input(ex).into_iter().map(Value::String).collect();
        if let Value::Array(list) = high.entry("__exclude__").or_insert_with(|| json!([])) {
            list.extend(ex);
        }
    }
    if high.is_empty() {
        return finish(no_states("No states found for this minion"));
    }
    let mut env = env(call, test_pos);
    match call_high(high, &mut env) {
        Ok(ret) => finish(ret),
        Err(e) => errors(e),
    }
}

/// Run the states of one id in the SLS files named
#[function(raw, args = ["id_", "mods", "test=null", "queue=null", "**kwargs"])]
pub(crate) fn sls_id(call: &Call) -> Result<Value, Error> {
    if let Some(c) = conflict(call) {
        return c;
    }
    if let Some(p) = crate::pillar_failed(call, true) {
        return p;
    }
    let id = arg(call, 0, "id_").map(py::py_str).unwrap_or_default();
    let mods_v = arg(call, 1, "mods").cloned().unwrap_or(Value::Null);
    let mods = split_input(&mods_v);
    let mut high = match render_mods(call, &mods) {
        Ok(h) => h,
        Err(e) => return errors(e),
    };
    let mut errs = crate::compile::verify_high(&high);
    errs.extend(crate::compile::requisite_in(&mut high));
    if !errs.is_empty() {
        return errors(errs);
    }
    let (graph, order) = match crate::order(&high) {
        Ok(x) => x,
        Err(e) => return errors(e),
    };
    let mut env = env(call, 2);
    let ret = run::Runner::new(graph, &mut env).call_id(&order, &id);
    if ret.is_empty() {
        let saltenv = call.kwargs.get("saltenv").map_or("base".into(), py::py_str);
        return Err(Error::failed(
            format!(
                "No matches for ID '{id}' found in SLS '{}' within saltenv '{saltenv}'",
                py::py_str(&mods_v)
            ),
            1,
        ));
    }
    finish(ret)
}

/// Run one state function with the arguments given
#[function(raw, args = ["fun", "name", "test=null", "queue=null", "**kwargs"])]
pub(crate) fn single(call: &Call) -> Result<Value, Error> {
    if let Some(c) = conflict(call) {
        return c;
    }
    let fun = arg(call, 0, "fun").map(py::py_str).unwrap_or_default();
    let Some((state, f)) = fun.split_once('.') else {
        return errors(vec![format!("Invalid function passed: {fun}")]);
    };
    let mut low = Obj::new();
    low.insert("state".into(), json!(state));
    low.insert("fun".into(), json!(f));
    low.insert(
        "name".into(),
        arg(call, 1, "name").cloned().unwrap_or(Value::Null),
    );
    for (k, v) in call.user_kwargs() {
        if !matches!(
            k.as_str(),
            "fun" | "name" | "test" | "queue" | "saltenv" | "pillar" | "concurrent"
        ) {
            low.insert(k.clone(), v.clone());
        }
    }
    low.insert("__id__".into(), low["name"].clone());
    let errs = states::verify(&low);
    if !errs.is_empty() {
        return errors(errs);
    }
    let mut env = env(call, 2);
    let mut graph = graph::Graph::default();
    graph.add_chunk(low);
    match graph.sorted(1.0) {
        Ok(order) => finish(run::Runner::new(graph, &mut env).run(&order)),
        Err(()) => errors(vec!["Recursive requisites were found".into()]),
    }
}

/// Other state runs on this maid, which a new one would wait for
#[function(raw, args = ["concurrent=false"])]
pub(crate) fn running(call: &Call) -> Result<Value, Error> {
    if arg(call, 0, "concurrent").is_some_and(py::truthy) {
        return Ok(json!([]));
    }
    Ok(json!(others(&call.context.jid)))
}
