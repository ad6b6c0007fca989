//! The API's Redis: one multiplexed command connection and one pattern
//! subscription, shared by every request.
//!
//! Every master reply topic matches [`jobs::REPLY_PATTERN`], so a single
//! `PSUBSCRIBE` hears the replies of every job. A reader task hands each
//! message to the job that registered its topic (a [`Route`], made before
//! the job is published so no PING is missed) and to the `/events`
//! listeners. The reader never waits on a consumer: routes are unbounded
//! and the event broadcast drops what a slow listener cannot keep up
//! with, so one slow request cannot hold up another.
//!
//! Where replies go on sharded pub/sub (a Redis 7 Cluster), no pattern
//! hears them: each route then `SSUBSCRIBE`s its own topic on one shared
//! cluster connection, and `/events` carries the replies of the jobs this
//! API published.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use redis::cluster_async::ClusterConnection;
use redis::{Msg, PushInfo};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use crate::bus::{Bus, BusError, Conn};
use crate::jobs;
use crate::pki::Pki;
use crate::protocol::Reply;
use crate::replies::{AcceptedKeys, receive};

/// Events an `/events` listener may fall behind by before it misses some.
const EVENT_BACKLOG: usize = 4096;

/// Pause before subscribing again after the subscription was lost.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);

type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Msg>>>>;

/// One event of the `/events` stream, in salt-api's shape: a tag and the
/// data (here a PROTOCOL reply, or the job the API published).
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// What it is: `ping`, `return`, `reject`, `new` or `hook`.
    #[serde(skip)]
    pub kind: &'static str,
    /// Salt's event tag: `salt/job/<jid>/ret/<id>`, `salt/job/<jid>/new`;
    /// PINGs and rejects, which Salt has no tag for, under `maid/job/`.
    pub tag: String,
    pub data: Value,
    /// The job it belongs to, so a listener sees only the jobs it may.
    #[serde(skip)]
    pub jid: String,
}

impl Event {
    fn from_reply(reply: Reply) -> Event {
        let (kind, tag) = match &reply {
            Reply::Ping(p) => ("ping", format!("maid/job/{}/ping/{}", p.jid, p.sub_ip)),
            Reply::Return(r) => ("return", format!("salt/job/{}/ret/{}", r.jid, r.id)),
            Reply::Reject(r) => ("reject", format!("maid/job/{}/reject/{}", r.jid, r.sub_ip)),
        };
        let jid = reply.jid().to_string();
        let data = serde_json::to_value(&reply).expect("replies serialise");
        Event {
            kind,
            tag,
            data,
            jid,
        }
    }

    /// The event with its `data`'s `_stamp`, as every Salt event has one:
    /// now, unless it has one already (a return's is its maid's).
    fn stamped(mut self) -> Event {
        if let Value::Object(data) = &mut self.data {
            data.entry("_stamp")
                .or_insert_with(|| Value::String(crate::jid::stamp()));
        }
        self
    }

    /// A job this API published.
    pub fn new_job(jid: &str, data: Value) -> Event {
        Event {
            kind: "new",
            tag: format!("salt/job/{jid}/new"),
            data,
            jid: jid.to_string(),
        }
    }
}

/// The shared connections.
pub struct Hub {
    bus: Bus,
    /// The command connection; `None` after a failure, so the next request
    /// connects afresh instead of reusing a dead socket.
    conn: Mutex<Option<Conn>>,
    routes: Routes,
    events: broadcast::Sender<Arc<Event>>,
    reader: tokio::task::JoinHandle<()>,
    /// Where replies are sharded: the connection routes subscribe on.
    sharded: Option<ClusterConnection>,
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Hub {
    /// Connect and subscribe; replies are heard from when this returns.
    /// With `pki`, the event stream carries only replies signed by the key
    /// accepted for their maid, as `maid run` counts them.
    /// A return sealed to `key` (the key that signs the API's jobs) is
    /// opened for the event stream.
    pub async fn start(
        bus: Bus,
        pki: Option<Pki>,
        key: Option<ed25519_dalek::SigningKey>,
    ) -> Result<Hub, BusError> {
        let conn = bus.connect().await?;
        let routes = Routes::default();
        let (events, _) = broadcast::channel(EVENT_BACKLOG);
        let keys = pki.map(Keys::new);
        let dispatch = Dispatch {
            routes: routes.clone(),
            events: events.clone(),
            keys,
            key,
        };
        let (reader, sharded) = match bus.sharded_subscriber().await? {
            Some((sub, pushes)) => (tokio::spawn(read_sharded(pushes, dispatch)), Some(sub)),
            None => {
                let first = subscribe(&bus).await?;
                (tokio::spawn(read(bus.clone(), first, dispatch)), None)
            }
        };
        Ok(Hub {
            bus,
            conn: Mutex::new(Some(conn)),
            routes,
            events,
            reader,
            sharded,
        })
    }

    /// The shared command connection (a clone multiplexes the same socket).
    pub async fn conn(&self) -> Result<Conn, BusError> {
        if let Some(c) = self.conn.lock().expect("conn slot poisoned").as_ref() {
            return Ok(c.clone());
        }
        let fresh = self.bus.connect().await?;
        *self.conn.lock().expect("conn slot poisoned") = Some(fresh.clone());
        Ok(fresh)
    }

    /// Drop the command connection after it failed.
    pub fn reset(&self) {
        self.conn.lock().expect("conn slot poisoned").take();
    }

    /// Start receiving what is published on `topic`.
    pub async fn route(&self, topic: &str) -> Result<Route, BusError> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.routes
            .lock()
            .expect("routes poisoned")
            .insert(topic.to_string(), tx);
        let route = Route {
            topic: topic.to_string(),
            routes: self.routes.clone(),
            rx,
            sharded: self.sharded.clone(),
        };
        if let Some(mut sub) = self.sharded.clone() {
            sub.ssubscribe(topic).await?;
        }
        Ok(route)
    }

