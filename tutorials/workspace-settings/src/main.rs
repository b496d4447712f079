//! Mounts the workspace-settings tutorial into the page body.

fn main() {
    leptos::mount::mount_to_body(workspace_settings::App);
}
