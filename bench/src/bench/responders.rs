//! The processes `maid-bench run` starts, and how: its private
//! `redis-server` ([`Lab`]), the responders side by side (raw, the
//! protocol floor, the maid agent, the maid agent with its audit trail on,
//! the maid agent taking signed jobs only and signing its replies, and the
//! Python seed), and the fan-out fleets (`maid-bench fleet` and the two
//! `maid-bench raw --count` floors).
//!
//! Each responder runs in a process of its own so that its CPU time and
//! memory can be read from `/proc/<pid>`. Every process is a [`Proc`],
//! killed when dropped, so everything started is gone when the command
//! ends, also on error or Ctrl-C; [`Lab`] drops its scratch directory
//! last.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use ed25519_dalek::SigningKey;
use redis::aio::MultiplexedConnection;

use maid_protocol::trust::{encode_verifying, generate};

use maid_testkit::Proc;
use maid_testkit::redis::{RedisServer, free_port};

use super::master::{READY_TIMEOUT, Target, TgtType, check_functions, wait_subscribed};
use super::measure::Measured;
use super::results::Results;
use super::run::{BenchArgs, Sizes};
use super::scratch::Scratch;
use super::stage;

/// The seed baseline, compiled in so the binary always runs the repo's copy.
const SEED_PY: &str = include_str!("../../seed.py");

/// Master topics, one per responder.
const TOPIC_RAW: &str = "bench-raw";
const TOPIC_PROTOCOL: &str = "bench-protocol";
pub(super) const TOPIC_MAID: &str = "bench-maid";
const TOPIC_AUDITED: &str = "bench-audited";
pub(super) const TOPIC_SIGNED: &str = "bench-signed";
const TOPIC_SEED: &str = "bench-seed";
pub(super) const TOPIC_FLEET: &str = "bench-fleet";
pub(super) const TOPIC_RAW_FLEET: &str = "bench-raw-fleet";
pub(super) const TOPIC_PROTOCOL_FLEET: &str = "bench-protocol-fleet";
pub(super) const TOPIC_START: &str = "bench-start";

/// What every scenario of one run shares: the private `redis-server`, how
/// to start agents and responders on it, and the scratch directory their
/// configs, logs and caches are in.
///
/// Fields drop in order: the connections before the server, the server
/// before the scratch directory.
pub(super) struct Lab {
    /// This binary: `maid-bench raw` and `maid-bench fleet` run from it.
    exe: PathBuf,
    /// The private `redis-server`'s URL, passed to every process.
    url: String,
    pub(super) client: redis::Client,
    /// Waits for processes to subscribe and register.
    pub(super) admin: MultiplexedConnection,
    pub(super) agents: AgentSetup,
    /// The measured agent's config: [`AgentSetup::config`], with
    /// `/metrics` served on `metrics_port` under `--agent-metrics`.
    main_config: PathBuf,
    /// The audited agent's config: [`AgentSetup::config`] with the audit
    /// trail on, to a file and to its Redis stream.
    audited_config: PathBuf,
    /// The signed agent's config: [`AgentSetup::config`] requiring jobs
    /// signed by [`Lab::master_key`], with a state directory, and so a key
    /// of its own that signs its replies: the production setting.
    signed_config: PathBuf,
    /// The key the master signs the signed agent's jobs with.
    pub(super) master_key: SigningKey,
    /// Where the measured agent serves `/metrics` (`--agent-metrics`).
    pub(super) metrics_port: Option<u16>,
    /// The first cold start-up's plugin cache, warm for every later agent.
    pub(super) warm_cache: PathBuf,
    /// The same plugins with nothing compiled ahead: what a start-up that
    /// compiles them all is given.
    pub(super) bare_plugins: PathBuf,
    /// How long `maid plugin compile` took for the plugins.
    pub(super) compile_ahead: Duration,
    /// Keyspace events on: start-up readiness is an agent's
    /// `SET maid:alive:<id>`.
    pub(super) redis_server: RedisServer,
    /// Dropped last: every process is gone before its files are.
    pub(super) scratch: Scratch,
}

