//! Whether a trail accounts for every record its page sessions wrote. A page numbers its
//! records `1, 2, 3…` per session (`seq`); it names records it could not hand on with a
//! `trail_gap` record. So, per session, every `seq` from 1 to the last one in the trail
//! should be in the trail or named by one of that session's `trail_gap` records. A run
//! that is neither is a [`Hole`]: records a browser still keeps for a later page load
//! (they arrive then), or records lost with no record of the loss.
//!
//! Records after a session's last one in the trail cannot be told from records never
//! written; the chain's head (checked with the key) covers the gateway's side of that.
//! The gateway's own records (`countersigned`, `seq` 0) are not a page's and are passed
//! over.

use std::collections::HashMap;

use countersign::{audit::AuditEvent, AuditRecord, Reason};

/// The most holes a check lists; past it they are counted only.
pub const MAX_HOLES_LISTED: usize = 100;

/// A run of one session's `seq`s that is neither in the trail nor named by a
/// `trail_gap` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hole {
    /// The page session (the records' `session`).
    pub session: String,
    /// The first `seq` of the run.
    pub first_seq: u64,
    /// The last `seq` of the run.
    pub last_seq: u64,
}

/// What a trail says about its completeness.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Completeness {
    /// Page sessions with records in the trail.
    pub sessions: usize,
    /// `seq`s named by `trail_gap` records and not in the trail: losses on record.
    pub named: u64,
    /// Holes, by session and `seq`, at most [`MAX_HOLES_LISTED`].
    pub holes: Vec<Hole>,
    /// `seq`s in every hole, listed or not.
    pub unexplained: u64,
}

/// One session's `seq`s and the runs its `trail_gap` records name.
#[derive(Default)]
struct Session {
    seen: Vec<u64>,
    named: Vec<(u64, u64)>,
}

/// Takes a trail's records one at a time, then says what is missing.
#[derive(Default)]
pub(crate) struct Tally {
    sessions: HashMap<String, Session>,
}

impl Tally {
    pub(crate) fn add(&mut self, record: &AuditRecord) {
        if record.seq == 0 {
            return;
        }
        let session = match self.sessions.get_mut(&*record.session) {
            Some(session) => session,
            None => self.sessions.entry(record.session.to_string()).or_default(),
        };
        session.seen.push(record.seq);
        if let (
            AuditEvent::TrailGap,
            Reason::TrailGap {
                first_seq,
                last_seq,
                ..
            },
        ) = (record.event, &record.reason)
        {
            // A page writes a gap's record after the records it names: one that names
            // its own place or later ones names nothing.
            if first_seq <= last_seq && *last_seq < record.seq {
                session.named.push((*first_seq, *last_seq));
            }
        }
    }

    pub(crate) fn finish(self) -> Completeness {
        let mut out = Completeness {
            sessions: self.sessions.len(),
            ..Completeness::default()
        };
        let mut sessions: Vec<(String, Session)> = self.sessions.into_iter().collect();
        sessions.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, mut session) in sessions {
            session.seen.sort_unstable();
            session.seen.dedup();
            let named = merged(session.named);
            // One pass over the missing runs and the named runs together, both in order.
            let mut cursor = 0;
            let mut expected = 1;
            for &seq in &session.seen {
                if seq > expected {
                    cursor = account(&mut out, &name, &named, cursor, expected, seq - 1);
                }
                expected = seq.saturating_add(1);
            }
        }
        out
    }
}

