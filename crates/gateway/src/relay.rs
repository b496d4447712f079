//! The page relay: how an MCP client's tool calls reach the page that will ask the
//! person. A page opens `GET /v1/relay` (server-sent events) with a random key it keeps
//! in memory; the gateway answers with the page's **pairing code**, derived from that
//! key, which the dock shows. An MCP client names the page it acts in by sending that
//! code (`Countersign-Page`) on every request: the gateway never picks a page for it.
//!
//! The page posts the tools it projects for MCP callers and, for each relayed call, the
//! same JSON the in-page model gets. Nothing here approves anything: the call goes through
//! the page's executor and its dock like any other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::{broadcast, mpsc, oneshot};

/// The most pages connected at once.
pub const MAX_PAGES: usize = 64;
/// The most calls one page may have waiting.
pub const MAX_CALLS_PER_PAGE: usize = 16;
/// The most tools one page may offer.
pub const MAX_TOOLS: usize = 256;
/// How many events may queue for a page before a new call is refused as busy.
const EVENT_QUEUE: usize = 64;

/// A message to a page, sent as one server-sent event (`data:` its JSON).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PageEvent {
    /// The first event: the code the dock shows.
    Paired {
        /// The pairing code.
        code: String,
    },
    /// An MCP client's tool call, for the page's executor.
    Call {
        /// The call's id (the executor's `tool_call_id`); unique per gateway start.
        id: String,
        /// The tool (action) name, as the client sent it.
        name: String,
        /// The arguments as JSON text, as the client sent them.
        arguments: String,
    },
    /// The client cancelled the call, or went away: withdraw it if it still waits.
    Cancel {
        /// The call's id.
        id: String,
    },
}

/// A tool as the page posts it: the core's `ToolSpec`, as serialised.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageTool {
    /// The action id.
    pub name: String,
    /// What it does, and how the gate treats it.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: serde_json::Map<String, serde_json::Value>,
    /// Its risk hints.
    pub annotations: PageToolAnnotations,
}

/// A tool's hints, as the page posts them.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PageToolAnnotations {
    /// The action's title.
    pub title: String,
    /// A `Read` action.
    pub read_only_hint: bool,
    /// A `Danger` action.
    pub destructive_hint: bool,
    /// The resolved approval policy (shown, never trusted).
    pub approval: serde_json::Value,
    /// The person does the last step.
    pub handoff: bool,
}

/// Why the relay refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RelayError {
    /// The key is not 32 to 128 characters of `[A-Za-z0-9_-]`.
    #[error("the relay key must be 32 to 128 characters of A-Z, a-z, 0-9, `_` or `-`")]
    BadKey,
    /// No page with that key (or code) is connected.
    #[error("no page is connected with that pairing code")]
    NoPage,
    /// As many pages as allowed are connected.
    #[error("too many pages are connected to this gateway")]
    Full,
    /// The page has as many calls waiting as allowed, or its event queue is full.
    #[error("the page has too many calls waiting; let them finish first")]
    Busy,
    /// A tool the page posted is not valid.
    #[error("{0}")]
    BadTool(String),
    /// No such call is waiting (it ended, or was cancelled).
    #[error("no such call is waiting")]
    NoCall,
}

/// The relay's state, shared by the page routes and the MCP endpoint.
#[derive(Debug)]
pub struct Relay {
    pages: Mutex<HashMap<String, Page>>,
    /// The pairing code of a page whose tools changed (or that came or went).
    changes: broadcast::Sender<String>,
    /// Random per gateway start, so call ids never repeat across restarts.
    boot: String,
    next_id: AtomicU64,
}

#[derive(Debug)]
struct Page {
    key: [u8; 32],
    connection: u64,
    events: mpsc::Sender<PageEvent>,
    tools: Arc<Vec<PageTool>>,
    calls: HashMap<String, oneshot::Sender<String>>,
}

/// One page's open event stream: its events, and who it is for the disconnect.
#[derive(Debug)]
pub struct Connection {
    /// The pairing code.
    pub code: String,
    /// Which connection of this page this is (a reconnect replaces the one before).
    pub serial: u64,
    /// The events for the page, `Paired` first.
    pub events: mpsc::Receiver<PageEvent>,
}

