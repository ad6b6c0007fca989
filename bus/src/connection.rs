//! The Redis deployments a fleet runs on — one server, Sentinel, or
//! Cluster — behind one small interface: a multiplexed command connection
//! and a pub/sub subscription.
//!
//! Sentinel is resolved to the current master on every connect, so a
//! caller that reconnects after an error follows a failover. In a Cluster,
//! classic pub/sub is cluster-wide, so job topics are subscribed on any
//! reachable node while keyed commands go through the slot-aware cluster
//! connection. Replies, one topic per job, go on sharded pub/sub
//! (`SPUBLISH`/`SSUBSCRIBE`, Redis ≥ 7) where every node has it: each
//! reply then crosses only the shard of its topic, not every node.

use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection, PubSub};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{Client, Cmd, IntoConnectionInfo, Pipeline, PushInfo, RedisFuture, RedisResult, Value};
use serde::{Deserialize, Serialize};

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a command may wait for its answer before the connection is
/// taken for dead. redis-rs would give 500 ms, which a 10 MB PUBLISH or a
/// Redis busy writing its AOF can exceed with nothing wrong; a connection
/// that is truly gone is noticed by the heartbeat and the subscription too.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where Redis is (`[redis]` in the config). Exactly one of `url`,
/// `sentinels` or `cluster`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisConfig {
    /// A single server: `redis://[:password@]host:port/[db]` or `rediss://`.
    pub url: Option<String>,
    /// Sentinel addresses (`redis://host:26379`).
    #[serde(default)]
    pub sentinels: Vec<String>,
    /// The service name the sentinels monitor.
    pub service: Option<String>,
    /// Cluster seed nodes.
    #[serde(default)]
    pub cluster: Vec<String>,
    /// Password for the data nodes, when not in the URLs.
    pub password: Option<String>,
    /// With a `rediss://` url: the PEM certificate(s) of the CA that signed
    /// the server's certificate [default: the system's roots]. The server
    /// certificate is always verified, its name (or IP) included.
    pub tls_ca: Option<std::path::PathBuf>,
    /// With a `rediss://` url: this client's PEM certificate, for a server
    /// that requires client certificates (`tls-auth-clients yes`).
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of `tls_cert`.
    pub tls_key: Option<std::path::PathBuf>,
    /// Cluster only: replies on sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`)
    /// [default: when every node runs Redis 7 or later]. The master and
    /// its maids must agree: a `SSUBSCRIBE` does not hear a `PUBLISH`.
    pub sharded_replies: Option<bool>,
}

impl RedisConfig {
    /// This configuration pointed at the single server `url` instead (the
    /// `--redis` option): its TLS settings stay, the rest goes.
    pub fn with_url(&self, url: &str) -> RedisConfig {
        RedisConfig {
            url: Some(url.to_string()),
            tls_ca: self.tls_ca.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            ..Default::default()
        }
    }
}

/// Why a Redis endpoint is unusable.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error("redis: {0}")]
    Config(String),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("redis: connection timed out")]
    Timeout,
    /// No connection could be made: where to (never a password) and why.
    #[error("cannot connect to Redis at {at}: {reason}")]
    Unreachable { at: String, reason: String },
}

#[derive(Debug, Clone)]
enum Endpoint {
    Single(Client),
    Sentinel {
        sentinels: Vec<String>,
        service: String,
        password: Option<String>,
    },
    Cluster {
        nodes: Vec<String>,
        password: Option<String>,
    },
}

/// A Redis deployment.
#[derive(Debug, Clone)]
pub struct Bus {
    endpoint: Endpoint,
    /// Whether replies go on sharded pub/sub: as configured, or found out
    /// at the first connection.
    sharded: std::sync::Arc<tokio::sync::OnceCell<bool>>,
}

