//! The question panel: the assistant asks the person a typed question. Its title, its
//! words and its form all come from the declaration (the answer type's schema); the
//! answer is checked as the person types and again by the gate before the model sees it.

use countersign::{question::AnswerError, CallId};
use leptos::prelude::*;

use super::edit_form::{schema_form, SchemaForm};
use crate::countersign::Countersign;
use crate::i18n::Strings;

/// The oldest waiting question; renders nothing while none waits.
#[component]
pub(crate) fn QuestionPanel(
    /// The page's Countersign, stored locally (it is not `Send`).
    cs: StoredValue<Countersign, LocalStorage>,
) -> impl IntoView {
    let dock = cs.with_value(Countersign::dock);
    let strings: &'static Strings = cs.with_value(|cs| cs.locale().strings());
    // Drawn again only when another question comes first: typing is never lost.
    let shown = Memo::new(move |_| dock.questions.with(|q| q.first().map(|q| q.call)));
    move || {
        let call = shown.get()?;
        let view = dock
            .questions
            .with_untracked(|q| q.iter().find(|q| q.call == call).cloned())?;
        Some(untrack(|| panel(cs, strings, view, dock.now_ms)))
    }
}

fn panel(
    cs: StoredValue<Countersign, LocalStorage>,
    strings: &'static Strings,
    view: countersign::question::QuestionView,
    now_ms: ReadSignal<u64>,
) -> impl IntoView {
    let call: CallId = view.call;
    cs.with_value(|cs| cs.shown(call, view.caller));
    let action = StoredValue::new(view.action.clone());
    let deadline = view.deadline.as_millis();
    let left = move || deadline.saturating_sub(now_ms.get());
    let check = move |text: &str| {
        let action = action.get_value();
        cs.with_value(|cs| cs.executor().check_answer(&action, text))
            .map(|_| ())
    };
    let SchemaForm { inputs, raw, error } = schema_form(
        strings,
        Some(&view.schema),
        &serde_json::Value::Object(serde_json::Map::new()),
        check,
        cs.with_value(Countersign::trusts_script_clicks),
    );
    let submit = move || {
        let text = raw.get_untracked();
        if text.is_empty() {
            return;
        }
        match cs.with_value(|cs| cs.answer(call, &text)) {
            Ok(()) => {}
            Err(AnswerError::Invalid(why)) => error.set(Some(why)),
            Err(e) => error.set(Some(e.to_string())),
        }
    };
    let heading = if view.caller.is_assistant() {
        strings.question_heading
    } else {
        strings.question_heading_agent
    };
    view! {
        <section class="cs-card cs-question" role="region" aria-label=heading data-call=call.get().to_string()>
            <p class="cs-card__count">{heading}</p>
            <h3 class="cs-card__title">{view.title.clone()}</h3>
            {strings.asked_by(view.caller).map(|who| view! { <p class="cs-caller" role="note">{who}</p> })}
            <p class="cs-card__consequence">{view.prompt.clone()}</p>
            // The Answer button's click decides (Enter in a field clicks it too); a script's
            // `requestSubmit()` does nothing.
            <form class="cs-edit" on:submit=move |ev| ev.prevent_default()>
                {inputs}
                <p class="cs-edit__error" aria-live="polite">{move || error.get()}</p>
                <p class="cs-countdown" role="timer">{strings.time_left}" "{move || strings.countdown(left())}</p>
                <div class="cs-buttons">
                    <button type="submit" class="cs-btn cs-btn--primary cs-answer" disabled=move || error.with(Option::is_some) on:click=move |ev| {
                        if cs.with_value(|cs| cs.by_person(&ev, call, countersign::reason::Control::Answer)) {
                            submit();
                        }
                    }>
                        {strings.answer}
                    </button>
                    <button type="button" class="cs-btn cs-btn--deny cs-decline-question" on:click=move |ev| {
                        cs.with_value(|cs| {
                            if cs.by_person(&ev, call, countersign::reason::Control::Decline) { let _ = cs.decline_question(call); }
                        });
                    }>{strings.decline_question}</button>
                </div>
            </form>
        </section>
    }
}
