//! Helpers for the real-browser end-to-end tests: build the tutorial (and the lazy-dock
//! example), serve it on loopback, start ChromeDriver, and drive the page as a person
//! would.
#![allow(clippy::print_stdout)]

mod browser;
mod gateway;
mod mcp;
mod model;
mod quick_start;
pub mod real_model;
mod serve;

pub use browser::{ensure, Authenticator, Browser, Ui, WAIT};
pub use gateway::{audit_key, Gateway, E2E_KEY, MCP_TOKEN};
pub use mcp::{McpClient, MCP_WAIT};
pub use model::{scripted_model, streamed_answers};
pub use quick_start::build_quick_start;
pub use serve::{
    build_lazy_dock, build_tutorial, serve_dir, serve_dir_holding, workspace_root, Held,
};

/// A test failure: what was expected and what the page showed.
pub type Failure = String;

/// One scenario's result.
pub type Outcome = Result<(), Failure>;
