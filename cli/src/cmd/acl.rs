//! `maid acl`: the Redis ACL rules (an `aclfile`, Redis 7) for a fleet's
//! two credentials, so that Redis itself holds each to least privilege.
//!
//! * The **agent** user may subscribe to its masters' topics and publish
//!   only under `maid.reply.` (PROTOCOL §1) — a selector keeps the two
//!   apart, as Redis 7.0 channel rules otherwise cover both; it may write
//!   the alive keys and syndic lists, `HSET` (and nothing else) the
//!   registry, `HSET` and `EXPIRE` the job cache, and only read the file
//!   and plugin stores; it may only `XADD` to the audit streams
//!   (`maid:audit:*`), never read, trim or delete them. It cannot publish
//!   a job, push a file or plugin, hear another master's topic, or expire
//!   the registry.
//! * With `--maid ID`, each such maid gets a user of its own instead
//!   (`<agent-user>.<ID>`, its password derived from the agent password
//!   and the id, `--password-for`): it may write and expire only its own
//!   alive key and syndic list, and only `HSET` the registry and the job
//!   cache, so it can expire no other maid's key and no cached returns,
//!   and append only to its own audit stream (`maid:audit:<ID>`).
//!   The master then keeps the job cache's TTL (`jobcache::save`).
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
    /// Give maid ID a Redis user of its own, `<agent-user>.<ID>`, in place
    /// of the shared agent user (repeatable): it may expire only its own
    /// keys.
    #[arg(long = "maid", value_name = "ID")]
    pub maids: Vec<String>,
    /// Print the password of maid ID's own user (for its `[redis] url`)
    /// and nothing else.
    #[arg(long, value_name = "ID")]
    pub password_for: Option<String>,
}

/// The environment variables the passwords are read from.
pub const AGENT_PASSWORD_ENV: &str = "MAID_REDIS_AGENT_PASSWORD";
pub const MASTER_PASSWORD_ENV: &str = "MAID_REDIS_MASTER_PASSWORD";

