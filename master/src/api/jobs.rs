//! `POST /` and `POST /run` (salt-api's lowstate run: the `local`,
//! `local_async`, `local_batch`, `local_subset`, `runner`,
//! `runner_async`, `wheel` and `wheel_async` clients), `GET
//! /jobs` and `GET /jobs/{jid}` (the job cache).
//!
//! Jobs go out exactly as `maid run` sends them — [`jobs::run_on`] and
//! [`jobs::job_payload`], signed with the master key when one is
//! configured — but over the [`Hub`](super::hub::Hub)'s shared
//! connections. The client never supplies a raw job: only the lowstate
//! fields are read, and the jid, reply topic, user and signature are the
//! API's own.

use std::collections::{BTreeSet, HashMap, HashSet};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::hub::Event;
use super::login::User;
use super::lowstate::{self, Chunk, Client};
use super::{Api, ClientAddr, media, perms};
use crate::binding::{BadCall, Bound, Form};
use crate::jobs::{self, Collect, JobRequest, Report};
use crate::protocol::Return;
use crate::{batch, jid, jobcache};
use crate::{binding, runners::jobs as job_runners, runners::manage, wheel};

/// How long a `local` call keeps listening for repeated returns once
/// everything expected came back (as `maid run`).
const LINGER: std::time::Duration = std::time::Duration::from_millis(100);

/// `POST /`: run every chunk in order (later chunks may rely on earlier
/// ones, as in salt-api) and answer `{"return": [...], "maid": [...]}`.
/// `return` is exactly salt-api's (one element per chunk, one per
/// minion for `local_batch`); `maid` adds, per chunk, what only the maid
/// design knows.
pub async fn run(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let lowstate = lowstate_of(&headers, &body)?;
    let chunks = chunks_of(&api, lowstate)?;
    let users = vec![user; chunks.len()];
    run_chunks(&api, &chunks, &users).await
}

/// The chunks of a lowstate: at most `[api] max_chunks` (each may be a
/// job on every maid, and salt-api sets no bound), each checked.
fn chunks_of(api: &Api, lowstate: Value) -> Result<Vec<Chunk>, ApiError> {
    count_chunks(api, &lowstate)?;
    lowstate::parse(lowstate, api.max_timeout_secs, &api.nodegroups)
}

fn count_chunks(api: &Api, lowstate: &Value) -> Result<(), ApiError> {
    api.within_max_chunks(lowstate.as_array().map_or(1, Vec::len), "chunks")
}

/// `POST /run`: as `POST /`, each chunk carrying its own credentials
/// (`token`, or `username` and `password`) instead of a session token.
/// Only the credentials are kept while they are checked; the body is read
/// again once they are good.
pub async fn run_with_credentials(
    State(api): State<Api>,
    ConnectInfo(ClientAddr(addr)): ConnectInfo<ClientAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let creds: Vec<Credentials> = {
        let lowstate = lowstate_of(&headers, &body)?;
        count_chunks(&api, &lowstate)?;
        let items = lowstate.as_array().map(Vec::as_slice).unwrap_or_default();
        items.iter().map(Credentials::of).collect()
    };
    let mut users = Vec::with_capacity(creds.len());
    for c in creds {
        users.push(c.user(&api, &addr).await?);
    }
    let chunks = chunks_of(&api, lowstate_of(&headers, &body)?)?;
    run_chunks(&api, &chunks, &users).await
}

/// What a chunk carries to say who it is: a `token`, or a `username` and
/// `password`.
struct Credentials {
    token: Option<String>,
    login: Option<(String, String)>,
}

impl Credentials {
    fn of(item: &Value) -> Credentials {
        let field = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
        Credentials {
            token: field("token"),
            login: field("username").zip(field("password")),
        }
    }

    /// The user they name: the token's, or a login's that ends with the
    /// request.
    async fn user(self, api: &Api, addr: &std::net::SocketAddr) -> Result<String, ApiError> {
        match (self.token, self.login) {
            (Some(token), _) => api.auth.check(&token).ok_or(ApiError::Unauthorized(
                "token unknown or expired; log in again",
            )),
            (None, Some((name, password))) => {
                let session = api
                    .auth
                    .login_from(&name, &password, &addr.ip().to_string())
                    .await
                    .map_err(super::login::refusal)?;
                api.auth.logout(&session.token);
                Ok(session.user)
            }
            _ => Err(ApiError::Unauthorized(
                "No authentication credentials given",
            )),
        }
    }
}

