//! [`Cluster`]: three masters made a Redis Cluster by `redis-cli --cluster
//! create`, and a node restart on demand.

use std::fs::{self, File};
use std::process::{Command, Stdio};

use super::bins::redis_cli_bin;
use super::client::{parse_info, query};
use super::poll::{READY_TIMEOUT, poll_until};
use super::ports::free_cluster_port;
use super::server::RedisServer;
use super::spawn::{kill_child, spawn};

/// A Redis Cluster of three masters (no replicas) covering all 16384
/// slots. Killed when dropped.
pub struct Cluster {
    nodes: Vec<RedisServer>,
}

impl Cluster {
    /// Starts three nodes, creates the cluster with `redis-cli --cluster
    /// create` and waits until every node reports `cluster_state:ok`.
    pub fn start() -> Self {
        const NODES: usize = 3;
        let mut nodes = Vec::with_capacity(NODES);
        for i in 0..NODES {
            let mut node = RedisServer::unstarted(&format!("cluster node {i}"));
            let conf = node.dir().join("nodes.conf");
            node.extra = vec![
                "--cluster-enabled".into(),
                "yes".into(),
                "--cluster-config-file".into(),
                conf.to_str().expect("utf-8 temp dir").into(),
                "--cluster-node-timeout".into(),
                "2000".into(),
            ];
            node.start_on_free_port(free_cluster_port, |_| {});
            nodes.push(node);
        }
        let mut cluster = Cluster { nodes };
        cluster.create();
        if let Err(e) = poll_until(READY_TIMEOUT, || cluster.check_ok()) {
            cluster.fail(&format!("cluster did not reach cluster_state:ok: {e}"));
        }
        cluster
    }

    fn create(&mut self) {
        let out_path = self.nodes[0].dir().join("cluster-create.log");
        let out = File::create(&out_path).expect("create cluster-create.log");
        let mut cmd = Command::new(redis_cli_bin());
        cmd.arg("--cluster").arg("create");
        for n in &self.nodes {
            cmd.arg(format!("127.0.0.1:{}", n.port()));
        }
        cmd.args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("clone log file"))
            .stderr(out);
        let mut child = match spawn(cmd) {
            Ok(c) => Some(c),
            Err(e) => self.fail(&format!("spawn redis-cli failed: {e}")),
        };
        let status = poll_until(READY_TIMEOUT, || match child.as_mut().unwrap().try_wait() {
            Ok(Some(status)) => Ok(status),
            Ok(None) => Err("still running".to_owned()),
            Err(e) => Err(e.to_string()),
        });
        let output = || fs::read_to_string(&out_path).unwrap_or_default();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => self.fail(&format!(
                "`redis-cli --cluster create` failed ({s}):\n{}",
                output()
            )),
            Err(e) => {
                kill_child(&mut child);
                self.fail(&format!(
                    "`redis-cli --cluster create` did not finish within {READY_TIMEOUT:?} ({e}):\n{}",
                    output()
                ))
            }
        }
    }

    /// Every node says `cluster_state:ok`, knows all nodes and sees all
    /// slots served.
    fn check_ok(&self) -> Result<(), String> {
        for n in &self.nodes {
            let text: String = query(n.port(), redis::cmd("CLUSTER").arg("INFO"))
                .map_err(|e| format!("node {}: CLUSTER INFO: {e}", n.port()))?;
            let i = parse_info(&text);
            let get = |k: &str| i.get(k).map(String::as_str).unwrap_or("?");
            let want_nodes = self.nodes.len().to_string();
            if get("cluster_state") != "ok"
                || get("cluster_slots_ok") != "16384"
                || get("cluster_known_nodes") != want_nodes
            {
                return Err(format!(
                    "node {}: cluster_state:{} cluster_slots_ok:{} cluster_known_nodes:{}",
                    n.port(),
                    get("cluster_state"),
                    get("cluster_slots_ok"),
                    get("cluster_known_nodes"),
                ));
            }
        }
        Ok(())
    }

    /// `redis://127.0.0.1:<port>/` of each node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// A `[redis]` section pointing at this cluster.
    pub fn config(&self) -> maid_bus::RedisConfig {
        maid_bus::RedisConfig {
            cluster: self.urls(),
            ..Default::default()
        }
    }

    /// Each node's port.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// The node servers (for their logs, or to kill one).
    pub fn nodes(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// A `ClusterClient` over all nodes.
    pub fn client(&self) -> redis::cluster::ClusterClient {
        redis::cluster::ClusterClient::new(self.urls()).expect("valid cluster urls")
    }

    /// Kills node `i` and starts it again on the same port and directory,
    /// so it rejoins from its `nodes.conf` (with no data: persistence is
    /// off); waits until the cluster is `ok` again everywhere.
    pub fn restart_node(&mut self, i: usize) {
        self.nodes[i].restart();
        if let Err(e) = poll_until(READY_TIMEOUT, || self.check_ok()) {
            self.fail(&format!(
                "cluster did not recover to cluster_state:ok after restarting node {i}: {e}"
            ));
        }
    }

    fn fail(&mut self, why: &str) -> ! {
        let logs: String = self.nodes.iter().map(RedisServer::log_report).collect();
        for n in &mut self.nodes {
            n.kill();
        }
        panic!("cluster: {why}\n{logs}");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
    }
}
