//! Salt's `cmd` module: run commands on the minion through the host's
//! `exec` capability.
//!
//! As in Salt, a command given as one string runs through a shell when the
//! call comes from the master (`python_shell` defaults to true there) and is
//! split with shell-like quoting rules and run directly with
//! `python_shell=False`. The agent starts a shell only when the plugin's
//! grants include `shell`, so an operator can hand out `cmd` for plain
//! programs and still refuse `sh -c`.

use std::collections::BTreeMap;
use std::time::Duration;

use maid_sdk::host::{self, Command, Output};
use maid_sdk::{Capability, Error, Function, Plugin, export_plugin, function};
use serde::Deserialize;
use serde_json::{Value, json};

struct Cmd;

/// The options `cmd.run`, `cmd.run_all`, `cmd.retcode`, ... share, as Salt
/// names them.
#[derive(Deserialize)]
struct RunArgs {
    cmd: Value,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    stdin: Option<String>,
    #[serde(default)]
    runas: Option<String>,
    #[serde(default)]
    shell: Option<String>,
    #[serde(default)]
    python_shell: Option<bool>,
    #[serde(default)]
    env: Option<Env>,
    #[serde(default)]
    rstrip: Option<bool>,
    #[serde(default)]
    timeout: Option<f64>,
    #[serde(default)]
    ignore_retcode: bool,
    #[serde(default)]
    hide_output: bool,
    #[serde(default)]
    success_retcodes: Option<Vec<i32>>,
}

/// Salt accepts `env` as a mapping or as a list of one-key mappings.
#[derive(Deserialize)]
#[serde(untagged)]
enum Env {
    Map(BTreeMap<String, Value>),
    List(Vec<BTreeMap<String, Value>>),
}

const RUN_ARGS: &[&str] = &[
    "cmd",
    "cwd",
    "stdin",
    "runas",
    "shell",
    "python_shell",
    "env",
    "rstrip",
    "timeout",
    "ignore_retcode",
    "hide_output",
    "success_retcodes",
    "output_loglevel",
    "**kwargs",
];

const DEFAULT_SHELL: &str = "/bin/sh";

/// How one run went, before each function shapes its return.
struct Ran {
    out: Output,
    /// Retcode after `success_retcodes`, as the job should see it.
    retcode: i32,
}

/// A value as the command (or an environment value) Salt hands its shell:
/// Python's `str()`. The master reads command-line words as YAML, so
/// `cmd.run false` arrives as a boolean and Salt runs `False` (127), as
/// `null` runs `None`.
fn scalar_to_string(v: &Value) -> String {
    maid_sdk::python::str(v)
}

fn argv(a: &RunArgs) -> Result<Vec<String>, Error> {
    let shell = || a.shell.clone().unwrap_or_else(|| DEFAULT_SHELL.into());
    match &a.cmd {
        Value::Array(items) => {
            let words = items.iter().map(scalar_to_string);
            if a.python_shell.unwrap_or(true) {
                // As `Popen(list, shell=True)`, which Salt calls: the first
                // item is the command line, the rest the shell's `$0`, `$1`….
                Ok([shell(), "-c".into()].into_iter().chain(words).collect())
            } else {
                Ok(words.collect())
            }
        }
        Value::Object(_) => Err(Error::bad_arguments("cmd must be a string or a list")),
        scalar => {
            let cmd = scalar_to_string(scalar);
            if a.python_shell.unwrap_or(true) {
                Ok(vec![shell(), "-c".into(), cmd])
            } else {
                shlex::split(&cmd).ok_or_else(|| {
                    Error::bad_arguments(format!("cannot split command (unbalanced quotes): {cmd}"))
                })
            }
        }
    }
}

fn run(a: &RunArgs, merge_stderr: bool) -> Result<Ran, Error> {
    run_inner(a, merge_stderr, None)
}

/// [`run`] with `bytes` on standard input instead of `stdin=`.
fn run_with_stdin(a: &RunArgs, bytes: Vec<u8>) -> Result<Ran, Error> {
    run_inner(a, false, Some(bytes))
}

