//! A syndic maid over a Salt master (PROTOCOL §7): the minions beneath are
//! a Salt master's, on this host, reached through its salt-api
//! (rest_cherrypy).
//!
//! For each job the maid opens salt-api's `/events` stream, publishes the
//! job with the `local_async` client, and PINGs with the minions Salt's
//! master answered it would publish to: Salt's own targeting decides, as
//! it does for `salt` on that master. Each `salt/job/<jid>/ret/<id>` event
//! then goes up as a return for that minion, with Salt's retcode, until
//! every listed minion returned or the job's time is up. What a Salt
//! minion returns is vouched for by this maid, which verified the job and
//! talks to the master on its own host: the returns go up under its own
//! id and key.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

use futures_util::future::BoxFuture;

use super::Shared;
use super::downstream::{Down, Downstream, HandedDown, Targeted};
use crate::config::{ConfigError, SaltApiSettings};
use crate::outbox::Pending;
use crate::protocol::{Job, Reply, Return};

/// How long salt-api may take to answer a login or a publish.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The salt-api of the Salt master beneath.
pub(super) struct SaltBridge {
    http: reqwest::Client,
    url: String,
    login: Value,
    /// The token of the last login; `None` until the first, and after
    /// salt-api refused it.
    token: Mutex<Option<String>>,
}

/// A job Salt's master took: its jid there, the minions it published to,
/// and the event stream its returns come on.
struct SaltJob {
    jid: String,
    minions: Vec<String>,
    events: reqwest::Response,
}

impl Downstream for SaltBridge {
    /// Salt's master applies its own targeting: every job goes to it.
    fn targeted(&self, _: &Job, _: &str) -> Targeted {
        Targeted::TheyDecide
    }

    /// Publish the job on the Salt master: the minions it answers it
    /// published to are whom the PING lists beneath. A master that cannot
    /// be reached took it for nobody.
    fn hand_down<'a>(
        &'a self,
        shared: &'a Shared,
        down: Down<'a>,
        _: Targeted,
    ) -> BoxFuture<'a, HandedDown<'a>> {
        Box::pin(async move {
            let job = down.job;
            match self.start(job).await {
                Ok(salt_job) => HandedDown {
                    minions: salt_job.minions.clone(),
                    relay: Box::pin(relay(shared, down, salt_job)),
                },
                Err(e) => {
                    tracing::error!(jid = %job.jid, cause = %e, "cannot publish the job to the Salt master");
                    HandedDown::nobody()
                }
            }
        })
    }
}

impl SaltBridge {
    pub(super) fn new(settings: &SaltApiSettings) -> Result<SaltBridge, ConfigError> {
        let http = reqwest::Client::builder()
            .connect_timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| ConfigError::Invalid(format!("syndic.salt_api: {e}")))?;
        Ok(SaltBridge {
            http,
            url: settings.url.trim_end_matches('/').to_string(),
            login: json!({
                "username": settings.username,
                "password": settings.password()?,
                "eauth": settings.eauth,
            }),
            token: Mutex::new(None),
        })
    }

    async fn token(&self) -> Result<String, SaltApiError> {
        let mut token = self.token.lock().await;
        if let Some(t) = &*token {
            return Ok(t.clone());
        }
        let answer: Value = self
            .http
            .post(format!("{}/login", self.url))
            .timeout(REQUEST_TIMEOUT)
            .header("Accept", "application/json")
            .json(&self.login)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(SaltApiError::Login)?
            .json()
            .await
            .map_err(SaltApiError::Login)?;
        let fresh = answer["return"][0]["token"]
            .as_str()
            .ok_or_else(|| SaltApiError::NoToken(answer.to_string()))?
            .to_string();
        *token = Some(fresh.clone());
        Ok(fresh)
    }

    /// Forget a token salt-api refused.
    async fn refused(&self) {
        *self.token.lock().await = None;
    }

    /// Publish `job` on the Salt master, listening for its returns first.
    async fn start(&self, job: &Job) -> Result<SaltJob, SaltApiError> {
        match self.try_start(job).await {
            Err(SaltApiError::Unauthorized) => {
                // The token expired (salt-api restarted, or its TTL): once
                // more with a new login.
                self.refused().await;
                self.try_start(job).await
            }
            started => started,
        }
    }

    async fn try_start(&self, job: &Job) -> Result<SaltJob, SaltApiError> {
        let token = self.token().await?;
        let events = self
            .http
            .get(format!("{}/events", self.url))
            .header("X-Auth-Token", &token)
            .header("Accept", "text/event-stream")
            .send()
            .await;
        let events = match events {
            Ok(r) if r.status() == reqwest::StatusCode::UNAUTHORIZED => {
                return Err(SaltApiError::Unauthorized);
            }
            Ok(r) => r.error_for_status().map_err(SaltApiError::Events)?,
            Err(e) => return Err(SaltApiError::Events(e)),
        };
        let chunk = json!([{
            "client": "local_async",
            "tgt": job.tgt,
            "tgt_type": job.tgt_type,
            "fun": job.fun,
            "arg": job.arg,
            "kwarg": job.kwarg,
        }]);
        let answer = self
            .http
            .post(&self.url)
            .timeout(REQUEST_TIMEOUT)
            .header("X-Auth-Token", &token)
            .header("Accept", "application/json")
            .json(&chunk)
            .send()
            .await;
        let answer: Value = match answer {
            Ok(r) if r.status() == reqwest::StatusCode::UNAUTHORIZED => {
                return Err(SaltApiError::Unauthorized);
            }
            Ok(r) => r.error_for_status(),
            Err(e) => Err(e),
        }
        .map_err(SaltApiError::Publish)?
        .json()
        .await
        .map_err(SaltApiError::Publish)?;
        // No minion matched: Salt answers with an empty return.
        let first = &answer["return"][0];
        let jid = first["jid"].as_str().unwrap_or_default().to_string();
        let minions = first["minions"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect::<BTreeSet<_>>()
            })
            .unwrap_or_default();
        Ok(SaltJob {
            jid,
            minions: minions.into_iter().collect(),
            events,
        })
    }
}

