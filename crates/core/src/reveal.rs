//! Text from the model made visible: invisible, bidi-control and look-alike characters
//! shown as escapes, so an approval card cannot be made to lie.

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
    /// A backslash from the text, doubled so it never reads as the start of an escape.
    fn push_backslash(&mut self) {
        self.text.push_str("\\\\");
        match self.parts.last_mut() {
            Some((run, false)) => run.push_str("\\\\"),
            _ => self.parts.push(("\\\\".to_owned(), false)),
        }
    }

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

/// Characters that show nothing or only space: default-ignorable code points that are
/// not format characters, fillers, odd spaces, and controls but newline and tab.
fn is_blank(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00A0
            | 0x034F
            | 0x115F
            | 0x1160
            | 0x1680
            | 0x17B4
            | 0x17B5
            | 0x180B..=0x180F
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x2065
            | 0x2800
            | 0x3000
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x16FE4
            | 0xE0000..=0xE0FFF
    ) || (c.is_control() && c != '\n' && c != '\t')
}

/// Letters of other scripts (and Latin extensions) that look like basic Latin ones.
fn looks_latin(c: char) -> bool {
    matches!(
        c,
        // Cyrillic
        'а' | 'в' | 'е' | 'к' | 'м' | 'н' | 'о' | 'р' | 'с' | 'т' | 'у' | 'х' | 'і' | 'ј' | 'ѕ'
            | 'ԁ' | 'ԛ' | 'ԝ' | 'һ' | 'ӏ' | 'ү' | 'ҽ' | 'ɡ' | 'А' | 'В' | 'Е' | 'К' | 'М' | 'Н'
            | 'О' | 'Р' | 'С' | 'Т' | 'Х' | 'У' | 'І' | 'Ј' | 'Ѕ' | 'Ү' | 'Ԁ' | 'Ԛ' | 'Ԝ' | 'Һ'
            | 'Ӏ'
            // Greek
            | 'Α' | 'Β' | 'Ε' | 'Ζ' | 'Η' | 'Ι' | 'Κ' | 'Μ' | 'Ν' | 'Ο' | 'Ρ' | 'Τ' | 'Υ' | 'Χ'
            | 'ο' | 'ν' | 'α' | 'ι' | 'κ' | 'ρ' | 'τ' | 'υ' | 'ϲ' | 'ϳ' | 'Ϲ' | 'ϒ'
            // Armenian
            | 'օ' | 'ս' | 'ց' | 'հ' | 'ո' | 'զ' | 'ք' | 'Տ' | 'Օ' | 'Ս'
            // Cherokee (capitals: most look like Latin ones)
            | 'Ꭰ'
            ..='Ᏼ'
            // Latin letters that pass for basic ones: dotless i, alpha, script g, ...
            | 'ı' | 'ȷ' | 'ɑ' | 'ɩ' | 'ʏ' | 'ɪ' | 'ʀ' | 'ᴀ' | 'ᴄ' | 'ᴅ' | 'ᴇ' | 'ᴋ' | 'ᴍ' | 'ᴏ'
            | 'ᴘ' | 'ᴛ' | 'ᴜ' | 'ᴠ' | 'ᴡ' | 'ᴢ'
    )
}

/// A non-ASCII letter or digit that NFKC maps elsewhere (fullwidth `ａ`, mathematical
/// `𝖺`, roman numeral `ⅼ`, ligature `ﬁ`): it reads as another character.
fn compatibility_form(c: char) -> bool {
    c.is_alphanumeric() && crate::grant_rule::folds_to_ascii(c)
}

/// Combining marks that strike or overlay the letter they sit on.
fn is_overlay_mark(c: char) -> bool {
    matches!(
        u32::from(c),
        0x0334..=0x0338 | 0x20D2..=0x20D3 | 0x20D8..=0x20DA | 0x20E5..=0x20E6 | 0x20EA..=0x20EB
    )
}

/// Combining marks of the generic blocks (diacritics for any script).
fn is_generic_mark(c: char) -> bool {
    matches!(
        u32::from(c),
        0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F
    )
}

/// Generic combining marks a letter may carry before more are escaped (stacks overdraw).
const MAX_MARKS: usize = 2;

/// Makes free text visible. Escapes invisible and bidi-control characters; look-alike
/// letters in a word with Latin letters (`Аpollo`) or only look-alikes (`раураӏ.сом`);
/// compatibility forms (`ａpple`); overlay marks, a dotted dotless i, and stacks of more
/// than two marks. A typed backslash is doubled, so `\u{202e}` never looks revealed.
pub fn reveal(text: &str) -> Revealed {
    let mut out = Revealed {
        text: String::with_capacity(text.len()),
        ..Revealed::default()
    };
    for word in text.split_inclusive(char::is_whitespace) {
        let latin = word.chars().any(|c| c.is_ascii_alphabetic());
        let letters = word.chars().filter(|c| c.is_alphabetic());
        let all_lookalike = word.chars().any(|c| c.is_alphabetic())
            && letters
                .clone()
                .all(|c| looks_latin(c) || c.is_ascii_alphabetic())
            && letters.clone().any(looks_latin);
        let mut marks = 0;
        let mut previous = ' ';
        for c in word.chars() {
            let mark = is_generic_mark(c);
            marks = if mark { marks + 1 } else { 0 };
            let escape = if is_bidi_control(c) {
                out.bidi = true;
                true
            } else if is_format_char(c) || is_blank(c) {
                out.invisible = true;
                true
            } else if ((latin || all_lookalike) && looks_latin(c))
                || compatibility_form(c)
                || is_overlay_mark(c)
                || (mark && marks > MAX_MARKS)
                || (previous == 'ı' && c == '\u{307}')
            {
                out.confusable = true;
                true
            } else {
                false
            };
            if c == '\\' && !escape {
                out.push_backslash();
            } else {
                out.push(c, escape);
            }
            previous = c;
        }
    }
    out
}

/// Makes a name visible: all but printable ASCII escaped (real ids are ASCII); empty is `""`.
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
