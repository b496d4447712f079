//! Finding what trunk used: cargo's target folder, and the `wasm-bindgen` and `wasm-opt`
//! trunk runs (on `PATH`, or the ones trunk downloaded into its cache).

use std::env;
use std::env::consts::EXE_SUFFIX;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;

/// Where cargo builds the app: its target folder and its workspace's root.
#[derive(Debug)]
pub(crate) struct Cargo {
    /// Cargo's target folder (`CARGO_TARGET_DIR`, `build.target-dir`, or the default).
    pub(crate) target_dir: PathBuf,
    /// The workspace root, where `Cargo.lock` is.
    pub(crate) workspace_root: PathBuf,
}

impl Cargo {
    /// Asks `cargo metadata` about the package at `manifest`, from the folder trunk ran
    /// cargo in (the hook's own), so the same configuration applies.
    pub(crate) fn of(manifest: &Path) -> Result<Self> {
        let out = Command::new("cargo")
            .args([
                "metadata",
                "--format-version=1",
                "--no-deps",
                "--manifest-path",
            ])
            .arg(manifest)
            .output()
            .map_err(|e| format!("could not run `cargo metadata` ({e})"))?;
        if !out.status.success() {
            return Err(format!(
                "cargo metadata --manifest-path {}: {}",
                manifest.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let metadata: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("cargo metadata's answer: {e}"))?;
        let path = |key: &str| {
            metadata
                .get(key)
                .and_then(|v| v.as_str())
                .map(PathBuf::from)
                .ok_or_else(|| format!("cargo metadata's answer has no `{key}`"))
        };
        Ok(Self {
            target_dir: path("target_directory")?,
            workspace_root: path("workspace_root")?,
        })
    }

    /// The version of the `wasm-bindgen` crate in the workspace's `Cargo.lock`, which
    /// the `wasm-bindgen` command must match.
    pub(crate) fn wasm_bindgen_version(&self) -> Option<String> {
        let lock = std::fs::read_to_string(self.workspace_root.join("Cargo.lock")).ok()?;
        locked_version(&lock, "wasm-bindgen")
    }
}

/// The version of `name` in the text of a `Cargo.lock` (the first, if several).
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == wanted {
            let version = lines.next()?.trim().strip_prefix("version = ")?;
            return Some(version.trim_matches('"').to_owned());
        }
    }
    None
}

/// The `wasm-bindgen` of `version` (`None`: any), as trunk picks it: the one on `PATH`
/// if it is that version, else the one trunk downloaded.
pub(crate) fn wasm_bindgen(version: Option<&str>) -> Result<PathBuf> {
    let on_path = version_on_path("wasm-bindgen");
    let Some(version) = version else {
        return Ok(PathBuf::from("wasm-bindgen"));
    };
    if on_path.as_deref() == Some(version) {
        return Ok(PathBuf::from("wasm-bindgen"));
    }
    trunk_cache()
        .and_then(|cache| cached_wasm_bindgen(&cache, version))
        .ok_or_else(|| {
            format!(
                "wasm-bindgen {version} (the version in Cargo.lock) is neither on PATH (found: {}) nor in trunk's cache: `cargo install wasm-bindgen-cli --version {version}`",
                on_path.as_deref().unwrap_or("none")
            )
        })
}

/// `wasm-opt` as trunk picks it when no version is asked for: the one on `PATH`, else
/// the newest trunk downloaded.
pub(crate) fn wasm_opt() -> Result<PathBuf> {
    if version_on_path("wasm-opt").is_some() {
        return Ok(PathBuf::from("wasm-opt"));
    }
    trunk_cache()
        .and_then(|cache| cached_wasm_opt(&cache))
        .ok_or_else(|| {
            "wasm-opt is neither on PATH nor in trunk's cache: install binaryen, or leave out `data-wasm-opt=\"0\"` so trunk fetches it".to_owned()
        })
}

