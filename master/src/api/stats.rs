//! `GET /stats`: what salt-api answers there, CherryPy's request statistics
//! (`cherrypy.lib.cpstats`, which salt-api's `collect_stats` turns on),
//! under the same names, kept for every request this API serves.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::HttpBody;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Value, json};

use super::{Api, ClientAddr};

/// How many finished requests `Requests` keeps beside those in flight, as
/// CherryPy keeps the last one of each of its 10 worker threads.
const RECENT: usize = 10;
/// A request that took longer than this many seconds is a slow query.
const SLOW_SECS: f64 = 1.0;
/// How many slow queries are kept, the newest.
const SLOW_KEPT: usize = 100;

/// The counters (`appstats`).
pub struct Stats {
    started: Instant,
    start_time: f64,
    inner: Mutex<Counters>,
}

#[derive(Default)]
struct Counters {
    current: u64,
    total: u64,
    bytes_read: u64,
    bytes_written: u64,
    total_time: f64,
    next_id: u64,
    /// Request records by arrival, in flight and the last few finished.
    requests: BTreeMap<u64, Value>,
    /// The records of the last slow requests, oldest first; none until
    /// one was slow.
    slow: Option<std::collections::VecDeque<Value>>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            started: Instant::now(),
            start_time: now(),
            inner: Mutex::default(),
        }
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Stats {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `record_start`: one more request, in flight.
    fn start(&self, request_line: String, client: String) -> u64 {
        let mut c = self.lock();
        c.current += 1;
        c.total += 1;
        let id = c.next_id;
        c.next_id += 1;
        c.requests.insert(
            id,
            json!({
                "Bytes Read": null,
                "Bytes Written": null,
                "Client": client,
                "End Time": null,
                "Processing Time": null,
                "Request-Line": request_line,
                "Response Status": null,
                "Start Time": now(),
            }),
        );
        id
    }

    /// `record_stop`: what it read and wrote (`chunked` for a stream),
    /// its status and time.
    fn stop(&self, id: u64, read: u64, written: Option<u64>, status: String, took: f64) {
        let mut c = self.lock();
        c.current = c.current.saturating_sub(1);
        c.bytes_read += read;
        c.bytes_written += written.unwrap_or(0);
        c.total_time += took;
        if let Some(record) = c.requests.get_mut(&id) {
            record["Bytes Read"] = json!(read);
            record["Bytes Written"] = written.map_or(json!("chunked"), |n| json!(n));
            record["Response Status"] = json!(status);
            record["End Time"] = json!(now());
            record["Processing Time"] = json!(took);
            if took > SLOW_SECS {
                let record = record.clone();
                let slow = c.slow.get_or_insert_default();
                slow.push_back(record);
                if slow.len() > SLOW_KEPT {
                    slow.pop_front();
                }
            }
        }
        // Forget the oldest finished records past the last few.
        let finished: Vec<u64> = c
            .requests
            .iter()
            .filter(|(_, r)| !r["End Time"].is_null())
            .map(|(id, _)| *id)
            .collect();
        for old in finished.iter().take(finished.len().saturating_sub(RECENT)) {
            c.requests.remove(old);
        }
    }

    /// `extrapolate_statistics(logging.statistics)`.
    fn report(&self) -> Value {
        let c = self.lock();
        let uptime = self.started.elapsed().as_secs_f64().max(f64::MIN_POSITIVE);
        let per_request = |n: u64| {
            if c.total == 0 {
                0.0
            } else {
                n as f64 / c.total as f64
            }
        };
        let requests: serde_json::Map<String, Value> = c
            .requests
            .iter()
            .map(|(id, r)| {
                let mut r = r.clone();
                if r["End Time"].is_null()
                    && let Some(start) = r["Start Time"].as_f64()
                {
                    r["Processing Time"] = json!(now() - start);
                }
                (id.to_string(), r)
            })
            .collect();
        let mut app = json!({
                "Enabled": true,
                "Bytes Read/Request": per_request(c.bytes_read),
                "Bytes Read/Second": c.bytes_read as f64 / uptime,
                "Bytes Written/Request": per_request(c.bytes_written),
                "Bytes Written/Second": c.bytes_written as f64 / uptime,
                "Current Time": now(),
                "Current Requests": c.current,
                "Requests/Second": c.total as f64 / uptime,
                "Server Version": env!("CARGO_PKG_VERSION"),
                "Start Time": self.start_time,
                "Total Bytes Read": c.bytes_read,
                "Total Bytes Written": c.bytes_written,
                "Total Requests": c.total,
                "Total Time": c.total_time,
                "Uptime": uptime,
                "Requests": requests,
        });
        if let Some(slow) = &c.slow {
            app["Slow Queries"] = json!(slow);
        }
        json!({"CherryPy Applications": app})
    }
}

/// Count every request: its line and client as it starts; its body's
/// declared size and its answer's (an answer of no known size is a
/// stream), status and time as it ends.
pub async fn count(State(api): State<Api>, request: Request, next: Next) -> Response {
    let line = format!(
        "{} {} {:?}",
        request.method(),
        request.uri().path_and_query().map_or("/", |p| p.as_str()),
        request.version()
    );
    let client = request
        .extensions()
        .get::<axum::extract::ConnectInfo<ClientAddr>>()
        .map(|info| info.0.0.to_string())
        .unwrap_or_default();
    let read = content_length(request.headers());
    let id = api.stats.start(line, client);
    let began = Instant::now();
    let response = next.run(request).await;
    let status = response.status();
    let status = format!(
        "{} {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or_default()
    );
    let written = content_length(response.headers()).or(response.body().size_hint().exact());
    api.stats.stop(
        id,
        read.unwrap_or(0),
        written,
        status,
        began.elapsed().as_secs_f64(),
    );
    response
}

fn content_length(headers: &axum::http::HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// `GET /stats`: the statistics, for any user logged in (or anyone, with
/// `[api] stats_disable_auth`, as salt-api's option).
pub async fn get(State(api): State<Api>) -> Json<Value> {
    Json(api.stats.report())
}
