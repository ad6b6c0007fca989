//! Who may do what through the API, as Salt's `external_auth` says it:
//! each user (and each group, written `name%`) has a list whose entries
//! are a function regex allowed on every minion, a one-entry table of a
//! target (a compound expression) to the function regexes allowed there,
//! or one of `@runner`, `@wheel`, `@jobs` (and maid's `@audit`: reading
//! the audit trail). A user with no entry cannot log
//! in, as with Salt.
//!
//! A chunk is allowed when one entry allows its function and, for a
//! targeted entry, every known minion the chunk targets is one the entry's
//! target matches (Salt's `CkMinions.auth_check` and `validate_tgt`). The
//! minions known are the registry's.

use std::collections::BTreeMap;

use serde_json::Value;

use maid_config::perms::fun_regex;
pub use maid_config::perms::{AUDIT, JOBS, PermEntry, PermError, validate};

use crate::jobs::{Registry, Targets};
use crate::target::TargetType;

/// Everyone's permissions and the groups they take from.
#[derive(Debug, Clone, Default)]
pub struct Perms {
    perms: BTreeMap<String, Vec<PermEntry>>,
    groups: BTreeMap<String, Vec<String>>,
}

impl Perms {
    pub fn new(
        perms: BTreeMap<String, Vec<PermEntry>>,
        groups: BTreeMap<String, Vec<String>>,
    ) -> Result<Self, PermError> {
        validate(&perms)?;
        Ok(Self { perms, groups })
    }

    /// `user`'s list: their own entries, then each of their groups'.
    pub fn of(&self, user: &str) -> Vec<PermEntry> {
        let mut out = self.perms.get(user).cloned().unwrap_or_default();
        for (group, members) in &self.groups {
            if members.iter().any(|m| m == user)
                && let Some(entries) = self.perms.get(&format!("{group}%"))
            {
                out.extend(entries.iter().cloned());
            }
        }
        out
    }
}

/// Whether `entries` hold `special` (`@jobs`, ...).
pub fn has(entries: &[PermEntry], special: &str) -> bool {
    entries
        .iter()
        .any(|e| matches!(e, PermEntry::Fun(f) if f == special))
}

/// Whether `entries` allow the master function `fun` of `form` (`runner`
/// or `wheel`), as Salt's `CkMinions.spec_check`: `@runner` (or
/// `@runners`) allows every runner, `@jobs` every function of the `jobs`
/// module, and a table `{"@runner": [regexes]}` or `{"@jobs": [regexes]}`
/// the functions its regexes match (the whole name, or the function
/// within its module).
pub fn spec_allows(entries: &[PermEntry], fun: &str, form: &str) -> bool {
    let Some((module, name)) = fun.split_once('.') else {
        return false;
    };
    let plural = format!("{form}s");
    entries.iter().any(|entry| match entry {
        PermEntry::Fun(f) => f
            .strip_prefix('@')
            .is_some_and(|s| s == module || s == form || s == plural),
        PermEntry::Targeted(table) => table.iter().any(|(key, funs)| {
            let Some(spec) = key.strip_prefix('@') else {
                return false;
            };
            (spec == module && fun_allowed(funs, name))
                || ((spec == form || spec == plural) && fun_allowed(funs, fun))
        }),
    })
}

fn fun_allowed(patterns: &[String], fun: &str) -> bool {
    patterns
        .iter()
        .any(|p| !p.starts_with('@') && fun_regex(p).is_ok_and(|r| r.is_match_at_start(fun)))
}

/// Whether `entries` allow running `fun` on `targeted`: whom the job can
/// reach, resolved by [`Registry::targets`] — the function the master
/// uses to decide whom to publish to and expect, so a user is checked
/// against exactly the maids and the minions beneath syndic maids the job
/// reaches. A targeted entry allows it when its own target, resolved the
/// same way over the same reading, holds every one of them; a job that
/// reaches a syndic maid listing nobody beneath it (over a Salt master:
/// anyone may be there) is allowed only by an entry for every minion (a
/// plain function, or the target `*`).
/// (Salt's `auth_check` resolves the target with `:` whatever the job's
/// delimiter, so a grain target written for another delimiter selects no
/// one there and passes any targeted permission; maid resolves it as the
/// maids will.)
pub fn allows(entries: &[PermEntry], fun: &str, targeted: &Targets, registry: &Registry) -> bool {
    entries.iter().any(|entry| match entry {
        PermEntry::Fun(f) => fun_allowed(std::slice::from_ref(f), fun),
        PermEntry::Targeted(table) => table.iter().any(|(allowed, funs)| {
            if !fun_allowed(funs, fun) {
                return false;
            }
            if allowed == "*" {
                return true;
            }
            if !targeted.opaque.is_empty() {
                return false;
            }
            let allowed =
                registry.targets(&Value::String(allowed.clone()), "compound", None, &|_| {
                    false
                });
            targeted.ids.is_subset(&allowed.ids)
        }),
    })
}

