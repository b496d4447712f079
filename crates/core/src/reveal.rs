//! Text from the model made visible: invisible, bidi-control and look-alike characters
//! shown as escapes, so an approval card cannot be made to lie.
//!
//! `Atlas` + U+200B reads as `Atlas`; `Ops` + U+202E + `ATAD-evil` reverses the rest of
//! the line; a Cyrillic `а` passes for a Latin `a`. The dock shows every such character
//! as `\u{…}` (marked) and says that the text contains them.

/// Text ready to show, and what was found in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Revealed {
    /// The text with every suspicious character replaced by a `\u{…}` escape.
    pub text: String,
    /// The same text in runs: `(text, escaped)`, so a view can mark each escape.
    pub parts: Vec<(String, bool)>,
    /// It had invisible characters (format characters, odd spaces, joiners, fillers).
    pub invisible: bool,
    /// It had bidi controls (embeddings, overrides, isolates, marks).
    pub bidi: bool,
    /// It had letters of another script that look like Latin ones, beside Latin letters.
    pub confusable: bool,
}

impl Revealed {
    fn push(&mut self, c: char, escape: bool) {
        let piece = if escape {
            format!("\\u{{{:x}}}", u32::from(c))
        } else {
            c.to_string()
        };
        self.text.push_str(&piece);
        match self.parts.last_mut() {
            Some((run, escaped)) if *escaped == escape && !escape => run.push_str(&piece),
            _ => self.parts.push((piece, escape)),
        }
    }

    /// Whether anything was escaped.
    pub fn is_suspicious(&self) -> bool {
        self.invisible || self.bidi || self.confusable
    }
}

/// Whether `c` is a Unicode format character (general category Cf, Unicode 15).
pub fn is_format_char(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

/// Whether `c` changes the direction of the text around it.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        u32::from(c),
        0x061C | 0x200E | 0x200F | 0x202A..=0x202E | 0x2066..=0x2069
    )
}

/// Characters that show nothing, or only space, and are not format characters.
fn is_blank(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00A0
            | 0x034F
            | 0x115F
            | 0x1160
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x2800
            | 0x3000
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFFA0
            | 0xE0100..=0xE01EF
    ) || (c.is_control() && c != '\n' && c != '\t')
}

/// Cyrillic and Greek letters that look like Latin ones.
fn looks_latin(c: char) -> bool {
    matches!(
        c,
        'а' | 'е'
            | 'о'
            | 'р'
            | 'с'
            | 'у'
            | 'х'
            | 'і'
            | 'ј'
            | 'ѕ'
            | 'ԁ'
            | 'ԛ'
            | 'ԝ'
            | 'һ'
            | 'ӏ'
            | 'А'
            | 'В'
            | 'Е'
            | 'К'
            | 'М'
            | 'Н'
            | 'О'
            | 'Р'
            | 'С'
            | 'Т'
            | 'Х'
            | 'У'
            | 'І'
            | 'Ј'
            | 'Ѕ'
            | 'Α'
            | 'Β'
            | 'Ε'
            | 'Ζ'
            | 'Η'
            | 'Ι'
            | 'Κ'
            | 'Μ'
            | 'Ν'
            | 'Ο'
            | 'Ρ'
            | 'Τ'
            | 'Υ'
            | 'Χ'
            | 'ο'
            | 'ν'
            | 'α'
            | 'ι'
            | 'κ'
            | 'ρ'
            | 'τ'
            | 'υ'
    )
}

/// Makes free text visible: invisible and bidi-control characters always, look-alike
/// letters when their word also has Latin letters (`Аpollo`, not `Привет`).
pub fn reveal(text: &str) -> Revealed {
    let mut out = Revealed {
        text: String::with_capacity(text.len()),
        ..Revealed::default()
    };
    for word in text.split_inclusive(char::is_whitespace) {
        let latin = word.chars().any(|c| c.is_ascii_alphabetic());
        for c in word.chars() {
            let escape = if is_bidi_control(c) {
                out.bidi = true;
                true
            } else if is_format_char(c) || is_blank(c) {
                out.invisible = true;
                true
            } else if latin && looks_latin(c) {
                out.confusable = true;
                true
            } else {
                false
            };
            out.push(c, escape);
        }
    }
    out
}

/// Makes a name visible (an action or tool id, which is ASCII when it is real): every
/// character outside printable ASCII is escaped, and an empty name shows as `""`.
pub fn reveal_name(name: &str) -> Revealed {
    if name.is_empty() {
        return Revealed {
            text: "\"\"".to_owned(),
            parts: vec![("\"\"".to_owned(), true)],
            invisible: true,
            ..Revealed::default()
        };
    }
    let mut out = Revealed {
        text: String::with_capacity(name.len()),
        ..Revealed::default()
    };
    for c in name.chars() {
        if c.is_ascii_graphic() {
            out.push(c, false);
            continue;
        }
        if is_bidi_control(c) {
            out.bidi = true;
        } else if c.is_alphanumeric() {
            out.confusable = true;
        } else {
            out.invisible = true;
        }
        out.push(c, true);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
