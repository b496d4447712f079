//! Making trunk's `index.html` check every file the page runs: the main script, the
//! main wasm and the split's loader, each by its integrity.

use std::path::Path;

use sha2::{Digest, Sha384};

use crate::Result;

/// `index.html` (`text`) made to check every file the page runs before running it,
/// given each file's name and integrity: the main JS, the main wasm and the split's
/// loader. Trunk's own page does not: its inline script fetches the wasm with no
/// integrity (the `preload`'s only warms a cache), and may import the JS before the
/// `modulepreload` that carries its integrity is parsed. So:
/// - the `preload` and `modulepreload` tags get the new integrity;
/// - the inline script fetches the wasm with its integrity;
/// - right before the first script, an import map gives the integrity of both scripts
///   to every import of them (the main JS, and the loader it imports), and both are
///   `modulepreload`ed with it (for a browser that ignores the map's integrity).
///
/// An error, never a page left as it was, where any of these is not found.
pub(crate) fn seal(text: &str, base: &str, files: [(String, String); 3]) -> Result<String> {
    let [(js, js_sri), (wasm, wasm_sri), (loader, loader_sri)] = files;
    if base.contains(['"', '\'', '\\', '<', '>']) {
        return Err(format!(
            "a public URL with quotes or brackets cannot be sealed: {base}"
        ));
    }
    let once = |text: &str, what: &str| match text.matches(what).count() {
        1 => Ok(()),
        n => Err(format!(
            "index.html has `{what}` {n} times, not once: it cannot be sealed"
        )),
    };
    let mut text = with_integrity(text, base, &js, &js_sri)?;
    text = with_integrity(&text, base, &wasm, &wasm_sri)?;
    let init = format!("module_or_path: '{base}{wasm}'");
    once(&text, &init)?;
    text = text.replacen(
        &init,
        &format!("module_or_path: fetch('{base}{wasm}', {{ integrity: '{wasm_sri}' }})"),
        1,
    );
    // First in <head>, before any script: the import map, then the two scripts
    // preloaded with their integrity, so a browser that ignores the map's integrity
    // still fetches them checked (the start script's import then waits for the preload).
    let map = format!(
        "<script type=\"importmap\">{{\"integrity\":{{\"{base}{js}\":\"{js_sri}\",\"{base}{loader}\":\"{loader_sri}\"}}}}</script>"
    );
    let preload = |name: &str, sri: &str| {
        format!("<link rel=\"modulepreload\" href=\"{base}{name}\" crossorigin=\"anonymous\" integrity=\"{sri}\">")
    };
    let first = format!(
        "{map}{}{}",
        preload(&js, &js_sri),
        preload(&loader, &loader_sri)
    );
    // Right before the first script (after `<meta charset>`, which must stay within the
    // first 1024 bytes), and that script inside the one `<head>`.
    once(&text, "<head>")?;
    let head = text.find("<head>").unwrap_or_default();
    let script = text.find("<script").unwrap_or_default();
    if script < head || text.find("</head>").is_none_or(|end| end < script) {
        return Err("index.html's first script is not in its `<head>`: it cannot be sealed".into());
    }
    Ok(format!(
        "{}{first}{}",
        text.get(..script).unwrap_or_default(),
        text.get(script..).unwrap_or_default()
    ))
}

/// Checks that the main script (`js`, as wasm-bindgen wrote it) imports nothing but the
/// split's loader: anything else (a `snippets/` file) would run unchecked.
pub(crate) fn imports_only_the_loader(js: &str, loader: &str) -> Result {
    let loader = format!("./{loader}");
    for line in js.lines() {
        let line = line.trim();
        let specifier = line
            .strip_prefix("import ")
            .and_then(|rest| rest.rsplit_once(" from "))
            .map(|(_, from)| from.trim_end_matches(';').trim_matches(['"', '\'']));
        let imports = line.starts_with("import ") || line.contains("import(");
        if imports && specifier != Some(loader.as_str()) {
            return Err(format!(
                "the main script imports something the page cannot check: {line}"
            ));
        }
    }
    Ok(())
}

/// `text` with the `integrity` of the tag that links `{base}{name}` set to `sri`; an
/// error if there is no such tag, or it has no `sha384` integrity.
fn with_integrity(text: &str, base: &str, name: &str, sri: &str) -> Result<String> {
    let href = format!("href=\"{base}{name}\"");
    let missing = || format!("index.html has not one tag with `{href}` and a sha384 integrity");
    if text.matches(&href).count() != 1 {
        return Err(missing());
    }
    let tag = text.find(&href).ok_or_else(missing)?;
    let end = tag
        + text
            .get(tag..)
            .and_then(|t| t.find('>'))
            .ok_or_else(missing)?;
    let at = text
        .get(tag..end)
        .and_then(|t| t.find("integrity=\"sha384-"))
        .ok_or_else(missing)?;
    let start = tag + at + "integrity=\"".len();
    let stop = start
        + text
            .get(start..)
            .and_then(|t| t.find('"'))
            .ok_or_else(missing)?;
    Ok(format!(
        "{}{sri}{}",
        text.get(..start).unwrap_or_default(),
        text.get(stop..).unwrap_or_default()
    ))
}

