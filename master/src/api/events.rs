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
use super::login::User;
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
/// `session_id` cookie `/login` set ([`super::login::require_token`]).
pub async fn stream(State(api): State<Api>, Extension(User(user)): Extension<User>) -> Response {
    let rx = api.hub.events();
    let stop = api.stopping.clone();
    let hello = futures_util::stream::once(async { Ok(format!("retry: {RETRY_MS}\n")) });
    let visible = visible_to(&api, user);
    let state = (rx, stop, visible);
    let events =
        futures_util::stream::unfold(state, move |(mut rx, mut stop, visible)| async move {
            let out = loop {
                let received: Option<Result<Arc<Event>, RecvError>> = tokio::select! {
                    // The server is shutting down: end the stream so the
                    // graceful shutdown does not wait on it for ever.
                    _ = stop.wait_for(|s| *s) => return None,
                    // Idle: a comment keeps the stream open through proxies.
                    () = tokio::time::sleep(KEEP_ALIVE) => None,
                    r = rx.recv() => Some(r),
                };
                match received {
                    Some(Ok(event)) if !visible(&event) => continue,
                    other => break other,
                }
            };
            let out = match out {
                None => ":\n\n".to_string(),
                Some(Ok(event)) => to_sse(&event),
                Some(Err(RecvError::Lagged(n))) => format!(": missed {n} events\n\n"),
                Some(Err(RecvError::Closed)) => return None,
            };
            Some((Ok::<_, Infallible>(out), (rx, stop, visible)))
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
    Query(query): Query<HashMap<String, String>>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    upgrade(api, user, &query, ws)
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
    upgrade(api, user, &query, ws)
}

/// As salt-api's `WebsocketEndpoint`: once the client has sent a first
/// message (`websocket client ready`), each event `user` may see goes out
/// as a text message `data: {"tag", "data"}` and a blank line. The stream
/// ends when the client closes it or the server shuts down.
fn upgrade(
    api: Api,
    user: String,
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
    Ok(ws.on_upgrade(move |socket| forward(socket, api, user)))
}

async fn forward(mut socket: WebSocket, api: Api, user: String) {
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
    let mut rx = api.hub.events();
    let visible = visible_to(&api, user);
    loop {
        let event = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            message = socket.recv() => match message {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => continue,
            },
            received = rx.recv() => match received {
                Ok(event) => event,
                // A listener too slow for the stream misses events; the
                // others do not wait for it.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => break,
            },
        };
        if !visible(&event) {
            continue;
        }
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
