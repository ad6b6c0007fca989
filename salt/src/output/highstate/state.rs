//! One state's lines: the full block (`ID`, `Function`, `Name`, `Result`,
//! `Comment`, `Started`, `Duration`, `Changes`, warnings) or the one terse
//! line (`_format_terse`), and its changes as `_format_changes` renders
//! them — through `nested`, 14 columns in, or, for an orchestration's
//! states, as highstate blocks of their own.

use serde_json::{Map, Value};

use super::super::colors::{ENDC, LIGHT_RED};
use super::super::{nested_at, split_lines};
use super::{Ctx, Raised, host, py_isspace, py_join_lines, py_rstrip, py_strip, textwrap};
use crate::python;

/// Where a state's details and changes start: past `     Changes:   `.
const DETAIL_INDENT: usize = 14;

/// Whether the state changed anything, and its changes as they follow
/// `Changes:`. A `state.orch`/`state.sls` state's changes are another
/// highstate return, printed as one, indented a level further.
pub(super) fn changes(
    ret: &mut Map<String, Value>,
    indent_level: usize,
    ctx: &Ctx,
) -> Result<(bool, String), Raised> {
    let orchestration = matches!(
        ret.get("name").and_then(Value::as_str),
        Some("state.orch" | "state.orchestrate" | "state.sls")
    );
    let changes = ret.get_mut("changes").ok_or(Raised)?;
    if orchestration {
        let nested = super::output(changes, indent_level + 1, ctx)?;
        // `re.sub("^", pad, "\n" + nested, flags=re.MULTILINE)`.
        let pad = " ".repeat(DETAIL_INDENT * indent_level);
        let text = format!("\n{nested}").replace('\n', &format!("\n{pad}"));
        return Ok((true, format!("{pad}{text}")));
    }
    if !python::truthy(changes) {
        return Ok((false, String::new()));
    }
    let Value::Object(map) = changes else {
        let shown = python::str(changes);
        return Ok((true, format!("Invalid Changes data: {shown}")));
    };
    let ret_is_highstate = map.get("ret").is_some_and(|r| !r.is_null())
        && map.get("out").and_then(Value::as_str) == Some("highstate");
    if !ret_is_highstate {
        let nested = nested_at(changes, DETAIL_INDENT, ctx.color);
        return Ok((true, format!("\n{}", py_rstrip(&nested))));
    }
    let Some(Value::Object(hosts)) = map.get_mut("ret") else {
        return Err(Raised);
    };
    let pad = " ".repeat(DETAIL_INDENT);
    let mut text = String::new();
    let mut changed = false;
    for (host, hostdata) in hosts.iter_mut() {
        let (block, c) = host::format_host(host, hostdata, 1, ctx)?;
        let lines: Vec<String> = split_lines(&block)
            .into_iter()
            .map(|l| format!("{pad}{l}"))
            .collect();
        text.push('\n');
        text.push_str(&lines.join("\n"));
        changed = changed || c;
    }
    Ok((changed, text))
}

/// The full block of a state. Like Salt's, it leaves the state with its
/// comment a string, `start_time` and `duration` set, and `duration`
/// in `ms`, which `nested` shows should a later state make Salt's raise.
pub(super) fn full(
    ctx: &Ctx,
    tcolor: &str,
    comps: &[String],
    ret: &mut Map<String, Value>,
    ctext: &str,
) -> Result<Vec<String>, Raised> {
    if comps.len() < 4 {
        return Err(Raised);
    }
    let endc = ctx.c(ENDC);
    let profile = ctx.opts.state_output_profile && ret.contains_key("start_time");
    let comment = comment(ret)?;
    ret.entry("start_time").or_insert_with(|| "".into());
    let duration = ret.entry("duration").or_insert_with(|| "".into());
    if *duration != "" {
        *duration = format!("{} ms", python::str(duration)).into();
    }
    let mut lines = vec![
        format!("{tcolor}----------{endc}"),
        format!("    {tcolor}      ID: {}{endc}", comps[1]),
        format!("    {tcolor}Function: {}.{}{endc}", comps[0], comps[3]),
        format!(
            "    {tcolor}  Result: {}{endc}",
            python::str(&ret["result"])
        ),
        format!("    {tcolor} Comment: {comment}{endc}"),
    ];
    if profile {
        let start = python::str(&ret["start_time"]);
        let duration = python::str(&ret["duration"]);
        lines.push(format!("    {tcolor} Started: {start}{endc}"));
        lines.push(format!("    {tcolor}Duration: {duration}{endc}"));
    }
    if comps[1] != comps[2] {
        lines.insert(3, format!("    {tcolor}    Name: {}{endc}", comps[2]));
    }
    lines.push(format!("{tcolor}     Changes:   {ctext}{endc}"));
    if let Some(warnings) = ret.get("warnings") {
        let text = textwrap::fill(&py_join_lines(warnings)?, 80, DETAIL_INDENT);
        let text = text.trim_start_matches(py_isspace);
        lines.push(format!("   {} Warnings: {text}{endc}", ctx.c(LIGHT_RED)));
    }
    Ok(lines)
}

