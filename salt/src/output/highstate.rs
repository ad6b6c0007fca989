//! Salt's `highstate` outputter (`salt/output/highstate.py`, 3008.4): what
//! `salt '*' state.apply` prints for each minion, a block per state and a
//! summary, shaped by `state_output`, `state_verbose` and their siblings.
//!
//! The outputter works on the return in place and can raise part way;
//! `display_output` then prints the same, now altered, data with `nested`
//! (a state printed in full before the one that raised shows its
//! `duration` as `"1.5 ms"` there). [`highstate`] keeps that: it renders
//! a copy, and where Salt would raise it hands back the copy as Salt left
//! it for `nested`.
//!
//! * [`host`]: one minion's return — compile errors, the states in
//!   `__run_num__` order, the summary.
//! * [`state`]: one state — its full block or terse line, its changes.
//! * [`textwrap`]: Python's `textwrap.fill`, for a state's warnings.

mod host;
mod state;
mod textwrap;

use serde_json::Value;

/// The options the highstate outputter reads from Salt's opts, with the
/// defaults `salt.config` gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HighstateOpts {
    /// `state_output` (`--state-output`): `full`, `terse`, `mixed`,
    /// `changes` or `filter`, each optionally with `_id` (show the ID as
    /// the name). Salt reads only the prefix, so any other word is `full`.
    pub state_output: String,
    /// `state_verbose` (`--state-verbose`): `false` hides states that
    /// succeeded without changes.
    pub state_verbose: bool,
    /// `state_tabular`: terse lines as aligned columns.
    pub state_tabular: bool,
    /// `state_output_diff` (`--state-output-diff`): hide every state that
    /// succeeded without changes, whatever `state_verbose` says.
    pub state_output_diff: bool,
    /// `state_output_profile`: each state's start and duration, and the
    /// summary's `Total run time`.
    pub state_output_profile: bool,
    /// `state_output_pct`: `Success %` and `Failure %` in the summary.
    pub state_output_pct: bool,
    /// `state_output_exclude`, for `filter`: results (`True`, `False`,
    /// `None`) whose states are not shown.
    pub state_output_exclude: Vec<String>,
    /// `state_output_terse`, for `filter`: results whose states are shown
    /// on one line.
    pub state_output_terse: Vec<String>,
}

impl Default for HighstateOpts {
    fn default() -> Self {
        Self {
            state_output: "full".into(),
            state_verbose: true,
            state_tabular: false,
            state_output_diff: false,
            state_output_profile: true,
            state_output_pct: false,
            state_output_exclude: Vec::new(),
            state_output_terse: Vec::new(),
        }
    }
}

/// How `state_output` lays out one state: Salt matches the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Full,
    Terse,
    Mixed,
    Changes,
    Filter,
}

impl HighstateOpts {
    fn mode(&self) -> Mode {
        let s = self.state_output.to_lowercase();
        [
            ("filter", Mode::Filter),
            ("terse", Mode::Terse),
            ("mixed", Mode::Mixed),
            ("changes", Mode::Changes),
        ]
        .into_iter()
        .find(|(prefix, _)| s.starts_with(prefix))
        .map_or(Mode::Full, |(_, mode)| mode)
    }

    /// `_id`: the state's ID stands in for its name.
    fn by_id(&self) -> bool {
        self.state_output.to_lowercase().ends_with("_id")
    }
}

/// What the highstate outputter prints for `data` (`{minion: return}`),
/// or, where Salt's raises and `display_output` falls back to `nested`,
/// the data as the outputter left it, for `nested` to print.
pub fn highstate(data: &Value, color: bool, opts: &HighstateOpts) -> Result<String, Value> {
    let mut data = data.clone();
    let ctx = Ctx { color, opts };
    match output(&mut data, 1, &ctx) {
        Ok(text) => Ok(text),
        Err(Raised) => Err(data),
    }
}

/// Salt's outputter raised (a missing key, a value of the wrong type):
/// `display_output` prints the data with `nested` instead. Where Salt's
/// would raise what `display_output` does not catch (a state key of
/// fewer than four `_|-` parts), maid falls back to `nested` too.
#[derive(Debug)]
struct Raised;

/// What every part of the outputter reads.
struct Ctx<'a> {
    color: bool,
    opts: &'a HighstateOpts,
}

impl Ctx<'_> {
    /// A colour from `get_colors`: the code when colour is on, else "".
    fn c(&self, code: &'static str) -> &'static str {
        if self.color { code } else { "" }
    }
}

/// `output()`: unwrap the envelopes Salt knows (a job's `return`, an
/// orchestration's `data`), then each minion's block.
fn output(root: &mut Value, indent_level: usize, ctx: &Ctx) -> Result<String, Raised> {
    let mut data = root;
    if data.get("return").is_some() {
        data = data.get_mut("return").expect("checked");
    }
    if data.get("data").is_some() {
        data = data.get_mut("data").expect("checked");
    }
    if lookup_jid_return(data)? {
        data = data
            .as_object_mut()
            .and_then(|m| m.values_mut().next())
            .and_then(|job| job.get_mut("return"))
            .and_then(|ret| ret.get_mut("data"))
            .expect("checked");
    }
    let map = match data {
        Value::String(s) => return Ok(s.clone()),
        Value::Null => return Ok("None".into()),
        // An int is returned as it is, which `rstrip` (or, nested, `+`)
        // refuses; any other non-dict has no `keys()`.
        Value::Object(map) => map,
        _ => return Err(Raised),
    };
    let masters = map.keys().filter(|k| k.ends_with("_master")).count();
    if map.contains_key("retcode") && masters == 1 {
        map.shift_remove("retcode");
    }
    let mut blocks = Vec::new();
    for (host, hostdata) in map.iter_mut() {
        blocks.push(host::format_host(host, hostdata, indent_level, ctx)?.0);
    }
    // No minion at all: Salt logs an error and prints nothing.
    Ok(blocks.join("\n"))
}

