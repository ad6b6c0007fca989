//! `GET /audit`: the fleet's audit trail, queried as `maid audit query`
//! queries it (the query string holds the same filters: `since`, `until`,
//! `minion`, `user`, `fun`, `decision`, `jid`, `capability`, `program`,
//! `path`, `limit`), for users whose permissions hold `@audit`. The records are
//! the maids' own, as chained: `{"return": [record, ...]}`, marked as
//! `maid audit query` marks them (`_chain`, `_minion`). Control
//! characters in them are written as JSON escapes (`\u001b`, `\u009b`,
//! `\u007f`), so the answer reads back exactly and a `curl` to a
//! terminal prints none of them raw.

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::error::ApiError;
use super::login::User;
use super::{Api, perms};
use crate::audit::{self, AuditError};

/// The records `query` asks for, oldest first.
pub async fn query(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
    query: Result<Query<audit::Query>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    if !perms::has(&api.perms.of(&user), perms::AUDIT) {
        return Err(ApiError::Forbidden(format!(
            "user {user:?} may not read the audit trail (@audit)"
        )));
    }
    let Query(query) = query.map_err(|e| ApiError::bad("query", e.body_text()))?;
    let filter = query
        .resolve_now()
        .map_err(|e| ApiError::bad("query", e.to_string()))?;
    let mut conn = api.hub.conn().await?;
    let records = audit::read(&mut conn, &filter)
        .await
        .inspect_err(|_| api.hub.reset())
        .map_err(|e| match e {
            AuditError::Redis(e) => ApiError::from(e),
            AuditError::Query(q) => ApiError::bad("query", q),
        })?;
    let body = json!({ "return": records }).to_string();
    let body = maid_protocol::auditchain::escape_json_controls(&body).into_owned();
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}