/// A command connection; cheap to clone, safe to share.
#[derive(Clone)]
pub enum Conn {
    Single(MultiplexedConnection),
    /// A cluster, and whether its replies go on sharded pub/sub.
    Cluster(ClusterConnection, bool),
}

/// A stream of the messages published on a reply topic.
pub type Replies = std::pin::Pin<Box<dyn futures_util::Stream<Item = redis::Msg> + Send>>;

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c, _) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c, _) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c, _) => c.get_db(),
        }
    }
}

/// `url` without the `user:password@` of its authority.
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) if scheme.is_empty() => rest[at + 1..].to_string(),
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

fn with_password(url: &str, password: &Option<String>) -> RedisResult<redis::ConnectionInfo> {
    let info = url.into_connection_info()?;
    Ok(match password {
        Some(pw) if info.redis_settings().password().is_none() => {
            let settings = info.redis_settings().clone().set_password(pw);
            info.set_redis_settings(settings)
        }
        _ => info,
    })
}

async fn timed<T>(f: impl std::future::Future<Output = RedisResult<T>>) -> Result<T, BusError> {
    match tokio::time::timeout(CONNECT_TIMEOUT, f).await {
        Ok(r) => Ok(r?),
        Err(_) => Err(BusError::Timeout),
    }
}

/// The certificates of `config`'s TLS settings, read; `None` when it has
/// none (a `rediss://` url then trusts the system's roots).
fn tls_certificates(config: &RedisConfig) -> Result<Option<redis::TlsCertificates>, BusError> {
    let read = |what: &str, path: &std::path::Path| {
        std::fs::read(path).map_err(|e| BusError::Config(format!("{what} {}: {e}", path.display())))
    };
    let client_tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
            client_cert: read("redis.tls_cert", cert)?,
            client_key: read("redis.tls_key", key)?,
        }),
        (None, None) => None,
        _ => {
            return Err(BusError::Config(
                "redis.tls_cert and redis.tls_key go together".into(),
            ));
        }
    };
    let root_cert = match &config.tls_ca {
        Some(ca) => Some(read("redis.tls_ca", ca)?),
        None => None,
    };
    if client_tls.is_none() && root_cert.is_none() {
        return Ok(None);
    }
    if !config
        .url
        .as_deref()
        .is_some_and(|u| u.starts_with("rediss://"))
    {
        return Err(BusError::Config(
            "redis.tls_ca and redis.tls_cert need a rediss:// url".into(),
        ));
    }
    Ok(Some(redis::TlsCertificates {
        client_tls,
        root_cert,
    }))
}

