//! The requisite graph and the run order, as Salt 3008's
//! `salt.utils.requisite.DependencyGraph` builds and sorts it.
//!
//! A node is a chunk's tag (`state_|-id_|-name_|-fun`); an edge runs from
//! a requisite to the state that needs it, keyed by the requisite's kind.
//! A `prereq` adds a second node for the prerequired chunk (its test-mode
//! run), which shares the chunk: the run order then holds that chunk
//! twice, once to predict and once to run, as Salt's does. Chunks live in
//! one arena ([`Graph::chunks`]) and the order is a list of indices into it.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, HashSet};

use serde_json::{Value, json};

use crate::compile::Obj;
use crate::py::{py_str, repr};

/// The requisite kinds, in Salt's order of precedence (their weight).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Req {
    Onfail,
    OnfailAny,
    OnfailAll,
    Require,
    RequireAny,
    Onchanges,
    OnchangesAny,
    Watch,
    WatchAny,
    Prereq,
}

impl Req {
    /// Those a chunk lists itself, in the order Salt reads them.
    const DIRECT: [Req; 10] = [
        Req::Require,
        Req::RequireAny,
        Req::Watch,
        Req::WatchAny,
        Req::Prereq,
        Req::Onfail,
        Req::OnfailAny,
        Req::OnfailAll,
        Req::Onchanges,
        Req::OnchangesAny,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Req::Onfail => "onfail",
            Req::OnfailAny => "onfail_any",
            Req::OnfailAll => "onfail_all",
            Req::Require => "require",
            Req::RequireAny => "require_any",
            Req::Onchanges => "onchanges",
            Req::OnchangesAny => "onchanges_any",
            Req::Watch => "watch",
            Req::WatchAny => "watch_any",
            Req::Prereq => "prereq",
        }
    }

    fn weight(self) -> u8 {
        self as u8
    }
}

/// A chunk's tag: how the run's return names it.
pub fn tag(chunk: &Obj) -> String {
    let f = |k: &str| chunk.get(k).map(py_str).unwrap_or_default();
    format!(
        "{}_|-{}_|-{}_|-{}",
        f("state"),
        f("__id__"),
        f("name"),
        f("fun")
    )
}

fn prereq_tag(tag: &str) -> String {
    format!("{tag}_|-__prereq_test__")
}

struct Node {
    chunk: usize,
    child_min: Option<f64>,
}

/// Edges into or out of one node: the other node, with each kind once,
/// in the order they were added.
type Edges = Vec<(String, Vec<Req>)>;

