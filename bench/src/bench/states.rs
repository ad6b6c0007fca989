//! `maid-bench states`: a highstate of `--states` states through `maid call
//! --local` and through Salt's own `salt-call --local`, in one run.
//!
//! Each round writes, for each side, a fresh tree: a `top.sls` giving every
//! minion the `bench` SLS, which a Jinja loop makes into a third each of
//! `file.directory`, templated `file.managed` (a `salt://` source rendered
//! with a `context`) and `cmd.run` with `unless`, each requiring the one
//! before it. Then `state.apply` twice on each side: the first run makes
//! every change, the second finds nothing to do. Each side's answer is
//! read (`--out json`) and must hold every state, passed, with changes on
//! the first run and none on the second; a run that did anything else is an
//! error, not a figure. The sides alternate which goes first, round by
//! round, so that background load reaches both alike.
//!
//! Both start warm: maid's compiled plugins are cached (one `test.ping`
//! before the rounds, as any host after its first call), Salt keeps its
//! root directory (its caches) across rounds.
//!
//! The goals, the issue's: maid's first run ≤ 0.25× Salt's and its second
//! run ≤ 0.1× Salt's, p50s of wall time. Beside them, the floor both sides
//! stand on: the `unless` checks alone, each a shell (the `shell` grain)
//! started by this process, as many as the highstate has, so that a run
//! can be read as the machine's share and the agent's.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use super::measure::p50;
use super::scratch::Scratch;
use super::stage;
use super::table::{Table, fmt_dur, fmt_ratio};

/// The goals' bounds: maid / Salt, first run and second run.
const GOAL_FIRST: f64 = 0.25;
const GOAL_SECOND: f64 = 0.1;

#[derive(Debug, clap::Args)]
pub struct StatesArgs {
    /// Where the plugins are (`state.wasm`, `file.wasm`, `cmd.wasm`, ...).
    #[arg(long, env = "MAID_PLUGIN_DIR")]
    pub plugin_dir: PathBuf,
    /// The `maid` binary measured [default: beside this one].
    #[arg(long)]
    pub maid: Option<PathBuf>,
    /// The virtualenv holding Salt (`bin/salt-call`), as the test suite's.
    #[arg(long, env = "MAID_SALT_VENV", default_value = "target/salt-venv")]
    pub salt_venv: PathBuf,
    /// States in the highstate.
    #[arg(long, default_value_t = 200)]
    pub states: usize,
    /// Rounds (each: a first and a second run on each side).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Also write the table, in Markdown, to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

/// The two sides measured.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Maid,
    Salt,
}

/// One side's wall times, per run kind.
#[derive(Default)]
struct Times {
    first: Vec<Duration>,
    second: Vec<Duration>,
}

