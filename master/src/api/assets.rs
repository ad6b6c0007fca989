//! A web console served as salt-api serves one (`rest_cherrypy`'s `app`,
//! `static` and `static_path`): its page at `app_path` and every path
//! under it, its assets under `static_path`, both with no token — the
//! console logs in itself.
//!
//! The assets directory is opened once, as a capability ([`cap_std`]): a
//! file is opened relative to it, so `..`, an absolute path or a link
//! that leads out is refused by the open itself, as the maids' plugins are
//! held to their directories. Only regular files are served, each at most
//! [`MAX_ASSET_BYTES`].

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::error::ApiError;
use crate::config::ApiSettings;

/// The largest asset served.
pub const MAX_ASSET_BYTES: u64 = 32 << 20;

/// Why the console cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum AssetsError {
    #[error("api.static {path}: {error}")]
    Static {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("api.app {path}: {error}")]
    App {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// What `[api]` says to serve.
#[derive(Clone)]
struct Assets {
    app: Option<Arc<PathBuf>>,
    dir: Option<Arc<Dir>>,
}

/// The routes of the console `settings` names (none without one), checked
/// now: an `app` that is no readable file, or a `static` that is no
/// directory, stops the API at start.
pub fn routes<S>(settings: &ApiSettings) -> Result<Router<S>, AssetsError> {
    let app = match &settings.app {
        Some(path) => {
            let meta = std::fs::metadata(path).map_err(|error| AssetsError::App {
                path: path.clone(),
                error,
            })?;
            if !meta.is_file() {
                return Err(AssetsError::App {
                    path: path.clone(),
                    error: std::io::Error::other("not a regular file"),
                });
            }
            Some(Arc::new(path.clone()))
        }
        None => None,
    };
    let dir = match &settings.static_dir {
        Some(path) => Some(Arc::new(
            Dir::open_ambient_dir(path, ambient_authority()).map_err(|error| {
                AssetsError::Static {
                    path: path.clone(),
                    error,
                }
            })?,
        )),
        None => None,
    };
    let assets = Assets {
        app: app.clone(),
        dir: dir.clone(),
    };
    let mut router = Router::new();
    if app.is_some() {
        router = router
            .route(&settings.app_path, get(page))
            .route(&format!("{}/{{*rest}}", settings.app_path), get(page));
    }
    if dir.is_some() {
        router = router.route(&format!("{}/{{*path}}", settings.static_path), get(asset));
    }
    Ok(router.with_state(assets))
}

/// The console's page.
async fn page(State(assets): State<Assets>) -> Response {
    let Some(path) = assets.app else {
        return ApiError::NotFound.into_response();
    };
    match tokio::fs::read(&*path).await {
        Ok(bytes) => (
            [
                (CONTENT_TYPE, "text/html;charset=utf-8"),
                (CACHE_CONTROL, "no-cache"),
            ],
            bytes,
        )
            .into_response(),
        Err(e) => {
            tracing::warn!(path = %path.display(), cause = %e, "cannot read api.app");
            ApiError::NotFound.into_response()
        }
    }
}

/// One asset, when it is a regular file within the directory.
async fn asset(State(assets): State<Assets>, Path(path): Path<String>) -> Response {
    let Some(dir) = assets.dir else {
        return ApiError::NotFound.into_response();
    };
    let read = tokio::task::spawn_blocking(move || read_within(&dir, &path)).await;
    match read {
        Ok(Some((bytes, kind))) => ([(CONTENT_TYPE, kind)], bytes).into_response(),
        _ => ApiError::NotFound.into_response(),
    }
}

/// The regular file `path` names within `dir` and its media type; `None`
/// for anything else (absent, a directory, out of `dir`, too large).
fn read_within(dir: &Dir, path: &str) -> Option<(Vec<u8>, &'static str)> {
    use std::io::Read;
    let file = dir.open(path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_ASSET_BYTES {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.into_std()
        .take(MAX_ASSET_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    Some((bytes, media_type(path)))
}

/// The media type a browser needs for `path`, by its extension.
fn media_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    match ext.to_ascii_lowercase().as_str() {
        "html" | "htm" => "text/html;charset=utf-8",
        "js" | "mjs" => "text/javascript;charset=utf-8",
        "css" => "text/css;charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "ico" => "image/x-icon",
        "webp" => "image/webp",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "txt" => "text/plain;charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_directory_are_read() {
        let root = tempfile::tempdir().unwrap();
        let assets = root.path().join("static");
        std::fs::create_dir_all(assets.join("sub")).unwrap();
        std::fs::write(assets.join("app.js"), "ok()").unwrap();
        std::fs::write(assets.join("sub/style.css"), "p{}").unwrap();
        std::fs::write(root.path().join("secret.toml"), "password").unwrap();
        std::os::unix::fs::symlink(root.path().join("secret.toml"), assets.join("out.css"))
            .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", assets.join("passwd.txt")).unwrap();
        let dir = Dir::open_ambient_dir(&assets, ambient_authority()).unwrap();
        assert_eq!(
            read_within(&dir, "app.js"),
            Some((b"ok()".to_vec(), "text/javascript;charset=utf-8"))
        );
        assert_eq!(
            read_within(&dir, "sub/style.css").map(|r| r.1),
            Some("text/css;charset=utf-8")
        );
        for out in [
            "../secret.toml",
            "sub/../../secret.toml",
            "/etc/passwd",
            "out.css",
            "passwd.txt",
            "sub",
            "missing.js",
        ] {
            assert_eq!(read_within(&dir, out), None, "{out}");
        }
    }
}