impl Default for Relay {
    fn default() -> Self {
        Self::new()
    }
}

impl Relay {
    /// An empty relay.
    pub fn new() -> Self {
        let mut boot = [0u8; 6];
        let _ = getrandom::fill(&mut boot);
        Self {
            pages: Mutex::default(),
            changes: broadcast::channel(64).0,
            boot: boot.iter().map(|b| format!("{b:02x}")).collect(),
            next_id: AtomicU64::new(0),
        }
    }

    fn pages(&self) -> MutexGuard<'_, HashMap<String, Page>> {
        self.pages.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A page connects (or reconnects) with `key`. A reconnect keeps its code, tools and
    /// waiting calls and replaces the stream before.
    pub fn connect(&self, key: &str) -> Result<Connection, RelayError> {
        let digest = key_digest(key)?;
        let code = pairing_code(&digest);
        let (sender, events) = mpsc::channel(EVENT_QUEUE);
        let _ = sender.try_send(PageEvent::Paired { code: code.clone() });
        let mut pages = self.pages();
        let count = pages.len();
        let serial = match pages.get_mut(&code) {
            Some(page) if page.key == digest => {
                page.connection += 1;
                page.events = sender;
                page.connection
            }
            // Another key with the same code (2^-60 by chance): the first keeps it.
            Some(_) => return Err(RelayError::Full),
            None if count >= MAX_PAGES => return Err(RelayError::Full),
            None => {
                pages.insert(
                    code.clone(),
                    Page {
                        key: digest,
                        connection: 0,
                        events: sender,
                        tools: Arc::default(),
                        calls: HashMap::new(),
                    },
                );
                0
            }
        };
        Ok(Connection {
            code,
            serial,
            events,
        })
    }

    /// The page's stream `serial` ended: unless a reconnect replaced it, the page is
    /// gone, and so are its tools; its waiting calls end with "the page went away".
    pub fn disconnect(&self, code: &str, serial: u64) {
        let mut pages = self.pages();
        if pages.get(code).is_some_and(|p| p.connection == serial) {
            pages.remove(code);
            drop(pages);
            let _ = self.changes.send(code.to_owned());
        }
    }

    /// The page says it is going (`pagehide`).
    pub fn bye(&self, key: &str) -> Result<(), RelayError> {
        let code = self.code_of(key)?;
        self.pages().remove(&code);
        let _ = self.changes.send(code);
        Ok(())
    }

    /// The page's tools are now `tools`.
    pub fn set_tools(&self, key: &str, tools: Vec<PageTool>) -> Result<(), RelayError> {
        check_tools(&tools)?;
        let code = self.code_of(key)?;
        let mut pages = self.pages();
        let page = pages.get_mut(&code).ok_or(RelayError::NoPage)?;
        if *page.tools != tools {
            page.tools = Arc::new(tools);
            drop(pages);
            let _ = self.changes.send(code);
        }
        Ok(())
    }

    /// The page answers call `id` with `content` (the JSON the in-page model would get).
    pub fn settle(&self, key: &str, id: &str, content: String) -> Result<(), RelayError> {
        let code = self.code_of(key)?;
        let mut pages = self.pages();
        let page = pages.get_mut(&code).ok_or(RelayError::NoPage)?;
        let waiting = page.calls.remove(id).ok_or(RelayError::NoCall)?;
        waiting.send(content).map_err(|_| RelayError::NoCall)
    }

    /// The tools of the page paired by `code`; none when no such page is connected.
    pub fn tools(&self, code: &str) -> Arc<Vec<PageTool>> {
        self.pages()
            .get(code)
            .map(|p| Arc::clone(&p.tools))
            .unwrap_or_default()
    }

