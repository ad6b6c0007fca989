//! Collecting one job's replies, as a state machine with no I/O: replies
//! and the clock go in, decisions come out. [`crate::jobs::run_in`] drives
//! it over Redis for every master command and the API; the unit tests here
//! drive it by hand.
//!
//! Collection ends when every expected maid has answered (PING or reject)
//! and every targeted minion has returned or refused, or at the timeout —
//! unless, as Salt's master does, it asks the minions still to return
//! whether they run the job (`saltutil.find_job`) and waits another
//! timeout while one says it does. A reply counts only when it is this
//! job's and, on a master that keeps keys, signed by the key accepted for
//! its maid; a syndic maid answers only for the minions it listed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::jobs::{JobRequest, Report};
use crate::protocol::{Ping, Reply, Return};
use crate::registry::Registry;
use crate::replies::{AcceptedKeys, Received};

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Wait for a reply until this instant, then ask again.
    Wait(Instant),
    /// Publish `saltutil.find_job` for the job to `ids` (the targeted
    /// minions yet to return), then say so with [`Collector::asked`].
    Ask(BTreeSet<String>),
    /// Collection is over: linger for repeats, then [`Collector::finish`].
    Done,
}

/// A `saltutil.find_job` asked of the minions still to return.
struct FindJob {
    jid: String,
    asked: BTreeSet<String>,
    answered: BTreeSet<String>,
    running: BTreeSet<String>,
    until: Instant,
}

impl FindJob {
    /// Take in a genuine return of the find-job: a minion asked that
    /// returns the job's data (a non-empty object) still runs it; `{}`,
    /// or anything else (no `saltutil`, no `jobs` grant), says it does
    /// not.
    fn answer(&mut self, r: Return) {
        if !self.asked.contains(&r.id) {
            return;
        }
        self.answered.insert(r.id.clone());
        if r.ret.as_object().is_some_and(|o| !o.is_empty()) {
            self.running.insert(r.id);
        }
    }
}

/// One job's collection.
pub struct Collector<'r> {
    report: Report,
    /// How long to wait for returns before asking (and between asks).
    timeout: Duration,
    /// Salt's `gather_job_timeout`; `None`: never ask, end at the timeout.
    gather: Option<Duration>,
    /// Until when returns are waited for, unless a find-job runs.
    deadline: Instant,
    finding: Option<FindJob>,
    /// Expected maids that answered (PING or reject).
    pinged: BTreeSet<String>,
    /// Returns seen per minion id.
    counts: BTreeMap<String, usize>,
    /// The minions each syndic maid listed in its PING: the only ids other
    /// than its own it may return for.
    listed: BTreeMap<String, BTreeSet<String>>,
    /// Whom the job's target selects: whom it is published to.
    selected: BTreeSet<String>,
    /// Those of them that were not alive when it was published.
    down: BTreeSet<String>,
    /// The registry the job was published over: the maids a syndic maid
    /// cannot answer for, the syndic maids that may list minions, and the
    /// accepted keys, on a master that keeps keys.
    registry: &'r Registry,
    /// The key that signed the job: it opens returns sealed to it (§8).
    key: Option<ed25519_dalek::SigningKey>,
}

impl<'r> Collector<'r> {
    /// The collection of job `jid` of `req`, published at `now` to whom
    /// its target selects ([`Self::selected`]), expecting a PING from the
    /// maids `registry` holds alive (and accepted). Those it selects that
    /// are not alive are missed from the start: Salt's `[Not connected]`.
    pub fn new(jid: String, registry: &'r Registry, req: &JobRequest, now: Instant) -> Self {
        let expected = registry
            .expected(&|id| req.collect.exclude.contains(id))
            .map(|(id, _)| id.clone())
            .collect();
        let selected = registry.selected(req);
        let down = selected
            .iter()
            .filter(|id| !registry.alive(id))
            .cloned()
            .collect();
        Collector {
            report: Report {
                jid,
                expected,
                ..Default::default()
            },
            selected,
            down,
            timeout: req.collect.timeout,
            gather: req.collect.gather_job_timeout,
            deadline: now + req.collect.timeout,
            finding: None,
            pinged: BTreeSet::new(),
            counts: BTreeMap::new(),
            listed: BTreeMap::new(),
            registry,
            key: req.key.clone(),
        }
    }

