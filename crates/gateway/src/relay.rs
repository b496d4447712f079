//! The page relay: how an MCP client's tool calls reach the page that will ask the
//! person. A page opens a WebSocket to `GET /v1/relay` and says hello with a random key
//! it keeps in memory; the gateway answers with the page's **pairing code**, derived from
//! that key with a secret made at each start, which the dock shows. An MCP client names
//! the page it acts in by sending that code (`Countersign-Page`) on every request: the
//! gateway never picks a page for it.
//!
//! The page sends the tools it projects for MCP callers and, for each relayed call, the
//! same JSON the in-page model gets. Nothing here approves anything: the call goes through
//! the page's executor and its dock like any other.
//!
//! A page whose connection drops keeps its code, tools and waiting calls for
//! [`GRACE`]: reconnecting with the same key, it is told which calls still wait (it
//! withdraws any other of its MCP calls) and is sent them again. A page that closes its
//! connection itself is gone at once.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use hmac::{Hmac, Mac as _};
use serde::Deserialize;
use sha2::Sha256;
use tokio::sync::{broadcast, mpsc, oneshot};

/// The most pages connected at once, unless the deployment says otherwise
/// (`--max-relay-pages`).
pub const DEFAULT_MAX_PAGES: usize = 64;
/// The most pages one [`Client`] may have connected at once, unless the deployment says
/// otherwise (`--max-relay-pages-per-client`): a person's tabs fit, and one client
/// cannot hold every slot.
pub const DEFAULT_MAX_PAGES_PER_CLIENT: usize = 16;
/// The most calls one page may have waiting.
pub const MAX_CALLS_PER_PAGE: usize = 16;
/// The most tools one page may offer.
pub const MAX_TOOLS: usize = 256;
/// How many events may queue for a page before a new call is refused as busy.
const EVENT_QUEUE: usize = 64;
/// How long a page whose connection dropped keeps its code and waiting calls.
pub const GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Who a page's connection comes from, for the per-client share of the relay's slots:
/// the peer's IP address, an IPv6 address by its /64 (a host is commonly given a whole
/// /64, and could otherwise open each page from another address of it), an IPv4 address
/// mapped into IPv6 as itself.
///
/// Not the `Origin`: any program other than a browser sends whichever allowed origin it
/// likes, so it tells no one apart. Not the page's relay key: a page makes its own, so a
/// client could make one per slot. The peer address is what a client cannot choose from
/// afar. What that leaves: programs on one machine share its address, so on a loopback
/// gateway the share bounds a local program (and a script in a page) only as it bounds
/// the person's own tabs; and behind a reverse proxy every page comes from the proxy's
/// address, so there the share must be raised to the total.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client(IpAddr);

impl Client {
    /// The client a connection from `address` belongs to.
    pub fn of(address: IpAddr) -> Self {
        let address = match address {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let [a, b, c, d, ..] = v6.segments();
                    IpAddr::V6(Ipv6Addr::new(a, b, c, d, 0, 0, 0, 0))
                }
            },
            v4 => v4,
        };
        Self(address)
    }

    /// The client of a connection whose peer address is not known (a gateway served
    /// without it): all such pages share one client.
    pub const UNKNOWN: Self = Self(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
}

pub use countersign::relay::ToPage;

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
    /// What it returns is untrusted content.
    #[serde(default)]
    pub untrusted_content_hint: bool,
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
    #[error(
        "too many pages are connected to this gateway; close one, or raise its limit (--max-relay-pages)"
    )]
    Full,
    /// As many pages as one client may have are connected from this one.
    #[error(
        "too many pages are connected from this address; close one, or raise the gateway's share per client (--max-relay-pages-per-client)"
    )]
    ClientFull,
    /// The page has as many calls waiting as allowed, or its event queue is full.
    #[error("the page has too many calls waiting; let them finish first")]
    Busy,
    /// No such call is waiting (it ended, or was cancelled).
    #[error("no such call is waiting")]
    NoCall,
}

