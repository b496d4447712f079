//! Shipping the page's audit records to the gateway: in batches, in order, retried with
//! backoff while the gateway is away, never duplicated (the gateway keeps each id once).
//! A record the gateway refuses as a conflict (another record is stored under its id:
//! 409 `audit_conflict`) is counted and passed over, so one record never holds back
//! every later one; the records before it in its batch are sent on their own first.
//! Acknowledged records are let go of at once ([`MemoryAudit::forget_before`]), so a long
//! session holds only what the gateway has not confirmed. While the gateway is away the
//! page's trail holds at most its capacity ([`countersign::audit::DEFAULT_MEMORY_AUDIT_CAPACITY`]);
//! past it the oldest records are pushed out ([`countersign::audit::Dropped`]); shipping skips
//! them, counts them ([`ShippingStatus::dropped`], and `unconfirmed` for those sent
//! without an answer), warns in the console, and once the gateway answers writes a
//! `trail_gap` record naming their `seq`s (again, if that record was pushed out too).
//! A leaf: it knows the audit trail and an endpoint, nothing of the rest of the page.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use countersign::{audit::AuditEvent, MemoryAudit};

use crate::audit_spill as spill;
use crate::http::fetch;

/// Records per request.
const AUDIT_BATCH: usize = 100;
/// The longest wait between retries, in milliseconds.
const MAX_BACKOFF_MS: u32 = 30_000;
/// The shortest wait between two tries at sending what earlier pages kept, once the
/// gateway acknowledges this page's batches, in milliseconds.
const RESEND_EVERY_MS: f64 = 10_000.0;

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
    /// Records pushed out after they were sent, with no answer for them.
    unconfirmed: usize,
    /// The end of the furthest batch ever sent (a position).
    sent_upto: usize,
    /// Writes the record of a gap (the executor's `record_trail_gap`).
    on_gap: Option<GapHook>,
    /// Gaps whose record the gateway has not acknowledged yet.
    gaps: Vec<PendingGap>,
    /// Records earlier pages kept are being sent.
    resending: bool,
    /// When that was last started (`Date.now()`), to try at most every
    /// [`RESEND_EVERY_MS`] after an acknowledged batch.
    resent_at: f64,
    /// This page session, once a close has seen its records.
    session: Option<String>,
    /// Why the gateway refused the last batch (401 or 403); told to the dock once per
    /// spell of refusals (until a batch is taken, or shipping is pointed elsewhere).
    refused: Option<String>,
    /// Tells the dock why the gateway refuses the records.
    on_refused: Option<RefusedHook>,
}

/// A gap, and where its record sits in the trail once written.
#[derive(Clone, Copy, Debug)]
struct PendingGap {
    gap: Gap,
    /// The record's position; `None` until written, and again if it was pushed out
    /// before the gateway took it (then it is written again).
    recorded_at: Option<usize>,
}

/// Records skipped because the trail pushed them out: `seq`s and how many were sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Gap {
    pub(crate) first_seq: u64,
    pub(crate) last_seq: u64,
    pub(crate) unconfirmed: u64,
}

/// Writes a gap's record; returns its `seq`, or `None` when none could be written.
type GapHook = Rc<dyn Fn(Gap) -> Option<u64>>;
/// Told `Some(why)` when the gateway starts refusing the records, `None` when it takes
/// them again.
type RefusedHook = Rc<dyn Fn(Option<&str>)>;

/// Why the gateway refused a batch: its error's message (it names the flag that fixes
/// a refused origin) on one line, at most 300 characters, or the status.
fn refusal(status: u16, text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.pointer("/error/message")?.as_str().map(str::to_owned))
        .map_or_else(
            || format!("HTTP {status}"),
            |m| {
                m.chars()
                    .take(300)
                    .map(|c| if c.is_control() { ' ' } else { c })
                    .collect()
            },
        )
}