pub fn states(args: StatesArgs) -> anyhow::Result<ExitCode> {
    if args.states < 3 || args.rounds == 0 {
        bail!("--states must be at least 3 and --rounds at least 1");
    }
    let maid = super::super::maid_binary(args.maid.as_deref())?;
    let salt_call = args.salt_venv.join("bin/salt-call");
    if !salt_call.is_file() {
        bail!(
            "{} is missing: install Salt 3008.4 in a venv (`./dev test` does, in \
             target/salt-venv) or pass --salt-venv",
            salt_call.display()
        );
    }
    let scratch = Scratch::new()?;
    let bench = Bench {
        maid,
        salt_call,
        plugin_dir: args.plugin_dir.clone(),
        cache: scratch.join("maid-cache"),
        salt_conf: scratch.join("salt"),
        states: args.states,
    };
    let shell = bench.prepare()?;
    let (mut maid_times, mut salt_times) = (Times::default(), Times::default());
    // The `unless` shells alone, per round.
    let mut floor = Vec::new();
    for round in 0..args.rounds {
        stage(&format!("round {} of {}", round + 1, args.rounds));
        let order = if round % 2 == 0 {
            [Side::Maid, Side::Salt]
        } else {
            [Side::Salt, Side::Maid]
        };
        for side in order {
            let dir = scratch.join(&format!("round{round}-{}", side.name()));
            let times = match side {
                Side::Maid => &mut maid_times,
                Side::Salt => &mut salt_times,
            };
            bench.round(side, &dir, times)?;
            let _ = std::fs::remove_dir_all(&dir);
        }
        floor.push(bench.shells(&shell, &scratch.join("made"))?);
    }
    let table = report(&args, &maid_times, &salt_times, &floor);
    print!("{}", table.text());
    if let Some(path) = &args.markdown {
        std::fs::write(path, table.markdown())
            .with_context(|| format!("write {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Maid => "maid",
            Side::Salt => "salt",
        }
    }
}

struct Bench {
    maid: PathBuf,
    salt_call: PathBuf,
    plugin_dir: PathBuf,
    cache: PathBuf,
    salt_conf: PathBuf,
    states: usize,
}

impl Bench {
    /// Warm both sides: maid's plugins compiled into its cache, Salt's
    /// root directory made (by a first `grains.get shell`, which gives the
    /// shell the checks run in: the `shell` grain, returned).
    fn prepare(&self) -> anyhow::Result<PathBuf> {
        stage("warming up: maid's plugin cache, Salt's root directory");
        std::fs::create_dir_all(self.salt_conf.join("root"))?;
        let srv = self.salt_conf.join("srv");
        std::fs::create_dir_all(&srv)?;
        self.salt_minion_config(&srv)?;
        let mut shells = Vec::new();
        for side in [Side::Maid, Side::Salt] {
            let out = self
                .command(side, &srv)
                .args(["grains.get", "shell"])
                .output()?;
            let answer: Option<Value> = serde_json::from_slice(&out.stdout).ok();
            match answer.as_ref().and_then(|a| a["local"].as_str()) {
                Some(shell) if out.status.success() => shells.push(shell.to_string()),
                _ => bail!(
                    "{} grains.get shell failed: {}",
                    side.name(),
                    String::from_utf8_lossy(&out.stderr)
                ),
            }
        }
        if shells[0] != shells[1] {
            bail!(
                "the shell grains differ: maid {}, Salt {}",
                shells[0],
                shells[1]
            );
        }
        Ok(PathBuf::from(&shells[0]))
    }

    /// The floor: as many `SHELL -c 'test -e PATH'` as the highstate has
    /// `unless` checks, one after another, started from this process.
    fn shells(&self, shell: &Path, made: &Path) -> anyhow::Result<Duration> {
        let started = Instant::now();
        for i in 0..self.states / 3 {
            let check = format!("test -e {}/d{i}/stamp", made.display());
            Command::new(shell)
                .args(["-c", &check])
                .status()
                .with_context(|| format!("run {}", shell.display()))?;
        }
        Ok(started.elapsed())
    }

    /// Salt's minion config for serving `srv`, beside it (`salt-conf/`).
    fn salt_minion_config(&self, srv: &Path) -> anyhow::Result<()> {
        let minion = format!(
            "id: bench\nroot_dir: {}\nfile_client: local\nfile_roots:\n  base:\n    - {}\n",
            self.salt_conf.join("root").display(),
            srv.display()
        );
        let conf = srv.with_file_name("salt-conf");
        std::fs::create_dir_all(&conf)?;
        std::fs::write(conf.join("minion"), minion)?;
        Ok(())
    }

    /// `call --local` of one side, serving `srv` (Salt's config written
    /// beside it first), answering in JSON.
    fn command(&self, side: Side, srv: &Path) -> Command {
        match side {
            Side::Maid => {
                let mut cmd = Command::new(&self.maid);
                cmd.args(["call", "--local", "--id", "bench", "--out", "json"])
                    .arg("--plugin-dir")
                    .arg(&self.plugin_dir)
                    .arg("--cache-dir")
                    .arg(&self.cache)
                    .arg("--file-root")
                    .arg(srv)
                    .env_remove("MAID_CONFIG");
                cmd
            }
            Side::Salt => {
                let mut cmd = Command::new(&self.salt_call);
                cmd.args(["--local", "--out", "json", "-c"])
                    .arg(srv.with_file_name("salt-conf"));
                cmd
            }
        }
    }

    /// One round of one side in `dir`: a fresh tree, `state.apply` twice.
    fn round(&self, side: Side, dir: &Path, times: &mut Times) -> anyhow::Result<()> {
        let srv = dir.join("srv");
        write_tree(&srv, &dir.join("made"), self.states)?;
        if side == Side::Salt {
            self.salt_minion_config(&srv)?;
        }
        for (run, into) in [(1, &mut times.first), (2, &mut times.second)] {
            let mut cmd = self.command(side, &srv);
            cmd.arg("state.apply");
            let started = Instant::now();
            let out = cmd
                .output()
                .with_context(|| format!("run {}", side.name()))?;
            into.push(started.elapsed());
            check_run(run, self.states, &out)
                .with_context(|| format!("{}'s run {run} in {}", side.name(), dir.display()))?;
        }
        Ok(())
    }
}

/// `srv/top.sls` and `srv/bench/` for `states` states making their
/// changes under `made`.
fn write_tree(srv: &Path, made: &Path, states: usize) -> anyhow::Result<()> {
    std::fs::create_dir_all(srv.join("bench"))?;
    std::fs::create_dir_all(made)?;
    std::fs::write(srv.join("top.sls"), "base:\n  '*':\n    - bench\n")?;
    std::fs::write(
        srv.join("bench/app.conf.j2"),
        "# managed for {{ grains['id'] }}\nindex = {{ index }}\nname = app{{ index }}\n",
    )?;
    let sls = format!(
        r#"{{% set made = "{made}" %}}
{{% for i in range({states}) %}}
{{% set d = made ~ "/d" ~ (i // 3) %}}
{{% if i % 3 == 0 %}}
dir{{{{ i }}}}:
  file.directory:
    - name: {{{{ d }}}}
{{% elif i % 3 == 1 %}}
conf{{{{ i }}}}:
  file.managed:
    - name: {{{{ d }}}}/app.conf
    - source: salt://bench/app.conf.j2
    - template: jinja
    - context:
        index: {{{{ i }}}}
    - require:
      - file: dir{{{{ i - 1 }}}}
{{% else %}}
stamp{{{{ i }}}}:
  cmd.run:
    - name: touch {{{{ d }}}}/stamp
    - unless: test -e {{{{ d }}}}/stamp
    - require:
      - file: conf{{{{ i - 1 }}}}
{{% endif %}}
{{% endfor %}}
"#,
        made = made.display()
    );
    std::fs::write(srv.join("bench/init.sls"), sls)?;
    Ok(())
}

/// A run's answer holds `states` states, every one passed, all changed on
/// the first run and none on the second.
fn check_run(run: u32, states: usize, out: &std::process::Output) -> anyhow::Result<()> {
    if !out.status.success() {
        bail!(
            "exit status {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let answer: Value = serde_json::from_slice(&out.stdout).context("the answer is not JSON")?;
    // Both sides answer `{"local": {state id: result}}`.
    let Some(ret) = answer["local"].as_object() else {
        bail!("no state return: {answer}");
    };
    let passed = ret
        .values()
        .filter(|s| s["result"] == Value::Bool(true))
        .count();
    let changed = ret
        .values()
        .filter(|s| s["changes"].as_object().is_some_and(|c| !c.is_empty()))
        .count();
    let want_changed = if run == 1 { states } else { 0 };
    if ret.len() != states || passed != states || changed != want_changed {
        bail!(
            "{} states, {passed} passed, {changed} changed; want {states}, {states}, {want_changed}",
            ret.len()
        );
    }
    Ok(())
}

fn report(args: &StatesArgs, maid: &Times, salt: &Times, floor: &[Duration]) -> Table {
    let mut table = Table::new(
        &format!(
            "Highstate of {} states (file.directory, templated file.managed, cmd.run with unless), \
             wall time p50 of {} rounds",
            args.states, args.rounds
        ),
        &[
            "run",
            "maid call --local",
            "salt-call --local",
            "maid / Salt",
            "goal",
            "",
        ],
    );
    for (name, m, s, goal) in [
        (
            "first (every change made)",
            &maid.first,
            &salt.first,
            GOAL_FIRST,
        ),
        (
            "second (nothing to do)",
            &maid.second,
            &salt.second,
            GOAL_SECOND,
        ),
    ] {
        let (m, s) = (p50(m).unwrap_or_default(), p50(s).unwrap_or_default());
        let ratio = m.as_secs_f64() / s.as_secs_f64().max(1e-9);
        table.row(vec![
            name.into(),
            fmt_dur(m),
            fmt_dur(s),
            fmt_ratio(ratio),
            format!("≤ {goal}"),
            if ratio <= goal { "met" } else { "MISSED" }.into(),
        ]);
    }
    let floor = p50(floor).unwrap_or_default();
    table.row(vec![
        format!("the {} `unless` shells alone (the floor)", args.states / 3),
        fmt_dur(floor),
        fmt_dur(floor),
        String::new(),
        String::new(),
        String::new(),
    ]);
    table
}