/// The subresource integrity of `bytes`: `sha384-` and their SHA-384 in base64.
pub(crate) fn sri(bytes: &[u8]) -> String {
    format!("sha384-{}", base64(&Sha384::digest(bytes)))
}

/// [`sri`] of the file at `file`.
pub(crate) fn sri_of_file(file: &Path) -> Result<String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(sri(&bytes))
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        for i in 0..4 {
            let sextet = (n >> (18 - 6 * i)) as usize & 63;
            match ALPHABET.get(sextet) {
                Some(c) if i <= chunk.len() => out.push(char::from(*c)),
                _ => out.push('='),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_the_standard_one() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    /// The head of a page as trunk 0.21 writes it.
    const TRUNK_PAGE: &str = concat!(
        "<html><head><script type=\"module\">import init from '/app-1.js';",
        "const wasm = await init({ module_or_path: '/app-1_bg.wasm' });</script>",
        r#"<link rel="modulepreload" href="/app-1.js" crossorigin="anonymous" integrity="sha384-old1">"#,
        r#"<link rel="preload" href="/app-1_bg.wasm" crossorigin="anonymous" integrity="sha384-old2" as="fetch"></head><body></body></html>"#,
    );

    fn files() -> [(String, String); 3] {
        [
            ("app-1.js".into(), "sha384-JS".into()),
            ("app-1_bg.wasm".into(), "sha384-WASM".into()),
            ("app-1.split.js".into(), "sha384-LOADER".into()),
        ]
    }

    #[test]
    fn a_sealed_page_checks_every_file_it_runs() {
        let page = seal(TRUNK_PAGE, "/", files()).unwrap();
        let expected = concat!(
            r#"<html><head><script type="importmap">{"integrity":{"/app-1.js":"sha384-JS","/app-1.split.js":"sha384-LOADER"}}</script>"#,
            r#"<link rel="modulepreload" href="/app-1.js" crossorigin="anonymous" integrity="sha384-JS">"#,
            r#"<link rel="modulepreload" href="/app-1.split.js" crossorigin="anonymous" integrity="sha384-LOADER">"#,
            "<script type=\"module\">import init from '/app-1.js';",
            "const wasm = await init({ module_or_path: fetch('/app-1_bg.wasm', { integrity: 'sha384-WASM' }) });</script>",
            r#"<link rel="modulepreload" href="/app-1.js" crossorigin="anonymous" integrity="sha384-JS">"#,
            r#"<link rel="preload" href="/app-1_bg.wasm" crossorigin="anonymous" integrity="sha384-WASM" as="fetch"></head><body></body></html>"#,
        );
        assert_eq!(page, expected);
    }

    #[test]
    fn a_page_that_cannot_be_sealed_is_an_error_not_left_as_it_was() {
        for (what, page) in [
            (
                "no preload of the wasm",
                TRUNK_PAGE.replace("href=\"/app-1_bg.wasm\"", "href=\"/x\""),
            ),
            (
                "a sha512 integrity",
                TRUNK_PAGE.replace("sha384-old2", "sha512-old2"),
            ),
            (
                "no integrity",
                TRUNK_PAGE.replace(" integrity=\"sha384-old1\"", ""),
            ),
            (
                "another start",
                TRUNK_PAGE.replace("module_or_path: '/app-1_bg.wasm'", "'/app-1_bg.wasm'"),
            ),
            ("an upper-case head", TRUNK_PAGE.replace("<head>", "<HEAD>")),
            ("another public URL", TRUNK_PAGE.to_owned()),
            ("a quote in the public URL", TRUNK_PAGE.to_owned()),
            (
                "a head in a comment first",
                format!("<!-- <head> -->{TRUNK_PAGE}"),
            ),
            (
                "a script before the head",
                format!("<script></script>{TRUNK_PAGE}"),
            ),
            (
                "no script in the head",
                TRUNK_PAGE.replace(
                    "<script type=\"module\">",
                    "</head><script type=\"module\">",
                ),
            ),
            (
                "the start twice",
                TRUNK_PAGE.replace("</script>", "//module_or_path: '/app-1_bg.wasm'</script>"),
            ),
            (
                "the preload twice",
                TRUNK_PAGE.replace(
                    "<body>",
                    r#"<body><a href="/app-1_bg.wasm" integrity="sha384-x">"#,
                ),
            ),
        ] {
            let base = match what {
                "another public URL" => "/app/",
                "a quote in the public URL" => "/a\"b/",
                _ => "/",
            };

            assert!(seal(&page, base, files()).is_err(), "{what}");
        }
    }

    #[test]
    fn the_main_script_may_import_the_loader_and_nothing_else() {
        let loader = "app-1.split.js";
        let bindgen = "import * as import1 from \"./app-1.split.js\"\nlet wasm;\n";
        assert!(imports_only_the_loader(bindgen, loader).is_ok());
        assert!(imports_only_the_loader("import * as a from './app-1.split.js';", loader).is_ok());
        for extra in [
            "import { f } from './snippets/c-1/inline0.js';\n",
            "import * as b from \"./app-1.split.js.evil.js\"\n",
            "const m = await import('./x.js');\n",
        ] {
            assert!(imports_only_the_loader(&format!("{bindgen}{extra}"), loader).is_err());
        }
    }
}
