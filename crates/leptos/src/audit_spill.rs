//! What the page hands on when it goes away: its unacknowledged audit records, within
//! what the browser will carry, and the loss named when some fit nowhere.
//!
//! `navigator.sendBeacon` refuses (answers `false`) once the page's requests kept alive
//! past it pass 64 KiB in all (the Fetch standard's keepalive quota). So on close:
//! 1. the oldest records go in one beacon of at most [`BEACON_BYTES`];
//! 2. the rest are kept in `localStorage` under a key per endpoint, at most
//!    [`KEPT_BYTES`] there in all; the next page load that ships to the same endpoint
//!    sends them first ([`resend_kept`]); the gateway keeps each id once, so a record
//!    that arrives twice is stored once;
//! 3. records that fit neither (the newest) are named: a `trail_gap` record with their
//!    `seq`s is kept in the room held back for it, or, when storage refuses, sent in a
//!    beacon of its own. A record is delivered, kept, or named; never dropped unseen.
//!
//! Two tabs of one origin closing at once may each rewrite the kept list; the browser
//! runs each tab's read and write in one task, but does not order tabs. A leaf: it knows
//! records as JSON text, storage and the beacon, nothing of the rest of the page.

use countersign::AuditRecord;

use crate::http::fetch;

/// The most a closing page hands one beacon, in bytes: under the 64 KiB quota with room
/// for the request's own overhead.
pub(crate) const BEACON_BYTES: usize = 60 * 1024;
/// The most kept in `localStorage` per endpoint, in bytes (browsers give an origin about
/// 5 MiB there, shared with the page's own use).
pub(crate) const KEPT_BYTES: usize = 1024 * 1024;
/// Room held back for the record that names a loss.
const GAP_ROOM: usize = 2 * 1024;
/// Records per request when kept records are sent again.
const RESEND_BATCH: usize = 100;

/// Where the records of a closing page go, oldest first: a prefix in the beacon, the
/// next ones kept, and the rest (the newest) lost, by index.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// How many of the oldest go in the beacon.
    pub(crate) beacon: usize,
    /// How many after those are kept.
    pub(crate) kept: usize,
}

/// The JSON array of `items`' length in bytes.
fn array_len(items: usize, bytes: usize) -> usize {
    2 + bytes + items.saturating_sub(1)
}

/// Splits records (JSON texts, oldest first) between a beacon with room for
/// `beacon_room` bytes and storage with `keep_room` bytes, in order: a record goes
/// nowhere once one before it did not fit, so what is delivered or kept is always
/// everything up to some `seq`, and what is lost is one run at the end.
pub(crate) fn plan(records: &[String], beacon_room: usize, keep_room: usize) -> Plan {
    let fit = |from: usize, room: usize| {
        let (mut n, mut bytes) = (0, 0);
        for text in records.get(from..).unwrap_or_default() {
            if array_len(n + 1, bytes + text.len()) > room {
                break;
            }
            n += 1;
            bytes += text.len();
        }
        n
    };
    let beacon = fit(0, beacon_room);
    let kept = fit(beacon, keep_room);
    Plan { beacon, kept }
}

/// `items` as one JSON array.
pub(crate) fn array(items: &[String]) -> String {
    format!("[{}]", items.join(","))
}

fn key(endpoint: &str) -> String {
    format!("countersign.audit.unsent:{endpoint}")
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

/// The records kept for `endpoint`, as JSON texts; a list that is not audit records is
/// let go of (with a warning): nothing in it could be sent.
fn read_kept(endpoint: &str) -> Vec<String> {
    let Some(text) = storage().and_then(|s| s.get_item(&key(endpoint)).ok().flatten()) else {
        return Vec::new();
    };
    let parsed = (text.len() <= 2 * KEPT_BYTES)
        .then(|| serde_json::from_str::<Vec<AuditRecord>>(&text).ok())
        .flatten();
    match parsed {
        Some(records) => records
            .iter()
            .filter_map(|r| serde_json::to_string(r).ok())
            .collect(),
        None => {
            forget_kept(endpoint);
            web_sys::console::warn_1(
                &"countersign: the audit records kept from an earlier page are unreadable; let go"
                    .into(),
            );
            Vec::new()
        }
    }
}

fn forget_kept(endpoint: &str) {
    if let Some(s) = storage() {
        let _ = s.remove_item(&key(endpoint));
    }
}

/// Bytes already kept for `endpoint`.
pub(crate) fn kept_bytes(endpoint: &str) -> usize {
    storage()
        .and_then(|s| s.get_item(&key(endpoint)).ok().flatten())
        .map_or(0, |t| t.len())
}

/// Adds `records` to what is kept for `endpoint`; `false` when storage refused.
pub(crate) fn keep(endpoint: &str, records: &[String]) -> bool {
    if records.is_empty() {
        return true;
    }
    let mut all = read_kept(endpoint);
    all.extend_from_slice(records);
    storage().is_some_and(|s| s.set_item(&key(endpoint), &array(&all)).is_ok())
}

/// Hands `records` to one beacon; `false` when the browser refused it.
pub(crate) fn beacon(endpoint: &str, records: &[String]) -> bool {
    if records.is_empty() {
        return true;
    }
    let Some(navigator) = web_sys::window().map(|w| w.navigator()) else {
        return false;
    };
    let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(&array(records)));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type("application/json");
    web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)
        .ok()
        .and_then(|blob| {
            navigator
                .send_beacon_with_opt_blob(endpoint, Some(&blob))
                .ok()
        })
        .unwrap_or(false)
}

