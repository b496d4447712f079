//! The argument digest is over RFC 8785 (JCS) text, so a backend in any language with a
//! stock JCS library computes the same digest; and the gate reads a number only when
//! its canonical text names exactly what runs. One table (`canonical.json`) is checked
//! here, through Python's `rfc8785` and through Node's `canonicalize`.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

use countersign::audit::{canonical_json, ArgsDigest};
use countersign::executor::Registration;
use countersign::ticket::EditError;
use countersign::{Action, Confirm, Gesture, Kind, Step};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::common::{approval, at, code, drive, World};

/// Any object: the params of an action that takes whatever the table sends.
#[derive(Clone, Deserialize, JsonSchema)]
#[serde(transparent)]
struct AnyObject(Map<String, Value>);

/// One number.
#[derive(Clone, Deserialize, JsonSchema)]
struct OneNumber {
    /// The number.
    n: f64,
}

#[derive(Deserialize)]
struct Table {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    arguments: String,
    canonical: Option<String>,
    refused: Option<String>,
}

fn here(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/gate")
        .join(file)
}

fn table() -> Vec<Case> {
    let text = std::fs::read_to_string(here("canonical.json")).expect("the table is there");
    let table: Table = serde_json::from_str(&text).expect("the table is JSON");
    assert!(table.cases.len() > 30, "the table has its cases");
    table.cases
}

/// A world with `echo`, asked on a card, whose run logs the canonical text of what it
/// was given.
fn echo_world() -> (World, Rc<RefCell<Vec<String>>>, Registration) {
    let w = World::new();
    let ran = Rc::new(RefCell::new(Vec::new()));
    let log = Rc::clone(&ran);
    let echo = Action::<AnyObject>::new("echo", "Echo the arguments.")
        .kind(Kind::Write)
        .confirm(Confirm::Ask)
        .run(move |params: AnyObject| {
            let log = Rc::clone(&log);
            async move {
                log.borrow_mut()
                    .push(canonical_json(&Value::Object(params.0)));
                Ok::<_, String>(json!({}))
            }
        });
    let registration = w.exec.register(echo).expect("echo registers");
    (w, ran, registration)
}

/// Broke: the digest was over serde_json's compact text, keys in byte order. Python's
/// and Node's stock libraries wrote `0.00001`, `1e21`, `1.0` and keys past the Basic
/// Multilingual Plane otherwise, so valid tokens were refused; and `9007199254740993`
/// or `0.10000000000000001` ran as another number than their text said. Fixed: JCS
/// text, and the gate reads a number only when that text says exactly what runs.
#[test]
fn each_case_is_digested_as_its_canonical_text_or_refused() {
    let (w, ran, _echo) = echo_world();
    for (i, case) in table().into_iter().enumerate() {
        let now = i as u64 * 10;
        let name = &case.name;
        match (&case.refused, w.call("echo", &case.arguments, now)) {
            (Some(refusal), Step::Settled(settled)) => {
                assert_eq!(code(&settled), "INVALID_ARGS", "{name}");
                let message = settled.outcome.to_model_json()["error"]["message"].to_string();
                assert!(message.contains(refusal), "{name}: {message}");
                assert_eq!(w.terminal(settled.call).len(), 1, "{name}");
            }
            (None, step) => {
                let canonical = case.canonical.as_deref().expect("a read case has its text");
                let card = approval(step, name);
                assert_eq!(
                    card.args_sha256,
                    ArgsDigest::of_bytes(canonical.as_bytes()),
                    "{name}"
                );
                assert_eq!(canonical_json(&card.arguments), canonical, "{name}");
                let settled = w
                    .allow(&card, Gesture::AllowOnce, now + 1)
                    .expect("it runs");
                assert_eq!(code(&settled), "OK", "{name}");
                // What ran is exactly what was digested.
                assert_eq!(ran.borrow_mut().pop().as_deref(), Some(canonical), "{name}");
            }
            (Some(_), other) => panic!("{name}: not refused: {other:?}"),
        }
        assert!(ran.borrow().is_empty(), "{name}: nothing else ran");
    }
}

/// Runs a stock JCS library's script over the table; it must agree on every case.
fn agrees(program: &str, args: &[&Path], setup: &str) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} runs ({setup}): {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{program} disagrees ({setup}):\n{said}"
    );
    assert!(said.contains(" cases agree"), "{said}");
}

#[test]
fn pythons_rfc8785_writes_every_case_as_the_table_says() {
    agrees(
        "python3",
        &[&here("canonical.py"), &here("canonical.json")],
        "cargo xtask setup installs rfc8785 from PyPI",
    );
}

#[test]
fn nodes_canonicalize_writes_every_case_as_the_table_says() {
    let library = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/tools/node_modules/canonicalize/lib/canonicalize.js");
    agrees(
        "node",
        &[&here("canonical.mjs"), &here("canonical.json"), &library],
        "cargo xtask setup installs canonicalize from npm into target/tools",
    );
}