    /// Relays a call to the page paired by `code`. The receiver gets the page's answer,
    /// or an error when the page goes away first.
    pub fn start_call(
        &self,
        code: &str,
        name: &str,
        arguments: String,
    ) -> Result<(String, oneshot::Receiver<String>), RelayError> {
        let mut pages = self.pages();
        let page = pages.get_mut(code).ok_or(RelayError::NoPage)?;
        if page.calls.len() >= MAX_CALLS_PER_PAGE {
            return Err(RelayError::Busy);
        }
        let n = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("mcp-{}-{n}", self.boot);
        let event = PageEvent::Call {
            id: id.clone(),
            name: name.to_owned(),
            arguments,
        };
        page.events.try_send(event).map_err(|_| RelayError::Busy)?;
        let (sender, receiver) = oneshot::channel();
        page.calls.insert(id.clone(), sender);
        Ok((id, receiver))
    }

    /// The client cancelled call `id`, or went away: the page withdraws it if it waits.
    pub fn cancel(&self, code: &str, id: &str) {
        let mut pages = self.pages();
        if let Some(page) = pages.get_mut(code) {
            if page.calls.remove(id).is_some() {
                let _ = page
                    .events
                    .try_send(PageEvent::Cancel { id: id.to_owned() });
            }
        }
    }

    /// Pairing codes whose tools changed, as they change.
    pub fn changes(&self) -> broadcast::Receiver<String> {
        self.changes.subscribe()
    }

    fn code_of(&self, key: &str) -> Result<String, RelayError> {
        let digest = key_digest(key)?;
        let code = pairing_code(&digest);
        match self.pages().get(&code) {
            Some(page) if page.key == digest => Ok(code),
            _ => Err(RelayError::NoPage),
        }
    }
}

fn key_digest(key: &str) -> Result<[u8; 32], RelayError> {
    let ok = (32..=128).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !ok {
        return Err(RelayError::BadKey);
    }
    let mut hash = Sha256::new();
    hash.update(b"countersign/relay/v1\0");
    hash.update(key.as_bytes());
    Ok(hash.finalize().into())
}

/// 60 bits of the key's digest in Crockford's base32, as `XXXX-XXXX-XXXX`.
fn pairing_code(digest: &[u8; 32]) -> String {
    const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let bits = digest[..8]
        .iter()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
    let mut code = String::with_capacity(14);
    for i in 0..12 {
        if i > 0 && i % 4 == 0 {
            code.push('-');
        }
        let index = usize::try_from((bits >> (59 - 5 * i)) & 31).unwrap_or(0);
        code.push(char::from(ALPHABET.get(index).copied().unwrap_or(b'0')));
    }
    code
}

/// A code as a person may type it: upper-cased, `O`→`0`, `I`/`L`→`1`, dashes and
/// spaces ignored, then grouped again.
pub fn normalize_code(text: &str) -> Option<String> {
    let mut plain = String::with_capacity(12);
    for c in text.chars() {
        let c = match c.to_ascii_uppercase() {
            '-' | ' ' => continue,
            'O' => '0',
            'I' | 'L' => '1',
            c => c,
        };
        if !c.is_ascii_alphanumeric() || c == 'U' || plain.len() == 12 {
            return None;
        }
        plain.push(c);
    }
    if plain.len() != 12 {
        return None;
    }
    let group = |range: std::ops::Range<usize>| plain.get(range).unwrap_or_default();
    Some(format!("{}-{}-{}", group(0..4), group(4..8), group(8..12)))
}

