//! The tokio runtime each command runs on, chosen by the command: a
//! one-shot command runs on one thread, where it starts fastest; the agent
//! on as many worker threads as its `[agent] workers` says (one by
//! default: on one thread a job crosses no thread, which saved a third of
//! its CPU in the bench), with blocking threads beside them for file
//! system calls.

/// A single-threaded tokio runtime: one command at a time needs no more,
/// and it starts fastest.
pub fn block_on<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(rt.block_on(f))
}

/// A runtime with `workers` worker threads, for a long-running daemon
/// (`maid agent`).
pub fn block_on_workers<F: std::future::Future>(workers: usize, f: F) -> anyhow::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
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
