//! A folder rule never covers a path that climbs out of the folder, however it is spelt.

use std::rc::Rc;

use countersign::{
    text::has_dot_segment, ticket::GrantRule, ticket::Matcher, Action, Confirm, Gesture, Kind, Step,
};
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::common::{at, drive, World};

#[test]
fn overlong_utf8_dots_and_slashes_do_not_climb_out_of_a_folder() {
    let drafts = Matcher::Prefix {
        pointer: "/path".into(),
        prefix: "drafts/".into(),
    };
    let glob = Matcher::Glob {
        pointer: "/path".into(),
        pattern: "drafts/**".into(),
    };
    let mut matched = Vec::new();
    for path in [
        // Overlong UTF-8 `.` (2 and 3 bytes), as lenient decoders (old IIS, Tomcat
        // CVE-2008-2938) read them.
        "drafts/%c0%ae%c0%ae/config.json",
        "drafts/%e0%80%ae%e0%80%ae/config.json",
        // `..` then an overlong `/` or `\`.
        "drafts/..%c0%afconfig.json",
        "drafts/..%c1%9cconfig.json",
    ] {
        let args = json!({ "path": path });
        if !has_dot_segment(path) || drafts.matches(&args) || glob.matches(&args) {
            matched.push(path);
        }
    }
    assert!(matched.is_empty(), "climbing paths matched: {matched:#?}");
}

#[test]
fn known_dot_spellings_stay_refused() {
    let drafts = Matcher::Prefix {
        pointer: "/path".into(),
        prefix: "drafts/".into(),
    };
    for path in [
        "drafts/../x",
        "drafts/.%2e/x",
        "drafts/%2e./x",
        "drafts/%252E%252E/x",
        "drafts/%25252e%25252e/x",
        "drafts/%2525252e%2525252e/x",
        "drafts/%ef%bc%8e%ef%bc%8e/x",
        "drafts/\u{fe52}\u{fe52}/x",
        "drafts/\u{2024}\u{2024}/x",
        "drafts/..%5cx",
        "drafts/..%2fx",
        "drafts/..\u{ff3c}x",
        "drafts\\..\\x",
        "drafts/a/../../x",
        "drafts/.",
        "drafts/..",
    ] {
        assert!(!drafts.matches(&json!({ "path": path })), "{path}");
    }
    // And the grant does not cover them end to end.
    let mut w = World::new();
    let runs = Rc::clone(&w.runs);
    #[derive(Clone, Deserialize, JsonSchema)]
    struct P {
        path: String,
    }
    w.regs.push(
        w.exec
            .register(
                Action::<P>::new("write_file", "w")
                    .kind(Kind::Write)
                    .confirm(Confirm::Ask)
                    .remember(|_| GrantRule::prefix("under drafts/", "/path", "drafts/"))
                    .run(move |p: P| {
                        let runs = Rc::clone(&runs);
                        async move {
                            runs.borrow_mut().push(p.path);
                            Ok::<_, String>(())
                        }
                    }),
            )
            .unwrap(),
    );
    let card = w.card("write_file", r#"{"path":"drafts/a"}"#, 0);
    drive(
        &w.exec,
        w.exec
            .approve(card.countersign(Gesture::AllowForSession), at(1))
            .unwrap(),
        2,
    );
    for path in ["drafts/%2e%2e/x", "drafts/\u{ff0e}\u{ff0e}/x"] {
        let args = json!({ "path": path }).to_string();
        assert!(
            matches!(w.call("write_file", &args, 3), Step::Approval(_)),
            "{path} covered"
        );
    }
}

/// IIS's non-standard `%u` escapes spell `.` too.
#[test]
fn iis_percent_u_dots_do_not_climb_out_of_a_folder() {
    let drafts = Matcher::Prefix {
        pointer: "/path".into(),
        prefix: "drafts/".into(),
    };
    let path = "drafts/%u002e%u002e/config.json";
    assert!(!drafts.matches(&json!({ "path": path })), "{path} matched");
}

/// Ways to spell a dot, a separator, or a harmless name.
const DOTS: [&str; 10] = [
    ".",
    "%2e",
    "%2E",
    "%252e",
    "\u{ff0e}",
    "\u{fe52}",
    "%c0%ae",
    "%e0%80%ae",
    "%u002e",
    "\u{2024}",
];
const SEPARATORS: [&str; 6] = ["/", "\\", "%2f", "%5c", "%252f", "\u{ff0f}"];
const NAMES: [&str; 6] = ["a", "notes", "v1.2", "x..y", "...md", "file.txt"];

/// An independent decoder: every way a consumer might read the path.
fn readings(path: &str) -> Vec<String> {
    let mut out = vec![path.to_owned()];
    let mut form = path.to_owned();
    for _ in 0..4 {
        let mut next = String::new();
        let bytes = form.as_bytes();
        let mut i = 0;
        let mut raw = Vec::new();
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                if let Some(Ok(b)) = form.get(i + 1..i + 3).map(|h| u8::from_str_radix(h, 16)) {
                    raw.push(b);
                    i += 3;
                    continue;
                }
            }
            raw.push(bytes[i]);
            i += 1;
        }
        next.push_str(&String::from_utf8_lossy(&raw));
        let next = next
            .replace("%u002e", ".")
            .replace(['\u{ff0e}', '\u{fe52}', '\u{2024}'], ".")
            .replace('\u{ff0f}', "/")
            .replace("\u{c0}\u{ae}", ".");
        if next == form {
            break;
        }
        out.push(next.clone());
        form = next;
    }
    out
}

