//! Mounts the minimal example.

fn main() {
    leptos::mount::mount_to_body(minimal::App);
}
