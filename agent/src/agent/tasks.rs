//! The agent's long-running tasks: Redis sessions one after another (each
//! subscribing and handing every message to [`super::message`]), the
//! outbox flusher, the registry heartbeat, hot reload of the plugin
//! directory and the background plugin sync.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{Notify, mpsc};

use super::backoff::Backoff;
use super::message::handle_message;
use super::{Shared, records};
use crate::bus::{Bus, BusError};
use crate::filestore::ConnSource;
use crate::runtime::Runtime;

/// One Redis session: connect, register, subscribe, serve until the
/// subscription ends. Says whether it got as far as subscribing.
pub(super) async fn session(
    bus: &Bus,
    shared: &Arc<Shared>,
    done: &mpsc::Sender<()>,
) -> (bool, BusError) {
    // Subscribe before registering: a master that sees this maid in the
    // registry must not publish into a gap.
    let pubsub = async {
        let mut conn = bus.connect().await?;
        let pubsub = bus.subscribe(&shared.config.master_topics).await?;
        // A syndic maid's list of who is beneath is upstream before the
        // registry says it is a syndic maid.
        super::downstream::mirror(shared, &mut conn).await;
        shared.register(&mut conn).await?;
        shared.conn.set(Some(conn));
        // Pushes made while this maid was away arrive now.
        shared.sync_now.notify_one();
        Ok(pubsub)
    };
    let pubsub = match pubsub.await {
        Ok(p) => p,
        Err(e) => return (false, e),
    };
    tracing::info!(
        id = %shared.id,
        redis = %bus.describe(),
        topics = ?shared.config.master_topics,
        "subscribed"
    );
    shared
        .metrics
        .redis_connected
        .store(true, Ordering::Relaxed);
    shared.flush.notify_one();
    let mut messages = pubsub.into_on_message();
    while let Some(msg) = messages.next().await {
        handle_message(
            shared,
            msg.get_channel_name(),
            msg.get_payload_bytes(),
            done,
        );
    }
    (true, BusError::Config("subscription closed".into()))
}

/// Redis sessions one after another, for as long as the agent runs:
/// reconnecting with backoff when one is lost.
pub(super) async fn serve(bus: Bus, shared: Arc<Shared>, done_tx: mpsc::Sender<()>) {
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5)).jittered();
    let mut reported = false;
    loop {
        let (subscribed, cause) = session(&bus, &shared, &done_tx).await;
        shared.conn.set(None);
        shared
            .metrics
            .redis_connected
            .store(false, Ordering::Relaxed);
        if subscribed {
            backoff.reset();
            reported = false;
            shared.metrics.redis_reconnects.inc();
        }
        // Say so once per outage, not once per retry.
        if !reported {
            tracing::warn!(%cause, "redis session lost; reconnecting");
            reported = true;
        }
        backoff.wait().await;
    }
}

/// Deliver buffered returns whenever a session is up.
pub(super) async fn flush_outbox(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            () = shared.flush.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        if shared.outbox.is_empty() && shared.config.agent.spill_file.is_none() {
            continue;
        }
        let Some(mut conn) = shared.conn.conn() else {
            continue;
        };
        let ttl = shared.config.agent.job_cache_ttl_secs;
        match shared.outbox.flush(&mut conn, ttl, &shared.metrics).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(returns = n, "delivered buffered returns"),
            Err(e) => tracing::warn!(cause = %e, "buffered returns wait for redis"),
        }
    }
}

pub(super) fn metrics_plugins(shared: &Shared) {
    let plugins = shared.runtime.plugins();
    shared.metrics.plugins_loaded.set(plugins.len() as i64);
    for p in plugins {
        let outcome = format!("{:?}", p.cache).to_lowercase();
        shared
            .metrics
            .plugin_cache
            .get_or_create(&crate::metrics::CacheOutcome { outcome })
            .inc();
    }
}

