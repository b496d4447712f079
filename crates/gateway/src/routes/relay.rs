//! The page's side of the MCP relay (see `relay.rs`): `GET /v1/relay?key=…` opens the
//! event stream (pairing code first, then calls and cancels); the page posts its tools,
//! each call's result, and its goodbye. All behind the API guard (same-origin pages, or
//! the page token), and 404 `unknown_route` while MCP is off.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use futures_util::Stream;
use serde::Deserialize;

use crate::error::{ApiError, ErrorCode};
use crate::extract::JsonBody;
use crate::relay::{PageTool, Relay, RelayError};
use crate::AppState;

/// How often an idle stream is pinged: a page that vanished without its goodbye is
/// noticed within about this long.
const KEEP_ALIVE: Duration = Duration::from_secs(2);

#[derive(Debug, Deserialize)]
pub(crate) struct ConnectQuery {
    key: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsBody {
    key: String,
    tools: Vec<PageTool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultBody {
    key: String,
    id: String,
    /// The JSON the in-page model would get, as text.
    content: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ByeBody {
    key: String,
}

fn relay(state: &AppState) -> Result<&Arc<Relay>, ApiError> {
    if state.config.mcp_token.is_none() {
        return Err(ApiError::new(
            ErrorCode::UnknownRoute,
            "MCP is off on this gateway (start it with --mcp-token-file)",
        ));
    }
    Ok(&state.relay)
}

fn refused(e: RelayError) -> ApiError {
    let code = match e {
        RelayError::BadKey | RelayError::BadTool(_) => ErrorCode::InvalidRequest,
        RelayError::NoPage | RelayError::NoCall => ErrorCode::RelayGone,
        RelayError::Full | RelayError::Busy => ErrorCode::RelayBusy,
    };
    ApiError::new(code, e.to_string())
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            ErrorCode::InvalidRequest,
            format!("the body is not a relay message ({e})"),
        )
    })
}

/// Ends the page's connection when its stream is dropped (the page went away).
struct Disconnect {
    relay: Arc<Relay>,
    code: String,
    serial: u64,
}

impl Drop for Disconnect {
    fn drop(&mut self) {
        self.relay.disconnect(&self.code, self.serial);
    }
}

/// `GET /v1/relay?key=…`: the page's event stream.
pub(crate) async fn connect(
    State(state): State<AppState>,
    Query(query): Query<ConnectQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let relay = Arc::clone(relay(&state)?);
    let connection = relay.connect(&query.key).map_err(refused)?;
    let guard = Disconnect {
        relay,
        code: connection.code,
        serial: connection.serial,
    };
    let stream = futures_util::stream::unfold(
        (connection.events, guard),
        |(mut events, guard)| async move {
            let event = events.recv().await?;
            let data = serde_json::to_string(&event).unwrap_or_default();
            Some((Ok(Event::default().data(data)), (events, guard)))
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

/// `POST /v1/relay/tools`: what the page projects for MCP callers now.
pub(crate) async fn tools(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let relay = relay(&state)?;
    let body: ToolsBody = parse(&body)?;
    relay.set_tools(&body.key, body.tools).map_err(refused)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/relay/result`: the page's answer to one relayed call.
pub(crate) async fn result(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let relay = relay(&state)?;
    let body: ResultBody = parse(&body)?;
    relay
        .settle(&body.key, &body.id, body.content)
        .map_err(refused)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/relay/bye`: the page is going (sent with `sendBeacon` on `pagehide`).
pub(crate) async fn bye(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<impl IntoResponse, ApiError> {
    let relay = relay(&state)?;
    let body: ByeBody = parse(&body)?;
    relay.bye(&body.key).map_err(refused)?;
    Ok(StatusCode::NO_CONTENT)
}