impl Shipper {
    /// Moves past records the trail no longer holds: counts them, and keeps the gap
    /// to be recorded (positions are `seq - 1`: the page's trail holds one executor's
    /// records). A gap's record that was itself pushed out is written again.
    fn skip_pushed_out(&mut self, audit: &MemoryAudit) {
        let held_from = audit.first();
        if self.acknowledged >= held_from {
            return;
        }
        let sent = self.sent_upto.clamp(self.acknowledged, held_from);
        let gap = Gap {
            first_seq: self.acknowledged as u64 + 1,
            last_seq: held_from as u64,
            unconfirmed: (sent - self.acknowledged) as u64,
        };
        self.unconfirmed += sent - self.acknowledged;
        self.dropped += held_from - sent;
        self.acknowledged = held_from;
        for pending in &mut self.gaps {
            if pending.recorded_at.is_some_and(|at| at < held_from) {
                pending.recorded_at = None;
            }
        }
        // A gap right after one not yet on record is the same gap, grown (a long
        // outage skips once per retry).
        match self.gaps.last_mut() {
            Some(last) if last.recorded_at.is_none() && last.gap.last_seq + 1 == gap.first_seq => {
                last.gap.last_seq = gap.last_seq;
                last.gap.unconfirmed += gap.unconfirmed;
            }
            _ => self.gaps.push(PendingGap {
                gap,
                recorded_at: None,
            }),
        }
        web_sys::console::warn_1(
            &format!(
                "countersign: audit records seq {}–{} were pushed out of the page's trail before the gateway acknowledged them ({} of them had been sent without an answer); a trail_gap record will say so",
                gap.first_seq, gap.last_seq, gap.unconfirmed
            )
            .into(),
        );
    }
}

/// Writes a record for each gap that has none in the trail (outside any borrow), and
/// forgets the gaps whose record the gateway acknowledged. A gap record never pushes
/// out an unsent record unseen: room is made for them first, and the records let go
/// for it are a gap of their own, recorded with the rest.
fn record_gaps(slot: &Slot, audit: &MemoryAudit) {
    let (hook, todo) = {
        let mut guard = slot.borrow_mut();
        let Some(shipper) = guard.as_mut() else {
            return;
        };
        let acknowledged = shipper.acknowledged;
        shipper
            .gaps
            .retain(|p| p.recorded_at.is_none_or(|at| at >= acknowledged));
        let Some(hook) = shipper.on_gap.clone() else {
            return;
        };
        let unwritten = shipper
            .gaps
            .iter()
            .filter(|p| p.recorded_at.is_none())
            .count();
        if unwritten == 0 {
            return;
        }
        // One slot per record to write, and one for the gap the room itself makes.
        let spill = (audit.held() + unwritten + 1).saturating_sub(audit.capacity());
        if spill > 0 {
            audit.forget_before(audit.first() + spill);
            shipper.skip_pushed_out(audit);
        }
        let todo: Vec<Gap> = shipper
            .gaps
            .iter()
            .filter(|p| p.recorded_at.is_none())
            .map(|p| p.gap)
            .collect();
        (hook, todo)
    };
    for gap in todo {
        let Some(seq) = hook(gap) else { continue };
        if let Some(shipper) = slot.borrow_mut().as_mut() {
            for pending in shipper.gaps.iter_mut().filter(|p| p.gap == gap) {
                // Positions are `seq - 1` (the page's trail holds its executor's records).
                pending.recorded_at =
                    Some(usize::try_from(seq.saturating_sub(1)).unwrap_or(usize::MAX));
            }
        }
    }
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
    /// Records the page's trail pushed out before they could be sent (the gateway was
    /// away while more than the trail's capacity piled up): missing from the gateway's
    /// trail. A `trail_gap` record, shipped after them, names their `seq`s.
    pub dropped: usize,
    /// Records pushed out after they were sent but before an answer came (a timeout, a
    /// lost answer): they may be in the gateway's trail or not; the same `trail_gap`
    /// record counts them.
    pub unconfirmed: usize,
    /// Whether the gateway refuses the records (401 or 403: this page's origin is not
    /// allowed, or a token is missing); the dock's log says why, once.
    pub refused: bool,
}

type Slot = Rc<RefCell<Option<Shipper>>>;

/// What a closing page hands its records on with.
struct Close {
    endpoint: String,
    session: String,
    hook: Option<GapHook>,
}

/// The page's audit shipping: off until [`Shipping::start`].
pub(crate) struct Shipping {
    slot: Slot,
    audit: MemoryAudit,
    on_gap: Rc<RefCell<Option<GapHook>>>,
    on_refused: Rc<RefCell<Option<RefusedHook>>>,
}

impl Shipping {
    pub(crate) fn new(audit: MemoryAudit) -> Self {
        Self {
            slot: Rc::default(),
            audit,
            on_gap: Rc::default(),
            on_refused: Rc::default(),
        }
    }

    /// Who tells the person why the gateway refuses the records (set once, before
    /// shipping starts): a trail that is not kept must not be silent.
    pub(crate) fn on_refused(&self, hook: impl Fn(Option<&str>) + 'static) {
        *self.on_refused.borrow_mut() = Some(Rc::new(hook));
    }

