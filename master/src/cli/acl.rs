//! `maid acl`: the Redis ACL rules (an `aclfile`, Redis 7) for a fleet's
//! two credentials, so that Redis itself holds each to least privilege.
//!
//! * The **agent** user may subscribe to its masters' topics and publish
//!   only under `maid.reply.` (PROTOCOL §1) — a selector keeps the two
//!   apart, as Redis 7.0 channel rules otherwise cover both; it may write
//!   the registry, alive and job-cache keys and only read the file and
//!   plugin stores. It cannot publish a job, push a file or plugin, or
//!   hear another master's topic.
//! * The **master** user may publish on its topics, hear every reply topic
//!   (`maid.reply.*`, exactly: Redis 7.0 matches pattern subscriptions
//!   literally) and read and write `maid:*` keys, with the commands maid
//!   sends and no others.
//!
//! The `default` user is switched off. Passwords are written as SHA-256
//! (`#<hex>`), never in clear; they are read from the environment.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use sha2::{Digest, Sha256};

#[derive(Debug, Args)]
pub struct AclArgs {
    /// The agents' Redis user.
    #[arg(long, default_value = "maid-agent")]
    pub agent_user: String,
    /// The master's Redis user.
    #[arg(long, default_value = "maid-master")]
    pub master_user: String,
    /// A master topic the agents hear and the master publishes on
    /// (repeatable) [default: the config's master_topics].
    #[arg(long = "master-topic", value_name = "TOPIC")]
    pub master_topics: Vec<String>,
    /// Configuration file (its master_topics).
    #[arg(long, short = 'c', env = "MAID_CONFIG")]
    pub config: Option<std::path::PathBuf>,
}

/// The environment variables the passwords are read from.
pub const AGENT_PASSWORD_ENV: &str = "MAID_REDIS_AGENT_PASSWORD";
pub const MASTER_PASSWORD_ENV: &str = "MAID_REDIS_MASTER_PASSWORD";

/// What an agent sends: its connection set-up needs no permission (AUTH);
/// these are every command of its registry, job cache, file and plugin
/// reads and replies (`spublish` where a Redis 7 Cluster shards them,
/// which `info` tells).
const AGENT_COMMANDS: &[&str] = &[
    "hset", "setex", "set", "expire", "hget", "hgetall", "hmget", "hexists", "get", "getrange",
    "strlen", "exists", "publish", "spublish", "info",
];

/// What the master side sends: publishing jobs, collecting replies,
/// reading the registry and job cache, pushing files and plugins.
const MASTER_COMMANDS: &[&str] = &[
    "publish",
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "info",
    "ping",
    "hset",
    "hmset",
    "hget",
    "hmget",
    "hgetall",
    "hexists",
    "hdel",
    "get",
    "set",
    "setex",
    "strlen",
    "getrange",
    "exists",
    "expire",
    "del",
    "zadd",
    "zrangebyscore",
    "zremrangebyscore",
];

/// A Redis user or topic name that can stand in an ACL line unquoted.
fn plain(what: &str, s: &str) -> anyhow::Result<()> {
    let ok = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:@".contains(&b));
    if !ok || s.contains(['*', '?', '[']) {
        bail!("{what} {s:?}: use letters, digits and - _ . : @ only");
    }
    Ok(())
}

fn password(env: &str) -> anyhow::Result<String> {
    let pw = std::env::var(env).with_context(|| format!("set {env} to the password"))?;
    if pw.len() < 16 {
        bail!("{env}: use a password of at least 16 characters");
    }
    Ok(hex::encode(Sha256::digest(pw.as_bytes())))
}

/// The aclfile lines for `agent` and `master` users with SHA-256
/// password hashes, for master topics `topics`.
pub fn rules(
    agent: (&str, &str),
    master: (&str, &str),
    topics: &[String],
) -> anyhow::Result<String> {
    plain("user", agent.0)?;
    plain("user", master.0)?;
    if topics.is_empty() {
        bail!("no master topics (--master-topic or the config's master_topics)");
    }
    for t in topics {
        plain("master topic", t)?;
    }
    let cmds = |list: &[&str]| {
        list.iter()
            .map(|c| format!("+{c}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let channels = |list: &[String]| {
        list.iter()
            .map(|t| format!("&{t}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let reply = format!("&{}", crate::jobs::REPLY_PATTERN);
    Ok(format!(
        "user default off resetkeys resetchannels -@all\n\
         user {agent_user} on #{agent_hash} resetkeys resetchannels -@all \
         ~maid:registry ~maid:alive:* ~maid:job:* ~maid:syndic:* \
         %R~maid:file:* %R~maid:plugins %R~maid:plugins:* \
         {reply} {agent_cmds} (+subscribe {topics})\n\
         user {master_user} on #{master_hash} resetkeys resetchannels -@all ~maid:* \
         {topics} {reply} {master_cmds}\n",
        agent_user = agent.0,
        agent_hash = agent.1,
        master_user = master.0,
        master_hash = master.1,
        agent_cmds = cmds(AGENT_COMMANDS),
        master_cmds = cmds(MASTER_COMMANDS),
        topics = channels(topics),
    ))
}

pub fn run(args: AclArgs) -> anyhow::Result<ExitCode> {
    let topics = if args.master_topics.is_empty() {
        match &args.config {
            Some(path) => crate::config::Config::load(path)?.master_topics,
            None => Vec::new(),
        }
    } else {
        args.master_topics.clone()
    };
    let text = rules(
        (&args.agent_user, &password(AGENT_PASSWORD_ENV)?),
        (&args.master_user, &password(MASTER_PASSWORD_ENV)?),
        &topics,
    )?;
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_widen_a_rule_are_refused() {
        let topics = vec!["master-1".to_string()];
        assert!(rules(("a", "h"), ("m", "h"), &topics).is_ok());
        for bad in ["a b", "a*", "", "x ~*", "a&b"] {
            assert!(rules((bad, "h"), ("m", "h"), &topics).is_err(), "{bad:?}");
        }
        assert!(rules(("a", "h"), ("m", "h"), &["*".to_string()]).is_err());
        assert!(rules(("a", "h"), ("m", "h"), &[]).is_err());
    }
}
