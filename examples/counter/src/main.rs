//! A bare Leptos counter, built exactly like the tutorial, as the size baseline.

use leptos::prelude::*;

fn main() {
    leptos::mount::mount_to_body(|| {
        let count = RwSignal::new(0);
        view! { <button on:click=move |_| *count.write() += 1>"Clicked " {count} " times"</button> }
    });
}