    /// Who writes the record of a gap (set once, before shipping starts).
    pub(crate) fn on_gap(&self, hook: impl Fn(Gap) -> Option<u64> + 'static) {
        *self.on_gap.borrow_mut() = Some(Rc::new(hook));
    }

    /// Starts (or re-points) shipping to `endpoint`, then sends what waits: what an
    /// earlier page kept for it when it closed, and this page's records.
    pub(crate) fn start(&self, endpoint: String) {
        {
            let mut slot = self.slot.borrow_mut();
            let shipper = slot.get_or_insert_with(Shipper::default);
            shipper.endpoint = endpoint;
            shipper.on_gap = self.on_gap.borrow().clone();
            shipper.on_refused = self.on_refused.borrow().clone();
            shipper.refused = None;
        }
        resend_kept(&self.slot, true);
        ship(&self.slot, &self.audit);
    }

    /// Sends the next batch if shipping is on, one waits and none is in flight.
    pub(crate) fn ship(&self) {
        ship(&self.slot, &self.audit);
    }

    /// Whether the records the gateway has not acknowledged fill half the page's trail
    /// or more: calls from agents outside the page are then refused before the gate
    /// (they would write records faster than they can be kept, and push out the
    /// records of what a person approved). Off while shipping is off.
    pub(crate) fn backlogged(&self) -> bool {
        self.slot.borrow().as_ref().is_some_and(|s| {
            let waiting = self.audit.len() - s.acknowledged.max(self.audit.first());
            waiting >= self.audit.capacity() / 2
        })
    }

    pub(crate) fn status(&self) -> Option<ShippingStatus> {
        self.slot.borrow().as_ref().map(|s| ShippingStatus {
            acknowledged: s.acknowledged,
            failures: s.failures,
            conflicts: s.conflicts,
            dropped: s.dropped,
            unconfirmed: s.unconfirmed,
            refused: s.refused.is_some(),
        })
    }

    /// The page is going away: hands every unacknowledged record on (see
    /// [`crate::audit_spill`]): kept in `localStorage` for the next page load to send,
    /// the oldest also handed to `navigator.sendBeacon`, which delivers them after the
    /// page is gone, and a `trail_gap` record for any that could not be kept. The
    /// gateway keeps each id once, so records that arrive twice are stored once.
    pub(crate) fn flush_with_beacon(&self) {
        let from = match self.slot.borrow_mut().as_mut() {
            Some(s) => {
                s.skip_pushed_out(&self.audit);
                s.acknowledged
            }
            None => return,
        };
        // Gaps not yet on record are written first, so they are handed on too.
        record_gaps(&self.slot, &self.audit);
        let from = from.max(self.audit.first());
        let held = self.audit.slice(from, self.audit.len() - from);
        let Some(close) = self.closing(held.first().map(|r| r.session.to_string())) else {
            return;
        };
        // A gap's record first: it names records lost earlier. (Each part stays in
        // `seq` order.)
        let (mut held, rest): (Vec<_>, Vec<_>) = held
            .into_iter()
            .partition(|r| r.event == AuditEvent::TrailGap);
        let gaps = held.len();
        held.extend(rest);
        // An `AuditRecord` always serialises (no map in it has other keys than text).
        let texts: Vec<String> = held
            .iter()
            .map(|r| serde_json::to_string(r).unwrap_or_default())
            .collect();
        let in_beacon = spill::fit(&texts, spill::BEACON_BYTES - spill::GAP_ROOM);
        let in_beacon =
            if spill::beacon(&close.endpoint, texts.get(..in_beacon).unwrap_or_default()) {
                in_beacon
            } else {
                0
            };
        if let Some(s) = self.slot.borrow_mut().as_mut() {
            // What the beacon carried counts as sent, without an answer: up to the
            // first record, in the trail's order, it did not carry.
            let first_left = held
                .get(in_beacon..)
                .unwrap_or_default()
                .iter()
                .map(|r| r.seq)
                .min();
            let upto = first_left.map_or(self.audit.len(), |seq| {
                usize::try_from(seq.saturating_sub(1)).unwrap_or(usize::MAX)
            });
            s.sent_upto = s.sent_upto.max(upto);
        }
        let kept = spill::keep_with_room(&close.endpoint, &close.session, &texts, gaps);
        if kept.records == texts.len() {
            return;
        }
        // Not kept: gap records (kept with the record below) and records (named by it).
        let lost_gaps = texts.get(kept.records..gaps).unwrap_or_default();
        let lost = held.get(kept.records.max(gaps)..).unwrap_or_default();
        let beaconed = in_beacon.saturating_sub(kept.records.max(gaps));
        let mut name = None;
        if let (Some(first), Some(last)) = (lost.first(), lost.last()) {
            let gap = Gap {
                first_seq: first.seq,
                last_seq: last.seq,
                unconfirmed: beaconed as u64,
            };
            name = self.name_lost(gap, lost.len(), close.hook);
        }
        let kept_too = kept.stored && {
            let mut all = texts.get(..kept.records).unwrap_or_default().to_vec();
            all.extend_from_slice(lost_gaps);
            all.extend(name.clone());
            spill::keep(&close.endpoint, &close.session, &all)
        };
        // The second beacon carries only what the first did not: both stay within the
        // quota (the first held room back for this).
        let mut second: Vec<String> = texts
            .get(kept.records.max(in_beacon)..gaps)
            .unwrap_or_default()
            .to_vec();
        second.extend(name);
        let beaconed = spill::beacon(&close.endpoint, &second);
        if !kept_too {
            web_sys::console::warn_1(
                &format!("countersign: the records naming audit records lost at close could not be kept; {}", if beaconed { "they went in a beacon only" } else { "nor sent" }).into(),
            );
        }
    }

