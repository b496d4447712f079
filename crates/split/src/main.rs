//! `countersign-split`: trunk's `post_build` hook that splits a page's wasm at its
//! `#[wasm_split]` functions, so what a person waits for before the page is interactive
//! is only the main module; each lazy part is fetched when first called. An app adds it
//! to its `Trunk.toml` (see the README):
//!
//! ```toml
//! [[hooks]]
//! stage = "post_build"
//! command = "countersign-split"
//! ```
//!
//! Trunk runs `wasm-bindgen` on the whole module, and a split must come before it. So
//! for each app trunk staged, this hook takes cargo's own module (linked with
//! `--emit-relocs`), splits it (`wasm_split_cli_support`, the splitter `cargo leptos
//! --split` uses), runs `wasm-bindgen` as trunk does and, for release builds, `wasm-opt`
//! on each part (see [`page::wasm_opt_params`]), and puts them in trunk's staging folder
//! under trunk's own hashed names. `index.html` is sealed (see [`seal::seal`]): every
//! file the page runs, main or lazy, is checked against its integrity before it runs. A
//! module with no split point is left as trunk built it.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod page;
mod seal;
mod tools;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use seal::{imports_only_the_loader, seal, sri, sri_of_file};
use tools::{run, Cargo};

type Result<T = ()> = std::result::Result<T, String>;

/// How the imports of split points begin (`__wasm_split_00{name}00_import_{hash}`):
/// every Leptos module carries the splitter's runtime, only a module with a lazy
/// function has one of these.
const SPLIT_MARKER: &[u8] = b"__wasm_split_00";

/// What `--help` says.
const USAGE: &str = "countersign-split: trunk's post_build hook that splits a Leptos page's wasm at its #[wasm_split] functions.
Trunk runs it after each build; add it to Trunk.toml:

[[hooks]]
stage = \"post_build\"
command = \"countersign-split\"

and link the app with --emit-relocs (see https://docs.rs/crate/countersign-split).";

fn main() -> ExitCode {
    match env::args().nth(1).as_deref() {
        None => {}
        Some("--version" | "-V") => {
            println!("countersign-split {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Some(arg) => {
            println!("{USAGE}");
            return if arg == "--help" || arg == "-h" {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    }
    match split() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("countersign-split: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The hook: reads trunk's `TRUNK_STAGING_DIR`, `TRUNK_HTML_FILE`, `TRUNK_PROFILE` and
/// `TRUNK_PUBLIC_URL`.
fn split() -> Result {
    let trunk = |name: &str| {
        env::var_os(name).map(PathBuf::from).ok_or_else(|| {
            format!("run it as trunk's post_build hook ({name} is not set); see --help")
        })
    };
    let staging = trunk("TRUNK_STAGING_DIR")?;
    let html_file = trunk("TRUNK_HTML_FILE")?;
    let release = env::var("TRUNK_PROFILE").is_ok_and(|p| p == "release");
    let html =
        std::fs::read_to_string(&html_file).map_err(|e| format!("{}: {e}", html_file.display()))?;
    let link = page::rust_link(&html);
    let opt_params = if release {
        page::wasm_opt_params(link)
    } else {
        None
    };
    let cargo = Cargo::of(&page::manifest(
        link,
        html_file.parent().unwrap_or(Path::new(".")),
    ))?;
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
        let raw = cargo
            .target_dir
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
                cargo.target_dir.display()
            ));
        }
        split_one(&staging, &cargo, hashed, &bytes, opt_params.as_deref())?;
    }
    Ok(())
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
fn split_one(
    staging: &Path,
    cargo: &Cargo,
    hashed: &str,
    raw: &[u8],
    opt: Option<&[String]>,
) -> Result {
    let wasm_bindgen = tools::wasm_bindgen(cargo.wasm_bindgen_version().as_deref())?;
    let opt = opt
        .map(|params| Ok::<_, String>((tools::wasm_opt()?, params)))
        .transpose()?;
    let work = cargo.target_dir.join("wasm-split").join(hashed);
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
        format!("splitting {hashed}: {e:#} (was it linked with `--emit-relocs`? See countersign-split's README for the build.rs that does it)")
    })?;
    let bindgen = work.join("bindgen");
    let mut c = Command::new(wasm_bindgen);
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
        opt.as_ref(),
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
        optimise(part, &staging.join(&named), opt.as_ref())?;
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

/// `wasm-opt` (the program, and its `params` with the level first) from `from` into
/// `to`; a copy without it.
fn optimise(from: &Path, to: &Path, opt: Option<&(PathBuf, &[String])>) -> Result {
    let Some((wasm_opt, params)) = opt else {
        return std::fs::copy(from, to)
            .map(|_| ())
            .map_err(|e| format!("{} → {}: {e}", from.display(), to.display()));
    };
    let mut c = Command::new(wasm_opt);
    c.args(*params).arg(from).arg("-o").arg(to);
    run(&format!("wasm-opt {}", from.display()), c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_seahash_in_hex_streamed_or_not() {
        // Whether it is trunk's is checked at each build: a name that does not match
        // fails the hook.
        assert_eq!(trunk_hash(b""), format!("{:x}", seahash::hash(b"")));
        assert_eq!(trunk_hash(b"abc"), format!("{:x}", seahash::hash(b"abc")));
    }
}
