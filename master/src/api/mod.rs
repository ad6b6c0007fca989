//! `maid api`: the master's HTTP API, modelled on salt-api's
//! `rest_cherrypy` so existing clients work, with what only the maid
//! design knows (missed maids, missed minions, empty, repeated) beside
//! Salt's answers.
//!
//! * [`login`]: `POST /login`, `POST /logout`, the `X-Auth-Token` check;
//!   [`auth`] holds the users and tokens and throttles logins; [`perms`]
//!   says who may run what, as Salt's `external_auth`.
//! * [`jobs`]: `POST /` and `POST /run` (lowstate, parsed by
//!   [`lowstate`]; the runner and wheel functions are
//!   [`crate::runners`] and [`crate::wheel`]),
//!   `GET /jobs` and `GET /jobs/{jid}`; [`minions`]: the registry;
//!   [`keys`]: the maid keys; [`events`]: SSE.
//! * [`media`]: request bodies and responses in JSON, YAML or forms.
//! * [`quota`]: how many jobs each user may start; [`stats`]: `GET
//!   /stats`, which records no credential.
//! * [`hub`]: the Redis connections every request shares.
//! * [`tls`] serves HTTPS.
//!
//! The OpenAPI document is `docs/openapi.json`, served as it is at
//! `/openapi.json`; it is the reference for every request and response.

mod assets;
mod audit;
pub mod auth;
mod error;
mod events;
mod hook;
pub mod hub;
mod jobs;
mod keys;
mod login;
mod lowstate;
mod media;
mod minions;
pub mod perms;
mod quota;
mod stats;
pub mod tls;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use error::ApiError;

use crate::bus::{Bus, BusError};
use crate::config::ApiSettings;

/// The OpenAPI 3 description of this API.
pub const OPENAPI: &str = include_str!("../../../docs/openapi.json");

/// What the API needs to run.
pub struct Settings {
    /// Where Redis is.
    pub bus: Bus,
    /// The topic jobs are published on (the master's id).
    pub master_topic: String,
    /// Signs every job, as `maid run` does, unless `[api] key` names a key
    /// of the API's own; `None` publishes unsigned jobs, which maids with
    /// `require_signed` reject.
    pub key: Option<ed25519_dalek::SigningKey>,
    /// `[api]`: users, token lifetime, timeout bound.
    pub api: ApiSettings,
    /// The accepted maid keys: with them, only signed replies count, as
    /// for `maid run`.
    pub pki: Option<crate::pki::Pki>,
    /// `[master] nodegroups`, expanded before a job is published.
    pub nodegroups: serde_json::Map<String, serde_json::Value>,
    /// `[master] file_roots`, stored as `salt://` before a state run is
    /// published ([`crate::jobs::serve_file_roots`]).
    pub file_roots: maid_config::FileRoots,
    /// `[master] pillar_roots` and how pillar is merged: pillar for the
    /// jobs that read it ([`crate::pillar::deliver`]).
    pub pillar: Option<crate::pillar::Settings>,
}

/// Why the API could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{error}")]
    Redis { error: BusError },
    #[error("{error}")]
    Hash { error: auth::HashError },
    #[error("{error}")]
    Perms { error: perms::PermError },
    #[error("api.key: {error}")]
    Key { error: crate::trust::KeyError },
    #[error("serving HTTP: {error}")]
    Io { error: std::io::Error },
    #[error("{0}")]
    Assets(#[from] assets::AssetsError),
}

/// The state every handler shares.
#[derive(Clone)]
struct Api(Arc<Inner>);