impl Bus {
    /// Check the configuration; nothing connects yet.
    pub fn new(config: &RedisConfig) -> Result<Bus, BusError> {
        let given = [
            config.url.is_some(),
            !config.sentinels.is_empty(),
            !config.cluster.is_empty(),
        ];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(BusError::Config(
                "give only one of redis.url, redis.sentinels and redis.cluster".into(),
            ));
        }
        let endpoint = if !config.sentinels.is_empty() {
            Endpoint::Sentinel {
                sentinels: config.sentinels.clone(),
                service: config.service.clone().unwrap_or_else(|| "mymaster".into()),
                password: config.password.clone(),
            }
        } else if !config.cluster.is_empty() {
            for node in &config.cluster {
                with_password(node, &config.password)?;
            }
            Endpoint::Cluster {
                nodes: config.cluster.clone(),
                password: config.password.clone(),
            }
        } else {
            let url = config.url.as_deref().unwrap_or("redis://127.0.0.1:6379/");
            let info = with_password(url, &config.password)?;
            Endpoint::Single(match tls_certificates(config)? {
                Some(certs) => Client::build_with_tls(info, certs)?,
                None => Client::open(info)?,
            })
        };
        if (!config.sentinels.is_empty() || !config.cluster.is_empty())
            && (config.tls_ca.is_some() || config.tls_cert.is_some())
        {
            return Err(BusError::Config(
                "redis.tls_ca and redis.tls_cert apply to redis.url only".into(),
            ));
        }
        let sharded = tokio::sync::OnceCell::new_with(match &endpoint {
            Endpoint::Cluster { .. } => config.sharded_replies,
            _ if config.sharded_replies == Some(true) => {
                return Err(BusError::Config(
                    "redis.sharded_replies needs redis.cluster".into(),
                ));
            }
            _ => Some(false),
        });
        Ok(Bus {
            endpoint,
            sharded: std::sync::Arc::new(sharded),
        })
    }

    /// A bus for one URL.
    pub fn from_url(url: &str) -> Result<Bus, BusError> {
        Bus::new(&RedisConfig {
            url: Some(url.to_string()),
            ..Default::default()
        })
    }

    /// A client for the node that takes commands and subscriptions now:
    /// the server, Sentinel's current master, or the first reachable
    /// cluster node.
    async fn node_client(&self) -> Result<Client, BusError> {
        match &self.endpoint {
            Endpoint::Single(c) => Ok(c.clone()),
            Endpoint::Sentinel {
                sentinels,
                service,
                password,
            } => {
                let mut node = SentinelNodeConnectionInfo::default();
                if let Some(pw) = password {
                    let settings = redis::RedisConnectionInfo::default().set_password(pw);
                    node = node.set_redis_connection_info(settings);
                }
                let mut sentinel = SentinelClient::build(
                    sentinels.clone(),
                    service.clone(),
                    Some(node),
                    SentinelServerType::Master,
                )?;
                timed(sentinel.async_get_client()).await
            }
            Endpoint::Cluster { nodes, password } => {
                let mut last = None;
                for node in nodes {
                    let client = Client::open(with_password(node, password)?)?;
                    match timed(client.get_multiplexed_async_connection()).await {
                        Ok(mut c) => {
                            let pong: RedisResult<String> =
                                redis::cmd("PING").query_async(&mut c).await;
                            if pong.is_ok() {
                                return Ok(client);
                            }
                        }
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| BusError::Config("no cluster nodes".into())))
            }
        }
    }

    /// A cluster client of `nodes`, as configured.
    fn cluster_builder(
        nodes: &[String],
        password: &Option<String>,
    ) -> Result<redis::cluster::ClusterClientBuilder, BusError> {
        let infos = nodes
            .iter()
            .map(|n| with_password(n, password))
            .collect::<RedisResult<Vec<_>>>()?;
        Ok(redis::cluster::ClusterClient::builder(infos)
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT))
    }

    /// Where this bus connects, for messages: the server's address, or
    /// the Sentinels' or cluster nodes' URLs, without a password.
    pub fn endpoint(&self) -> String {
        match &self.endpoint {
            Endpoint::Single(c) => c.get_connection_info().addr().to_string(),
            Endpoint::Sentinel {
                sentinels, service, ..
            } => format!(
                "the Sentinels {} (service {service})",
                sentinels
                    .iter()
                    .map(|u| without_userinfo(u))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Endpoint::Cluster { nodes, .. } => format!(
                "the cluster nodes {}",
                nodes
                    .iter()
                    .map(|u| without_userinfo(u))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// `e`, met while connecting, as [`BusError::Unreachable`]: it names
    /// where the connection was to go.
    fn unreachable(&self, e: BusError) -> BusError {
        let reason = match e {
            BusError::Redis(e) => e.to_string(),
            BusError::Timeout => "connection timed out".into(),
            other => return other,
        };
        BusError::Unreachable {
            at: self.endpoint(),
            reason,
        }
    }

    /// Open a command connection.
    pub async fn connect(&self) -> Result<Conn, BusError> {
        match &self.endpoint {
            Endpoint::Cluster { nodes, password } => {
                let client = Self::cluster_builder(nodes, password)?.build()?;
                let mut conn = timed(client.get_async_connection())
                    .await
                    .map_err(|e| self.unreachable(e))?;
                let sharded = *self
                    .sharded
                    .get_or_try_init(|| every_node_has_sharded_pubsub(&mut conn))
                    .await?;
                Ok(Conn::Cluster(conn, sharded))
            }
            _ => {
                let client = self.node_client().await.map_err(|e| self.unreachable(e))?;
                let config = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(RESPONSE_TIMEOUT));
                Ok(Conn::Single(
                    timed(client.get_multiplexed_async_connection_with_config(&config))
                        .await
                        .map_err(|e| self.unreachable(e))?,
                ))
            }
        }
    }

    /// Open a pub/sub connection subscribed to `topics`.
    pub async fn subscribe(&self, topics: &[String]) -> Result<PubSub, BusError> {
        let client = self.node_client().await.map_err(|e| self.unreachable(e))?;
        let mut pubsub = timed(client.get_async_pubsub())
            .await
            .map_err(|e| self.unreachable(e))?;
        for topic in topics {
            timed(pubsub.subscribe(topic)).await?;
        }
        Ok(pubsub)
    }

    /// Whether replies go on sharded pub/sub (found out by connecting once
    /// where the configuration does not say).
    pub async fn sharded(&self) -> Result<bool, BusError> {
        if let Some(sharded) = self.sharded.get() {
            return Ok(*sharded);
        }
        Ok(matches!(self.connect().await?, Conn::Cluster(_, true)))
    }

    /// Where replies are sharded: a cluster connection that takes
    /// `SSUBSCRIBE`, and what it hears. `None` where they are not.
    pub async fn sharded_subscriber(
        &self,
    ) -> Result<
        Option<(
            ClusterConnection,
            tokio::sync::mpsc::UnboundedReceiver<PushInfo>,
        )>,
        BusError,
    > {
        let Endpoint::Cluster { nodes, password } = &self.endpoint else {
            return Ok(None);
        };
        if !self.sharded().await? {
            return Ok(None);
        }
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let client = Self::cluster_builder(nodes, password)?
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(tx)
            .build()?;
        let conn = timed(client.get_async_connection()).await?;
        Ok(Some((conn, rx)))
    }

    /// Subscribe to the reply topic `topic`: on sharded pub/sub where
    /// replies go there ([`RedisConfig::sharded_replies`]), else classic.
    pub async fn replies(&self, topic: &str) -> Result<Replies, BusError> {
        use futures_util::StreamExt;
        let Some((mut conn, rx)) = self.sharded_subscriber().await? else {
            let pubsub = self.subscribe(&[topic.to_string()]).await?;
            return Ok(Box::pin(pubsub.into_on_message()));
        };
        timed(conn.ssubscribe(topic)).await?;
        // The connection lives as long as the stream: dropping it ends
        // the subscription.
        let messages = futures_util::stream::unfold((rx, conn), |(mut rx, conn)| async move {
            loop {
                let push = rx.recv().await?;
                if let Some(msg) = redis::Msg::from_push_info(push) {
                    return Some((msg, (rx, conn)));
                }
            }
        });
        Ok(messages.boxed())
    }

    /// A short description for logs (no passwords).
    pub fn describe(&self) -> String {
        match &self.endpoint {
            Endpoint::Single(c) => format!("{}", c.get_connection_info().addr()),
            Endpoint::Sentinel {
                service, sentinels, ..
            } => {
                format!(
                    "sentinel service {service} via {} sentinels",
                    sentinels.len()
                )
            }
            Endpoint::Cluster { nodes, .. } => format!("cluster of {} seed nodes", nodes.len()),
        }
    }
}

/// Whether every node of the cluster behind `conn` runs Redis 7 or later,
/// and so has sharded pub/sub.
async fn every_node_has_sharded_pubsub(conn: &mut ClusterConnection) -> Result<bool, BusError> {
    let info: Value = timed(redis::cmd("INFO").arg("server").query_async(conn)).await?;
    let mut texts = Vec::new();
    collect_texts(&info, &mut texts);
    Ok(!texts.is_empty()
        && texts
            .iter()
            .all(|t| major_version(t).is_some_and(|v| v >= 7)))
}

/// Every string in `value`, however nested (a cluster answers `INFO` with
/// one text per node).
fn collect_texts(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::BulkString(b) => out.push(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) | Value::VerbatimString { text: s, .. } => out.push(s.clone()),
        Value::Array(items) | Value::Set(items) => {
            items.iter().for_each(|v| collect_texts(v, out));
        }
        Value::Map(pairs) => pairs.iter().for_each(|(_, v)| collect_texts(v, out)),
        _ => {}
    }
}

/// The major version in an `INFO server` text (`redis_version:7.0.15`).
fn major_version(info: &str) -> Option<u32> {
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))?;
    line.split('.').next()?.trim().parse().ok()
}

