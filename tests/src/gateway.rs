//! The real gateway, in process on loopback, stoppable and restartable on the same port.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use countersign_gateway::{app, AppState, AuditStore, ChainKey, GatewayConfig, Secret, Upstream};
use tokio::sync::oneshot;

/// The provider key the test gateway holds; the page must never see it.
pub const E2E_KEY: &str = "sk-e2e-never-in-the-page-41d9";

/// The key that chains the test gateway's audit trail.
pub fn audit_key() -> ChainKey {
    ChainKey::new([0x5e; 32])
}

/// The token MCP clients send to the test gateway.
pub const MCP_TOKEN: &str = "e2e-mcp-token-0123456789abcdef0123456789";

/// A running gateway.
#[derive(Debug)]
pub struct Gateway {
    /// Its address.
    pub addr: SocketAddr,
    /// Its audit store (shared across restarts).
    pub audit: AuditStore,
    config: GatewayConfig,
    passkeys: std::sync::Arc<countersign_gateway::passkeys::Passkeys>,
    stop: Option<oneshot::Sender<()>>,
    relay: Option<std::sync::Arc<countersign_gateway::relay::Relay>>,
    window: Option<std::sync::Arc<countersign_gateway::window::ApprovalWindow>>,
}

/// The seed the test gateway signs with (kept across its restarts).
const SIGNING_SEED: [u8; 32] = [0x2c; 32];

impl Gateway {
    /// A verifier of what this gateway signs (countersignatures and receipts), as a
    /// backend or an MCP client that fetched its JWKS would hold.
    pub fn verifier(&self) -> countersign_verify::Verifier {
        countersign_verify::Verifier::new(countersign_gateway::DEFAULT_ISSUER)
            .trust(countersign_verify::Signer::from_seed(&SIGNING_SEED).verifying_key())
    }

    /// Starts the gateway serving `dist`, with `model` as its upstream.
    pub async fn start(dist: PathBuf, model: String, audit_file: PathBuf) -> Result<Self, String> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        // The page is opened at 127.0.0.1, and at localhost where it needs passkeys
        // (WebAuthn takes host names, not IP addresses).
        let localhost = format!("http://localhost:{}", addr.port());
        let mut config = GatewayConfig::local(vec![format!("http://{addr}"), localhost.clone()]);
        config.upstream = Some(Upstream {
            base_url: model,
            model: "scripted".into(),
            key: Some(Secret::new(E2E_KEY)),
        });
        config.dist = Some(dist);
        // The tutorial's archive and reset go through its countersigned backend.
        config.demo_backend = true;
        config.upstream_timeout = Duration::from_secs(10);
        config.mcp_token = Some(Secret::new(MCP_TOKEN));
        let audit = AuditStore::open(audit_file, audit_key()).map_err(|e| e.to_string())?;
        let passkeys = countersign_gateway::passkeys::Passkeys::open(
            &countersign_gateway::passkeys::PasskeyConfig {
                rp_id: "localhost".into(),
                rp_origin: localhost,
                file: None,
            },
        )
        .map_err(|e| e.to_string())?;
        let mut gateway = Self {
            addr,
            audit,
            config,
            passkeys: std::sync::Arc::new(passkeys),
            stop: None,
            relay: None,
            window: None,
        };
        gateway.run(listener)?;
        Ok(gateway)
    }

    /// Starts a gateway like [`Gateway::start`], also serving the approval window at
    /// `approve.localhost` on its port, with the tutorial's server-side declarations.
    pub async fn start_with_window(
        dist: PathBuf,
        model: String,
        audit_file: PathBuf,
    ) -> Result<Self, String> {
        let mut gateway = Self::start(dist, model, audit_file).await?;
        let config = countersign_gateway::window::WindowConfig::new(gateway.window_origin());
        let window = countersign_gateway::window::ApprovalWindow::new(
            &config,
            workspace_settings_actions::for_window,
        )
        .map_err(|e| e.to_string())?;
        gateway.window = Some(std::sync::Arc::new(window));
        gateway.stop().await;
        gateway.restart().await?;
        Ok(gateway)
    }

    /// The approval window's origin (served only with [`Gateway::start_with_window`]).
    pub fn window_origin(&self) -> String {
        format!("http://approve.localhost:{}", self.addr.port())
    }

    /// The approval window, when served.
    pub fn window(&self) -> Option<&countersign_gateway::window::ApprovalWindow> {
        self.window.as_deref()
    }

    /// A one-time code for `person` to enroll in the approval window for `role`, as
    /// `serve --enroll-approver ROLE/PERSON` prints.
    pub fn window_code(&self, role: &str, person: &str) -> Result<String, String> {
        self.window
            .as_ref()
            .ok_or("no approval window")?
            .issue_enrollment_code(role, person)
            .map_err(|e| e.to_string())
    }

    fn run(&mut self, listener: tokio::net::TcpListener) -> Result<(), String> {
        // A kept signing seed, as `serve` keeps one in its file: countersignatures and
        // pages' pairing codes stay valid across a restart.
        let state = AppState::new(self.config.clone(), self.audit.clone())
            .map_err(|e| e.to_string())?
            .with_signing_seed(&SIGNING_SEED)
            .with_passkeys(std::sync::Arc::clone(&self.passkeys));
        let state = match &self.window {
            Some(window) => state.with_window(std::sync::Arc::clone(window)),
            None => state,
        };
        self.relay = Some(std::sync::Arc::clone(&state.relay));
        let (tx, rx) = oneshot::channel::<()>();
        let service = app(state).into_make_service_with_connect_info::<SocketAddr>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, service)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        self.stop = Some(tx);
        Ok(())
    }

    /// The MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The page's URL.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A one-time passkey enrollment code for `user`, as `serve --enroll-user` prints.
    pub fn enrollment_code(&self, user: &str) -> Result<String, String> {
        self.passkeys
            .issue_enrollment_code(user)
            .map_err(|e| e.to_string())
    }

    /// The page's URL at `localhost`, where passkeys work.
    pub fn localhost(&self) -> String {
        format!("http://localhost:{}", self.addr.port())
    }

    /// Stops serving (the page stays loaded in the browser).
    pub async fn stop(&mut self) {
        // As `serve` does on Ctrl-C: pages' relays close, and the pages reconnect.
        if let Some(relay) = self.relay.take() {
            relay.stop();
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Wait until the port refuses connections.
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(self.addr).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Serves again on the same port, with the same audit store.
    pub async fn restart(&mut self) -> Result<(), String> {
        let mut last = String::new();
        for _ in 0..100 {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(listener) => return self.run(listener),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!("could not listen on {} again: {last}", self.addr))
    }
}