/// Who a chunk's own credentials name: its `token`, or its `username`
/// and `password` (a login that ends with the request), as salt-api takes
/// them where there is no session (`/run`, `POST /keys`).
pub(super) async fn chunk_user(
    api: &Api,
    item: &Value,
    addr: &std::net::SocketAddr,
) -> Result<String, ApiError> {
    Credentials::of(item).user(api, addr).await
}

/// `POST /minions`: salt-api's way to start jobs: every chunk runs as
/// `local_async`; 202 with the jobs' links.
pub async fn start(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(axum::http::StatusCode, Json<Value>), ApiError> {
    let mut lowstate = lowstate_of(&headers, &body)?;
    for chunk in lowstate.as_array_mut().into_iter().flatten() {
        if let Some(obj) = chunk.as_object_mut() {
            obj.insert("client".into(), json!("local_async"));
        }
    }
    let chunks = chunks_of(&api, lowstate)?;
    let users = vec![user; chunks.len()];
    let Json(mut answer) = run_chunks(&api, &chunks, &users).await?;
    let links: Vec<Value> = answer["return"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("jid").and_then(Value::as_str))
        .map(|jid| json!({"href": format!("/jobs/{jid}")}))
        .collect();
    answer["_links"] = json!({"jobs": links});
    Ok((axum::http::StatusCode::ACCEPTED, Json(answer)))
}

/// The lowstate of a request body, in any format salt-api reads; a single
/// chunk is a list of one, as `lowdata_fmt` makes it.
pub(super) fn lowstate_of(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    match media::decode(headers, body)? {
        Some(obj @ Value::Object(_)) => Ok(Value::Array(vec![obj])),
        Some(list @ Value::Array(_)) => Ok(list),
        _ => Err(ApiError::bad("body", "Lowstates must be a list")),
    }
}

async fn run_chunks(
    api: &Api,
    chunks: &[Chunk],
    users: &[String],
) -> Result<Json<Value>, ApiError> {
    authorize(api, chunks, users).await?;
    // The jobs each user starts, taken from their quota all at once:
    // a request past it runs nothing.
    let mut jobs: HashMap<&str, u32> = HashMap::new();
    for (chunk, user) in chunks.iter().zip(users) {
        if chunk.publishes() {
            *jobs.entry(user.as_str()).or_default() += 1;
        }
    }
    api.quota.take(&jobs).map_err(|retry_after| {
        tracing::info!(users = ?jobs.keys().collect::<Vec<_>>(), retry_after, "jobs over [api] jobs_per_second");
        ApiError::TooManyRequests { retry_after }
    })?;
    // State runs read their SLS files from the master's file_roots: stored
    // (signed) once per request, before the first job goes out.
    if !api.file_roots.is_empty()
        && chunks
            .iter()
            .any(|c| c.publishes() && jobs::reads_file_roots(&c.fun))
    {
        let mut conn = api.hub.conn().await?;
        jobs::serve_file_roots(&mut conn, &api.file_roots, api.key.as_ref())
            .await
            .map_err(|e| {
                api.hub.reset();
                tracing::error!(error = %e, "storing the master's file_roots");
                ApiError::Internal(format!("storing the master's file_roots: {e}"))
            })?;
    }
    let mut returns = Vec::with_capacity(chunks.len());
    let mut maid = Vec::with_capacity(chunks.len());
    for (chunk, user) in chunks.iter().zip(users) {
        let result = match chunk.client {
            Client::Local => local(api, chunk, user).await,
            Client::LocalAsync => local_async(api, chunk, user).await,
            Client::LocalSubset => local_subset(api, chunk, user).await,
            Client::LocalBatch => {
                let (rets, extra) = local_batch(api, chunk, user)
                    .await
                    .inspect_err(|_| api.hub.reset())?;
                returns.extend(rets);
                maid.push(extra);
                continue;
            }
            Client::Master(form) => master_call(api, chunk, form, user).await,
            Client::MasterAsync(form) => Ok(master_async(api, chunk, form, user)),
        };
        let (ret, extra) = result.inspect_err(|_| api.hub.reset())?;
        returns.push(ret);
        maid.push(extra);
    }
    Ok(Json(json!({"return": returns, "maid": maid})))
}

/// Every chunk must be allowed by the user's permissions (`[api.perms]`,
/// Salt's `external_auth`) over whom it reaches — the maids and the
/// minions beneath syndic maids, resolved as the master resolves whom to
/// publish to ([`perms::reach`]); else 403 naming the function and
/// target, and nothing runs.
async fn authorize(api: &Api, chunks: &[Chunk], users: &[String]) -> Result<(), ApiError> {
    // Before anything is read: a target that reads pillar is refused to
    // a user who may not read every minion's pillar, the same way
    // whatever the pillar, the registry or the quota hold.
    for (chunk, user) in chunks.iter().zip(users) {
        let target = match chunk.client {
            Client::Master(Form::Runner) | Client::MasterAsync(Form::Runner) => {
                runner_target(chunk)
            }
            Client::Master(_) | Client::MasterAsync(_) => None,
            _ => Some((chunk.tgt.clone(), chunk.tgt_type)),
        };
        if let Some((tgt, tgt_type)) = target {
            may_target(api, user, &tgt, tgt_type)?;
        }
    }
    let mut conn = api.hub.conn().await?;
    let registry = jobs::Registry::read(&mut conn, api.pki.as_ref())
        .await
        .inspect_err(|_| api.hub.reset())?
        .with_pillar(api.pillar.as_ref());
    for (chunk, user) in chunks.iter().zip(users) {
        let entries = api.perms.of(user);
        let allowed = match chunk.client {
            Client::Master(form) | Client::MasterAsync(form) => {
                perms::spec_allows(&entries, &chunk.fun, form.name())
            }
            _ => perms::allows(
                &entries,
                &chunk.fun,
                &perms::reach(
                    &registry,
                    &chunk.tgt,
                    chunk.tgt_type,
                    chunk.delimiter.as_deref(),
                ),
                &registry,
            ),
        };
        if !allowed {
            tracing::warn!(%user, fun = %chunk.fun, tgt = %chunk.tgt, "refused by [api.perms]");
            return Err(ApiError::Forbidden(match chunk.client {
                Client::Master(form) | Client::MasterAsync(form) => {
                    format!("user {user:?} may not run {} {}", form.name(), chunk.fun)
                }
                _ => format!(
                    "user {user:?} may not run {} on {} ({})",
                    chunk.fun, chunk.tgt, chunk.tgt_type_name
                ),
            }));
        }
        // A runner that reads one job's returns reads only what `GET
        // /jobs/{jid}` would show the user.
        if let Some(jid) = chunk.job_read()
            && !api.may_see(user, &jid)
        {
            tracing::warn!(%user, fun = %chunk.fun, %jid, "refused: not their job, and no @jobs");
            return Err(ApiError::Forbidden(format!(
                "user {user:?} may not read job {jid} (not theirs, and no @jobs)"
            )));
        }
    }
    Ok(())
}

/// Refuse `tgt` of `tgt_type` to `user` when it reads pillar and they may
/// not read every minion's pillar ([`perms::reads_every_pillar`]): one
/// 403, whose words name neither the target's value nor whom it would
/// select.
fn may_target(
    api: &Api,
    user: &str,
    tgt: &Value,
    tgt_type: crate::target::TargetType,
) -> Result<(), ApiError> {
    if !crate::target::reads_pillar(tgt, tgt_type) || perms::reads_every_pillar(&api.perms.of(user))
    {
        return Ok(());
    }
    tracing::warn!(%user, "refused: a pillar target without pillar.items on every minion");
    Err(ApiError::Forbidden(format!(
        "user {user:?} may not target by pillar: a target that reads pillar \
         (pillar, pillar_pcre, I@, J@) needs {} on every minion",
        perms::PILLAR_READ
    )))
}

/// The target of a runner that runs a job on minions (`manage.up`, …),
/// from its bound arguments; `None` for any other runner, or arguments
/// that do not bind (reported when it runs).
fn runner_target(chunk: &Chunk) -> Option<(Value, crate::target::TargetType)> {
    crate::runners::asks(&chunk.fun)?;
    let Some(Ok(bound)) = &chunk.bound else {
        return None;
    };
    let target = manage::ManageTarget::of(bound).ok()?;
    Some((target.tgt, target.tgt_type))
}

fn request(api: &Api, chunk: &Chunk, user: &str, timeout: std::time::Duration) -> JobRequest {
    let mut kwarg = chunk.kwarg.clone();
    let pillar = crate::pillar::deliver::Plan::for_job(api.pillar.as_ref(), &chunk.fun, &mut kwarg);
    JobRequest {
        master_topic: api.master_topic.clone(),
        tgt: chunk.tgt.clone(),
        tgt_type: chunk.tgt_type_name.clone(),
        fun: chunk.fun.clone(),
        arg: chunk.arg.clone(),
        kwarg: crate::jobs::with_master_opts(&chunk.fun, kwarg, &api.nodegroups, &api.file_roots),
        user: Some(user.to_string()),
        out: None,
        key: api.key.clone(),
        source_hashes: Default::default(),
        delimiter: chunk.delimiter.clone(),
        pillar,
        pillar_settings: api.pillar.clone(),
        collect: Collect {
            timeout,
            exclude: HashSet::new(),
            linger: LINGER,
            pki: api.pki.clone(),
            // salt-api's LocalClient asks as the salt CLI does.
            gather_job_timeout: Some(crate::jobs::GATHER_JOB_TIMEOUT),
        },
    }
}

/// Salt's `salt/job/<jid>/new` for `req`, published to `minions`.
fn announce<'m>(
    api: &Api,
    jid: &str,
    req: &JobRequest,
    minions: impl IntoIterator<Item = &'m String>,
) {
    if let Some(user) = &req.user {
        api.owners.insert(jid, user);
    }
    let minions: Vec<&String> = minions.into_iter().collect();
    // A target that reads pillar is announced as the list it selected, as
    // the job cache keeps it: beside the minions, the expression would
    // tell every `@jobs` reader of the stream a value of their pillar.
    let (tgt, tgt_type) = if req.targets_pillar() {
        (json!(minions), "list")
    } else {
        (req.tgt.clone(), req.tgt_type.as_str())
    };
    let data = json!({
        "jid": jid, "fun": req.fun, "arg": req.arg, "kwarg": req.kwarg,
        "tgt": tgt, "tgt_type": tgt_type, "user": req.user,
        "minions": minions,
    });
    api.hub.announce(Event::new_job(jid, data));
}

