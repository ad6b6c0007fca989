//! How the API says no: a status and a JSON body, `{"status", "error"}`,
//! plus `"field"` for a bad request, so a client can point at what to fix.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::bus::BusError;

/// Why a request was not answered with a result.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not what the endpoint takes; `field` names the part
    /// (`body`, `username`, `[1].tgt`).
    #[error("{field}: {message}")]
    BadRequest { field: String, message: String },
    /// No token, an unknown or expired one, or wrong credentials.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// The user's permissions (`[api.perms]`) do not allow it.
    #[error("{0}")]
    Forbidden(String),
    /// Too many logins, or jobs past the user's quota; try again after
    /// this many seconds.
    #[error("too many requests; try again in {retry_after} s")]
    TooManyRequests { retry_after: u64 },
    /// No route here.
    #[error("not found")]
    NotFound,
    /// The body is larger than the API reads (of its kind).
    #[error("{0}")]
    TooLarge(String),
    /// The body's type, or every type the client accepts, is one the API
    /// does not speak.
    #[error("{0}")]
    NotAcceptable(String),
    /// A task failed that should not have.
    #[error("internal error: {0}")]
    Internal(String),
    /// Redis could not be reached or failed; the request may be retried.
    #[error("{error}")]
    Redis { error: BusError },
}

impl ApiError {
    pub fn bad(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError::BadRequest {
            field: field.into(),
            message: message.into(),
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Redis { .. } => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl From<BusError> for ApiError {
    fn from(error: BusError) -> Self {
        ApiError::Redis { error }
    }
}

impl From<redis::RedisError> for ApiError {
    fn from(error: redis::RedisError) -> Self {
        ApiError::Redis {
            error: error.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = json!({"status": status.as_u16(), "error": self.to_string()});
        if let ApiError::BadRequest { field, .. } = &self {
            body["field"] = json!(field);
        }
        if let ApiError::Redis { error } = &self {
            tracing::warn!(cause = %error, "request failed on redis");
        }
        let mut response = (status, Json(body)).into_response();
        if let ApiError::TooManyRequests { retry_after } = &self
            && let Ok(v) = axum::http::HeaderValue::from_str(&retry_after.to_string())
        {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, v);
        }
        response
    }
}