impl Lab {
    /// Make the scratch directory, start the private `redis-server` and
    /// write the agents' configs.
    pub(super) async fn start(
        args: &BenchArgs,
        sizes: &Sizes,
        plugin_dir: &Path,
    ) -> anyhow::Result<Lab> {
        // Declared first, dropped last: every process is gone before the
        // directory is removed.
        let scratch = Scratch::new()?;
        let exe = std::env::current_exe().context("path of the maid-bench binary")?;
        let maid = crate::maid_binary(args.maid.as_deref())?;
        stage("starting a private redis-server");
        // Keyspace events for `SET` on: start-up readiness is the agent's
        // `SET maid:alive:<id>`.
        let redis_server =
            RedisServer::start_with(&["--maxclients", "10000", "--notify-keyspace-events", "K$"]);
        let url = redis_server.url();
        eprintln!("    {url}");
        let client = redis::Client::open(url.as_str())?;
        let admin = client.get_multiplexed_async_connection().await?;
        let config = scratch.join("maid.toml");
        std::fs::write(&config, agent_config(&url, sizes.in_flight, None, None))?;
        // The measured agent's config; with --agent-metrics it also serves
        // /metrics, read around the maid runs.
        let metrics_port = if args.agent_metrics {
            Some(free_port())
        } else {
            None
        };
        let main_config = scratch.join("maid-main.toml");
        std::fs::write(
            &main_config,
            agent_config(&url, sizes.in_flight, metrics_port, None),
        )?;
        let audited_config = scratch.join("maid-audited.toml");
        std::fs::write(
            &audited_config,
            format!(
                "{}\n[audit]\npath = {:?}\nstream = true\n",
                agent_config(&url, sizes.in_flight, None, None),
                scratch.join("audit.jsonl"),
            ),
        )?;
        let master_key = generate().context("a master key for the signed agent")?;
        let signed_config = scratch.join("maid-signed.toml");
        let signed = Signed {
            master: encode_verifying(&master_key.verifying_key()),
            state_dir: scratch.join("signed-state"),
        };
        std::fs::write(
            &signed_config,
            agent_config(&url, sizes.in_flight, None, Some(&signed)),
        )?;
        let (shipped, bare_plugins, compile_ahead) = plugin_dirs(&maid, plugin_dir, &scratch)?;
        let agents = AgentSetup {
            exe: maid,
            config,
            plugin_dir: shipped,
        };
        Ok(Lab {
            exe,
            url,
            client,
            admin,
            agents,
            main_config,
            audited_config,
            signed_config,
            master_key,
            metrics_port,
            warm_cache: scratch.join("cache-0"),
            bare_plugins,
            compile_ahead,
            redis_server,
            scratch,
        })
    }

    /// `maid-bench fleet` with `sizes.agents` agents on [`TOPIC_FLEET`],
    /// and how long from its spawn until they all subscribed.
    pub(super) async fn start_fleet(
        &mut self,
        sizes: &Sizes,
        timeout: Duration,
    ) -> anyhow::Result<(Proc, Duration)> {
        let threads = sizes.fanout_threads.to_string();
        let count = sizes.agents.to_string();
        let mut fleet_cmd = Command::new(&self.exe);
        fleet_cmd
            .args(["fleet", "--redis", &self.url, "--topic", TOPIC_FLEET])
            .args([
                "--prefix",
                "fleet-",
                "--count",
                &count,
                "--threads",
                &threads,
            ])
            .arg("--plugin-dir")
            .arg(&self.agents.plugin_dir)
            .arg("--cache-dir")
            .arg(&self.warm_cache);
        let mut fleet = Proc::spawn(
            "maid-bench fleet",
            &mut fleet_cmd,
            self.scratch.join("fleet.log"),
        )?;
        let ready = wait_subscribed(
            &mut self.admin,
            TOPIC_FLEET,
            sizes.agents,
            &mut fleet,
            timeout,
        )
        .await?;
        Ok((fleet, ready))
    }