/// What an agent sends: its connection set-up needs no permission (AUTH);
/// these are every command of its registry, job cache, file and plugin
/// reads and replies (`spublish` where a Redis 7 Cluster shards them,
/// which `info` tells).
const AGENT_COMMANDS: &[&str] = &[
    "setex", "set", "expire", "hget", "hgetall", "hmget", "hexists", "get", "getrange", "strlen",
    "exists", "publish", "spublish", "info",
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
    "ttl",
    "del",
    "zadd",
    "xrange",
    "hkeys",
    "scan",
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

/// The password in `env`, at least 16 characters long.
fn secret(env: &str) -> anyhow::Result<String> {
    let pw = std::env::var(env).with_context(|| format!("set {env} to the password"))?;
    if pw.len() < 16 {
        bail!("{env}: use a password of at least 16 characters");
    }
    Ok(pw)
}

/// How an aclfile holds a password: its SHA-256, in hex.
fn hashed(pw: &str) -> String {
    hex::encode(Sha256::digest(pw.as_bytes()))
}

fn password(env: &str) -> anyhow::Result<String> {
    secret(env).map(|pw| hashed(&pw))
}

/// A maid id that can be part of a Redis user name and of a `redis://`
/// url's user: letters, digits, `-`, `_`, `.`, not first `-` or `.`.
fn maid_id(id: &str) -> anyhow::Result<()> {
    let ok = !id.is_empty()
        && !id.starts_with(['-', '.'])
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !ok {
        bail!("maid id {id:?}: a user of its own needs letters, digits and - _ . only");
    }
    Ok(())
}

/// The password of maid `id`'s own user: HMAC-SHA256 of the id under the
/// agent password, in hex. Whoever holds the agent password can give each
/// maid its own; a maid's password tells nothing of another's.
pub fn maid_password(agent_secret: &str, id: &str) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(agent_secret.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(b"maid redis user\0");
    mac.update(id.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The user of maid `id`, under the agent user name `agent`.
pub fn maid_user(agent: &str, id: &str) -> String {
    format!("{agent}.{id}")
}

/// The aclfile lines for `agent` and `master` users with SHA-256
/// password hashes, for master topics `topics`; with `maids` (each id and
/// its password's hash), a user for each of them in place of `agent`.
pub fn rules(
    agent: (&str, &str),
    master: (&str, &str),
    topics: &[String],
    maids: &[(String, String)],
) -> anyhow::Result<String> {
    plain("user", agent.0)?;
    plain("user", master.0)?;
    if topics.is_empty() {
        bail!("no master topics (--master-topic or the config's master_topics)");
    }
    for t in topics {
        plain("master topic", t)?;
    }
    for (id, _) in maids {
        maid_id(id)?;
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
    let reply = format!("&{}", maid_master::jobs::REPLY_PATTERN);
    let topics = channels(topics);
    let agent_cmds = cmds(AGENT_COMMANDS);
    // What every agent user reads, and where it replies. Pillar records
    // are read by every maid (each is sealed to one maid's key; a syndic
    // maid hands those beneath theirs down) and written by the master
    // alone.
    let stores = "%R~maid:file:* %R~maid:plugins %R~maid:plugins:* \
                  %R~maid:pillar:* %R~maid:pillar-pinned:*";
    let mut out = String::from("user default off resetkeys resetchannels -@all\n");
    if maids.is_empty() {
        // One user for every maid: each may write (and expire) any alive
        // key, syndic list and job-cache entry, but the registry only by
        // HSET (an EXPIRE there would delete every registration).
        out.push_str(&format!(
            "user {} on #{} resetkeys resetchannels -@all \
             ~maid:alive:* ~maid:syndic:* {stores} {reply} {agent_cmds} \
             (~maid:registry +hset) (~maid:job:* +hset +expire) (~maid:audit:* +xadd) \
             (+subscribe {topics})\n",
            agent.0, agent.1
        ));
    }
    for (id, hash) in maids {
        // Its own keys alone; the shared hashes by HSET alone.
        out.push_str(&format!(
            "user {} on #{hash} resetkeys resetchannels -@all \
             ~maid:alive:{id} ~maid:syndic:{id} {stores} {reply} {agent_cmds} \
             (~maid:registry +hset) (~maid:job:* +hset) (~maid:audit:{id} +xadd) \
             (+subscribe {topics})\n",
            maid_user(agent.0, id)
        ));
    }
    out.push_str(&format!(
        "user {} on #{} resetkeys resetchannels -@all ~maid:* {topics} {reply} {}\n",
        master.0,
        master.1,
        cmds(MASTER_COMMANDS)
    ));
    Ok(out)
}

pub fn run(args: AclArgs) -> anyhow::Result<ExitCode> {
    let topics = if args.master_topics.is_empty() {
        match &args.config {
            Some(path) => maid_config::Config::load(path)?.master_topics,
            None => Vec::new(),
        }
    } else {
        args.master_topics.clone()
    };
    if let Some(id) = &args.password_for {
        maid_id(id)?;
        outln!("{}", maid_password(&secret(AGENT_PASSWORD_ENV)?, id));
        return Ok(ExitCode::SUCCESS);
    }
    let agent_secret = secret(AGENT_PASSWORD_ENV)?;
    // Each once: an aclfile that names a user twice does not load.
    let ids: std::collections::BTreeSet<&String> = args.maids.iter().collect();
    let maids: Vec<(String, String)> = ids
        .into_iter()
        .map(|id| (id.clone(), hashed(&maid_password(&agent_secret, id))))
        .collect();
    let text = rules(
        (&args.agent_user, &hashed(&agent_secret)),
        (&args.master_user, &password(MASTER_PASSWORD_ENV)?),
        &topics,
        &maids,
    )?;
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_widen_a_rule_are_refused() {
        let topics = vec!["master-1".to_string()];
        assert!(rules(("a", "h"), ("m", "h"), &topics, &[]).is_ok());
        for bad in ["a b", "a*", "", "x ~*", "a&b"] {
            assert!(
                rules((bad, "h"), ("m", "h"), &topics, &[]).is_err(),
                "{bad:?}"
            );
        }
        assert!(rules(("a", "h"), ("m", "h"), &["*".to_string()], &[]).is_err());
        assert!(rules(("a", "h"), ("m", "h"), &[], &[]).is_err());
        for bad in [
            "*", "web-*", "a b", "x:y", "u@h", "-rf", ".x", "", "a/b", "a~b",
        ] {
            let maids = [(bad.to_string(), "h".to_string())];
            assert!(
                rules(("a", "h"), ("m", "h"), &topics, &maids).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn each_maid_user_owns_its_keys_alone() {
        let topics = vec!["master-1".to_string()];
        let maids = [("web-1".to_string(), "h1".to_string())];
        let text = rules(("maid-agent", "h"), ("m", "h"), &topics, &maids).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("user maid-agent.web-1 "))
            .unwrap();
        assert!(
            line.contains(" ~maid:alive:web-1 ~maid:syndic:web-1 "),
            "{line}"
        );
        assert!(!line.contains("~maid:alive:*"), "{line}");
        assert!(line.contains("(~maid:job:* +hset)"), "{line}");
        // Its own audit stream, by XADD alone: no reading, no deleting.
        assert!(line.contains("(~maid:audit:web-1 +xadd)"), "{line}");
        assert!(!line.contains("~maid:audit:*"), "{line}");
        // The shared user is not there at all.
        assert!(!text.contains("user maid-agent on"), "{text}");
        // Passwords: one per id, none telling another.
        let (a, b) = (
            maid_password("s".repeat(16).as_str(), "web-1"),
            maid_password("s".repeat(16).as_str(), "web-2"),
        );
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert_eq!(a, maid_password(&"s".repeat(16), "web-1"));
    }
}