/// The relay's state, shared by the page routes and the MCP endpoint.
pub struct Relay {
    pages: Mutex<HashMap<String, Page>>,
    /// The pairing code of a page whose tools changed (or that came or went).
    changes: broadcast::Sender<String>,
    /// Secret (random, or derived from the kept signing seed): codes cannot be searched
    /// for offline.
    secret: [u8; 32],
    /// The largest message a page may send.
    max_bytes: usize,
    /// The most pages connected at once.
    max_pages: usize,
    /// The most pages one client may have connected at once.
    max_pages_per_client: usize,
    /// Connections of every page, numbered once: a late end of an old one never ends
    /// a newer one.
    next_connection: AtomicU64,
    /// Set when the gateway stops: every page's connection is closed, so the pages
    /// reconnect (to the next process) at once.
    stopping: tokio::sync::watch::Sender<bool>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay").finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Page {
    key: [u8; 32],
    /// Where its latest connection came from: its slot counts against this client.
    client: Client,
    connection: u64,
    /// The connection dropped: the page is gone unless it is back by then.
    detached: bool,
    events: mpsc::Sender<ToPage>,
    tools: Arc<Vec<PageTool>>,
    calls: HashMap<String, Waiting>,
}

/// A relayed call the page has not answered yet.
#[derive(Debug)]
struct Waiting {
    name: String,
    arguments: String,
    answer: oneshot::Sender<String>,
    /// SHA-256 (hex) of the canonical arguments the caller sent.
    args_sha256: String,
    /// The countersignature the gateway minted for this call, if any; the caller's side
    /// holds it too, so it outlives the call (a timeout, the page gone).
    approval: ApprovalSlot,
}

/// Where the countersignature minted for a relayed call is kept.
pub type ApprovalSlot = Arc<Mutex<Option<Approved>>>;

/// A countersignature minted for a relayed call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approved {
    /// The token.
    pub token: String,
    /// Its `jti`.
    pub jti: String,
    /// Whether the person's passkey showed presence.
    pub passkey: bool,
}

/// One page's open event stream: its events, and who it is for the disconnect.
#[derive(Debug)]
pub struct Connection {
    /// The pairing code.
    pub code: String,
    /// Which connection of this page this is (a reconnect replaces the one before).
    pub serial: u64,
    /// The events for the page, `Paired` first.
    pub events: mpsc::Receiver<ToPage>,
}

impl Default for Relay {
    fn default() -> Self {
        Self::new()
    }
}

impl Relay {
    /// An empty relay.
    pub fn new() -> Self {
        let mut secret = [0u8; 32];
        let _ = getrandom::fill(&mut secret);
        Self::with_secret(secret)
    }

    /// An empty relay whose codes derive from `secret` (a page reconnecting to the next
    /// start of the gateway keeps its code when the secret is kept).
    pub fn with_secret(secret: [u8; 32]) -> Self {
        Self {
            pages: Mutex::default(),
            changes: broadcast::channel(64).0,
            secret,
            max_bytes: 1024 * 1024,
            max_pages: DEFAULT_MAX_PAGES,
            max_pages_per_client: DEFAULT_MAX_PAGES_PER_CLIENT,
            next_connection: AtomicU64::new(0),
            stopping: tokio::sync::watch::channel(false).0,
        }
    }

    /// Pages may send messages up to `max_bytes` (they are told when they pair).
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The largest message a page may send.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// At most `pages` pages connected at once, `per_client` of them from one [`Client`].
    pub fn with_max_pages(mut self, pages: usize, per_client: usize) -> Self {
        self.max_pages = pages;
        self.max_pages_per_client = per_client;
        self
    }

