//! The master's half of the job cache: what each job was (Salt's
//! `save_load`), beside the returns the maids store (PROTOCOL §5).
//!
//! Salt's `jobs.list_jobs`, `jobs.list_job` and salt-api's `GET /jobs`
//! describe a job by its load: function, arguments, target, user, start
//! time. The maids never write these keys (their ACL stops at
//! `maid:job:*`, see `maid acl`), so a maid cannot forge a job's
//! description; only the master side that published the job does.
//!
//! * `maid:load:<jid>`: the [`Load`] as JSON, kept as long as the returns.
//! * `maid:jobs`: a sorted set of jids scored by publish time (Unix
//!   seconds), trimmed to the same window.

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::bus::Conn;
use crate::jobs::JobRequest;

/// The sorted set of every cached job's jid, scored by publish time.
pub const INDEX_KEY: &str = "maid:jobs";

/// How long a load is kept: as long as the maids keep returns (24 h).
pub const KEEP_SECS: u64 = 24 * 60 * 60;

/// The key holding job `jid`'s load.
pub fn load_key(jid: &str) -> String {
    format!("maid:load:{jid}")
}

/// What a job was, as Salt's master saves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Load {
    pub jid: String,
    pub fun: String,
    /// The positional arguments, then the keyword arguments as one
    /// `{"__kwarg__": true, …}` mapping when there are any, as Salt's
    /// LocalClient conditions them before publishing.
    pub arg: Vec<Value>,
    pub tgt: Value,
    pub tgt_type: String,
    pub user: String,
    /// The minions expected to return.
    #[serde(default)]
    pub minions: Vec<String>,
}

impl Load {
    /// The load of `req` published as `jid`, expecting `minions`. A
    /// target that reads pillar is kept as the list it selected: beside
    /// the minions it selected, the expression would tell every Redis
    /// reader a value of their pillar (PROTOCOL §8).
    pub fn of(req: &JobRequest, jid: &str, minions: impl IntoIterator<Item = String>) -> Load {
        let minions: Vec<String> = minions.into_iter().collect();
        let (tgt, tgt_type) = if req.targets_pillar() {
            (json!(minions), "list".to_string())
        } else {
            (req.tgt.clone(), req.tgt_type.clone())
        };
        let mut arg = req.arg.clone();
        if !req.kwarg.is_empty() {
            let mut kw = Map::new();
            kw.insert("__kwarg__".into(), Value::Bool(true));
            kw.extend(req.kwarg.clone());
            arg.push(Value::Object(kw));
        }
        Load {
            jid: jid.to_string(),
            fun: req.fun.clone(),
            arg,
            tgt,
            tgt_type,
            user: req.user.clone().unwrap_or_else(|| "root".into()),
            minions,
        }
    }

    /// Salt's `format_jid_instance`: the description `jobs.list_jobs` and
    /// `jobs.list_job` give.
    pub fn describe(&self) -> Map<String, Value> {
        let mut out = Map::new();
        out.insert("Function".into(), json!(self.fun));
        out.insert("Arguments".into(), json!(self.arg));
        out.insert("Target".into(), self.tgt.clone());
        out.insert("Target-type".into(), json!(self.tgt_type));
        out.insert("User".into(), json!(self.user));
        if let Some(meta) = self.metadata() {
            out.insert("Metadata".into(), meta.clone());
        }
        out.insert("StartTime".into(), json!(jid_to_time(&self.jid)));
        out
    }

    /// `metadata=` given as a keyword argument, which Salt surfaces.
    fn metadata(&self) -> Option<&Value> {
        self.arg.iter().find_map(|a| {
            let obj = a.as_object()?;
            (obj.get("__kwarg__") == Some(&Value::Bool(true)))
                .then(|| obj.get("metadata"))
                .flatten()
        })
    }
}

pub use maid_salt::jid::jid_to_time;

fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Save `load` before its job is published, and forget loads past
/// [`KEEP_SECS`] from the index. The returns of those jobs that still
/// have no TTL go with them: maids whose Redis user may not `EXPIRE`
/// (`maid acl --maid`) store returns without one, and the master, which
/// may, ends them here.
pub async fn save(conn: &mut Conn, load: &Load) -> redis::RedisResult<()> {
    let text = serde_json::to_string(load).expect("loads serialise");
    let now = now_secs();
    let () = conn.set_ex(load_key(&load.jid), text, KEEP_SECS).await?;
    let _: i64 = conn.zadd(INDEX_KEY, &load.jid, now).await?;
    let cutoff = now - KEEP_SECS as f64;
    let past: Vec<String> = conn.zrangebyscore(INDEX_KEY, "-inf", cutoff).await?;
    for jid in &past {
        // Only a key without a TTL (-1); one a maid gave a TTL keeps it.
        // (TTL, then DEL: `EXPIRE … NX` needs Redis 7.)
        let key = crate::protocol::job_key(jid);
        let ttl: i64 = conn.ttl(&key).await?;
        if ttl == -1 {
            let _: i64 = conn.del(&key).await?;
        }
    }
    let _: i64 = conn.zrembyscore(INDEX_KEY, "-inf", cutoff).await?;
    Ok(())
}

/// The load of job `jid`, if the cache still has it.
pub async fn get(conn: &mut Conn, jid: &str) -> redis::RedisResult<Option<Load>> {
    let text: Option<String> = conn.get(load_key(jid)).await?;
    Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
}

/// Every cached load, oldest first.
pub async fn all(conn: &mut Conn) -> redis::RedisResult<Vec<Load>> {
    let since = now_secs() - KEEP_SECS as f64;
    let jids: Vec<String> = conn.zrangebyscore(INDEX_KEY, since, "+inf").await?;
    let mut out = Vec::with_capacity(jids.len());
    for jid in jids {
        if let Some(load) = get(conn, &jid).await? {
            out.push(load);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_arguments_are_conditioned_as_salt_publishes_them() {
        let load = Load {
            jid: "20261124230417123456".into(),
            fun: "test.arg".into(),
            arg: vec![json!("a"), json!({"__kwarg__": true, "metadata": {"k": 1}})],
            tgt: json!("*"),
            tgt_type: "glob".into(),
            user: "alice".into(),
            minions: vec![],
        };
        let d = load.describe();
        assert_eq!(d["Metadata"], json!({"k": 1}));
        assert_eq!(d["User"], json!("alice"));
        assert_eq!(d["StartTime"], json!("2026, Nov 24 23:04:17.123456"));
    }
}
