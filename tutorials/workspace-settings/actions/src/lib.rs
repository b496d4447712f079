//! The tutorial's countersigned actions, declared once and compiled twice: to wasm for
//! the page, which adds its state and runs; natively for the server, whose approval
//! window draws its cards from these declarations and never from the page.
//!
//! What a person is asked, and how, is fixed here: the id, the risk, the scope and the
//! presence. Each side then says what will happen from the data it holds: the page from
//! what it shows, the server from its own.

use countersign::action::NoParams;
use countersign::{Action, Confirm, Kind};

/// The archive's id.
pub const ARCHIVE: &str = "archive_workspace";
/// The reset's id.
pub const RESET: &str = "reset_workspace";
/// The scope both need.
pub const ADMIN_SCOPE: &str = "workspace.admin";

/// Archive: Danger, declared with confirm `Ask` as well (still asked every time); a
/// person's click countersigns it.
pub fn archive(description: &'static str, title: &'static str) -> Action<NoParams> {
    Action::<NoParams>::new(ARCHIVE, description)
        .title(title)
        .kind(Kind::Danger)
        .confirm(Confirm::Ask)
        .scope(ADMIN_SCOPE)
}

/// Reset: Danger, asked every time; it loses data, so the person's passkey is needed.
/// The server's declaration ([`for_window`]) raises it to the approval window.
pub fn reset(description: &'static str, title: &'static str) -> Action<NoParams> {
    Action::<NoParams>::new(RESET, description)
        .title(title)
        .kind(Kind::Danger)
        .scope(ADMIN_SCOPE)
        .needs_passkey()
}

/// The server's declarations, for the approval window: an executor for `role` holding
/// archive and reset as above, reset approved only in the window, each with what will
/// happen in the server's words. Their runs are never called: the page runs the call.
/// Native only: in the page it would be dead weight.
#[cfg(not(target_arch = "wasm32"))]
pub fn for_window(role: &str) -> Result<countersign::Executor, String> {
    use countersign::countersignature::Countersignature;
    use countersign::{Config, Executor, MemoryAudit, Session};
    let scopes = if role == "admin" {
        vec![ADMIN_SCOPE]
    } else {
        Vec::new()
    };
    let exec = Executor::new(
        Config::new("approval-window", Session::new(role, scopes), [0; 32]),
        MemoryAudit::new(),
    );
    let unused = |_: NoParams, _: Countersignature| async {
        Err::<serde_json::Value, _>("the page runs the call, not the server".to_owned())
    };
    for action in [
        archive(
            "Archive the workspace, making it read-only.",
            "Archive workspace",
        )
        .consequence(|_| "the workspace becomes read-only; nothing can be changed after".into())
        .run_countersigned(unused),
        reset(
            "Reset every workspace setting to its default.",
            "Reset workspace",
        )
        .consequence(|_| {
            "the name and the description go back to their defaults; what they say now is lost"
                .into()
        })
        .needs_window()
        .run_countersigned(unused),
    ] {
        exec.register(action).map_err(|e| e.to_string())?.forget();
    }
    Ok(exec)
}
