//! One minion's block (`_format_host`): its name in the colour of its
//! worst state, then what its return holds — a value a function returned,
//! the compile errors of a list, or the states of a dict in `__run_num__`
//! order followed by the summary.

use serde_json::{Map, Value};

use super::super::colors::{CYAN, ENDC, GREEN, LIGHT_RED, LIGHT_YELLOW, RED};
use super::super::{pprint, split_lines};
use super::{Ctx, Mode, Raised, py_float, state};
use crate::python;

/// A minion's block and whether anything changed.
pub(super) fn format_host(
    host: &str,
    data: &mut Value,
    indent_level: usize,
    ctx: &Ctx,
) -> Result<(String, bool), Raised> {
    let mut hcolor = ctx.c(GREEN);
    let mut hstrs = Vec::new();
    let mut nchanges = 0;
    let endc = ctx.c(ENDC);
    match data {
        // An int (or bool) from `saltmod.function`: always a change.
        v @ (Value::Bool(_) | Value::Number(_)) if !is_float(v) => {
            nchanges = 1;
            hstrs.push(format!("{hcolor}    {}{endc}", python::str(v)));
            hcolor = ctx.c(CYAN);
        }
        Value::String(s) => {
            nchanges = 1;
            for line in split_lines(s) {
                hstrs.push(format!("{hcolor}    {line}{endc}"));
            }
            hcolor = ctx.c(CYAN);
        }
        Value::Array(errors) => {
            hcolor = ctx.c(LIGHT_RED);
            hstrs.push(format!("    {hcolor}Data failed to compile:{endc}"));
            for err in errors.iter() {
                let err = python::str(err).replace('\x1b', "?");
                hstrs.push(format!("{hcolor}----------\n    {err}{endc}"));
            }
        }
        Value::Object(states) => {
            let mut run = Run {
                ctx,
                hcolor,
                hstrs: Vec::new(),
                nchanges: 0,
                counts: Counts::default(),
                rdurations: Vec::new(),
                pdurations: Vec::new(),
            };
            run.states(states, indent_level)?;
            run.summary(host);
            (hcolor, hstrs, nchanges) = (run.hcolor, run.hstrs, run.nchanges);
        }
        // A float or None: the name alone.
        _ => {}
    }
    let shown = host.replace('\x1b', "?");
    hstrs.insert(0, format!("{hcolor}{shown}:{endc}"));
    Ok((hstrs.join("\n"), nchanges > 0))
}

fn is_float(v: &Value) -> bool {
    v.as_number().is_some_and(serde_json::Number::is_f64)
}

/// A state's result as a key of Salt's `rcounts`: Python's `True == 1 ==
/// 1.0` share one; a list or dict cannot be a key at all.
#[derive(Debug, Clone, PartialEq)]
enum Key {
    None,
    Num(f64),
    Str(String),
}

impl Key {
    const TRUE: Key = Key::Num(1.0);
    const FALSE: Key = Key::Num(0.0);

    fn of(v: &Value) -> Result<Key, Raised> {
        match v {
            Value::Null => Ok(Key::None),
            Value::Bool(b) => Ok(Key::Num(f64::from(u8::from(*b)))),
            Value::Number(n) => Ok(Key::Num(n.as_f64().unwrap_or(f64::NAN))),
            Value::String(s) => Ok(Key::Str(s.clone())),
            _ => Err(Raised),
        }
    }

    fn warnings() -> Key {
        Key::Str("warnings".into())
    }
}

/// `rcounts`: how many states had each result, and how many warned.
#[derive(Debug, Default)]
struct Counts(Vec<(Key, u64)>);

impl Counts {
    fn add(&mut self, key: Key, n: u64) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, count)) => *count += n,
            None => self.0.push((key, n)),
        }
    }

    fn get(&self, key: &Key) -> u64 {
        self.0.iter().find(|(k, _)| k == key).map_or(0, |(_, n)| *n)
    }

    /// States run: every count but the warnings.
    fn states(&self) -> u64 {
        self.0.iter().map(|(_, n)| n).sum::<u64>() - self.get(&Key::warnings())
    }
}

/// The state loop's running totals (`_format_host`'s locals).
struct Run<'a> {
    ctx: &'a Ctx<'a>,
    /// The minion's colour: its last shown state's that failed or would
    /// change.
    hcolor: &'static str,
    hstrs: Vec<String>,
    nchanges: usize,
    counts: Counts,
    /// Durations of states run in turn, which add up.
    rdurations: Vec<f64>,
    /// Durations of `parallel` states, of which only the longest counts.
    pdurations: Vec<f64>,
}

