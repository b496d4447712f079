//! Building the tutorial and the lazy-dock example with trunk, and serving a folder on
//! loopback (holding back chosen files, if asked).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::Router;
use tokio::sync::watch;
use tower_http::services::ServeDir;

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

/// The built tutorial: `$COUNTERSIGN_DIST` if set (xtask builds it first), else a fresh
/// `trunk build` into `target/e2e-dist`.
pub fn build_tutorial() -> Result<PathBuf, String> {
    built("COUNTERSIGN_DIST", &workspace_root(), "e2e-dist")
}

/// The `examples/lazy-dock` app, built with its own `Trunk.toml` (the one hook line):
/// `$COUNTERSIGN_LAZY_DOCK_DIST` if set (xtask builds it first), else a fresh `trunk
/// build` into `target/e2e-lazy-dock`.
pub fn build_lazy_dock() -> Result<PathBuf, String> {
    built(
        "COUNTERSIGN_LAZY_DOCK_DIST",
        &workspace_root().join("examples").join("lazy-dock"),
        "e2e-lazy-dock",
    )
}

/// The folder `$var` names if set, else a release `trunk build` run in `dir` into
/// `target/{name}`.
fn built(var: &str, dir: &Path, name: &str) -> Result<PathBuf, String> {
    if let Some(dist) = std::env::var_os(var) {
        let dist = PathBuf::from(dist);
        return if dist.join("index.html").is_file() {
            Ok(dist)
        } else {
            Err(format!("{var}={} has no index.html", dist.display()))
        };
    }
    let dist = workspace_root().join("target").join(name);
    println!(
        "building {} with trunk into {}",
        dir.display(),
        dist.display()
    );
    let status = Command::new("trunk")
        .current_dir(dir)
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
    serve(Router::new().fallback_service(ServeDir::new(dir))).await
}

/// Serves `app` over HTTP on 127.0.0.1 (a free port); returns the base URL.
async fn serve(app: Router) -> Result<String, String> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .map_err(|e| format!("could not bind a loopback port ({e})"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}"))
}

/// Requests a [`serve_dir_holding`] server holds back: how many came, and the gate that
/// lets them through.
#[derive(Debug, Clone)]
pub struct Held {
    requested: Arc<AtomicUsize>,
    open: Arc<watch::Sender<bool>>,
}

impl Held {
    /// How many held requests have come in so far.
    pub fn requested(&self) -> usize {
        self.requested.load(Ordering::SeqCst)
    }

    /// Lets every held request through, now and from now on.
    pub fn release(&self) {
        self.open.send_replace(true);
    }
}

/// Serves `dir` as [`serve_dir`] does, but holds back each request whose path `hold`
/// picks until [`Held::release`]: a file on a slow network, for as long as a test needs.
pub async fn serve_dir_holding(
    dir: PathBuf,
    hold: fn(&str) -> bool,
) -> Result<(String, Held), String> {
    let held = Held {
        requested: Arc::new(AtomicUsize::new(0)),
        open: Arc::new(watch::channel(false).0),
    };
    let gate = held.clone();
    let app = Router::new()
        .fallback_service(ServeDir::new(dir))
        .layer(middleware::from_fn(move |request: Request, next: Next| {
            let gate = gate.clone();
            async move {
                if hold(request.uri().path()) {
                    gate.requested.fetch_add(1, Ordering::SeqCst);
                    let _ = gate.open.subscribe().wait_for(|open| *open).await;
                }
                next.run(request).await
            }
        }));
    Ok((serve(app).await?, held))
}
