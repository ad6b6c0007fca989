//! `POST /` (salt-api's lowstate run) and `GET /jobs/{jid}` (the job
//! cache).
//!
//! Jobs go out exactly as `maid run` sends them — [`jobs::run_on`] and
//! [`jobs::job_payload`], signed with the master key when one is
//! configured — but over the [`Hub`](super::hub::Hub)'s shared
//! connections. The client never supplies a raw job: only the lowstate
//! fields are read, and the jid, reply topic, user and signature are the
//! API's own.

use std::collections::HashSet;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::Api;
use super::error::ApiError;
use super::hub::Event;
use super::login::User;
use super::lowstate::{self, Chunk, Client};
use super::perms;
use crate::jobs::{self, JobRequest, Report};
use crate::{bus, jid, target};

/// How long a `local` call keeps listening for repeated returns once
/// everything expected came back (as `maid run`).
const LINGER: std::time::Duration = std::time::Duration::from_millis(100);

/// Run every chunk in order (later chunks may rely on earlier ones, as in
/// salt-api) and answer `{"return": [...], "maid": [...]}`, one element of
/// each per chunk. `return` is exactly salt-api's; `maid` adds what only
/// the maid design knows.
pub async fn run(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let chunks = lowstate::parse(&body, api.max_timeout_secs, &api.nodegroups)?;
    authorize(&api, &user, &chunks).await?;
    let mut returns = Vec::with_capacity(chunks.len());
    let mut maid = Vec::with_capacity(chunks.len());
    for chunk in &chunks {
        let result = match chunk.client {
            Client::Local => local(&api, chunk, &user).await,
            Client::LocalAsync => local_async(&api, chunk, &user).await,
        };
        let (ret, extra) = result.inspect_err(|_| api.hub.reset())?;
        returns.push(ret);
        maid.push(extra);
    }
    Ok(Json(json!({"return": returns, "maid": maid})))
}

/// Every chunk must be allowed by the user's permissions (`[api.perms]`,
/// Salt's `external_auth`) over the minions the registry knows; else 403
/// naming the function and target, and nothing runs.
async fn authorize(api: &Api, user: &str, chunks: &[Chunk]) -> Result<(), ApiError> {
    let entries = api.perms.of(user);
    let mut conn = api.hub.conn().await?;
    let known = jobs::alive_maids(&mut conn)
        .await
        .inspect_err(|_| api.hub.reset())?;
    for chunk in chunks {
        if !perms::allows(&entries, &chunk.fun, &chunk.tgt, chunk.tgt_type, &known) {
            tracing::warn!(%user, fun = %chunk.fun, tgt = %chunk.tgt, "refused by [api.perms]");
            return Err(ApiError::Forbidden(format!(
                "user {user:?} may not run {} on {} ({})",
                chunk.fun, chunk.tgt, chunk.tgt_type_name
            )));
        }
    }
    Ok(())
}

fn request(api: &Api, chunk: &Chunk, user: &str, timeout: std::time::Duration) -> JobRequest {
    JobRequest {
        master_topic: api.master_topic.clone(),
        tgt: chunk.tgt.clone(),
        tgt_type: chunk.tgt_type_name.clone(),
        fun: chunk.fun.clone(),
        arg: chunk.arg.clone(),
        kwarg: chunk.kwarg.clone(),
        timeout,
        user: Some(user.to_string()),
        out: None,
        exclude: HashSet::new(),
        linger: LINGER,
        key: api.key.clone(),
        source_hashes: Default::default(),
        pki: api.pki.clone(),
    }
}

fn announce(api: &Api, jid: &str, req: &JobRequest, minions: Option<&[String]>) {
    if let Some(user) = &req.user {
        api.owners.insert(jid, user);
    }
    let mut data = json!({
        "jid": jid, "fun": req.fun, "arg": req.arg, "kwarg": req.kwarg,
        "tgt": req.tgt, "tgt_type": req.tgt_type, "user": req.user,
    });
    if let Some(m) = minions {
        data["minions"] = json!(m);
    }
    api.hub.announce(Event::new_job(jid, data));
}

