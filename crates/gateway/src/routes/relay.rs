//! The page's side of the MCP relay (see `relay.rs`): a WebSocket at `GET /v1/relay`,
//! behind the API guard (a browser's handshake carries its `Origin`, checked against the
//! allow-list; a browser cannot send a token on a WebSocket, so with a page token
//! configured the relay needs a proxy that adds it), 404 `unknown_route` while MCP is
//! off. A WebSocket, not an event stream: it does not take one of the six HTTP/1.1
//! connections a browser keeps per host (six tabs would otherwise stall every request),
//! and the page's key goes in its first message, never in a URL.
//!
//! The page says `{"type":"hello","key":…}` first (within 10 s); the gateway answers
//! `paired` (the code, the calls that still wait, the largest message it may send), then
//! sends `call` and `cancel`.
//! The page sends `tools` (what it projects for MCP callers) and `result` (a call's
//! answer). A bad message is answered `{"type":"error","message":…}` and changes nothing.
//!
//! Pages are admitted up to the relay's total, and up to a share per client (the peer's
//! address: see [`crate::relay::Client`]); a page over either is told why and closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::response::Response;
use axum::Extension;
use countersign::relay::{ToGateway, ToPage};

use crate::error::{ApiError, ErrorCode};
use crate::relay::{Client, PageTool, Relay, GRACE};
use crate::AppState;

/// How often the gateway pings the page.
const PING: Duration = Duration::from_secs(15);
/// How long the page has to say hello.
const HELLO: Duration = Duration::from_secs(10);

/// What the page sends, with its tools read as the relay keeps them.
enum PageMessage {
    Hello { key: String },
    Tools { tools: Vec<PageTool> },
    Result { id: String, content: String },
}

/// `GET /v1/relay`: the page's WebSocket.
pub(crate) async fn connect(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    if state.config.mcp_token.is_none() {
        return Err(ApiError::new(
            ErrorCode::UnknownRoute,
            "MCP is off on this gateway (start it with --mcp-token-file)",
        ));
    }
    let client = peer.map_or(Client::UNKNOWN, |Extension(ConnectInfo(address))| {
        Client::of(address.ip())
    });
    let relay = Arc::clone(&state.relay);
    let max = relay.max_bytes();
    Ok(upgrade
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| serve_page(relay, client, socket)))
}

fn text(event: &ToPage) -> Message {
    Message::Text(event.to_json().into())
}

fn error(message: impl std::fmt::Display) -> Message {
    text(&ToPage::Error {
        message: message.to_string(),
    })
}

fn parse(message: &str) -> Result<PageMessage, String> {
    Ok(match ToGateway::parse(message)? {
        ToGateway::Hello { key } => PageMessage::Hello { key },
        ToGateway::Tools { tools } => PageMessage::Tools {
            tools: serde_json::from_str(&tools)
                .map_err(|e| format!("not a relay message ({e})"))?,
        },
        ToGateway::Result { id, content } => PageMessage::Result { id, content },
    })
}

async fn serve_page(relay: Arc<Relay>, client: Client, mut socket: WebSocket) {
    let key = match tokio::time::timeout(HELLO, socket.recv()).await {
        Ok(Some(Ok(Message::Text(first)))) => match parse(&first) {
            Ok(PageMessage::Hello { key }) => key,
            Ok(_) => {
                let _ = socket.send(error("say hello first")).await;
                return;
            }
            Err(e) => {
                let _ = socket.send(error(e)).await;
                return;
            }
        },
        _ => return,
    };
    let mut connection = match relay.connect(&key, client) {
        Ok(connection) => connection,
        Err(e) => {
            let _ = socket.send(error(e)).await;
            return;
        }
    };
    let (code, serial) = (connection.code.clone(), connection.serial);
    let mut ping = tokio::time::interval(PING);
    ping.tick().await;
    let mut stopping = relay.stopping();
    let closed_by_page = loop {
        tokio::select! {
            _ = stopping.changed() => {
                if !*stopping.borrow_and_update() {
                    continue;
                }
                // 1012: the service restarts; the page reconnects.
                let close = axum::extract::ws::CloseFrame { code: 1012, reason: "the gateway is stopping".into() };
                let _ = socket.send(Message::Close(Some(close))).await;
                break false;
            }
            event = connection.events.recv() => {
                // `None`: a reconnect of the same page took over.
                let Some(event) = event else { break false };
                if socket.send(text(&event)).await.is_err() {
                    break false;
                }
            }
            message = socket.recv() => match message {
                Some(Ok(Message::Text(message))) => {
                    let done = match parse(&message) {
                        Ok(PageMessage::Tools { tools }) => relay.set_tools(&code, tools),
                        Ok(PageMessage::Result { id, content }) => relay.settle(&code, &id, content),
                        Ok(PageMessage::Hello { .. }) => Ok(()),
                        Err(e) => {
                            let _ = socket.send(error(e)).await;
                            Ok(())
                        }
                    };
                    if let Err(e) = done {
                        let _ = socket.send(error(e)).await;
                    }
                }
                Some(Ok(Message::Close(_))) => break true,
                Some(Ok(Message::Binary(_))) => {
                    let _ = socket.send(error("send text messages")).await;
                }
                Some(Ok(_)) => {}
                None | Some(Err(_)) => break false,
            },
            _ = ping.tick() => {
                if socket.send(Message::Ping(Default::default())).await.is_err() {
                    break false;
                }
            }
        }
    };
    if closed_by_page {
        // The page closed it (it is going away): its calls end now.
        relay.disconnect(&code, serial);
    } else {
        relay.detach(&code, serial);
        tokio::spawn(async move {
            tokio::time::sleep(GRACE).await;
            relay.expire(&code, serial);
        });
    }
}