/// The comment as shown: made a string (in the return, as Salt does),
/// stripped, its lines indented under the first, then `data` appended.
fn comment(ret: &mut Map<String, Value>) -> Result<String, Raised> {
    let raw = ret.get_mut("comment").ok_or(Raised)?;
    if !raw.is_string() {
        *raw = python::str(raw).into();
    }
    let raw = raw.as_str().unwrap_or_default();
    let newline = format!("\n{}", " ".repeat(DETAIL_INDENT));
    let mut comment = py_strip(raw).replace('\n', &newline);
    match ret.get("data") {
        None => {}
        Some(Value::Array(items)) => {
            for item in items {
                comment = format!("{comment} {}", python::str(item));
            }
        }
        Some(Value::Object(map)) => {
            for (key, value) in map {
                comment = format!("{comment}\n\t\t{key}: {}", python::str(value));
            }
        }
        Some(other) => comment = format!("{comment} {}", python::str(other)),
    }
    Ok(comment)
}

/// A state on one line (`_format_terse`), aligned when `state_tabular`.
pub(super) fn terse(
    ctx: &Ctx,
    tcolor: &str,
    comps: &[String],
    ret: &Map<String, Value>,
) -> Result<String, Raised> {
    let [fun, _, name, ..] = comps else {
        return Err(Raised);
    };
    let state = comps.last().map_or("", String::as_str);
    let result = match &ret["result"] {
        Value::Bool(false) => "Failed",
        Value::Null => "Differs",
        _ if python::truthy(ret.get("changes").unwrap_or(&Value::Null)) => "Changed",
        _ => "Clean",
    };
    let (endc, light_red) = (ctx.c(ENDC), ctx.c(LIGHT_RED));
    // The warnings are part of the format string Salt fills in.
    let warnings = match ret.get("warnings") {
        Some(w) => Some(format_literal(&py_join_lines(w)?)?),
        None => None,
    };
    let profile = match ret.get("start_time") {
        Some(start) if ctx.opts.state_output_profile => {
            let duration = ret.get("duration").ok_or(Raised)?;
            Some((python::str(start), python::str(duration)))
        }
        _ => None,
    };
    let mut line = String::new();
    if ctx.opts.state_tabular {
        if let Some(w) = warnings {
            line.push_str(&format!("{light_red}Warnings:\n{w}{endc}\n"));
        }
        line.push_str(tcolor);
        if let Some((start, duration)) = profile {
            line.push_str(&format!("{start} [{duration:>7} ms] "));
        }
        line.push_str(&format!(
            "{fun:>10}.{state:<10} {result:7}   Name: {name}{endc}"
        ));
    } else {
        if let Some(w) = warnings {
            line.push_str(&format!("{light_red}Warnings:\n{w}{endc}"));
        }
        line.push_str(&format!(
            " {tcolor} Name: {name} - Function: {fun}.{state} - Result: {result}"
        ));
        if let Some((start, duration)) = profile {
            line.push_str(&format!(" - Started: {start} - Duration: {duration} ms"));
        }
        line.push_str(endc);
    }
    Ok(line)
}

/// Text that `str.format` reads as a format string: doubled braces are
/// one; a lone brace would be a field, which maid does not fill (Salt's
/// raises or prints what the field names).
fn format_literal(text: &str) -> Result<String, Raised> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if (c == '{' || c == '}') && chars.next_if_eq(&c).is_none() {
            return Err(Raised);
        }
        out.push(c);
    }
    Ok(out)
}