    /// What a close needs: the endpoint, the gap hook, and this page session (from its
    /// records; remembered, so a later close with none held clears what an earlier one
    /// kept). `None` when shipping is off or nothing is held.
    fn closing(&self, session: Option<String>) -> Option<Close> {
        let mut slot = self.slot.borrow_mut();
        let s = slot.as_mut()?;
        if let Some(session) = session {
            s.session = Some(session);
        } else {
            // Everything was acknowledged: an earlier close's copies are not needed.
            if let Some(session) = &s.session {
                spill::keep(&s.endpoint, session, &[]);
            }
            return None;
        }
        Some(Close {
            endpoint: s.endpoint.clone(),
            session: s.session.clone()?,
            hook: s.on_gap.clone(),
        })
    }

    /// Counts records a closing page could not keep, and writes the record that names
    /// them; returns its text.
    fn name_lost(&self, gap: Gap, lost: usize, hook: Option<GapHook>) -> Option<String> {
        if let Some(s) = self.slot.borrow_mut().as_mut() {
            let unconfirmed = usize::try_from(gap.unconfirmed).unwrap_or(usize::MAX);
            s.unconfirmed += unconfirmed;
            s.dropped += lost.saturating_sub(unconfirmed);
        }
        web_sys::console::warn_1(
            &format!(
                "countersign: the page closed with audit records seq {}–{} that storage could not keep ({} of them went in a beacon); a trail_gap record says so",
                gap.first_seq, gap.last_seq, gap.unconfirmed
            )
            .into(),
        );
        let Some(seq) = hook.and_then(|write| write(gap)) else {
            web_sys::console::warn_1(
                &format!(
                    "countersign: no trail_gap record could be written for seq {}–{}",
                    gap.first_seq, gap.last_seq
                )
                .into(),
            );
            return None;
        };
        let position = usize::try_from(seq.saturating_sub(1)).unwrap_or(usize::MAX);
        self.audit
            .slice(position, 1)
            .first()
            .and_then(|r| serde_json::to_string(r).ok())
    }
}

/// Starts sending what earlier pages kept for the endpoint, unless that is under way,
/// nothing is kept, or (unless `now`) it was tried in the last [`RESEND_EVERY_MS`].
fn resend_kept(slot: &Slot, now: bool) {
    let wall = js_sys::Date::now();
    let endpoint = match slot.borrow_mut().as_mut() {
        Some(s) if !s.resending && (now || wall - s.resent_at >= RESEND_EVERY_MS) => {
            s.resending = true;
            s.resent_at = wall;
            s.endpoint.clone()
        }
        _ => return,
    };
    if !spill::has_kept(&endpoint) {
        if let Some(s) = slot.borrow_mut().as_mut() {
            s.resending = false;
        }
        return;
    }
    let weak = Rc::downgrade(slot);
    leptos::task::spawn_local(async move {
        spill::resend_kept(endpoint).await;
        if let Some(slot) = weak.upgrade() {
            if let Some(s) = slot.borrow_mut().as_mut() {
                s.resending = false;
            }
        }
    });
}

impl std::fmt::Debug for Shipping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shipping")
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

