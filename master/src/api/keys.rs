//! `GET /keys` and `GET /keys/{mid}`: the master's maid keys, as salt-api
//! answers them (the wheel's `key.list_all` and `key.finger`); `POST
//! /keys`: a new maid's key pair, accepted, as a tar (`key.gen_accept`).

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use axum::http::header::{CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::login::User;
use super::{Api, ClientAddr, perms};
use crate::binding::Form;
use crate::{binding, wheel};

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
    file_registered_keys(api, pki).await?;
    let bound =
        binding::bind(Form::Wheel, fun, vec![], &kwargs).map_err(|e| ApiError::bad("mid", e.0))?;
    let ret = wheel::wheel(pki, fun, &bound).map_err(|e| ApiError::Internal(e.0))?;
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

/// File the keys maids submitted through the registry, as `maid key`
/// does before it lists or acts, so the wheel sees pending ones.
pub(super) async fn file_registered_keys(api: &Api, pki: &crate::pki::Pki) -> Result<(), ApiError> {
    let mut conn = api.hub.conn().await?;
    crate::jobs::file_keys(&mut conn, pki).await?;
    Ok(())
}

/// `POST /keys`: salt-api's bootstrap of a new minion. The body (JSON,
/// YAML or a form) carries its own credentials (`username` and
/// `password`, or `token`), `mid`, and `force` to replace a key the id
/// has; the wheel's `key.gen_accept` makes a key pair and accepts it, and
/// the answer is a tar of `minion.pub` and `minion.key`, the files a maid
/// reads from its `state_dir` (`tar -C STATE_DIR -xf -`). A `mid` that
/// has a key already gets empty files, as from salt-api.
pub async fn generate(
    State(api): State<Api>,
    ConnectInfo(ClientAddr(addr)): ConnectInfo<ClientAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let lowstate = super::jobs::lowstate_of(&headers, &body)?;
    let chunk = lowstate
        .as_array()
        .and_then(|chunks| chunks.first())
        .cloned()
        .unwrap_or_default();
    let user = super::jobs::chunk_user(&api, &chunk, &addr).await?;
    let mid = match chunk.get("mid") {
        Some(Value::String(mid)) => mid.clone(),
        _ => {
            return Err(ApiError::bad(
                "mid",
                "mid: the id of the minion to make a key for",
            ));
        }
    };
    crate::pki::check_id(&mid).map_err(|e| ApiError::bad("mid", e.to_string()))?;
    // It is named in a header of the answer.
    if mid.chars().any(char::is_control) {
        return Err(ApiError::bad("mid", "mid: no control characters"));
    }
    let mut kwargs = Map::new();
    kwargs.insert("id_".into(), Value::String(mid.clone()));
    for name in ["keysize", "force"] {
        if let Some(v) = chunk.get(name) {
            kwargs.insert(name.into(), v.clone());
        }
    }
    let Json(answer) = wheel(&api, &user, "key.gen_accept", kwargs).await?;
    let text = |name: &str| {
        answer["return"][name]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let tarball = tarball(&[
        ("minion.pub", 0o644, text("pub")),
        ("minion.key", 0o600, text("priv")),
    ])
    .map_err(|e| ApiError::Internal(format!("cannot write the key tar: {e}")))?;
    Ok((
        [
            (CONTENT_TYPE, "application/x-tar".to_string()),
            (
                CONTENT_DISPOSITION,
                format!("attachment; filename=\"saltkeys-{mid}.tar\""),
            ),
            (CACHE_CONTROL, "no-cache".to_string()),
        ],
        tarball,
    )
        .into_response())
}

/// A tar of `(name, mode, text)` files.
fn tarball(files: &[(&str, u32, String)]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, mode, text) in files {
        let mut header = tar::Header::new_ustar();
        header.set_size(text.len() as u64);
        header.set_mode(*mode);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, name, text.as_bytes())?;
    }
    builder.into_inner()
}
