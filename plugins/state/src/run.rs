//! Running ordered chunks, as Salt's `State.call_chunks`, `call_chunk`,
//! `_check_requisites` and `call` do: each chunk runs when what it
//! requires has run, with the requisites' results deciding whether it
//! runs, is skipped, fails, or (watched and changed) also runs its
//! `mod_watch`. `prereq` chunks run first in test mode.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::compile::Obj;
use crate::graph::{Graph, Req, tag};
use crate::py::{py_str, truthy};
use crate::states::{self, Env};

pub struct Runner<'a> {
    pub graph: Graph,
    pub env: &'a mut Env,
    /// Returns by tag, in the order they were made.
    pub(crate) running: Obj,
    /// Test-mode returns of prerequired chunks.
    pre: HashMap<String, Obj>,
    pub(crate) run_num: u64,
    /// Salt's `failhard` option (the job's `failhard=`).
    pub failhard: bool,
}

/// How a chunk's requisites stand (`_check_requisites`).
#[derive(Debug, PartialEq)]
enum Status {
    Unmet,
    Fail,
    SkipReq,
    SkipWatch,
    Pre,
    Met,
    Onfail,
    Onchanges,
    Change,
}

impl<'a> Runner<'a> {
    pub fn new(graph: Graph, env: &'a mut Env) -> Self {
        Self {
            graph,
            env,
            running: Obj::new(),
            pre: HashMap::new(),
            run_num: 0,
            failhard: false,
        }
    }

    /// `call_high`'s run: every chunk in `order`, then the `listen`ers'
    /// `mod_watch`es; the returns by tag.
    pub fn run(mut self, order: &[usize]) -> Obj {
        let mut running = self.call_chunks(order);
        self.call_listen(order, &mut running);
        running
    }

    /// `call_chunks`: run every chunk in `order`; the returns by tag.
    pub(crate) fn call_chunks(&mut self, order: &[usize]) -> Obj {
        self.running = Obj::new();
        for &idx in order {
            if self.running.shift_remove("__FAILHARD__").is_some() {
                return std::mem::take(&mut self.running);
            }
            let t = tag(&self.graph.chunks[idx]);
            if !self.running.contains_key(&t) {
                self.call_chunk(idx, 0);
                if self.check_failhard(idx) {
                    return std::mem::take(&mut self.running);
                }
            }
        }
        self.running.shift_remove("__FAILHARD__");
        std::mem::take(&mut self.running)
    }

    /// `state.sls_id`: each chunk of `id` run as `call_chunk(chunk, {},
    /// chunks)` runs it (with what it requires, from nothing run yet).
    pub fn call_id(mut self, order: &[usize], id: &str) -> Obj {
        let mut out = Obj::new();
        for &idx in order {
            if self.graph.chunks[idx].get("__id__").map(py_str).as_deref() != Some(id) {
                continue;
            }
            self.running = Obj::new();
            self.call_chunk(idx, 0);
            self.running.shift_remove("__FAILHARD__");
            for (k, v) in std::mem::take(&mut self.running) {
                out.insert(k, v);
            }
        }
        out
    }

    fn prereq(&self, idx: usize) -> bool {
        self.graph.chunks[idx].get("__prereq__").is_some_and(truthy)
    }

    fn check_failhard(&self, idx: usize) -> bool {
        if self.env.test {
            return false;
        }
        let low = &self.graph.chunks[idx];
        let fh = low.get("failhard").map_or(self.failhard, truthy);
        match self.running.get(&tag(low)) {
            Some(ret) if fh => match ret.get("result") {
                Some(Value::Null) | None => false,
                Some(r) => !truthy(r),
            },
            _ => false,
        }
    }

    /// Keep a return: in `pre` for a prerequired chunk's test run
    /// (`prereq` read before the call, which clears it), else in
    /// `running`.
    fn store(&mut self, idx: usize, prereq: bool, ret: Obj) {
        let t = tag(&self.graph.chunks[idx]);
        if prereq {
            self.pre.insert(t, ret);
        } else {
            self.running.insert(t, Value::Object(ret));
        }
    }

