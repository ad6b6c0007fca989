//! Running a fleet for tests: real `maid agent` processes against a real
//! Redis, and the master side both as a library and as the `maid` binary.

use std::collections::HashSet;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use maid_bus::{Bus, RedisConfig};
use maid_master::jobs::{Collect, JobRequest, Report};
use serde_json::{Map, Value};

use super::guests;
pub use maid_testkit::wire::{
    LINGER, REPLY_DEADLINE, TOPIC, cached_returns, collect_replies, raw_round_trip,
    wait_subscribers,
};

/// A `maid agent` process; killed (SIGKILL) on drop.
pub struct Agent {
    pub id: String,
    child: Option<Child>,
    pub config: tempfile::NamedTempFile,
}

impl Agent {
    /// Send SIGKILL: the agent dies without a word, as a crashed host does.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Send SIGTERM and wait for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let c = self.child.as_mut().expect("agent is running");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(c.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = c.wait().unwrap();
        self.child = None;
        status
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Extra TOML for an agent's config (grains, grants, [agent] settings).
pub fn start_agent(redis: &RedisConfig, id: &str, extra_toml: &str) -> Agent {
    start_agent_with_plugins(redis, id, extra_toml, Path::new(guests::PLUGINS_DIR))
}

/// [`start_agent`] with plugins from `plugin_dir`.
pub fn start_agent_with_plugins(
    redis: &RedisConfig,
    id: &str,
    extra_toml: &str,
    plugin_dir: &Path,
) -> Agent {
    let mut config = tempfile::NamedTempFile::new().unwrap();
    let redis_toml = toml::to_string(redis).unwrap();
    // An agent must be told whether to require signed jobs; a test that
    // says nothing runs the unsigned fleet, as an operator must choose to.
    let security = if extra_toml.contains("[security]") {
        ""
    } else {
        "[security]\nrequire_signed = false\n"
    };
    // The core grains are detected under the grants `maid init` writes.
    let grains = if extra_toml.contains("[plugins.grains]") {
        String::new()
    } else {
        super::init_grains_toml()
    };
    let text = format!(
        "master_topics = [\"{TOPIC}\"]\n{extra_toml}\n{security}{grains}\n[redis]\n{redis_toml}\n"
    );
    std::io::Write::write_all(&mut config, text.as_bytes()).unwrap();
    let child = crate::common::maid_command()
        .args(["agent", "--id", id, "-c"])
        .arg(config.path())
        .env("MAID_PLUGIN_DIR", plugin_dir)
        .env("MAID_CACHE_DIR", super::shared_cache())
        .env(
            "MAID_LOG",
            std::env::var("TEST_MAID_LOG").unwrap_or("maid=warn".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("start maid agent");
    Agent {
        id: id.into(),
        child: Some(child),
        config,
    }
}

/// Wait until every id in `ids` is registered and alive.
pub async fn wait_registered(bus: &Bus, ids: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut conn) = bus.connect().await
            && let Ok(maids) = maid_master::jobs::alive_maids(&mut conn, None).await
            && ids
                .iter()
                .all(|id| maids.get(*id).is_some_and(|(alive, _)| *alive))
        {
            return;
        }
        assert!(Instant::now() < deadline, "agents {ids:?} never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A job request with the test defaults.
pub fn request(tgt: &str, tgt_type: &str, fun: &str, arg: Value, kwarg: Value) -> JobRequest {
    JobRequest {
        master_topic: TOPIC.into(),
        tgt: Value::String(tgt.into()),
        tgt_type: tgt_type.into(),
        fun: fun.into(),
        arg: arg.as_array().cloned().unwrap_or_default(),
        kwarg: kwarg.as_object().cloned().unwrap_or_else(Map::new),
        user: Some("tester".into()),
        out: None,
        key: None,
        source_hashes: Default::default(),
        delimiter: None,
        pillar: None,
        pillar_settings: None,
        collect: Collect {
            timeout: Duration::from_secs(10),
            exclude: HashSet::new(),
            linger: Duration::from_millis(300),
            pki: None,
            gather_job_timeout: None,
        },
    }
}

/// Publish and collect.
pub async fn run(bus: &Bus, req: &JobRequest) -> Report {
    maid_master::jobs::run(bus, req, |_| {}).await.unwrap()
}

/// Start a job in the background as [`run`] does, with the master reading
/// its replies through `replies`, which is given the job's subscription
/// (made before the job is published) to adapt: watch it, cut it short.
pub async fn run_with_replies<S>(
    bus: &Bus,
    req: JobRequest,
    replies: impl FnOnce(redis::aio::PubSub) -> S,
) -> tokio::task::JoinHandle<Report>
where
    S: futures_util::Stream<Item = redis::Msg> + Unpin + Send + 'static,
{
    let jid = maid_agent::jid::new_jid();
    let topic = maid_master::jobs::temp_topic(&jid);
    let replies = replies(bus.subscribe(std::slice::from_ref(&topic)).await.unwrap());
    let mut conn = bus.connect().await.unwrap();
    tokio::spawn(async move {
        maid_master::jobs::run_on(&mut conn, replies, jid, &topic, &req, |_| {})
            .await
            .unwrap()
    })
}

/// Start [`run`] in the background; the receiver hears when maid `id`
/// has pinged the job, so a test can act on a job that is surely running
/// there (kill the maid, stop it, stop Redis) without guessing a delay.
pub async fn run_watching(
    bus: &Bus,
    req: JobRequest,
    id: &str,
) -> (
    tokio::task::JoinHandle<Report>,
    tokio::sync::oneshot::Receiver<()>,
) {
    use maid_agent::protocol::Reply;
    let (tx, pinged) = tokio::sync::oneshot::channel();
    let mut tx = Some(tx);
    let id = id.to_string();
    let job = run_with_replies(bus, req, move |sub| {
        Box::pin(futures_util::StreamExt::inspect(
            sub.into_on_message(),
            move |msg| {
                if let Ok(Reply::Ping(p)) =
                    maid_agent::replies::receive(msg.get_payload_bytes()).map(|r| r.reply)
                    && p.sub_ip == id
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(());
                }
            },
        ))
    })
    .await;
    (job, pinged)
}

/// The `maid` binary as a master: `maid run ...` against `redis_url`.
pub fn maid_cli(redis_url: &str, args: &[&str], cwd: &Path) -> Output {
    crate::common::maid_command()
        .args(args)
        .current_dir(cwd)
        .env("MAID_REDIS", redis_url)
        .env_remove("MAID_CONFIG")
        .output()
        .expect("run maid")
}

/// `tests/foreign_master.py`, a master written from PROTOCOL.md alone in
/// Python, run once against the Redis on `port`: `fun ARGS` to `*`; what
/// it printed.
pub async fn foreign_master(port: u16, fun: &str, args: &[&str]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/foreign_master.py");
    let mut cmd = Command::new("python3");
    cmd.arg(script)
        .args([port.to_string().as_str(), TOPIC, fun])
        .args(args);
    let out =
        tokio::task::spawn_blocking(move || cmd.output().expect("python3 is needed for this test"))
            .await
            .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