/// What the plugin directory holds: names, sizes and modification times.
fn fingerprint(
    dir: &std::path::Path,
) -> Vec<(std::path::PathBuf, u64, Option<std::time::SystemTime>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "wasm"))
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((e.path(), m.len(), m.modified().ok()))
        })
        .collect();
    out.sort();
    out
}

/// Reload plugins on SIGHUP (`reload`) and when the directory changes;
/// re-register so the registry's function list follows.
pub(super) async fn reload_plugins(
    shared: Arc<Shared>,
    dir: std::path::PathBuf,
    reload: Arc<Notify>,
) {
    let poll = shared.config.agent.plugin_poll_secs;
    let mut seen = fingerprint(&dir);
    loop {
        let forced = tokio::select! {
            () = reload.notified() => true,
            () = async {
                if poll == 0 {
                    std::future::pending::<()>().await
                }
                tokio::time::sleep(Duration::from_secs(poll)).await
            } => false,
        };
        let now = fingerprint(&dir);
        if !forced && now == seen {
            continue;
        }
        seen = now;
        let before = loaded(&shared.runtime);
        match shared.runtime.reload_dir(&dir).await {
            Ok(errors) => {
                tracing::info!(
                    plugins = shared.runtime.plugins().len(),
                    failed = errors.len(),
                    "plugins reloaded"
                );
                records::plugins_loaded(&shared, &before, "reload");
                for e in errors {
                    let path = match &e {
                        crate::runtime::LoadError::Invalid { path, .. }
                        | crate::runtime::LoadError::Io { path, .. } => path,
                    };
                    let module = path.file_stem().unwrap_or_default().to_string_lossy();
                    records::plugin_refused(&shared, &module, "reload", e.to_string());
                }
            }
            Err(e) => tracing::error!(cause = %e, "plugin reload failed"),
        }
        // Synced plugins are checked again, and take their place back from
        // a local plugin of the same name only where `replace_local` says.
        if let Some(sync) = &shared.sync {
            sync.load_installed(&shared.runtime, "reload").await;
        }
        shared.plugins_changed().await;
    }
}

/// Which plugin files are loaded, and which versions.
fn loaded(runtime: &Runtime) -> std::collections::HashSet<(std::path::PathBuf, String)> {
    runtime
        .plugins()
        .iter()
        .map(|p| (p.path.clone(), p.sha256.clone()))
        .collect()
}

/// Fetch pushed plugins whenever a Redis session starts and every
/// `sync.poll_secs`; `saltutil.sync_modules` does it on demand.
pub(super) async fn sync_task(shared: Arc<Shared>) {
    // Where signed jobs are required, only a sync job's pins install: a
    // fresh agent must not take whatever older push Redis holds.
    let Some(sync) = shared.sync.as_ref().filter(|s| s.syncs_unpinned()) else {
        return;
    };
    let poll = shared.config.sync.poll_secs;
    loop {
        tokio::select! {
            () = shared.sync_now.notified() => {}
            () = async {
                if poll == 0 {
                    std::future::pending::<()>().await
                }
                tokio::time::sleep(Duration::from_secs(poll)).await
            } => {}
        }
        match shared.sync_plugins(sync, "").await {
            Ok(r) if r.changed.is_empty() && r.refused.is_empty() => {}
            Ok(r) => tracing::info!(changed = ?r.changed, refused = ?r.refused, "plugins synced"),
            Err(e) => tracing::warn!(cause = %e, "plugin sync failed"),
        }
    }
}

pub(super) async fn heartbeat(shared: Arc<Shared>) {
    let period = Duration::from_secs(shared.config.agent.heartbeat_secs);
    loop {
        // Also at once when the grains change, so targeting sees them.
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            () = shared.grains.changed() => {}
        }
        if let Some(mut conn) = shared.conn.conn()
            && let Err(e) = shared.register(&mut conn).await
        {
            tracing::warn!(cause = %e, "heartbeat failed");
        }
    }
}