    /// The job's id.
    pub fn jid(&self) -> &str {
        &self.report.jid
    }

    /// Whom the job's target selects, alive or not: the minions the job
    /// is published to, as Salt's master lists them.
    pub fn selected(&self) -> &BTreeSet<String> {
        &self.selected
    }

    /// What to do at `now`.
    pub fn next(&mut self, now: Instant) -> Step {
        if self.complete() {
            return Step::Done;
        }
        if let Some(f) = &self.finding
            && (now >= f.until || f.answered.is_superset(&f.asked))
        {
            // As Salt's master: while a minion says it runs the job, wait
            // another timeout; when none does, the job is over.
            if f.running.is_empty() {
                return Step::Done;
            }
            tracing::debug!(jid = %self.report.jid, running = ?f.running, "still running; waiting");
            self.deadline = now + self.timeout;
            self.finding = None;
        }
        if let Some(f) = &self.finding {
            return Step::Wait(f.until);
        }
        if now < self.deadline {
            return Step::Wait(self.deadline);
        }
        let missing = self.yet_to_return();
        match self.gather {
            Some(_) if !missing.is_empty() => Step::Ask(missing),
            _ => Step::Done,
        }
    }

    /// The driver published `saltutil.find_job` as job `find_jid` to `ids`
    /// at `now` ([`Step::Ask`]).
    pub fn asked(&mut self, find_jid: String, ids: BTreeSet<String>, now: Instant) {
        self.finding = Some(FindJob {
            jid: find_jid,
            asked: ids,
            answered: BTreeSet::new(),
            running: BTreeSet::new(),
            until: now + self.gather.unwrap_or_default(),
        });
    }

    /// Take in a reply; a minion's first return is handed back, for the
    /// caller to show as it comes.
    pub fn receive(&mut self, received: Received) -> Option<&Return> {
        let by_syndic = self.vouched_beneath(&received);
        if let Some(f) = &mut self.finding
            && received.reply.jid() == f.jid
        {
            if let Some(Reply::Return(r)) = counted(
                received,
                by_syndic,
                &f.jid,
                self.registry.accepted.as_ref(),
                self.key.as_ref(),
                &mut self.report.forged,
            ) {
                f.answer(r);
            }
            return None;
        }
        match self.of_job(received)? {
            Reply::Ping(p) => {
                self.pinged.insert(p.sub_ip.clone());
                self.ping(p);
                None
            }
            Reply::Reject(r) => {
                self.pinged.insert(r.sub_ip.clone());
                self.report.rejected.insert(r.sub_ip, r.reason);
                None
            }
            Reply::Return(r) => {
                if let Err(why) = vouched(&r, &self.listed, self.registry.accepted.as_ref()) {
                    tracing::warn!(jid = %r.jid, maid = %r.sub_ip, %why, "forged reply: not counted");
                    self.report.forged.insert(r.sub_ip, why.to_string());
                    return None;
                }
                let n = self.counts.entry(r.id.clone()).or_default();
                *n += 1;
                if *n == 1 {
                    self.report.returns.push(r);
                    self.report.returns.last()
                } else {
                    self.report.repeated.insert(r.id.clone(), *n);
                    None
                }
            }
        }
    }

    /// Take in a reply that came after collection ended: a late return is
    /// counted only when it repeats one.
    pub fn receive_late(&mut self, received: Received) {
        if let Some(Reply::Return(r)) = self.of_job(received)
            && vouched(&r, &self.listed, self.registry.accepted.as_ref()).is_ok()
        {
            let n = self.counts.entry(r.id.clone()).or_default();
            *n += 1;
            if *n > 1 {
                self.report.repeated.insert(r.id.clone(), *n);
            }
        }
    }

