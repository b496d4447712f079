//! Mounts the notes example.

fn main() {
    leptos::mount::mount_to_body(notes::App);
}
