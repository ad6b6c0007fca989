//! `POST /login`, `POST /logout` and the token check in front of every
//! other endpoint.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderValue;
use axum::http::header::{COOKIE, SET_COOKIE};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::auth::Refused;
use super::error::ApiError;
use super::{Api, ClientAddr};

/// The header salt-api clients send their token in.
pub const TOKEN_HEADER: &str = "x-auth-token";

/// Who made a request, for the job's `user` (and so the audit log).
#[derive(Debug, Clone)]
pub struct User(pub String);

/// The token a request came with: what a long-lived answer (an event
/// stream) checks again while it lasts, so it ends with the session.
#[derive(Clone)]
pub struct Token(pub String);

fn string_field(body: &Value, name: &str) -> Result<String, ApiError> {
    match body.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(ApiError::bad(name, "must be a string")),
        None => Err(ApiError::bad(name, "is required")),
    }
}

/// `GET /login`: salt-api's explanation of how to log in, and the
/// `WWW-Authenticate: Session` header it sends with it. Its `status` is
/// `null`, as salt-api's is (CherryPy has set no status yet when it
/// reads it).
pub async fn how_to_log_in() -> Response {
    (
        [(axum::http::header::WWW_AUTHENTICATE, "Session")],
        Json(json!({"status": null, "return": "Please log in"})),
    )
        .into_response()
}

/// `{"username", "password", "eauth"}` → salt-api's token object, also in
/// the `X-Auth-Token` response header. `eauth` is accepted and ignored:
/// the users are the API's own.
pub async fn login(
    State(api): State<Api>,
    ConnectInfo(ClientAddr(addr)): ConnectInfo<ClientAddr>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    // Any format salt-api reads; a list's first element, as Salt takes.
    // Only the two strings are kept while the password is checked.
    let (username, password) = {
        let body = match super::media::decode(&headers, &body)? {
            Some(Value::Array(mut items)) if !items.is_empty() => items.swap_remove(0),
            Some(v) => v,
            None => Value::Null,
        };
        if !body.is_object() {
            return Err(ApiError::bad("body", "must be an object"));
        }
        (
            string_field(&body, "username")?,
            string_field(&body, "password")?,
        )
    };
    // As Salt: a user with no permissions cannot log in.
    let perms = api.perms.of(&username);
    let session = api
        .auth
        .login_from(&username, &password, &addr.ip().to_string())
        .await
        .map_err(refusal)?;
    if perms.is_empty() {
        api.auth.logout(&session.token);
        return Err(ApiError::Unauthorized(
            "this user has no permissions ([api.perms])",
        ));
    }
    let mut response = Json(json!({"return": [{
        "token": session.token,
        "start": session.start,
        "expire": session.expire,
        "user": session.user,
        "eauth": "maid",
        "perms": sorted_permissions(perms),
    }]}))
    .into_response();
    if let Ok(v) = HeaderValue::from_str(&session.token) {
        response.headers_mut().insert(TOKEN_HEADER, v);
    }
    let ttl = (session.expire - session.start).max(0.0) as u64;
    if let Ok(v) = HeaderValue::from_str(&session_cookie(&session.token, ttl, api.https)) {
        response.headers_mut().insert(SET_COOKIE, v);
    }
    Ok(response)
}

/// The cookie `/login` sets, as salt-api's session: `session_id`, the
/// token, for `ttl` seconds. It authenticates `GET /events` alone (a
/// browser's `EventSource` sends no header), so a page elsewhere that
/// makes the browser send it can start nothing: `HttpOnly`, and
/// `SameSite=Strict` besides; over HTTPS, `Secure`.
fn session_cookie(token: &str, ttl: u64, https: bool) -> String {
    let secure = if https { "; Secure" } else { "" };
    format!("{SESSION_COOKIE}={token}; Path=/; Max-Age={ttl}; HttpOnly; SameSite=Strict{secure}")
}

/// salt-api's session cookie.
const SESSION_COOKIE: &str = "session_id";