    /// The report: who was missed, who never returned.
    pub fn finish(mut self, elapsed: Duration) -> Report {
        let returned: BTreeSet<&String> = self.report.returns.iter().map(|r| &r.id).collect();
        self.report.missed_maids = self
            .report
            .expected
            .difference(&self.pinged)
            .chain(&self.down)
            .cloned()
            .collect();
        self.report.missed_minions = self
            .report
            .targeted
            .iter()
            .filter(|id| !returned.contains(id) && !self.report.rejected.contains_key(*id))
            .cloned()
            .collect();
        self.report.elapsed = elapsed;
        self.report
    }

    /// Every expected maid answered and every targeted minion returned or
    /// refused.
    fn complete(&self) -> bool {
        let r = &self.report;
        !r.expected.is_empty()
            && r.expected.is_subset(&self.pinged)
            && r.targeted
                .iter()
                .all(|t| self.counts.contains_key(t) || r.rejected.contains_key(t))
    }

    /// The targeted minions that neither returned nor refused.
    fn yet_to_return(&self) -> BTreeSet<String> {
        self.report
            .targeted
            .iter()
            .filter(|t| !self.counts.contains_key(*t) && !self.report.rejected.contains_key(*t))
            .cloned()
            .collect()
    }

    /// A PING: whom it says the job targets.
    fn ping(&mut self, p: Ping) {
        let report = &mut self.report;
        match p.minions {
            // Only a syndic maid may answer for others (PROTOCOL v1.2 §7):
            // anyone else's list is forged, and it stands for itself alone.
            Some(_) if !self.registry.syndics.contains(&p.sub_ip) => {
                let why = "listed minions beneath it, and is not an accepted syndic maid";
                tracing::warn!(jid = %p.jid, maid = %p.sub_ip, %why, "forged reply");
                report.forged.insert(p.sub_ip.clone(), why.into());
                if p.matched {
                    report.targeted.insert(p.sub_ip);
                } else {
                    report.empty.insert(p.sub_ip);
                }
            }
            // A syndic maid: each listed minion is targeted. It cannot
            // answer for a maid the master reaches itself.
            Some(mut minions) => {
                let sub_ip = p.sub_ip.clone();
                minions.retain(|m| {
                    let own = *m == sub_ip || !self.registry.maids.contains_key(m);
                    if !own {
                        let why = format!("listed {m:?}, a maid of the registry's own");
                        tracing::warn!(jid = %p.jid, maid = %sub_ip, %why, "forged reply");
                        report.forged.insert(sub_ip.clone(), why);
                    }
                    own
                });
                if minions.is_empty() {
                    report.empty.insert(p.sub_ip.clone());
                }
                report.targeted.extend(minions.iter().cloned());
                self.listed.entry(p.sub_ip).or_default().extend(minions);
            }
            None if p.matched => {
                report.targeted.insert(p.sub_ip);
            }
            // Selected by the master (a glob with commas, grains the
            // registry holds from before a change): Salt's master waits
            // for it and reports it did not return, whatever the minion
            // itself makes of the target.
            None if self.selected.contains(&p.sub_ip)
                && !self.registry.syndics.contains(&p.sub_ip) =>
            {
                report.targeted.insert(p.sub_ip);
            }
            None => {
                report.empty.insert(p.sub_ip);
            }
        }
    }

    /// `received`'s reply when it is this job's and genuine.
    fn of_job(&mut self, received: Received) -> Option<Reply> {
        if received.reply.jid() != self.report.jid {
            return None;
        }
        let by_syndic = self.vouched_beneath(&received);
        counted(
            received,
            by_syndic,
            &self.report.jid,
            self.registry.accepted.as_ref(),
            self.key.as_ref(),
            &mut self.report.forged,
        )
    }

