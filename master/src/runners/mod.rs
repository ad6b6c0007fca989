//! The runners the master runs itself, with Salt's names, arguments and
//! return shapes, for salt-api's `runner` client and `maid runner`:
//! [`jobs`] over the job cache, [`manage`] over the fleet. Their arguments
//! are bound by [`crate::binding`].

pub mod jobs;
pub mod manage;

/// The minion function a runner asks of every minion it targets, for the
/// runners that publish a job (the caller runs it): `manage.status`, `up`
/// and `down` ping, `manage.versions` asks `test.version`, `jobs.active`
/// `saltutil.running`. `None` for the rest, which only read Redis.
pub fn asks(fun: &str) -> Option<&'static str> {
    match fun {
        "manage.status" | "manage.up" | "manage.down" => Some("test.ping"),
        "manage.versions" => Some("test.version"),
        "jobs.active" => Some("saltutil.running"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_runners_that_ask_the_minions_publish() {
        assert_eq!(super::asks("manage.status"), Some("test.ping"));
        assert_eq!(super::asks("manage.versions"), Some("test.version"));
        assert_eq!(super::asks("jobs.active"), Some("saltutil.running"));
        for reads in ["manage.present", "manage.not_alived", "jobs.list_jobs"] {
            assert_eq!(super::asks(reads), None, "{reads}");
        }
    }
}
