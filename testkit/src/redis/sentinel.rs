//! [`Sentinel`]: a master, its replica and three sentinels, and a
//! failover on demand.

use std::fs;
use std::time::Duration;

use super::bins::redis_sentinel_cmd;
use super::client::{flat_map, info, query};
use super::poll::{READY_TIMEOUT, poll_until};
use super::ports::free_port;
use super::server::RedisServer;

/// A master, one replica and three sentinels (quorum 2) watching them.
/// Everything is killed when dropped.
pub struct Sentinel {
    service: String,
    /// Data nodes: index 0 started as master, 1 as its replica.
    nodes: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    /// Port of the master killed by the last [`Sentinel::kill_master`].
    killed_master: Option<u16>,
}

impl Sentinel {
    /// The setup with service name `mymaster`.
    pub fn start() -> Self {
        Self::start_with_service("mymaster")
    }

    /// The setup with another service name.
    pub fn start_with_service(service: &str) -> Self {
        // No delay before a diskless full sync (default: 5 s).
        let data_args = ["--repl-diskless-sync-delay", "0"];
        let master = RedisServer::start_named("master", free_port, &data_args);
        let master_port = master.port();
        let mut replica_args = data_args.to_vec();
        let master_port_s = master_port.to_string();
        replica_args.extend(["--replicaof", "127.0.0.1", &master_port_s]);
        let replica = RedisServer::start_named("replica", free_port, &replica_args);
        let mut setup = Sentinel {
            service: service.to_owned(),
            nodes: vec![master, replica],
            sentinels: Vec::new(),
            killed_master: None,
        };

        // Sentinels learn about replicas from the master's INFO, so start
        // them once the replica is attached and in sync.
        let replica_port = setup.nodes[1].port();
        if let Err(e) = poll_until(READY_TIMEOUT, || {
            let m = info(master_port, "replication").map_err(|e| format!("master: {e}"))?;
            let r = info(replica_port, "replication").map_err(|e| format!("replica: {e}"))?;
            let slaves = m.get("connected_slaves").map(String::as_str);
            let link = r.get("master_link_status").map(String::as_str);
            if slaves == Some("1") && link == Some("up") {
                Ok(())
            } else {
                Err(format!(
                    "master connected_slaves={slaves:?}, replica master_link_status={link:?}"
                ))
            }
        }) {
            setup.fail(&format!("replica did not sync: {e}"));
        }

        for i in 0..3 {
            let sentinel = Self::start_sentinel(i, service, master_port);
            setup.sentinels.push(sentinel);
        }
        if let Err(e) = poll_until(READY_TIMEOUT, || setup.check_sentinels(master_port)) {
            setup.fail(&format!("sentinels did not become ready: {e}"));
        }
        setup
    }

    fn start_sentinel(i: usize, service: &str, master_port: u16) -> RedisServer {
        let mut server = RedisServer::unstarted(&format!("sentinel {i}"));
        server.extra = redis_sentinel_cmd()
            .1
            .iter()
            .map(|s| s.to_string())
            .collect();
        // Sentinel rewrites its configuration file, so it lives in the
        // server's own directory; it is written once the port is known.
        server.start_on_free_port(free_port, |server| {
            let conf = format!(
                "port {port}\n\
                 bind 127.0.0.1\n\
                 dir {dir}\n\
                 logfile {dir}/redis.log\n\
                 sentinel monitor {service} 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds {service} 1000\n\
                 sentinel failover-timeout {service} 5000\n\
                 sentinel parallel-syncs {service} 1\n",
                port = server.port,
                dir = server.dir.path().display(),
            );
            fs::write(server.sentinel_conf(), conf).expect("write sentinel.conf");
        });
        server
    }