/// Why a job did not reach the Salt master beneath.
#[derive(Debug, thiserror::Error)]
enum SaltApiError {
    #[error("salt-api login: {0}")]
    Login(reqwest::Error),
    #[error("salt-api login: no token in {0}")]
    NoToken(String),
    #[error("salt-api refused the login's token (401): check the user's external_auth")]
    Unauthorized,
    #[error("salt-api /events: {0}")]
    Events(reqwest::Error),
    #[error("salt-api local_async: {0}")]
    Publish(reqwest::Error),
}

/// Send up each return of `salt_job` (job `down` here) until every minion
/// it listed returned or the job's time is up.
async fn relay(shared: &Shared, down: Down<'_>, mut salt_job: SaltJob) {
    let job = down.job;
    if !salt_job.minions.is_empty() {
        super::records::relayed(shared, job, down.kid, &salt_job.minions);
    }
    let deadline = tokio::time::Instant::now() + shared.relay_limit(job);
    let mut waiting: BTreeSet<String> = salt_job.minions.iter().cloned().collect();
    let prefix = format!("salt/job/{}/ret/", salt_job.jid);
    let mut buffer = String::new();
    while !waiting.is_empty() {
        let chunk = match tokio::time::timeout_at(deadline, salt_job.events.chunk()).await {
            Ok(Ok(Some(chunk))) => chunk,
            Ok(Ok(None)) => {
                tracing::warn!(jid = %job.jid, "salt-api closed the event stream");
                break;
            }
            Ok(Err(e)) => {
                tracing::warn!(jid = %job.jid, cause = %e, "salt-api event stream failed");
                break;
            }
            Err(_) => break,
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        // Server-sent events end with a blank line.
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            let Ok(event) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            let Some(id) = event["tag"].as_str().and_then(|t| t.strip_prefix(&prefix)) else {
                continue;
            };
            if !waiting.remove(id) {
                continue;
            }
            let ret = salt_return(shared, job, id, &event["data"]);
            let pending = Pending {
                topic: job.temp_topic.clone(),
                payload: shared.seal(Reply::Return(ret).to_json()),
                jid: job.jid.clone(),
                id: id.to_string(),
                published: false,
            };
            shared.deliver(pending).await;
        }
    }
}

/// The return (§3.2) of minion `id` from Salt's return event `data`.
fn salt_return(shared: &Shared, job: &Job, id: &str, data: &Value) -> Return {
    let ret = data.get("return").cloned().unwrap_or(Value::Null);
    let success = data["success"].as_bool().unwrap_or(true);
    let retcode = data["retcode"]
        .as_i64()
        .and_then(|r| i32::try_from(r).ok())
        .unwrap_or(if success { 0 } else { 1 });
    let fun_args = match data.get("fun_args") {
        Some(Value::Array(a)) => a.clone(),
        _ => job.arg.clone(),
    };
    Return {
        sub_ip: shared.id.clone(),
        jid: job.jid.clone(),
        id: id.to_string(),
        fun: job.fun.clone(),
        fun_args,
        ret: ret.clone(),
        retcode,
        success,
        out: job.out.clone().unwrap_or_else(|| "nested".into()),
        stamp: crate::jid::stamp(),
        ret_: Map::from_iter([(id.to_string(), ret)]),
        sealed_return: None,
    }
}