/// `POST /token`: salt-api's eauth token, for `POST /run` (`pepper
/// --run-uri`). Each element of the body (or the one object) is a login;
/// the answer is a bare list of `{"start", "expire", "name", "eauth",
/// "token"}`, as Salt's `auth.mk_token` runner gives it.
pub async fn token_for_run(
    State(api): State<Api>,
    ConnectInfo(ClientAddr(addr)): ConnectInfo<ClientAddr>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let items = match super::media::decode(&headers, &body)? {
        Some(Value::Array(items)) => items,
        Some(obj @ Value::Object(_)) => vec![obj],
        _ => return Err(ApiError::bad("body", "Lowstates must be a list")),
    };
    // Each is a password check and a token: as many as a lowstate's chunks.
    api.within_max_chunks(items.len(), "logins")?;
    // Only the credentials are kept while passwords are checked.
    let mut creds = Vec::with_capacity(items.len());
    for mut c in items {
        let (Ok(username), Ok(password), Some(eauth)) = (
            string_field(&c, "username"),
            string_field(&c, "password"),
            c.get_mut("eauth").map(Value::take),
        ) else {
            return Err(ApiError::bad(
                "body",
                "Require \"username\", \"password\", and \"eauth\" params",
            ));
        };
        creds.push((username, password, eauth));
    }
    let mut out = Vec::with_capacity(creds.len());
    for (username, password, eauth) in creds {
        if api.perms.of(&username).is_empty() {
            return Err(ApiError::Unauthorized(
                "this user has no permissions ([api.perms])",
            ));
        }
        let session = api
            .auth
            .login_from(&username, &password, &addr.ip().to_string())
            .await
            .map_err(refusal)?;
        out.push(json!({
            "start": session.start,
            "expire": session.expire,
            "name": session.user,
            "eauth": eauth,
            "token": session.token,
        }));
    }
    Ok(Json(Value::Array(out)))
}

/// The answer to a refused login.
pub fn refusal(refused: Refused) -> ApiError {
    match refused {
        Refused::Wrong => ApiError::Unauthorized("wrong user name or password"),
        Refused::Throttled(retry_after) => ApiError::TooManyRequests { retry_after },
    }
}

/// Salt's `sorted_permissions`: the entries once each, the strings sorted
/// first, then the tables sorted by their Python `repr`.
fn sorted_permissions(perms: Vec<super::perms::PermEntry>) -> Vec<super::perms::PermEntry> {
    use super::perms::PermEntry;
    let mut strings: Vec<PermEntry> = Vec::new();
    let mut tables: Vec<PermEntry> = Vec::new();
    for p in perms {
        let list = match p {
            PermEntry::Fun(_) => &mut strings,
            PermEntry::Targeted(_) => &mut tables,
        };
        if !list.contains(&p) {
            list.push(p);
        }
    }
    strings.sort_by(|a, b| match (a, b) {
        (PermEntry::Fun(a), PermEntry::Fun(b)) => a.cmp(b),
        _ => std::cmp::Ordering::Equal,
    });
    tables.sort_by_cached_key(|t| {
        maid_salt::python::repr(&serde_json::to_value(t).unwrap_or_default())
    });
    strings.extend(tables);
    strings
}

/// Forget the request's token.
pub async fn logout(State(api): State<Api>, request: Request) -> Response {
    if let Some(token) = token(&request) {
        api.auth.logout(token);
    }
    let mut response = Json(json!({"return": "Your token has been cleared"})).into_response();
    response.headers_mut().insert(
        SET_COOKIE,
        HeaderValue::from_str(&session_cookie("", 0, api.https))
            .expect("a cookie is a header value"),
    );
    response
}

fn token(request: &Request) -> Option<&str> {
    request
        .headers()
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
}

/// `GET /events?token=…` (or `salt_token=`), or the `session_id` cookie
/// `/login` set: a browser's `EventSource` cannot set a header. Nowhere
/// else: a cookie the browser sends on its own must start nothing.
fn events_token(request: &Request) -> Option<String> {
    if request.uri().path() != "/events" || request.method() != axum::http::Method::GET {
        return None;
    }
    let query = request.uri().query().unwrap_or_default();
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "token" || k == "salt_token")
        .map(|(_, v)| v.into_owned())
        .or_else(|| cookie(request, SESSION_COOKIE))
}

/// The value of cookie `name` in `request`'s `Cookie` headers.
fn cookie(request: &Request, name: &str) -> Option<String> {
    request
        .headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, v)| *k == name && !v.is_empty())
        .map(|(_, v)| v.to_string())
}

/// Middleware: a valid `X-Auth-Token`, or 401.
pub async fn require_token(
    State(api): State<Api>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let token = token(&request)
        .map(str::to_string)
        .or_else(|| events_token(&request))
        .ok_or(ApiError::Unauthorized("X-Auth-Token header required"))?;
    let user = api.auth.check(&token).ok_or(ApiError::Unauthorized(
        "token unknown or expired; log in again",
    ))?;
    request.extensions_mut().insert(User(user));
    request.extensions_mut().insert(Token(token));
    Ok(next.run(request).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perms_are_sorted_as_salts_sorted_permissions() {
        let perms: Vec<super::super::perms::PermEntry> = serde_json::from_value(json!([
            "@wheel", ".*", {"b*": ["x"]}, "@jobs", ".*", {"a*": ["y"]}, {"b*": ["x"]}
        ]))
        .unwrap();
        assert_eq!(
            serde_json::to_value(sorted_permissions(perms)).unwrap(),
            json!([".*", "@jobs", "@wheel", {"a*": ["y"]}, {"b*": ["x"]}])
        );
    }
}