    fn call_chunk(&mut self, idx: usize, depth: u32) {
        states::mod_init(&self.graph.chunks[idx], self.env);
        let t = tag(&self.graph.chunks[idx]);
        let (status, reqs) = self.check_requisites(idx);
        let prereq = self.prereq(idx);
        match status {
            Status::Unmet => self.call_unmet(idx, depth),
            Status::Met => {
                let ret = self.call(idx);
                self.store(idx, prereq, ret);
            }
            Status::SkipReq => self.not_run(
                idx,
                true,
                "State was not run because requisites were skipped by another state",
            ),
            Status::SkipWatch if !prereq => {
                let mut ret = self.call(idx);
                let c = ret.get("comment").map(py_str).unwrap_or_default();
                ret.insert(
                    "comment".into(),
                    json!(format!(
                        "{c} mod_watch was not run because requisites were skipped by another state"
                    )),
                );
                self.running.insert(t, Value::Object(ret));
            }
            Status::Fail => self.fail(idx, &t, &reqs),
            Status::Change if !prereq => {
                let mut ret = self.call(idx);
                let changed = ret.get("changes").is_some_and(truthy);
                if !changed && !ret.get("skip_watch").is_some_and(truthy) {
                    let mut low = self.graph.chunks[idx].clone();
                    let fun = low.get("fun").cloned().unwrap_or(Value::Null);
                    low.insert("sfun".into(), fun);
                    low.insert("fun".into(), json!("mod_watch"));
                    low.insert("__reqs__".into(), self.watched(&reqs));
                    ret = self.call_low(&mut low, None);
                }
                self.running.insert(t, Value::Object(ret));
            }
            Status::Pre => self.not_run(idx, true, "No changes detected"),
            Status::Onfail => self.not_run(
                idx,
                true,
                "State was not run because onfail req did not change",
            ),
            Status::Onchanges => self.not_run(
                idx,
                true,
                "State was not run because none of the onchanges reqs changed",
            ),
            _ => {
                let ret = self.call(idx);
                self.store(idx, prereq, ret);
            }
        }
    }

    fn fail(&mut self, idx: usize, t: &str, reqs: &[(Req, usize)]) {
        if let Some(mut pre) = self.pre.get(t).cloned() {
            if pre.get("changes").is_some_and(truthy) {
                pre.insert("changes".into(), json!({}));
            }
            pre.insert("__run_num__".into(), json!(self.run_num));
            let low = &self.graph.chunks[idx];
            for key in ["__sls__", "__id__", "name"] {
                pre.insert(key.into(), low.get(key).cloned().unwrap_or(Value::Null));
            }
            self.pre.insert(t.to_string(), pre.clone());
            self.running.insert(t.to_string(), Value::Object(pre));
            self.run_num += 1;
            return;
        }
        let mut failed: Vec<String> = Vec::new();
        for &(_, r) in reqs {
            let rlow = &self.graph.chunks[r];
            let rt = tag(rlow);
            let ret = self
                .pre
                .get(&rt)
                .cloned()
                .map(Value::Object)
                .or_else(|| self.running.get(&rt).cloned());
            if ret.as_ref().and_then(|r| r.get("result")) == Some(&Value::Bool(false)) {
                let key = format!(
                    "{}.{}",
                    rlow.get("__sls__").map(py_str).unwrap_or_default(),
                    rlow.get("__id__").map(py_str).unwrap_or_default()
                );
                if !failed.contains(&key) {
                    failed.push(key);
                }
            }
        }
        let comment = format!("One or more requisite failed: {}", failed.join(", "));
        self.not_run(idx, false, &comment);
    }

