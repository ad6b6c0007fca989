//! `maid call --local FUN [ARGS...]`: run one function on this machine with
//! no master, as `salt-call --local` does, and print `{"local": return}`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::output::OutputOpts;
use anyhow::bail;
use clap::Args;
use maid_agent::runtime::CallRequest;
use maid_agent::runtime::Failure;
use maid_agent::runtime::Runtime;
use maid_agent::salt::args::{load_args_and_kwargs, parse_cli};
use serde_json::{Map, Value};

use crate::setup::RuntimeOpts;
use crate::setup::Setup;

#[derive(Debug, Args)]
pub struct CallArgs {
    /// Run here, without a master (required: calls through a master are
    /// `maid run`).
    #[arg(long)]
    pub local: bool,

    #[command(flatten)]
    pub call: Invocation,

    #[command(flatten)]
    pub runtime: RuntimeOpts,
}

/// One function call and how to print its return: what `maid call --local`
/// and `maid plugin test` share.
#[derive(Debug, Args)]
pub struct Invocation {
    /// The function, `module.function` (e.g. `test.ping`, `cmd.run`).
    #[arg(required_unless_present_any = ["doc", "grains"])]
    pub fun: Option<String>,

    /// Arguments: `value` is positional, `key=value` is a keyword argument;
    /// values are read as YAML, as Salt reads them.
    pub args: Vec<String>,

    /// Print the documentation of every function whose name starts with
    /// FUN (every function without one), as `salt-call -d` does.
    #[arg(short = 'd', long = "doc", visible_alias = "documentation")]
    pub doc: bool,

    /// Print the grains this call would run with, as `salt-call -g`.
    #[arg(short = 'g', long, conflicts_with = "doc")]
    pub grains: bool,

    #[command(flatten)]
    pub output: OutputOpts,

    /// Serve `salt://` paths from DIR (repeatable).
    #[arg(long)]
    pub file_root: Vec<PathBuf>,

    /// Minion id the call runs as (grains `id`) [default: host name].
    #[arg(long)]
    pub id: Option<String>,

    /// Stop the call after SECONDS.
    #[arg(short = 't', long)]
    pub timeout: Option<f64>,

    /// Exit with the function's retcode, not 1 for any failure
    /// (salt-call's `--retcode-passthrough`).
    #[arg(long)]
    pub retcode_passthrough: bool,
}

/// The exit status for a retcode, as Python's `sys.exit(retcode)` gives it.
pub fn exit_status(retcode: i32) -> ExitCode {
    ExitCode::from((retcode & 0xff) as u8)
}

pub fn run(args: CallArgs) -> anyhow::Result<ExitCode> {
    if !args.local {
        bail!("maid call runs functions here and needs --local; to reach a fleet use `maid run`");
    }
    let setup = Setup::resolve(&args.runtime, true)?;
    invoke(&setup, &args.call, false)
}

/// Load the plugins of `setup`, run `call` with its grants, print
/// `{"local": return}` and exit as `salt-call` does: 0, 1 for any failure
/// (the retcode itself with `--retcode-passthrough`), 255 for an unknown
/// function. An `author` (`maid plugin test`) sees every return printed and
/// the retcode as the exit status.
pub fn invoke(setup: &Setup, call: &Invocation, author: bool) -> anyhow::Result<ExitCode> {
    call.output.prepare()?;
    if call.doc && !call.args.is_empty() {
        return Err(crate::master::Usage(
            "You can only get documentation for one method at one time",
        )
        .into());
    }
    let timeout = timeout_of(call)?;
    let id = call
        .id
        .clone()
        .or_else(|| setup.config.id.clone())
        .unwrap_or_else(maid_agent::grains::hostname);
    let runtime = setup.runtime(&setup.grains(&id), &call.file_root)?;
    let caller = Caller { id, timeout };
    let config = setup.resolved();
    let ran = crate::rt::block_on(async {
        runtime.load_dir(&setup.plugin_dir).await?;
        // As salt-call: the grains are detected before anything runs.
        let (grains, _) = maid_agent::grains::detected(&runtime, &caller.id, &config).await;
        runtime.grains().replace(grains.clone());
        if call.grains {
            return anyhow::Ok(Err(grains));
        }
        let (fun, positional, kwargs) = call_args(call)?;
        // As salt-call --local reads its own config's nodegroups and
        // file_roots: the config's `[master] nodegroups`, for a state
        // run's top file, and the environments this call serves.
        let kwargs = maid_master::jobs::with_master_opts(
            &fun,
            kwargs,
            &setup.config.master.nodegroups,
            &config.file_roots,
        );
        let outcome = runtime
            .call(caller.request(fun.clone(), positional, kwargs))
            .await;
        anyhow::Ok(Ok((fun, outcome)))
    })??;
    let (fun, outcome) = match ran {
        Ok(ran) => ran,
        Err(grains) => return print_grains(call, grains),
    };
    // salt-call names an unknown function on stderr and exits 255.
    if !author && outcome.failure == Some(Failure::NotAvailable) {
        eprintln!("{}", outcome.ret.as_str().unwrap_or_default());
        return Ok(ExitCode::from(255));
    }
    if !author && outcome.failure == Some(Failure::BadArguments) {
        return bad_arguments(&runtime, &caller, &fun, &outcome.ret);
    }
    if call.doc {
        print_docs(call.fun.as_deref().unwrap_or_default(), &outcome.ret);
        return Ok(ExitCode::SUCCESS);
    }
    Ok(print_return(call, outcome.ret, outcome.retcode, author))
}

