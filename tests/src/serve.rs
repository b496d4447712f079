//! Building the tutorial with trunk and serving a folder on loopback.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use axum::Router;
use tower_http::services::ServeDir;

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

/// The built tutorial: `$COUNTERSIGN_DIST` if set (xtask builds it first), else a fresh
/// `trunk build` into `target/e2e-dist`.
pub fn build_tutorial() -> Result<PathBuf, String> {
    if let Some(dist) = std::env::var_os("COUNTERSIGN_DIST") {
        let dist = PathBuf::from(dist);
        return if dist.join("index.html").is_file() {
            Ok(dist)
        } else {
            Err(format!(
                "COUNTERSIGN_DIST={} has no index.html",
                dist.display()
            ))
        };
    }
    let root = workspace_root();
    let dist = root.join("target").join("e2e-dist");
    println!("building the tutorial with trunk into {}", dist.display());
    let status = Command::new("trunk")
        .current_dir(&root)
        .args(["build", "--release", "--dist"])
        .arg(&dist)
        .status()
        .map_err(|e| format!("could not start trunk ({e}); run `cargo xtask setup`"))?;
    if status.success() {
        Ok(dist)
    } else {
        Err(format!("trunk build failed ({status})"))
    }
}

/// Serves `dir` over HTTP on 127.0.0.1 (a free port); returns the base URL.
pub async fn serve_dir(dir: PathBuf) -> Result<String, String> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .map_err(|e| format!("could not bind a loopback port ({e})"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let app = Router::new().fallback_service(ServeDir::new(dir));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}"))
}
