//! `countersign-gateway replay`: what a candidate policy file would have decided for
//! every call a trail recorded. Each call's level is derived again from what the trail
//! keeps (the role, the action, its declared kind and confirm; never the arguments)
//! under the candidate and under the current file, and the two compared. A change that
//! lowers any level is reported, and fails. The raises that do not come from the file
//! (an agent's call, untrusted content) apply alike under both, so they are left out.

use std::collections::{BTreeMap, HashMap};

use countersign::policy::{ApprovalPolicy, PolicyFile};

/// How a call's level changes under the candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// Asked less: it would have run without asking, or been asked once where it was
    /// asked every time.
    Lowered,
    /// Asked more, or refused (the candidate names no role for the session).
    Raised,
    /// The same level.
    Same,
}

/// One call, replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replayed {
    /// The page session.
    pub session: String,
    /// The call's id in it.
    pub call: u64,
    /// The session's role.
    pub role: String,
    /// The action.
    pub action: String,
    /// The level it had.
    pub before: ApprovalPolicy,
    /// The level the candidate gives it; `None` when the candidate names no role for
    /// the session (it would be refused).
    pub after: Option<ApprovalPolicy>,
}

impl Replayed {
    /// How the level changes.
    pub fn change(&self) -> Change {
        let rank = |p: ApprovalPolicy| match p {
            ApprovalPolicy::None => 0,
            ApprovalPolicy::Ask => 1,
            ApprovalPolicy::AskAlways => 2,
        };
        match self.after {
            None => Change::Raised,
            Some(after) if rank(after) < rank(self.before) => Change::Lowered,
            Some(after) if rank(after) > rank(self.before) => Change::Raised,
            Some(_) => Change::Same,
        }
    }
}

/// What a replay found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every call the trail lets it decide again, in the order they arrived.
    pub calls: Vec<Replayed>,
    /// Calls it cannot decide again: the action never resolved (unknown to the page),
    /// so the trail holds no declared kind.
    pub undecidable: usize,
}

impl Report {
    /// Whether any call's level would be lowered.
    pub fn lowers(&self) -> bool {
        self.calls.iter().any(|c| c.change() == Change::Lowered)
    }

    /// The report in words: per action and role, how many calls are lowered, raised and
    /// unchanged, with an example of each change.
    pub fn to_text(&self) -> String {
        let name = |p: Option<ApprovalPolicy>| match p {
            Some(ApprovalPolicy::None) => "run without asking",
            Some(ApprovalPolicy::Ask) => "ask",
            Some(ApprovalPolicy::AskAlways) => "ask every time",
            None => "refuse (no role)",
        };
        let mut groups: BTreeMap<(&str, &str), BTreeMap<Change, Vec<&Replayed>>> = BTreeMap::new();
        for call in &self.calls {
            groups
                .entry((call.action.as_str(), call.role.as_str()))
                .or_default()
                .entry(call.change())
                .or_default()
                .push(call);
        }
        let mut out = String::new();
        for ((action, role), changes) in &groups {
            for (change, calls) in changes {
                let Some(example) = calls.first() else {
                    continue;
                };
                let what = match change {
                    Change::Lowered => "LOWERED",
                    Change::Raised => "raised",
                    Change::Same => "unchanged",
                };
                out.push_str(&format!(
                    "{what}: {n} call(s) of {action} by {role}: {before} -> {after} (e.g. session {session} call {call})\n",
                    n = calls.len(),
                    before = name(Some(example.before)),
                    after = name(example.after),
                    session = example.session,
                    call = example.call,
                ));
            }
        }
        let lowered = self
            .calls
            .iter()
            .filter(|c| c.change() == Change::Lowered)
            .count();
        let unasked = self
            .calls
            .iter()
            .filter(|c| c.change() == Change::Lowered && c.after == Some(ApprovalPolicy::None))
            .count();
        out.push_str(&format!(
            "\n{} calls replayed; {lowered} lowered ({unasked} would have run without asking); {} not decidable (never resolved)\n",
            self.calls.len(),
            self.undecidable
        ));
        out
    }
}

/// Why a trail could not be replayed: a line that is not one of its lines.
pub type ReplayError = crate::evidence::EvidenceError;

/// Replays the trail `bytes` under `candidate`, against `current`: the file in force when
/// the trail was written (an empty one, [`PolicyFile::default`], when there was none:
/// the declarations' own levels).
pub fn replay(
    bytes: &[u8],
    candidate: &PolicyFile,
    current: &PolicyFile,
) -> Result<Report, ReplayError> {
    let mut report = Report::default();
    // (session, call) → its place in `calls`, or `None` while not resolved.
    let mut seen: HashMap<(String, u64), Option<usize>> = HashMap::new();
    for chained in crate::evidence::call_lines(bytes) {
        let r = chained?.record;
        let key = (r.session.to_string(), r.call);
        let slot = seen.entry(key.clone()).or_insert(None);
        if slot.is_some() {
            continue;
        }
        // The first record that carries the resolved declaration.
        let (Some(kind), Some(confirm)) = (r.kind, r.confirm) else {
            continue;
        };
        let before = current.level(&r.role, &r.action, kind, confirm).0;
        let after = candidate
            .role_for(&r.role)
            .map(|_| candidate.level(&r.role, &r.action, kind, confirm).0);
        report.calls.push(Replayed {
            session: key.0,
            call: key.1,
            role: r.role.to_string(),
            action: r.action.to_string(),
            before,
            after,
        });
        *slot = Some(report.calls.len() - 1);
    }
    report.undecidable = seen.values().filter(|place| place.is_none()).count();
    Ok(report)
}
