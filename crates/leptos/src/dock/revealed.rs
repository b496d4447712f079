//! Text the model controls, shown so it cannot make a card lie: isolated from the card's
//! own words (`<bdi>`), with invisible, bidi-control and look-alike characters shown as
//! marked `\u{…}` escapes and a note saying so.

use leptos::prelude::*;

use crate::i18n::Strings;

/// How a piece of model text is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Free text: arguments, consequences.
    Text,
    /// An action or tool name: anything outside ASCII is escaped.
    Name,
}

/// `text`, isolated and revealed; the note follows when something was hidden in it.
pub(crate) fn revealed(strings: &'static Strings, text: &str, shape: Shape) -> AnyView {
    let shown = match shape {
        Shape::Text => countersign::text::reveal(text),
        Shape::Name => countersign::text::reveal_name(text),
    };
    let suspicious = shown.is_suspicious();
    let parts = shown
        .parts
        .into_iter()
        .map(|(run, escaped)| {
            if escaped {
                view! { <mark class="cs-escape">{run}</mark> }.into_any()
            } else {
                run.into_any()
            }
        })
        .collect_view();
    view! {
        <bdi class="cs-model">{parts}</bdi>
        {suspicious.then(|| view! { <span class="cs-hidden-note" role="note">{strings.hidden_characters}</span> })}
    }
    .into_any()
}

/// The arguments as indented JSON, each string value (and key) isolated and revealed on
/// its own, so right-to-left text in one value cannot reorder the numbers or keys
/// around it.
pub(crate) fn arguments_view(strings: &'static Strings, value: &serde_json::Value) -> AnyView {
    fn push(
        strings: &'static Strings,
        value: &serde_json::Value,
        indent: usize,
        out: &mut Vec<AnyView>,
    ) {
        use serde_json::Value;
        let pad = |n: usize| "  ".repeat(n);
        match value {
            Value::String(text) => {
                out.push("\"".into_any());
                out.push(revealed(strings, text, Shape::Text));
                out.push("\"".into_any());
            }
            Value::Array(items) if !items.is_empty() => {
                out.push("[\n".into_any());
                for (i, item) in items.iter().enumerate() {
                    out.push(pad(indent + 1).into_any());
                    push(strings, item, indent + 1, out);
                    out.push(if i + 1 < items.len() { ",\n" } else { "\n" }.into_any());
                }
                out.push(format!("{}]", pad(indent)).into_any());
            }
            Value::Object(map) if !map.is_empty() => {
                out.push("{\n".into_any());
                for (i, (key, item)) in map.iter().enumerate() {
                    out.push(format!("{}\"", pad(indent + 1)).into_any());
                    out.push(revealed(strings, key, Shape::Text));
                    out.push("\": ".into_any());
                    push(strings, item, indent + 1, out);
                    out.push(if i + 1 < map.len() { ",\n" } else { "\n" }.into_any());
                }
                out.push(format!("{}}}", pad(indent)).into_any());
            }
            other => out.push(other.to_string().into_any()),
        }
    }
    let mut out = Vec::new();
    push(strings, value, 0, &mut out);
    out.collect_view().into_any()
}
