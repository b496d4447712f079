//! The MCP endpoint (`/mcp`, Streamable HTTP, served with `rmcp`): an MCP client (a
//! desktop assistant, an IDE agent) calls the actions of the page it is paired with.
//!
//! - Every request needs `Authorization: Bearer <MCP token>`; a request from a browser
//!   (one carrying `Origin`) is refused, so no page can reach it.
//! - `Countersign-Page: <pairing code>` names the page, on every request. Without it, or
//!   with a page that is not connected, the tool list is empty and a call gets an error.
//! - Tools are what that page projects for MCP callers, with `readOnlyHint` for `Read`
//!   and `destructiveHint` for `Danger`, `openWorldHint` for what returns untrusted
//!   content; a change is announced as `tools/list_changed`.
//! - A `tools/call` is relayed to the page, where the executor and the dock handle it as
//!   any call; the client gets the same JSON the in-page model would, progress while a
//!   person decides, and a cancel (or a disconnect) withdraws the call in the page.
//! - Legacy (before 2026-07-28) clients get a session each, at most [`MAX_SESSIONS`]
//!   open at once; past that, `initialize` is refused with 503 and a JSON-RPC error.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientJsonRpcMessage, ClientRequest,
    Implementation, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, SubscriptionFilter, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};

use crate::error::{ApiError, ErrorCode};
use crate::relay::{normalize_code, PageTool, Relay, RelayError};
use crate::AppState;

/// The header that names the paired page.
pub(crate) const PAGE_HEADER: &str = "countersign-page";
/// How often a client waiting on a person hears that the call still waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// The longest a relayed call waits for the page (its cards time out well before: five
/// minutes by default); then it is withdrawn and the client told.
const CALL_DEADLINE: Duration = Duration::from_secs(15 * 60);
/// How often a legacy session's change listener checks that its client is still there.
const SESSION_CHECK: Duration = Duration::from_secs(5);
/// The most legacy sessions open at once. Each costs about 100 KiB and lasts until its
/// client ends it or it has been idle five minutes. Every MCP client holds the gateway's
/// one token, so this is the cap per token and the cap in total alike.
pub(crate) const MAX_SESSIONS: usize = 128;
/// The JSON-RPC error code of a refused session (one of the codes JSON-RPC leaves to
/// servers).
const TOO_MANY_SESSIONS: i64 = -32000;

/// The MCP server of one request (or one legacy session): the relay is shared.
#[derive(Clone, Debug)]
pub(crate) struct McpServer {
    pub(crate) relay: Arc<Relay>,
    /// What signs the receipt each result carries.
    pub(crate) receipts: Receipts,
    /// A legacy session's change listener is running (one per session).
    pub(crate) listening: Arc<std::sync::atomic::AtomicBool>,
}

/// The pairing code the request names, if it names one well formed.
fn paired(extensions: &rmcp::model::Extensions) -> Option<String> {
    let parts = extensions.get::<axum::http::request::Parts>()?;
    let text = parts.headers.get(PAGE_HEADER)?.to_str().ok()?;
    normalize_code(text)
}

/// A refusal from the gateway itself, in the gate's own shape.
fn refused(code: &str, message: &str) -> CallToolResponse {
    CallToolResult::structured_error(json!({
        "ok": false,
        "error": { "code": code, "reason": code.to_ascii_lowercase(), "message": message, "retry": false }
    }))
    .into()
}