struct Inner {
    hub: hub::Hub,
    auth: auth::Auth,
    master_topic: String,
    key: Option<ed25519_dalek::SigningKey>,
    pki: Option<crate::pki::Pki>,
    perms: perms::Perms,
    /// Who started each job this API published, for `/jobs/{jid}` and
    /// `/events` (a user without `@jobs` sees only their own).
    owners: Owners,
    max_timeout_secs: f64,
    /// `[api] max_chunks`: the most chunks one request may hold.
    max_chunks: usize,
    /// How many jobs each user may start (`[api] jobs_per_second`,
    /// `jobs_burst`).
    quota: quota::Quota,
    /// `[master] nodegroups`, for `tgt_type: nodegroup` and `N@` words.
    nodegroups: serde_json::Map<String, serde_json::Value>,
    /// `[master] file_roots`, for state runs.
    file_roots: maid_config::FileRoots,
    /// `[master] pillar_roots`, for jobs that read pillar.
    pillar: Option<crate::pillar::Settings>,
    /// Turns true when the server begins to shut down, so that endless
    /// responses (`/events`) end.
    stopping: watch::Receiver<bool>,
    /// Request statistics for `GET /stats`.
    stats: stats::Stats,
    /// `GET /stats` without a token (`[api] stats_disable_auth`).
    stats_disable_auth: bool,
    /// `[api] max_body_bytes`: the largest request body read.
    max_body_bytes: usize,
    /// It speaks HTTPS: the session cookie is `Secure`.
    https: bool,
}

/// The address a request came from, for throttling logins per address.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub std::net::SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TcpListener>>
    for ClientAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, TcpListener>) -> Self {
        ClientAddr(*stream.remote_addr())
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tls::TlsListener>>
    for ClientAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, tls::TlsListener>) -> Self {
        ClientAddr(*stream.remote_addr())
    }
}

/// Job id → the user who started it, the oldest forgotten past
/// [`Owners::CAP`] (their jobs then read as nobody's: only `@jobs` users
/// see them).
#[derive(Default)]
struct Owners(
    std::sync::Mutex<(
        std::collections::HashMap<String, String>,
        std::collections::VecDeque<String>,
    )>,
);

impl Owners {
    const CAP: usize = 100_000;

    fn insert(&self, jid: &str, user: &str) {
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (map, order) = &mut *guard;
        if map.insert(jid.to_string(), user.to_string()).is_none() {
            order.push_back(jid.to_string());
        }
        while order.len() > Self::CAP {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }

    fn owner(&self, jid: &str) -> Option<String> {
        let guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        guard.0.get(jid).cloned()
    }
}

impl Api {
    /// Whether `user` may see job `jid`: theirs, or they hold `@jobs`.
    fn may_see(&self, user: &str, jid: &str) -> bool {
        perms::has(&self.perms.of(user), perms::JOBS) || self.owns(user, jid)
    }

    /// Whether `user` started job `jid` through this API.
    fn owns(&self, user: &str, jid: &str) -> bool {
        self.owners.owner(jid).is_some_and(|o| o == user)
    }

    /// A 400 when a request holds more than `[api] max_chunks` of `what`
    /// (`n` of them): each chunk may be a job on every maid, or a password
    /// check, and salt-api sets no bound.
    fn within_max_chunks(&self, n: usize, what: &str) -> Result<(), ApiError> {
        if n > self.max_chunks {
            return Err(ApiError::bad(
                "body",
                format!(
                    "{n} {what}; a request may hold at most {} ([api] max_chunks)",
                    self.max_chunks
                ),
            ));
        }
        Ok(())
    }
}

impl std::ops::Deref for Api {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}

fn router(api: Api, console: Router<Api>) -> Router {
    let protected = Router::new()
        .route("/", post(jobs::run))
        .route("/jobs", get(jobs::list))
        .route("/jobs/{jid}", get(jobs::job))
        .route("/minions", get(minions::all).post(jobs::start))
        .route("/minions/{id}", get(minions::one))
        .route("/keys", get(keys::all))
        .route("/keys/{mid}", get(keys::one))
        .route("/events", get(events::stream))
        .route("/audit", get(audit::query))
        .route("/ws", get(events::websocket))
        .route("/hook", post(hook::fire))
        .route("/hook/{*path}", post(hook::fire));
    // `GET /stats` needs a token unless `[api] stats_disable_auth`.
    let stats = Router::new().route("/stats", get(stats::get));
    let (protected, open) = if api.stats_disable_auth {
        (protected, stats)
    } else {
        (protected.merge(stats), Router::new())
    };
    let protected = protected.route_layer(axum::middleware::from_fn_with_state(
        api.clone(),
        login::require_token,
    ));
    open.route("/", get(welcome))
        .route("/login", get(login::how_to_log_in).post(login::login))
        .route("/logout", post(login::logout))
        .route("/token", post(login::token_for_run))
        .route("/run", post(jobs::run_with_credentials))
        .route("/keys", post(keys::generate))
        .route("/ws/{token}", get(events::websocket_with_token))
        .route(
            "/openapi.json",
            get(|| async { ([(CONTENT_TYPE, "application/json")], OPENAPI) }),
        )
        .merge(protected)
        .merge(console)
        .fallback(|| async { ApiError::NotFound.into_response() })
        // Bodies are read whole before they are decoded: bounded here
        // (413 past it), as salt-api's `max_request_body_size`.
        .layer(axum::extract::DefaultBodyLimit::max(api.max_body_bytes))
        .layer(axum::middleware::from_fn(media::respond_as_accepted))
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            stats::count,
        ))
        .with_state(api)
}