/// Publish `req` to whom its target selects and wait for the returns:
/// those selected and the report, from one reading of the registry.
/// `None`, publishing nothing, when the target selects nobody.
async fn publish_and_wait(
    api: &Api,
    req: &JobRequest,
) -> Result<Option<(BTreeSet<String>, Report)>, ApiError> {
    let mut conn = api.hub.conn().await?;
    let registry = jobs::Registry::read(&mut conn, req.collect.pki.as_ref())
        .await?
        .with_pillar(req.pillar_settings.as_ref());
    let mut selected = registry.selected(req);
    if selected.is_empty() {
        return Ok(None);
    }
    // Ids a list names that no maid answers for are awaited in vain, as
    // by Salt's LocalClient.
    selected.extend(registry.unknown(req));
    let jid = jid::new_jid();
    let topic = jobs::temp_topic(&jid);
    let route = api.hub.route(&topic).await?;
    announce(api, &jid, req, &selected);
    let report = jobs::run_in(&mut conn, &registry, route, jid, &topic, req, |_| {}).await?;
    Ok(Some((selected, report)))
}

/// Publish, wait for the returns (up to the chunk's timeout) and report.
async fn local(api: &Api, chunk: &Chunk, user: &str) -> Result<(Value, Value), ApiError> {
    let req = request(api, chunk, user, chunk.wait());
    let Some((selected, report)) = publish_and_wait(api, &req).await? else {
        // Salt's LocalClient publishes nothing when no minion matches.
        return Ok((json!({}), report_json(&Report::default())));
    };
    let mut returns: Map<String, Value> = report
        .returns
        .iter()
        .map(|r| (r.id.clone(), minion_return(r, chunk.full_return)))
        .collect();
    // Every minion expected to run the job and silent is answered for, as
    // Salt's LocalClient does.
    for id in selected.iter().chain(&report.targeted) {
        if !returns.contains_key(id) {
            let down = report.missed_maids.contains(id);
            returns.insert(id.clone(), no_return(&report.jid, down, chunk.full_return));
        }
    }
    Ok((Value::Object(returns), report_json(&report)))
}

