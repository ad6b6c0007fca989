//! The tokio runtime each command runs on, chosen by the command: a
//! one-shot command runs on one thread, where it starts fastest; the agent
//! on as many worker threads as its `[agent] workers` says (one by
//! default: on one thread a job crosses no thread, which saved a third of
//! its CPU in the bench), with blocking threads beside them for file
//! system calls.
//!
//! One worker is tokio's current-thread scheduler, not the multi-thread
//! one with a single worker: that one runs a task another task woke
//! next (its "LIFO slot"), so the connection's task wrote each PING and
//! each return the moment a job queued it, one `writev` each (1.6 a job
//! at 64 in flight). The current-thread scheduler runs woken tasks in
//! the order they were woken, so the jobs that arrived together queue
//! their PINGs (and later their returns) before the connection's task
//! writes them all at once (0.1 `writev` a job), a tenth less CPU a job.
//! A job's PING still goes out before its work: the job queues it, then
//! goes behind the connection's task (`agent::Requeue`).

/// A single-threaded tokio runtime: one command at a time needs no more,
/// and it starts fastest.
pub fn block_on<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(rt.block_on(f))
}

/// A runtime with `workers` worker threads, for a long-running daemon
/// (`maid agent`): one is the current-thread scheduler (above).
pub fn block_on_workers<F: std::future::Future>(workers: usize, f: F) -> anyhow::Result<F::Output> {
    if workers <= 1 {
        return block_on(f);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    Ok(rt.block_on(f))
}

/// Until SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
    }
}