    /// Listen to every event from now on.
    pub fn events(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// Tell the listeners about `event`.
    pub fn announce(&self, event: Event) {
        // No listener is not an error.
        let _ = self.events.send(Arc::new(event.stamped()));
    }
}

async fn subscribe(bus: &Bus) -> Result<redis::aio::PubSub, BusError> {
    let mut pubsub = bus.subscribe(&[]).await?;
    pubsub.psubscribe(jobs::REPLY_PATTERN).await?;
    Ok(pubsub)
}

/// The reader task: dispatch until the hub is dropped, subscribing again
/// whenever the subscription is lost.
async fn read(bus: Bus, first: redis::aio::PubSub, mut dispatch: Dispatch) {
    let mut pubsub = Some(first);
    loop {
        let sub = match pubsub.take() {
            Some(s) => s,
            None => match subscribe(&bus).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(cause = %e, "cannot subscribe to reply topics; retrying");
                    tokio::time::sleep(RESUBSCRIBE_AFTER).await;
                    continue;
                }
            },
        };
        let mut messages = sub.into_on_message();
        while let Some(msg) = messages.next().await {
            dispatch.send(msg);
        }
        tracing::warn!("lost the reply subscription; subscribing again");
        tokio::time::sleep(RESUBSCRIBE_AFTER).await;
    }
}

/// The reader task where replies are sharded: the cluster connection
/// subscribes each route's topic again after a reconnection itself.
async fn read_sharded(mut pushes: mpsc::UnboundedReceiver<PushInfo>, mut dispatch: Dispatch) {
    while let Some(push) = pushes.recv().await {
        if let Some(msg) = Msg::from_push_info(push) {
            dispatch.send(msg);
        }
    }
}

/// Where a reply goes: the job that routed its topic, and the `/events`
/// listeners.
struct Dispatch {
    routes: Routes,
    events: broadcast::Sender<Arc<Event>>,
    keys: Option<Keys>,
    /// Opens returns sealed to the API's signing key.
    key: Option<ed25519_dalek::SigningKey>,
}

impl Dispatch {
    fn send(&mut self, msg: Msg) {
        let topic = msg.get_channel_name().to_string();
        if let Some(tx) = self.routes.lock().expect("routes poisoned").get(&topic) {
            // The job may have finished and not yet dropped its route.
            let _ = tx.send(msg.clone());
        }
        if self.events.receiver_count() > 0
            && let Ok(received) = receive(msg.get_payload_bytes())
        {
            if let Some(keys) = &mut self.keys
                && let Err(why) = received.verify(keys.current())
            {
                tracing::warn!(maid = received.maid(), %why, "forged reply: no event");
                return;
            }
            let reply = match received.reply {
                Reply::Return(r) => Reply::Return(r.unsealed(self.key.as_ref())),
                other => other,
            };
            let _ = self
                .events
                .send(Arc::new(Event::from_reply(reply).stamped()));
        }
    }
}

/// The accepted maid keys, read again from the key store at most once a
/// second, so keys accepted while the API runs count without a restart.
struct Keys {
    pki: Pki,
    accepted: AcceptedKeys,
    read_at: Option<std::time::Instant>,
}

impl Keys {
    fn new(pki: Pki) -> Self {
        Self {
            pki,
            accepted: AcceptedKeys::new(),
            read_at: None,
        }
    }

    fn current(&mut self) -> &AcceptedKeys {
        if self
            .read_at
            .is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(1))
        {
            self.accepted = self.pki.accepted().unwrap_or_else(|e| {
                tracing::error!(cause = %e, "cannot read the accepted maid keys: no event counts");
                AcceptedKeys::new()
            });
            self.read_at = Some(std::time::Instant::now());
        }
        &self.accepted
    }
}

/// The messages of one reply topic; unregistered when dropped, also when
/// the request that held it was cancelled.
pub struct Route {
    topic: String,
    routes: Routes,
    rx: mpsc::UnboundedReceiver<Msg>,
    /// Where replies are sharded: the connection its topic is subscribed on.
    sharded: Option<ClusterConnection>,
}

impl Stream for Route {
    type Item = Msg;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Msg>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes
            .lock()
            .expect("routes poisoned")
            .remove(&self.topic);
        if let Some(mut sub) = self.sharded.take() {
            let topic = std::mem::take(&mut self.topic);
            tokio::spawn(async move {
                if let Err(e) = sub.sunsubscribe(&topic).await {
                    tracing::warn!(%topic, cause = %e, "cannot unsubscribe a reply topic");
                }
            });
        }
    }
}
