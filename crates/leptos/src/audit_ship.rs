//! Shipping the page's audit records to the gateway: in batches, in order, retried with
//! backoff while the gateway is away, never duplicated (the gateway keeps each id once).
//! A record the gateway refuses as a conflict (another record is stored under its id:
//! 409 `audit_conflict`) is counted and passed over, so one record never holds back
//! every later one; the records before it in its batch are sent on their own first.
//! Acknowledged records are let go of at once ([`MemoryAudit::forget_before`]), so a long
//! session holds only what the gateway has not confirmed. While the gateway is away the
//! page's trail holds at most its capacity ([`countersign::DEFAULT_MEMORY_AUDIT_CAPACITY`]);
//! past it the oldest records are pushed out ([`countersign::Dropped`]); those never sent
//! are counted in [`ShippingStatus::dropped`], warned of in the console, and visible in
//! the gateway's trail as a jump in the session's `seq`.
//! A leaf: it knows the audit trail and an endpoint, nothing of the rest of the page.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use countersign::MemoryAudit;

use crate::http::fetch;

/// Records per request.
const AUDIT_BATCH: usize = 100;
/// The longest wait between retries, in milliseconds.
const MAX_BACKOFF_MS: u32 = 30_000;

/// The wait before the next retry after `failures` failures in a row: 1 s, 2 s, 4 s…
/// capped at [`MAX_BACKOFF_MS`].
fn backoff_ms(failures: u32) -> u32 {
    let exponent = failures.saturating_sub(1).min(15);
    1_000u32.saturating_mul(1 << exponent).min(MAX_BACKOFF_MS)
}

#[derive(Default)]
struct Shipper {
    endpoint: String,
    /// Records acknowledged by the gateway (a prefix of the trail).
    acknowledged: usize,
    in_flight: bool,
    failures: u32,
    retry: Option<gloo_timers::callback::Timeout>,
    /// The next batch holds at most this many records (the ones before a conflict).
    cap: Option<usize>,
    /// Records passed over as conflicts.
    conflicts: usize,
    /// Records pushed out of the page's trail before they could be sent.
    dropped: usize,
}

/// What shipping has done so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShippingStatus {
    /// Records the gateway acknowledged.
    pub acknowledged: usize,
    /// Failed attempts in a row (0 when the last one succeeded).
    pub failures: u32,
    /// Records the gateway refused because another record is stored under their id
    /// (409 `audit_conflict`), passed over so the rest is shipped.
    pub conflicts: usize,
    /// Records the page's trail pushed out before they could be shipped (the gateway was
    /// away while more than the trail's capacity piled up): their `seq`s are missing
    /// from the gateway's trail, and this says how many.
    pub dropped: usize,
}

type Slot = Rc<RefCell<Option<Shipper>>>;

/// The page's audit shipping: off until [`Shipping::start`].
#[derive(Clone)]
pub(crate) struct Shipping {
    slot: Slot,
    audit: MemoryAudit,
}

impl Shipping {
    pub(crate) fn new(audit: MemoryAudit) -> Self {
        Self {
            slot: Rc::default(),
            audit,
        }
    }

    /// Starts (or re-points) shipping to `endpoint`, then sends what waits.
    pub(crate) fn start(&self, endpoint: String) {
        self.slot
            .borrow_mut()
            .get_or_insert_with(Shipper::default)
            .endpoint = endpoint;
        ship(&self.slot, &self.audit);
    }

    /// Sends the next batch if shipping is on, one waits and none is in flight.
    pub(crate) fn ship(&self) {
        ship(&self.slot, &self.audit);
    }

    pub(crate) fn status(&self) -> Option<ShippingStatus> {
        self.slot.borrow().as_ref().map(|s| ShippingStatus {
            acknowledged: s.acknowledged,
            failures: s.failures,
            conflicts: s.conflicts,
            dropped: s.dropped,
        })
    }

    /// The page is going away: hands every unacknowledged record to
    /// `navigator.sendBeacon`, which delivers it after the page is gone. Best effort; the
    /// gateway keeps each id once, so records that also arrive by the normal path are not
    /// duplicated.
    pub(crate) fn flush_with_beacon(&self) {
        let (endpoint, mut from) = match self.slot.borrow().as_ref() {
            Some(s) => (s.endpoint.clone(), s.acknowledged.max(self.audit.first())),
            None => return,
        };
        let Some(navigator) = web_sys::window().map(|w| w.navigator()) else {
            return;
        };
        while from < self.audit.len() {
            let batch = self.audit.slice(from, AUDIT_BATCH);
            from += batch.len();
            let Ok(body) = serde_json::to_string(&batch) else {
                return;
            };
            let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(&body));
            let options = web_sys::BlobPropertyBag::new();
            options.set_type("application/json");
            if let Ok(blob) = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options) {
                let _ = navigator.send_beacon_with_opt_blob(&endpoint, Some(&blob));
            }
        }
    }
}

