//! Countersign's smallest complete app: a todo list whose one action the assistant may
//! ask for, and the dock where a person approves it.
use countersign::{Action, Confirm, Kind};
use countersign_leptos::{
    provide_countersign, use_action, AgentDock, Assistant, CountersignOptions, Rule, Scripted,
};
use leptos::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;

/// What the model may pass to `add_todo`.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
pub struct NewTodo {
    /// The todo's text.
    pub text: String,
}

/// The app: the list, and the dock beside it.
#[component]
pub fn App() -> impl IntoView {
    app(CountersignOptions::default())
}

/// The app with its Countersign set up by `options` (its browser test takes script clicks).
pub fn app(options: CountersignOptions) -> AnyView {
    let Ok(cs) = provide_countersign(options) else {
        return view! { <p role="alert">"This browser has no Web Crypto."</p> }.into_any();
    };
    let todos = RwSignal::new(Vec::<String>::new());
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
    // The gateway's model when there is one, else this offline phrase table.
    let offline = match Scripted::new(
        cs.locale(),
        vec![Rule::new("add_todo", serde_json::json!({ "text": "{text}" })).phrase("add {text}")],
    ) {
        Ok(offline) => offline,
        Err(e) => return view! { <p role="alert">{e.to_string()}</p> }.into_any(),
    };
    let assistant = Assistant::for_page(&cs, offline);
    view! {
        <main>
            <h1>"Todos"</h1>
            <ul id="todos">{move || todos.get().into_iter().map(|t| view! { <li>{t}</li> }).collect_view()}</ul>
        </main>
        <AgentDock assistant=assistant hint="Try “add buy milk”." />
    }
    .into_any()
}