/// Whether `data` is a `lookup_jid` return (`{id: {jid, fun, return:
/// {data: ...}}}`) with data inside; `Raised` where `return` is no dict.
fn lookup_jid_return(data: &Value) -> Result<bool, Raised> {
    let Some(map) = data.as_object() else {
        return Ok(false);
    };
    if map.len() != 1 {
        return Ok(false);
    }
    let Some(job) = map.values().next().and_then(Value::as_object) else {
        return Ok(false);
    };
    if !(job.contains_key("jid") && job.contains_key("fun")) {
        return Ok(false);
    }
    match job.get("return") {
        None => Ok(false),
        Some(Value::Object(ret)) => Ok(ret.contains_key("data")),
        Some(_) => Err(Raised),
    }
}

/// Python's `str.isspace` for one character.
fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `str.strip()`.
fn py_strip(s: &str) -> &str {
    s.trim_matches(py_isspace)
}

/// Python's `str.rstrip()`.
fn py_rstrip(s: &str) -> &str {
    s.trim_end_matches(py_isspace)
}

/// Python's `float()` of a string: surrounding whitespace allowed, `_`
/// only between digits, `inf` and `nan` in any case.
fn py_float(s: &str) -> Option<f64> {
    let t = py_strip(s);
    let chars: Vec<char> = t.chars().collect();
    let mut clean = String::with_capacity(t.len());
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            let digit = |j: Option<usize>| {
                j.and_then(|j| chars.get(j))
                    .is_some_and(char::is_ascii_digit)
            };
            if !(digit(i.checked_sub(1)) && digit(Some(i + 1))) {
                return None;
            }
        } else {
            clean.push(c);
        }
    }
    clean.parse().ok()
}

/// `"\n".join(v)`: a list of strings joined, a string's characters, a
/// dict's keys; anything else raises.
fn py_join_lines(v: &Value) -> Result<String, Raised> {
    let parts: Vec<String> = match v {
        Value::String(s) => s.chars().map(String::from).collect(),
        Value::Object(map) => map.keys().cloned().collect(),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(String::from).ok_or(Raised))
            .collect::<Result<_, _>>()?,
        _ => return Err(Raised),
    };
    Ok(parts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn opts(state_output: &str) -> HighstateOpts {
        HighstateOpts {
            state_output: state_output.into(),
            ..HighstateOpts::default()
        }
    }

    fn state(run_num: u64, result: Value, changes: Value) -> Value {
        json!({
            "__run_num__": run_num, "result": result, "comment": "done",
            "name": "/etc/motd", "changes": changes, "__id__": "motd",
            "duration": 1.5, "start_time": "10:00:00.000000",
        })
    }

    #[test]
    fn full_block_and_summary() {
        let data = json!({"web1": {"file_|-motd_|-/etc/motd_|-managed":
            state(0, json!(true), json!({"diff": "--- a\n+++ b"}))}});
        let text = highstate(&data, false, &HighstateOpts::default()).unwrap();
        assert_eq!(
            text,
            "web1:\n----------\n          ID: motd\n    Function: file.managed\n        Name: /etc/motd\n      Result: True\n     Comment: done\n     Started: 10:00:00.000000\n    Duration: 1.5 ms\n     Changes:   \n              ----------\n              diff:\n                  --- a\n                  +++ b\n\nSummary for web1\n------------\nSucceeded: 1 (changed=1)\nFailed:    0\n------------\nTotal states run:     1\nTotal run time:   1.500 ms"
        );
    }

    #[test]
    fn terse_id_and_modes() {
        let data = json!({"m": {"cmd_|-a_|-echo hi_|-run": state(0, json!(null), json!({}))}});
        let text = highstate(&data, false, &opts("terse_id")).unwrap();
        assert!(
            text.starts_with("m:\n  Name: a - Function: cmd.run - Result: Differs - Started:"),
            "{text}"
        );
        assert_eq!(opts("Mixed_ID").mode(), Mode::Mixed);
        assert!(opts("Mixed_ID").by_id());
        assert_eq!(opts("whatever").mode(), Mode::Full);
    }

    #[test]
    fn compile_errors_and_fallbacks() {
        let data = json!({"m": ["Rendering SLS 'base:x' failed"]});
        assert_eq!(
            highstate(&data, false, &HighstateOpts::default()).unwrap(),
            "m:\n    Data failed to compile:\n----------\n    Rendering SLS 'base:x' failed"
        );
        // A state return without `changes`: Salt's raises KeyError.
        let data = json!({"m": {"a_|-b_|-c_|-d": {"result": true, "__run_num__": 0}}});
        assert_eq!(
            highstate(&data, false, &HighstateOpts::default()),
            Err(data)
        );
        assert_eq!(
            highstate(&json!(3), false, &HighstateOpts::default()),
            Err(json!(3))
        );
    }

    #[test]
    fn python_builtins() {
        assert_eq!(py_float(" 1_000.5 "), Some(1000.5));
        assert_eq!(py_float("1__0"), None);
        assert_eq!(py_float("1.5 ms"), None);
        assert_eq!(py_join_lines(&json!("ab")).unwrap(), "a\nb");
        assert_eq!(py_rstrip("a \x1c\n"), "a");
    }
}
