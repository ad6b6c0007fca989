//! `file.managed`, as Salt 3008.4's state runs it: the contents made from
//! `contents` (a string or a list, `contents_newline`, a template) or a
//! source (`salt://`, a local file, or the first of a list that exists,
//! rendered with `template: jinja`), predicted with
//! `file.check_managed_changes` under `test=True` and made so with
//! `file.manage_file`. What Salt's `get_managed` does on the minion —
//! fetch the source, render it — is done here, where `fetch` is granted;
//! the bytes go to the file module as `maid_source`.

use serde_json::{Map, Value, json};

use super::difflib::str_splitlines;
use super::{
    Step, Stop, arg, base64, call, changes, denied, error, fetch_bytes, finish, flag, name_of,
    normalize_mode, probe, set, start, user_of,
};
use crate::compile::Obj;
use crate::py::{py_str, truthy};
use crate::states::Env;

/// The state's arguments, read once.
struct Args<'a> {
    low: &'a Obj,
    name: String,
    user: Value,
    mode: Option<String>,
    keep_mode: bool,
    saltenv: String,
}

pub fn managed(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, run(low, env))
}

pub(super) fn run(low: &Obj, env: &mut Env) -> Step<Obj> {
    let name = name_of(low);
    let mut ret = start(&name, json!(true));
    if name.is_empty() {
        return Ok(error(ret, "Destination file name is required"));
    }
    let mode_v = arg(low, "mode");
    let keep_mode = mode_v.as_str().is_some_and(|m| m.to_lowercase() == "keep");
    let a = Args {
        low,
        name: name.clone(),
        user: user_of(low),
        mode: if keep_mode {
            None
        } else {
            normalize_mode(mode_v)
        },
        keep_mode,
        saltenv: low.get("__env__").map_or("base".into(), py_str),
    };
    let source = arg(low, "source");
    let contents_count = ["contents", "contents_pillar", "contents_grains"]
        .iter()
        .filter(|k| !arg(low, k).is_null())
        .count();
    if let Some(why) = conflict(truthy(source), keep_mode, contents_count) {
        return Ok(error(ret, why));
    }
    let replace = flag(low, "replace", true) && (truthy(source) || contents_count > 0);
    if low.contains_key("file_mode") {
        set(
            &mut ret,
            "warnings",
            json!([
                "The 'file_mode' argument will be ignored.  Please use 'mode' instead to set file permissions."
            ]),
        );
    }
    let contents = match contents(&a, env, &mut ret)? {
        Ok(c) => c,
        Err(failed) => return Ok(failed),
    };
    if !flag(low, "create", true) && !probe(env, &name)?.file {
        set(
            &mut ret,
            "comment",
            json!(format!(
                "File {name} is not present and is not set for creation"
            )),
        );
        return Ok(ret);
    }
    if !name.starts_with('/') {
        return Ok(error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        ));
    }
    let target = probe(env, &name)?;
    if target.dir {
        return Ok(error(
            ret,
            format!("Specified target {name} is a directory"),
        ));
    }
    let context = arg(low, "context");
    if !context.is_null() && !context.is_object() {
        return Ok(error(ret, "Context must be formed as a dict"));
    }
    let defaults = arg(low, "defaults");
    if truthy(defaults) && !defaults.is_object() {
        return Ok(error(ret, "Defaults must be formed as a dict"));
    }
    if !replace && target.exists {
        return perms_only(&a, env, ret);
    }
    if truthy(arg(low, "check_cmd")) {
        return Ok(error(
            ret,
            "check_cmd is not supported: maid's file module has no temporary file to run it on",
        ));
    }
    let source = match source_list(env, source, &a.saltenv)? {
        Ok(s) => s,
        Err(why) => return Ok(error(ret, format!("Unable to manage file: {why}"))),
    };
    let got = match (&contents, &source) {
        (None, Some(src)) => get_managed(&a, env, src)?,
        _ => Ok(Got::Nothing),
    };
    if env.test {
        return predict(&a, env, ret, &source, contents, got);
    }
    let got = match got {
        Ok(g) => g,
        Err(comment) => return Ok(error(ret, format!("Unable to manage file: {comment}"))),
    };
    manage(&a, env, ret, &source, contents, got)
}

/// Arguments that cannot go together, in Salt's words.
fn conflict(source: bool, keep_mode: bool, contents_count: usize) -> Option<&'static str> {
    if source && contents_count > 0 {
        Some(
            "'source' cannot be used in combination with 'contents', 'contents_pillar', or 'contents_grains'",
        )
    } else if keep_mode && contents_count > 0 {
        Some(
            "Mode preservation cannot be used in combination with 'contents', 'contents_pillar', or 'contents_grains'",
        )
    } else if contents_count > 1 {
        Some("Only one of 'contents', 'contents_pillar', and 'contents_grains' is permitted")
    } else {
        None
    }
}