fn as_mcp_tool(tool: &PageTool) -> Tool {
    let annotations = ToolAnnotations::with_title(tool.annotations.title.clone())
        .read_only(tool.annotations.read_only_hint)
        .destructive(tool.annotations.destructive_hint)
        .open_world(tool.annotations.untrusted_content_hint);
    Tool::new(
        tool.name.clone(),
        tool.description.clone(),
        Arc::new(tool.parameters.clone()),
    )
    .with_title(tool.annotations.title.clone())
    .with_annotations(annotations)
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> InitializeResult {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new(
                "countersign-gateway",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "These tools act in a web page a person has open. Consequential calls wait \
                 until the person approves them in the page, or does the last step; the \
                 result says what happened. Send the page's pairing code (shown in its \
                 dock's settings) as the `Countersign-Page` header.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = paired(&context.extensions)
            .map(|code| self.relay.tools(&code).iter().map(as_mcp_tool).collect())
            .unwrap_or_default();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(code) = paired(&context.extensions) else {
            return Ok(refused(
                "NOT_PAIRED",
                "no page is paired: send the pairing code shown in the page's dock settings as the \
                 `Countersign-Page` header",
            ));
        };
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let args_sha256 = countersign::audit::ArgsDigest::of_value(&arguments).to_hex();
        let arguments = arguments.to_string();
        let (id, mut answer) = match self.relay.start_call(&code, &request.name, arguments) {
            Ok(started) => started,
            Err(RelayError::NoPage) => {
                return Ok(refused(
                    "PAGE_NOT_CONNECTED",
                    &format!("no page with pairing code {code} is open; open it, or check the code in its dock's settings"),
                ))
            }
            Err(e) => return Ok(refused("UNAVAILABLE", &e.to_string())),
        };
        // Read when the call ends, however it ends: an approval minted before a timeout
        // or the page going away is still named.
        let slot = self.relay.approval_slot(&code, &id).unwrap_or_default();
        let approval = move || {
            slot.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        };
        let progress = context.meta.get_progress_token();
        let mut ticks = tokio::time::interval(PROGRESS_EVERY);
        let mut sent = 0u32;
        let deadline = tokio::time::sleep(CALL_DEADLINE);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                settled = &mut answer => {
                    let (response, by) = match settled {
                        Ok(content) => (settled_result(&content), Said::Page),
                        Err(_) => (refused(
                            "PAGE_GONE",
                            "the page closed before the call ended; whether it ran is in the page's audit trail",
                        ), Said::Gateway),
                    };
                    let asked = Asked { call: &id, action: &request.name, args_sha256 };
                    return Ok(self.receipts.attach(response, asked, by, approval()));
                }
                () = context.ct.cancelled() => {
                    self.relay.cancel(&code, &id);
                    return Err(ErrorData::internal_error(
                        "cancelled: a card still waiting in the page is withdrawn; a run already under way, or a handoff the person started, finishes there (see the page's audit trail)",
                        None,
                    ));
                }
                () = &mut deadline => {
                    self.relay.cancel(&code, &id);
                    let response = refused(
                        "TIMEOUT",
                        "the page did not answer within 15 minutes; a card still waiting was withdrawn",
                    );
                    let asked = Asked { call: &id, action: &request.name, args_sha256 };
                    return Ok(self.receipts.attach(response, asked, Said::Gateway, approval()));
                }
                _ = ticks.tick() => {
                    let Some(token) = progress.clone() else { continue };
                    sent += 1;
                    let note = ProgressNotificationParam::new(token, f64::from(sent))
                        .with_message("relayed to the page; waiting for it (a person may need to approve)");
                    let _ = context.peer.notify_progress(note).await;
                }
            }
        }
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        (requested.tools_list_changed == Some(true))
            .then(|| SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let code = paired(&context.request_context().extensions);
        let mut changes = self.relay.changes();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = next_change(&mut changes, code.as_deref()) => {
                    if changed.is_none() || context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // A legacy (session) client hears of changes on its session's stream: one
        // listener per session, however often it says `initialized`, gone with it.
        if self
            .listening
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let code = paired(&context.extensions);
        let mut changes = self.relay.changes();
        let peer = context.peer;
        tokio::spawn(async move {
            let mut check = tokio::time::interval(SESSION_CHECK);
            loop {
                tokio::select! {
                    changed = next_change(&mut changes, code.as_deref()) => {
                        if changed.is_none() || peer.notify_tool_list_changed().await.is_err() {
                            return;
                        }
                    }
                    _ = check.tick() => {
                        if peer.is_transport_closed() {
                            return;
                        }
                    }
                }
            }
        });
    }
}

/// Waits for a change of the tools of the page paired as `code` (`None` when the relay
/// is gone). Having missed some changes counts as one: the client lists again.
async fn next_change(
    changes: &mut tokio::sync::broadcast::Receiver<String>,
    code: Option<&str>,
) -> Option<()> {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match changes.recv().await {
            Ok(changed) if Some(changed.as_str()) == code => return Some(()),
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return Some(()),
            Err(RecvError::Closed) => return None,
        }
    }
}

