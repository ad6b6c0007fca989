//! Those a syndic maid answers for beneath it (PROTOCOL §7): maids on a
//! Redis of their own ([`super::syndic`]) or a Salt master
//! ([`super::salt_bridge`]). The per-message path knows them only through
//! [`Downstream`], so it is about one minion and the list of those beneath
//! that a job went to.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::Shared;
use crate::bus::Conn;
use crate::filestore::ConnSource;
use crate::protocol::Job;

/// Whom a job targets beneath one [`Downstream`], as admission decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Targeted {
    /// These ids (none, when the job is not for anybody beneath).
    Ids(Vec<String>),
    /// Those beneath decide when the job is handed to them (a Salt master
    /// applies its own targeting): every job goes down, and the PING waits
    /// for their answer.
    TheyDecide,
}

impl Targeted {
    /// Whether the job goes down at all.
    pub(super) fn any(&self) -> bool {
        match self {
            Targeted::Ids(ids) => !ids.is_empty(),
            Targeted::TheyDecide => true,
        }
    }
}

/// A job to hand down: as it arrived (a signed envelope stays the
/// master's), on the topic it arrived on.
pub(super) struct Down<'a> {
    pub job: &'a Job,
    /// The key that signed it.
    pub kid: &'a Option<String>,
    pub payload: &'a str,
    pub topic: &'a str,
}

/// A job handed down: the ids beneath that the PING lists, and the relay
/// that sends their replies up, to run once the PING went out.
pub(super) struct HandedDown<'a> {
    pub minions: Vec<String>,
    pub relay: BoxFuture<'a, ()>,
}

impl HandedDown<'_> {
    /// Nobody beneath took the job.
    pub(super) fn nobody() -> Self {
        HandedDown {
            minions: Vec::new(),
            relay: Box::pin(std::future::ready(())),
        }
    }
}

/// Those beneath a syndic maid.
pub(super) trait Downstream: Send + Sync {
    /// Admission, without I/O: whom `job` targets beneath, never `own`
    /// (the syndic maid's own id, which its own grains decide).
    fn targeted(&self, job: &Job, own: &str) -> Targeted;

    /// Hand `down` to those beneath, before the PING: what it resolves to
    /// names whom the PING lists beneath, and relays their replies up.
    fn hand_down<'a>(
        &'a self,
        shared: &'a Shared,
        down: Down<'a>,
        targeted: Targeted,
    ) -> BoxFuture<'a, HandedDown<'a>>;

    /// Read who is beneath now (at start, and every [`Self::refresh_every`]).
    fn read_now<'a>(&'a self, _own: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    /// How often who is beneath changes enough to read it again.
    fn refresh_every(&self) -> Option<Duration> {
        None
    }

    /// Keep upstream, on `conn`, what a master must know of those beneath
    /// (before this maid registers, and at every heartbeat).
    fn mirror<'a>(&'a self, _shared: &'a Shared, _conn: &'a mut Conn) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// Read who is beneath every downstream now.
pub(super) async fn read_now(shared: &Shared) {
    futures_util::future::join_all(shared.beneath.iter().map(|d| d.read_now(&shared.id))).await;
}

/// Keep upstream, on `conn`, what a master must know of those beneath.
pub(super) async fn mirror(shared: &Shared, conn: &mut Conn) {
    for downstream in &shared.beneath {
        downstream.mirror(shared, conn).await;
    }
}

/// Keep who is beneath fresh, here and upstream, until the agent stops.
pub(super) async fn refresh(shared: Arc<Shared>) {
    let refreshing = shared.beneath.iter().filter_map(|downstream| {
        let every = downstream.refresh_every()?;
        let shared = &shared;
        Some(async move {
            loop {
                tokio::time::sleep(every).await;
                downstream.read_now(&shared.id).await;
                if let Some(mut conn) = shared.conn.conn() {
                    downstream.mirror(shared, &mut conn).await;
                }
            }
        })
    });
    futures_util::future::join_all(refreshing).await;
}

/// Whom a syndic maid's PING answers for (§3.1): itself when `own`, then
/// every id beneath that took the job, each once, in order.
pub(super) fn answers_for(id: &str, own: bool, beneath: &[Vec<String>]) -> Vec<String> {
    let mut listed = std::collections::HashSet::new();
    own.then_some(id)
        .into_iter()
        .chain(beneath.iter().flatten().map(String::as_str))
        .filter(|m| listed.insert(*m))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_job_for_someone_beneath_goes_down() {
        assert!(!Targeted::Ids(Vec::new()).any());
        assert!(Targeted::Ids(vec!["db1".into()]).any());
        assert!(Targeted::TheyDecide.any());
    }

    #[test]
    fn a_ping_lists_the_maid_then_those_beneath_each_once() {
        let beneath = [
            vec!["db1".to_string(), "db2".to_string()],
            vec!["db2".to_string(), "salt1".to_string()],
        ];
        assert_eq!(
            answers_for("syn", true, &beneath),
            ["syn", "db1", "db2", "salt1"]
        );
        assert_eq!(answers_for("syn", false, &beneath[..1]), ["db1", "db2"]);
        assert!(answers_for("syn", false, &[]).is_empty());
    }
}
