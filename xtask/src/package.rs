//! Packaging the published crates without building them a second time.
//!
//! `cargo package` would compile each crate again from its package to check that it
//! builds. The workspace has just been built and tested from the same sources, so what
//! remains to check is that each package holds every file its build reads: every
//! source file, and every file they include. A file included from outside the crate is
//! refused, unless only doctests read it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::{cargo, root, run, Result};

/// The crates published to crates.io, in dependency order, with their folders.
pub(crate) const PUBLISHED: [(&str, &str); 6] = [
    ("countersign", "crates/core"),
    ("countersign-leptos", "crates/leptos"),
    ("countersign-testing", "crates/testing"),
    ("countersign-verify", "crates/verify"),
    ("countersign-gateway", "crates/gateway"),
    ("countersign-split", "crates/split"),
];

/// Checks each package's file list against what its build reads, then packages them.
pub(crate) fn package() -> Result {
    println!("\n==> the packages list every file their builds read");
    for (name, dir) in PUBLISHED {
        let listed = listed(name)?;
        let dir = root().join(dir);
        let mut missing = Vec::new();
        for file in read_by_build(&dir)? {
            let relative = file
                .strip_prefix(&dir)
                .map_err(|_| format!("{name}: {} is outside the crate", file.display()))?;
            if !listed.contains(&relative.to_string_lossy().replace('\\', "/")) {
                missing.push(relative.display().to_string());
            }
        }
        if !missing.is_empty() {
            return Err(format!("{name}: the package lacks {}", missing.join(", ")));
        }
        println!("ok: {name} ({} files)", listed.len());
    }
    let mut c = cargo();
    c.args(["package", "--no-verify", "--allow-dirty"]);
    for (name, _) in PUBLISHED {
        c.args(["-p", name]);
    }
    run("cargo package --no-verify (the six published crates)", c)
}

/// The files `cargo package --list` puts in `name`'s package.
fn listed(name: &str) -> Result<BTreeSet<String>> {
    let out = cargo()
        .args(["package", "--list", "--allow-dirty", "-p", name])
        .output()
        .map_err(|e| format!("cargo package --list: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo package --list -p {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// The manifest, `build.rs`, every `.rs` file under `src/` and every file they include.
fn read_by_build(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = vec![dir.join("Cargo.toml")];
    if dir.join("build.rs").is_file() {
        files.push(dir.join("build.rs"));
    }
    let mut sources = Vec::new();
    walk(&dir.join("src"), &mut sources)?;
    for source in &sources {
        let text =
            std::fs::read_to_string(source).map_err(|e| format!("{}: {e}", source.display()))?;
        let mut previous = "";
        for line in text.lines() {
            for included in included_paths(line) {
                let path = normal(&source.parent().unwrap_or(dir).join(included));
                // Only doctests read it (the workspace README): the build does not.
                if !path.starts_with(dir) && previous.contains("cfg(doctest)") {
                    continue;
                }
                files.push(path);
            }
            previous = line;
        }
    }
    files.extend(sources);
    Ok(files)
}

/// The paths `include_str!`/`include_bytes!` name on `line`.
fn included_paths(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for macro_name in ["include_str!(\"", "include_bytes!(\""] {
        let mut rest = line;
        while let Some(at) = rest.find(macro_name) {
            rest = &rest[at + macro_name.len()..];
            if let Some(end) = rest.find('"') {
                out.push(&rest[..end]);
            }
        }
    }
    out
}

/// `path` with `.` and `..` resolved (no file system access).
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}
