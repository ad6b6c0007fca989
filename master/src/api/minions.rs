//! `GET /minions` and `GET /minions/{id}`: the registry (PROTOCOL §4).
//!
//! `return` is salt-api's shape, each minion's grains; `maid` adds what the
//! registry knows beyond grains (alive, version, functions, last seen).

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Map, Value, json};

use super::Api;
use super::error::ApiError;
use crate::jobs;

async fn listing(api: &Api, only: Option<&str>) -> Result<Json<Value>, ApiError> {
    let mut conn = api.hub.conn().await?;
    let maids = jobs::alive_maids(&mut conn)
        .await
        .inspect_err(|_| api.hub.reset())?;
    let mut grains = Map::new();
    let mut maid = Map::new();
    for (id, (alive, reg)) in maids {
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
pub async fn all(State(api): State<Api>) -> Result<Json<Value>, ApiError> {
    listing(&api, None).await
}

pub async fn one(State(api): State<Api>, Path(id): Path<String>) -> Result<Json<Value>, ApiError> {
    listing(&api, Some(&id)).await
}
