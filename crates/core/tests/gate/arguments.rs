//! What the card shows is what runs: one parse of the arguments, so the card, the
//! ticket, the audit digest and `run` see the same arguments, however they are spelt.

use std::cell::RefCell;
use std::rc::Rc;

use countersign::ticket::TicketError;
use countersign::{audit::ArgsDigest, Action, Config, Confirm, Gesture, Kind, Session, Step};

use countersign::executor::RegisterError;

use crate::common::{at, code, for_call, World};

#[allow(dead_code, unreachable_pub, missing_docs)] // Only deserialised.
mod shapes {
    use std::collections::BTreeMap;

    use schemars::JsonSchema;
    use serde::Deserialize;

    /// Which rows a purge removes: some, or (with no field at all) every one.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Rows {
        Some { rows: Vec<u32> },
        All {},
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Purge {
        pub target: Rows,
    }

    /// What a purge removes: serde reads the first alternative that deserialises, and
    /// the last one (no field at all) removes every row.
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Target {
        /// Rows `span.0..=span.1`.
        Span { span: (u32, u32) },
        /// Rows whose id and version are given.
        Versioned { rows: BTreeMap<u32, u32> },
        /// Rows written from this address.
        From { host: std::net::IpAddr },
        /// Every row but the `keep` newest (or oldest, if negative).
        Keep { keep: std::num::NonZeroI32 },
        /// Rows older than this.
        Older { older_than: std::time::Duration },
        /// Every row.
        Everything {},
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Sweep {
        pub target: Target,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Transfer {
        pub small: f32,
        pub large: f64,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(untagged)]
    pub enum Share {
        /// One person: their user name.
        Person {
            #[serde(alias = "group")]
            user: String,
        },
        /// A whole group.
        Group { group: String },
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct ShareWith {
        pub with: Share,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    pub struct Amount {
        pub amount: f64,
        pub count: u64,
        pub note: String,
    }
}

/// Broke: the schema check chooses an untagged alternative by type, `const` and
/// `required` only, and ignores `minimum`/`maximum`/`format`; serde's own choice also
/// fails on a number out of the field's range. So `{"rows":[3, 4294967296]}` passes the
/// check judged against `Some { rows }` (every field declared), while serde cannot read
/// 4294967296 as a `u32` and falls through to `All {}`, dropping `rows`. The card shows
/// "rows 3 and 4294967296" as "the exact arguments that will run"; the ticket binds
/// them; `run` purges every row.
/// Fixed: see the INVARIANT where the check is made.
#[test]
fn break_the_card_shows_rows_the_untagged_params_dropped_and_run_purges_all() {
    let w = World::new();
    let registered = w.exec.register(
        Action::<shapes::Purge>::new("purge", "Purge rows of the table.")
            .kind(Kind::Danger)
            .run(|_p: shapes::Purge| async { Ok::<_, String>(()) }),
    );
    // `All {}` takes any object, so `Some { rows }` and `All` overlap: serde could fall to
    // `All` on a row out of range while the card shows the rows.
    assert!(
        matches!(registered, Err(RegisterError::Ambiguous(..))),
        "{registered:?}"
    );
    assert!(w.audit.records().is_empty());
}

/// Duplicate keys: serde_json keeps the last; the card, the ticket's digest, the audit
/// digest, the consequence and `run` must all be of that one value.
#[test]
fn a_key_given_twice_binds_one_value_on_card_ticket_audit_and_run() {
    let w = World::with_rename();
    let card = w.card("rename", r#"{"name":"shown","name":"hidden"}"#, 0);
    let shown = card.arguments["name"].as_str().unwrap().to_owned();
    assert_eq!(
        card.consequence.as_deref(),
        Some(format!("set the name to `{shown}`").as_str())
    );
    assert_eq!(card.args_sha256, ArgsDigest::of_value(&card.arguments));
    let key = Config::new("test", Session::new("admin", ["workspace.write"]), [42; 32]).audit_key;
    for r in for_call(&w.audit, card.call) {
        assert_eq!(r.args_digest, key.digest(&card.arguments).to_hex());
    }
    let settled = w.allow(&card, Gesture::AllowOnce, 1).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(w.runs(), [format!("rename:{shown}")]);
    for r in for_call(&w.audit, card.call) {
        assert_eq!(r.args_digest, key.digest(&card.arguments).to_hex());
    }
    assert_eq!(w.terminal(card.call).len(), 1);
}

/// A ticket minted for one spelling of the arguments approves only the value the card
/// showed; another spelling of the same value is the same call, a different value is
/// not; and a reload (which stores the parsed value as text) binds the same digest.
#[test]
fn a_reload_binds_the_same_arguments_whatever_their_spelling() {
    let w = World::new();
    let ran = Rc::new(RefCell::new(Vec::<String>::new()));
    let log = Rc::clone(&ran);
    let _a = w
        .exec
        .register(
            Action::<shapes::Amount>::new("pay", "Pay.")
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .consequence(|p| format!("pay {} x{} ({})", p.amount, p.count, p.note))
                .run(move |p: shapes::Amount| {
                    log.borrow_mut()
                        .push(format!("{}|{}|{}", p.amount, p.count, p.note));
                    async { Ok::<_, String>(()) }
                }),
        )
        .unwrap();
    let raw = r#"{ "note": "caf\u00e9 \ud83d\ude00 \/ \u2028", "count": 9007199254740991,
                  "amount": 1e2 }"#;
    let first = w.card("pay", raw, 0);
    let stored = w.exec.waiting(at(1));
    assert_eq!(stored.len(), 1);
    // The page reloads: a new executor, the same declaration, the stored call.
    let w2 = World::new();
    let ran2 = Rc::new(RefCell::new(Vec::<String>::new()));
    let log2 = Rc::clone(&ran2);
    let _b = w2
        .exec
        .register(
            Action::<shapes::Amount>::new("pay", "Pay.")
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .consequence(|p| format!("pay {} x{} ({})", p.amount, p.count, p.note))
                .run(move |p: shapes::Amount| {
                    log2.borrow_mut()
                        .push(format!("{}|{}|{}", p.amount, p.count, p.note));
                    async { Ok::<_, String>(()) }
                }),
        )
        .unwrap();
    let Step::Approval(again) = w2.exec.restore_pending(stored[0].1.clone(), at(2)).unwrap() else {
        panic!("a restored call is asked again");
    };
    assert_eq!(again.arguments, first.arguments);
    assert_eq!(again.args_sha256, first.args_sha256);
    assert_eq!(again.consequence, first.consequence);
    let settled = w2.allow(&again, Gesture::AllowOnce, 3).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(*ran2.borrow(), ["100|9007199254740991|café 😀 / \u{2028}"]);
    assert!(ran.borrow().is_empty());
    assert_eq!(w2.terminal(again.call).len(), 1);
}

/// An edit's value, not the model's, is what the new card binds and what runs; a ticket
/// of the card the model's arguments drew approves nothing.
#[test]
fn a_ticket_for_the_models_arguments_does_not_approve_the_persons_edit() {
    let w = World::with_rename();
    let card = w.card("rename", r#"{"name":"model"}"#, 0);
    let Step::Approval(edited) = w
        .exec
        .edit(card.call, r#"{"name":"person"}"#, at(1))
        .unwrap()
    else {
        panic!("an edit is asked again")
    };
    let stale = w.exec.approve(card.countersign(Gesture::AllowOnce), at(2));
    assert!(matches!(stale, Err(TicketError::NotPending)), "{stale:?}");
    assert_eq!(edited.args_sha256, ArgsDigest::of_value(&edited.arguments));
    // The edited card's ticket cannot be re-pointed at the original call.
    let settled = w.allow(&edited, Gesture::AllowOnce, 3).unwrap();
    assert_eq!(code(&settled), "OK");
    assert_eq!(w.runs(), ["rename:person"]);
    assert_eq!(w.terminal(card.call).len(), 1, "superseded once");
    assert_eq!(w.terminal(edited.call).len(), 1);
}

/// What became of a call: refused before any card, or the card's arguments and what
/// `run` was given once the person allowed it.
#[derive(Debug)]
enum Seen {
    /// The params never registered: their alternatives overlap.
    Unregistered(String),
    Refused(String),
    Ran {
        card: serde_json::Value,
        ran: Vec<String>,
    },
}

/// Submits `args` to a `Danger` action taking `P` (always asked), allows the card if one
/// is drawn, and says what ran (`{:?}` of the params). One terminal record either way,
/// and nothing runs before the card is allowed.
fn allow_the_card<P>(args: &str) -> Seen
where
    P: serde::de::DeserializeOwned + schemars::JsonSchema + Clone + std::fmt::Debug + 'static,
{
    let w = World::new();
    let ran = Rc::new(RefCell::new(Vec::<String>::new()));
    let log = Rc::clone(&ran);
    let registered = w.exec.register(
        Action::<P>::new("sweep", "Remove rows.")
            .kind(Kind::Danger)
            .run(move |p: P| {
                log.borrow_mut().push(format!("{p:?}"));
                async { Ok::<_, String>(()) }
            }),
    );
    let _a = match registered {
        Ok(registration) => registration,
        Err(error @ RegisterError::Ambiguous(..)) => return Seen::Unregistered(error.to_string()),
        Err(other) => panic!("{other}"),
    };
    match w.call("sweep", args, 0) {
        Step::Settled(s) => {
            assert!(ran.borrow().is_empty());
            assert_eq!(w.terminal(s.call).len(), 1);
            Seen::Refused(code(&s).to_owned())
        }
        Step::Approval(card) => {
            assert!(ran.borrow().is_empty(), "nothing runs before the card");
            let settled = w.allow(&card, Gesture::AllowOnce, 1).unwrap();
            assert_eq!(w.terminal(settled.call).len(), 1);
            assert_eq!(w.exec.live_calls(), 0);
            let ran = ran.borrow().clone();
            Seen::Ran {
                card: card.arguments.clone(),
                ran,
            }
        }
        other => panic!("{other:?}"),
    }
}

/// The call is refused, or what ran is the alternative the card's fields name (never
/// `Everything`, which the card does not show).
fn never_everything(args: &str) {
    match allow_the_card::<shapes::Sweep>(args) {
        Seen::Unregistered(_) => {}
        Seen::Refused(code) => assert_eq!(code, "INVALID_ARGS", "{args}"),
        Seen::Ran { card, ran } => assert!(
            ran.len() == 1 && !ran[0].contains("Everything"),
            "the person approved a card showing {card}; what ran was {ran:?}"
        ),
    }
}

/// The legitimate form of each alternative is read as the card shows it.
#[test]
fn untagged_alternatives_that_overlap_never_register() {
    // `Everything {}` takes any object: serde falls to it wherever another variant fails
    // on what the schema does not show. Such params are refused when they register.
    match allow_the_card::<shapes::Sweep>(r#"{"target":{}}"#) {
        Seen::Unregistered(why) => assert!(why.contains("ambiguous"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// Broke: schema_check ignores `minItems`/`maxItems`, which schemars writes for a tuple
/// (and a `[T; N]`), so `{"span":[5]}` fits `Span` for the check; serde cannot read a
/// one-item array as `(u32, u32)` and falls through to `Everything {}`. The card shows
/// `span: [5]`; `run` removes every row.
/// Fixed: params whose alternatives overlap never register (see `alternatives.rs`);
/// float fields refuse numbers they would change.
#[test]
fn break_a_tuple_too_short_shows_a_span_and_run_removes_every_row() {
    never_everything(r#"{"target":{"span":[5]}}"#);
    never_everything(r#"{"target":{"span":[5,6,7]}}"#);
}

/// Broke: serde's untagged enums buffer the arguments, and a buffered string key cannot
/// be read as an integer: a `BTreeMap<u32, _>` (or `HashMap`) inside an untagged
/// alternative never deserialises, whatever its keys. Its legitimate form,
/// `{"rows":{"7":3}}`, fits `Versioned` for the check (the keys match `^\d+$`), serde
/// falls through to `Everything {}`; the card shows row 7, `run` removes every row.
/// Fixed: params whose alternatives overlap never register (see `alternatives.rs`);
/// float fields refuse numbers they would change.
#[test]
fn break_an_integer_keyed_map_in_an_untagged_alternative_runs_the_next_one() {
    never_everything(r#"{"target":{"rows":{"7":3}}}"#);
}

/// Broke: schemars writes `"format": "ip"` (and `ipv4`, `ipv6`, `uuid`, `date-time`
/// for other types) on strings serde parses, and the check reads formats of integers
/// only. `"host":"everywhere"` fits `From` for the check; serde cannot parse an address
/// and falls through to `Everything {}`.
/// Fixed: params whose alternatives overlap never register (see `alternatives.rs`);
/// float fields refuse numbers they would change.
#[test]
fn break_a_string_that_is_no_address_shows_a_host_and_run_removes_every_row() {
    never_everything(r#"{"target":{"host":"everywhere"}}"#);
}

/// Broke: schemars writes a `NonZeroI32` as `"not": {"const": 0}`, a keyword the check
/// does not read; `{"keep":0}` fits `Keep` for the check, serde refuses 0 and falls
/// through to `Everything {}`.
/// Fixed: params whose alternatives overlap never register (see `alternatives.rs`);
/// float fields refuse numbers they would change.
#[test]
fn break_a_zero_for_a_non_zero_field_shows_keep_and_run_removes_every_row() {
    never_everything(r#"{"target":{"keep":0}}"#);
}

/// Broke: a `Duration` is `{secs: u64, nanos: u32}` to schemars, each within range;
/// serde refuses a pair whose sum overflows (`nanos` carries into `secs`). The check
/// chooses `Older`, serde falls through to `Everything {}`.
/// Fixed: params whose alternatives overlap never register (see `alternatives.rs`);
/// float fields refuse numbers they would change.
#[test]
fn break_a_duration_that_overflows_shows_an_age_and_run_removes_every_row() {
    never_everything(
        r#"{"target":{"older_than":{"secs":18446744073709551615,"nanos":1000000000}}}"#,
    );
}

/// Broke: a number the card shows is not the number `run` reads. serde casts a JSON
/// number into an `f32` (`1e39` becomes `inf`) and an integer into an `f64` (above 2^53
/// it rounds: 9007199254740993 becomes 9007199254740992); the check knows no `float`
/// or `double` limit. The card (and the ticket, and the audit digest) bind one amount,
/// `run` moves another.
/// Fixed: params whose alternatives overlap never register (see `alternatives.rs`);
/// float fields refuse numbers they would change.
#[test]
fn break_an_amount_the_card_shows_is_not_the_amount_that_runs() {
    let mut differ = Vec::new();
    for args in [
        r#"{"small":1e39,"large":1}"#,
        r#"{"small":1,"large":9007199254740993}"#,
    ] {
        match allow_the_card::<shapes::Transfer>(args) {
            Seen::Unregistered(why) => panic!("{why}"),
            Seen::Refused(code) => assert_eq!(code, "INVALID_ARGS"),
            Seen::Ran { card, ran } => {
                if ran != [shapes_transfer_text(&card)] {
                    differ.push(format!("the card showed {card}; what ran was {ran:?}"));
                }
            }
        }
    }
    assert!(differ.is_empty(), "{differ:#?}");
    // Sanity: amounts each float holds exactly run as shown.
    match allow_the_card::<shapes::Transfer>(r#"{"small":0.5,"large":12345.25}"#) {
        Seen::Ran { ran, .. } => assert_eq!(ran, ["Transfer { small: 0.5, large: 12345.25 }"]),
        other => panic!("{other:?}"),
    }
}

/// `{:?}` of a `Transfer` holding exactly the numbers `card` shows (as decimal text).
fn shapes_transfer_text(card: &serde_json::Value) -> String {
    let text = |v: &serde_json::Value| {
        let t = v.to_string();
        if t.contains(['.', 'e', 'E']) {
            t
        } else {
            format!("{t}.0")
        }
    };
    format!(
        "Transfer {{ small: {}, large: {} }}",
        text(&card["small"]),
        text(&card["large"])
    )
}

/// Broke: schemars does not show `#[serde(alias)]`, and in an untagged enum serde tries
/// the alternative with the alias first: `{"group":"staff"}` is `Group` to the check
/// (the model was shown `group` only there) and `Person { user: "staff" }` to serde.
/// The card shows a group; `run` shares with a person named "staff".
/// Fixed: params whose alternatives overlap never register (see `alternatives.rs`);
/// float fields refuse numbers they would change.
#[test]
fn break_an_alias_makes_serde_choose_another_alternative_than_the_card_shows() {
    match allow_the_card::<shapes::ShareWith>(r#"{"with":{"group":"staff"}}"#) {
        Seen::Unregistered(_) => {}
        Seen::Refused(code) => assert_eq!(code, "INVALID_ARGS"),
        Seen::Ran { card, ran } => assert_eq!(
            ran,
            [r#"ShareWith { with: Group { group: "staff" } }"#],
            "the model was shown `group` only in `Group`; the card showed {card}"
        ),
    }
}
