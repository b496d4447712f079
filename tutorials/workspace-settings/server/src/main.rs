//! The tutorial's server: `countersign-gateway`'s command line with the tutorial's
//! countersigned actions declared (natively, from the same crate the page compiles), so
//! `serve --window-origin` serves the approval window that reset is raised to.
//! `cargo xtask serve` runs it.

fn main() -> std::process::ExitCode {
    countersign_gateway::cli::main_with(Some(workspace_settings_actions::for_window))
}