/// `contents`, `contents_pillar` or `contents_grains` made into the
/// file's text (`None`: none was given); `Err` is the failed return.
fn contents(a: &Args<'_>, env: &mut Env, ret: &mut Obj) -> Step<Result<Option<String>, Obj>> {
    let low = a.low;
    let fail = |ret: &Obj, msg: String| Ok(Err(error(ret.clone(), msg)));
    let delimiter = low.get("contents_delimiter").map_or(":".into(), py_str);
    let use_contents = if let Some(p) = low.get("contents_pillar").filter(|v| !v.is_null()) {
        // maid's states see no pillar but the job's own `pillar=`, which
        // is not handed to state functions.
        return fail(ret, format!("Pillar {} does not exist", py_str(p)));
    } else if let Some(g) = low.get("contents_grains").filter(|v| !v.is_null()) {
        let keys: Vec<Value> = match g {
            Value::Array(list) => list.clone(),
            one => vec![one.clone()],
        };
        let mut found = Vec::new();
        for key in &keys {
            match maid_salt::data::traverse(&env.grains, &py_str(key), &delimiter).cloned() {
                Some(v) => found.push(v),
                None => return fail(ret, format!("Grain {} does not exist", py_str(key))),
            }
        }
        match (g.is_array(), found.pop()) {
            (false, Some(one)) => one,
            (_, last) => {
                found.extend(last);
                json!(found.iter().map(py_str).collect::<Vec<_>>().join("\n"))
            }
        }
    } else if let Some(c) = low.get("contents").filter(|v| !v.is_null()) {
        c.clone()
    } else {
        return Ok(Ok(None));
    };
    if !flag(low, "allow_empty", true) && !truthy(&use_contents) {
        let id = if let Some(g) = low.get("contents_grains").filter(|v| !v.is_null()) {
            format!("contents_grains {}", py_str(g))
        } else {
            "'contents'".into()
        };
        return fail(
            ret,
            format!(
                "{id} value would result in empty contents. Set allow_empty to True to allow the managed file to be empty."
            ),
        );
    }
    let parts = validate_str_list(&use_contents);
    if parts.is_empty() {
        return fail(ret, "Contents specified by contents/contents_pillar/contents_grains is not a string or list of strings, and is not binary data. SLS is likely malformed.".into());
    }
    let mut text = String::new();
    for part in &parts {
        for line in str_splitlines(part) {
            text.push_str(line.trim_end_matches('\n').trim_end_matches('\r'));
            text.push('\n');
        }
    }
    if !flag(low, "contents_newline", true) {
        text = text
            .trim_end_matches('\n')
            .trim_end_matches('\r')
            .to_string();
    }
    let template = arg(low, "template");
    if truthy(template) {
        match render(a, env, &text, "", &context_dict(low), false) {
            Ok(t) => text = t,
            Err(comment) => return fail(ret, comment),
        }
    }
    Ok(Ok(Some(text)))
}

/// `_validate_str_list`.
pub(super) fn validate_str_list(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().map(py_str).collect(),
        other => vec![py_str(other)],
    }
}

/// `defaults` updated with `context`: what a template sees besides Salt's.
fn context_dict(low: &Obj) -> Map<String, Value> {
    let mut out = arg(low, "defaults")
        .as_object()
        .cloned()
        .unwrap_or_default();
    if let Some(c) = arg(low, "context").as_object() {
        out.extend(c.clone());
    }
    out
}

