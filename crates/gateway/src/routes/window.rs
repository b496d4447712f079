//! The approval window's routes: the page's (`/v1/window/requests`, at the page's
//! origin) and the window's own (at the window's origin, nothing else served there).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::passkeys::{parse, Finish};
use crate::error::{ApiError, ErrorCode};
use crate::extract::JsonBody;
use crate::window::{ApprovalWindow, Decision, Opening};
use crate::AppState;

/// The longest a page's `?wait=` holds a request open, in seconds.
const MAX_WAIT_SECS: u64 = 25;

fn window(state: &AppState) -> Result<&Arc<ApprovalWindow>, ApiError> {
    state.window.as_ref().ok_or_else(|| {
        ApiError::new(
            ErrorCode::UnknownRoute,
            "this gateway has no approval window (its server declares none)",
        )
    })
}

/// `POST /v1/window/requests` (the page): the window draws the call's card from the
/// server's declarations and waits for a person; the page opens `url`.
pub(crate) async fn open(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let window = window(&state)?;
    let opening: Opening = parse(&body)?;
    let opened = window.open(opening)?;
    // The page gets its own key to the request (`id` here); the window's address holds
    // the window's id only.
    let url = format!("{}/approve#{}", window.origin(), opened.id);
    Ok(Json(json!({
        "id": opened.key,
        "url": url,
        "card": opened.card,
        "card_sha256": opened.card_sha256,
        "deadline_ms": opened.deadline_ms,
    })))
}

#[derive(Deserialize)]
pub(crate) struct Wait {
    /// Seconds to wait for a decision (at most [`MAX_WAIT_SECS`]); 0 answers at once.
    #[serde(default)]
    wait: u64,
}

/// `GET /v1/window/requests/{id}?wait=N` (the page): the request's state, waiting up to
/// N seconds for a decision; with `approved`, the countersignature and who approved.
pub(crate) async fn outcome(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(wait): Query<Wait>,
) -> Result<Json<Value>, ApiError> {
    let window = window(&state)?;
    // Answered before the request timeout (the upstream's, plus 5 s) cuts the wait off.
    let most = MAX_WAIT_SECS.min(state.config.upstream_timeout.as_secs());
    let wait = Duration::from_secs(wait.wait.min(most));
    let decision = window.wait(&id, wait).await?;
    Ok(Json(decision_json(&decision)))
}

/// `DELETE /v1/window/requests/{id}` (the page): the call settled in the page; the window
/// says so and takes no approval for it.
pub(crate) async fn withdraw(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    window(&state)?.withdraw(&id)?;
    Ok(Json(json!({ "withdrawn": true })))
}

fn decision_json(decision: &Decision) -> Value {
    match decision {
        Decision::Approved {
            token,
            jti,
            expires_at,
            approver,
        } => json!({
            "state": decision.name(),
            "countersignature": token,
            "id": jti,
            "expires_at": expires_at,
            "approver": approver,
            "presence": "window",
        }),
        _ => json!({ "state": decision.name() }),
    }
}

/// The window's own routes, served only at its host: the page, its script and style,
/// and the API the page's script uses.
pub(crate) fn routes(state: AppState) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/approve", get(page))
        .route("/enroll", get(page))
        .route("/inbox", get(page))
        .route("/api/signin", post(signin))
        .route("/api/signin/finish", post(signed_in))
        .route("/api/signout", post(sign_out))
        .route("/api/inbox", get(inbox))
        .route("/api/inbox/events", get(events))
        .route("/window.js", get(script))
        .route("/window.css", get(style))
        .route("/api/requests/{id}", get(view))
        .route("/api/requests/{id}/qr.svg", get(qr))
        .route("/api/requests/{id}/challenge", post(challenge))
        .route("/api/requests/{id}/approve", post(approve))
        .route("/api/requests/{id}/deny", post(deny))
        .route("/api/enroll", post(enroll))
        .route("/api/enroll/finish", post(enrolled))
        .fallback(|| async {
            ApiError::new(
                ErrorCode::UnknownRoute,
                "no such route in the approval window",
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            window_guard,
        ))
        .with_state(state)
}

