//! The formats salt-api speaks (`rest_cherrypy`'s `hypermedia_in` and
//! `hypermedia_out`).
//!
//! * Request bodies by `Content-Type`: JSON, form-encoded (each `arg` read
//!   as the CLI reads it, repeated keys a list), YAML (`application/x-yaml`,
//!   `text/yaml`, read as Salt's loader reads YAML), `text/plain` (JSON if
//!   it parses, else the text). Anything else is 406. A body without a
//!   type is read as JSON, else (unless it starts as JSON would) as a form.
//! * Every body is bounded before it is read (`[api] max_body_bytes`,
//!   413 past it), and so is what reading it builds: JSON nests at most
//!   128 deep (`serde_json`'s own bound), YAML too, and a YAML document
//!   whose aliases would expand it past twice its length is refused as
//!   the alias is read ([`yaml11::budget`](maid_salt::yaml11::budget)),
//!   where Salt's loader builds every copy: 400 either way. YAML is read
//!   from at most [`MAX_YAML_BYTES`] (a larger YAML body is 413, a larger
//!   form value stays text): its parser holds a whole flow collection's
//!   tokens before it yields the first, ~100 bytes for each byte read.
//! * Responses by `Accept`: JSON unless YAML is preferred; neither
//!   acceptable is 406, as CherryPy's `accept` tool answers.

use axum::extract::Request;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use maid_salt::args::{to_json, yamlify};
use maid_salt::yaml11::safe_load;
use serde_json::{Map, Value};

use super::error::ApiError;

const JSON: &str = "application/json";
const YAML: &str = "application/x-yaml";

/// The largest answer turned into YAML (a request body's bound is `[api]
/// max_body_bytes`).
pub const MAX_BODY: usize = 30 * 1024 * 1024;

/// The longest text read as YAML: reading it takes up to ~11 MB at once
/// (`yaml-rust2` buffers a flow collection's tokens whole), where 64 KiB
/// of JSON takes ~2 MB.
pub const MAX_YAML_BYTES: usize = 64 * 1024;

/// The media type of `headers`' `Content-Type`, lowercased, without
/// parameters.
fn content_type(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(CONTENT_TYPE)?.to_str().ok()?;
    Some(
        v.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase(),
    )
}

/// A request body as salt-api reads it. `None` for an empty body.
pub fn decode(headers: &HeaderMap, body: &[u8]) -> Result<Option<Value>, ApiError> {
    if body.is_empty() {
        return Ok(None);
    }
    let text = || std::str::from_utf8(body).map_err(|_| ApiError::bad("body", "is not UTF-8 text"));
    let json = || {
        let text = std::str::from_utf8(body)
            .map_err(|_| ApiError::bad("body", "Invalid JSON document: not UTF-8"))?;
        serde_json::from_str::<Value>(&exact_big_ints(text))
            .map_err(|e| ApiError::bad("body", format!("Invalid JSON document: {e}")))
    };
    match content_type(headers).as_deref() {
        Some(JSON) => json().map(Some),
        Some("application/x-www-form-urlencoded") => Ok(Some(form(body))),
        Some(YAML | "text/yaml") => {
            if body.len() > MAX_YAML_BYTES {
                return Err(ApiError::TooLarge(format!(
                    "a YAML body may be at most {MAX_YAML_BYTES} bytes; send larger ones as JSON"
                )));
            }
            let parsed = safe_load(text()?)
                .map_err(|e| ApiError::bad("body", format!("Invalid YAML document: {e}")))?;
            to_json(&parsed).map(Some).ok_or_else(|| {
                ApiError::bad("body", "Invalid YAML document: not representable as JSON")
            })
        }
        Some("text/plain") => {
            Ok(Some(json().unwrap_or_else(|_| {
                Value::String(String::from_utf8_lossy(body).into_owned())
            })))
        }
        // No type: JSON, or a form unless it was meant as JSON.
        None | Some("") => match json() {
            Ok(v) => Ok(Some(v)),
            Err(e)
                if body.trim_ascii_start().starts_with(b"{")
                    || body.trim_ascii_start().starts_with(b"[") =>
            {
                Err(e)
            }
            Err(_) => Ok(Some(form(body))),
        },
        Some(other) => Err(ApiError::NotAcceptable(format!(
            "Content type not supported: {other}"
        ))),
    }
}