    /// The gateway is stopping: every page's connection closes (pages reconnect).
    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Changes to `true` when the gateway stops.
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    fn pages(&self) -> MutexGuard<'_, HashMap<String, Page>> {
        self.pages.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A page connects (or reconnects) with `key`, from `client`. A reconnect keeps its
    /// code, tools and waiting calls (sent again after `Paired`), replaces the connection
    /// before, and keeps its slot (now counted against `client`). A new page needs a free
    /// slot, in all and in `client`'s share.
    pub fn connect(&self, key: &str, client: Client) -> Result<Connection, RelayError> {
        let digest = self.key_digest(key)?;
        let code = pairing_code(&digest);
        let (sender, events) = mpsc::channel(EVENT_QUEUE);
        let serial = self.next_connection.fetch_add(1, Ordering::Relaxed);
        let mut pages = self.pages();
        let count = pages.len();
        let mine = pages.values().filter(|p| p.client == client).count();
        let page = match pages.entry(code.clone()) {
            Entry::Occupied(taken) if taken.get().key != digest => {
                // Another key with the same code (2^-60 by chance): the first keeps it.
                return Err(RelayError::Full);
            }
            Entry::Occupied(page) => page.into_mut(),
            Entry::Vacant(_) if count >= self.max_pages => return Err(RelayError::Full),
            Entry::Vacant(_) if mine >= self.max_pages_per_client => {
                return Err(RelayError::ClientFull)
            }
            Entry::Vacant(free) => free.insert(Page {
                key: digest,
                client,
                connection: serial,
                detached: false,
                events: sender.clone(),
                tools: Arc::default(),
                calls: HashMap::new(),
            }),
        };
        // A reconnect is told what still waits, and sent it again.
        let _ = sender.try_send(ToPage::Paired {
            code: code.clone(),
            waiting: page.calls.keys().cloned().collect(),
            max_bytes: self.max_bytes,
        });
        for (id, call) in &page.calls {
            let _ = sender.try_send(ToPage::Call {
                id: id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
        page.client = client;
        page.connection = serial;
        page.detached = false;
        page.events = sender;
        drop(pages);
        Ok(Connection {
            code,
            serial,
            events,
        })
    }

    /// The page's connection `serial` dropped: its calls wait for a reconnect until
    /// [`Relay::expire`] (after [`GRACE`]).
    pub fn detach(&self, code: &str, serial: u64) {
        if let Some(page) = self.pages().get_mut(code) {
            if page.connection == serial {
                page.detached = true;
            }
        }
    }

    /// The grace after connection `serial` dropped is over: unless the page came back,
    /// it is gone, and so are its tools; its waiting calls end with "the page went away".
    pub fn expire(&self, code: &str, serial: u64) {
        self.remove(code, |page| page.connection == serial && page.detached);
    }

    /// The page closed connection `serial` itself (it is going away): gone at once.
    pub fn disconnect(&self, code: &str, serial: u64) {
        self.remove(code, |page| page.connection == serial);
    }

    /// Removes the page paired as `code` if `ends` says so, and announces the change.
    fn remove(&self, code: &str, ends: impl FnOnce(&Page) -> bool) {
        let mut pages = self.pages();
        if pages.get(code).is_some_and(ends) {
            pages.remove(code);
            drop(pages);
            let _ = self.changes.send(code.to_owned());
        }
    }

    /// The page's tools are now `tools`.
    pub fn set_tools(&self, code: &str, tools: Vec<PageTool>) -> Result<(), RelayError> {
        let tools = fit_tools(tools);
        let mut pages = self.pages();
        let page = pages.get_mut(code).ok_or(RelayError::NoPage)?;
        if *page.tools != tools {
            page.tools = Arc::new(tools);
            drop(pages);
            let _ = self.changes.send(code.to_owned());
        }
        Ok(())
    }

    /// The page paired as `code` answers call `id` with `content` (the JSON the in-page
    /// model would get).
    pub fn settle(&self, code: &str, id: &str, content: String) -> Result<(), RelayError> {
        let mut pages = self.pages();
        let page = pages.get_mut(code).ok_or(RelayError::NoPage)?;
        let waiting = page.calls.remove(id).ok_or(RelayError::NoCall)?;
        waiting.answer.send(content).map_err(|_| RelayError::NoCall)
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
        // Room is kept for a cancel of every waiting call: a cancel is never lost to a
        // full queue (a page that reads slowly gets no new calls instead).
        let room = page.events.capacity();
        if page.calls.len() >= MAX_CALLS_PER_PAGE
            || (!page.events.is_closed() && room < page.calls.len() + 2)
        {
            return Err(RelayError::Busy);
        }
        let mut random = [0u8; 16];
        let _ = getrandom::fill(&mut random);
        let id = format!("mcp-{}", crate::audit_store::hex(&random));
        let event = ToPage::Call {
            id: id.clone(),
            name: name.to_owned(),
            arguments: arguments.clone(),
        };
        match page.events.try_send(event) {
            // A page between connections gets it when it is back.
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
            Err(mpsc::error::TrySendError::Full(_)) => return Err(RelayError::Busy),
        }
        let (answer, receiver) = oneshot::channel();
        let args_sha256 = countersign::audit::ArgsDigest::of_value(
            &serde_json::from_str(&arguments).unwrap_or(serde_json::Value::Null),
        )
        .to_hex();
        let waiting = Waiting {
            name: name.to_owned(),
            arguments,
            answer,
            args_sha256,
            approval: ApprovalSlot::default(),
        };
        page.calls.insert(id.clone(), waiting);
        Ok((id, receiver))
    }

    /// Where the countersignature minted for call `id` of the page paired as `code` will
    /// be kept (the caller's side reads it when the call ends, however it ends).
    pub fn approval_slot(&self, code: &str, id: &str) -> Option<ApprovalSlot> {
        let pages = self.pages();
        let waiting = pages.get(code)?.calls.get(id)?;
        Some(Arc::clone(&waiting.approval))
    }

    /// The gateway minted `approved` for the relayed call `id` of `action` over
    /// arguments with digest `args_sha256`: the client gets it with the result. Only a
    /// token for the call's own action and the exact arguments the client sent is kept
    /// (a call id is no secret: the page's trail names it; the arguments are); the
    /// first is kept, unless a passkey's comes after a click's. `false` when not kept.
    pub fn attach_approval(
        &self,
        id: &str,
        action: &str,
        args_sha256: &str,
        approved: Approved,
    ) -> bool {
        let pages = self.pages();
        let Some(waiting) = pages.values().find_map(|page| page.calls.get(id)) else {
            return false;
        };
        if waiting.name != action || waiting.args_sha256 != args_sha256 {
            return false;
        }
        let mut slot = waiting
            .approval
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let better = slot
            .as_ref()
            .is_none_or(|held| approved.passkey && !held.passkey);
        if better {
            *slot = Some(approved);
        }
        better
    }

    /// The client cancelled call `id`, or went away: the page withdraws it if it waits.
    pub fn cancel(&self, code: &str, id: &str) {
        let mut pages = self.pages();
        if let Some(page) = pages.get_mut(code) {
            if page.calls.remove(id).is_some() {
                let _ = page.events.try_send(ToPage::Cancel { id: id.to_owned() });
            }
        }
    }

    /// Pairing codes whose tools changed, as they change.
    pub fn changes(&self) -> broadcast::Receiver<String> {
        self.changes.subscribe()
    }

    /// The key's keyed digest: the page's identity here, and its code's source.
    fn key_digest(&self, key: &str) -> Result<[u8; 32], RelayError> {
        let ok = (32..=128).contains(&key.len())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok {
            return Err(RelayError::BadKey);
        }
        let mut mac =
            <Hmac<Sha256>>::new_from_slice(&self.secret).map_err(|_| RelayError::BadKey)?;
        mac.update(b"countersign/relay/v1\0");
        mac.update(key.as_bytes());
        Ok(mac.finalize().into_bytes().into())
    }

    /// How many change listeners there are (MCP subscriptions and sessions).
    pub fn listeners(&self) -> usize {
        self.changes.receiver_count()
    }
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

/// The tools an MCP client may see: well named, described within bounds, each once, at
/// most [`MAX_TOOLS`]. One that is not is left out (and the rest still offered).
fn fit_tools(tools: Vec<PageTool>) -> Vec<PageTool> {
    let mut names = std::collections::HashSet::new();
    let mut fit: Vec<PageTool> = tools
        .into_iter()
        .filter(|tool| {
            (1..=64).contains(&tool.name.len())
                && tool
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                && tool.description.chars().count() <= 4096
                && tool.annotations.title.chars().count() <= 200
        })
        .filter(|tool| names.insert(tool.name.clone()))
        .collect();
    fit.truncate(MAX_TOOLS);
    fit
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef";
    const OTHER: &str = "fedcba9876543210fedcba9876543210";

    const HERE: Client = Client::UNKNOWN;

    fn connect(relay: &Relay, key: &str) -> Connection {
        relay.connect(key, HERE).unwrap_or_else(|e| panic!("{e}"))
    }

    fn call(relay: &Relay, code: &str) -> (String, oneshot::Receiver<String>) {
        relay
            .start_call(code, "save", "{}".into())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn tool(name: &str, description: &str) -> PageTool {
        PageTool {
            name: name.into(),
            description: description.into(),
            parameters: serde_json::Map::new(),
            annotations: PageToolAnnotations {
                title: name.into(),
                read_only_hint: false,
                destructive_hint: false,
                approval: serde_json::Value::Null,
                handoff: false,
                untrusted_content_hint: false,
            },
        }
    }

    #[test]
    fn codes_are_stable_typeable_normalised_and_secret_per_start() {
        let relay = Relay::new();
        let code = pairing_code(&relay.key_digest(KEY).unwrap_or_default());
        assert_eq!(code.len(), 14);
        assert_eq!(
            code,
            pairing_code(&relay.key_digest(KEY).unwrap_or_default())
        );
        // Another gateway start, another code: none can be searched for offline.
        let elsewhere = pairing_code(&Relay::new().key_digest(KEY).unwrap_or_default());
        assert_ne!(code, elsewhere);
        let typed = code.to_lowercase().replace('-', " ");
        assert_eq!(normalize_code(&typed), Some(code.clone()));
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
        let relay = Relay::new();
        let long = "a".repeat(129);
        let newline = format!("{}\n", &KEY[1..]);
        let accented = format!("{KEY}é");
        for bad in ["", "short", &long, &newline, &accented] {
            assert_eq!(
                relay.key_digest(bad).err(),
                Some(RelayError::BadKey),
                "{bad:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_call_reaches_its_page_and_only_its_page() {
        let relay = Relay::new();
        let mut a = connect(&relay, KEY);
        let b = connect(&relay, OTHER);
        assert_ne!(a.code, b.code);
        let paired = ToPage::Paired {
            code: a.code.clone(),
            waiting: vec![],
            max_bytes: 1024 * 1024,
        };
        assert_eq!(a.events.recv().await, Some(paired));
        let (id, answer) = call(&relay, &a.code);
        assert!(matches!(a.events.recv().await, Some(ToPage::Call { id: i, .. }) if i == id));
        // The other page cannot answer it.
        assert_eq!(
            relay.settle(&b.code, &id, "{}".into()),
            Err(RelayError::NoCall)
        );
        relay
            .settle(&a.code, &id, "{\"ok\":true}".into())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.await.ok().as_deref(), Some("{\"ok\":true}"));
        assert_eq!(
            relay.settle(&a.code, &id, "{}".into()),
            Err(RelayError::NoCall)
        );
    }

    #[test]
    fn call_ids_are_random() {
        let relay = Relay::new();
        let page = connect(&relay, KEY);
        let (first, _a) = call(&relay, &page.code);
        let (second, _b) = call(&relay, &page.code);
        assert_ne!(first, second);
        assert_eq!(first.len(), "mcp-".len() + 32);
        assert_ne!(
            first.get(..20),
            second.get(..20),
            "no shared prefix to count on"
        );
    }

    #[tokio::test]
    async fn a_reconnect_is_told_what_waits_and_gets_it_again() {
        let relay = Relay::new();
        let first = connect(&relay, KEY);
        let (id, answer) = call(&relay, &first.code);
        // The connection drops (the call event may never have reached the page).
        relay.detach(&first.code, first.serial);
        drop(first);
        let mut second = connect(&relay, KEY);
        let paired = ToPage::Paired {
            code: second.code.clone(),
            waiting: vec![id.clone()],
            max_bytes: 1024 * 1024,
        };
        assert_eq!(second.events.recv().await, Some(paired));
        assert!(matches!(second.events.recv().await, Some(ToPage::Call { id: i, .. }) if i == id));
        // The first connection's grace ending does not end the page.
        relay.expire(&second.code, 0);
        relay
            .settle(&second.code, &id, "{}".into())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(answer.await.is_ok());
    }

    #[tokio::test]
    async fn a_page_gone_past_its_grace_ends_its_calls() {
        let relay = Relay::new();
        let page = connect(&relay, KEY);
        let (_, answer) = call(&relay, &page.code);
        relay.detach(&page.code, page.serial);
        // Within the grace its calls wait (and new ones queue for the reconnect).
        assert!(relay.start_call(&page.code, "save", "{}".into()).is_ok());
        relay.expire(&page.code, page.serial);
        assert!(answer.await.is_err(), "the page went away");
        assert_eq!(
            relay.start_call(&page.code, "save", "{}".into()).err(),
            Some(RelayError::NoPage)
        );
        assert!(relay.tools(&page.code).is_empty());
    }

    #[tokio::test]
    async fn a_late_end_of_an_old_connection_never_ends_a_newer_one() {
        let relay = Relay::new();
        let old = connect(&relay, KEY);
        relay.disconnect(&old.code, old.serial);
        let new = connect(&relay, KEY);
        relay.disconnect(&old.code, old.serial);
        relay.detach(&old.code, old.serial);
        relay.expire(&old.code, old.serial);
        assert!(relay.start_call(&new.code, "save", "{}".into()).is_ok());
    }

    #[test]
    fn tools_that_do_not_fit_are_left_out_and_the_rest_offered() {
        let relay = Relay::new();
        let page = connect(&relay, KEY);
        let tools = vec![
            tool("save", "Saves."),
            tool("save", "Again."),
            tool("bad\u{202e}name", "Reversed."),
            tool("long", &"x".repeat(4097)),
            tool("archive", "Archives."),
        ];
        relay
            .set_tools(&page.code, tools)
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = relay
            .tools(&page.code)
            .iter()
            .map(|t| t.name.clone())
            .collect();
        assert_eq!(names, ["save", "archive"]);
        let many = (0..MAX_TOOLS + 10)
            .map(|n| tool(&format!("t{n}"), ""))
            .collect();
        relay
            .set_tools(&page.code, many)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(relay.tools(&page.code).len(), MAX_TOOLS);
    }

    #[tokio::test]
    async fn a_cancel_is_never_lost_to_a_full_queue() {
        let relay = Relay::new();
        let mut page = connect(&relay, KEY);
        let (first, _answer) = call(&relay, &page.code);
        // A page that does not read: calls and cancels pile up until new calls are busy.
        let mut started = 0;
        while let Ok((id, _)) = relay.start_call(&page.code, "x", "{}".into()) {
            relay.cancel(&page.code, &id);
            started += 1;
            assert!(started < 1000, "never busy");
        }
        relay.cancel(&page.code, &first);
        let mut cancelled = false;
        while let Ok(event) = page.events.try_recv() {
            cancelled |= event == ToPage::Cancel { id: first.clone() };
        }
        assert!(cancelled, "the cancel was dropped");
    }

    #[tokio::test]
    async fn waiting_calls_and_pages_are_capped() {
        let relay = Relay::new();
        let page = connect(&relay, KEY);
        let kept: Vec<_> = (0..MAX_CALLS_PER_PAGE)
            .map(|_| relay.start_call(&page.code, "x", "{}".into()))
            .collect();
        assert!(kept.iter().all(Result::is_ok));
        assert_eq!(
            relay.start_call(&page.code, "x", "{}".into()).err(),
            Some(RelayError::Busy)
        );
        // Pages from many clients, up to the total.
        for n in 1..DEFAULT_MAX_PAGES {
            let client = Client::of(IpAddr::from([10, 0, 0, u8::try_from(n).unwrap_or(0)]));
            assert!(relay.connect(&format!("{n:0>32}"), client).is_ok());
        }
        let late = Client::of(IpAddr::from([10, 0, 1, 1]));
        assert_eq!(
            relay.connect(&"z".repeat(32), late).err(),
            Some(RelayError::Full)
        );
    }

    #[test]
    fn one_client_holds_at_most_its_share_and_a_reconnect_keeps_its_slot() {
        let relay = Relay::new().with_max_pages(4, 2);
        let greedy = Client::of(IpAddr::from([192, 0, 2, 7]));
        assert!(relay.connect(KEY, greedy).is_ok());
        assert!(relay.connect(OTHER, greedy).is_ok());
        assert_eq!(
            relay.connect(&"a".repeat(32), greedy).err(),
            Some(RelayError::ClientFull)
        );
        // Its pages reconnect (from wherever): no new slot needed.
        assert!(relay.connect(KEY, greedy).is_ok());
        // Another client still pairs, up to the total.
        let person = Client::of(IpAddr::from([198, 51, 100, 1]));
        assert!(relay.connect(&"b".repeat(32), person).is_ok());
        assert!(relay.connect(&"c".repeat(32), person).is_ok());
        let third = Client::of(IpAddr::from([203, 0, 113, 9]));
        assert_eq!(
            relay.connect(&"d".repeat(32), third).err(),
            Some(RelayError::Full)
        );
    }

    #[test]
    fn a_client_is_its_address_an_ipv6_one_by_its_64() {
        let v6 = |text: &str| Client::of(text.parse().unwrap_or(IpAddr::from([0u8; 16])));
        assert_eq!(v6("2001:db8:1:2::1"), v6("2001:db8:1:2:ffff::9"));
        assert_ne!(v6("2001:db8:1:2::1"), v6("2001:db8:1:3::1"));
        assert_eq!(
            v6("::ffff:192.0.2.7"),
            Client::of(IpAddr::from([192, 0, 2, 7]))
        );
        assert_ne!(
            Client::of(IpAddr::from([192, 0, 2, 7])),
            Client::of(IpAddr::from([192, 0, 2, 8]))
        );
    }
}