impl std::fmt::Debug for Shipping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shipping")
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

fn ship(slot: &Slot, audit: &MemoryAudit) {
    let (endpoint, from, size) = {
        let mut guard = slot.borrow_mut();
        let Some(shipper) = guard.as_mut() else {
            return;
        };
        if shipper.in_flight || shipper.retry.is_some() || shipper.acknowledged >= audit.len() {
            return;
        }
        // Records the trail pushed out while the gateway was away: they cannot be sent.
        // (A record pushed out while its batch was in flight, and then acknowledged, is
        // not among them: only what is skipped here never reached the gateway.)
        let held_from = audit.first();
        if shipper.acknowledged < held_from {
            let skipped = held_from - shipper.acknowledged;
            web_sys::console::warn_1(
                &format!(
                    "countersign: {skipped} audit records (positions {}–{held_from} of the page's trail) were pushed out before the gateway could take them",
                    shipper.acknowledged + 1
                )
                .into(),
            );
            shipper.dropped += skipped;
            shipper.acknowledged = held_from;
        }
        shipper.in_flight = true;
        let size = shipper
            .cap
            .take()
            .unwrap_or(AUDIT_BATCH)
            .clamp(1, AUDIT_BATCH);
        (shipper.endpoint.clone(), shipper.acknowledged, size)
    };
    let batch = audit.slice(from, size);
    let count = batch.len();
    let body = serde_json::to_string(&batch).unwrap_or_else(|_| "[]".into());
    let weak: Weak<RefCell<Option<Shipper>>> = Rc::downgrade(slot);
    let audit = audit.clone();
    leptos::task::spawn_local(async move {
        let answer = fetch("POST", &endpoint, Some(&body), 15_000).await;
        let ok = matches!(answer, Ok((status, _)) if (200..300).contains(&status));
        // A conflict names the record: its place in this batch.
        let conflict = match &answer {
            Ok((409, text)) if text.contains("audit_conflict") => batch
                .iter()
                .position(|r| text.contains(&format!("`{}`", r.id))),
            _ => None,
        };
        let Some(slot) = weak.upgrade() else { return };
        let retry_in = {
            let mut guard = slot.borrow_mut();
            let Some(shipper) = guard.as_mut() else {
                return;
            };
            shipper.in_flight = false;
            if ok {
                // INVARIANT: only acknowledged records advance the mark; a failed batch is
                // sent again, whole, and the gateway drops ids it already has.
                shipper.acknowledged = from + count;
                shipper.failures = 0;
                audit.forget_before(shipper.acknowledged);
                None
            } else if let Some(at) = conflict {
                // Nothing of the batch was written. The records before the conflict go
                // on their own; the conflicting one, first in its batch, is passed over.
                if at == 0 {
                    shipper.acknowledged = from + 1;
                    audit.forget_before(shipper.acknowledged);
                    shipper.conflicts += 1;
                    web_sys::console::warn_1(
                        &format!("countersign: the gateway holds another record under id `{}`; this one is not in its trail", batch.first().map(|r| r.id.as_str()).unwrap_or_default()).into(),
                    );
                } else {
                    shipper.cap = Some(at);
                }
                shipper.failures = 0;
                None
            } else {
                shipper.failures += 1;
                Some(backoff_ms(shipper.failures))
            }
        };
        match retry_in {
            None => ship(&slot, &audit),
            Some(wait) => {
                let again = Rc::downgrade(&slot);
                let timer = gloo_timers::callback::Timeout::new(wait, move || {
                    if let Some(slot) = again.upgrade() {
                        if let Some(s) = slot.borrow_mut().as_mut() {
                            s.retry = None;
                        }
                        ship(&slot, &audit);
                    }
                });
                if let Some(s) = slot.borrow_mut().as_mut() {
                    s.retry = Some(timer);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_one_second_and_is_capped() {
        let waits: Vec<u32> = (1..=7).map(backoff_ms).collect();
        assert_eq!(waits, [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
        assert_eq!(backoff_ms(u32::MAX), MAX_BACKOFF_MS);
        assert_eq!(backoff_ms(0), 1_000);
    }
}
