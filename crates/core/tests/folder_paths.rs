//! Property test over generated paths: a folder rule never covers a path that climbs
//! out of the folder, however its dots and separators are spelt, and always covers
//! plain paths under it.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use countersign::Matcher;
use proptest::prelude::*;
use serde_json::json;

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