    /// A fan-out floor in a process of its own, subscribed: `sizes.agents`
    /// raw responders on `topic`, named `prefix<i>`, keeping the protocol
    /// with `protocol`.
    pub(super) async fn start_floor(
        &mut self,
        sizes: &Sizes,
        timeout: Duration,
        topic: &str,
        prefix: &str,
        protocol: bool,
        log: &str,
    ) -> anyhow::Result<Proc> {
        let threads = sizes.fanout_threads.to_string();
        let count = sizes.agents.to_string();
        let mut cmd = self.raw_command(topic, prefix, protocol);
        cmd.args(["--count", &count, "--threads", &threads]);
        let name = if protocol {
            "maid-bench raw --count --protocol"
        } else {
            "maid-bench raw --count"
        };
        let mut proc = Proc::spawn(name, &mut cmd, self.scratch.join(log))?;
        wait_subscribed(&mut self.admin, topic, sizes.agents, &mut proc, timeout).await?;
        Ok(proc)
    }

    /// `maid-bench raw` answering on `topic` as `id` (with `--count`, the
    /// prefix of its ids), keeping the protocol with `protocol`.
    fn raw_command(&self, topic: &str, id: &str, protocol: bool) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(["raw", "--redis", &self.url, "--topic", topic, "--id", id])
            .args(protocol.then_some("--protocol"));
        cmd
    }
}

/// A responder under test.
pub(super) struct Responder {
    pub(super) name: &'static str,
    pub(super) topic: &'static str,
    pub(super) target: Target,
    pub(super) proc: Proc,
    pub(super) round_trips: usize,
    pub(super) jobs: usize,
    pub(super) measured: Measured,
}

/// Start the responders side by side (raw, the protocol floor, the maid
/// agents, and the seed unless it is left out or cannot run: `results`
/// says why), and wait until each has subscribed and the maid agents have
/// registered their functions.
pub(super) async fn start_responders(
    lab: &mut Lab,
    args: &BenchArgs,
    sizes: &Sizes,
    results: &mut Results,
) -> anyhow::Result<Vec<Responder>> {
    stage("starting the responders: raw, protocol floor, maid, audited maid, signed maid, seed");
    let mut responders = Vec::new();
    let target = |id: &str| Target::new(args.tgt_type, &[id.to_string()]);
    let responder = |name, topic, proc| Responder {
        name,
        topic,
        target: target(name),
        proc,
        round_trips: sizes.round_trips,
        jobs: sizes.jobs,
        measured: Measured::default(),
    };
    // raw, and the protocol floor: what the protocol asks of any maid (the
    // PING in a write of its own, the return with its job-cache write),
    // with no job handling and no plugin call, the share of maid's ratios
    // the wire itself sets.
    for (name, topic, protocol, what) in [
        ("raw", TOPIC_RAW, false, "raw responder"),
        ("protocol", TOPIC_PROTOCOL, true, "protocol floor responder"),
    ] {
        let mut cmd = lab.raw_command(topic, name, protocol);
        let proc = Proc::spawn(what, &mut cmd, lab.scratch.join(&format!("{name}.log")))?;
        responders.push(responder(name, topic, proc));
    }
    // The agents: each with its config, on the warm plugin cache.
    for (name, topic, config, what) in [
        ("maid", TOPIC_MAID, &lab.main_config, "maid agent"),
        (
            "audited",
            TOPIC_AUDITED,
            &lab.audited_config,
            "maid agent, audit on",
        ),
        (
            "signed",
            TOPIC_SIGNED,
            &lab.signed_config,
            "maid agent, signed jobs and replies",
        ),
    ] {
        let mut cmd = lab
            .agents
            .command_with(name, topic, &lab.warm_cache, config);
        let proc = Proc::spawn(what, &mut cmd, lab.scratch.join(&format!("{name}.log")))?;
        responders.push(responder(name, topic, proc));
    }
    if args.no_seed {
        results.seed_skipped = Some("--no-seed".into());
    } else {
        match ensure_redis_py(&args.python) {
            Ok(()) => responders.push(start_seed(lab, args, sizes, target("seed"))?),
            Err(why) => {
                eprintln!("maid-bench: seed skipped: {why}");
                results.seed_skipped = Some(why);
            }
        }
    }
    wait_ready(&mut lab.admin, &mut responders).await?;
    Ok(responders)
}

