//! `cargo xtask split`: trunk's `post_build` hook (see `Trunk.toml`) that splits a page's
//! wasm at its `#[lazy]` functions, so what a person waits for before the page is
//! interactive is only the main module; each lazy part is fetched when first called.
//!
//! Trunk runs `wasm-bindgen` on the whole module, and a split must come before it. So
//! for each app trunk staged, this hook takes cargo's own module, splits it
//! (`wasm_split_cli_support`, the splitter `cargo leptos --split` uses), runs
//! `wasm-bindgen` as trunk does and, for release builds, `wasm-opt` on each part (see
//! [`wasm_opt_params`]), and puts them in trunk's staging folder under trunk's own
//! hashed names. `index.html` is sealed (see [`seal`]): every file the page runs, main
//! or lazy, is checked against its integrity before it runs. A module with no lazy
//! function (the bare counter) is left as trunk built it.

use std::env;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha384};

use super::{cmd, root, run, Result};

/// How the imports of split points begin (`__wasm_split_00{name}00_import_{hash}`):
/// every Leptos module carries the splitter's runtime, only a module with a lazy
/// function has one of these.
const SPLIT_MARKER: &[u8] = b"__wasm_split_00";

/// The hook: reads trunk's `TRUNK_STAGING_DIR`, `TRUNK_PROFILE` and `TRUNK_HTML_FILE`.
pub(crate) fn split() -> Result {
    let staging = PathBuf::from(
        env::var_os("TRUNK_STAGING_DIR")
            .ok_or("run by trunk as a post_build hook (TRUNK_STAGING_DIR is not set)")?,
    );
    let release = env::var("TRUNK_PROFILE").is_ok_and(|p| p == "release");
    let html = env::var_os("TRUNK_HTML_FILE").map(PathBuf::from);
    let opt_params = match (&html, release) {
        (Some(html), true) => wasm_opt_params(html)?,
        _ => None,
    };
    let profile = if release { "release" } else { "debug" };
    let entries = std::fs::read_dir(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(hashed) = file.strip_suffix("_bg.wasm") else {
            continue;
        };
        // `{name}-{hash}`. Without trunk's hashes (`filehash` off) the parts' names say
        // nothing of their build: a cached old part could meet a new main part, and
        // nothing could check that cargo's module is the one trunk staged.
        let Some((name, hash)) = hashed
            .rsplit_once('-')
            .filter(|(_, hash)| hash.bytes().all(|b| b.is_ascii_hexdigit()))
        else {
            return Err(format!(
                "{hashed}: the split needs trunk's hashed names (`filehash` is off)"
            ));
        };
        let raw = target_dir()
            .join("wasm32-unknown-unknown")
            .join(profile)
            .join(format!("{name}.wasm"));
        let bytes = std::fs::read(&raw).map_err(|e| format!("{}: {e}", raw.display()))?;
        if !bytes.windows(SPLIT_MARKER.len()).any(|w| w == SPLIT_MARKER) {
            continue;
        }
        // Trunk names the staged files by the seahash of cargo's module: a module that
        // does not hash to it is from another build (a second cargo run since, or
        // another target folder), and splitting it would ship that build's gate.
        let actual = trunk_hash(&bytes);
        if actual != hash {
            return Err(format!(
                "{} is not the module trunk staged as {hashed} (it hashes to {actual}): another build wrote it since, or cargo's target folder is not {}. Build again",
                raw.display(),
                target_dir().display()
            ));
        }
        split_one(&staging, hashed, &bytes, opt_params.as_deref())?;
    }
    Ok(())
}

/// Cargo's target folder, as cargo and trunk use it.
fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR")
        .or_else(|| env::var_os("CARGO_BUILD_TARGET_DIR"))
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// The hash trunk puts in the names of what it builds from `bytes`: their seahash, in
/// lower-case hex.
fn trunk_hash(bytes: &[u8]) -> String {
    use std::hash::Hasher as _;
    let mut hasher = seahash::SeaHasher::new();
    hasher.write(bytes);
    format!("{:x}", hasher.finish())
}