/// `local_subset`, as Salt's `cmd_subset`: `sys.list_functions` on the
/// target, then the function on `subset` of the minions that listed it,
/// picked at random; their returns as `local` gives them (`{}` when none
/// has it). `maid` reports both jobs.
async fn local_subset(api: &Api, chunk: &Chunk, user: &str) -> Result<(Value, Value), ApiError> {
    let probe = Chunk {
        fun: "sys.list_functions".into(),
        arg: Vec::new(),
        kwarg: Map::new(),
        full_return: false,
        ..chunk.clone()
    };
    let (listed, probe_report) = local(api, &probe, user).await?;
    let having = jobs::subset(
        listed.as_object().into_iter().flatten(),
        &chunk.fun,
        chunk.subset.unwrap_or(lowstate::DEFAULT_SUBSET),
    );
    if having.is_empty() {
        return Ok((json!({}), json!({"probe": probe_report})));
    }
    let picked = Chunk {
        tgt: json!(having),
        tgt_type: crate::target::TargetType::List,
        tgt_type_name: "list".into(),
        ..chunk.clone()
    };
    let (returns, mut report) = local(api, &picked, user).await?;
    report["probe"] = probe_report;
    Ok((returns, report))
}

/// Salt's answer for a targeted minion that did not return in time, or
/// (`down`) that is not connected.
fn no_return(jid: &str, down: bool, full: bool) -> Value {
    let text = if down {
        crate::jobs::NOT_CONNECTED.to_string()
    } else {
        crate::jobs::no_response(jid)
    };
    if full {
        json!({"out": "no_return", "ret": text, "retcode": 1})
    } else {
        json!(text)
    }
}