/// In front of every window route: a write comes only from the window's own origin (a
/// page script's request to it carries the page's `Origin`), and every answer forbids
/// framing (no page can overlay it), opener access and caching.
async fn window_guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(window) = state.window.as_deref() else {
        return ApiError::new(ErrorCode::UnknownRoute, "no approval window").into_response();
    };
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok());
    // INVARIANT: nothing but the window's own script changes a request or enrolls.
    if request.method() != Method::GET && origin != Some(window.origin()) {
        return ApiError::new(
            ErrorCode::OriginNotAllowed,
            "only the approval window itself may do this",
        )
        .into_response();
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (
            "content-security-policy",
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
        ("x-frame-options", "DENY"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
        ("referrer-policy", "no-referrer"),
        ("x-content-type-options", "nosniff"),
        ("cache-control", "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn page() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        include_str!("../window/window.html"),
    )
}

async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../window/window.js"),
    )
}

async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../window/window.css"),
    )
}

async fn view(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let view = window(&state)?.view(&id)?;
    let approver = match &view.decision {
        Decision::Approved { approver, .. } => Some(approver.clone()),
        _ => None,
    };
    Ok(Json(json!({
        "arguments_text": serde_json::to_string_pretty(&view.card.arguments).unwrap_or_default(),
        "card": view.card,
        "card_sha256": view.card_sha256,
        "session": view.session,
        "caller": view.caller,
        "opened_ms": view.opened_ms,
        "deadline_ms": view.deadline_ms,
        "state": view.decision.name(),
        "approver": approver,
    })))
}