    /// `__reqs__` as `mod_watch` reads it: the watched chunks, each
    /// marked with whether its return has changes.
    fn watched(&self, reqs: &[(Req, usize)]) -> Value {
        let list: Vec<Value> = reqs
            .iter()
            .filter(|(k, _)| *k == Req::Watch)
            .map(|&(_, i)| {
                let mut c = self.graph.chunks[i].clone();
                let changed = self
                    .running
                    .get(&tag(&c))
                    .and_then(|r| r.get("changes"))
                    .is_some_and(truthy);
                c.insert("__changed__".into(), json!(changed));
                Value::Object(c)
            })
            .collect();
        json!({ "watch": list })
    }

    /// `_assign_not_run_result_dict`.
    fn not_run(&mut self, idx: usize, result: bool, comment: &str) {
        let ret = self.not_run_ret(idx, result, comment);
        let t = tag(&self.graph.chunks[idx]);
        if self.prereq(idx) {
            self.pre.insert(t.clone(), ret.clone());
        }
        self.running.insert(t, Value::Object(ret));
        self.run_num += 1;
    }

    /// The return of a chunk that did not run: its reason, and the next
    /// run number.
    fn not_run_ret(&self, idx: usize, result: bool, comment: &str) -> Obj {
        let low = &self.graph.chunks[idx];
        let mut ret = Obj::new();
        ret.insert("changes".into(), json!({}));
        ret.insert("result".into(), json!(result));
        ret.insert("duration".into(), json!(0.0));
        ret.insert("start_time".into(), json!(crate::clock::now()));
        ret.insert("comment".into(), json!(comment));
        ret.insert("__state_ran__".into(), json!(false));
        ret.insert("__run_num__".into(), json!(self.run_num));
        for key in ["__sls__", "__id__", "name"] {
            ret.insert(key.into(), low.get(key).cloned().unwrap_or(Value::Null));
        }
        ret
    }

    fn call_unmet(&mut self, idx: usize, depth: u32) {
        for (_, dep) in self.graph.dependencies(idx) {
            let dt = tag(&self.graph.chunks[dep]);
            if !self.running.contains_key(&dt) {
                self.call_chunk(dep, 0);
                if self.check_failhard(dep) {
                    self.running.insert("__FAILHARD__".into(), json!(true));
                    return;
                }
            }
        }
        let t = tag(&self.graph.chunks[idx]);
        if self.prereq(idx) {
            let (status, _) = self.check_requisites(idx);
            if status == Status::Pre {
                let ret = self.not_run_ret(idx, true, "No changes detected");
                self.pre.insert(t, ret);
                self.run_num += 1;
            } else {
                let mut ret = self.call(idx);
                if !ret.get("changes").is_some_and(truthy) && status == Status::Change {
                    ret.insert("changes".into(), json!({"watch": "watch"}));
                    ret.insert("result".into(), Value::Null);
                }
                self.pre.insert(t, ret);
            }
        } else if depth + 1 >= 20 {
            let low = &self.graph.chunks[idx];
            let mut ret = Obj::new();
            ret.insert("changes".into(), json!({}));
            ret.insert("result".into(), json!(false));
            ret.insert("comment".into(), json!("Recursive requisite found"));
            ret.insert("__run_num__".into(), json!(self.run_num));
            for key in ["__sls__", "__id__", "name"] {
                ret.insert(key.into(), low.get(key).cloned().unwrap_or(Value::Null));
            }
            self.running.insert(t, Value::Object(ret));
        } else {
            self.call_chunk(idx, depth + 1);
        }
        if self.check_failhard(idx) {
            self.running.insert("__FAILHARD__".into(), json!(true));
        }
    }