/// One minion's answer in a `local` call: its return, or with
/// `full_return` what Salt's LocalClient gives, `{"ret", "out", "retcode",
/// "jid"}`.
fn minion_return(r: &Return, full: bool) -> Value {
    if !full {
        return r.ret.clone();
    }
    let mut m = Map::new();
    // No `out`: a maid's return echoes the outputter the master asked for
    // (PROTOCOL §3.2), where Salt's names the function's own outputter.
    m.insert("ret".into(), r.ret.clone());
    m.insert("retcode".into(), json!(r.retcode));
    m.insert("jid".into(), json!(r.jid));
    Value::Object(m)
}

/// `local_batch`: the targeted minions a batch at a time, a new one
/// started as each returns (Salt's rolling batch), under one jid; each
/// return is one element of `return`, bare (Salt's batch ignores
/// `full_return`).
async fn local_batch(
    api: &Api,
    chunk: &Chunk,
    user: &str,
) -> Result<(Vec<Value>, Value), ApiError> {
    let req = request(api, chunk, user, chunk.wait());
    let mut conn = api.hub.conn().await?;
    // As Salt's batch, which pings first: no job goes to a minion that is
    // not connected.
    let registry = jobs::Registry::read(&mut conn, req.collect.pki.as_ref())
        .await?
        .with_pillar(req.pillar_settings.as_ref());
    let ids: Vec<String> = registry
        .selected(&req)
        .into_iter()
        .filter(|id| registry.alive(id))
        .collect();
    if ids.is_empty() {
        return Ok((vec![], json!({"jid": null})));
    }
    let size = batch::size(chunk.batch.as_deref().unwrap_or("10%"), ids.len()).unwrap_or(1);
    let jid = jid::new_jid();
    let mut out = Vec::new();
    let launch = |sub: JobRequest, tx: tokio::sync::mpsc::UnboundedSender<Return>| {
        let topic = jobs::temp_topic(&jid);
        let mut conn = conn.clone();
        let jid = jid.clone();
        let ids: Vec<String> = sub
            .tgt
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|id| id.as_str().map(str::to_string))
            .collect();
        announce(api, &jid, &sub, &ids);
        let api = api.clone();
        async move {
            let route = api.hub.route(&topic).await?;
            jobs::run_on(&mut conn, route, jid, &topic, &sub, |r| {
                let _ = tx.send(r.clone());
            })
            .await
        }
    };
    batch::run(
        ids,
        size,
        chunk.pace,
        &req,
        launch,
        |_| {},
        |r| {
            out.push(json!({r.id.clone(): r.ret}));
        },
    )
    .await?;
    Ok((out, json!({"jid": jid})))
}

