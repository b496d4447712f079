//! The decision: a pure function from what is known of a call to run, ask, hand off or
//! refuse. It reads no state and calls no page code.

use crate::audit::Decider;
use crate::call::Caller;
use crate::codes::GrantId;
use crate::mode::Mode;
use crate::reason::{Level, Reason};

use super::{ApprovalPolicy, Kind};

/// What the decision reads about one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// The action's kind.
    pub kind: Kind,
    /// The level in force for the session's role, and where it came from.
    pub level: Level,
    /// The classifier's verdict on these arguments.
    pub verdict: crate::action::Verdict,
    /// The session's mode.
    pub mode: Mode,
    /// Who asked.
    pub caller: Caller,
    /// A session grant that covers this call (same registration, caller and rule).
    pub grant: Option<GrantId>,
    /// Whether the last step is the person's (a handoff).
    pub handoff: bool,
    /// Whether the action asks the person a question.
    pub question: bool,
    /// Whether its run takes a countersignature.
    pub countersigned: bool,
    /// Whether it asks twice.
    pub confirm_twice: bool,
    /// Whether it undoes another action.
    pub reversal: bool,
    /// The untrusted content the model has read since the person last spoke, if any.
    pub untrusted: Option<String>,
    /// Whether the policy file asks every time after untrusted content.
    pub untrusted_always: bool,
}

/// What the decision is, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Run without asking.
    Run {
        /// Why.
        reason: Reason,
        /// Who decided.
        by: Decider,
    },
    /// Wait for a person's ticket under `policy`.
    Ask {
        /// `Ask` or `AskAlways`.
        policy: ApprovalPolicy,
        /// Why.
        reason: Reason,
        /// Who decided.
        by: Decider,
    },
    /// Hand the last step to the person.
    Handoff,
    /// Ask the person the action's question.
    Question,
    /// Refuse the call.
    Refuse {
        /// Why.
        reason: Reason,
        /// Who decided.
        by: Decider,
        /// The classifier's words, if it refused.
        detail: Option<String>,
    },
}

impl Facts {
    /// The least this call is asked at before grants, modes and untrusted content ([`floor`]).
    pub(crate) fn floor(&self) -> ApprovalPolicy {
        floor(
            self.level.policy,
            &self.verdict,
            self.countersigned,
            self.caller,
            self.kind,
        )
    }
}

/// Decides a call from its facts. Fails closed: what no rule lets run is asked, and
/// what needs a person who is absent is refused.
pub fn decide(facts: &Facts) -> Decision {
    use crate::action::Verdict;
    let mode = facts.mode;
    let refused = Decision::Refuse {
        reason: Reason::ModeRefused { mode },
        by: Decider::Mode,
        detail: None,
    };
    if let Verdict::Deny(why) = &facts.verdict {
        return Decision::Refuse {
            reason: Reason::ClassifierDenied,
            by: Decider::Classifier,
            detail: Some(why.clone()),
        };
    }
    // INVARIANT: a handoff is never also put behind an approval, and no mode turns it
    // into a run; nor does any mode answer a question for the person.
    if facts.handoff || facts.question {
        return match mode {
            Mode::Away | Mode::Unattended => refused,
            Mode::Default | Mode::Bypass if facts.handoff => Decision::Handoff,
            Mode::Default | Mode::Bypass => Decision::Question,
        };
    }
    let outside = !facts.caller.is_assistant();
    let floor = facts.floor();
    // INVARIANT: after untrusted content, a change is asked one level higher than it
    // would be (every time, if the policy file says so); no grant covers it and no mode
    // lowers it. Reads are untouched.
    if let Some(source) = facts
        .untrusted
        .as_ref()
        .filter(|_| facts.kind != Kind::Read)
    {
        let policy = if floor == ApprovalPolicy::None && !facts.untrusted_always {
            ApprovalPolicy::Ask
        } else {
            ApprovalPolicy::AskAlways
        };
        return match mode {
            Mode::Default | Mode::Bypass => Decision::Ask {
                policy,
                reason: Reason::AfterUntrusted {
                    source: source.clone(),
                },
                by: Decider::Policy,
            },
            Mode::Away | Mode::Unattended => refused,
        };
    }
    let level = facts.level.clone();
    let (reason, by) = match (&facts.verdict, level.policy) {
        (Verdict::Ask, _) => (Reason::ClassifierAsked, Decider::Classifier),
        _ if floor == ApprovalPolicy::None => {
            return Decision::Run {
                reason: Reason::Level(level),
                by: Decider::Policy,
            }
        }
        (_, ApprovalPolicy::None) if facts.countersigned => {
            (Reason::NeedsCountersignature, Decider::Policy)
        }
        (_, ApprovalPolicy::None) => (
            Reason::OutsideCaller {
                caller: facts.caller,
            },
            Decider::Policy,
        ),
        _ => (Reason::Level(level), Decider::Policy),
    };
    // INVARIANT: a grant covers only `Ask` (or a level raised to it), never a
    // classifier's `Ask` or a double confirmation.
    if let Some(grant) = facts
        .grant
        .filter(|_| floor == ApprovalPolicy::Ask && !facts.confirm_twice)
    {
        return Decision::Run {
            reason: Reason::Grant { grant },
            by: Decider::SessionGrant,
        };
    }
    let policy = floor;
    let ask = Decision::Ask { policy, reason, by };
    let allowed = Decision::Run {
        reason: Reason::ModeAllowed { mode },
        by: Decider::Mode,
    };
    // INVARIANT: unattended stands in for a person only on a plain `Ask` of the page's
    // assistant: not a classifier's, a double confirmation or a countersigned action.
    let plain_ask =
        policy == ApprovalPolicy::Ask && !facts.confirm_twice && !facts.countersigned && !outside;
    match mode {
        Mode::Default => ask,
        // INVARIANT: no mode, not even bypass, lowers the level of a reversal, a
        // countersigned action or an outside agent's call.
        Mode::Bypass if facts.reversal || facts.countersigned || outside => ask,
        Mode::Bypass => allowed,
        Mode::Unattended if plain_ask => allowed,
        Mode::Away | Mode::Unattended => refused,
    }
}

/// The least a call is asked at before grants, modes and untrusted content: its level,
/// every time where the classifier asks, and never below `Ask` for a countersigned action
/// or an outside agent's write. The decision, the tool list, a redrawn card and an
/// edited or restored call all take their level from here.
pub(crate) fn floor(
    level: ApprovalPolicy,
    verdict: &crate::action::Verdict,
    countersigned: bool,
    caller: Caller,
    kind: Kind,
) -> ApprovalPolicy {
    let outside_write = !caller.is_assistant() && kind != Kind::Read;
    match (verdict, level) {
        (crate::action::Verdict::Ask, _) => ApprovalPolicy::AskAlways,
        (_, ApprovalPolicy::None) if countersigned || outside_write => ApprovalPolicy::Ask,
        (_, level) => level,
    }
}