#[test]
fn an_edit_with_an_inexact_number_is_refused_and_the_card_waits() {
    let (w, ran, _echo) = echo_world();
    let card = approval(w.call("echo", r#"{"n":1}"#, 0), "echo");
    let edit = w.exec.edit(card.call, r#"{"n":9007199254740993}"#, at(1));
    match edit {
        Err(EditError::Invalid(why)) => assert!(why.contains("beyond"), "{why}"),
        other => panic!("the edit was taken: {other:?}"),
    }
    let settled = w
        .allow(&card, Gesture::AllowOnce, 2)
        .expect("the card still runs");
    assert_eq!(code(&settled), "OK");
    assert_eq!(*ran.borrow(), [r#"{"n":1}"#]);
}

/// Two numbers.
#[derive(Clone, Deserialize, JsonSchema)]
struct TwoNumbers {
    /// One.
    a: f64,
    /// The other.
    b: f64,
}

/// serde_json's fast reader (the page's) reads the first as the second; the gate reads
/// each exactly, or refuses both: never one double for two texts.
#[test]
fn two_numbers_one_reader_confuses_run_apart_or_not_at_all() {
    let w = World::new();
    let ran = Rc::new(RefCell::new(Vec::new()));
    let log = Rc::clone(&ran);
    let _two = w
        .exec
        .register(
            Action::<TwoNumbers>::new("two", "Two numbers.")
                .kind(Kind::Read)
                .run(move |p: TwoNumbers| {
                    let log = Rc::clone(&log);
                    async move {
                        log.borrow_mut().push((p.a.to_bits(), p.b.to_bits()));
                        Ok::<_, String>(json!({}))
                    }
                }),
        )
        .expect("two registers");
    let (a, b) = ("1.0715660391465826e-75", "1.0715660391465825e-75");
    let exact = |text: &str| text.parse::<f64>().map(f64::to_bits).unwrap_or_default();
    for args in [
        format!(r#"{{"a":{a},"b":{b}}}"#),
        format!(r#"{{"b":{b},"a":{a}}}"#),
    ] {
        let settled = drive(&w.exec, w.call("two", &args, 0), 0).expect("settled");
        match code(&settled) {
            "OK" => assert_eq!(ran.borrow_mut().pop(), Some((exact(a), exact(b)))),
            refused => assert_eq!(refused, "INVALID_ARGS"),
        }
        assert!(ran.borrow().is_empty());
    }
}

/// A world with `measure`, which runs unasked and logs the bits of the number it got.
fn number_world() -> (World, Rc<RefCell<Vec<u64>>>, Registration) {
    let w = World::new();
    let ran = Rc::new(RefCell::new(Vec::new()));
    let log = Rc::clone(&ran);
    let measure = Action::<OneNumber>::new("measure", "Measure a number.")
        .kind(Kind::Read)
        .run(move |params: OneNumber| {
            let log = Rc::clone(&log);
            async move {
                log.borrow_mut().push(params.n.to_bits());
                Ok::<_, String>(json!({}))
            }
        });
    let registration = w.exec.register(measure).expect("measure registers");
    (w, ran, registration)
}

/// Other spellings of a canonical number with its exact value: trailing zeros, and an
/// exponent (`e0`, or the canonical one in capitals).
fn spellings(canonical: &str) -> [String; 3] {
    let zeros = match canonical.split_once('e') {
        Some((mantissa, power)) if mantissa.contains('.') => format!("{mantissa}00e{power}"),
        Some((mantissa, power)) => format!("{mantissa}.00e{power}"),
        None if canonical.contains('.') => format!("{canonical}00"),
        None => format!("{canonical}.00"),
    };
    let exponent = if canonical.contains('e') {
        canonical.replace('e', "E")
    } else {
        format!("{canonical}e0")
    };
    [canonical.to_owned(), zeros, exponent]
}

/// The canonical number with seventeen more digits after its last one: more significant
/// digits than any double's canonical form has.
fn over_precise(canonical: &str) -> String {
    let (mantissa, power) = canonical.split_once('e').unwrap_or((canonical, "0"));
    let point = if mantissa.contains('.') { "" } else { "." };
    format!("{mantissa}{point}00000000000000001e{power}")
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]
    /// Any double, spelt as its canonical text or with that text's exact value, runs as
    /// that very double, and its digest is over its canonical text; with more
    /// significant digits than a double's canonical form has, it is refused and
    /// nothing runs.
    #[test]
    fn any_double_runs_exactly_as_its_canonical_text_says(
        bits in proptest::prelude::any::<u64>()
    ) {
        let x = f64::from_bits(bits);
        proptest::prop_assume!(x.is_finite() && x != 0.0);
        let (w, ran, _measure) = number_world();
        let canonical = canonical_json(&json!(x));
        proptest::prop_assert_eq!(
            ArgsDigest::of_value(&json!({ "n": x })),
            ArgsDigest::of_bytes(format!(r#"{{"n":{canonical}}}"#).as_bytes())
        );
        for text in spellings(&canonical) {
            let step = w.call("measure", &format!(r#"{{"n":{text}}}"#), 0);
            let settled = drive(&w.exec, step, 0).expect("it runs unasked");
            // From 2^53 to 1e21 the canonical text is an integer's digits, which are
            // refused: the same double spelt with a fraction or an exponent is read.
            if !text.contains(['.', 'e', 'E']) && x.abs() > 9_007_199_254_740_991.0 {
                proptest::prop_assert_eq!(code(&settled), "INVALID_ARGS", "{}", text);
                proptest::prop_assert!(ran.borrow().is_empty());
                continue;
            }
            proptest::prop_assert_eq!(code(&settled), "OK", "{}", text);
            proptest::prop_assert_eq!(ran.borrow_mut().pop(), Some(bits), "{}", text);
        }
        let over = over_precise(&canonical);
        let step = w.call("measure", &format!(r#"{{"n":{over}}}"#), 0);
        let settled = drive(&w.exec, step, 0).expect("settled");
        proptest::prop_assert_eq!(code(&settled), "INVALID_ARGS", "{}", over);
        proptest::prop_assert!(ran.borrow().is_empty());
    }
}
