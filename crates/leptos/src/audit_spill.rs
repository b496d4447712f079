//! What the page hands on when it goes away: its unacknowledged audit records, within
//! what the browser will carry, and the loss named when some fit nowhere.
//!
//! On close the records are ordered for handing on: `trail_gap` records first (each
//! names records lost earlier: losing it would hide that loss), then the rest by `seq`.
//! Then:
//! 1. they are kept in `localStorage`, oldest first, under a key of this page session's
//!    own (overwritten at each close, so a page back from the back/forward cache does
//!    not keep copies; no other tab writes it), at most [`KEPT_BYTES`] per endpoint in
//!    all. The next page load that ships to the endpoint sends them ([`resend_kept`]);
//! 2. the first [`BEACON_BYTES`] of them also go to `navigator.sendBeacon`, for now:
//!    the browser refuses a beacon once the page's requests kept alive past it pass
//!    64 KiB (the Fetch standard's keepalive quota), and one it takes may still fail on
//!    the way, so a beacon is a copy, never the only one (the gateway keeps each id
//!    once);
//! 3. what is not kept (the newest) is named: a `trail_gap` record with their `seq`s,
//!    counting as `unconfirmed` those the beacon carried, kept in the room held back for
//!    it and sent in a beacon of its own. A record is kept, or named; never lost unseen.
//!
//! A leaf: it knows records as JSON text, storage and the beacon, nothing of the page.

use serde_json::Value;

use crate::http::fetch;

/// The most a closing page hands one beacon, in bytes: under the 64 KiB quota with room
/// for the request's own overhead and the beacon naming a loss.
pub(crate) const BEACON_BYTES: usize = 60 * 1024;
/// The most kept in `localStorage` per endpoint, over every page session, in bytes
/// (browsers give an origin about 5 MiB there, shared with the page's own use).
pub(crate) const KEPT_BYTES: usize = 1024 * 1024;
/// Room held back for the record that names a loss.
pub(crate) const GAP_ROOM: usize = 2 * 1024;
/// Records per request when kept records are sent.
const RESEND_BATCH: usize = 100;
const PREFIX: &str = "countersign.audit.unsent";

/// How many of the records (oldest first) fit a JSON array of at most `room` bytes:
/// a record goes nowhere once one before it did not fit, so what fits is a prefix.
pub(crate) fn fit(records: &[String], room: usize) -> usize {
    let (mut n, mut bytes) = (0, 0);
    for text in records {
        if array_len(n + 1, bytes + text.len()) > room {
            break;
        }
        n += 1;
        bytes += text.len();
    }
    n
}

/// The length in bytes of a JSON array of `items` items of `bytes` bytes in all.
fn array_len(items: usize, bytes: usize) -> usize {
    2 + bytes + items.saturating_sub(1)
}

/// `items` as one JSON array.
pub(crate) fn array(items: &[String]) -> String {
    format!("[{}]", items.join(","))
}

/// A key per endpoint and page session. A space cannot be in either (a URL escapes it;
/// session ids are hex), so one endpoint's prefix is never another's.
fn key(endpoint: &str, session: &str) -> String {
    format!("{PREFIX} {endpoint} {session}")
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

/// The keys holding records kept for `endpoint`, by any page session.
fn keys(storage: &web_sys::Storage, endpoint: &str) -> Vec<String> {
    let prefix = format!("{PREFIX} {endpoint} ");
    (0..storage.length().unwrap_or(0))
        .filter_map(|i| storage.key(i).ok().flatten())
        .filter(|k| k.strip_prefix(&prefix).is_some_and(|s| !s.contains(' ')))
        .collect()
}

/// The records kept under `key`, as JSON texts. Only entries that are objects with an
/// `id` are read (the gateway checks each record whole); others are let go of, with a
/// warning. Over twice [`KEPT_BYTES`] is not read at all, and let go of.
fn read(storage: &web_sys::Storage, key: &str) -> Vec<String> {
    let Some(text) = storage.get_item(key).ok().flatten() else {
        return Vec::new();
    };
    let items = (text.len() <= 2 * KEPT_BYTES)
        .then(|| serde_json::from_str::<Vec<Value>>(&text).ok())
        .flatten()
        .unwrap_or_default();
    let records: Vec<String> = items
        .iter()
        .filter(|r| r.get("id").is_some_and(Value::is_string))
        .map(Value::to_string)
        .collect();
    if records.len() != items.len() || items.is_empty() {
        web_sys::console::warn_1(
            &format!("countersign: {key}: what is kept there is not all audit records; what is not was let go").into(),
        );
        write(storage, key, &records);
    }
    records
}

/// Writes `records` under `key` (removes it when empty); `false` when storage refused.
fn write(storage: &web_sys::Storage, key: &str, records: &[String]) -> bool {
    if records.is_empty() {
        return storage.remove_item(key).is_ok();
    }
    storage.set_item(key, &array(records)).is_ok()
}

/// The room this page session has for records kept for `endpoint`: [`KEPT_BYTES`] less
/// what other sessions keep there and the gap's room.
pub(crate) fn keep_room(endpoint: &str, session: &str) -> usize {
    let Some(storage) = storage() else {
        return 0;
    };
    let own = key(endpoint, session);
    let others: usize = keys(&storage, endpoint)
        .iter()
        .filter(|k| **k != own)
        .filter_map(|k| storage.get_item(k).ok().flatten())
        .map(|t| t.len())
        .sum();
    KEPT_BYTES.saturating_sub(others).saturating_sub(GAP_ROOM)
}

/// Keeps exactly `records` as this page session's for `endpoint`, in place of what it
/// kept before; `false` when storage refused (what was kept before stays).
pub(crate) fn keep(endpoint: &str, session: &str, records: &[String]) -> bool {
    storage().is_some_and(|s| write(&s, &key(endpoint, session), records))
}

/// What storage took of a closing page's records.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kept {
    /// How many of the oldest.
    pub(crate) records: usize,
    /// Whether storage took anything (the records, or only the room held back).
    pub(crate) stored: bool,
}