/// JSON text with every integer too big for 64 bits made a string of its
/// digits, so it stays exact (a 20-digit jid that pepper decoded to a
/// number): Salt would hold it as a Python int, and maid's jobs carry
/// such ints as strings, as Salt's payload does.
fn exact_big_ints(text: &str) -> std::borrow::Cow<'_, str> {
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let (mut i, mut copied, mut in_string) = (0, 0, false);
    while i < b.len() {
        let c = b[i];
        if in_string {
            match c {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if c == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if c == b'-' || c.is_ascii_digit() {
            let start = i;
            while i < b.len() && matches!(b[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                i += 1;
            }
            let token = &text[start..i];
            let digits = token.strip_prefix('-').unwrap_or(token);
            let integer = !digits.is_empty() && digits.bytes().all(|d| d.is_ascii_digit());
            if integer && token.parse::<i64>().is_err() && token.parse::<u64>().is_err() {
                let o = out.get_or_insert_with(String::new);
                o.push_str(&text[copied..start]);
                o.push('"');
                o.push_str(token);
                o.push('"');
                copied = i;
            }
            continue;
        }
        i += 1;
    }
    match out {
        Some(mut o) => {
            o.push_str(&text[copied..]);
            std::borrow::Cow::Owned(o)
        }
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// `urlencoded_processor`: `parse_qsl` (blank values dropped), a key given
/// more than once is a list, and `arg` and `kwarg` are read as the CLI
/// reads them (`yamlify_arg`), those up to [`MAX_YAML_BYTES`] long.
fn form(body: &[u8]) -> Value {
    let mut out: Map<String, Value> = Map::new();
    for (k, v) in form_urlencoded::parse(body) {
        if v.is_empty() {
            continue;
        }
        let v = Value::String(v.into_owned());
        match out.get_mut(k.as_ref()) {
            Some(Value::Array(list)) => list.push(v),
            Some(one) => *one = Value::Array(vec![one.take(), v]),
            None => {
                out.insert(k.into_owned(), v);
            }
        }
    }
    let read = |v: &Value| match v {
        Value::String(s) if s.len() <= MAX_YAML_BYTES => yamlify(s),
        other => other.clone(),
    };
    if let Some(kwarg) = out.get_mut("kwarg") {
        *kwarg = read(kwarg);
    }
    if let Some(arg) = out.get_mut("arg") {
        let read_all = match &*arg {
            Value::Array(items) => Value::Array(items.iter().map(read).collect()),
            one => Value::Array(vec![read(one)]),
        };
        *arg = read_all;
    }
    Value::Object(out)
}

/// Which of JSON and YAML `accept` prefers: CherryPy's `accept` tool, q
/// values and wildcards included, ties to the first offered (JSON).
/// `None` when it accepts neither.
fn negotiate(accept: Option<&str>) -> Option<&'static str> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Some(JSON);
    };
    let mut best: Option<(f32, u8, &'static str)> = None;
    for offer in [JSON, YAML] {
        let (major, _) = offer.split_once('/').expect("a media type");
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            let specificity = if media == offer {
                2
            } else if media == format!("{major}/*") {
                1
            } else if media == "*/*" {
                0
            } else {
                continue;
            };
            if q <= 0.0 {
                continue;
            }
            let better = match best {
                None => true,
                Some((bq, bs, _)) => q > bq || (q == bq && specificity > bs),
            };
            if better {
                best = Some((q, specificity, offer));
            }
        }
    }
    best.map(|(_, _, offer)| offer)
}

/// Middleware: answer in the format the request's `Accept` prefers.
/// Handlers answer JSON; a YAML answer is the same value dumped as
/// `salt.utils.yaml.safe_dump(default_flow_style=False)` does.
pub async fn respond_as_accepted(request: Request, next: Next) -> Response {
    // `/events` speaks only `text/event-stream`, whatever is asked (a
    // browser's `EventSource` asks for just that), as salt-api's does.
    if request.uri().path() == "/events" {
        return next.run(request).await;
    }
    let accept = request
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let Some(wanted) = negotiate(accept.as_deref()) else {
        return ApiError::NotAcceptable(format!(
            "Your client sent this Accept header: {}. But this resource only emits these media types: {JSON}, {YAML}.",
            accept.unwrap_or_default()
        ))
        .into_response();
    };
    let response = next.run(request).await;
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(JSON.as_bytes()));
    if wanted == JSON || !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let text = maid_salt::output::yaml::dump(&value, None);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static(YAML));
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with_type(t: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_str(t).unwrap());
        h
    }

    #[test]
    fn forms_are_read_as_salt_api_reads_them() {
        let body = b"client=local&tgt=*&fun=test.arg&arg=1&arg=a%3Db&arg=&arg=%5B1%2C+2%5D&kwarg=%7Bx%3A+1%7D";
        let v = decode(
            &with_type("application/x-www-form-urlencoded; charset=utf-8"),
            body,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            v,
            json!({"client": "local", "tgt": "*", "fun": "test.arg",
                   "arg": [1, "a=b", [1, 2]], "kwarg": {"x": 1}})
        );
        let one = decode(&with_type("application/x-www-form-urlencoded"), b"arg=yes")
            .unwrap()
            .unwrap();
        assert_eq!(one["arg"], json!([true]));
    }

    #[test]
    fn yaml_json_and_text_bodies() {
        let y = decode(
            &with_type("application/x-yaml"),
            b"- client: local\n  tgt: '*'\n  arg: [010, on]\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            y,
            json!([{"client": "local", "tgt": "*", "arg": [10, true]}])
        );
        assert!(decode(&with_type("application/json"), b"{").is_err());
        assert_eq!(
            decode(&with_type("text/plain"), b"[1]").unwrap(),
            Some(json!([1]))
        );
        assert_eq!(
            decode(&with_type("text/plain"), b"hi").unwrap(),
            Some(json!("hi"))
        );
        assert!(matches!(
            decode(&with_type("application/xml"), b"<x/>"),
            Err(ApiError::NotAcceptable(_))
        ));
        assert_eq!(decode(&HeaderMap::new(), b"").unwrap(), None);
    }

    #[test]
    fn yaml_is_read_within_bounds() {
        let yaml = with_type("application/x-yaml");
        let bomb = b"a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\n";
        assert!(matches!(
            decode(&yaml, bomb),
            Err(ApiError::BadRequest { .. })
        ));
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(matches!(
            decode(&yaml, deep.as_bytes()),
            Err(ApiError::BadRequest { .. })
        ));
        assert!(matches!(
            decode(&with_type("application/json"), deep.as_bytes()),
            Err(ApiError::BadRequest { .. })
        ));
        let long = format!("[{}0]", "0,".repeat(MAX_YAML_BYTES / 2));
        assert!(matches!(
            decode(&yaml, long.as_bytes()),
            Err(ApiError::TooLarge(_))
        ));
        // A form value that long stays the text it is.
        let form_body = format!("arg={}", long.replace(',', "%2C"));
        let v = decode(
            &with_type("application/x-www-form-urlencoded"),
            form_body.as_bytes(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(v["arg"][0], json!(long));
    }

    #[test]
    fn integers_past_64_bits_stay_exact() {
        let v = decode(
            &with_type("application/json"),
            br#"{"jid": 20261124230417123456, "n": -1, "f": 1.5e3, "s": "12345678901234567890123", "m": -99999999999999999999}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            v,
            json!({"jid": "20261124230417123456", "n": -1, "f": 1.5e3,
                   "s": "12345678901234567890123", "m": "-99999999999999999999"})
        );
        assert_eq!(
            exact_big_ints(r#"["a\"1", 18446744073709551615]"#),
            r#"["a\"1", 18446744073709551615]"#
        );
    }

    #[test]
    fn accept_is_negotiated_as_cherrypy_does() {
        assert_eq!(negotiate(None), Some(JSON));
        assert_eq!(negotiate(Some("*/*")), Some(JSON));
        assert_eq!(negotiate(Some("application/x-yaml")), Some(YAML));
        assert_eq!(
            negotiate(Some("application/json;q=0.5, application/x-yaml")),
            Some(YAML)
        );
        assert_eq!(negotiate(Some("application/*")), Some(JSON));
        assert_eq!(negotiate(Some("text/html")), None);
        assert_eq!(negotiate(Some("text/html, */*;q=0.1")), Some(JSON));
    }
}