fn check_tools(tools: &[PageTool]) -> Result<(), RelayError> {
    if tools.len() > MAX_TOOLS {
        return Err(RelayError::BadTool(format!(
            "a page may offer at most {MAX_TOOLS} tools"
        )));
    }
    let mut names = std::collections::HashSet::new();
    for tool in tools {
        let name_ok = (1..=64).contains(&tool.name.len())
            && tool
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(RelayError::BadTool(
                "a tool name is 1 to 64 characters of A-Z, a-z, 0-9, `_` or `-`".into(),
            ));
        }
        if !names.insert(tool.name.as_str()) {
            return Err(RelayError::BadTool(format!(
                "the tool `{}` is there twice",
                tool.name
            )));
        }
        if tool.description.chars().count() > 4096 || tool.annotations.title.chars().count() > 200 {
            return Err(RelayError::BadTool(format!(
                "the tool `{}` has a description over 4096 or a title over 200 characters",
                tool.name
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn codes_are_stable_typeable_and_normalised() {
        let code = pairing_code(&key_digest(KEY).unwrap_or_default());
        assert_eq!(code.len(), 14);
        assert_eq!(code, pairing_code(&key_digest(KEY).unwrap_or_default()));
        assert_eq!(
            normalize_code(&code.to_lowercase().replace('-', " ")),
            Some(code.clone())
        );
        assert_eq!(
            normalize_code("oooo-iiii-llll").as_deref(),
            Some("0000-1111-1111")
        );
        for bad in [
            "",
            "ABCD-EFGH",
            "ABCD-EFGH-JKMNP",
            "ABCD-EFGH-JKM!",
            "UUUU-UUUU-UUUU",
        ] {
            assert_eq!(normalize_code(bad), None, "{bad}");
        }
    }

    #[test]
    fn keys_must_be_long_and_plain() {
        for bad in [
            "",
            "short",
            &"a".repeat(129),
            &format!("{}\n", &KEY[1..]),
            &format!("{KEY}é"),
        ] {
            assert_eq!(key_digest(bad).err(), Some(RelayError::BadKey), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_call_reaches_its_page_and_only_its_page() {
        let relay = Relay::new();
        let mut a = relay.connect(KEY).unwrap_or_else(|e| panic!("{e}"));
        let other = "fedcba9876543210fedcba9876543210";
        let b = relay.connect(other).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(a.code, b.code);
        assert_eq!(
            a.events.recv().await,
            Some(PageEvent::Paired {
                code: a.code.clone()
            })
        );
        let (id, answer) = relay
            .start_call(&a.code, "save", "{}".into())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(a.events.recv().await, Some(PageEvent::Call { id: i, .. }) if i == id));
        // The other page's key cannot answer it.
        assert_eq!(
            relay.settle(other, &id, "{}".into()),
            Err(RelayError::NoCall)
        );
        relay
            .settle(KEY, &id, "{\"ok\":true}".into())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.await.ok().as_deref(), Some("{\"ok\":true}"));
        assert_eq!(relay.settle(KEY, &id, "{}".into()), Err(RelayError::NoCall));
    }

    #[tokio::test]
    async fn a_page_that_goes_ends_its_calls_and_a_reconnect_keeps_them() {
        let relay = Relay::new();
        let first = relay.connect(KEY).unwrap_or_else(|e| panic!("{e}"));
        let (id, answer) = relay
            .start_call(&first.code, "save", "{}".into())
            .unwrap_or_else(|e| panic!("{e}"));
        let second = relay.connect(KEY).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first.code, second.code);
        // The replaced stream ending does not take the page away.
        relay.disconnect(&first.code, first.serial);
        assert!(relay.settle(KEY, &id, "{}".into()).is_ok());
        assert!(answer.await.is_ok());
        let (_, answer) = relay
            .start_call(&second.code, "save", "{}".into())
            .unwrap_or_else(|e| panic!("{e}"));
        relay.disconnect(&second.code, second.serial);
        assert!(answer.await.is_err(), "the page went away");
        assert_eq!(
            relay.start_call(&second.code, "save", "{}".into()).err(),
            Some(RelayError::NoPage)
        );
        assert!(relay.tools(&second.code).is_empty());
    }

    #[tokio::test]
    async fn waiting_calls_and_pages_are_capped() {
        let relay = Relay::new();
        let page = relay.connect(KEY).unwrap_or_else(|e| panic!("{e}"));
        let mut kept = Vec::new();
        for _ in 0..MAX_CALLS_PER_PAGE {
            kept.push(relay.start_call(&page.code, "x", "{}".into()));
        }
        assert!(kept.iter().all(Result::is_ok));
        assert_eq!(
            relay.start_call(&page.code, "x", "{}".into()).err(),
            Some(RelayError::Busy)
        );
        for n in 1..MAX_PAGES {
            assert!(relay.connect(&format!("{n:0>32}")).is_ok());
        }
        assert_eq!(relay.connect(&"z".repeat(32)).err(), Some(RelayError::Full));
    }
}
