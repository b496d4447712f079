//! The minimal app with its Countersign layer (the gate, the action, the assistant and
//! the dock) loaded after the page: the todo list works on the main wasm part at once,
//! and the layer is a part of its own, split off by `countersign-split` (the hook in
//! `Trunk.toml`) and fetched right after.
use countersign::{Action, Confirm, Kind};
use countersign_leptos::{
    provide_countersign, use_action, AgentDock, Assistant, CountersignOptions, Rule, Scripted,
};
use leptos::prelude::*;
use leptos::wasm_split::SplitLoaderError;
use schemars::JsonSchema;
use serde::Deserialize;

/// What the model may pass to `add_todo`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
struct NewTodo {
    /// The todo's text.
    text: String,
}

/// The page's list, which the layer's action adds to.
#[derive(Clone, Copy)]
struct Todos(RwSignal<Vec<String>>);

/// The page: the list and its own form, interactive at once; then the dock.
#[component]
fn App() -> impl IntoView {
    let todos = RwSignal::new(Vec::<String>::new());
    provide_context(Todos(todos));
    let draft = RwSignal::new(String::new());
    let add = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        todos.update(|t| t.push(draft.get_untracked()));
        draft.set(String::new());
    };
    view! {
        <main>
            <h1>"Todos"</h1>
            <form on:submit=add>
                <input id="new-todo" aria-label="New todo" bind:value=draft />
                <button id="add">"Add"</button>
            </form>
            <ul id="todos">{move || todos.get().into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}</ul>
        </main>
        <Suspense fallback=|| ()>
            {Suspend::new(async {
                countersign_layer().await.unwrap_or_else(|_| {
                    view! { <p role="alert">"The assistant could not be loaded."</p> }.into_any()
                })
            })}
        </Suspense>
    }
}

/// The Countersign layer: a wasm part of its own, fetched the first time this is called.
/// `fallible`: a part that cannot be fetched is an `Err`, never a panic.
#[leptos::wasm_split::wasm_split(
    countersign_layer,
    wasm_split_path = ::leptos::wasm_split,
    fallible
)]
fn countersign_layer() -> Result<AnyView, SplitLoaderError> {
    // Set up once: nothing here is tracked.
    Ok(untrack(|| {
        let Some(Todos(todos)) = use_context::<Todos>() else {
            return ().into_any();
        };
        let Ok(cs) = provide_countersign(CountersignOptions::default()) else {
            return view! { <p role="alert">"This browser has no Web Crypto."</p> }.into_any();
        };
        use_action(
            Action::<NewTodo>::new("add_todo", "Add an item to the todo list.")
                .title("Add a todo")
                .kind(Kind::Write)
                .confirm(Confirm::Ask)
                .consequence(|p| format!("add “{}” to the list", p.text))
                .run(move |p: NewTodo| async move {
                    todos.update(|t| t.push(p.text.clone()));
                    Ok::<_, String>(serde_json::json!({ "added": p.text }))
                }),
        );
        let offline = match Scripted::new(
            cs.locale(),
            vec![
                Rule::new("add_todo", serde_json::json!({ "text": "{text}" })).phrase("add {text}"),
            ],
        ) {
            Ok(offline) => offline,
            Err(e) => return view! { <p role="alert">{e.to_string()}</p> }.into_any(),
        };
        let assistant = Assistant::for_page(&cs, offline);
        view! { <AgentDock assistant=assistant hint="Try “add buy milk”." /> }.into_any()
    }))
}

fn main() {
    leptos::mount::mount_to_body(App);
}