/// `runs` sorted and merged into disjoint runs, in order.
fn merged(mut runs: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    runs.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for (a, b) in runs {
        match out.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Splits the missing run `first..=last` of `session` into what `named` (disjoint, in
/// order) covers and what it does not (holes), starting at `named[cursor]`; returns
/// where the next (later) run starts looking.
fn account(
    out: &mut Completeness,
    session: &str,
    named: &[(u64, u64)],
    mut cursor: usize,
    first: u64,
    last: u64,
) -> usize {
    let mut at = first;
    while let Some(&(a, b)) = named.get(cursor) {
        if b < at {
            cursor += 1;
            continue;
        }
        if a > last {
            break;
        }
        if a > at {
            hole(out, session, at, a - 1);
        }
        let covered_to = b.min(last);
        out.named = out.named.saturating_add(covered_to - a.max(at) + 1);
        at = covered_to.saturating_add(1);
        if b > last {
            // The same named run may cover part of the next missing run.
            return cursor;
        }
        cursor += 1;
    }
    if at <= last {
        hole(out, session, at, last);
    }
    cursor
}

fn hole(out: &mut Completeness, session: &str, first_seq: u64, last_seq: u64) {
    // Sums over hostile sessions could pass u64: held at its top, never wrapped.
    out.unexplained = out.unexplained.saturating_add(last_seq - first_seq + 1);
    if out.holes.len() < MAX_HOLES_LISTED {
        out.holes.push(Hole {
            session: session.to_owned(),
            first_seq,
            last_seq,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real record (made by the executor) of `session`, numbered `seq`.
    fn record(session: &str, seq: u64) -> AuditRecord {
        let audit = countersign::MemoryAudit::new();
        let exec = countersign::Executor::new(
            countersign::Config::new(session, countersign::Session::default(), [2; 32]),
            audit.clone(),
        );
        let _ = exec.submit(
            countersign::Call::new("t", "nope", "{}"),
            countersign::Timestamp::from_millis(0),
        );
        let mut record = audit.records().remove(0);
        record.seq = seq;
        record
    }

    fn check(seen: &[u64], named: &[(u64, u64)]) -> Completeness {
        let mut tally = Tally::default();
        let session = tally.sessions.entry("s".into()).or_default();
        session.seen = seen.to_vec();
        session.named = named.to_vec();
        tally.finish()
    }

    fn holes(c: &Completeness) -> Vec<(u64, u64)> {
        c.holes.iter().map(|h| (h.first_seq, h.last_seq)).collect()
    }

    #[test]
    fn a_trail_without_missing_seqs_has_no_holes() {
        let c = check(&[3, 1, 2, 2], &[]);
        assert_eq!((c.sessions, c.named, c.unexplained), (1, 0, 0));
    }

    #[test]
    fn missing_seqs_not_named_are_holes_and_named_ones_are_not() {
        let c = check(&[1, 2, 9, 10, 20], &[(4, 5), (12, 30)]);
        assert_eq!(holes(&c), [(3, 3), (6, 8), (11, 11)]);
        assert_eq!(c.unexplained, 5);
        assert_eq!(c.named, 2 + 8, "4–5, and 12–19 of 12–30");
    }

    #[test]
    fn a_gap_record_may_name_seqs_the_trail_holds_after_all() {
        // Sent without an answer, then stored: named, yet there. Nothing is missing.
        let c = check(&[1, 2, 3, 4], &[(2, 3)]);
        assert_eq!((c.named, c.unexplained), (0, 0));
    }

    #[test]
    fn overlapping_and_reversed_names_are_read_safely() {
        let c = check(&[1, 10], &[(2, 6), (4, 8)]);
        assert_eq!(holes(&c), [(9, 9)]);
        assert_eq!(c.named, 7);
        let mut tally = Tally::default();
        let mut record = record("s", 5);
        record.event = AuditEvent::TrailGap;
        record.reason = Reason::TrailGap {
            first_seq: 9,
            last_seq: 2,
            unconfirmed: 0,
        };
        tally.add(&record);
        let c = tally.finish();
        assert_eq!(holes(&c), [(1, 4)], "a reversed run names nothing");
    }

    #[test]
    fn sessions_are_apart_and_the_gateways_own_records_are_passed_over() {
        let mut tally = Tally::default();
        for (session, seq) in [("a", 1), ("a", 3), ("b", 2), ("g", 0)] {
            tally.add(&record(session, seq));
        }
        let c = tally.finish();
        assert_eq!(c.sessions, 2);
        let listed: Vec<(&str, u64, u64)> = c
            .holes
            .iter()
            .map(|h| (h.session.as_str(), h.first_seq, h.last_seq))
            .collect();
        assert_eq!(listed, [("a", 2, 2), ("b", 1, 1)]);
    }

    #[test]
    fn sums_over_sessions_never_wrap_to_complete() {
        let mut tally = Tally::default();
        for session in ["a", "b"] {
            tally.add(&record(session, (1 << 63) + 1));
        }
        let c = tally.finish();
        assert_eq!(c.holes.len(), 2);
        assert_eq!(c.unexplained, u64::MAX, "held at the top");
    }

    #[test]
    fn a_gap_record_names_only_records_before_it() {
        let gap = |seq: u64, first_seq: u64, last_seq: u64| {
            let mut r = record("s", seq);
            r.event = AuditEvent::TrailGap;
            r.reason = Reason::TrailGap {
                first_seq,
                last_seq,
                unconfirmed: 0,
            };
            r
        };
        let mut tally = Tally::default();
        for r in [
            record("s", 1),
            gap(3, 5, 9),
            record("s", 10),
            gap(12, 11, 11),
        ] {
            tally.add(&r);
        }
        let c = tally.finish();
        assert_eq!(holes(&c), [(2, 2), (4, 9)], "5–9 named at 3: not believed");
        assert_eq!(c.named, 1, "11, named at 12");
    }

    #[test]
    fn many_named_runs_and_many_missing_runs_take_one_pass() {
        // 200,000 missing runs, 200,000 gap records naming far-off seqs: quadratic would
        // be 4·10^10 steps.
        let n = 200_000u64;
        let seen: Vec<u64> = (1..=n).map(|i| i * 2).collect();
        let named: Vec<(u64, u64)> = (0..n).map(|i| (10 * n + i * 3, 10 * n + i * 3)).collect();
        let c = check(&seen, &named);
        assert_eq!(c.unexplained, n);
        assert_eq!(c.named, 0);
    }

    #[test]
    fn past_the_listing_cap_holes_are_counted() {
        let seen: Vec<u64> = (1..=1_000).map(|i| i * 2).collect();
        let c = check(&seen, &[]);
        assert_eq!(c.holes.len(), MAX_HOLES_LISTED);
        assert_eq!(c.unexplained, 1_000);
    }
}