impl Run<'_> {
    /// Each state with a `result`, in `__run_num__` order, after an error
    /// for each one that lacks its order.
    fn states(&mut self, data: &mut Map<String, Value>, indent_level: usize) -> Result<(), Raised> {
        for (tname, info) in data.iter() {
            if let Value::Object(i) = info
                && tname != "changes"
                && !i.is_empty()
                && !i.contains_key("__run_num__")
            {
                self.hstrs.insert(0, pprint(info, None));
                self.hstrs.insert(
                    0,
                    "The State execution failed to record the order in which all states \
                     were executed. The state return missing data is:"
                        .into(),
                );
            }
        }
        let names: Vec<String> = data
            .iter()
            .filter(|(_, info)| info.get("result").is_some() && info.is_object())
            .map(|(k, _)| k.clone())
            .collect();
        for tname in sort_by_run_num(names, data)? {
            let Some(Value::Object(ret)) = data.get_mut(&tname) else {
                unreachable!("kept above");
            };
            self.state(&tname, ret, indent_level)?;
        }
        Ok(())
    }

    /// One state: counted, its changes rendered, then shown unless the
    /// options hide it.
    fn state(
        &mut self,
        tname: &str,
        ret: &mut Map<String, Value>,
        indent_level: usize,
    ) -> Result<(), Raised> {
        let ctx = self.ctx;
        let result = ret["result"].clone();
        self.counts.add(Key::of(&result)?, 1);
        let duration = match ret.get("duration") {
            None => Some(0.0),
            Some(v) => duration(v)?,
        };
        if let Some(d) = duration {
            if ret.contains_key("__parallel__") {
                self.pdurations.push(d);
            } else {
                self.rdurations.push(d);
            }
        }
        let (schanged, ctext) = state::changes(ret, indent_level, ctx)?;
        self.nchanges += usize::from(schanged);
        let succeeded = python::truthy(&result);
        if succeeded && !schanged && (ctx.opts.state_output_diff || !ctx.opts.state_verbose) {
            return Ok(());
        }
        let mut tcolor = ctx.c(if schanged { CYAN } else { GREEN });
        if result == Value::Bool(false) {
            (self.hcolor, tcolor) = (ctx.c(RED), ctx.c(RED));
        }
        if result.is_null() {
            (self.hcolor, tcolor) = (ctx.c(LIGHT_YELLOW), ctx.c(LIGHT_YELLOW));
        }
        let mut comps: Vec<String> = tname.split("_|-").map(String::from).collect();
        if ctx.opts.by_id() {
            if comps.len() < 3 {
                return Err(Raised);
            }
            comps[2] = comps[1].clone();
        }
        let result_str = python::str(&result);
        let terse = match ctx.opts.mode() {
            Mode::Filter => {
                if ctx.opts.state_output_terse.contains(&result_str) {
                    true
                } else if ctx.opts.state_output_exclude.contains(&result_str) {
                    return Ok(());
                } else {
                    false
                }
            }
            Mode::Terse => true,
            Mode::Mixed => result != Value::Bool(false),
            Mode::Changes => succeeded && !schanged,
            Mode::Full => false,
        };
        if terse {
            self.hstrs.push(state::terse(ctx, tcolor, &comps, ret)?);
            return Ok(());
        }
        let warned = ret.contains_key("warnings");
        if warned {
            self.counts.add(Key::warnings(), 1);
        }
        let lines = state::full(ctx, tcolor, &comps, ret, &ctext)?;
        self.hstrs.extend(lines);
        Ok(())
    }

    /// The summary: counts by result, then states run and time taken.
    fn summary(&mut self, host: &str) {
        let c = |code| self.ctx.c(code);
        let endc = c(ENDC);
        let counts = &self.counts;
        let count_max_len = counts.0.iter().map(|(_, n)| n.to_string().len()).max();
        let width = "Succeeded".len() + count_max_len.unwrap_or(0) + 2;
        let line = |label: &str, count: &str| {
            format!(
                "{label}: {count:>w$}",
                w = width.saturating_sub(label.len() + 2)
            )
        };
        let mut out = vec![format!(
            "{}\nSummary for {host}\n{}{endc}",
            c(CYAN),
            "-".repeat(width)
        )];
        let unchanged = counts.get(&Key::None);
        let mut stats = Vec::new();
        if unchanged > 0 {
            stats.push(format!("{}unchanged={unchanged}{endc}", c(LIGHT_YELLOW)));
        }
        if self.nchanges > 0 {
            stats.push(format!("{}changed={}{endc}", c(GREEN), self.nchanges));
        }
        let stats = if stats.is_empty() {
            String::new()
        } else {
            format!(" ({})", stats.join(", "))
        };
        let succeeded = counts.get(&Key::TRUE) + unchanged;
        let succeeded_line = line("Succeeded", &succeeded.to_string());
        out.push(format!("{}{succeeded_line}{endc}{stats}", c(GREEN)));
        let failed = counts.get(&Key::FALSE);
        let failed_color = c(if failed > 0 { RED } else { CYAN });
        let failed_line = line("Failed", &failed.to_string());
        out.push(format!("{failed_color}{failed_line}{endc}"));
        let run = counts.states();
        if self.ctx.opts.state_output_pct && run > 0 {
            let pct = |n: u64| python::float(round2(n as f64 / run as f64 * 100.0));
            let success = line("Success %", &pct(succeeded));
            out.push(format!("{}{success}{endc}", c(GREEN)));
            let failure = line("Failure %", &pct(failed));
            out.push(format!("{failed_color}{failure}{endc}"));
        }
        let warnings = counts.get(&Key::warnings());
        if warnings > 0 {
            let warned = line("Warnings", &warnings.to_string());
            out.push(format!("{}{warned}{endc}", c(LIGHT_RED)));
        }
        out.push(format!(
            "{}{}\nTotal states run: {run:>w$}{endc}",
            c(CYAN),
            "-".repeat(width),
            w = width - 7
        ));
        if self.ctx.opts.state_output_profile {
            out.push(format!("{}{}{endc}", c(CYAN), self.run_time(width)));
        }
        self.hstrs.extend(out);
    }

    /// `Total run time`: the states run in turn, plus the longest of the
    /// parallel ones; in seconds from 1000 ms on.
    fn run_time(&self, width: usize) -> String {
        let mut total = self.rdurations.iter().fold(0.0, |sum, d| sum + d);
        if let Some(longest) = self.pdurations.iter().copied().reduce(f64::max) {
            total += longest;
        }
        let mut unit = "ms";
        if total > 999.0 {
            total /= 1000.0;
            unit = "s";
        }
        let shown = if total.is_finite() {
            format!("{total:.3}")
        } else {
            python::float(total)
        };
        format!("Total run time: {shown:>w$} {unit}", w = width - 5)
    }
}

