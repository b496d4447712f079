//! The quick start of `crates/leptos/README.md`, made into an app from the README's own
//! text (its `[dependencies]`, release profile, `Trunk.toml`, `index.html` line and
//! `main.rs`) in a scratch folder, and built for release with trunk, as a newcomer would.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::serve::workspace_root;

/// The README's fenced blocks, each with its info string (`toml`, `rust,no_run`, …).
fn blocks(readme: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in readme.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.trim().to_owned(), String::new())),
            (Some(_), Some(_)) => out.extend(open.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// The one block whose language is `lang` and whose text holds `marker`.
fn block(all: &[(String, String)], lang: &str, marker: &str) -> Result<String, String> {
    let found: Vec<&String> = all
        .iter()
        .filter(|(info, body)| info.starts_with(lang) && body.contains(marker))
        .map(|(_, body)| body)
        .collect();
    match found.as_slice() {
        [one] => Ok((*one).clone()),
        _ => Err(format!(
            "the README has {} `{lang}` blocks with `{marker}`; the quick start needs one",
            found.len()
        )),
    }
}

/// Writes the app into `dir` from the README's blocks; the crates come from this
/// checkout (they are not on crates.io yet), through `[patch.crates-io]`.
fn write_app(dir: &Path) -> Result<(), String> {
    let root = workspace_root();
    let readme = std::fs::read_to_string(root.join("crates/leptos/README.md"))
        .map_err(|e| format!("could not read the README: {e}"))?;
    let all = blocks(&readme);
    let dependencies = block(&all, "toml", "[dependencies]")?;
    let profile = block(&all, "toml", "[profile.release]")?;
    let tools = block(&all, "toml", "[tools]")?;
    let link = block(&all, "html", "data-trunk")?;
    let main = block(&all, "rust", "fn main()")?;
    let path = |crate_dir: &str| root.join("crates").join(crate_dir).display().to_string();
    let manifest = format!(
        "[package]\nname = \"quick-start\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         {dependencies}\n{profile}\n\
         [patch.crates-io]\ncountersign = {{ path = {core:?} }}\n\
         countersign-leptos = {{ path = {leptos:?} }}\n\n\
         # Its own workspace: the scratch folder sits inside this one's target/.\n[workspace]\n",
        core = path("core"),
        leptos = path("leptos"),
    );
    let index = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\" />\
         <title>Quick start</title><link rel=\"icon\" href=\"data:,\" />\n{link}</head>\n\
         <body></body>\n</html>\n"
    );
    let write = |name: &str, text: &str| {
        let file = dir.join(name);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&file, text).map_err(|e| format!("could not write {name}: {e}"))
    };
    write("Cargo.toml", &manifest)?;
    write("Trunk.toml", &tools)?;
    write("index.html", &index)?;
    write("src/main.rs", &main)?;
    // The versions this checkout is tested with, so the build shares its artifacts.
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock"))
        .map_err(|e| format!("could not copy Cargo.lock: {e}"))?;
    Ok(())
}

/// The quick start written from the README and built for release with trunk (sharing
/// this checkout's `target/`); returns its `dist/`.
pub fn build_quick_start() -> Result<PathBuf, String> {
    let root = workspace_root();
    let dir = root.join("target").join("quick-start");
    let _ = std::fs::remove_dir_all(&dir);
    write_app(&dir)?;
    let dist = root.join("target").join("e2e-quick-start");
    println!(
        "building the README's quick start with trunk into {}",
        dist.display()
    );
    let status = Command::new("trunk")
        .current_dir(&dir)
        .args(["build", "--release", "--dist"])
        .arg(&dist)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .status()
        .map_err(|e| format!("could not start trunk ({e}); run `cargo xtask setup`"))?;
    if status.success() {
        Ok(dist)
    } else {
        Err(format!("the quick start did not build ({status})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fenced_blocks_are_read_with_their_info_strings() {
        let text = "a\n```toml\n[x]\n```\nb\n```rust,no_run\nfn main() {}\n```\n";
        assert_eq!(
            blocks(text),
            [
                ("toml".to_owned(), "[x]\n".to_owned()),
                ("rust,no_run".to_owned(), "fn main() {}\n".to_owned())
            ]
        );
        assert!(block(&blocks(text), "toml", "[y]").is_err());
    }
}