/// A runner or wheel chunk. Salt answers with the function's return, or
/// with `full_return` the whole event: `{"tag", "data": {"fun", "jid",
/// "user", "fun_args", "return", "success", "_stamp"}}`.
async fn master_call(
    api: &Api,
    chunk: &Chunk,
    form: Form,
    user: &str,
) -> Result<(Value, Value), ApiError> {
    let jid = jid::new_jid();
    let (ret, success) = master_run(api, chunk, form, user).await?;
    let stamp = event_stamp();
    let extra = json!({"jid": jid});
    if form == Form::Wheel {
        // Salt answers a wheel call with its whole event, `full_return`
        // or not; a failed one carries its stamp.
        let tag = master_tag(form, &jid);
        let mut data = json!({
            "fun": format!("wheel.{}", chunk.fun), "jid": jid, "tag": tag, "user": user,
            "return": ret, "success": success,
        });
        if !success {
            data["_stamp"] = json!(stamp);
        }
        return Ok((json!({"tag": tag, "data": data}), extra));
    }
    if !chunk.full_return {
        return Ok((ret, extra));
    }
    let data = json!({
        "fun": format!("runner.{}", chunk.fun),
        "jid": jid,
        "user": user,
        "fun_args": binding::fun_args(form, &chunk.fun, &chunk.arg, &chunk.kwarg),
        "_stamp": stamp,
        "return": ret,
        "success": success,
    });
    Ok((
        json!({"data": data, "tag": format!("{}/ret", master_tag(form, &jid))}),
        extra,
    ))
}

/// Now, as Salt stamps its events (`_stamp`).
fn event_stamp() -> String {
    format!("{}+00:00", jid::stamp())
}

/// Salt's prefix of a master function's event tags: `salt/run/<jid>`,
/// `salt/wheel/<jid>`.
fn master_tag(form: Form, jid: &str) -> String {
    match form {
        Form::Runner => format!("salt/run/{jid}"),
        Form::Wheel => format!("salt/wheel/{jid}"),
    }
}

/// `runner_async` and `wheel_async`: the function runs in the background;
/// the answer is its tag and jid at once, as Salt's `cmd_async`. Its
/// `<tag>/new` and `<tag>/ret` events (the return, `success`) go to the
/// event stream of the user and of those with `@jobs`.
fn master_async(api: &Api, chunk: &Chunk, form: Form, user: &str) -> (Value, Value) {
    let jid = jid::new_jid();
    let tag = master_tag(form, &jid);
    api.owners.insert(&jid, user);
    let fun_args = match (form, &chunk.bound) {
        (Form::Wheel, Some(Ok(bound))) => binding::wheel_fun_args(&chunk.fun, bound),
        _ => binding::fun_args(form, &chunk.fun, &chunk.arg, &chunk.kwarg),
    };
    let mut data = json!({
        "fun": format!("{}.{}", form.name(), chunk.fun),
        "fun_args": fun_args,
        "jid": jid,
        "user": user,
        "_stamp": event_stamp(),
    });
    api.hub.announce(Event {
        kind: "new",
        tag: format!("{tag}/new"),
        data: data.clone(),
        jid: jid.clone(),
    });
    let (api, chunk, user, answer) = (api.clone(), chunk.clone(), user.to_string(), tag.clone());
    let ret_jid = jid.clone();
    tokio::spawn(async move {
        let (ret, success) = match master_run(&api, &chunk, form, &user).await {
            Ok(done) => done,
            Err(e) => {
                tracing::warn!(jid = %ret_jid, fun = %chunk.fun, cause = %e, "{} failed", form.name());
                api.hub.reset();
                (json!(e.to_string()), false)
            }
        };
        data["return"] = ret;
        data["success"] = json!(success);
        data["_stamp"] = json!(event_stamp());
        api.hub.announce(Event {
            kind: "return",
            tag: format!("{tag}/ret"),
            data,
            jid: ret_jid,
        });
    });
    (json!({"tag": answer, "jid": jid}), json!({"jid": jid}))
}

