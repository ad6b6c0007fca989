//! `POST /hook/<path>`: salt-api's webhook. The request becomes an event
//! tagged `salt/netapi/hook/<path>` on `/events`, with salt-api's data
//! (`body`: the raw body, `post`: the body read as the API reads a
//! lowstate, `headers`: the request's headers, named as CherryPy names
//! them), for users who may see every job (`@jobs`). The caller's token
//! and cookies are left out of `headers`, and a live token in the path is
//! `{token}` in the tag: salt-api puts them there for every listener to
//! read.

use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::hub::Event;
use super::login::User;
use super::{Api, ClientAddr, media};

/// Headers that carry credentials: never in the event.
const CREDENTIALS: [&str; 4] = [
    "x-auth-token",
    "cookie",
    "authorization",
    "proxy-authorization",
];

/// `Content-Type` as CherryPy names a header: each word capitalised.
fn cherrypy_name(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + &c.as_str().to_ascii_lowercase())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// `POST /hook` and `POST /hook/<path>`.
pub async fn fire(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
    ConnectInfo(ClientAddr(addr)): ConnectInfo<ClientAddr>,
    path: Option<Path<String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let post = media::decode(&headers, &body)?.unwrap_or_else(|| json!({}));
    let raw = String::from_utf8_lossy(&body).into_owned();
    let mut shown = Map::new();
    for (name, value) in &headers {
        if CREDENTIALS.contains(&name.as_str()) {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        shown.insert(cherrypy_name(name.as_str()), json!(value));
    }
    shown.insert("Remote-Addr".into(), json!(addr.ip().to_string()));
    let mut tag = "salt/netapi/hook".to_string();
    if let Some(Path(path)) = path {
        for part in path.split('/').filter(|p| !p.is_empty()) {
            tag.push('/');
            // The tag is logged and sent to every `@jobs` listener: a
            // token in the path is named, not shown.
            if api.auth.check(part).is_some() {
                tag.push_str("{token}");
            } else {
                tag.push_str(part);
            }
        }
    }
    tracing::info!(%user, %tag, "webhook");
    api.hub.announce(Event {
        kind: "hook",
        tag,
        data: json!({"body": raw, "post": post, "headers": shown}),
        jid: String::new(),
    });
    Ok(Json(json!({"success": true})))
}

#[cfg(test)]
mod tests {
    #[test]
    fn headers_are_named_as_cherrypy_names_them() {
        assert_eq!(super::cherrypy_name("x-my-secret-key"), "X-My-Secret-Key");
        assert_eq!(super::cherrypy_name("content-type"), "Content-Type");
    }
}
