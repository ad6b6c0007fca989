//! `GET /events`: a Server-Sent Events stream of PINGs, returns, rejects
//! and the jobs this API publishes, as they happen; `GET /ws`, the same
//! events over a WebSocket, as salt-api's.
//!
//! Each SSE message is salt-api's: a `tag:` line and a `data:` line of
//! `{"tag", "data"}`, unnamed (a browser's `EventSource` hands it to
//! `onmessage`), every event's `data` with its `_stamp`. The stream covers every job whose
//! reply topic follows the masters' naming (`maid api` and `maid run`
//! alike), not only the jobs of this connection. A listener too slow to
//! keep up gets a comment saying how many events it missed, never a stall
//! of the other requests.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use tokio::sync::broadcast::error::RecvError;

use super::Api;
use super::error::ApiError;
use super::hub::Event;
use super::login::{Token, User};
use super::perms;

/// How soon a client reconnects after the stream ends (the SSE `retry`,
/// salt-api's).
const RETRY_MS: u64 = 400;

/// How often a comment line keeps an idle stream open through proxies.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// One event as salt-api writes it: a `tag:` line and a `data:` line of
/// `{"tag", "data"}`, unnamed, so a browser's `EventSource` hands it to
/// `onmessage`.
fn to_sse(event: &Event) -> String {
    format!(
        "tag: {}\ndata: {}\n\n",
        event.tag,
        serde_json::to_string(event).expect("events serialise")
    )
}