/// Keeps the oldest of `texts` that fit this page session's room, holding room back
/// for the records that name what does not fit (the gap records among the first
/// `gaps` that are left out, and one more): written as spaces inside the array, so the
/// naming records written in their place never need more than storage already gave.
/// The origin's storage may be fuller than the room says (the page's own data shares
/// it): on a refusal it tries again with half as many, down to none.
pub(crate) fn keep_with_room(endpoint: &str, session: &str, texts: &[String], gaps: usize) -> Kept {
    let none = Kept {
        records: 0,
        stored: false,
    };
    let Some(storage) = storage() else {
        return none;
    };
    let key = key(endpoint, session);
    let mut n = fit(texts, keep_room(endpoint, session));
    loop {
        let reserve = if n < texts.len() {
            let left_out = texts.get(n..gaps).unwrap_or_default();
            // The naming record is about as long as the longest record (the same
            // session, role and tool call id fields, however long the host made them).
            let name = texts
                .iter()
                .map(String::len)
                .max()
                .unwrap_or(0)
                .max(GAP_ROOM);
            name + 1 + left_out.iter().map(|t| t.len() + 1).sum::<usize>()
        } else {
            0
        };
        let body = format!(
            "[{}{}]",
            texts.get(..n).unwrap_or_default().join(","),
            " ".repeat(reserve)
        );
        if storage.set_item(&key, &body).is_ok() {
            return Kept {
                records: n,
                stored: true,
            };
        }
        if n == 0 {
            return none;
        }
        n /= 2;
    }
}

/// Whether an answer to a batch of records is the gateway's acknowledgement: a 2xx
/// whose body says how many it appended. A login page a redirect led to, a captive
/// portal or an app's fallback page answer 200 too, and took nothing.
pub(crate) fn acknowledged(status: u16, body: &str) -> bool {
    (200..300).contains(&status)
        && serde_json::from_str::<Value>(body)
            .ok()
            .is_some_and(|v| v.get("appended").is_some_and(Value::is_u64))
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

/// Whether any page session kept records for `endpoint`.
pub(crate) fn has_kept(endpoint: &str) -> bool {
    storage().is_some_and(|s| !keys(&s, endpoint).is_empty())
}

/// Sends the records every page session kept for `endpoint`, oldest first, and lets go
/// of each batch the gateway acknowledged. A record the gateway refuses by name (409
/// `audit_conflict`: it holds another record under its id; 400 `invalid_audit_record`:
/// `record {i}` is not a record it takes) is let go of alone, with a warning: sending it
/// again could not change that. An answer that is not the gateway's (a proxy's page, a
/// login redirect's 200) leaves that key's records kept and goes on to the next; a
/// failure or a 5xx stops it with everything kept, for a later try.
pub(crate) async fn resend_kept(endpoint: String) {
    let Some(storage) = storage() else {
        return;
    };
    'keys: for key in keys(&storage, &endpoint) {
        loop {
            let kept = read(&storage, &key);
            let batch = kept.get(..kept.len().min(RESEND_BATCH)).unwrap_or_default();
            if batch.is_empty() {
                break;
            }
            let done: Vec<&String> =
                match fetch("POST", &endpoint, Some(&array(batch)), 15_000).await {
                    Ok((status, text)) if acknowledged(status, &text) => batch.iter().collect(),
                    // Away, busy or slow: the other keys would fare no better.
                    Err(_) | Ok((408 | 429 | 500..=599, _)) => return,
                    Ok((status, text)) => match refused_by_name(status, &text, batch) {
                        Some((refused, why)) => {
                            warn_let_go(why, refused);
                            vec![refused]
                        }
                        // Not the gateway's answer to these records: this key waits, the
                        // others are tried.
                        None => continue 'keys,
                    },
                };
            // Read again: this page may have written since (it never writes another
            // session's key, but its own close may come while this waits).
            let mut rest = read(&storage, &key);
            rest.retain(|r| !done.contains(&r));
            if !write(&storage, &key, &rest) {
                return;
            }
        }
    }
}