/// `--timeout` as a duration, refused unless it is a positive number of
/// seconds a maid would take.
fn timeout_of(call: &Invocation) -> anyhow::Result<Option<Duration>> {
    Ok(match call.timeout {
        Some(t) if !(t.is_finite() && t > 0.0 && t <= maid_agent::protocol::MAX_TIMEOUT_SECS) => {
            bail!(
                "--timeout must be a positive number of seconds, at most {}",
                maid_agent::protocol::MAX_TIMEOUT_SECS
            )
        }
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    })
}

/// `-g`: print the grains the call would run with, as `{"local": grains}`.
fn print_grains(call: &Invocation, grains: Map<String, Value>) -> anyhow::Result<ExitCode> {
    if call.fun.is_some() {
        return Err(crate::master::Usage("-g/--grains does not accept any arguments").into());
    }
    // Salt's `grains` outputter is gone: `nested` prints it, unless
    // another is named.
    let mut data = Map::new();
    data.insert("local".into(), Value::Object(grains));
    call.output
        .out()
        .display_value(&Value::Object(data), call.output.out_indent);
    Ok(ExitCode::SUCCESS)
}

/// The function to run with its positional and keyword arguments, read
/// from the command line; `-d` runs `sys.doc` with none.
fn call_args(call: &Invocation) -> anyhow::Result<(String, Vec<Value>, Map<String, Value>)> {
    let (positional, mut kwargs) = parse_cli(&call.args);
    // As the minion reads a job's arguments (`load_args_and_kwargs`): a
    // string that reads `key=value` is a keyword argument there too.
    let positional = load_args_and_kwargs(positional, &mut kwargs);
    // `-d`: the documentation of every function, from `sys.doc`.
    let fun = match (&call.fun, call.doc) {
        (_, true) => "sys.doc".to_string(),
        (Some(fun), false) => fun.clone(),
        (None, false) => bail!("FUN is required"),
    };
    let (positional, kwargs) = if call.doc {
        (Vec::new(), Map::new())
    } else {
        (positional, kwargs)
    };
    Ok((fun, positional, kwargs))
}

/// Whom the calls of one invocation run as, and for how long.
struct Caller {
    /// The minion id (grains `id`).
    id: String,
    timeout: Option<Duration>,
}

impl Caller {
    /// A request to call `fun`: a jid of its own, by the user running
    /// `maid`.
    fn request(&self, fun: String, args: Vec<Value>, kwargs: Map<String, Value>) -> CallRequest {
        CallRequest {
            fun,
            args,
            kwargs,
            jid: maid_agent::jid::new_jid(),
            minion_id: self.id.clone(),
            user: std::env::var("USER").ok(),
            timeout: self.timeout,
            ..Default::default()
        }
    }
}

/// `fun` refused its arguments (`why`). salt-call says so on stderr,
/// prints the function's documentation as its usage, and exits 1.
fn bad_arguments(
    runtime: &Runtime,
    caller: &Caller,
    fun: &str,
    why: &Value,
) -> anyhow::Result<ExitCode> {
    let why = why.as_str().unwrap_or_default();
    let why = why
        .strip_prefix("Passed invalid arguments: ")
        .unwrap_or(why);
    eprint!("\nPassed invalid arguments: {why}.\n\nUsage:\n");
    let docs = crate::rt::block_on(runtime.call(caller.request(
        "sys.doc".into(),
        vec![Value::String(fun.to_string())],
        Map::new(),
    )))?;
    // Python prints a function without a docstring's `None`.
    match docs.ret.get(fun).and_then(Value::as_str) {
        Some(doc) => outln!("{doc}"),
        None => outln!("None"),
    }
    Ok(ExitCode::FAILURE)
}

/// `-d`'s `sys.doc` return (`docs`) as salt-call's `print_docs` prints
/// it: `NAME:`, the text and a blank line for each documented function
/// whose name starts with `prefix`, sorted.
fn print_docs(prefix: &str, docs: &Value) {
    let docs: std::collections::BTreeMap<&String, &Value> =
        docs.as_object().into_iter().flatten().collect();
    for (name, doc) in docs {
        if let Some(text) = doc.as_str().filter(|t| !t.is_empty())
            && name.starts_with(prefix)
        {
            outln!("{name}:\n{text}\n");
        }
    }
}

/// Print `{"local": ret}` and give the exit status: the retcode for an
/// `author` or with `--retcode-passthrough`, else salt-call's 1 for any
/// failure.
fn print_return(call: &Invocation, ret: Value, retcode: i32, author: bool) -> ExitCode {
    let mut data = Map::new();
    data.insert("local".into(), ret);
    call.output
        .out_for(call.fun.as_deref().unwrap_or_default())
        .display_ret(&Value::Object(data), call.output.out_indent, retcode.into());
    if author || call.retcode_passthrough || retcode == 0 {
        exit_status(retcode)
    } else {
        ExitCode::from(1)
    }
}
