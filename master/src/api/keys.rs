//! `GET /keys` and `GET /keys/{mid}`: the master's maid keys, as salt-api
//! answers them (the wheel's `key.list_all` and `key.finger`).

use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::Api;
use super::error::ApiError;
use super::login::User;
use super::master_funs::{self, Form};
use super::perms;

async fn wheel(
    api: &Api,
    user: &str,
    fun: &str,
    kwargs: Map<String, Value>,
) -> Result<Json<Value>, ApiError> {
    if !perms::spec_allows(&api.perms.of(user), fun, Form::Wheel.name()) {
        return Err(ApiError::Forbidden(format!(
            "user {user:?} may not run wheel {fun}"
        )));
    }
    let Some(pki) = &api.pki else {
        return Err(ApiError::NotFound);
    };
    let mut conn = api.hub.conn().await?;
    let maids = crate::jobs::registrations(&mut conn).await?;
    if let Err(e) = crate::jobs::file_registered_keys(pki, &maids) {
        tracing::warn!(cause = %e, "cannot file the maids' registered keys");
    }
    let bound = master_funs::bind(Form::Wheel, fun, vec![], &kwargs)
        .map_err(|e| ApiError::bad("mid", e.0))?;
    let ret = master_funs::wheel(pki, fun, &bound).map_err(|e| ApiError::Internal(e.0))?;
    Ok(Json(json!({"return": ret})))
}

/// Every key, by state.
pub async fn all(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
) -> Result<Json<Value>, ApiError> {
    wheel(&api, &user, "key.list_all", Map::new()).await
}

/// One maid's key fingerprint, under its state.
pub async fn one(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
    Path(mid): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let mut kwargs = Map::new();
    kwargs.insert("match".into(), Value::String(mid));
    wheel(&api, &user, "key.finger", kwargs).await
}