/// Python's `round(x, 2)`: the nearest two-decimal value, exactly.
fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap_or(x)
}

/// A state's `duration` as `float()` reads it (`"1.5 ms"` too), `None`
/// where it cannot (Salt logs that); `Raised` where `float()` raises a
/// `TypeError`.
fn duration(v: &Value) -> Result<Option<f64>, Raised> {
    match v {
        Value::Bool(b) => Ok(Some(f64::from(u8::from(*b)))),
        Value::Number(n) => Ok(n.as_f64()),
        Value::String(s) => Ok(py_float(s).or_else(|| {
            let before = s.split_once(" ms").map_or(s.as_str(), |(b, _)| b);
            py_float(before)
        })),
        _ => Err(Raised),
    }
}

/// State names sorted as `sorted(data, key=__run_num__ or 0)`: stable;
/// numbers with numbers, strings with strings, any other mix raises.
fn sort_by_run_num(names: Vec<String>, data: &Map<String, Value>) -> Result<Vec<String>, Raised> {
    let zero = Value::from(0);
    let keys: Vec<&Value> = names
        .iter()
        .map(|n| data[n].get("__run_num__").unwrap_or(&zero))
        .collect();
    let mut order: Vec<usize> = (0..names.len()).collect();
    if names.len() > 1 {
        if keys.iter().all(|k| k.is_number() || k.is_boolean()) {
            let num = |k: &Value| {
                k.as_bool()
                    .map_or_else(|| k.as_f64().unwrap_or(0.0), |b| f64::from(u8::from(b)))
            };
            order.sort_by(|&a, &b| num(keys[a]).total_cmp(&num(keys[b])));
        } else if keys.iter().all(|k| k.is_string()) {
            order.sort_by(|&a, &b| keys[a].as_str().cmp(&keys[b].as_str()));
        } else {
            return Err(Raised);
        }
    }
    Ok(order.into_iter().map(|i| names[i].clone()).collect())
}