/// Run a master function: its return, and whether it succeeded (Salt's
/// words for a call it could not bind or that raised, and `false`).
async fn master_run(
    api: &Api,
    chunk: &Chunk,
    form: Form,
    user: &str,
) -> Result<(Value, bool), ApiError> {
    let bound = match chunk.bound.clone().expect("master chunks are bound") {
        Ok(bound) => bound,
        Err(bad) => {
            let usage = format!("\nPassed invalid arguments: {bad}\n\nUsage:\n{}", chunk.fun);
            return Ok((json!(usage), false));
        }
    };
    let done = match form {
        // What consoles read of the master: who is connected, and of its
        // configuration the nodegroups (the rest is maid's own).
        Form::Wheel if chunk.fun == "minions.connected" => {
            let mut conn = api.hub.conn().await?;
            let registry = jobs::Registry::read(&mut conn, api.pki.as_ref()).await?;
            Ok(wheel::connected(&registry))
        }
        Form::Wheel if chunk.fun == "config.values" => Ok(json!({"nodegroups": api.nodegroups})),
        Form::Wheel => {
            let Some(pki) = &api.pki else {
                return Err(ApiError::bad(
                    "client",
                    "wheel key functions need the master's key store ([master] pki_dir)",
                ));
            };
            super::keys::file_registered_keys(api, pki).await?;
            wheel::wheel(pki, &chunk.fun, &bound).map_err(|e| e.to_string())
        }
        Form::Runner => runner(api, chunk, &bound, user)
            .await?
            .map_err(|e| e.to_string()),
    };
    Ok(match done {
        Ok(v) => (v, true),
        Err(e) => {
            let message = format!("Exception occurred in {} {}: {e}", form.name(), chunk.fun);
            (json!(message), false)
        }
    })
}

/// The runner functions: `manage.*` ping through this API; the `jobs.*`
/// read the job cache, showing the user only the jobs they may see.
async fn runner(
    api: &Api,
    chunk: &Chunk,
    bound: &Bound,
    user: &str,
) -> Result<Result<Value, BadCall>, ApiError> {
    if manage::is_presence(&chunk.fun) {
        let mut conn = api.hub.conn().await?;
        return Ok(manage::presence(&mut conn, api.pki.as_ref(), &chunk.fun, bound).await?);
    }
    if let Some(asked) = crate::runners::asks(&chunk.fun) {
        let outcome = manage_job(api, bound, user, asked).await?;
        return Ok(Ok(answer_asked(api, chunk, user, outcome).await?));
    }
    let mut conn = api.hub.conn().await?;
    let visible = |load: &jobcache::Load| api.may_see(user, &load.jid) || load.user == user;
    Ok(job_runners::jobs_runner(
        &mut conn,
        api.pki.as_ref(),
        api.key.as_ref(),
        &chunk.fun,
        bound,
        visible,
    )
    .await?)
}

