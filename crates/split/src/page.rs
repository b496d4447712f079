//! What the page's `index.html` says about its Rust app: trunk's `<link data-trunk
//! rel="rust">`, read the way trunk reads it.

use std::path::{Path, PathBuf};

/// The first `<link …>` tag with `rel="rust"` in `html`; empty if there is none (trunk
/// then builds the `Cargo.toml` beside the page, with its defaults).
pub(crate) fn rust_link(html: &str) -> &str {
    let mut rest = html;
    while let Some(at) = rest.find("<link") {
        let tail = rest.get(at..).unwrap_or_default();
        let tag = tail
            .get(..tail.find('>').unwrap_or(tail.len()))
            .unwrap_or_default();
        if tag.contains(" rel=\"rust\"") {
            return tag;
        }
        rest = tail.get(tag.len()..).unwrap_or_default();
    }
    ""
}

/// The value of the first `name="…"` in `text`.
pub(crate) fn attribute<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let at = text.find(&format!(" {name}=\""))? + name.len() + 3;
    let rest = text.get(at..)?;
    rest.get(..rest.find('"')?)
}

/// The `Cargo.toml` the rust `link` builds, as trunk finds it: its `href` (a manifest
/// or its folder) from the page's folder `html_dir`, else the page's own folder.
pub(crate) fn manifest(link: &str, html_dir: &Path) -> PathBuf {
    let Some(href) = attribute(link, "href") else {
        return html_dir.join("Cargo.toml");
    };
    let path = html_dir.join(href.split('/').collect::<PathBuf>());
    if path.ends_with("Cargo.toml") {
        path
    } else {
        path.join("Cargo.toml")
    }
}

/// How a release build's parts are optimised: `wasm-opt -O{level}` and the rust link's
/// `data-wasm-opt-params`, as trunk would optimise the unsplit module. The level is the
/// link's `data-split-wasm-opt`, else its `data-wasm-opt`, else trunk's default (`-O`).
/// `None` (level `0`): no `wasm-opt`. With `data-wasm-opt="0"` and
/// `data-split-wasm-opt`, trunk does not optimise the whole module first, only for this
/// hook to replace it.
pub(crate) fn wasm_opt_params(link: &str) -> Option<Vec<String>> {
    let level = attribute(link, "data-split-wasm-opt")
        .or_else(|| attribute(link, "data-wasm-opt"))
        .unwrap_or_default();
    if level == "0" {
        return None;
    }
    Some(
        std::iter::once(format!("-O{level}"))
            .chain(
                attribute(link, "data-wasm-opt-params")
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(str::to_owned),
            )
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_read_by_name() {
        let html = r#"<link data-trunk rel="rust" data-wasm-opt="0" data-split-wasm-opt="z" data-wasm-opt-params="--a --b" />"#;
        assert_eq!(attribute(html, "data-wasm-opt"), Some("0"));
        assert_eq!(attribute(html, "data-split-wasm-opt"), Some("z"));
        assert_eq!(attribute(html, "data-wasm-opt-params"), Some("--a --b"));
        assert_eq!(attribute(html, "data-bin"), None);
    }

    #[test]
    fn the_rust_link_is_the_one_with_rel_rust() {
        let html = concat!(
            r#"<head><link data-trunk rel="css" href="style.css" />"#,
            r#"<link rel="icon" href="x.png"><link data-trunk rel="rust" href="app" data-wasm-opt="z" />"#,
            r#"<link data-trunk rel="rust" href="worker" /></head>"#,
        );
        assert_eq!(
            rust_link(html),
            r#"<link data-trunk rel="rust" href="app" data-wasm-opt="z" /"#
        );
        assert_eq!(rust_link(r#"<link data-trunk rel="css" href="a.css">"#), "");
        assert_eq!(rust_link("<link rel=\"rust\""), "<link rel=\"rust\"");
    }

    #[test]
    fn the_manifest_is_found_as_trunk_finds_it() {
        let dir = Path::new("site");
        let link = |href: &str| format!(r#"<link data-trunk rel="rust" href="{href}" /"#);
        assert_eq!(manifest("", dir), dir.join("Cargo.toml"));
        assert_eq!(
            manifest(&link("app/Cargo.toml"), dir),
            dir.join("app").join("Cargo.toml")
        );
        assert_eq!(
            manifest(&link("../app"), dir),
            dir.join("..").join("app").join("Cargo.toml")
        );
    }

    #[test]
    fn the_parts_are_optimised_as_trunk_would_optimise_the_module() {
        let params = |attrs: &str| wasm_opt_params(&format!("<link rel=\"rust\" {attrs} /"));
        let owned = |v: &[&str]| Some(v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        assert_eq!(
            params(r#"data-wasm-opt="0" data-split-wasm-opt="z" data-wasm-opt-params="--a --b""#),
            owned(&["-Oz", "--a", "--b"])
        );
        assert_eq!(params(r#"data-wasm-opt="s""#), owned(&["-Os"]));
        assert_eq!(params(""), owned(&["-O"]));
        assert_eq!(params(r#"data-wasm-opt="0""#), None);
        assert_eq!(params(r#"data-wasm-opt="z" data-split-wasm-opt="0""#), None);
    }
}
