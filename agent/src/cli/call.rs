//! `maid call --local FUN [ARGS...]`: run one function on this machine with
//! no master, as `salt-call --local` does, and print `{"local": return}`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use maid::runtime::CallRequest;
use maid::runtime::Failure;
use maid::salt::args::{load_args_and_kwargs, parse_cli};
use maid::salt::output::{ColorOpts, Out};
use serde_json::{Map, Value};

use maid::setup::RuntimeOpts;
use maid::setup::Setup;

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
    pub fun: String,

    /// Arguments: `value` is positional, `key=value` is a keyword argument;
    /// values are read as YAML, as Salt reads them.
    pub args: Vec<String>,

    /// Outputter: nested, json, yaml, txt, raw or pprint (another name
    /// falls back to nested, as in Salt).
    #[arg(long, default_value_t = Out::default())]
    pub out: Out,

    /// Indent json/yaml/pprint output by N (json: default 4; negative:
    /// one line).
    #[arg(long, alias = "output-indent", allow_negative_numbers = true)]
    pub out_indent: Option<i64>,

    #[command(flatten)]
    pub color: ColorOpts,

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
    let timeout = match call.timeout {
        Some(t) if !(t.is_finite() && t > 0.0 && t <= maid::protocol::MAX_TIMEOUT_SECS) => {
            bail!(
                "--timeout must be a positive number of seconds, at most {}",
                maid::protocol::MAX_TIMEOUT_SECS
            )
        }
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    };
    let id = call
        .id
        .clone()
        .or_else(|| setup.config.id.clone())
        .unwrap_or_else(maid::grains::hostname);
    let runtime = setup.runtime(&setup.grains(&id), &call.file_root)?;
    let (positional, mut kwargs) = parse_cli(&call.args);
    // As the minion reads a job's arguments (`load_args_and_kwargs`): a
    // string that reads `key=value` is a keyword argument there too.
    let positional = load_args_and_kwargs(positional, &mut kwargs);
    let outcome = super::block_on(async {
        runtime.load_dir(&setup.plugin_dir).await?;
        anyhow::Ok(
            runtime
                .call(CallRequest {
                    fun: call.fun.clone(),
                    args: positional,
                    kwargs,
                    jid: maid::jid::new_jid(),
                    minion_id: id.clone(),
                    user: std::env::var("USER").ok(),
                    timeout,
                    ..Default::default()
                })
                .await,
        )
    })??;
    // salt-call names an unknown function on stderr and exits 255.
    if !author && outcome.failure == Some(Failure::NotAvailable) {
        eprintln!("{}", outcome.ret.as_str().unwrap_or_default());
        return Ok(ExitCode::from(255));
    }
    let mut data = Map::new();
    data.insert("local".into(), outcome.ret);
    call.out.colored(call.color.on()).display_ret(
        &Value::Object(data),
        call.out_indent,
        outcome.retcode.into(),
    );
    Ok(
        if author || call.retcode_passthrough || outcome.retcode == 0 {
            exit_status(outcome.retcode)
        } else {
            ExitCode::from(1)
        },
    )
}
