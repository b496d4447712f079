//! Text the model controls cannot hide characters from the person reading a card.

use countersign::{text::reveal, text::reveal_name};

fn unflagged(cases: &[(&str, String)]) -> Vec<String> {
    cases
        .iter()
        .filter(|(_, text)| !reveal(text).is_suspicious())
        .map(|(name, text)| {
            let shown = reveal(text).text;
            let verdict = if shown == *text {
                "passed unchanged"
            } else {
                "changed but not flagged"
            };
            format!("{name}: {text:?} {verdict}, no note")
        })
        .collect()
}

/// Default-ignorable code points (Unicode `DerivedCoreProperties.txt`) render as
/// nothing in browsers; `reveal` misses some that are neither Cf nor on its blank list.
#[test]
fn every_default_ignorable_character_is_shown() {
    let cases: Vec<(&str, String)> = [
        ("U+17B4 KHMER VOWEL INHERENT AQ", '\u{17b4}'),
        ("U+17B5 KHMER VOWEL INHERENT AA", '\u{17b5}'),
        ("U+180B MONGOLIAN FVS1", '\u{180b}'),
        ("U+180C MONGOLIAN FVS2", '\u{180c}'),
        ("U+180D MONGOLIAN FVS3", '\u{180d}'),
        ("U+180F MONGOLIAN FVS4", '\u{180f}'),
        ("U+16FE4 KHITAN SMALL SCRIPT FILLER", '\u{16fe4}'),
        ("U+2065 (reserved, default ignorable)", '\u{2065}'),
        ("U+FFF0 (reserved, default ignorable)", '\u{fff0}'),
        ("U+E0000 (reserved tag)", '\u{e0000}'),
        ("U+E0002 (reserved tag)", '\u{e0002}'),
        ("U+E0080 (reserved, default ignorable)", '\u{e0080}'),
        ("U+E01F0 (reserved, default ignorable)", '\u{e01f0}'),
    ]
    .into_iter()
    .map(|(name, c)| (name, format!("Atl{c}as")))
    .collect();
    let missed = unflagged(&cases);
    assert!(
        missed.is_empty(),
        "invisible characters shown as nothing:\n{}",
        missed.join("\n")
    );
}

/// Look-alikes are flagged only in a word that also has ASCII letters, so a word
/// spelt *entirely* in Cyrillic look-alikes passes as Latin: the IDN homograph.
#[test]
fn a_word_made_only_of_latin_look_alikes_is_flagged() {
    let cases = vec![
        // р а у р а ӏ . с о м (all Cyrillic)
        (
            "paypal.com in Cyrillic",
            "send to \u{440}\u{430}\u{443}\u{440}\u{430}\u{4cf}.\u{441}\u{43e}\u{43c}".to_owned(),
        ),
        // с о р у
        ("copy", "\u{441}\u{43e}\u{440}\u{443} the file".to_owned()),
        // Plan А (Cyrillic capital A as its own word)
        ("plan A", "set the plan to \u{410}".to_owned()),
        // Greek Ο Κ
        ("OK in Greek", "\u{39f}\u{39a}".to_owned()),
    ];
    let missed = unflagged(&cases);
    assert!(
        missed.is_empty(),
        "whole-word look-alikes shown as Latin:\n{}",
        missed.join("\n")
    );
}

/// Look-alikes beside Latin letters from scripts and blocks the list does not have.
#[test]
fn look_alikes_from_other_scripts_and_blocks_are_flagged() {
    let cases = vec![
        ("Armenian oh", "g\u{585}\u{585}gle".to_owned()),
        ("Armenian seh (u)", "ind\u{57d}stry".to_owned()),
        ("Cherokee A", "\u{13aa}pple".to_owned()),
        ("Cherokee S", "\u{13da}ecurity".to_owned()),
        ("Greek lunate sigma (c)", "\u{3f2}ompany".to_owned()),
        ("Latin alpha", "p\u{251}ypal".to_owned()),
        ("small roman numeral fifty (l)", "paypa\u{217c}".to_owned()),
        ("fullwidth a", "\u{ff41}pple".to_owned()),
        ("mathematical sans a", "\u{1d5ba}pple".to_owned()),
        ("Cyrillic Ү (Y)", "\u{4ae}es".to_owned()),
    ];
    let missed = unflagged(&cases);
    assert!(
        missed.is_empty(),
        "look-alikes shown as Latin:\n{}",
        missed.join("\n")
    );
}

/// Combining marks are passed as they are: a dotless i with a combining dot reads as
/// `i`, a combining solidus strikes a character through, and a stack of marks draws
/// over the card's neighbouring lines (the kind badge, the buttons).
#[test]
fn combining_marks_that_disguise_or_overdraw_are_flagged() {
    let cases = vec![
        ("dotless i + dot above", "adm\u{131}\u{307}n".to_owned()),
        ("combining long solidus", "allow\u{338}ed".to_owned()),
        (
            "forty stacked marks",
            format!("Apollo{}", "\u{30d}\u{30e}\u{304}\u{305}".repeat(10)),
        ),
    ];
    let missed = unflagged(&cases);
    assert!(
        missed.is_empty(),
        "combining marks passed unflagged:\n{}",
        missed.join("\n")
    );
}