/// The second word of what `program --version` prints first, if it runs.
fn version_on_path(program: &str) -> Option<String> {
    let out = Command::new(program).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    out.status.success().then(|| {
        text.split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    })
}

/// The folder trunk downloads its tools into (the `directories` crate's cache folder
/// for `dev.trunkrs.trunk`).
fn trunk_cache() -> Option<PathBuf> {
    let home = || env::var_os("HOME").map(PathBuf::from);
    if cfg!(target_os = "macos") {
        Some(home()?.join("Library/Caches/dev.trunkrs.trunk"))
    } else if cfg!(windows) {
        Some(PathBuf::from(env::var_os("LOCALAPPDATA")?).join("trunkrs\\trunk\\cache"))
    } else {
        let cache = env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| Some(home()?.join(".cache")))?;
        Some(cache.join("trunk"))
    }
}

/// Trunk's download of `wasm-bindgen` `version` in `cache`, if it is there.
fn cached_wasm_bindgen(cache: &Path, version: &str) -> Option<PathBuf> {
    let file = cache
        .join(format!("wasm-bindgen-{version}"))
        .join(format!("wasm-bindgen{EXE_SUFFIX}"));
    file.is_file().then_some(file)
}

/// The newest of trunk's downloads of `wasm-opt` (`wasm-opt-version_{n}`) in `cache`.
fn cached_wasm_opt(cache: &Path) -> Option<PathBuf> {
    std::fs::read_dir(cache)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let n: u32 = name
                .to_str()?
                .strip_prefix("wasm-opt-version_")?
                .parse()
                .ok()?;
            let file = entry
                .path()
                .join("bin")
                .join(format!("wasm-opt{EXE_SUFFIX}"));
            file.is_file().then_some((n, file))
        })
        .max()
        .map(|(_, file)| file)
}

/// Runs `c`; an error naming `what` if it cannot start or fails.
pub(crate) fn run(what: &str, mut c: Command) -> Result {
    let status = c
        .status()
        .map_err(|e| format!("{what}: could not start ({e})"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what}: failed ({status})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_locked_version_is_the_one_under_the_name() {
        let lock = "[[package]]\nname = \"wasm-bindgen-macro\"\nversion = \"0.2.1\"\n\n[[package]]\nname = \"wasm-bindgen\"\nversion = \"0.2.100\"\n";
        assert_eq!(
            locked_version(lock, "wasm-bindgen").as_deref(),
            Some("0.2.100")
        );
        assert_eq!(locked_version(lock, "leptos"), None);
    }

    /// An empty file at `dir/path`, its folders made.
    fn touch(dir: &Path, path: &str) -> PathBuf {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, b"").unwrap();
        file
    }

    #[test]
    fn trunks_download_of_the_locked_wasm_bindgen_is_found_and_no_other() {
        let cache = tempfile::tempdir().unwrap();
        let cache = cache.path();
        let wanted = touch(
            cache,
            &format!("wasm-bindgen-0.2.100/wasm-bindgen{EXE_SUFFIX}"),
        );
        touch(
            cache,
            &format!("wasm-bindgen-0.2.99/wasm-bindgen{EXE_SUFFIX}"),
        );
        assert_eq!(cached_wasm_bindgen(cache, "0.2.100"), Some(wanted));
        assert_eq!(cached_wasm_bindgen(cache, "0.2.101"), None);
    }

    #[test]
    fn trunks_newest_download_of_wasm_opt_is_found() {
        let cache = tempfile::tempdir().unwrap();
        let cache = cache.path();
        assert_eq!(cached_wasm_opt(cache), None);
        touch(
            cache,
            &format!("wasm-opt-version_99/bin/wasm-opt{EXE_SUFFIX}"),
        );
        let newest = touch(
            cache,
            &format!("wasm-opt-version_123/bin/wasm-opt{EXE_SUFFIX}"),
        );
        touch(cache, "wasm-opt-version_200/README");
        assert_eq!(cached_wasm_opt(cache), Some(newest));
    }
}
