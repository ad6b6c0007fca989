//! `maid api`: the master's HTTP API, modelled on salt-api's
//! `rest_cherrypy` so existing clients work, with what only the maid
//! design knows (missed maids, missed minions, empty, repeated) beside
//! Salt's answers.
//!
//! * [`login`]: `POST /login`, `POST /logout`, the `X-Auth-Token` check;
//!   [`auth`] holds the users and tokens.
//! * [`jobs`]: `POST /` (lowstate, parsed by [`lowstate`]) and
//!   `GET /jobs/{jid}`; [`minions`]: the registry; [`events`]: SSE.
//! * [`hub`]: the Redis connections every request shares.
//! * [`tls`] serves HTTPS.
//!
//! The OpenAPI document is `docs/openapi.json`, served as it is at
//! `/openapi.json`; it is the reference for every request and response.

pub mod auth;
mod error;
mod events;
pub mod hub;
mod jobs;
mod login;
mod lowstate;
mod minions;
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
    /// Signs every job, as `maid run` does; `None` publishes unsigned jobs,
    /// which maids with `require_signed` reject.
    pub key: Option<ed25519_dalek::SigningKey>,
    /// `[api]`: users, token lifetime, timeout bound.
    pub api: ApiSettings,
    /// The accepted maid keys: with them, only signed replies count, as
    /// for `maid run`.
    pub pki: Option<crate::pki::Pki>,
}

/// Why the API could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{error}")]
    Redis { error: BusError },
    #[error("{error}")]
    Hash { error: auth::HashError },
    #[error("serving HTTP: {error}")]
    Io { error: std::io::Error },
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
    max_timeout_secs: f64,
    /// Turns true when the server begins to shut down, so that endless
    /// responses (`/events`) end.
    stopping: watch::Receiver<bool>,
}

impl std::ops::Deref for Api {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}

fn router(api: Api) -> Router {
    let protected = Router::new()
        .route("/", post(jobs::run))
        .route("/jobs/{jid}", get(jobs::job))
        .route("/minions", get(minions::all))
        .route("/minions/{id}", get(minions::one))
        .route("/events", get(events::stream))
        .route_layer(axum::middleware::from_fn_with_state(
            api.clone(),
            login::require_token,
        ));
    Router::new()
        .route("/login", post(login::login))
        .route("/logout", post(login::logout))
        .route(
            "/openapi.json",
            get(|| async { ([(CONTENT_TYPE, "application/json")], OPENAPI) }),
        )
        .merge(protected)
        .fallback(|| async { ApiError::NotFound.into_response() })
        .with_state(api)
}

/// Serve the API on `listener` (over TLS with `tls`) until `shutdown`
/// completes; then requests in flight finish and `/events` streams end.
pub async fn serve(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let hub = hub::Hub::start(settings.bus, settings.pki.clone())
        .await
        .map_err(|error| ServeError::Redis { error })?;
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
        key: settings.key,
        pki: settings.pki,
        max_timeout_secs: settings.api.max_timeout_secs,
        stopping,
    }));
    let app = router(api);
    let signal = async move {
        shutdown.await;
        let _ = stop.send(true);
    };
    let served = match tls {
        Some(acceptor) => {
            let listener = tls::TlsListener::new(listener, acceptor)
                .map_err(|error| ServeError::Io { error })?;
            axum::serve(listener, app)
                .with_graceful_shutdown(signal)
                .await
        }
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(signal)
                .await
        }
    };
    served.map_err(|error| ServeError::Io { error })
}