    /// Whether `received` comes from a minion beneath a syndic maid that
    /// has no accepted key of its own, signed by the key its syndic maid
    /// listed for it ([`Registry::vouched`]), after that syndic maid listed
    /// it in its PING for this job: the syndic maid answers for it
    /// (PROTOCOL §7), as it does for a minion with no key at all.
    fn vouched_beneath(&self, received: &Received) -> bool {
        let maid = received.maid();
        let Some(accepted) = &self.registry.accepted else {
            return false;
        };
        if accepted.contains_key(maid) {
            return false;
        }
        let (Some(key), Some((syndic, _))) = (
            self.registry.vouched.get(maid),
            self.registry.beneath.get(maid),
        ) else {
            return false;
        };
        self.registry.syndics.contains(syndic)
            && self.listed.get(syndic).is_some_and(|l| l.contains(maid))
            && crate::wire_registry::verify_envelope(received.envelope.as_ref(), key, maid).is_ok()
    }
}

/// `received`'s reply when it counts: vouched for by its syndic maid
/// (`by_syndic`,
/// [`Collector::vouched_beneath`]), or [`genuine`].
fn counted(
    received: Received,
    by_syndic: bool,
    jid: &str,
    accepted: Option<&AcceptedKeys>,
    key: Option<&ed25519_dalek::SigningKey>,
    forged: &mut BTreeMap<String, String>,
) -> Option<Reply> {
    if !by_syndic {
        return genuine(received, jid, accepted, key, forged);
    }
    Some(match received.reply {
        Reply::Return(r) => Reply::Return(r.unsealed(key)),
        other => other,
    })
}

/// `received`'s reply when, with `accepted`, the key accepted for its maid
/// signed it; a forged one goes into `forged` (maid → why) and the log. A
/// return sealed to the master is opened with `key` (the key that signed
/// the job).
pub(crate) fn genuine(
    received: Received,
    jid: &str,
    accepted: Option<&AcceptedKeys>,
    key: Option<&ed25519_dalek::SigningKey>,
    forged: &mut BTreeMap<String, String>,
) -> Option<Reply> {
    if let Some(keys) = accepted
        && let Err(why) = received.verify(keys)
    {
        let maid = received.maid().to_string();
        tracing::warn!(%jid, %maid, %why, "forged reply: not counted");
        forged.insert(maid, why.to_string());
        return None;
    }
    Some(match received.reply {
        Reply::Return(r) => Reply::Return(r.unsealed(key)),
        other => other,
    })
}

/// Whether the maid that sent return `r` may answer for its minion: its
/// own id, or one it listed beneath it in its PING (`listed`) that has no
/// accepted key of its own (a minion with one signs its returns itself,
/// and a syndic maid relays them as signed).
fn vouched(
    r: &Return,
    listed: &BTreeMap<String, BTreeSet<String>>,
    accepted: Option<&AcceptedKeys>,
) -> Result<(), NotVouched> {
    if r.id == r.sub_ip {
        return Ok(());
    }
    if !listed.get(&r.sub_ip).is_some_and(|l| l.contains(&r.id)) {
        return Err(NotVouched::NotListed(r.id.clone()));
    }
    if accepted.is_some_and(|keys| keys.contains_key(&r.id)) {
        return Err(NotVouched::SignsItsOwn(r.id.clone()));
    }
    Ok(())
}