/// The page's answer as the client's result: `isError` when it did not go through.
fn settled_result(content: &str) -> CallToolResponse {
    match serde_json::from_str::<Value>(content) {
        Ok(value) if value.get("ok") == Some(&Value::Bool(true)) => {
            CallToolResult::structured(value).into()
        }
        Ok(value) if value.is_object() => CallToolResult::structured_error(value).into(),
        _ => refused(
            "PAGE_ERROR",
            "the page answered with something that is not a result",
        ),
    }
}

/// Signs the receipt that goes with every result of a relayed call: how it ended, the
/// arguments the client sent, the result it gets, and the approval (the countersignature
/// the gateway minted for the call), all in the result's `_meta`.
#[derive(Clone, Debug)]
pub(crate) struct Receipts {
    pub(crate) signer: Arc<countersign_verify::Signer>,
    pub(crate) issuer: String,
}

/// The `_meta` key of the countersignature a result carries.
pub(crate) const META_APPROVAL: &str = "countersign/approval";
/// The `_meta` key of the signed receipt a result carries.
pub(crate) const META_RECEIPT: &str = "countersign/receipt";

/// The call a receipt is about, as the client asked it.
struct Asked<'a> {
    call: &'a str,
    action: &'a str,
    args_sha256: String,
}

/// Who said how a call ended.
#[derive(Clone, Copy)]
enum Said {
    /// The page answered (its word).
    Page,
    /// The gateway ended it (the page went away, or did not answer in time).
    Gateway,
}

impl Receipts {
    /// `response` with the approval (if any) and a signed receipt in its `_meta`.
    fn attach(
        &self,
        response: CallToolResponse,
        asked: Asked<'_>,
        said: Said,
        approval: Option<crate::relay::Approved>,
    ) -> CallToolResponse {
        let Asked {
            call,
            action,
            args_sha256,
        } = asked;
        let CallToolResponse::Complete(mut result) = response else {
            return response;
        };
        let value = result.structured_content.clone().unwrap_or(Value::Null);
        let ok = value.get("ok") == Some(&Value::Bool(true));
        let code = match value.pointer("/error/code").and_then(Value::as_str) {
            _ if ok => "OK",
            Some(code) => code,
            None => "PAGE_ERROR",
        };
        let mut jti = [0u8; 16];
        let _ = getrandom::fill(&mut jti);
        let claims = countersign_verify::ReceiptClaims {
            iss: self.issuer.clone(),
            iat: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            jti: crate::audit_store::hex(&jti),
            act: countersign_verify::Actor {
                sub: countersign::Caller::Mcp,
            },
            outcome: countersign_verify::CallOutcome {
                call: call.to_owned(),
                action: action.to_owned(),
                args_sha256,
                ok,
                code: code.to_owned(),
                said_by: match said {
                    Said::Page => "page".into(),
                    Said::Gateway => "gateway".into(),
                },
                // The result's text content is exactly this JSON text.
                result_sha256: countersign_verify::token_sha256(&value.to_string()),
                approval_sha256: approval
                    .as_ref()
                    .map(|a| countersign_verify::token_sha256(&a.token)),
                approval_jti: approval.as_ref().map(|a| a.jti.clone()),
            },
        };
        let mut meta = serde_json::Map::new();
        if let Some(approved) = approval {
            meta.insert(META_APPROVAL.into(), Value::String(approved.token));
        }
        match self.signer.sign_receipt(&claims) {
            Ok(receipt) => {
                tracing::info!(call, action, code, receipt = %claims.jti, "mcp: receipt signed");
                meta.insert(META_RECEIPT.into(), Value::String(receipt));
            }
            Err(e) => tracing::error!(error = %e, "mcp: the receipt could not be encoded"),
        }
        result.meta = Some(rmcp::model::MetaObject(meta));
        CallToolResponse::Complete(result)
    }
}

