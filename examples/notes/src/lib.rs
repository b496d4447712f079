//! The notes example: a file editor whose actions classify their own arguments, remember
//! folders when "always allowed", preview their effect, downgrade deletes to the trash,
//! and keep an undo that no mode blocks.

// `#[component]` expands to `pub` items.
#![allow(unreachable_pub)]

use std::collections::BTreeMap;

use countersign::{
    action::NoParams, action::Rewrite, text::Preview, ticket::GrantRule, Action, Confirm, Kind,
    Mode, Session, Verdict,
};
use countersign_leptos::{
    provide_countersign, use_action, use_countersign, AgentDock, Assistant, CountersignOptions,
    Locale, Rule, Scripted,
};
use leptos::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// The files, by path.
pub type Files = RwSignal<BTreeMap<String, String>>;

/// The example's starting files.
pub fn starting_files() -> BTreeMap<String, String> {
    [
        ("drafts/ideas.md", "# Ideas\n- a dock\n- a gate"),
        ("drafts/plan.md", "# Plan\n1. ship"),
        ("notes/todo.md", "- write the tutorial"),
        ("config.json", "{ \"theme\": \"light\" }"),
        (".env", "API_KEY=do-not-touch"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

#[derive(Clone, Deserialize, JsonSchema)]
struct Write {
    /// The file's path, e.g. `drafts/new.md`.
    path: String,
    /// The whole new content.
    content: String,
}

#[derive(Clone, Deserialize, JsonSchema)]
struct PathOnly {
    /// The file's path.
    path: String,
}

fn folder(path: &str) -> &str {
    path.rfind('/').and_then(|i| path.get(..=i)).unwrap_or("")
}

/// `.env` anywhere in the path: secrets are never the assistant's to touch.
fn is_secret(path: &str) -> bool {
    path.split('/').any(|segment| segment.starts_with(".env"))
}

/// Registers the example's actions for as long as the calling component is mounted.
pub fn declare(files: Files, trash: RwSignal<Vec<(String, String)>>) {
    use_action(
        Action::<Write>::new("write_file", "Write a whole file.")
            .title("Write file")
            .kind(Kind::Write)
            .classify(move |p| {
                if is_secret(&p.path) {
                    Verdict::Deny(format!("`{}` holds secrets", p.path))
                } else if p.path.starts_with("drafts/") && !p.path.contains("..") {
                    Verdict::Allow
                } else if files.with_untracked(|f| f.contains_key(&p.path))
                    || p.path == "config.json"
                {
                    Verdict::Ask
                } else {
                    Verdict::Allow
                }
            })
            .consequence(move |p| {
                if files.with_untracked(|f| f.contains_key(&p.path)) {
                    format!("overwrite `{}`", p.path)
                } else {
                    format!("create `{}`", p.path)
                }
            })
            .preview(move |p| {
                let before = files.with_untracked(|f| f.get(&p.path).cloned().unwrap_or_default());
                Preview::of_text(&before, &p.content)
            })
            .run(move |p: Write| async move {
                files.update(|f| {
                    f.insert(p.path.clone(), p.content.clone());
                });
                Ok::<_, String>(json!({ "written": p.path }))
            }),
    );
    use_action(
        Action::<PathOnly>::new(
            "delete_file",
            "Delete a file. (Deleting moves it to the trash.)",
        )
        .title("Delete file")
        .kind(Kind::Danger)
        .rewrite(|p| Rewrite::Action {
            action: "trash_file".into(),
            arguments: json!({ "path": p.path }),
            why: "deleting moves files to the trash, where undo can restore them".into(),
        })
        .run(|_p: PathOnly| async { Err::<(), _>("delete_file always becomes trash_file") }),
    );
    use_action(
        Action::<PathOnly>::new("trash_file", "Move a file to the trash (undo restores it).")
            .title("Move to trash")
            .kind(Kind::Write)
            .confirm(Confirm::Ask)
            .validate(move |p| {
                if files.with_untracked(|f| f.contains_key(&p.path)) {
                    Ok(())
                } else {
                    Err(format!("there is no file `{}`", p.path))
                }
            })
            .classify(|p| {
                if is_secret(&p.path) {
                    Verdict::Deny(format!("`{}` holds secrets", p.path))
                } else {
                    Verdict::Allow
                }
            })
            .remember(|p| {
                let dir = folder(&p.path);
                if dir.is_empty() {
                    GrantRule::exact(
                        format!("moving `{}` to the trash", p.path),
                        "/path",
                        p.path.clone(),
                    )
                } else {
                    GrantRule::prefix(
                        format!("moving files under `{dir}` to the trash"),
                        "/path",
                        dir,
                    )
                }
            })
            .consequence(|p| format!("move `{}` to the trash", p.path))
            .preview(move |p| {
                let lines =
                    files.with_untracked(|f| f.get(&p.path).map_or(0, |c| c.lines().count()));
                Preview::default()
                    .count("files moved to the trash", 1)
                    .count("lines", lines as u64)
            })
            .run(move |p: PathOnly| async move {
                let removed = files.try_update(|f| f.remove(&p.path)).flatten();
                match removed {
                    Some(content) => {
                        trash.update(|t| t.push((p.path.clone(), content)));
                        Ok(json!({ "trashed": p.path }))
                    }
                    None => Err(format!("`{}` is gone", p.path)),
                }
            }),
    );
    use_action(
        Action::<NoParams>::new("undo", "Restore the file most recently moved to the trash.")
            .title("Undo")
            // Restoring from the trash needs no approval (it can itself be trashed again),
            // so it runs even while away; as a reversal, a broken policy file does not
            // block it either. A reversal that asks is never lowered by a mode.
            .kind(Kind::Write)
            .reversal()
            .available(move || trash.with_untracked(|t| !t.is_empty()))
            .consequence(move |_| {
                trash.with_untracked(|t| {
                    t.last()
                        .map(|(p, _)| format!("restore `{p}`"))
                        .unwrap_or_default()
                })
            })
            .run(move |_| async move {
                let restored = trash.try_update(Vec::pop).flatten();
                match restored {
                    Some((path, content)) => {
                        files.update(|f| {
                            f.insert(path.clone(), content);
                        });
                        Ok(json!({ "restored": path }))
                    }
                    None => Err("the trash is empty".to_owned()),
                }
            }),
    );
}

/// The file list and the mode selector.
#[component]
fn Editor(files: Files, trash: RwSignal<Vec<(String, String)>>) -> impl IntoView {
    declare(files, trash);
    let cs = use_countersign().map(StoredValue::new_local);
    let set_mode = move |value: String| {
        let mode = match value.as_str() {
            "away" => Mode::Away,
            "unattended" => Mode::Unattended,
            "bypass" => Mode::Bypass,
            _ => Mode::Default,
        };
        if let Some(cs) = cs {
            cs.with_value(|cs| {
                // Only a hook could be refused; a click never is.
                let _ = cs.set_mode(mode);
            });
        }
    };
    view! {
        <main style="padding: 24px; font-family: system-ui, sans-serif; max-width: 640px">
            <h1>"Notes"</h1>
            <label>"Mode "
                <select id="mode" on:change=move |ev| set_mode(event_target_value(&ev))>
                    <option value="default">"default"</option>
                    <option value="away">"away"</option>
                    <option value="unattended">"unattended"</option>
                    <option value="bypass">"bypass"</option>
                </select>
            </label>
            <ul id="files">
                {move || files.get().into_iter().map(|(path, content)| {
                    let shown = path.clone();
                    view! { <li data-path=path><code>{shown}</code><pre>{content}</pre></li> }
                }).collect_view()}
            </ul>
            <p id="trash">"Trash: " {move || trash.get().len()}</p>
        </main>
    }
}

/// The example app: the editor and the dock, with an offline assistant.
#[component]
pub fn App() -> impl IntoView {
    let options = CountersignOptions {
        session: Session::new("editor", Vec::<String>::new()),
        ..Default::default()
    };
    if let Err(e) = provide_countersign(options) {
        return view! { <p role="alert">{e.to_string()}</p> }.into_any();
    }
    let files = RwSignal::new(starting_files());
    let trash = RwSignal::new(Vec::new());
    let offline = match Scripted::new(
        Locale::En,
        vec![
            Rule::new("delete_file", json!({ "path": "{path}" }))
                .phrase("trash {path}")
                .phrase("delete {path}"),
            Rule::new("undo", json!({})).phrase("undo"),
        ],
    ) {
        Ok(offline) => offline,
        Err(e) => return view! { <p role="alert">{e.to_string()}</p> }.into_any(),
    };
    let assistant = Assistant::new(offline);
    view! {
        <div style="display: grid; grid-template-columns: 1fr 400px; min-height: 100vh">
            <Editor files=files trash=trash />
            <AgentDock assistant=assistant />
        </div>
    }
    .into_any()
}