fn climbs(reading: &str) -> bool {
    reading
        .split(['/', '\\'])
        .any(|s| !s.is_empty() && s.chars().all(|c| c == '.' || c == ' ') && s.contains('.'))
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(NAMES.to_vec()).prop_map(str::to_owned),
        2 => (prop::sample::select(DOTS.to_vec()), prop::sample::select(DOTS.to_vec()))
            .prop_map(|(a, b)| format!("{a}{b}")),
        1 => prop::sample::select(DOTS.to_vec()).prop_map(str::to_owned),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec((segment(), prop::sample::select(SEPARATORS.to_vec())), 1..5).prop_map(
        |parts| {
            let mut path = String::from("drafts/");
            for (i, (segment, separator)) in parts.iter().enumerate() {
                if i > 0 {
                    path.push_str(separator);
                }
                path.push_str(segment);
            }
            path
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_folder_rule_never_covers_a_path_that_climbs_out(path in path()) {
        let prefix = Matcher::Prefix { pointer: "/path".into(), prefix: "drafts/".into() };
        let glob = Matcher::Glob { pointer: "/path".into(), pattern: "drafts/**".into() };
        let args = json!({ "path": path });
        if readings(&path).iter().any(|r| climbs(r)) {
            prop_assert!(!prefix.matches(&args), "prefix covered {path:?}");
            prop_assert!(!glob.matches(&args), "glob covered {path:?}");
        }
    }

    #[test]
    fn plain_paths_under_the_folder_are_covered(names in prop::collection::vec(prop::sample::select(NAMES.to_vec()), 1..5)) {
        let path = format!("drafts/{}", names.join("/"));
        let prefix = Matcher::Prefix { pointer: "/path".into(), prefix: "drafts/".into() };
        prop_assert!(prefix.matches(&json!({ "path": path })), "{path}");
    }
}

#[test]
fn encoded_and_lookalike_dots_do_not_climb_out_of_a_folder() {
    let drafts = Matcher::Prefix {
        pointer: "/path".into(),
        prefix: "drafts/".into(),
    };
    let glob = Matcher::Glob {
        pointer: "/path".into(),
        pattern: "drafts/**".into(),
    };
    for path in [
        "drafts/%2e%2e/config.json",
        "drafts/%2E%2E/config.json",
        "drafts/%252e%252e/config.json",
        "drafts/\u{ff0e}\u{ff0e}/config.json",
        "drafts/\u{2025}/config.json",
        "drafts/..\\config.json",
        "drafts/./a.md",
        "drafts/%2e/a.md",
        "drafts/\u{ff0f}..\u{ff0f}x",
    ] {
        assert!(has_dot_segment(path), "{path}");
        assert!(!drafts.matches(&json!({ "path": path })), "{path}");
        assert!(!glob.matches(&json!({ "path": path })), "{path}");
    }
    for path in [
        "drafts/a.md",
        "drafts/v1.2/notes.md",
        "drafts/...md",
        "drafts/a..b",
    ] {
        assert!(!has_dot_segment(path), "{path}");
        assert!(drafts.matches(&json!({ "path": path })), "{path}");
    }
}