/// `GET /`: salt-api's welcome, naming the clients it runs.
async fn welcome() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({
        "return": "Welcome",
        "clients": [
            "local",
            "local_async",
            "local_batch",
            "local_subset",
            "runner",
            "runner_async",
            "wheel",
            "wheel_async",
        ],
    }))
}

/// Serve the API on `listener` (over TLS with `tls`) until `shutdown`
/// completes; then requests in flight finish and `/events` streams end.
pub async fn serve(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    // A key of the API's own, when it has one: the maids then count its
    // jobs apart from `maid run`'s.
    let key = match &settings.api.key {
        Some(path) => {
            Some(crate::trust::read_signing_key(path).map_err(|error| ServeError::Key { error })?)
        }
        None => settings.key,
    };
    // Returns sealed to the key that signed their job (§8) are opened
    // for the event stream with it.
    let hub = hub::Hub::start(settings.bus, settings.pki.clone(), key.clone())
        .await
        .map_err(|error| ServeError::Redis { error })?;
    let console = assets::routes(&settings.api)?;
    let perms = perms::Perms::new(settings.api.perms, settings.api.groups)
        .map_err(|error| ServeError::Perms { error })?;
    let auth = auth::Auth::new(
        settings.api.users,
        Duration::from_secs(settings.api.token_ttl_secs),
    )
    .map_err(|error| ServeError::Hash { error })?;
    let (stop, stopping) = watch::channel(false);
    let api = Api(Arc::new(Inner {
        hub,
        auth,
        master_topic: settings.master_topic,
        key,
        pki: settings.pki,
        perms,
        owners: Owners::default(),
        max_timeout_secs: settings.api.max_timeout_secs,
        max_chunks: settings.api.max_chunks,
        quota: quota::Quota::new(settings.api.jobs_per_second, settings.api.jobs_burst),
        max_body_bytes: settings.api.max_body_bytes,
        nodegroups: settings.nodegroups,
        file_roots: settings.file_roots,
        pillar: settings.pillar,
        stopping,
        stats: stats::Stats::default(),
        stats_disable_auth: settings.api.stats_disable_auth,
        https: tls.is_some(),
    }));
    let app = router(api, console);
    let signal = async move {
        shutdown.await;
        let _ = stop.send(true);
    };
    let served = match tls {
        Some(acceptor) => {
            let listener = tls::TlsListener::new(listener, acceptor)
                .map_err(|error| ServeError::Io { error })?;
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<ClientAddr>(),
            )
            .with_graceful_shutdown(signal)
            .await
        }
        None => {
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<ClientAddr>(),
            )
            .with_graceful_shutdown(signal)
            .await
        }
    };
    served.map_err(|error| ServeError::Io { error })
}