/// The legacy sessions: those open (the session manager's) and those being opened.
#[derive(Debug)]
pub(crate) struct Sessions {
    manager: Arc<LocalSessionManager>,
    opening: AtomicUsize,
}

impl Sessions {
    /// Counts the sessions `manager` keeps.
    pub(crate) fn new(manager: Arc<LocalSessionManager>) -> Self {
        Self {
            manager,
            opening: AtomicUsize::new(0),
        }
    }
}

/// An `initialize` in flight, counted until its answer is ready (its session, if any,
/// is in the manager by then).
struct Opening<'a>(&'a AtomicUsize);

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The session cap in front of `/mcp`: a `POST` without `Mcp-Session-Id` whose body is
/// an `initialize` request (read as `rmcp` reads it) opens a session, so it is refused
/// once [`MAX_SESSIONS`] are open or being opened. Everything else passes. The body is
/// read here, within the body cap.
pub(crate) async fn session_cap(
    State((sessions, max_bytes)): State<(Arc<Sessions>, usize)>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST || request.headers().contains_key("mcp-session-id") {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match read_within(body, max_bytes).await {
        Ok(bytes) => bytes,
        Err(e) => return e.into_response(),
    };
    let initialize = match serde_json::from_slice::<ClientJsonRpcMessage>(&bytes) {
        Ok(ClientJsonRpcMessage::Request(request))
            if matches!(request.request, ClientRequest::InitializeRequest(_)) =>
        {
            Some(request.id)
        }
        _ => None,
    };
    let request = Request::from_parts(parts, Body::from(bytes));
    let Some(id) = initialize else {
        return next.run(request).await;
    };
    // INVARIANT: counted before the open sessions are read, and until its own session is
    // among them: of two concurrent openings, the later one counts the earlier.
    let opening = sessions.opening.fetch_add(1, Ordering::SeqCst) + 1;
    let _counted = Opening(&sessions.opening);
    let open = sessions.manager.sessions.read().await.len();
    if open + opening > MAX_SESSIONS {
        let message = format!(
            "too many MCP sessions are open on this gateway ({MAX_SESSIONS}, the most it keeps); \
             end one (DELETE /mcp with its Mcp-Session-Id) or wait until one has been idle for \
             5 minutes. Clients of protocol 2026-07-28 or later need no session."
        );
        let body = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": { "code": TOO_MANY_SESSIONS, "message": message },
        });
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    }
    next.run(request).await
}

/// The whole body, refused (413) past `max_bytes`.
async fn read_within(body: Body, max_bytes: usize) -> Result<bytes::Bytes, ApiError> {
    use futures_util::StreamExt as _;
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk
            .map_err(|_| ApiError::new(ErrorCode::UnreadableBody, "the body could not be read"))?;
        if bytes.len() + chunk.len() > max_bytes {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("the body is over the limit of {max_bytes} bytes"),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes.into())
}

/// The MCP endpoint's guard: no browser requests, and the MCP token.
pub(crate) async fn mcp_guard(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    match check(&state, request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

fn check(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if headers.contains_key(header::ORIGIN) {
        return Err(ApiError::new(
            ErrorCode::OriginNotAllowed,
            "the MCP endpoint does not take requests from web pages",
        ));
    }
    let Some(token) = &state.config.mcp_token else {
        return Err(ApiError::new(
            ErrorCode::UnknownRoute,
            "MCP is off on this gateway",
        ));
    };
    if crate::guard::bears(headers, token) {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::Unauthorized,
            "the MCP endpoint needs `Authorization: Bearer <the gateway's MCP token>`",
        ))
    }
}