/// Sends the records an earlier page kept for `endpoint`, oldest first, and lets go of
/// each batch the gateway acknowledged (or refused as malformed or a conflict: sending
/// it again could not change that). Stops at the first failure; what is left waits for
/// the next page load.
pub(crate) async fn resend_kept(endpoint: String) {
    loop {
        let kept = read_kept(&endpoint);
        if kept.is_empty() {
            return;
        }
        let n = kept.len().min(RESEND_BATCH);
        let sent = kept.get(..n).unwrap_or_default();
        let answer = fetch("POST", &endpoint, Some(&array(sent)), 15_000).await;
        match answer {
            Ok((status, _)) if (200..300).contains(&status) => {}
            Ok((400 | 409 | 413 | 422, text)) => web_sys::console::warn_1(
                &format!("countersign: the gateway refused audit records kept from an earlier page ({text}); let go").into(),
            ),
            _ => return,
        }
        // Storage may have changed meanwhile (another tab closed): let go of exactly
        // the records sent, by their text.
        let mut rest = read_kept(&endpoint);
        rest.retain(|r| !sent.contains(r));
        if rest.is_empty() {
            forget_kept(&endpoint);
        } else if !keep_exactly(&endpoint, &rest) {
            return;
        }
    }
}

fn keep_exactly(endpoint: &str, records: &[String]) -> bool {
    storage().is_some_and(|s| s.set_item(&key(endpoint), &array(records)).is_ok())
}

/// The room for records still free for `endpoint`, gap room held back.
pub(crate) fn keep_room(endpoint: &str) -> usize {
    KEPT_BYTES
        .saturating_sub(kept_bytes(endpoint))
        .saturating_sub(GAP_ROOM)
}

/// The beacon's room for records, gap room held back.
pub(crate) const BEACON_ROOM: usize = BEACON_BYTES - GAP_ROOM;

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(sizes: &[usize]) -> Vec<String> {
        sizes.iter().map(|n| "x".repeat(*n)).collect()
    }

    #[test]
    fn the_oldest_go_in_the_beacon_the_next_are_kept_the_rest_are_lost() {
        // Arrays: 10 → 12 bytes, 10+10 → 23, 10+10+10 → 34.
        let records = texts(&[10, 10, 10, 10, 10]);
        assert_eq!(plan(&records, 23, 23), Plan { beacon: 2, kept: 2 });
        assert_eq!(plan(&records, 22, 34), Plan { beacon: 1, kept: 3 });
        assert_eq!(plan(&records, 1_000, 0), Plan { beacon: 5, kept: 0 });
        assert_eq!(plan(&records, 0, 0), Plan { beacon: 0, kept: 0 });
    }

    #[test]
    fn a_record_that_does_not_fit_stops_the_ones_after_it_even_if_they_would() {
        // Nothing newer goes ahead of an older record: what is lost is one run at the end.
        let records = texts(&[10, 100, 1]);
        assert_eq!(plan(&records, 20, 0), Plan { beacon: 1, kept: 0 });
    }

    #[test]
    fn nothing_fits_a_room_smaller_than_the_brackets() {
        assert_eq!(plan(&texts(&[1]), 2, 0), Plan { beacon: 0, kept: 0 });
        assert_eq!(plan(&texts(&[1]), 3, 0), Plan { beacon: 1, kept: 0 });
    }
}
