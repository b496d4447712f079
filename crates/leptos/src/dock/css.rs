//! The dock's stylesheet as it ships: `dock.css` without its comments and spare
//! whitespace, made at compile time (about 0.5 KB less for every page to fetch).

/// The stylesheet as written.
const SOURCE: &[u8] = include_bytes!("dock.css");

/// Whether a space after `byte` says nothing.
const fn no_space_after(byte: u8) -> bool {
    matches!(byte, b'{' | b'}' | b';' | b',' | b':')
}

/// Whether a space before `byte` says nothing (never before `:`, which in `a :checked`
/// is a selector's descendant).
const fn no_space_before(byte: u8) -> bool {
    matches!(byte, b'{' | b'}' | b';' | b',')
}

/// Writes `byte` at the start of `out` (if there is room) and returns the rest.
const fn push(out: &mut [u8], byte: u8) -> &mut [u8] {
    match out {
        [slot, tail @ ..] => {
            *slot = byte;
            tail
        }
        [] => &mut [],
    }
}

/// Writes `css` without comments and spare whitespace into `out` (as much as fits) and
/// returns its length. Quoted strings are copied as they are; a comment counts as a
/// space.
const fn shrink(css: &[u8], mut out: &mut [u8]) -> usize {
    let mut rest = css;
    let mut len = 0;
    // The last byte written, and whether a space waits to be written before the next.
    let mut last = b'{';
    let mut space = false;
    // The quote that opened the string being copied, if any.
    let mut quote = 0;
    while let [byte, tail @ ..] = rest {
        rest = tail;
        if quote != 0 {
            out = push(out, *byte);
            len += 1;
            if *byte == b'\\' {
                if let [escaped, tail @ ..] = rest {
                    out = push(out, *escaped);
                    len += 1;
                    rest = tail;
                }
            } else if *byte == quote {
                quote = 0;
                last = *byte;
            }
            continue;
        }
        if let (b'/', [b'*', tail @ ..]) = (*byte, rest) {
            rest = tail;
            while let [a, tail @ ..] = rest {
                rest = tail;
                if let (b'*', [b'/', tail @ ..]) = (*a, rest) {
                    rest = tail;
                    break;
                }
            }
            space = true;
            continue;
        }
        if byte.is_ascii_whitespace() {
            space = true;
            continue;
        }
        if space && !no_space_after(last) && !no_space_before(*byte) {
            out = push(out, b' ');
            len += 1;
        }
        space = false;
        if *byte == b'"' || *byte == b'\'' {
            quote = *byte;
        }
        out = push(out, *byte);
        len += 1;
        last = *byte;
    }
    len
}

/// The shipped stylesheet's length.
const LEN: usize = shrink(SOURCE, &mut [0; SOURCE.len()]);

/// The shipped stylesheet's bytes.
const BYTES: [u8; LEN] = {
    let mut out = [0; LEN];
    shrink(SOURCE, &mut out);
    out
};

/// The dock's stylesheet (also usable on its own, e.g. in a server-rendered shell).
#[allow(clippy::panic)] // At compile time only: the build fails, nothing ships.
pub const DOCK_CSS: &str = match core::str::from_utf8(&BYTES) {
    Ok(text) => text,
    Err(_) => panic!("dock.css is not UTF-8"),
};

#[cfg(test)]
mod tests {
    use super::shrink;

    fn shrunk(css: &str) -> String {
        let mut out = vec![0; css.len()];
        let len = shrink(css.as_bytes(), &mut out);
        out.truncate(len);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn only_spaces_that_say_nothing_go() {
        assert_eq!(
            shrunk(".a :checked > b , c { color: red ; width: calc(1px + 2px) }"),
            ".a :checked > b,c{color:red;width:calc(1px + 2px)}"
        );
        // Strings as written; a comment is a space.
        assert_eq!(
            shrunk("[aria-label=\"Allow, once\"] { content: 'a /* b */ : c\\' d'; margin: 1px/**/2px }"),
            "[aria-label=\"Allow, once\"]{content:'a /* b */ : c\\' d';margin:1px 2px}"
        );
    }
}