/// A value as a Jinja literal.
fn literal(v: &Value) -> String {
    match v {
        Value::Null => "none".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(_) => v.to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(literal).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => {
            let items: Vec<String> = o
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), literal(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// Render `text` with the state's `template` (Jinja only): Salt's
/// context, `vars`, and (for a source) the file's own names.
fn render(
    a: &Args<'_>,
    env: &Env,
    text: &str,
    url: &str,
    vars: &Map<String, Value>,
    source: bool,
) -> Result<String, String> {
    let template = py_str(arg(a.low, "template"));
    if template != "jinja" {
        return Err(format!(
            "Specified template format {template} is not supported"
        ));
    }
    let mut names = Map::new();
    if source {
        names.insert("name".into(), json!(a.name));
        names.insert("source".into(), json!(url));
        names.insert("user".into(), a.user.clone());
        names.insert("group".into(), arg(a.low, "group").clone());
        names.insert(
            "mode".into(),
            a.mode.clone().map_or(Value::Null, Value::String),
        );
        names.insert("attrs".into(), arg(a.low, "attrs").clone());
    }
    names.extend(vars.clone());
    let ident = |k: &str| {
        !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !k.starts_with(|c: char| c.is_ascii_digit())
    };
    let mut preamble = String::new();
    for (k, v) in names.iter().filter(|(k, _)| ident(k)) {
        preamble.push_str(&format!("{{% set {k} = {} %}}", literal(v)));
    }
    let ctx = crate::render::context(
        env.grains.clone(),
        Map::new(),
        a.saltenv.clone(),
        Vec::new(),
    );
    let path = url.strip_prefix("salt://").unwrap_or(url);
    crate::render::jinja(&ctx, &format!("{preamble}{text}"), path, &a.saltenv)
}

/// `file.source_list`: a list's first source that exists (`None`: no
/// source); `Err` when none does.
fn source_list(
    env: &mut Env,
    source: &Value,
    saltenv: &str,
) -> Step<Result<Option<String>, String>> {
    let items = match source {
        Value::Null => return Ok(Ok(None)),
        Value::Array(items) => items,
        one if !truthy(one) => return Ok(Ok(None)),
        one => return Ok(Ok(Some(py_str(one)))),
    };
    for item in items {
        let url = match item {
            Value::Object(o) if o.len() == 1 => o.keys().next().cloned().unwrap_or_default(),
            Value::Object(_) => continue,
            other => py_str(other),
        };
        let found = if url.starts_with("salt://") {
            fetch_bytes(&url, saltenv)?.is_some()
        } else if let Some(path) = local(&url) {
            probe(env, &path)?.exists
        } else {
            false
        };
        if found {
            return Ok(Ok(Some(url)));
        }
    }
    Ok(Err("none of the specified sources were found".into()))
}

/// A local source's path (`/path`, `file:///path`).
fn local(url: &str) -> Option<String> {
    if url.starts_with('/') {
        return Some(url.into());
    }
    url.strip_prefix("file://").map(String::from)
}

/// What `get_managed` found for the source.
enum Got {
    /// No source.
    Nothing,
    /// Its bytes (fetched, or rendered).
    Data(Vec<u8>),
    /// A local file, read by the file module itself.
    Local(String),
}

/// `file.get_managed`: the source fetched (and rendered); `Err` is
/// Salt's comment for why it could not be.
fn get_managed(a: &Args<'_>, env: &mut Env, source: &str) -> Step<Result<Got, String>> {
    let template = truthy(arg(a.low, "template"));
    let text = if source.starts_with("salt://") {
        match fetch_bytes(source, &a.saltenv)? {
            None => {
                return Ok(Err(format!(
                    "Source file {source} not found in saltenv '{}'",
                    a.saltenv
                )));
            }
            Some(bytes) if !template => return Ok(Ok(Got::Data(bytes))),
            Some(bytes) => match String::from_utf8(bytes) {
                Ok(t) => t,
                // A binary template is used as it is.
                Err(e) => return Ok(Ok(Got::Data(e.into_bytes()))),
            },
        }
    } else if let Some(path) = local(source) {
        if !probe(env, &path)?.exists {
            return Ok(Err(format!("Local file source {path} does not exist")));
        }
        if !template {
            return Ok(Ok(Got::Local(path)));
        }
        match call(env, "read", &[("path", json!(path))]) {
            Ok(v) => py_str(&v),
            Err(e) => return Ok(Err(denied(e)?)),
        }
    } else if truthy(arg(a.low, "source_hash")) || flag(a.low, "skip_verify", false) {
        return Ok(Err(format!(
            "Unable to fetch {source}: maid fetches salt:// and local sources only"
        )));
    } else {
        return Ok(Err(format!(
            "Unable to verify upstream hash of source file {source}, please set source_hash or set skip_verify to True"
        )));
    };
    match render(a, env, &text, source, &context_dict(a.low), true) {
        Ok(t) => Ok(Ok(Got::Data(t.into_bytes()))),
        Err(comment) => Ok(Err(comment)),
    }
}

/// The arguments `check_managed_changes` and `manage_file` share.
fn file_args(
    a: &Args<'_>,
    source: &Option<String>,
    contents: &Option<String>,
    got: &Got,
) -> Vec<(&'static str, Value)> {
    let low = a.low;
    let mut kw: Vec<(&str, Value)> = vec![
        ("name", json!(a.name)),
        ("source", source.clone().map_or(Value::Null, Value::String)),
        ("user", a.user.clone()),
        ("group", arg(low, "group").clone()),
        ("mode", a.mode.clone().map_or(Value::Null, Value::String)),
        ("attrs", arg(low, "attrs").clone()),
        ("saltenv", json!(a.saltenv)),
        (
            "contents",
            contents.clone().map_or(Value::Null, Value::String),
        ),
        ("follow_symlinks", json!(flag(low, "follow_symlinks", true))),
    ];
    if a.keep_mode {
        kw.push(("keep_mode", json!(true)));
    }
    if let Got::Data(bytes) = got {
        kw.push(("maid_source", json!(base64(bytes))));
    }
    kw
}

/// `test=True`: what would change, from `file.check_managed_changes`.
fn predict(
    a: &Args<'_>,
    env: &mut Env,
    mut ret: Obj,
    source: &Option<String>,
    contents: Option<String>,
    got: Result<Got, String>,
) -> Step<Obj> {
    let name = &a.name;
    let got = match got {
        Ok(g) => g,
        Err(comment) => return Ok(error(ret, comment)),
    };
    let mut kw = file_args(a, source, &contents, &got);
    kw.push(("new_file_diff", json!(flag(a.low, "new_file_diff", false))));
    // So that a parents' mode the run would be refused is refused here.
    kw.push(("maid_makedirs", json!(flag(a.low, "makedirs", false))));
    kw.push(("maid_dir_mode", arg(a.low, "dir_mode").clone()));
    let check = match call(env, "check_managed_changes", &kw) {
        Ok(c) => c,
        Err(e) => return Ok(error(ret, format!("Unable to manage file: {}", denied(e)?))),
    };
    match check {
        Value::Array(pair) => {
            set(
                &mut ret,
                "result",
                pair.first().cloned().unwrap_or(Value::Null),
            );
            set(
                &mut ret,
                "comment",
                pair.get(1).cloned().unwrap_or(json!("")),
            );
        }
        Value::Object(c) if !c.is_empty() => {
            let mut c = c;
            if c.contains_key("diff") && !flag(a.low, "show_changes", true) {
                c.insert("diff".into(), json!("<show_changes=False>"));
            }
            set(&mut ret, "changes", Value::Object(c));
            set(&mut ret, "result", Value::Null);
            set(
                &mut ret,
                "comment",
                json!(format!(
                    "The file {name} is set to be changed\nNote: No changes made, actual changes may\nbe different due to other states."
                )),
            );
        }
        _ => {
            set(&mut ret, "result", json!(true));
            set(
                &mut ret,
                "comment",
                json!(format!("The file {name} is in the correct state")),
            );
        }
    }
    Ok(ret)
}

/// Make the file so, with `file.manage_file`.
fn manage(
    a: &Args<'_>,
    env: &mut Env,
    ret: Obj,
    source: &Option<String>,
    contents: Option<String>,
    got: Got,
) -> Step<Obj> {
    let low = a.low;
    let mut kw = file_args(a, source, &contents, &got);
    if let Got::Local(path) = &got {
        kw.push(("sfn", json!(path)));
    }
    kw.push(("ret", Value::Object(ret.clone())));
    kw.push(("makedirs", json!(flag(low, "makedirs", false))));
    kw.push(("show_changes", json!(flag(low, "show_changes", true))));
    kw.push(("dir_mode", arg(low, "dir_mode").clone()));
    match call(env, "manage_file", &kw) {
        Ok(Value::Object(r)) => Ok(r),
        Ok(other) => Err(Stop::Raised(format!("file.manage_file returned {other}"))),
        Err(e) => {
            let why = denied(e)?;
            let mut ret = error(ret, format!("Unable to manage file: {why}"));
            changes(&mut ret).clear();
            Ok(ret)
        }
    }
}

/// `replace: False` on a file that exists: only its permissions.
fn perms_only(a: &Args<'_>, env: &mut Env, ret: Obj) -> Step<Obj> {
    let name = &a.name;
    let kw = vec![
        ("name", json!(name)),
        ("ret", Value::Object(ret)),
        ("user", a.user.clone()),
        ("group", arg(a.low, "group").clone()),
        ("mode", a.mode.clone().map_or(Value::Null, Value::String)),
        ("attrs", arg(a.low, "attrs").clone()),
        (
            "follow_symlinks",
            json!(flag(a.low, "follow_symlinks", true)),
        ),
        ("test", json!(env.test)),
    ];
    let out = call(env, "check_perms", &kw).map_err(Stop::from)?;
    let mut ret = out
        .get(0)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let perms = out.get(1).cloned().unwrap_or(Value::Null);
    if env.test {
        let lmode = &perms["lmode"];
        let comment = match &a.mode {
            Some(mode) if !lmode.is_null() && json!(mode) != *lmode => {
                format!(
                    "File {name} will be updated with permissions {mode} from its current state of {}",
                    py_str(lmode)
                )
            }
            _ => format!("File {name} not updated"),
        };
        set(&mut ret, "comment", json!(comment));
    } else if changes(&mut ret).is_empty() && ret.get("result") == Some(&json!(true)) {
        set(
            &mut ret,
            "comment",
            json!(format!(
                "File {name} exists with proper permissions. No changes made."
            )),
        );
    }
    Ok(ret)
}