    /// Every sentinel reports `master_port` as master and knows the
    /// replica and the two other sentinels.
    fn check_sentinels(&self, master_port: u16) -> Result<(), String> {
        let svc = &self.service;
        for s in &self.sentinels {
            let p = s.port();
            let addr: Option<(String, String)> = query(
                p,
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(svc),
            )
            .map_err(|e| format!("sentinel {p}: get-master-addr-by-name: {e}"))?;
            if addr.as_ref().map(|(_, port)| port.as_str()) != Some(&master_port.to_string()) {
                return Err(format!("sentinel {p} reports master {addr:?}"));
            }
            let replicas: Vec<Vec<String>> =
                query(p, redis::cmd("SENTINEL").arg("replicas").arg(svc))
                    .map_err(|e| format!("sentinel {p}: replicas: {e}"))?;
            let healthy = replicas
                .iter()
                .filter(|r| flat_map(r).get("flags") == Some(&"slave"))
                .count();
            if replicas.len() != 1 || healthy != 1 {
                return Err(format!("sentinel {p} sees replicas {replicas:?}"));
            }
            let others: Vec<Vec<String>> =
                query(p, redis::cmd("SENTINEL").arg("sentinels").arg(svc))
                    .map_err(|e| format!("sentinel {p}: sentinels: {e}"))?;
            if others.len() != self.sentinels.len() - 1 {
                return Err(format!(
                    "sentinel {p} knows {} other sentinels, want {}",
                    others.len(),
                    self.sentinels.len() - 1
                ));
            }
        }
        Ok(())
    }

    /// `redis://127.0.0.1:<port>/` of each sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The sentinel servers themselves (for their logs, or to kill one).
    pub fn sentinels(&mut self) -> &mut [RedisServer] {
        &mut self.sentinels
    }

    /// The monitored service's name (`mymaster` by default).
    pub fn service_name(&self) -> &str {
        &self.service
    }

    /// The master's port as the (first answering) sentinel reports it.
    pub fn master_port(&self) -> u16 {
        self.sentinels
            .iter()
            .find_map(|s| self.reported_master(s.port()).ok())
            .unwrap_or_else(|| self.panic_with_logs("no sentinel reports a master"))
    }

    /// The data nodes' ports: the one started as master, then the one
    /// started as replica.
    pub fn node_ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    fn reported_master(&self, sentinel_port: u16) -> Result<u16, String> {
        let addr: Option<(String, u16)> = query(
            sentinel_port,
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(&self.service),
        )
        .map_err(|e| format!("sentinel {sentinel_port}: {e}"))?;
        addr.map(|(_, port)| port)
            .ok_or_else(|| format!("sentinel {sentinel_port} knows no master"))
    }

    /// SIGKILLs the current master (as the sentinels report it).
    pub fn kill_master(&mut self) {
        let port = self.master_port();
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("master port {port} is none of our nodes"));
        node.kill();
        self.killed_master = Some(port);
    }

    /// Waits until every running sentinel reports a master other than the
    /// one [`Sentinel::kill_master`] killed, and that server says it is a
    /// master; returns its port. Panics (with all logs) on timeout. Sentinel
    /// may need a second election round (10 s here) when the first vote
    /// splits, so allow 30 s.
    pub fn wait_for_failover(&self, timeout: Duration) -> u16 {
        let old = self
            .killed_master
            .expect("wait_for_failover: call kill_master first");
        let result = poll_until(timeout, || {
            let mut seen = Vec::new();
            for s in &self.sentinels {
                if s.child.is_none() {
                    continue;
                }
                seen.push(self.reported_master(s.port())?);
            }
            let new = *seen.first().ok_or("no sentinel is running")?;
            if new == old || seen.iter().any(|&p| p != new) {
                return Err(format!("old master {old}, sentinels report {seen:?}"));
            }
            let role = info(new, "replication")
                .map_err(|e| format!("new master {new}: {e}"))?
                .get("role")
                .cloned();
            if role.as_deref() != Some("master") {
                return Err(format!("new master {new} has role {role:?}"));
            }
            Ok(new)
        });
        result.unwrap_or_else(|e| {
            self.panic_with_logs(&format!("no failover within {timeout:?}: {e}"))
        })
    }

    fn logs(&self) -> String {
        self.sentinels
            .iter()
            .chain(&self.nodes)
            .map(RedisServer::log_report)
            .collect()
    }

    fn panic_with_logs(&self, why: &str) -> ! {
        panic!("sentinel setup ({}): {why}\n{}", self.service, self.logs())
    }

    fn fail(&mut self, why: &str) -> ! {
        let msg = format!("sentinel setup ({}): {why}\n{}", self.service, self.logs());
        self.kill_all();
        panic!("{msg}");
    }

    fn kill_all(&mut self) {
        // Sentinels first, so they do not start a failover during teardown.
        for s in self.sentinels.iter_mut().chain(self.nodes.iter_mut()) {
            s.kill();
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.kill_all();
    }
}