fn run_inner(a: &RunArgs, merge_stderr: bool, input: Option<Vec<u8>>) -> Result<Ran, Error> {
    let argv = argv(a)?;
    if argv.is_empty() || argv[0].is_empty() {
        return Err(Error::bad_arguments("cmd is empty"));
    }
    let mut cmd = Command::from_argv(argv).merge_stderr(merge_stderr);
    if let Some(cwd) = &a.cwd {
        cmd = cmd.cwd(cwd.clone());
    }
    if let Some(user) = &a.runas {
        cmd = cmd.runas(user.clone());
    }
    if let Some(stdin) = &a.stdin {
        cmd = cmd.stdin(stdin.as_bytes().to_vec());
    }
    if let Some(bytes) = input {
        cmd = cmd.stdin(bytes);
    }
    if let Some(t) = a.timeout {
        if !(t.is_finite() && t > 0.0) {
            return Err(Error::bad_arguments(
                "timeout must be a positive number of seconds",
            ));
        }
        cmd = cmd.timeout(Duration::from_secs_f64(t));
    }
    let pairs: Vec<(String, Value)> = match &a.env {
        None => Vec::new(),
        Some(Env::Map(m)) => m.clone().into_iter().collect(),
        Some(Env::List(l)) => l.iter().flat_map(|m| m.clone()).collect(),
    };
    for (k, v) in pairs {
        cmd = cmd.env(k, scalar_to_string(&v));
    }
    let out = cmd.output()?;
    if out.timed_out {
        let secs = a.timeout.unwrap_or_default();
        return Err(Error::failed(format!("Timed out after {secs} seconds"), 1));
    }
    let mut retcode = out.retcode;
    if let Some(ok) = &a.success_retcodes
        && ok.contains(&retcode)
    {
        retcode = 0;
    }
    if !a.ignore_retcode && retcode != 0 {
        host::set_retcode(retcode);
    }
    if a.ignore_retcode && retcode != 0 {
        host::debug(&format!("ignoring retcode {retcode}"));
    }
    Ok(Ran { out, retcode })
}

fn text(bytes: &[u8], a: &RunArgs) -> String {
    if a.hide_output {
        return String::new();
    }
    let s = String::from_utf8_lossy(bytes);
    if a.rstrip.unwrap_or(true) {
        s.trim_end().to_string()
    } else {
        s.into_owned()
    }
}

#[derive(Deserialize)]
struct Which {
    cmd: Value,
}

/// Salt's `cmd.which`, through the host: the path, when the grants would
/// start the program.
fn which(cmd: &Value) -> Result<Option<String>, Error> {
    host::which(&scalar_to_string(cmd))
}

#[derive(Deserialize)]
struct ScriptArgs {
    source: String,
    /// The environment `source` is fetched from (its own `?saltenv=`
    /// wins).
    #[serde(default)]
    saltenv: Option<Value>,
    #[serde(default)]
    args: Option<Value>,
    /// Salt renders the script with this engine first; maid does not, and
    /// says so rather than run the unrendered text.
    #[serde(default)]
    template: Option<Value>,
    #[serde(flatten)]
    run: ScriptRun,
}

/// The `cmd.run_all` options `cmd.script` passes on.
#[derive(Deserialize)]
struct ScriptRun {
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    stdin: Option<String>,
    #[serde(default)]
    runas: Option<String>,
    #[serde(default)]
    env: Option<Env>,
    #[serde(default)]
    timeout: Option<f64>,
    #[serde(default)]
    hide_output: bool,
    #[serde(default)]
    success_retcodes: Option<Vec<i32>>,
}

const SCRIPT_ARGS: &[&str] = &[
    "source",
    "args",
    "cwd",
    "stdin",
    "runas",
    "shell",
    "python_shell",
    "env",
    "template",
    "timeout",
    "hide_output",
    "success_retcodes",
    "saltenv",
    "output_loglevel",
    "**kwargs",
];

/// What a script's first line asks to run it with: `#!/usr/bin/env bash`
/// and `#!/bin/bash -e` both work; no `#!` means `/bin/sh`, as a shell
/// runs such a file.
fn interpreter(script: &[u8]) -> Vec<String> {
    let Some(line) = script.strip_prefix(b"#!") else {
        return vec![DEFAULT_SHELL.into()];
    };
    let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace().map(str::to_string);
    let Some(first) = words.next() else {
        return vec![DEFAULT_SHELL.into()];
    };
    // The kernel passes the rest of the line as one argument.
    let rest: Vec<String> = words.collect();
    let mut argv = vec![first];
    if !rest.is_empty() {
        argv.push(rest.join(" "));
    }
    // `env NAME` is how scripts find their interpreter on the PATH; the
    // agent does that lookup itself (and `env` would run anything).
    if argv[0].ends_with("/env") && argv.len() == 2 {
        argv.remove(0);
    }
    argv
}