/// Why a maid may not answer for the minion a return names: the return is
/// forged.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum NotVouched {
    #[error("returned for {0:?}, which it did not list")]
    NotListed(String),
    #[error("returned for {0:?}, whose own accepted key must sign its returns")]
    SignsItsOwn(String),
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::SigningKey;
    use serde_json::{Value, json};

    use super::*;
    use crate::registry::Maids;
    use crate::replies::{receive, seal};

    const JID: &str = "20261127100000000000";
    const TIMEOUT: Duration = Duration::from_secs(5);

    fn request(gather: Option<Duration>) -> JobRequest {
        let mut req = JobRequest::to_all("test.ping");
        req.collect.timeout = TIMEOUT;
        req.collect.gather_job_timeout = gather;
        req
    }

    /// A registry of alive maids, `syndics` among them.
    fn registry(alive: &[&str], syndics: &[&str]) -> Registry {
        let maids: Maids = alive
            .iter()
            .map(|id| (id.to_string(), (true, None)))
            .collect();
        Registry {
            maids,
            beneath: Default::default(),
            syndics: syndics.iter().map(|s| s.to_string()).collect(),
            accepted: None,
            vouched: Default::default(),
            pillar: None,
        }
    }

    /// A collection of a job whose target is the glob `tgt`.
    fn collector_of<'r>(reg: &'r Registry, tgt: &str, now: Instant) -> Collector<'r> {
        let mut req = request(None);
        req.tgt = json!(tgt);
        Collector::new(JID.into(), reg, &req, now)
    }

    fn collector(reg: &Registry, gather: Option<Duration>, now: Instant) -> Collector<'_> {
        Collector::new(JID.into(), reg, &request(gather), now)
    }

    fn reply(v: Value) -> Received {
        receive(v.to_string().as_bytes()).unwrap()
    }

    fn ping(maid: &str, matched: bool) -> Received {
        reply(json!({"type": "ping", "sub_ip": maid, "jid": JID, "match": matched}))
    }

    fn syndic_ping(maid: &str, minions: &[&str]) -> Received {
        reply(
            json!({"type": "ping", "sub_ip": maid, "jid": JID, "match": true, "minions": minions}),
        )
    }

    fn ret_of(jid: &str, maid: &str, id: &str, ret: Value) -> Value {
        json!({
            "type": "return", "sub_ip": maid, "jid": jid, "id": id, "fun": "test.ping",
            "fun_args": [], "return": ret, "retcode": 0, "success": true, "out": "nested",
            "_stamp": "2026-11-27T10:00:00.000000", "ret_": {},
        })
    }

    fn ret(maid: &str, id: &str) -> Received {
        reply(ret_of(JID, maid, id, json!(true)))
    }

    fn ids(report_set: &BTreeSet<String>) -> Vec<&str> {
        report_set.iter().map(String::as_str).collect()
    }

    #[test]
    fn it_ends_when_every_maid_pinged_and_every_targeted_one_returned() {
        let t = Instant::now();
        let reg = registry(&["web1", "web2"], &[]);
        let mut c = collector(&reg, None, t);
        assert_eq!(c.next(t), Step::Wait(t + TIMEOUT));
        c.receive(ping("web1", true));
        c.receive(ping("web2", true));
        assert_eq!(
            c.receive(ret("web1", "web1")).map(|r| r.id.clone()),
            Some("web1".into())
        );
        assert_eq!(c.next(t), Step::Wait(t + TIMEOUT), "web2 has not returned");
        c.receive(ret("web2", "web2"));
        assert_eq!(c.next(t), Step::Done);
        let report = c.finish(Duration::ZERO);
        assert_eq!(report.returns.len(), 2);
        assert!(report.missed_maids.is_empty() && report.missed_minions.is_empty());
        assert_eq!(report.exit_code(), 0);
    }

    #[test]
    fn at_the_timeout_the_silent_maid_and_the_minion_that_never_returned_are_missed() {
        let t = Instant::now();
        let reg = registry(&["web1", "web2", "web3"], &[]);
        let mut c = collector(&reg, None, t);
        c.receive(ping("web1", true));
        c.receive(ping("web2", true));
        c.receive(ret("web1", "web1"));
        assert_eq!(
            c.next(t + TIMEOUT - Duration::from_millis(1)),
            Step::Wait(t + TIMEOUT)
        );
        assert_eq!(c.next(t + TIMEOUT), Step::Done);
        let report = c.finish(TIMEOUT);
        assert_eq!(ids(&report.missed_maids), ["web3"]);
        assert_eq!(ids(&report.missed_minions), ["web2"]);
        assert_eq!(report.exit_code(), 1);
    }

    #[test]
    fn a_selected_maid_that_is_down_is_missed_from_the_start_and_waited_for_by_nobody() {
        let t = Instant::now();
        let mut reg = registry(&["web1", "web2"], &[]);
        reg.maids.get_mut("web2").unwrap().0 = false;
        let mut c = collector(&reg, Some(Duration::from_secs(10)), t);
        assert_eq!(
            ids(c.selected()),
            ["web1", "web2"],
            "published to both, as Salt's master lists its accepted minions"
        );
        c.receive(ping("web1", true));
        c.receive(ret("web1", "web1"));
        assert_eq!(c.next(t), Step::Done, "nobody asks web2, which is down");
        let report = c.finish(Duration::ZERO);
        assert_eq!(ids(&report.missed_maids), ["web2"]);
        assert!(report.missed_minions.is_empty());
        assert_eq!(report.exit_code(), 1);
    }

    #[test]
    fn a_down_maid_the_target_does_not_select_is_not_missed() {
        let t = Instant::now();
        let mut reg = registry(&["web1", "db1"], &[]);
        reg.maids.get_mut("db1").unwrap().0 = false;
        let mut req = request(None);
        req.tgt = json!("web*");
        let mut c = Collector::new(JID.into(), &reg, &req, t);
        c.receive(ping("web1", true));
        c.receive(ret("web1", "web1"));
        assert_eq!(c.next(t), Step::Done);
        let report = c.finish(Duration::ZERO);
        assert!(report.missed_maids.is_empty(), "{report:?}");
        assert_eq!(report.exit_code(), 0);
    }

    #[test]
    fn empty_pings_and_rejects_complete_without_a_return() {
        let t = Instant::now();
        let reg = registry(&["web1", "db1"], &[]);
        let mut c = collector_of(&reg, "web*", t);
        c.receive(ping("db1", false));
        c.receive(reply(
            json!({"type": "reject", "sub_ip": "web1", "jid": JID, "reason": "unsigned"}),
        ));
        assert_eq!(c.next(t), Step::Done);
        let report = c.finish(Duration::ZERO);
        assert_eq!(ids(&report.empty), ["db1"]);
        assert_eq!(report.rejected["web1"], "unsigned");
        assert!(report.missed_minions.is_empty());
    }

    #[test]
    fn a_maid_the_master_selected_is_waited_for_even_when_it_says_it_is_not_targeted() {
        // Salt's master reads `web1,db1` as two globs; each minion's own
        // glob matches neither, and both are reported as not returned.
        let t = Instant::now();
        let reg = registry(&["web1", "db1"], &[]);
        let mut c = collector_of(&reg, "web1,db1", t);
        assert_eq!(ids(c.selected()), ["db1", "web1"]);
        c.receive(ping("db1", false));
        c.receive(ping("web1", false));
        assert_eq!(c.next(t), Step::Wait(t + TIMEOUT), "both are awaited");
        assert_eq!(c.next(t + TIMEOUT), Step::Done);
        let report = c.finish(TIMEOUT);
        assert_eq!(ids(&report.missed_minions), ["db1", "web1"]);
        assert!(report.empty.is_empty());
        assert_eq!(report.exit_code(), 1);
    }

    #[test]
    fn a_second_return_is_counted_as_repeated_even_late() {
        let t = Instant::now();
        let reg = registry(&["web1"], &[]);
        let mut c = collector(&reg, None, t);
        c.receive(ping("web1", true));
        assert!(c.receive(ret("web1", "web1")).is_some());
        assert!(c.receive(ret("web1", "web1")).is_none(), "shown once");
        c.receive_late(ret("web1", "web1"));
        let report = c.finish(Duration::ZERO);
        assert_eq!(report.returns.len(), 1);
        assert_eq!(report.repeated["web1"], 3);
    }

    #[test]
    fn replies_of_other_jobs_count_for_nothing() {
        let t = Instant::now();
        let reg = registry(&["web1"], &[]);
        let mut c = collector(&reg, None, t);
        c.receive(reply(
            json!({"type": "ping", "sub_ip": "web1", "jid": "other", "match": true}),
        ));
        assert!(
            c.receive(reply(ret_of("other", "web1", "web1", json!(true))))
                .is_none()
        );
        assert_eq!(c.next(t + TIMEOUT), Step::Done);
        assert_eq!(ids(&c.finish(TIMEOUT).missed_maids), ["web1"]);
    }

    #[test]
    fn at_the_timeout_it_asks_whether_the_job_still_runs_and_waits_while_it_does() {
        let gather = Duration::from_secs(2);
        let t = Instant::now();
        let reg = registry(&["web1", "web2"], &[]);
        let mut c = collector(&reg, Some(gather), t);
        c.receive(ping("web1", true));
        c.receive(ping("web2", true));
        c.receive(ret("web1", "web1"));
        let t1 = t + TIMEOUT;
        let Step::Ask(asked) = c.next(t1) else {
            panic!("no find_job")
        };
        assert_eq!(ids(&asked), ["web2"]);
        c.asked("find1".into(), asked, t1);
        assert_eq!(c.next(t1), Step::Wait(t1 + gather));
        // web2 still runs the job: another timeout from when it said so.
        c.receive(reply(ret_of(
            "find1",
            "web2",
            "web2",
            json!({"fun": "test.sleep"}),
        )));
        let t2 = t1 + Duration::from_millis(10);
        assert_eq!(c.next(t2), Step::Wait(t2 + TIMEOUT));
        // Asked again, it no longer does: the job is over.
        let t3 = t2 + TIMEOUT;
        let Step::Ask(asked) = c.next(t3) else {
            panic!("no second find_job")
        };
        c.asked("find2".into(), asked, t3);
        c.receive(reply(ret_of("find2", "web2", "web2", json!({}))));
        assert_eq!(c.next(t3), Step::Done);
        assert_eq!(ids(&c.finish(TIMEOUT).missed_minions), ["web2"]);
    }

    #[test]
    fn a_find_job_nobody_answers_ends_at_the_gather_timeout() {
        let gather = Duration::from_secs(2);
        let t = Instant::now();
        let reg = registry(&["web1"], &[]);
        let mut c = collector(&reg, Some(gather), t);
        c.receive(ping("web1", true));
        let Step::Ask(asked) = c.next(t + TIMEOUT) else {
            panic!("no find_job")
        };
        c.asked("find1".into(), asked, t + TIMEOUT);
        assert_eq!(c.next(t + TIMEOUT + gather), Step::Done);
    }

    #[test]
    fn a_syndic_maid_answers_for_the_minions_it_listed_and_no_registry_maid() {
        let t = Instant::now();
        let reg = registry(&["syn", "web1"], &["syn"]);
        let mut c = collector(&reg, None, t);
        c.receive(syndic_ping("syn", &["syn", "m1", "web1"]));
        assert_eq!(
            c.report.forged["syn"],
            "listed \"web1\", a maid of the registry's own"
        );
        c.receive(ping("web1", true));
        assert!(c.receive(ret("syn", "m1")).is_some());
        assert!(c.receive(ret("syn", "m2")).is_none(), "not listed");
        assert!(c.receive(ret("syn", "web1")).is_none(), "a maid of its own");
        let report = c.finish(Duration::ZERO);
        assert_eq!(ids(&report.targeted), ["m1", "syn", "web1"]);
        assert_eq!(
            report.forged["syn"],
            "returned for \"web1\", which it did not list"
        );
        assert_eq!(ids(&report.missed_minions), ["syn", "web1"]);
    }

    #[test]
    fn a_maid_that_is_no_syndic_listing_minions_stands_for_itself() {
        let t = Instant::now();
        let reg = registry(&["web1"], &[]);
        let mut c = collector(&reg, None, t);
        c.receive(syndic_ping("web1", &["web1", "m1"]));
        assert_eq!(ids(&c.report.targeted), ["web1"]);
        assert!(c.report.forged["web1"].contains("not an accepted syndic maid"));
        assert!(c.receive(ret("web1", "m1")).is_none(), "it listed nobody");
        let report = c.finish(Duration::ZERO);
        assert_eq!(
            report.forged["web1"],
            "returned for \"m1\", which it did not list"
        );
    }

    #[test]
    fn with_accepted_keys_only_replies_their_maids_signed_count() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let other = SigningKey::from_bytes(&[4; 32]);
        let t = Instant::now();
        let mut reg = registry(&["web1"], &[]);
        reg.accepted = Some([("web1".to_string(), key.verifying_key())].into());
        let mut c = collector(&reg, None, t);
        let signed = |v: Value, k: &SigningKey| receive(seal(v.to_string(), k).as_bytes()).unwrap();
        let p = json!({"type": "ping", "sub_ip": "web1", "jid": JID, "match": true});
        c.receive(signed(p.clone(), &other));
        assert_eq!(
            c.next(t),
            Step::Wait(t + TIMEOUT),
            "a forged PING is no PING"
        );
        c.receive(reply(p.clone()));
        assert_eq!(c.next(t), Step::Wait(t + TIMEOUT), "nor an unsigned one");
        c.receive(signed(p, &key));
        assert!(
            c.receive(signed(ret_of(JID, "web1", "web1", json!(true)), &key))
                .is_some()
        );
        assert_eq!(c.next(t), Step::Done);
        assert!(c.finish(Duration::ZERO).forged.contains_key("web1"));
    }

    #[test]
    fn a_minion_beneath_without_an_accepted_key_counts_signed_with_the_key_listed_for_it() {
        let syn = SigningKey::from_bytes(&[5; 32]);
        let leaf = SigningKey::from_bytes(&[6; 32]);
        let other = SigningKey::from_bytes(&[7; 32]);
        let t = Instant::now();
        let mut reg = registry(&["syn"], &["syn"]);
        let listed: crate::protocol::Registration = serde_json::from_value(json!({
            "id": "leaf", "version": "1", "master_topics": [], "functions": [],
            "grains": {}, "started_at": "", "last_seen": "",
        }))
        .unwrap();
        reg.beneath.insert("leaf".into(), ("syn".into(), listed));
        reg.accepted = Some([("syn".to_string(), syn.verifying_key())].into());
        reg.vouched = [("leaf".to_string(), leaf.verifying_key())].into();
        let signed = |v: Value, k: &SigningKey| receive(seal(v.to_string(), k).as_bytes()).unwrap();
        let ret = |k: &SigningKey| signed(ret_of(JID, "leaf", "leaf", json!(true)), k);
        let mut c = collector(&reg, None, t);
        assert!(
            c.receive(ret(&leaf)).is_none(),
            "its syndic maid has not listed it"
        );
        let p = json!({"type": "ping", "sub_ip": "syn", "jid": JID, "match": true,
            "minions": ["syn", "leaf"]});
        c.receive(signed(p, &syn));
        assert!(c.receive(ret(&other)).is_none(), "another key");
        assert!(
            c.receive(reply(ret_of(JID, "leaf", "leaf", json!(true))))
                .is_none(),
            "unsigned"
        );
        assert!(c.receive(ret(&leaf)).is_some());
        c.receive(signed(ret_of(JID, "syn", "syn", json!(true)), &syn));
        assert_eq!(c.next(t), Step::Done);
        let report = c.finish(Duration::ZERO);
        assert_eq!(ids(&report.targeted), ["leaf", "syn"]);
        assert_eq!(report.returns.len(), 2, "{report:?}");
        assert!(report.forged.contains_key("leaf"));
    }
}