/// The function whose permission on every minion lets a user target by
/// pillar: the one that answers a minion's whole pillar.
pub const PILLAR_READ: &str = "pillar.items";

/// Whether `entries` let their user read the pillar of every minion,
/// known now or later: an entry allowing [`PILLAR_READ`] with no target,
/// or with the target `*`. Only such a user may target by pillar (`-I`,
/// `-J`, `I@`, `J@`): whom such a target selects answers, minion by
/// minion, whether a pillar value matches a pattern, and a pattern can be
/// narrowed a character at a time. Decided from the permissions alone —
/// never from the registry or the pillar — so the refusal is the same
/// whatever the pillar holds.
pub fn reads_every_pillar(entries: &[PermEntry]) -> bool {
    entries.iter().any(|entry| match entry {
        PermEntry::Fun(f) => fun_allowed(std::slice::from_ref(f), PILLAR_READ),
        PermEntry::Targeted(table) => table
            .iter()
            .any(|(target, funs)| target == "*" && fun_allowed(funs, PILLAR_READ)),
    })
}

/// Whom `tgt` of type `tgt_type` reaches over `registry`, as a job to it
/// would ([`Registry::targets`]).
pub fn reach(
    registry: &Registry,
    tgt: &Value,
    tgt_type: TargetType,
    delimiter: Option<&str>,
) -> Targets {
    registry.targets(tgt, tgt_type.name(), delimiter, &|_| false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn master_functions_are_allowed_as_salts_spec_check() {
        let e = entries(json!(["@wheel", {"@jobs": ["lookup_.*"]}]));
        assert!(spec_allows(&e, "key.list_all", "wheel"));
        assert!(!spec_allows(&e, "key.list_all", "runner"));
        assert!(spec_allows(&e, "jobs.lookup_jid", "runner"));
        assert!(!spec_allows(&e, "jobs.list_jobs", "runner"));
        assert!(!spec_allows(&e, "manage.up", "runner"));
        let e = entries(json!(["@runners", "@manage"]));
        assert!(spec_allows(&e, "jobs.list_jobs", "runner"));
        assert!(spec_allows(&e, "manage.up", "wheel"));
        assert!(!spec_allows(&e, "key.accept", "wheel"));
        assert!(!spec_allows(&e, "nodot", "runner"));
        let e = entries(json!([{"@runner": ["jobs\\.list_.*"]}, ".*"]));
        assert!(spec_allows(&e, "jobs.list_jobs", "runner"));
        assert!(!spec_allows(&e, "manage.up", "runner"));
    }

    fn registration(id: &str, syndic: bool) -> crate::protocol::Registration {
        serde_json::from_value(json!({
            "id": id, "version": "1", "master_topics": [], "functions": [],
            "grains": {"role": if id.starts_with("web") { "web" } else { "db" }},
            "started_at": "x", "last_seen": "x", "syndic": syndic}))
        .unwrap()
    }

    fn known() -> Registry {
        let maids = ["web1", "web2", "db1"]
            .into_iter()
            .map(|id| (id.to_string(), (true, Some(registration(id, false)))))
            .collect();
        Registry {
            maids,
            ..Default::default()
        }
    }

    /// [`allows`] for `tgt` as a job to it reaches over `registry`.
    fn allowed(
        e: &[PermEntry],
        fun: &str,
        tgt: &Value,
        tgt_type: TargetType,
        delimiter: Option<&str>,
        registry: &Registry,
    ) -> bool {
        allows(e, fun, &reach(registry, tgt, tgt_type, delimiter), registry)
    }

    fn entries(v: Value) -> Vec<PermEntry> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn functions_match_as_salts_re_match() {
        let e = entries(json!(["test.*", "grains.items"]));
        let (k, all) = (known(), json!("*"));
        assert!(allowed(&e, "test.ping", &all, TargetType::Glob, None, &k));
        assert!(allowed(
            &e,
            "grains.items",
            &all,
            TargetType::Glob,
            None,
            &k
        ));
        assert!(!allowed(&e, "cmd.run", &all, TargetType::Glob, None, &k));
        // Anchored at the start only, as re.match is.
        assert!(allowed(
            &e,
            "grains.items_extra",
            &all,
            TargetType::Glob,
            None,
            &k
        ));
        assert!(!allowed(&e, "xtest.ping", &all, TargetType::Glob, None, &k));
    }

    #[test]
    fn a_targeted_entry_allows_only_jobs_within_its_minions() {
        let e = entries(json!([{"web*": ["cmd.*"]}, {"G@role:db": ["test.ping"]}]));
        let k = known();
        assert!(allowed(
            &e,
            "cmd.run",
            &json!("web1"),
            TargetType::Glob,
            None,
            &k
        ));
        assert!(allowed(
            &e,
            "cmd.run",
            &json!("web*"),
            TargetType::Glob,
            None,
            &k
        ));
        assert!(allowed(
            &e,
            "cmd.run",
            &json!("role:web"),
            TargetType::Grain,
            None,
            &k
        ));
        assert!(!allowed(
            &e,
            "cmd.run",
            &json!("*"),
            TargetType::Glob,
            None,
            &k
        ));
        assert!(!allowed(
            &e,
            "cmd.run",
            &json!("db1"),
            TargetType::Glob,
            None,
            &k
        ));
        assert!(allowed(
            &e,
            "test.ping",
            &json!("db1"),
            TargetType::Glob,
            None,
            &k
        ));
        assert!(!allowed(
            &e,
            "test.ping",
            &json!("web1"),
            TargetType::Glob,
            None,
            &k
        ));
    }

    /// A grain target for another delimiter is resolved with it: it may
    /// not pass a targeted entry by selecting no one under `:`.
    #[test]
    fn a_delimited_target_is_checked_on_whom_it_selects() {
        let e = entries(json!([{"web1": ["cmd.*"]}, {"G@role:db": ["test.ping"]}]));
        let (k, tgt) = (known(), json!("role;web"));
        // web1 and web2 have role web: web2 is not web1's.
        assert!(!allowed(
            &e,
            "cmd.run",
            &tgt,
            TargetType::Grain,
            Some(";"),
            &k
        ));
        assert!(allowed(
            &e,
            "test.ping",
            &json!("role;db"),
            TargetType::Grain,
            Some(";"),
            &k
        ));
        // Read with `:`, as Salt's check reads it, it selects no one and
        // would pass.
        assert!(allowed(&e, "cmd.run", &tgt, TargetType::Grain, None, &k));
    }

    /// Minions beneath a syndic maid are checked as the job reaches them:
    /// a user limited to the syndic maid cannot reach its minions by any
    /// target, and a syndic maid over a Salt master (listing nobody) is
    /// reachable only with an entry for every minion.
    #[test]
    fn minions_beneath_syndic_maids_are_checked_as_the_job_reaches_them() {
        let mut k = known();
        k.maids
            .insert("sig-1".into(), (true, Some(registration("sig-1", true))));
        k.syndics.insert("sig-1".into());
        k.beneath.insert(
            "leaf-1".into(),
            ("sig-1".into(), registration("leaf-1", false)),
        );
        let e = entries(json!([{"sig-1": ["cmd.*"]}]));
        assert!(allowed(
            &e,
            "cmd.run",
            &json!("sig-1"),
            TargetType::Glob,
            None,
            &k
        ));
        for (tgt, t) in [
            (json!("leaf-*"), TargetType::Glob),
            (json!("sig-1,leaf-1"), TargetType::List),
            (json!("sig-1 or leaf-1"), TargetType::Compound),
            (json!("*"), TargetType::Glob),
        ] {
            assert!(!allowed(&e, "cmd.run", &tgt, t, None, &k), "{tgt}");
        }
        let e = entries(json!([{"sig-1 or leaf-1": ["cmd.*"]}]));
        assert!(allowed(
            &e,
            "cmd.run",
            &json!("leaf-*"),
            TargetType::Glob,
            None,
            &k
        ));
        // Over a Salt master: nobody listed, anyone may be beneath.
        k.beneath.clear();
        let e = entries(json!([{"sig-1": ["cmd.*"]}, {"*": ["test.*"]}]));
        assert!(!allowed(
            &e,
            "cmd.run",
            &json!("sig-1"),
            TargetType::Glob,
            None,
            &k
        ));
        assert!(allowed(
            &e,
            "test.ping",
            &json!("*"),
            TargetType::Glob,
            None,
            &k
        ));
        let e = entries(json!(["cmd.*"]));
        assert!(allowed(
            &e,
            "cmd.run",
            &json!("sig-1"),
            TargetType::Glob,
            None,
            &k
        ));
    }

    #[test]
    fn groups_add_their_entries_and_mistakes_are_refused_at_start() {
        let perms: BTreeMap<String, Vec<PermEntry>> = serde_json::from_value(json!({
            "ann": ["test.*"], "ops%": [".*", "@jobs"]}))
        .unwrap();
        let groups = BTreeMap::from([("ops".to_string(), vec!["bob".to_string()])]);
        let p = Perms::new(perms, groups).unwrap();
        assert!(!has(&p.of("ann"), JOBS));
        assert!(has(&p.of("bob"), JOBS));
        assert!(p.of("nobody").is_empty());
        for bad in [
            json!({"x": ["("]}),
            json!({"x": ["@no pe"]}),
            json!({"x": [{"@runner": ["("]}]}),
            json!({"x": [{"a": ["x"], "b": ["y"]}]}),
            json!({"x": [{"web1 and": ["x"]}]}),
        ] {
            let perms: BTreeMap<String, Vec<PermEntry>> =
                serde_json::from_value(bad.clone()).unwrap();
            assert!(validate(&perms).is_err(), "{bad}");
        }
    }
}