/// Fetch a salt:// script and run it with ARGS; return {pid, retcode, stdout, stderr}
// Salt's `cmd.script`: fetch SOURCE under the fetch grant and run it
// with ARGS under the exec grant. The script reaches its interpreter on
// standard input (`/dev/stdin`), so nothing is written to disk; a script
// that reads its own standard input cannot also take `stdin=`.
#[function(args = SCRIPT_ARGS)]
fn script(a: ScriptArgs) -> Result<Value, Error> {
    use std::io::Read;
    if let Some(engine) = a
        .template
        .as_ref()
        .filter(|t| !matches!(t, Value::Null | Value::Bool(false)) && t.as_str() != Some(""))
    {
        return Err(Error::bad_arguments(format!(
            "cmd.script does not render scripts (template={}): render it into the \
             file root, or use a file.managed state with template and a cmd.run of it",
            scalar_to_string(engine)
        )));
    }
    let cache_error =
        || json!({"pid": 0, "retcode": 1, "stdout": "", "stderr": "", "cache_error": true});
    // Salt returns this shape, retcode and all, without failing the job.
    let saltenv = a.saltenv.as_ref().map(scalar_to_string);
    let url = maid_sdk::salt::url_in(&a.source, saltenv.as_deref());
    let Some(mut source) = host::fetch(&url)? else {
        return Ok(cache_error());
    };
    let mut body = Vec::new();
    source
        .read_to_end(&mut body)
        .map_err(|e| Error::failed(format!("{}: {e}", a.source), 1))?;
    if a.run.stdin.is_some() {
        return Err(Error::bad_arguments(
            "cmd.script feeds the script to its interpreter on standard input, so stdin= \
             cannot be given as well",
        ));
    }
    let mut argv = interpreter(&body);
    argv.push("/dev/stdin".into());
    match &a.args {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => argv.extend(shlex::split(s).ok_or_else(|| {
            Error::bad_arguments(format!("cannot split args (unbalanced quotes): {s}"))
        })?),
        Some(Value::Array(items)) => argv.extend(items.iter().map(scalar_to_string)),
        Some(other) => argv.push(scalar_to_string(other)),
    }
    let run_args = RunArgs {
        cmd: json!(argv),
        cwd: a.run.cwd,
        stdin: None,
        runas: a.run.runas,
        shell: None,
        python_shell: Some(false),
        env: a.run.env,
        rstrip: None,
        timeout: a.run.timeout,
        ignore_retcode: false,
        hide_output: a.run.hide_output,
        success_retcodes: a.run.success_retcodes,
    };
    let ran = run_with_stdin(&run_args, body)?;
    Ok(json!({
        "pid": ran.out.pid,
        "retcode": ran.retcode,
        "stdout": text(&ran.out.stdout, &run_args),
        "stderr": text(&ran.out.stderr, &run_args),
    }))
}

/// Run a command; return its output, stderr merged into stdout
#[function(name = "run", args = RUN_ARGS)]
fn run_(a: RunArgs) -> Result<String, Error> {
    Ok(text(&run(&a, true)?.out.stdout, &a))
}

/// Run a command through the shell; return its output
#[function(args = RUN_ARGS)]
fn shell(mut a: RunArgs) -> Result<String, Error> {
    a.python_shell = Some(true);
    Ok(text(&run(&a, true)?.out.stdout, &a))
}

/// Run a command; return its standard output only
#[function(args = RUN_ARGS)]
fn run_stdout(a: RunArgs) -> Result<String, Error> {
    Ok(text(&run(&a, false)?.out.stdout, &a))
}

/// Run a command; return its standard error only
#[function(args = RUN_ARGS)]
fn run_stderr(a: RunArgs) -> Result<String, Error> {
    Ok(text(&run(&a, false)?.out.stderr, &a))
}

/// Run a command; return {pid, retcode, stdout, stderr}
#[function(args = RUN_ARGS)]
fn run_all(a: RunArgs) -> Result<Value, Error> {
    let ran = run(&a, false)?;
    Ok(json!({
        "pid": ran.out.pid,
        "retcode": ran.retcode,
        "stdout": text(&ran.out.stdout, &a),
        "stderr": text(&ran.out.stderr, &a),
    }))
}

/// Run a command; return its exit code
#[function(args = RUN_ARGS)]
fn retcode(a: RunArgs) -> Result<i32, Error> {
    Ok(run(&a, false)?.retcode)
}

/// Return the path of an executable, or None
#[function(name = "which", args = ["cmd"])]
fn which_(a: Which) -> Result<Option<String>, Error> {
    which(&a.cmd)
}

/// Return whether an executable is available
#[function(args = ["cmd"])]
fn has_exec(a: Which) -> Result<bool, Error> {
    Ok(which(&a.cmd)?.is_some())
}

impl Plugin for Cmd {
    const MODULE: &'static str = "cmd";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] =
        &[Capability::Exec, Capability::Shell, Capability::Fetch];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            run_, shell, run_stdout, run_stderr, run_all, retcode, which_, has_exec, script,
        ]
    }
}

export_plugin!(Cmd);