    /// `_check_requisites`: the chunk's status, and its requisites.
    fn check_requisites(&self, idx: usize) -> (Status, Vec<(Req, usize)>) {
        let deps = self.graph.dependencies(idx);
        let mut kinds: Vec<Req> = Vec::new();
        for (k, _) in &deps {
            if !kinds.contains(k) {
                kinds.push(*k);
            }
        }
        let mut stats: Vec<&'static str> = Vec::new();
        for kind in kinds {
            let mut req: Vec<&'static str> = Vec::new();
            let name = kind.name();
            let base = name.trim_end_matches("_any").trim_end_matches("_all");
            for &(_, dep) in deps.iter().filter(|(k, _)| *k == kind) {
                let t = tag(&self.graph.chunks[dep]);
                let ret = if base == "prereq" {
                    self.pre.get(&t).cloned()
                } else {
                    self.running.get(&t).and_then(Value::as_object).cloned()
                };
                let Some(ret) = ret else {
                    add(&mut req, "unmet");
                    continue;
                };
                check_one(base, &ret, &mut req);
            }
            if name.ends_with("_any") || kind == Req::Onfail {
                if req.contains(&"met") || req.contains(&"change") {
                    req.retain(|s| *s != "fail");
                }
                if req.contains(&"onchangesmet") {
                    req.retain(|s| *s != "onchanges" && *s != "fail");
                }
                if req.contains(&"onfail") && req.contains(&"met") {
                    req.retain(|s| *s != "onfail");
                }
            }
            if name.ends_with("_all") && req.contains(&"onfail") && req.contains(&"met") {
                req.retain(|s| *s != "met");
            }
            for s in req {
                add(&mut stats, s);
            }
        }
        let has = |s: &str| stats.contains(&s);
        let status = if has("unmet") {
            Status::Unmet
        } else if has("fail") {
            Status::Fail
        } else if has("skip_req") && (has("onchangesmet") || has("premet")) {
            Status::SkipReq
        } else if has("skip_req") && has("change") {
            Status::SkipWatch
        } else if has("pre") {
            if has("premet") {
                Status::Met
            } else {
                Status::Pre
            }
        } else if has("onfail") && !has("onchangesmet") {
            Status::Onfail
        } else if has("onchanges") && !has("onchangesmet") {
            Status::Onchanges
        } else if has("change") {
            Status::Change
        } else if has("onfail") {
            Status::Onfail
        } else {
            Status::Met
        };
        (status, deps)
    }

    fn call(&mut self, idx: usize) -> Obj {
        let mut low = self.graph.chunks[idx].clone();
        self.call_low(&mut low, Some(idx))
    }

    /// `State.call`: one chunk's state function, with Salt's checks
    /// around it; the return with its run number, SLS, id and times.
    fn call_low(&mut self, low: &mut Obj, idx: Option<usize>) -> Obj {
        let name = low.get("name").cloned().unwrap_or(Value::Null);
        let errors = states::verify(low);
        if !errors.is_empty() {
            let mut ret = Obj::new();
            ret.insert("result".into(), json!(false));
            ret.insert("name".into(), name);
            ret.insert("changes".into(), json!({}));
            let comment: String = errors.iter().map(|e| format!("{e}\n")).collect();
            ret.insert("comment".into(), json!(comment));
            ret.insert("__run_num__".into(), json!(self.run_num));
            self.run_num += 1;
            return ret;
        }
        let started = crate::clock::Started::now();
        let prereq = low.get("__prereq__").is_some_and(truthy);
        let saved = self.env.test;
        if prereq {
            self.env.test = true;
        }
        let mut ret = Obj::new();
        ret.insert("result".into(), json!(false));
        ret.insert(
            "name".into(),
            low.get("name").cloned().unwrap_or(Value::Null),
        );
        ret.insert("changes".into(), json!({}));
        let state = low.get("state").map(py_str).unwrap_or_default();
        let checks = ["unless", "onlyif", "creates"]
            .iter()
            .any(|k| low.contains_key(*k));
        let mut refused = false;
        if checks && !states::has_mod_run_check(&state) {
            match states::run_check(low, self.env) {
                Ok(checked) => ret.extend(checked),
                Err(why) => {
                    ret = states::ret(low, json!(false), &format!("Denied: {why}"));
                    refused = true;
                }
            }
        }
        if !refused
            && (ret.get("result") == Some(&Value::Bool(false)) || !ret.contains_key("result"))
        {
            ret = match states::call(low, self.env) {
                Ok(r) => r,
                Err(e) => {
                    let mut r = Obj::new();
                    r.insert("result".into(), json!(false));
                    r.insert(
                        "name".into(),
                        low.get("name").cloned().unwrap_or(Value::Null),
                    );
                    r.insert("changes".into(), json!({}));
                    r.insert(
                        "comment".into(),
                        json!(format!("An exception occurred in this state: {e}")),
                    );
                    r
                }
            };
        }
        self.env.test = saved;
        if prereq {
            if let Some(i) = idx {
                self.graph.chunks[i].insert("__prereq__".into(), json!(false));
            }
            return unify(content_check(ret));
        }
        ret.insert(
            "__sls__".into(),
            low.get("__sls__").cloned().unwrap_or(Value::Null),
        );
        ret.insert("__run_num__".into(), json!(self.run_num));
        self.run_num += 1;
        let (start, duration) = started.finish();
        ret.insert("start_time".into(), json!(start));
        ret.insert("duration".into(), json!(duration));
        ret.insert(
            "__id__".into(),
            low.get("__id__").cloned().unwrap_or(Value::Null),
        );
        unify(content_check(ret))
    }
}