/// `PUBLISH` (or, where replies are sharded, `SPUBLISH`) of a reply.
pub async fn publish_reply(conn: &mut Conn, topic: &str, payload: &str) -> RedisResult<()> {
    reply_command(conn, topic, payload)
        .query_async::<i64>(conn)
        .await
        .map(|_| ())
}

/// The command that publishes a reply on `conn`, for a pipeline.
pub fn reply_command(conn: &Conn, topic: &str, payload: &str) -> Cmd {
    let verb: &[u8] = match conn {
        Conn::Cluster(_, true) => b"SPUBLISH",
        _ => b"PUBLISH",
    };
    command(&[verb, topic.as_bytes(), payload.as_bytes()])
}

/// `PUBLISH topic payload`.
pub async fn publish(conn: &mut Conn, topic: &str, payload: &str) -> RedisResult<()> {
    publish_command(topic, payload)
        .query_async::<i64>(conn)
        .await
        .map(|_| ())
}

/// The command `PUBLISH topic payload`, for a pipeline.
pub fn publish_command(topic: &str, payload: &str) -> Cmd {
    command(&[b"PUBLISH", topic.as_bytes(), payload.as_bytes()])
}

/// The command `args`, its buffer sized once: a reply is copied into it
/// whole, and a buffer grown by doubling would copy it again several times.
pub fn command(args: &[&[u8]]) -> Cmd {
    let size = args.iter().map(|a| a.len()).sum();
    let mut cmd = Cmd::with_capacity(args.len(), size);
    for arg in args {
        cmd.arg(*arg);
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_named_without_their_password() {
        assert_eq!(
            without_userinfo("redis://:s3cret@10.0.0.1:6379/0"),
            "redis://10.0.0.1:6379/0"
        );
        assert_eq!(
            without_userinfo("rediss://maid:p@ss@host:6380/"),
            "rediss://host:6380/"
        );
        assert_eq!(without_userinfo("redis://host:1/a@b"), "redis://host:1/a@b");
        let bus = Bus::from_url("redis://:s3cret@127.0.0.1:1/").unwrap();
        assert_eq!(bus.endpoint(), "127.0.0.1:1");
        let bus = Bus::new(&RedisConfig {
            cluster: vec!["redis://:s3cret@127.0.0.1:7000".into()],
            ..Default::default()
        })
        .unwrap();
        assert!(!bus.endpoint().contains("s3cret"), "{}", bus.endpoint());
    }

    #[tokio::test]
    async fn a_refused_connection_names_where_it_was_to_go() {
        // Port 1 on loopback: nothing listens there.
        let bus = Bus::from_url("redis://:s3cret@127.0.0.1:1/").unwrap();
        let Err(e) = bus.connect().await else {
            panic!("connected to port 1");
        };
        let text = e.to_string();
        assert!(
            text.starts_with("cannot connect to Redis at 127.0.0.1:1: "),
            "{text}"
        );
        assert!(!text.contains("s3cret"), "{text}");
    }
}