/// The seed responder: `bench/seed.py`, copied to the scratch directory,
/// run by `--python`.
fn start_seed(
    lab: &Lab,
    args: &BenchArgs,
    sizes: &Sizes,
    target: Target,
) -> anyhow::Result<Responder> {
    let script = lab.scratch.join("seed.py");
    std::fs::write(&script, SEED_PY)?;
    let mut seed = Command::new(&args.python);
    seed.arg(&script)
        .args(["--redis", &lab.url, "--topic", TOPIC_SEED, "--id", "seed"]);
    Ok(Responder {
        name: "seed",
        topic: TOPIC_SEED,
        target,
        proc: Proc::spawn("seed (python)", &mut seed, lab.scratch.join("seed.log"))?,
        round_trips: sizes.seed_round_trips,
        jobs: sizes.seed_jobs,
        measured: Measured::default(),
    })
}

/// Wait until every responder subscribed to its topic, and the maid
/// agent registered `test.ping` and `cmd.run`.
async fn wait_ready(
    admin: &mut MultiplexedConnection,
    responders: &mut [Responder],
) -> anyhow::Result<()> {
    for r in responders.iter_mut() {
        wait_subscribed(admin, r.topic, 1, &mut r.proc, READY_TIMEOUT).await?;
    }
    for r in responders.iter_mut() {
        if matches!(r.name, "maid" | "audited" | "signed") {
            check_functions(admin, r.name, &mut r.proc, &["test.ping", "cmd.run"]).await?;
        }
    }
    Ok(())
}

/// What each responder measured, into `results`, stopping each responder
/// in turn; the seed as not measured when it was skipped.
pub(super) fn into_results(responders: Vec<Responder>, results: &mut Results) {
    for r in responders {
        let Responder { name, measured, .. } = r;
        results.responders.push((name, Some(measured)));
    }
    if results.seed_skipped.is_some() {
        results.responders.push(("seed", None));
    }
}

/// The fan-out fleets' targets, as `--tgt-type` makes them: every one of
/// `agents` ids named `prefix<i>`.
pub(super) fn everyone(tgt_type: TgtType, prefix: &str, agents: usize) -> Target {
    let ids: Vec<String> = (0..agents).map(|i| format!("{prefix}{i}")).collect();
    Target::new(tgt_type, &ids)
}

/// Where the `maid` agents get their config and plugins.
pub(super) struct AgentSetup {
    exe: PathBuf,
    config: PathBuf,
    pub(super) plugin_dir: PathBuf,
}

impl AgentSetup {
    /// An agent on `plugins` (its own plugin directory, unless given).
    pub(super) fn command(
        &self,
        id: &str,
        topic: &str,
        cache: &Path,
        plugins: Option<&Path>,
    ) -> Command {
        self.command_in(
            id,
            topic,
            cache,
            &self.config,
            plugins.unwrap_or(&self.plugin_dir),
        )
    }

    fn command_with(&self, id: &str, topic: &str, cache: &Path, config: &Path) -> Command {
        self.command_in(id, topic, cache, config, &self.plugin_dir)
    }