fn ship(slot: &Slot, audit: &MemoryAudit) {
    let (endpoint, from, size, sent_before) = {
        let mut guard = slot.borrow_mut();
        let Some(shipper) = guard.as_mut() else {
            return;
        };
        if shipper.in_flight || shipper.retry.is_some() || shipper.acknowledged >= audit.len() {
            return;
        }
        // Records the trail pushed out while the gateway was away cannot be sent: they
        // are skipped and counted, and the gap is recorded once the gateway answers.
        // (A record pushed out while its batch was in flight, and then acknowledged, is
        // not among them.)
        shipper.skip_pushed_out(audit);
        if shipper.acknowledged >= audit.len() {
            return;
        }
        shipper.in_flight = true;
        let size = shipper
            .cap
            .take()
            .unwrap_or(AUDIT_BATCH)
            .clamp(1, AUDIT_BATCH);
        let from = shipper.acknowledged;
        let sent_before = shipper.sent_upto;
        shipper.sent_upto = shipper.sent_upto.max(from + size.min(audit.len() - from));
        (shipper.endpoint.clone(), from, size, sent_before)
    };
    let batch = audit.slice(from, size);
    let count = batch.len();
    let body = serde_json::to_string(&batch).unwrap_or_else(|_| "[]".into());
    let weak: Weak<RefCell<Option<Shipper>>> = Rc::downgrade(slot);
    let audit = audit.clone();
    leptos::task::spawn_local(async move {
        let answer = fetch("POST", &endpoint, Some(&body), 15_000).await;
        // The gateway's own answer, not any page a proxy or a login redirect gives.
        let ok = matches!(&answer, Ok((status, text)) if spill::acknowledged(*status, text));
        // A conflict names the record: its place in this batch.
        let conflict = match &answer {
            Ok((409, text)) if text.contains("audit_conflict") => batch
                .iter()
                .position(|r| text.contains(&format!("`{}`", r.id))),
            _ => None,
        };
        let refused = match &answer {
            Ok((status @ (401 | 403), text)) => Some(refusal(*status, text)),
            _ => None,
        };
        let Some(slot) = weak.upgrade() else { return };
        let mut tell = None;
        let retry_in = {
            let mut guard = slot.borrow_mut();
            let Some(shipper) = guard.as_mut() else {
                return;
            };
            shipper.in_flight = false;
            if ok {
                // INVARIANT: only acknowledged records advance the mark; a failed batch is
                // sent again, whole, and the gateway drops ids it already has.
                // (Never back: a page-close flush may have moved past this batch.)
                shipper.acknowledged = shipper.acknowledged.max(from + count);
                shipper.failures = 0;
                if shipper.refused.take().is_some() {
                    tell = shipper.on_refused.clone().map(|hook| (hook, None));
                }
                audit.forget_before(shipper.acknowledged);
                drop(guard);
                // The gateway is there: what earlier pages kept can go too.
                resend_kept(&slot, false);
                None
            } else if let Some(at) = conflict {
                // Nothing of the batch was written (so it does not count as sent). The
                // records before the conflict go on their own; the conflicting one,
                // first in its batch, is passed over.
                shipper.sent_upto = sent_before.max(shipper.acknowledged);
                if shipper.acknowledged > from {
                    // A page-close flush moved past this batch meanwhile.
                } else if at == 0 {
                    shipper.acknowledged = from + 1;
                    audit.forget_before(shipper.acknowledged);
                    shipper.conflicts += 1;
                    web_sys::console::warn_1(
                        &format!("countersign: the gateway holds another record under id `{}`; this one is not in its trail", batch.first().map(|r| r.id.to_string()).unwrap_or_default()).into(),
                    );
                } else {
                    shipper.cap = Some(at);
                }
                shipper.failures = 0;
                // A conflict means the gateway took the request: it refuses no longer.
                if shipper.refused.take().is_some() {
                    tell = shipper.on_refused.clone().map(|hook| (hook, None));
                }
                None
            } else {
                shipper.failures += 1;
                // Told once per spell of refusals, not on every retry.
                if refused.is_some() && shipper.refused.is_none() {
                    shipper.refused.clone_from(&refused);
                    tell = shipper.on_refused.clone().map(|hook| (hook, refused));
                }
                Some(backoff_ms(shipper.failures))
            }
        };
        if let Some((hook, why)) = tell {
            hook(why.as_deref());
        }
        match retry_in {
            None => {
                // The gateway answers: the gaps not yet on record are written now, and
                // go with the next batch.
                record_gaps(&slot, &audit);
                ship(&slot, &audit)
            }
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
