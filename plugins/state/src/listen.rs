//! `listen` and `listen_in`, as Salt's `State.call_listen` runs them:
//! after every chunk has run, each state listening to one that changed
//! runs its `mod_watch` once more, as `listener_ID`; a listen naming no
//! state is a `Listen_Error` return.

use serde_json::{Value, json};

use crate::compile::Obj;
use crate::graph::tag;
use crate::py::{py_str, truthy};
use crate::run::Runner;

/// A chunk as `call_listen` finds it: state, id, name, and its index.
type Cref = (String, String, String, usize);

/// `lval in cref`: Salt tests the whole (state, id, name) tuple.
fn names(c: &Cref, v: &str) -> bool {
    c.0 == v || c.1 == v || c.2 == v
}

fn listen_tag(state: &str, id: &str) -> String {
    format!("Listen_Error_|-listen_{id}_|-listen_{state}_|-Listen_Error")
}

fn listen_error(state: &str, id: &str) -> Value {
    json!({
        "comment": format!("Referenced state {state}: {id} does not exist"),
        "name": format!("listen_{state}:{id}"),
        "result": false,
        "changes": {},
    })
}

impl Runner<'_> {
    /// Every chunk once, by (state, id, name), in run order.
    fn crefs(&self, order: &[usize]) -> Vec<Cref> {
        let mut crefs: Vec<Cref> = Vec::new();
        for &i in order {
            let c = &self.graph.chunks[i];
            let s = |k: &str| c.get(k).map(py_str).unwrap_or_default();
            let key = (s("state"), s("__id__"), s("name"), i);
            if !crefs
                .iter()
                .any(|c| (&c.0, &c.1, &c.2) == (&key.0, &key.1, &key.2))
            {
                crefs.push(key);
            }
        }
        crefs
    }

    /// Who listens to what: `(state, id)` of the listener and the states
    /// it names (a `listen_in` turned around).
    fn listeners(&self, order: &[usize]) -> Vec<((String, String), Vec<Value>)> {
        let mut out = Vec::new();
        for &i in order {
            let c = &self.graph.chunks[i];
            let s = |k: &str| c.get(k).map(py_str).unwrap_or_default();
            if let Some(Value::Array(l)) = c.get("listen") {
                out.push(((s("state"), s("__id__")), l.clone()));
            }
            for l_in in c
                .get("listen_in")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for (k, v) in l_in.as_object().into_iter().flatten() {
                    out.push((
                        (k.clone(), py_str(v)),
                        vec![json!({ s("state"): s("__id__") })],
                    ));
                }
            }
        }
        out
    }

    /// `call_listen`: the listeners' `mod_watch` runs and errors added
    /// to `running`.
    pub(crate) fn call_listen(&mut self, order: &[usize], running: &mut Obj) {
        let crefs = self.crefs(order);
        let mut errors = Obj::new();
        let mut watchers: Vec<Obj> = Vec::new();
        for (key, targets) in self.listeners(order) {
            for to in targets {
                let to = match to {
                    Value::Object(o) => o,
                    other => {
                        let word = py_str(&other);
                        match crefs.iter().find(|c| c.1 == word || c.2 == word) {
                            Some(c) => Obj::from_iter([(c.0.clone(), json!(c.1))]),
                            None => continue,
                        }
                    }
                };
                for (lkey, lval) in to {
                    let lval = py_str(&lval);
                    if !crefs.iter().any(|c| c.0 == lkey && names(c, &lval)) {
                        errors.insert(listen_tag(&lkey, &lval), listen_error(&lkey, &lval));
                        continue;
                    }
                    for c in crefs.iter().filter(|c| c.0 == lkey && names(c, &lval)) {
                        let changed = running
                            .get(&tag(&self.graph.chunks[c.3]))
                            .and_then(|r| r.get("changes"))
                            .is_some_and(truthy);
                        if !changed {
                            continue;
                        }
                        if !crefs.iter().any(|c| c.0 == key.0 && names(c, &key.1)) {
                            errors.insert(listen_tag(&key.0, &key.1), listen_error(&key.0, &key.1));
                            continue;
                        }
                        for w in crefs.iter().filter(|c| c.0 == key.0 && names(c, &key.1)) {
                            watchers.push(self.watcher(w.3));
                        }
                    }
                }
            }
        }
        let mut idxs = Vec::new();
        for low in watchers {
            idxs.push(self.graph.chunks.len());
            self.graph.add_chunk(low);
        }
        for (k, v) in self.call_chunks(&idxs) {
            running.insert(k, v);
        }
        for (k, mut v) in errors {
            v["__run_num__"] = json!(self.run_num);
            self.run_num += 1;
            running.insert(k, v);
        }
    }

    /// The `mod_watch` chunk of a listener: `listener_ID`, no requisites.
    fn watcher(&self, idx: usize) -> Obj {
        let mut low = self.graph.chunks[idx].clone();
        let fun = low.get("fun").cloned().unwrap_or(Value::Null);
        low.insert("sfun".into(), fun);
        low.insert("fun".into(), json!("mod_watch"));
        let id = low.get("__id__").map(py_str).unwrap_or_default();
        low.insert("__id__".into(), json!(format!("listener_{id}")));
        for req in crate::compile::REQUISITES {
            low.shift_remove(*req);
        }
        low
    }
}