/// Splits one app whose staged files are `{hashed}.js` and `{hashed}_bg.wasm`.
fn split_one(staging: &Path, hashed: &str, raw: &[u8], opt: Option<&[String]>) -> Result {
    let work = target_dir().join("wasm-split").join(hashed);
    let _ = std::fs::remove_dir_all(&work);
    let main = work.join(format!("{hashed}.wasm"));
    let loader_name = format!("{hashed}.split.js");
    let link = format!("./{loader_name}");
    let main_module = format!("./{hashed}.js");
    let split = wasm_split_cli_support::transform({
        let mut o = wasm_split_cli_support::Options::new(raw);
        o.output_dir = &work;
        o.main_out_path = &main;
        o.link_name = &link;
        o.main_module = &main_module;
        o
    })
    .map_err(|e| {
        format!("splitting {hashed}: {e:#} (was it linked with `--emit-relocs`? See the tutorial's build.rs)")
    })?;
    let bindgen = work.join("bindgen");
    let mut c = cmd("wasm-bindgen");
    c.arg("--target=web")
        .arg(format!("--out-dir={}", bindgen.display()))
        .arg(format!("--out-name={hashed}"))
        .arg("--no-typescript")
        // The lazy parts import the main part's function table by this name.
        .arg("--keep-lld-exports")
        .arg(&main);
    run(&format!("wasm-bindgen on the main part of {hashed}"), c)?;
    let staged_wasm = staging.join(format!("{hashed}_bg.wasm"));
    optimise(
        &bindgen.join(format!("{hashed}_bg.wasm")),
        &staged_wasm,
        opt,
    )?;
    let js = std::fs::read_to_string(bindgen.join(format!("{hashed}.js")))
        .map_err(|e| format!("{hashed}.js: {e}"))?;
    imports_only_the_loader(&js, &loader_name)?;
    std::fs::write(staging.join(format!("{hashed}.js")), &js)
        .map_err(|e| format!("{hashed}.js: {e}"))?;
    // The loader names each part. The parts get the app's hash, so a cached old part is
    // never run with a new main module, and are fetched with their integrity, so a part
    // changed on the way (the gate is in one) is refused like the main module would be.
    let mut loader = std::fs::read_to_string(work.join(&loader_name))
        .map_err(|e| format!("the split's loader: {e}"))?;
    for part in &split.split_modules {
        let file = part
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .ok_or("a split part without a name")?;
        let named = format!("{hashed}.{file}");
        optimise(part, &staging.join(&named), opt)?;
        let sri = sri_of_file(&staging.join(&named))?;
        let fetch = format!("fetch(new URL(\"./{file}\", import.meta.url))");
        if !loader.contains(&fetch) {
            return Err(format!(
                "the split's loader does not fetch {file} as expected: `{fetch}`"
            ));
        }
        loader = loader.replace(
            &fetch,
            &format!("fetch(new URL(\"./{named}\", import.meta.url), {{ integrity: \"{sri}\" }})"),
        );
    }
    if loader.matches("fetch(").count() != loader.matches("{ integrity: ").count() {
        return Err(format!(
            "the split's loader fetches something without its integrity: {loader}"
        ));
    }
    std::fs::write(staging.join(&loader_name), &loader)
        .map_err(|e| format!("{loader_name}: {e}"))?;
    let html = staging.join("index.html");
    let text = std::fs::read_to_string(&html).map_err(|e| format!("{}: {e}", html.display()))?;
    let base = env::var("TRUNK_PUBLIC_URL").unwrap_or_else(|_| "/".into());
    let sealed = seal(
        &text,
        &base,
        [
            (format!("{hashed}.js"), sri(js.as_bytes())),
            (format!("{hashed}_bg.wasm"), sri_of_file(&staged_wasm)?),
            (loader_name, sri(loader.as_bytes())),
        ],
    )?;
    std::fs::write(&html, sealed).map_err(|e| format!("{}: {e}", html.display()))?;
    println!(
        "split {hashed}: the main part and {} lazy part(s)",
        split.split_modules.len()
    );
    Ok(())
}

/// `wasm-opt` with `params` (level first) from `from` into `to`; a copy without them.
fn optimise(from: &Path, to: &Path, opt: Option<&[String]>) -> Result {
    let Some(params) = opt else {
        return std::fs::copy(from, to)
            .map(|_| ())
            .map_err(|e| format!("{} → {}: {e}", from.display(), to.display()));
    };
    let mut c = cmd("wasm-opt");
    c.args(params).arg(from).arg("-o").arg(to);
    run(&format!("wasm-opt {}", from.display()), c)
}

/// How the parts are optimised: `wasm-opt -O{level}` with the page's
/// `data-wasm-opt-params`, where its rust link asks for it with `data-split-wasm-opt`.
/// (The link's own `data-wasm-opt` is `0`: trunk would optimise the whole module, with
/// its relocations, only for this hook to replace it.) `None`: no `wasm-opt`.
fn wasm_opt_params(html: &Path) -> Result<Option<Vec<String>>> {
    let text = std::fs::read_to_string(html).map_err(|e| format!("{}: {e}", html.display()))?;
    let Some(level) = attribute(&text, "data-split-wasm-opt").filter(|v| *v != "0") else {
        return Ok(None);
    };
    Ok(Some(
        std::iter::once(format!("-O{level}"))
            .chain(
                attribute(&text, "data-wasm-opt-params")
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(str::to_owned),
            )
            .collect(),
    ))
}

/// The value of the first `name="…"` in `text`.
fn attribute<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let at = text.find(&format!(" {name}=\""))? + name.len() + 3;
    let rest = text.get(at..)?;
    rest.get(..rest.find('"')?)
}

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
fn seal(text: &str, base: &str, files: [(String, String); 3]) -> Result<String> {
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
fn imports_only_the_loader(js: &str, loader: &str) -> Result {
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
fn sri(bytes: &[u8]) -> String {
    format!("sha384-{}", base64(&Sha384::digest(bytes)))
}

/// [`sri`] of the file at `file`.
fn sri_of_file(file: &Path) -> Result<String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(sri(&bytes))
}

/// Whether `file` in a built page is a lazy part: [`split_one`] names them
/// `{app}.split_{name}.wasm`, and the loader fetches them when first called.
pub(crate) fn is_lazy_part(file: &str) -> bool {
    file.contains(".split_") && file.ends_with(".wasm")
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

    #[test]
    fn the_hash_is_seahash_in_hex_streamed_or_not() {
        // Whether it is trunk's is checked at each build: a name that does not match
        // fails the hook.
        assert_eq!(trunk_hash(b""), format!("{:x}", seahash::hash(b"")));
        assert_eq!(trunk_hash(b"abc"), format!("{:x}", seahash::hash(b"abc")));
    }

    #[test]
    fn attributes_are_read_by_name() {
        let html = r#"<link data-trunk rel="rust" data-wasm-opt="0" data-split-wasm-opt="z" data-wasm-opt-params="--a --b" />"#;
        assert_eq!(attribute(html, "data-wasm-opt"), Some("0"));
        assert_eq!(attribute(html, "data-split-wasm-opt"), Some("z"));
        assert_eq!(attribute(html, "data-wasm-opt-params"), Some("--a --b"));
        assert_eq!(attribute(html, "data-bin"), None);
    }
}