    fn command_in(
        &self,
        id: &str,
        topic: &str,
        cache: &Path,
        config: &Path,
        plugins: &Path,
    ) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(["agent", "--id", id, "--master-topic", topic, "-c"])
            .arg(config)
            .arg("--plugin-dir")
            .arg(plugins)
            .arg("--cache-dir")
            .arg(cache);
        cmd
    }
}

/// The plugins of `plugin_dir` twice in `scratch`: compiled ahead by
/// `maid plugin compile` (as a package ships them; every agent runs from
/// there), and bare; with how long compiling them took.
fn plugin_dirs(
    maid: &Path,
    plugin_dir: &Path,
    scratch: &Scratch,
) -> anyhow::Result<(PathBuf, PathBuf, Duration)> {
    let (shipped, bare) = (scratch.join("plugins"), scratch.join("plugins-bare"));
    for dir in [&shipped, &bare] {
        std::fs::create_dir_all(dir)?;
        for module in maid_cli::setup::modules_in(plugin_dir) {
            let file = format!("{module}.wasm");
            std::fs::copy(plugin_dir.join(&file), dir.join(&file))
                .with_context(|| format!("copy {file} from {}", plugin_dir.display()))?;
        }
    }
    stage("compiling the plugins ahead (`maid plugin compile`)");
    let started = std::time::Instant::now();
    let out = Command::new(maid)
        .args(["plugin", "compile", "--plugin-dir"])
        .arg(&shipped)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("run {} plugin compile", maid.display()))?;
    let took = started.elapsed();
    if !out.status.success() {
        anyhow::bail!(
            "maid plugin compile failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok((shipped, bare, took))
}

/// What an agent that takes signed jobs only is given: the master's
/// public key (base64) and its state directory, where it keeps the jids
/// of signed jobs and makes the key it signs its replies with.
pub(super) struct Signed {
    master: String,
    state_dir: PathBuf,
}

/// The agents' config: every default, except the grants `cmd.run 'true'`
/// needs, room for all the jobs in flight, and unsigned jobs (the bench's
/// master sends them, as the raw and seed baselines do) unless `signed`.
pub(super) fn agent_config(
    url: &str,
    in_flight: usize,
    http: Option<u16>,
    signed: Option<&Signed>,
) -> String {
    let http = http
        .map(|port| format!("http = \"127.0.0.1:{port}\"\n"))
        .unwrap_or_default();
    let security = match signed {
        None => "require_signed = false\n".to_string(),
        Some(s) => format!(
            "require_signed = true\ntrusted_keys = [{:?}]\nstate_dir = {:?}\n",
            s.master, s.state_dir
        ),
    };
    format!(
        "master_topics = [\"{TOPIC_MAID}\"]\n\n\
         [redis]\nurl = \"{url}\"\n\n\
         [agent]\nconcurrency = {in_flight}\n{http}\n\
         [security]\n{security}\n\
         [plugins.cmd]\nexec = [\"*\"]\nshell = true\nenv = [\"PATH\"]\n"
    )
}

/// Make sure `import redis` works for the seed, installing redis-py with
/// pip when it does not. `Err` says why the seed cannot run.
fn ensure_redis_py(python: &Path) -> Result<(), String> {
    let importable = || {
        Command::new(python)
            .args(["-c", "import redis"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
    };
    match importable() {
        Ok(true) => return Ok(()),
        Ok(false) => {}
        Err(e) => return Err(format!("cannot run {}: {e}", python.display())),
    }
    eprintln!(
        "==> the seed needs redis-py: running `{} -m pip install redis`",
        python.display()
    );
    let installed = Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "redis"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status();
    match (installed, importable()) {
        (_, Ok(true)) => Ok(()),
        (Ok(s), _) => Err(format!(
            "redis-py is not installed and `{} -m pip install redis` failed ({s}); \
             install it (pip install redis) or pass --no-seed",
            python.display()
        )),
        (Err(e), _) => Err(format!(
            "redis-py is not installed and pip could not run ({e}); \
             install it (pip install redis) or pass --no-seed"
        )),
    }
}