/// Publish, wait for the returns (up to the chunk's timeout) and report.
async fn local(api: &Api, chunk: &Chunk, user: &str) -> Result<(Value, Value), ApiError> {
    let req = request(api, chunk, user, chunk.wait());
    let jid = jid::new_jid();
    let topic = jobs::temp_topic(&jid);
    let route = api.hub.route(&topic);
    let mut conn = api.hub.conn().await?;
    announce(api, &jid, &req, None);
    let report = jobs::run_on(&mut conn, route, jid, &topic, &req, |_| {}, |_| {}).await?;
    let returns: Map<String, Value> = report
        .returns
        .iter()
        .map(|r| (r.id.clone(), r.ret.clone()))
        .collect();
    Ok((Value::Object(returns), report_json(&report)))
}

/// The `maid` object of a `local` chunk.
fn report_json(r: &Report) -> Value {
    json!({
        "jid": r.jid,
        "targeted": r.targeted,
        "missed_maids": r.missed_maids,
        "missed_minions": r.missed_minions,
        "empty": r.empty,
        "repeated": r.repeated,
        "rejected": r.rejected,
        "forged": r.forged,
        "retcodes": r.returns.iter().map(|x| (x.id.clone(), json!(x.retcode))).collect::<Map<_, _>>(),
    })
}

/// Publish and answer at once with the jid and the minions expected to
/// run it: the live maids whose registered grains the target selects
/// (Salt answers with the minions its key list matches).
async fn local_async(api: &Api, chunk: &Chunk, user: &str) -> Result<(Value, Value), ApiError> {
    // Without its own timeout an async job may run as long as the API
    // allows, not `local`'s short default wait.
    let timeout = chunk
        .timeout
        .unwrap_or(std::time::Duration::from_secs_f64(api.max_timeout_secs));
    let req = request(api, chunk, user, timeout);
    let mut conn = api.hub.conn().await?;
    let minions: Vec<String> = jobs::alive_maids(&mut conn)
        .await?
        .into_iter()
        .filter(|(id, (alive, reg))| {
            *alive
                && reg.as_ref().is_some_and(|reg| {
                    target::matches(&chunk.tgt, chunk.tgt_type, id, &reg.grains).unwrap_or(false)
                })
        })
        .map(|(id, _)| id)
        .collect();
    let jid = jid::new_jid();
    // The replies still go to a reply topic, where `/events` hears them.
    let topic = jobs::temp_topic(&jid);
    announce(api, &jid, &req, Some(&minions));
    bus::publish(
        &mut conn,
        &req.master_topic,
        &jobs::job_payload(&req, &jid, &topic),
    )
    .await?;
    Ok((json!({"jid": jid, "minions": minions}), json!({"jid": jid})))
}

/// salt-api's job lookup: `return` maps each minion to its return, `info`
/// describes the job with every return's retcode and success.
pub async fn job(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
    Path(jid): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if !api.may_see(&user, &jid) {
        return Err(ApiError::Forbidden(format!(
            "user {user:?} may not read job {jid} (not theirs, and no @jobs)"
        )));
    }
    let mut conn = api.hub.conn().await?;
    let cached = jobs::cached(&mut conn, &jid, api.pki.as_ref())
        .await
        .inspect_err(|_| api.hub.reset())?;
    let returns = cached.returns;
    let mut ret = Map::new();
    let mut result = Map::new();
    for r in &returns {
        ret.insert(r.id.clone(), r.ret.clone());
        result.insert(
            r.id.clone(),
            json!({"return": r.ret, "retcode": r.retcode, "success": r.success, "_stamp": r.stamp}),
        );
    }
    let first = returns.first();
    Ok(Json(json!({
        "return": [ret],
        "info": [{
            "jid": jid,
            "Function": first.map(|r| r.fun.clone()),
            "Arguments": first.map(|r| r.fun_args.clone()).unwrap_or_default(),
            "Minions": returns.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
            "Result": result,
        }],
    })))
}
