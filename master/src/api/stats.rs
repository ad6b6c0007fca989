//! `GET /stats`: what salt-api answers there, CherryPy's request statistics
//! (`cherrypy.lib.cpstats`, which salt-api's `collect_stats` turns on),
//! under the same names, kept for every request this API serves.
//!
//! A request is recorded by its route, never by what the client typed:
//! CherryPy's `Request-Line` would show `GET /events?token=…` and `GET
//! /ws/<token>` to everyone who may read the statistics. Here the line is
//! the method, the route's pattern (`/ws/{token}`, `/jobs/{jid}`), `?…`
//! where there was a query, and the version ([`request_line`]): no token,
//! password, path or query value of anyone's request is kept.

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
    let line = request_line(&request);
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

/// The routes, as patterns: what a request line shows of the path.
/// Keep in step with `super::router`; a path none of them matches is shown
/// as [`UNKNOWN`], whatever it holds.
const ROUTES: [&str; 19] = [
    "/",
    "/login",
    "/logout",
    "/token",
    "/run",
    "/jobs",
    "/jobs/{jid}",
    "/minions",
    "/minions/{id}",
    "/keys",
    "/keys/{mid}",
    "/events",
    "/audit",
    "/ws",
    "/ws/{token}",
    "/hook",
    "/hook/{path}",
    "/stats",
    "/openapi.json",
];

/// What a path that is no route is shown as.
const UNKNOWN: &str = "/{unknown}";

/// The pattern of the route `path` takes: its literal segments as they
/// are, each parameter by its name (`/hook/{path}` for every depth).
fn route(path: &str) -> &'static str {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    ROUTES
        .iter()
        .find(|pattern| {
            let want: Vec<&str> = pattern.split('/').skip(1).collect();
            let tail = **pattern == "/hook/{path}";
            let lengths = if tail {
                segments.len() >= want.len()
            } else {
                segments.len() == want.len()
            };
            lengths
                && want
                    .iter()
                    .zip(&segments)
                    .all(|(w, s)| (w.starts_with('{') && !s.is_empty()) || w == s)
        })
        .copied()
        .unwrap_or(UNKNOWN)
}

/// CherryPy's `Request-Line` with nothing the client chose in it but its
/// method (one of HTTP's, else `OTHER`): the route's pattern, `?…` for a
/// query (`/events?token=` and `salt_token=` carry tokens), the version.
fn request_line(request: &Request) -> String {
    use axum::http::Method;
    let method = request.method();
    let known = [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::HEAD,
        Method::OPTIONS,
        Method::PATCH,
        Method::TRACE,
        Method::CONNECT,
    ];
    let method = if known.contains(method) {
        method.as_str()
    } else {
        "OTHER"
    };
    let query = if request.uri().query().is_some() {
        "?…"
    } else {
        ""
    };
    format!(
        "{method} {}{query} {:?}",
        route(request.uri().path()),
        request.version()
    )
}

fn content_length(headers: &axum::http::HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// `GET /stats`: the statistics, for any user logged in (or anyone, with
/// `[api] stats_disable_auth`, as salt-api's option: what they show holds
/// no credential either way).
pub async fn get(State(api): State<Api>) -> Json<Value> {
    Json(api.stats.report())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(method: &str, uri: &str) -> String {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .body(axum::body::Body::empty())
            .unwrap();
        request_line(&request)
    }

    #[test]
    fn request_lines_show_routes_never_what_the_client_sent() {
        let token = "0123456789abcdef0123456789abcdef0123456789abcdef";
        assert_eq!(
            line("GET", &format!("/events?token={token}")),
            "GET /events?… HTTP/1.1"
        );
        assert_eq!(
            line("GET", &format!("/events?salt_token={token}&x=1")),
            "GET /events?… HTTP/1.1"
        );
        assert_eq!(
            line("GET", &format!("/ws/{token}")),
            "GET /ws/{token} HTTP/1.1"
        );
        assert_eq!(
            line("GET", &format!("/events/{token}")),
            "GET /{unknown} HTTP/1.1"
        );
        assert_eq!(line("GET", &format!("/{token}")), "GET /{unknown} HTTP/1.1");
        assert_eq!(
            line("POST", &format!("/hook/github/{token}/x")),
            "POST /hook/{path} HTTP/1.1"
        );
        assert_eq!(line("POST", "/hook"), "POST /hook HTTP/1.1");
        assert_eq!(
            line("GET", "/jobs/20261124000000000000"),
            "GET /jobs/{jid} HTTP/1.1"
        );
        assert_eq!(line("GET", "/jobs/"), "GET /{unknown} HTTP/1.1");
        assert_eq!(line("GET", "/"), "GET / HTTP/1.1");
        assert_eq!(
            line("POST", &format!("/login?password={token}")),
            "POST /login?… HTTP/1.1"
        );
        assert_eq!(line(token, "/stats"), "OTHER /stats HTTP/1.1");
    }
}
