//! `GET /events`: a Server-Sent Events stream of PINGs, returns, rejects
//! and the jobs this API publishes, as they happen.
//!
//! Each SSE message is named after its kind (`event: return`) and carries
//! salt-api's `{"tag", "data"}` object. The stream covers every job whose
//! reply topic follows the masters' naming (`maid api` and `maid run`
//! alike), not only the jobs of this connection. A listener too slow to
//! keep up gets a comment saying how many events it missed, never a stall
//! of the other requests.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::response::sse::{self, KeepAlive, Sse};
use futures_util::Stream;
use tokio::sync::broadcast::error::RecvError;

use super::Api;
use super::hub::Event;
use super::login::User;
use super::perms;

/// How soon a client reconnects after the stream ends (the SSE `retry`).
const RETRY: Duration = Duration::from_millis(400);

fn to_sse(event: &Event) -> sse::Event {
    sse::Event::default()
        .event(event.kind)
        .data(serde_json::to_string(event).expect("events serialise"))
}

/// The event stream of the jobs `user` may see: their own, or every job
/// with `@jobs`.
pub async fn stream(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
) -> Sse<impl Stream<Item = Result<sse::Event, Infallible>>> {
    let rx = api.hub.events();
    let stop = api.stopping.clone();
    let hello = futures_util::stream::once(async { Ok(sse::Event::default().retry(RETRY)) });
    // Whether the user sees every job is decided once, at connection.
    let every = perms::has(&api.perms.of(&user), perms::JOBS);
    let state = (rx, stop, api, user);
    let events =
        futures_util::stream::unfold(state, move |(mut rx, mut stop, api, user)| async move {
            let out = loop {
                let received: Result<Arc<Event>, RecvError> = tokio::select! {
                    // The server is shutting down: end the stream so the
                    // graceful shutdown does not wait on it for ever.
                    _ = stop.wait_for(|s| *s) => return None,
                    r = rx.recv() => r,
                };
                match received {
                    Ok(event) if !every && !api.owns(&user, &event.jid) => continue,
                    other => break other,
                }
            };
            let out = match out {
                Ok(event) => to_sse(&event),
                Err(RecvError::Lagged(n)) => {
                    sse::Event::default().comment(format!("missed {n} events"))
                }
                Err(RecvError::Closed) => return None,
            };
            Some((Ok(out), (rx, stop, api, user)))
        });
    Sse::new(futures_util::StreamExt::chain(hello, events)).keep_alive(KeepAlive::default())
}
