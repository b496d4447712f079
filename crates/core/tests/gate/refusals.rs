//! Every refusal reaches the model as an error with a code, a stage and a retry hint.

use countersign::outcome::{Refusal, Stage};
use countersign::{Code, Mode, Outcome, Reason};

#[test]
fn a_refusal_is_never_an_empty_string_and_never_ok() {
    for code in Code::ALL {
        let outcome = Outcome::Refused(Refusal {
            code,
            stage: Stage::Approve,
            reason: Reason::Declined,
            message: "x".into(),
            untrusted: false,
        });
        let json = outcome.to_model_json();
        assert_eq!(json["ok"], false);
        assert_eq!(json["error"]["code"], code.as_str());
        assert!(json["error"]["retry"].is_string());
    }
}

#[test]
fn code_names_serialise_as_the_model_sees_them() {
    for code in Code::ALL {
        assert_eq!(serde_json::to_value(code).unwrap(), code.as_str());
    }
}

#[test]
fn every_refusing_reason_has_a_code_and_a_stage_that_agree() {
    let refusing = [
        Reason::UnknownAction,
        Reason::InvalidArguments,
        Reason::ScopeMissing { scope: "s".into() },
        Reason::PolicyFileBroken { line: 3 },
        Reason::ModeRefused { mode: Mode::Away },
        Reason::ClassifierDenied,
        Reason::Declined,
    ];
    for reason in refusing {
        assert!(reason.code().is_some(), "{reason:?}");
    }
    assert_eq!(Reason::Verified.code(), None);
}