/// The event stream of the jobs `user` may see: their own, or every job
/// with `@jobs`. The token came as `X-Auth-Token`, `?token=` or the
/// `session_id` cookie `/login` set ([`super::login::require_token`]);
/// the stream ends when that token is logged out or expires, before
/// another event is sent.
pub async fn stream(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
    Extension(Token(token)): Extension<Token>,
) -> Response {
    let hello = futures_util::stream::once(async { Ok(format!("retry: {RETRY_MS}\n")) });
    let listener = Listener::new(&api, user, token);
    let events = futures_util::stream::unfold(listener, |mut l| async move {
        let out = match l.next().await? {
            None => ":\n\n".to_string(),
            Some(Ok(event)) => to_sse(&event),
            Some(Err(n)) => format!(": missed {n} events\n\n"),
        };
        Some((Ok::<_, Infallible>(out), l))
    });
    let body = Body::from_stream(futures_util::StreamExt::chain(hello, events));
    (
        [
            (CONTENT_TYPE, "text/event-stream"),
            (CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// What a [`Listener`] heard while it waited.
enum Heard {
    /// A logout, anyone's (`false`: the sessions are gone with the API).
    Logout(bool),
    /// Nothing for [`KEEP_ALIVE`].
    Nothing,
    Event(Result<Arc<Event>, RecvError>),
}

/// One open event stream: what it hears, and what ends it.
struct Listener {
    /// The hub's events, every job's.
    rx: tokio::sync::broadcast::Receiver<Arc<Event>>,
    /// The server shutting down: the stream ends, so the graceful
    /// shutdown does not wait on it for ever.
    stop: tokio::sync::watch::Receiver<bool>,
    /// Changes at every logout: the token is checked again at once.
    logouts: tokio::sync::watch::Receiver<u64>,
    /// Which events the user may see.
    visible: Box<dyn Fn(&Event) -> bool + Send>,
    /// The session's token, checked before anything is sent.
    token: String,
    api: Api,
}

impl Listener {
    fn new(api: &Api, user: String, token: String) -> Listener {
        Listener {
            rx: api.hub.events(),
            stop: api.stopping.clone(),
            logouts: api.auth.logouts(),
            visible: Box::new(visible_to(api, user)),
            token,
            api: api.clone(),
        }
    }

    /// The next thing to send: `Some(None)` when idle for [`KEEP_ALIVE`]
    /// (a comment keeps the stream open through proxies), an event the
    /// user may see, or how many events a slow listener missed. `None`
    /// ends the stream: the server stops, the hub is gone, or the
    /// session is over.
    async fn next(&mut self) -> Option<Option<Result<Arc<Event>, u64>>> {
        let out = loop {
            let received = tokio::select! {
                _ = self.stop.wait_for(|s| *s) => return None,
                changed = self.logouts.changed() => Heard::Logout(changed.is_ok()),
                () = tokio::time::sleep(KEEP_ALIVE) => Heard::Nothing,
                r = self.rx.recv() => Heard::Event(r),
            };
            match received {
                Heard::Logout(true) if self.live() => continue,
                Heard::Logout(_) => return None,
                Heard::Event(Ok(event)) if !(self.visible)(&event) => continue,
                Heard::Event(Ok(event)) => break Some(Ok(event)),
                Heard::Event(Err(RecvError::Lagged(n))) => break Some(Err(n)),
                Heard::Event(Err(RecvError::Closed)) => return None,
                Heard::Nothing => break None,
            }
        };
        // A token that expired while the stream waited gets nothing more.
        self.live().then_some(out)
    }

    fn live(&self) -> bool {
        self.api.auth.check(&self.token).is_some()
    }
}

/// Which events `user` is sent: every job's with `@jobs` (decided once,
/// at connection), else those of the jobs they started.
fn visible_to(api: &Api, user: String) -> impl Fn(&Event) -> bool + Send + use<> {
    let every = perms::has(&api.perms.of(&user), perms::JOBS);
    let api = api.clone();
    move |event| every || api.owns(&user, &event.jid)
}

/// `GET /ws` (token in `X-Auth-Token`): salt-api's WebSocket of the same
/// events.
pub async fn websocket(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
    Extension(Token(token)): Extension<Token>,
    Query(query): Query<HashMap<String, String>>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    upgrade(api, user, token, &query, ws)
}

/// `GET /ws/{token}`: the token in the path, for browsers, whose
/// `WebSocket` cannot send a header.
pub async fn websocket_with_token(
    State(api): State<Api>,
    Path(token): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let user = api.auth.check(&token).ok_or(ApiError::Unauthorized(
        "token unknown or expired; log in again",
    ))?;
    upgrade(api, user, token, &query, ws)
}

/// As salt-api's `WebsocketEndpoint`: once the client has sent a first
/// message (`websocket client ready`), each event `user` may see goes out
/// as a text message `data: {"tag", "data"}` and a blank line. The stream
/// ends when the client closes it, the server shuts down, or the token is
/// logged out or expires.
fn upgrade(
    api: Api,
    user: String,
    token: String,
    query: &HashMap<String, String>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    if query.contains_key("format_events") {
        return Err(ApiError::bad(
            "format_events",
            "format_events (the salt-ui formatting) is not supported: events come as salt-api sends them without it",
        ));
    }
    let ws = ws.map_err(|e| ApiError::bad("Upgrade", e.body_text()))?;
    Ok(ws.on_upgrade(move |socket| forward(socket, api, user, token)))
}

async fn forward(mut socket: WebSocket, api: Api, user: String, token: String) {
    let mut stop = api.stopping.clone();
    // Nothing is sent before the client says it is ready.
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            message = socket.recv() => match message {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(Message::Text(_) | Message::Binary(_))) => break,
                Some(Ok(_)) => continue,
            },
        }
    }
    let mut listener = Listener::new(&api, user, token);
    loop {
        let event = tokio::select! {
            message = socket.recv() => match message {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => continue,
            },
            next = listener.next() => match next {
                Some(Some(Ok(event))) => event,
                // Idle, or too slow for the stream (the others do not
                // wait for it): nothing to send.
                Some(_) => continue,
                None => break,
            },
        };
        let text = format!(
            "data: {}\n\n",
            serde_json::to_string(&*event).expect("events serialise")
        );
        if socket.send(Message::Text(text.into())).await.is_err() {
            return;
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}
