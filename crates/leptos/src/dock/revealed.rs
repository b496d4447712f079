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