/// Salt's `OutputUnifier("content_check", ...)` around `State.call`: a
/// return without its four keys, or whose `changes` is no dict, becomes
/// this error.
fn content_check(ret: Obj) -> Obj {
    let err = if !ret.get("changes").is_some_and(Value::is_object) {
        Some("'Changes' should be a dictionary.".to_string())
    } else {
        let missing: Vec<&str> = ["name", "result", "changes", "comment"]
            .into_iter()
            .filter(|k| !ret.contains_key(*k))
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "The following keys were not present in the state return: {}.",
                missing.join(", ")
            )
        })
    };
    match err {
        None => ret,
        Some(e) => {
            let mut r = Obj::new();
            r.insert("result".into(), json!(false));
            r.insert("name".into(), json!("later"));
            r.insert("changes".into(), json!({}));
            r.insert(
                "comment".into(),
                json!(format!("An exception occurred in this state: {e}")),
            );
            r
        }
    }
}

/// `OutputUnifier`'s `unify`: a list `comment` joined with newlines, a
/// `result` other than None made a bool.
fn unify(mut ret: Obj) -> Obj {
    if let Some(Value::Array(lines)) = ret.get("comment") {
        let text: Vec<String> = lines.iter().map(py_str).collect();
        ret.insert("comment".into(), json!(text.join("\n")));
    }
    if let Some(r) = ret.get("result")
        && !r.is_null()
    {
        let b = truthy(r);
        ret.insert("result".into(), json!(b));
    }
    ret
}

fn add(v: &mut Vec<&'static str>, s: &'static str) {
    if !v.contains(&s) {
        v.push(s);
    }
}

/// One requisite's return read as `_check_requisites` reads it.
fn check_one(base: &str, ret: &Obj, req: &mut Vec<&'static str>) {
    let result = ret.get("result").cloned().unwrap_or(Value::Null);
    let changes = ret.get("changes").is_some_and(truthy);
    if ret.get("skip_req").is_some_and(truthy) {
        add(req, "skip_req");
    }
    match base {
        "onfail" => {
            if result == Value::Bool(true) {
                add(req, "onfail");
                return;
            }
        }
        "onchanges" => {
            if result == Value::Bool(false) || !changes {
                add(req, "onchanges");
            } else {
                add(req, "onchangesmet");
            }
            return;
        }
        _ => {
            if result == Value::Bool(false) {
                add(req, "fail");
                return;
            }
        }
    }
    if base == "watch" && changes {
        add(req, "change");
        return;
    }
    if base == "prereq" {
        add(req, if result.is_null() { "premet" } else { "pre" });
    } else if ret.get("__state_ran__").is_none_or(truthy) {
        add(req, "met");
    }
}
