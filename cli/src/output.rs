//! Salt's output options (`OutputOptionsMixIn`) as every command that
//! prints through an outputter takes them, and printing what an outputter
//! rendered: to stdout, or to `--out-file`. The outputters themselves are
//! `maid-salt`'s and return strings. Everything a command prints on
//! standard output goes through [`stdout_fmt`] (the `out!` and `outln!`
//! macros), so a reader that goes away ends the printing quietly.

use std::path::PathBuf;

use clap::Args;
use maid_salt::output::Out;
use serde_json::{Map, Value};

/// Salt's `--no-color` and `--force-color` (`OutputOptionsMixIn`).
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct ColorOpts {
    /// Disable all colored output.
    #[arg(long, alias = "no-colour")]
    pub no_color: bool,
    /// Force colored output.
    #[arg(long, alias = "force-colour")]
    pub force_color: bool,
}

impl ColorOpts {
    /// Whether outputters colour, as `get_printout` decides: forced, else
    /// not when told not to or when stdout is no terminal.
    pub fn on(&self) -> bool {
        use std::io::IsTerminal;
        self.force_color || (!self.no_color && std::io::stdout().is_terminal())
    }
}

/// Salt's output options (`OutputOptionsMixIn`), as every command that
/// prints through an outputter takes them.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputOpts {
    /// Outputter: nested, json, yaml, txt, table, raw or pprint (another
    /// name falls back to nested, as in Salt).
    #[arg(long, visible_alias = "output", value_name = "OUTPUTTER")]
    pub out: Option<Out>,
    /// Indent json/yaml/pprint output by N (json: default 4; negative:
    /// one line).
    #[arg(long, visible_alias = "output-indent", allow_negative_numbers = true)]
    pub out_indent: Option<i64>,
    /// Write what the outputter prints to FILE instead of stdout (emptied
    /// first, unless --out-file-append).
    #[arg(long, visible_alias = "output-file", value_name = "FILE")]
    pub out_file: Option<PathBuf>,
    /// Append to --out-file instead of emptying it first.
    #[arg(long, visible_alias = "output-file-append")]
    pub out_file_append: bool,
    #[command(flatten)]
    pub color: ColorOpts,
    /// Override state_output for state runs: full, terse, mixed, changes
    /// or filter (each also with _id).
    #[arg(long, alias = "state_output", value_name = "STATE_OUTPUT")]
    pub state_output: Option<String>,
    /// Override state_verbose for state runs: True or False (False hides
    /// states that succeeded without changes).
    #[arg(long, alias = "state_verbose", value_name = "BOOL")]
    pub state_verbose: Option<String>,
}

impl OutputOpts {
    /// The outputter, colouring as `--no-color`, `--force-color` and the
    /// terminal say, writing to `--out-file` when given.
    pub fn out(&self) -> Printer {
        Printer {
            out: self
                .name()
                .parse::<Out>()
                .unwrap_or_default()
                .colored(self.color.on()),
            file: self.out_file.clone(),
        }
    }

    /// The outputter for returns of `fun`: the one asked for, else the
    /// function's own (`highstate` for `state.apply`, ...), with the
    /// `--state-*` options; `--out highstate` also means the function's
    /// own, as in Salt.
    pub fn out_for(&self, fun: &str) -> Printer {
        let own = maid_salt::output::function_outputter(fun);
        let name = self.out.as_ref().map_or(own, Out::name);
        let mut state = maid_salt::output::HighstateOpts::default();
        if let Some(o) = &self.state_output {
            state.state_output = o.clone();
        }
        match self.state_verbose.as_deref() {
            Some("True" | "true") => state.state_verbose = true,
            Some("False" | "false") => state.state_verbose = false,
            _ => {}
        }
        Printer {
            out: name
                .parse::<Out>()
                .unwrap_or_default()
                .for_function(own)
                .with_state_opts(state)
                .colored(self.color.on()),
            file: self.out_file.clone(),
        }
    }

    /// The outputter's name: the one asked for, else `nested`.
    pub fn name(&self) -> &str {
        self.out.as_ref().map_or("nested", Out::name)
    }

    /// What Salt's parser does with `--out-file` before anything runs:
    /// empty an existing file (keeping its mode) unless appending. Call
    /// once, at the start of a command.
    pub fn prepare(&self) -> std::io::Result<()> {
        match &self.out_file {
            Some(path) if !self.out_file_append && path.is_file() => std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(path)
                .map(drop)
                .map_err(|e| {
                    std::io::Error::new(e.kind(), format!("{}: Access denied: {e}", path.display()))
                }),
            _ => Ok(()),
        }
    }
}

/// An outputter with where its text goes: stdout, or appended to
/// `--out-file`. Everything else it does is [`Out`]'s.
#[derive(Debug, Clone, Default)]
pub struct Printer {
    out: Out,
    /// `--out-file`: where `display_output` appends instead of stdout.
    file: Option<PathBuf>,
}

impl std::ops::Deref for Printer {
    type Target = Out;

    fn deref(&self) -> &Out {
        &self.out
    }
}

impl From<Out> for Printer {
    fn from(out: Out) -> Self {
        Printer { out, file: None }
    }
}

impl Printer {
    /// Print `data` as `display_output` does: stdout, and the warning on
    /// stderr when there is one.
    pub fn display(&self, data: &Map<String, Value>, indent: Option<i64>) {
        self.display_value(&Value::Object(data.clone()), indent);
    }

    /// [`Self::display`] for any data.
    pub fn display_value(&self, data: &Value, indent: Option<i64>) {
        self.display_ret(data, indent, 0);
    }

    /// [`Self::display`] of a return with `retcode` ([`Out::render_ret`]).
    pub fn display_ret(&self, data: &Value, indent: Option<i64>, retcode: i64) {
        if let Some(w) = self.out.warning() {
            eprintln!("{w}");
        }
        self.emit(&self.out.render_ret(data, indent, retcode));
    }

    /// Rendered text to stdout, or appended to `--out-file` (as Salt
    /// opens it for each document); a file that cannot be written is
    /// said on stderr.
    pub fn emit(&self, text: &str) {
        use std::io::Write;
        let Some(path) = &self.file else {
            out!("{text}");
            return;
        };
        if text.is_empty() {
            return;
        }
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            eprintln!("ERROR: {}: {e}", path.display());
        }
    }
}

/// Set once standard output's reader has gone away.
static STDOUT_GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Write `args` to standard output, as `print!` does, except that a reader
/// that went away (`maid run '*' grains.items | head -3`) ends the printing
/// quietly and the command goes on to finish with its own status, as
/// Salt's `print_cli` and `display_output` pass over `EPIPE`. (`print!`
/// panicked there, exiting 101 with a message on stderr.)
pub fn stdout_fmt(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    use std::sync::atomic::Ordering;
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    // A pipe's reader can go between the write and the flush.
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            STDOUT_GONE.store(true, Ordering::Relaxed);
        } else {
            panic!("failed printing to stdout: {e}");
        }
    }
}
