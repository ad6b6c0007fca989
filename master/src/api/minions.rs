//! `GET /minions` and `GET /minions/{id}`: the registry (PROTOCOL §4).
//!
//! `return` is salt-api's shape, each minion's grains; `maid` adds what the
//! registry knows beyond grains (alive, version, functions, last seen).

use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde_json::{Map, Value, json};

use super::Api;
use super::error::ApiError;
use super::login::User;
use super::perms;
use crate::jobs;
use crate::target::TargetType;

/// The registry, as far as `user` may run `grains.items` on it (salt-api
/// answers `GET /minions` by running it).
async fn listing(api: &Api, user: &str, only: Option<&str>) -> Result<Json<Value>, ApiError> {
    let mut conn = api.hub.conn().await?;
    let registry = jobs::Registry::read(&mut conn, api.pki.as_ref())
        .await
        .inspect_err(|_| api.hub.reset())?;
    let tgt = Value::String(only.unwrap_or("*").to_string());
    let reached = perms::reach(&registry, &tgt, TargetType::Glob, None);
    if !perms::allows(&api.perms.of(user), "grains.items", &reached, &registry) {
        return Err(ApiError::Forbidden(format!(
            "user {user:?} may not run grains.items on {tgt}"
        )));
    }
    let mut grains = Map::new();
    let mut maid = Map::new();
    for (id, (alive, reg)) in registry.maids {
        if only.is_some_and(|o| o != id) {
            continue;
        }
        let mut entry = json!({"alive": alive});
        if let Some(reg) = reg {
            entry = json!({
                "alive": alive,
                "version": reg.version,
                "master_topics": reg.master_topics,
                "functions": reg.functions,
                "started_at": reg.started_at,
                "last_seen": reg.last_seen,
            });
            grains.insert(id.clone(), Value::Object(reg.grains));
        }
        maid.insert(id, entry);
    }
    Ok(Json(json!({"return": [grains], "maid": maid})))
}

/// Every registered maid; an unknown id gives empty objects, as salt-api.
pub async fn all(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
) -> Result<Json<Value>, ApiError> {
    listing(&api, &user, None).await
}

pub async fn one(
    State(api): State<Api>,
    Extension(User(user)): Extension<User>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    listing(&api, &user, Some(&id)).await
}
