//! What every master command (`maid run`, `maid cp`, `maid job`, `maid
//! maids`, `maid file push`, `maid keygen`, `maid key`, `maid acl`, `maid
//! plugin push`, `maid api`, `maid runner`) takes from its command line:
//! where Redis and the master topic are, which key signs, which keys
//! replies are verified against.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use maid_bus::Bus;
use maid_config::Config;

/// A command line Salt's option parser refuses after parsing it: the
/// binary says why and exits 64 (`EX_USAGE`), as Salt's tools do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub &'static str);

/// The log target of the warning a master that counts replies
/// unverified gives at every run (`MAID_LOG=maid::unverified=off` silences
/// it alone).
pub const UNVERIFIED_TARGET: &str = "maid::unverified";

/// Where Redis and the master topic are (master-side commands).
#[derive(Debug, Clone, Default, Args)]
pub struct MasterOpts {
    /// Configuration file (its [redis] table, master_topics and [master])
    /// [default: /etc/maid/maid.toml when it exists].
    #[arg(long, short = 'c', env = "MAID_CONFIG")]
    pub config: Option<PathBuf>,
    /// Redis URL (`redis://`, `rediss://`), overriding the config.
    #[arg(long, env = "MAID_REDIS")]
    pub redis: Option<String>,
    /// Master topic to publish on [default: the config's first, else `master`].
    #[arg(long)]
    pub master_topic: Option<String>,
    /// Private key that signs the job [default: the config's master.key].
    #[arg(long, env = "MAID_KEY")]
    pub key: Option<PathBuf>,
    /// The accepted maid keys (`maid key`) [default: the config's
    /// master.pki_dir]; with one, only replies their maid's key signed count.
    #[arg(long, env = "MAID_PKI_DIR")]
    pub pki_dir: Option<PathBuf>,
    /// `false`: count every reply without a key store, forged or not
    /// [default: the config's master.verify_replies]. A master that has
    /// neither a key store nor this said refuses to run.
    #[arg(long, env = "MAID_VERIFY_REPLIES", value_name = "BOOL")]
    pub verify_replies: Option<bool>,
}

/// The configuration a master command reads when none is named (`-c`,
/// `MAID_CONFIG`): the package's, as Salt's tools read `/etc/salt/master`.
pub const SYSTEM_CONFIG: &str = "/etc/maid/maid.toml";

/// The configuration at `given`, else at `system` when that exists, else
/// the defaults. A default file that exists and cannot be read or does
/// not validate is an error that names it: it is the operator's.
fn load_config(given: Option<&Path>, system: &Path) -> anyhow::Result<Config> {
    match given {
        Some(p) => Ok(Config::load(p)?),
        None if system.exists() => Config::load(system).with_context(|| {
            format!(
                "the default configuration {} (-c or MAID_CONFIG names another)",
                system.display()
            )
        }),
        None => Ok(Config::default()),
    }
}

impl MasterOpts {
    pub(super) fn config(&self) -> anyhow::Result<Config> {
        let mut config = load_config(self.config.as_deref(), Path::new(SYSTEM_CONFIG))?;
        if let Some(url) = &self.redis {
            config.redis = config.redis.with_url(url);
        }
        Ok(config)
    }

    pub(super) fn bus(&self) -> anyhow::Result<(Bus, Config)> {
        let config = self.config()?;
        Ok((Bus::new(&config.redis)?, config))
    }

    /// The master's private key file: `--key`, else the config's
    /// `master.key`.
    pub(super) fn key_path(&self, config: &Config) -> Option<PathBuf> {
        self.key.clone().or_else(|| config.master.key.clone())
    }

    pub(super) fn signing_key(
        &self,
        config: &Config,
    ) -> anyhow::Result<Option<ed25519_dalek::SigningKey>> {
        match self.key_path(config) {
            Some(path) => Ok(Some(maid_protocol::trust::read_signing_key(&path)?)),
            None => Ok(None),
        }
    }

    /// The master's key store: `--pki-dir`, else the config's
    /// `master.pki_dir`; none means replies are not verified.
    pub fn pki(&self, config: &Config) -> Option<maid_master::pki::Pki> {
        self.pki_dir
            .clone()
            .or_else(|| config.master.pki_dir.clone())
            .map(maid_master::pki::Pki::new)
    }

    /// The key store that replies are verified against, for a command
    /// that counts replies (`maid run`, `cp`, `job`, `runner`, `api`).
    /// Fail closed, as the agent is about `require_signed`: without a key
    /// store the master must have been told `verify_replies = false`, and
    /// says so at every run; told neither, it refuses.
    pub fn verified_pki(&self, config: &Config) -> anyhow::Result<Option<maid_master::pki::Pki>> {
        let verify = self.verify_replies.or(config.master.verify_replies);
        match (self.pki(config), verify) {
            // A key store verifies, whatever else was said.
            (Some(pki), _) => Ok(Some(pki)),
            (None, Some(false)) => {
                tracing::warn!(
                    target: UNVERIFIED_TARGET,
                    "replies are not verified (verify_replies = false): \
                     any Redis client can answer as any maid"
                );
                Ok(None)
            }
            (None, _) => anyhow::bail!(
                "replies cannot be verified: set [master] pki_dir (--pki-dir, MAID_PKI_DIR) \
                 to the maid keys `maid key` accepts, or verify_replies = false \
                 (--verify-replies false, MAID_VERIFY_REPLIES=false) to count every reply \
                 unverified"
            ),
        }
    }

    pub(super) fn topic(&self, config: &Config) -> String {
        self.master_topic
            .clone()
            .or_else(|| config.master_topics.first().cloned())
            .unwrap_or_else(|| "master".into())
    }
}

#[cfg(test)]
mod tests {
    use super::load_config;

    #[test]
    fn the_system_config_is_read_when_none_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let system = dir.path().join("maid.toml");
        let named = dir.path().join("named.toml");
        // No default file: the defaults.
        let config = load_config(None, &system).unwrap();
        assert!(config.master.pki_dir.is_none());
        std::fs::write(&system, "[master]\npki_dir = \"/srv/pki\"\n").unwrap();
        std::fs::write(&named, "[master]\npki_dir = \"/named/pki\"\n").unwrap();
        let config = load_config(None, &system).unwrap();
        assert_eq!(config.master.pki_dir.unwrap().to_str(), Some("/srv/pki"));
        // A named file wins.
        let config = load_config(Some(&named), &system).unwrap();
        assert_eq!(config.master.pki_dir.unwrap().to_str(), Some("/named/pki"));
        // A default file that does not validate is an error naming it.
        std::fs::write(&system, "[master]\nno_such_key = 1\n").unwrap();
        let err = format!("{:#}", load_config(None, &system).unwrap_err());
        assert!(err.contains("the default configuration"), "{err}");
        assert!(err.contains(system.to_str().unwrap()), "{err}");
    }
}