/// What a runner that asked every minion answers (`outcome`, the job it
/// ran; `None` when the target selected nobody): `manage.status`, `up`,
/// `down` and `versions` from the returns, `jobs.active` from them and
/// the job cache, showing the user only the jobs they may see.
async fn answer_asked(
    api: &Api,
    chunk: &Chunk,
    user: &str,
    outcome: Option<(BTreeSet<String>, Report)>,
) -> Result<Value, ApiError> {
    let (selected, report) = outcome.unwrap_or_default();
    if chunk.fun != "jobs.active" {
        return Ok(manage::answer(&chunk.fun, &selected, &report));
    }
    let (returns, _) = manage::answered(&selected, &report);
    let mut conn = api.hub.conn().await?;
    let mut active = job_runners::active(&mut conn, api.pki.as_ref(), &returns).await?;
    // As `jobs.list_jobs` here: only the jobs the user may see.
    if let Some(jobs) = active.as_object_mut() {
        jobs.retain(|jid, job| api.may_see(user, jid) || job["User"] == user);
    }
    Ok(active)
}

/// Run `fun` on the minions a `manage.*` runner's arguments target
/// (everyone, by default): those selected and the report.
async fn manage_job(
    api: &Api,
    bound: &Bound,
    user: &str,
    fun: &str,
) -> Result<Option<(BTreeSet<String>, Report)>, ApiError> {
    let target =
        manage::ManageTarget::of(bound).map_err(|e| ApiError::bad("tgt_type", e.to_string()))?;
    let timeout = target
        .timeout
        .filter(|t| *t <= api.max_timeout_secs)
        .map_or(
            lowstate::DEFAULT_TIMEOUT,
            std::time::Duration::from_secs_f64,
        );
    let ping = Chunk {
        client: Client::Local,
        tgt: target.tgt,
        tgt_type: target.tgt_type,
        tgt_type_name: target.tgt_type.name().to_string(),
        fun: fun.into(),
        arg: vec![],
        kwarg: Map::new(),
        timeout: Some(timeout),
        full_return: false,
        batch: None,
        pace: crate::batch::Pace::default(),
        subset: None,
        bound: None,
        delimiter: None,
    };
    let req = request(api, &ping, user, timeout);
    publish_and_wait(api, &req).await
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
    let mut req = request(api, chunk, user, timeout);
    // Nobody waits to ask after it: the job carries its limit.
    req.collect.gather_job_timeout = None;
    let mut conn = api.hub.conn().await?;
    let minions: Vec<String> = jobs::selected(&mut conn, &req).await?.into_iter().collect();
    if minions.is_empty() {
        // Salt's LocalClient publishes nothing when no minion matches.
        return Ok((json!({}), json!({"jid": null, "minions": []})));
    }
    let jid = jid::new_jid();
    // The replies still go to a reply topic, where `/events` hears them.
    let topic = jobs::temp_topic(&jid);
    announce(api, &jid, &req, &minions);
    jobs::publish_job(&mut conn, &req, &jid, &topic, minions.iter().cloned(), None).await?;
    Ok((json!({"jid": jid, "minions": minions}), json!({"jid": jid})))
}

/// `GET /jobs/{jid}`: salt-api's job lookup (`jobs.list_job`): `info`
/// describes the job (function, arguments, target, user, start time, the
/// minions expected, each return with its retcode), `return` maps each
/// minion to its return.
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
    let info = job_runners::list_job(&mut conn, api.pki.as_ref(), api.key.as_ref(), &jid)
        .await
        .inspect_err(|_| api.hub.reset())?;
    let returns: Map<String, Value> = info
        .get("Result")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(id, r)| (id.clone(), r.get("return").cloned().unwrap_or(Value::Null)))
        .collect();
    Ok(Json(json!({"info": [info], "return": [returns]})))
}

/// `GET /jobs`: salt-api's job listing (`jobs.list_jobs`), the jobs the
/// user may see.
pub async fn list(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
) -> Result<Json<Value>, ApiError> {
    let mut conn = api.hub.conn().await?;
    let loads = jobcache::all(&mut conn)
        .await
        .inspect_err(|_| api.hub.reset())?;
    let described: Map<String, Value> = loads
        .into_iter()
        .filter(|load| api.may_see(&user, &load.jid) || load.user == user)
        .map(|load| (load.jid.clone(), Value::Object(load.describe())))
        .collect();
    Ok(Json(json!({"return": [described]})))
}