fn add_to(edges: &mut Edges, other: &str, kind: Req) {
    match edges.iter_mut().find(|(n, _)| n == other) {
        Some((_, kinds)) => {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        None => edges.push((other.to_string(), vec![kind])),
    }
}

#[derive(Default)]
pub struct Graph {
    pub chunks: Vec<Obj>,
    nodes: Vec<String>,
    node: HashMap<String, Node>,
    out: HashMap<String, Edges>,
    into: HashMap<String, Edges>,
    lookup: HashMap<(String, String), Vec<String>>,
    sls: Vec<(String, Vec<String>)>,
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

impl Graph {
    fn add_node(&mut self, tag: String, chunk: usize) {
        if !self.node.contains_key(&tag) {
            self.nodes.push(tag.clone());
        }
        self.node.insert(
            tag,
            Node {
                chunk,
                child_min: None,
            },
        );
    }

    fn add_edge(&mut self, from: &str, to: &str, kind: Req) {
        add_to(self.out.entry(from.to_string()).or_default(), to, kind);
        add_to(self.into.entry(to.to_string()).or_default(), from, kind);
    }

    /// `add_chunk`: the chunk becomes a node, found by state and name or
    /// id, by id or name alone, and by its SLS (and those including it).
    pub fn add_chunk(&mut self, chunk: Obj) {
        let t = tag(&chunk);
        let idx = self.chunks.len();
        let s = |k: &str| chunk.get(k).map(py_str).unwrap_or_default();
        let (state, name, id) = (s("state"), s("name"), s("__id__"));
        for key in [
            (state.clone(), name.clone()),
            (state, id.clone()),
            ("id".into(), id),
            ("id".into(), name),
        ] {
            push_unique(self.lookup.entry(key).or_default(), t.clone());
        }
        let mut sls: Vec<String> = chunk
            .get("__sls__")
            .map(py_str)
            .filter(|s| !s.is_empty())
            .into_iter()
            .collect();
        if let Some(Value::Array(from)) = chunk.get("__sls_included_from__") {
            sls.extend(from.iter().map(py_str));
        }
        for s in sls {
            match self.sls.iter_mut().find(|(k, _)| *k == s) {
                Some((_, tags)) => push_unique(tags, t.clone()),
                None => self.sls.push((s, vec![t.clone()])),
            }
        }
        self.chunks.push(chunk);
        self.add_node(t, idx);
    }

    fn chunk_of(&self, tag: &str) -> &Obj {
        &self.chunks[self.node[tag].chunk]
    }

    fn add_prereq(&mut self, node: &str, req: &str) {
        let nidx = self.node[node].chunk;
        self.chunks[nidx].insert("__prerequiring__".into(), json!(true));
        let ridx = self.node[req].chunk;
        self.chunks[ridx].insert("__prereq__".into(), json!(true));
        let check = prereq_tag(req);
        if !self.node.contains_key(&check) {
            self.add_node(check.clone(), ridx);
            let ins = self.into.get(req).cloned().unwrap_or_default();
            for (dep, kinds) in ins {
                for kind in kinds.into_iter().filter(|k| *k != Req::Prereq) {
                    self.add_edge(&dep, &check, kind);
                }
            }
        }
        self.add_edge(&check, node, Req::Prereq);
        self.add_edge(node, req, Req::Require);
        let node_check = prereq_tag(node);
        if self.node.contains_key(&node_check) {
            self.add_edge(&check, &node_check, Req::Prereq);
        }
    }

    fn add_reqs(&mut self, node: &str, has_prereq: bool, kind: Req, reqs: &[String]) {
        for req in reqs {
            if kind == Req::Prereq {
                self.add_prereq(node, req);
            } else {
                if has_prereq {
                    self.add_edge(req, &prereq_tag(node), kind);
                }
                self.add_edge(req, node, kind);
            }
        }
    }

    fn add_dependency(&mut self, node: &str, kind: Req, key: &str, val: &str) -> bool {
        let has_prereq = self
            .chunk_of(node)
            .get("__prereq__")
            .is_some_and(maid_sdk::salt::is_true);
        let pattern = val.contains(['*', '?', '[', ']']);
        let reqs: Vec<Vec<String>> = if key == "sls" {
            self.sls
                .iter()
                .filter(|(s, _)| {
                    if pattern {
                        maid_sdk::salt::fnmatch(s, val)
                    } else {
                        s == val
                    }
                })
                .map(|(_, tags)| tags.clone())
                .collect()
        } else if pattern {
            self.lookup
                .iter()
                .filter(|((st, n), _)| st == key && maid_sdk::salt::fnmatch(n, val))
                .map(|(_, tags)| tags.clone())
                .collect()
        } else {
            self.lookup
                .get(&(key.to_string(), val.to_string()))
                .cloned()
                .into_iter()
                .collect()
        };
        let found = (key == "sls" && pattern) || reqs.iter().any(|r| !r.is_empty());
        for tags in reqs {
            self.add_reqs(node, has_prereq, kind, &tags);
        }
        found
    }

    /// `add_requisites`: the chunk's own requisites become edges; Salt's
    /// error for the first that names nothing.
    pub fn add_requisites(&mut self, idx: usize) -> Option<String> {
        let chunk = self.chunks[idx].clone();
        let node = tag(&chunk);
        for kind in Req::DIRECT {
            let Some(Value::Array(reqs)) = chunk.get(kind.name()) else {
                continue;
            };
            for req in reqs {
                let req = match req {
                    Value::String(s) => json!({ "id": s }),
                    other => other.clone(),
                };
                let Some((key, val)) = req.as_object().and_then(|o| o.iter().next()) else {
                    continue;
                };
                let key = key.split('.').next().unwrap_or(key).to_string();
                let Value::String(val) = val else {
                    if val.is_null() {
                        continue;
                    }
                    return Some(format!(
                        "Requisite [{}: {key}] in state [{}] in SLS [{}] must have a string as the value",
                        kind.name(),
                        chunk.get("name").map(py_str).unwrap_or_default(),
                        chunk.get("__sls__").map(py_str).unwrap_or("None".into()),
                    ));
                };
                if !self.add_dependency(&node, kind, &key, val) {
                    return Some(format!(
                        "Referenced state does not exist for requisite [{}: ({key}: {val})] in \
                         state [{}] in SLS [{}]",
                        kind.name(),
                        chunk.get("name").map(py_str).unwrap_or_default(),
                        chunk.get("__sls__").map(py_str).unwrap_or("None".into()),
                    ));
                }
            }
        }
        None
    }

    /// A chunk's `order` as Salt normalises it (`first`, `last`, none).
    fn norm_order(&mut self, idx: usize, cap: f64) -> f64 {
        let chunk = &mut self.chunks[idx];
        let order = match chunk.get("order") {
            Some(Value::Number(n)) => n.as_f64().unwrap_or(cap),
            Some(Value::String(s)) if s == "last" => cap + 1_000_000.0,
            Some(Value::String(s)) if s == "first" => 0.0,
            _ => cap,
        };
        if !matches!(chunk.get("order"), Some(Value::Number(_))) {
            chunk.insert("order".into(), num(order));
        }
        order
    }

    /// `_get_chunk_order`: the node's own order, lowered to the least
    /// order among what needs it (the first time only, as Salt's cache).
    fn chunk_order(&mut self, cap: f64, node: &str) -> (f64, f64) {
        let idx = self.node[node].chunk;
        let mut order = self.norm_order(idx, cap);
        if let Some(n) = self.chunks[idx]
            .shift_remove("name_order")
            .and_then(|v| v.as_f64())
            && n != 0.0
        {
            order += n / 10000.0;
            self.chunks[idx].insert("order".into(), num(order));
        }
        if order < 0.0 {
            order += cap + 1_000_000.0;
            self.chunks[idx].insert("order".into(), num(order));
        }
        if self.node[node].child_min.is_none() {
            let mut child_min = f64::INFINITY;
            let mut req_order = 0u8;
            let mut first = true;
            for (child, kinds) in self.out.get(node).cloned().unwrap_or_default() {
                for kind in kinds {
                    if first || req_order <= kind.weight() {
                        first = false;
                        req_order = kind.weight();
                        let cidx = self.node[&child].chunk;
                        let child_order = match self.chunks[cidx].get("order") {
                            None => f64::INFINITY,
                            Some(_) => self.norm_order(cidx, cap),
                        };
                        child_min = child_min.min(child_order);
                    }
                }
            }
            self.node.get_mut(node).expect("node").child_min = Some(child_min);
            order = order.min(child_min);
        }
        let own = self.chunks[idx]
            .get("order")
            .and_then(Value::as_f64)
            .unwrap_or(order);
        (order, own)
    }

    /// Topological order, ties broken by `(order, state+name+fun)` then
    /// tag (`lexicographical_topological_sort`); `Err` on a cycle.
    pub fn sorted(&mut self, cap: f64) -> Result<Vec<usize>, ()> {
        let mut in_degree: HashMap<String, usize> =
            self.nodes.iter().map(|n| (n.clone(), 0)).collect();
        for (to, edges) in &self.into {
            *in_degree.get_mut(to).expect("node") +=
                edges.iter().map(|(_, k)| k.len()).sum::<usize>();
        }
        let mut heap = BinaryHeap::new();
        for node in self.nodes.clone() {
            if in_degree[&node] == 0 {
                let key = self.key(cap, &node);
                heap.push(std::cmp::Reverse(key));
            }
        }
        let mut out = Vec::new();
        while let Some(std::cmp::Reverse(key)) = heap.pop() {
            out.push(self.node[&key.node].chunk);
            for (child, kinds) in self.out.get(&key.node).cloned().unwrap_or_default() {
                let d = in_degree.get_mut(&child).expect("node");
                *d -= kinds.len();
                if *d == 0 {
                    let key = self.key(cap, &child);
                    heap.push(std::cmp::Reverse(key));
                }
            }
        }
        if out.len() != self.nodes.len() {
            return Err(());
        }
        Ok(out)
    }

    fn key(&mut self, cap: f64, node: &str) -> Key {
        let (a, b) = self.chunk_order(cap, node);
        let c = self.chunk_of(node);
        let s = |k: &str| c.get(k).map(py_str).unwrap_or_default();
        Key {
            a,
            b,
            label: format!("{}{}{}", s("state"), s("name"), s("fun")),
            node: node.to_string(),
        }
    }

    /// What `low` waits for: each requisite's kind and chunk index
    /// (`get_dependencies`).
    pub fn dependencies(&self, idx: usize) -> Vec<(Req, usize)> {
        let chunk = &self.chunks[idx];
        let mut t = tag(chunk);
        if chunk.get("__prereq__").is_some_and(maid_sdk::salt::is_true) {
            t = prereq_tag(&t);
        }
        let mut out = Vec::new();
        for (from, kinds) in self.into.get(&t).into_iter().flatten() {
            for kind in kinds {
                out.push((*kind, self.node[from].chunk));
            }
        }
        out
    }

    /// Salt's words for the cycle found first (`get_cycles_str`).
    pub fn cycles(&self) -> String {
        let mut colour: HashMap<&str, u8> = HashMap::new();
        let mut parent: HashMap<String, (String, Req)> = HashMap::new();
        let mut cycle = Vec::new();
        for start in &self.nodes {
            if colour.get(start.as_str()).copied().unwrap_or(0) == 0
                && self.dfs(start, &mut colour, &mut parent, &mut cycle)
            {
                break;
            }
        }
        let edges: Vec<String> = cycle
            .iter()
            .map(|(from, to, kind): &(String, String, Req)| {
                let (dep, dependent) = (self.chunk_of(from), self.chunk_of(to));
                let mut kind = *kind;
                if kind == Req::Require && !dependent.contains_key("require") {
                    kind = Req::Prereq;
                }
                format!(
                    "({}, '{}', {})",
                    chunk_str(dependent),
                    kind.name(),
                    chunk_str(dep)
                )
            })
            .collect();
        edges.join(", ")
    }

    fn dfs<'a>(
        &'a self,
        node: &'a str,
        colour: &mut HashMap<&'a str, u8>,
        parent: &mut HashMap<String, (String, Req)>,
        cycle: &mut Vec<(String, String, Req)>,
    ) -> bool {
        colour.insert(node, 1);
        for (to, kinds) in self.out.get(node).into_iter().flatten() {
            for kind in kinds {
                match colour.get(to.as_str()).copied().unwrap_or(0) {
                    1 => {
                        let mut found = vec![(node.to_string(), to.clone(), *kind)];
                        let mut cur = node.to_string();
                        let mut seen = HashSet::new();
                        while cur != *to && seen.insert(cur.clone()) {
                            let (prev, k) = parent[&cur].clone();
                            found.push((prev.clone(), cur.clone(), k));
                            cur = prev;
                        }
                        found.reverse();
                        *cycle = found;
                        return true;
                    }
                    0 => {
                        parent.insert(to.clone(), (node.to_string(), *kind));
                        if self.dfs(to, colour, parent, cycle) {
                            return true;
                        }
                    }
                    _ => {}
                }
            }
        }
        colour.insert(node, 2);
        false
    }
}

fn chunk_str(chunk: &Obj) -> String {
    let mut d = serde_json::Map::new();
    d.insert(
        "SLS".into(),
        chunk.get("__sls__").cloned().unwrap_or(Value::Null),
    );
    d.insert(
        "ID".into(),
        chunk.get("__id__").cloned().unwrap_or(Value::Null),
    );
    if chunk.get("__id__") != chunk.get("name") {
        d.insert(
            "NAME".into(),
            chunk.get("name").cloned().unwrap_or(Value::Null),
        );
    }
    repr(&Value::Object(d))
}

/// An order as Python holds it: an int stays an int.
fn num(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9e15 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

/// A node's place in the heap.
#[derive(Debug, PartialEq)]
struct Key {
    a: f64,
    b: f64,
    label: String,
    node: String,
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.a
            .total_cmp(&other.a)
            .then(self.b.total_cmp(&other.b))
            .then_with(|| self.label.cmp(&other.label))
            .then_with(|| self.node.cmp(&other.node))
    }
}