/// The record of `batch` the gateway's answer refuses by name, and why: 409
/// `audit_conflict` naming its id, or 400 `invalid_audit_record` naming its place.
fn refused_by_name<'b>(
    status: u16,
    text: &str,
    batch: &'b [String],
) -> Option<(&'b String, &'static str)> {
    match status {
        409 if text.contains("audit_conflict") => batch
            .iter()
            .find(|r| names(text, r))
            .map(|r| (r, "the gateway holds another record under its id")),
        400 => refused_index(text)
            .and_then(|i| batch.get(i))
            .map(|r| (r, "the gateway refused it as invalid")),
        _ => None,
    }
}

fn warn_let_go(why: &str, record: &str) {
    web_sys::console::warn_1(
        &format!("countersign: a record kept by an earlier page was let go: {why}: {record}")
            .into(),
    );
}

/// The position in its batch of the record the gateway's 400 `invalid_audit_record`
/// answer `text` refuses (its message starts `record {i} `).
fn refused_index(text: &str) -> Option<usize> {
    let answer: Value = serde_json::from_str(text).ok()?;
    let error = answer.get("error")?;
    if error.get("code")?.as_str()? != "invalid_audit_record" {
        return None;
    }
    let rest = error.get("message")?.as_str()?.strip_prefix("record ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether the gateway's answer `text` names the record `record` (its id in backticks).
fn names(text: &str, record: &str) -> bool {
    serde_json::from_str::<Value>(record)
        .ok()
        .and_then(|r| r.get("id").and_then(Value::as_str).map(str::to_owned))
        .is_some_and(|id| text.contains(&format!("`{id}`")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(sizes: &[usize]) -> Vec<String> {
        sizes.iter().map(|n| "x".repeat(*n)).collect()
    }

    #[test]
    fn the_oldest_records_that_fit_are_a_prefix() {
        // Arrays: 10 → 12 bytes, 10+10 → 23, 10+10+10 → 34.
        let records = texts(&[10, 10, 10, 10, 10]);
        assert_eq!(fit(&records, 23), 2);
        assert_eq!(fit(&records, 22), 1);
        assert_eq!(fit(&records, 34), 3);
        assert_eq!(fit(&records, 1_000), 5);
        assert_eq!(fit(&records, 0), 0);
    }

    #[test]
    fn a_record_that_does_not_fit_stops_the_ones_after_it_even_if_they_would() {
        // Nothing newer goes ahead of an older record: what is lost is one run at the end.
        assert_eq!(fit(&texts(&[10, 100, 1]), 20), 1);
    }

    #[test]
    fn nothing_fits_a_room_smaller_than_the_brackets() {
        assert_eq!(fit(&texts(&[1]), 2), 0);
        assert_eq!(fit(&texts(&[1]), 3), 1);
    }

    #[test]
    fn the_array_fit_counts_is_the_array_written() {
        let records = vec![r#"{"id":"a"}"#.to_owned(), r#"{"id":"bé"}"#.to_owned()];
        let n = fit(&records, array(&records).len());
        assert_eq!(n, 2);
        assert_eq!(fit(&records, array(&records).len() - 1), 1);
    }

    #[test]
    fn only_the_gateways_invalid_record_answer_points_at_a_record() {
        let answer = |code: &str, message: &str| {
            serde_json::json!({ "error": { "code": code, "message": message } }).to_string()
        };
        assert_eq!(
            refused_index(&answer("invalid_audit_record", "record 3 is invalid: x")),
            Some(3)
        );
        assert_eq!(
            refused_index(&answer("invalid_json", "record 3 is invalid")),
            None
        );
        assert_eq!(
            refused_index(&answer("invalid_audit_record", "records 3")),
            None
        );
        assert_eq!(refused_index("<html>record 3</html>"), None);
    }

    #[test]
    fn only_the_gateways_own_answer_acknowledges_records() {
        let gateway = r#"{"appended":2,"duplicates":0,"last_seq":9}"#;
        assert!(acknowledged(200, gateway));
        assert!(!acknowledged(503, gateway));
        assert!(!acknowledged(200, "<html>Sign in</html>"));
        assert!(!acknowledged(200, "{}"));
        assert!(!acknowledged(200, r#"{"appended":"2"}"#));
    }

    #[test]
    fn an_answer_names_a_record_by_its_id_in_backticks() {
        let text = "record `s-2` is stored already with other contents";
        assert!(names(text, r#"{"id":"s-2","seq":2}"#));
        assert!(!names(text, r#"{"id":"s-22","seq":22}"#));
        assert!(!names(text, "not json"));
    }
}