/// `Revealed::text` (what the preview diff shows, without marks or note) is the same for
/// a real hidden character and for the model typing its escape: the person cannot tell
/// which one the action will receive.
#[test]
fn an_escape_cannot_be_forged_by_typing_it() {
    let real = reveal("Apollo\u{202e}");
    let typed = reveal("Apollo\\u{202e}");
    assert_ne!(
        real.text, typed.text,
        "a typed `\\u{{202e}}` and a real U+202E look the same in `text`"
    );
}

/// Held: the characters the brief names, and names escaped wholesale.
#[test]
fn the_named_characters_are_shown() {
    let cases: Vec<(&str, String)> = [
        ("U+115F HANGUL CHOSEONG FILLER", '\u{115f}'),
        ("U+3164 HANGUL FILLER", '\u{3164}'),
        ("U+2800 BRAILLE BLANK", '\u{2800}'),
        ("U+FEFF", '\u{feff}'),
        ("U+E0041 TAG A", '\u{e0041}'),
        ("U+E007F CANCEL TAG", '\u{e007f}'),
        ("U+180E MONGOLIAN VOWEL SEPARATOR", '\u{180e}'),
        ("U+061C ARABIC LETTER MARK", '\u{61c}'),
        ("U+2066 LRI", '\u{2066}'),
        ("U+2069 PDI", '\u{2069}'),
        ("U+2028 LINE SEPARATOR", '\u{2028}'),
        ("U+0085 NEL", '\u{85}'),
        ("U+FFA0 HALFWIDTH HANGUL FILLER", '\u{ffa0}'),
        ("U+034F CGJ", '\u{34f}'),
        ("U+00AD SOFT HYPHEN", '\u{ad}'),
        ("U+E0100 VS17", '\u{e0100}'),
        ("U+000D CR", '\r'),
        ("Cyrillic a beside Latin", '\u{430}'),
        ("Greek omicron beside Latin", '\u{3bf}'),
    ]
    .into_iter()
    .map(|(name, c)| (name, format!("Atl{c}as")))
    .collect();
    let missed = unflagged(&cases);
    assert!(missed.is_empty(), "{}", missed.join("\n"));
    for name in [
        "s\u{430}ve",
        "save\u{200b}",
        "save\u{e0020}",
        "sa ve",
        "\u{ff53}ave",
        "sa\u{338}ve",
    ] {
        let shown = reveal_name(name);
        assert!(shown.is_suspicious(), "{name:?}");
        assert!(shown.text.is_ascii(), "{name:?} → {:?}", shown.text);
    }
}

#[test]
fn each_class_of_hidden_character_is_shown_and_named() {
    let zw = reveal("Atlas\u{200b}");
    assert_eq!(zw.text, "Atlas\\u{200b}");
    assert_eq!(
        zw.parts,
        [("Atlas".to_owned(), false), ("\\u{200b}".to_owned(), true)]
    );
    assert!(zw.invisible && !zw.bidi && !zw.confusable);
    let rlo = reveal("Ops\u{202e}ATAD-evil");
    assert_eq!(rlo.text, "Ops\\u{202e}ATAD-evil");
    assert!(rlo.bidi);
    let cyr = reveal("\u{430}pollo");
    assert_eq!(cyr.text, "\\u{430}pollo");
    assert!(cyr.confusable);
    let nbsp = reveal("Atlas\u{a0}");
    assert!(nbsp.invisible);
    assert!(reveal("Atlas\u{e0041}").invisible, "tag characters");
    assert!(reveal("x\u{fe0f}").invisible, "variation selectors");
}

#[test]
fn a_typed_escape_never_reads_as_a_revealed_one() {
    assert_eq!(reveal("x\u{202e}").text, "x\\u{202e}");
    assert_eq!(reveal("x\\u{202e}").text, "x\\\\u{202e}");
    assert!(!reveal("C:\\dir").is_suspicious());
}

#[test]
fn ordinary_text_in_any_script_is_left_alone() {
    for text in [
        "Apollo",
        "Привет мир",
        "工作区 Apollo",
        "café",
        "שלום",
        "a\nb\tc",
    ] {
        let shown = reveal(text);
        assert_eq!(shown.text, text);
        assert!(!shown.is_suspicious(), "{text}");
    }
}

#[test]
fn names_show_everything_outside_ascii() {
    let fake = reveal_name("s\u{430}ve_workspace_name");
    assert_eq!(fake.text, "s\\u{430}ve_workspace_name");
    assert!(fake.confusable);
    assert_eq!(reveal_name("").text, "\"\"");
    assert!(reveal_name("\u{200b}").invisible);
    assert!(!reveal_name("save_workspace_name").is_suspicious());
}

/// Text quoted into a message stays one line: control characters escaped, backticks
/// turned, and long text cut with an ellipsis.
#[test]
fn quoting_escapes_control_characters_and_truncates() {
    use countersign::text::quote;
    assert_eq!(quote("a\u{0}b\nc", 10), "`a\\u{0}b\\nc`");
    assert_eq!(quote("abcdef", 3), "`abc…`");
    assert_eq!(quote("x`y", 10), "`x'y`");
}