/// The request's address as a QR code (SVG), to open it on another device (a phone).
async fn qr(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let window = window(&state)?;
    // Only for a request that exists: the code carries its id.
    window.view(&id)?;
    let url = format!("{}/approve#{id}", window.origin());
    let code = qrcode::QrCode::new(url.as_bytes()).map_err(|_| {
        ApiError::new(
            ErrorCode::InvalidRequest,
            "the address does not fit a QR code",
        )
    })?;
    let svg = code
        .render::<qrcode::render::svg::Color<'_>>()
        .min_dimensions(200, 200)
        .build();
    Ok(([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response())
}

async fn challenge(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    window(&state)?.challenge(&id).map(Json)
}

async fn approve(
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let window = Arc::clone(window(&state)?);
    let finish: Finish = parse(&body)?;
    let (body, approver, credential) = window.verify(&id, &finish.ceremony, &finish.credential)?;
    // INVARIANT: a request taken to `Deciding` is always settled. Minting runs on a task
    // of its own, so a person who closes the window mid-way (the connection, and this
    // handler, dropped) leaves no request stuck.
    let task = tokio::spawn(async move {
        let minted =
            super::countersign::issue(&state, &body, Some(credential), Some(approver.clone()))
                .await;
        match minted {
            Ok(minted) => {
                tracing::info!(action = %body.action, %approver, "approved in the approval window");
                window.settle(
                    &id,
                    Decision::Approved {
                        token: minted.token,
                        jti: minted.jti,
                        expires_at: minted.expires_at,
                        approver: approver.clone(),
                    },
                );
                Ok(approver)
            }
            Err(e) => {
                // Nothing was minted: the request waits again.
                window.settle(&id, Decision::Waiting);
                Err(e)
            }
        }
    });
    let approver = task.await.map_err(|_| {
        ApiError::new(
            ErrorCode::AuditUnavailable,
            "the approval could not be recorded",
        )
    })??;
    Ok(Json(json!({ "approved": true, "approver": approver })))
}

async fn deny(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    window(&state)?.deny(&id)?;
    Ok(Json(json!({ "denied": true })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Enroll {
    role: String,
    person: String,
    code: String,
}

async fn enroll(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let enroll: Enroll = parse(&body)?;
    if !crate::window::valid_name(&enroll.role) || !crate::window::valid_name(&enroll.person) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "a role or a name is 1 to 64 letters, digits, `_`, `-` or `.`",
        ));
    }
    let (ceremony, options) = window(&state)?
        .passkeys()
        .start_registration(&format!("{}/{}", enroll.role, enroll.person), &enroll.code)
        .map_err(|e| super::passkeys::refusal(&e))?;
    Ok(Json(json!({ "ceremony": ceremony, "options": options })))
}

async fn enrolled(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let finish: Finish = parse(&body)?;
    let user = window(&state)?
        .passkeys()
        .finish_registration(&finish.ceremony, &finish.credential)
        .map_err(|e| super::passkeys::refusal(&e))?;
    let (role, person) = user.split_once('/').unwrap_or(("", &user));
    tracing::info!(role, person, "approver enrolled in the approval window");
    Ok(Json(
        json!({ "registered": true, "role": role, "person": person }),
    ))
}

/// `POST /api/signin`: a sign-in ceremony for the inbox, over every approver's passkey.
async fn signin(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    window(&state)?.start_signin().map(Json)
}

/// `POST /api/signin/finish`: the assertion; a session cookie for the window's origin.
async fn signed_in(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let window = window(&state)?;
    let finish: Finish = parse(&body)?;
    let (session, who) = window.finish_signin(&finish.ceremony, &finish.credential)?;
    let secure = if window.origin().starts_with("https:") {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{}={session}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
        cookie_name(window),
        crate::window::inbox::SESSION.as_secs()
    );
    let cookie = HeaderValue::from_str(&cookie)
        .map_err(|_| ApiError::new(ErrorCode::InvalidRequest, "no session"))?;
    let (role, person) = who.split_once('/').unwrap_or(("", &who));
    tracing::info!(role, person, "signed in to the approval window's inbox");
    let mut response = Json(json!({ "role": role, "person": person })).into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    Ok(response)
}

/// The inbox cookie's name: over https `__Host-` prefixed, so no sibling host of the same
/// site (the app's own, say) can plant one.
fn cookie_name(window: &ApprovalWindow) -> String {
    if window.origin().starts_with("https:") {
        format!("__Host-{}", crate::window::inbox::COOKIE)
    } else {
        crate::window::inbox::COOKIE.to_owned()
    }
}

/// The inbox cookies the request carries (a planted one may come first).
fn sessions(window: &ApprovalWindow, headers: &axum::http::HeaderMap) -> Vec<String> {
    let prefix = format!("{}=", cookie_name(window));
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().strip_prefix(prefix.as_str()))
        .map(str::to_owned)
        .collect()
}

/// Who the request's inbox cookie signs in (`role/person`), and its session.
fn who(
    window: &ApprovalWindow,
    headers: &axum::http::HeaderMap,
) -> Result<(String, String), ApiError> {
    let mut refusal = None;
    for session in sessions(window, headers) {
        match window.signed_in(&session) {
            Ok(who) => return Ok((who, session)),
            Err(e) => refusal = Some(e),
        }
    }
    Err(refusal.unwrap_or_else(|| {
        ApiError::new(
            ErrorCode::Unauthorized,
            "sign in to the approval window with your passkey",
        )
    }))
}

/// `POST /api/signout`: ends this device's inbox session.
async fn sign_out(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let window = window(&state)?;
    for session in sessions(window, &headers) {
        window.sign_out(&session);
    }
    let expired = format!(
        "{}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
        cookie_name(window)
    );
    let mut response = Json(json!({ "signed_out": true })).into_response();
    if let Ok(value) = HeaderValue::from_str(&expired) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// `GET /api/inbox`: who is signed in, and what waits for their role.
async fn inbox(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let window = window(&state)?;
    let (who, _) = who(window, &headers)?;
    let (role, person) = who.split_once('/').unwrap_or(("", &who));
    let waiting: Vec<Value> = window
        .waiting_for(role)
        .into_iter()
        .map(|(id, view)| {
            json!({
                "id": id,
                "card": view.card,
                "session": view.session,
                "caller": view.caller,
                "opened_ms": view.opened_ms,
                "deadline_ms": view.deadline_ms,
            })
        })
        .collect();
    Ok(Json(
        json!({ "role": role, "person": person, "waiting": waiting }),
    ))
}

/// `GET /api/inbox/events`: an event stream that says `changed` whenever an approval is
/// opened or decided (the inbox then asks again).
async fn events(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let window = Arc::clone(window(&state)?);
    let (_, session) = who(&window, &headers)?;
    let changes = window.changes();
    // The stream lasts while the session does: checked at each change and each minute,
    // so a revoked person's or an expired session's stream ends.
    let stream = futures_util::stream::unfold(
        (window, session, changes, true),
        |(window, session, mut changes, first)| async move {
            if !first {
                loop {
                    let changed =
                        tokio::time::timeout(Duration::from_secs(60), changes.changed()).await;
                    if window.signed_in(&session).is_err() {
                        return None;
                    }
                    match changed {
                        Ok(Ok(())) => break,
                        Ok(Err(_)) => return None,
                        Err(_) => continue,
                    }
                }
            }
            let event = Event::default().data("changed");
            Some((
                Ok::<_, std::convert::Infallible>(event),
                (window, session, changes, false),
            ))
        },
    );
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}
