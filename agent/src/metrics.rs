//! What the agent counts, in Prometheus form, and the optional HTTP
//! listener that serves it with a health check.
//!
//! Function labels are bounded: a `fun` the loaded plugins do not provide
//! is counted as `unknown`, so a flood of made-up names cannot grow the
//! registry.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A metric per function.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Fun {
    pub fun: String,
}

/// A metric per rejection reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Reason {
    pub reason: String,
}

/// A metric per cache outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheOutcome {
    pub outcome: String,
}

fn duration_histogram() -> Histogram {
    // 100 µs to ~100 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 21))
}

/// The agent's metrics.
pub struct Metrics {
    registry: Registry,
    pub jobs_received: Family<Fun, Counter>,
    pub jobs_run: Family<Fun, Counter>,
    pub jobs_rejected: Family<Reason, Counter>,
    pub jobs_busy: Family<Fun, Counter>,
    pub job_duration: Family<Fun, Histogram, fn() -> Histogram>,
    /// From a message's arrival to its PING being published.
    pub ping_latency: Histogram,
    pub redis_reconnects: Counter,
    /// Returns waiting for Redis (memory and spill file).
    pub buffered_returns: Gauge,
    /// Returns lost because the buffer was full.
    pub returns_dropped: Counter,
    pub plugin_cache: Family<CacheOutcome, Counter>,
    pub plugins_loaded: Gauge,
    /// Whether a Redis session is up (for /healthz).
    pub redis_connected: AtomicBool,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("maid");
        let m = Self {
            jobs_received: Family::default(),
            jobs_run: Family::default(),
            jobs_rejected: Family::default(),
            jobs_busy: Family::default(),
            job_duration: Family::new_with_constructor(duration_histogram),
            ping_latency: Histogram::new(exponential_buckets(0.00001, 2.0, 20)),
            redis_reconnects: Counter::default(),
            buffered_returns: Gauge::default(),
            returns_dropped: Counter::default(),
            plugin_cache: Family::default(),
            plugins_loaded: Gauge::default(),
            redis_connected: AtomicBool::new(false),
            registry: Registry::default(),
        };
        registry.register(
            "jobs_received",
            "Jobs received, by function",
            m.jobs_received.clone(),
        );
        registry.register("jobs_run", "Jobs run, by function", m.jobs_run.clone());
        registry.register(
            "jobs_rejected",
            "Jobs rejected, by reason",
            m.jobs_rejected.clone(),
        );
        registry.register(
            "jobs_busy",
            "Jobs answered busy because the queue was full, by function",
            m.jobs_busy.clone(),
        );
        registry.register(
            "job_duration_seconds",
            "Time a job's function took, by function",
            m.job_duration.clone(),
        );
        registry.register(
            "ping_latency_seconds",
            "From a job's arrival to its PING being published",
            m.ping_latency.clone(),
        );
        registry.register(
            "redis_reconnects",
            "Redis sessions reopened",
            m.redis_reconnects.clone(),
        );
        registry.register(
            "buffered_returns",
            "Returns waiting for Redis to come back",
            m.buffered_returns.clone(),
        );
        registry.register(
            "returns_dropped",
            "Returns lost because the return buffer was full",
            m.returns_dropped.clone(),
        );
        registry.register(
            "plugin_cache",
            "Compiled-plugin cache lookups, by outcome",
            m.plugin_cache.clone(),
        );
        registry.register("plugins_loaded", "Plugins loaded", m.plugins_loaded.clone());
        Self { registry, ..m }
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    pub fn fun(name: &str) -> Fun {
        Fun { fun: name.into() }
    }
}

/// Serve `/healthz` and `/metrics` on `addr` until the task is dropped.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    use axum::http::StatusCode;
    use axum::routing::get;
    let health = {
        let m = metrics.clone();
        move || {
            let m = m.clone();
            async move {
                let redis = m.redis_connected.load(Ordering::Relaxed);
                let plugins = m.plugins_loaded.get();
                let body = serde_json::json!({"redis_connected": redis, "plugins_loaded": plugins});
                let code = if redis && plugins > 0 {
                    StatusCode::OK
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                (code, axum::Json(body))
            }
        }
    };
    let metrics_route = {
        let m = metrics.clone();
        move || {
            let m = m.clone();
            async move {
                (
                    [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                    m.encode(),
                )
            }
        }
    };
    let app = axum::Router::new()
        .route("/healthz", get(health))
        .route("/metrics", get(metrics_route));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /healthz and /metrics");
    axum::serve(listener, app).await
}
