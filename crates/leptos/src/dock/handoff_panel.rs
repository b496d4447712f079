//! The handoff panel: reason, numbered steps, countdown, "I've done it" and "Cancel".

use countersign::executor::HandoffView;
use leptos::prelude::*;

use crate::countersign::Countersign;
use crate::i18n::Strings;

/// The oldest waiting handoff; renders nothing while none waits.
#[component]
pub(crate) fn HandoffPanel(
    /// The page's Countersign, stored locally (it is not `Send`).
    cs: StoredValue<Countersign, LocalStorage>,
) -> impl IntoView {
    let dock = cs.with_value(Countersign::dock);
    let strings: &'static Strings = cs.with_value(|cs| cs.locale().strings());
    move || {
        let view = dock.handoffs.with(|h| h.first().cloned())?;
        Some(panel(cs, strings, view, dock.now_ms))
    }
}

fn panel(
    cs: StoredValue<Countersign, LocalStorage>,
    strings: &'static Strings,
    view: HandoffView,
    now_ms: ReadSignal<u64>,
) -> impl IntoView {
    let call = view.call;
    cs.with_value(|cs| cs.shown(call, view.caller));
    let current = view.current_step;
    let steps = view.steps.len();
    let deadline = view.deadline.as_millis();
    let has_next = current.is_some_and(|i| i + 1 < steps);
    let items = view
        .steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let is_current = current == Some(i);
            let text = step.text.clone();
            view! {
                <li class:cs-step--current=is_current aria-current=is_current.then_some("step")>
                    <button class="cs-btn cs-step" on:click=move |_| cs.with_value(|cs| { let _ = cs.show_step(call, i); })>
                        {text}
                    </button>
                </li>
            }
        })
        .collect_view();
    view! {
        <section class="cs-handoff" role="region" aria-label=strings.handoff data-call=call.get().to_string()>
            <h3 class="cs-section-title">{strings.handoff}</h3>
            <h3 class="cs-handoff__title">{view.title.clone()}</h3>
            {strings.asked_by(view.caller).map(|who| view! { <p class="cs-caller" role="note">{who}</p> })}
            <p class="cs-handoff__reason">{view.reason.clone()}</p>
            <ol class="cs-steps">{items}</ol>
            <p class="cs-handoff__expect"><span class="cs-label">{strings.will_check}</span>{view.expect.clone()}</p>
            {(view.tries > 0).then(|| view! { <p class="cs-handoff__not-yet" role="alert">{strings.not_yet}</p> })}
            <p class="cs-countdown" role="timer">
                {strings.time_left}" "
                {move || strings.countdown(deadline.saturating_sub(now_ms.get()))}
            </p>
            <div class="cs-buttons">
                {has_next.then(|| view! {
                    <button class="cs-btn cs-handoff-next" on:click=move |_| {
                        cs.with_value(|cs| {
                            let _ = cs.show_step(call, current.map_or(0, |i| i + 1));
                        });
                    }>{strings.next_step}</button>
                })}
                <button class="cs-btn cs-btn--primary cs-handoff-done" on:click=move |ev| cs.with_value(|cs| {
                    if cs.by_person(&ev, call, countersign::reason::Control::Done) { let _ = cs.handoff_done(call); }
                })>
                    {strings.handoff_done}
                </button>
                <button class="cs-btn cs-btn--deny cs-handoff-cancel" on:click=move |ev| cs.with_value(|cs| {
                    if cs.by_person(&ev, call, countersign::reason::Control::Cancel) { let _ = cs.handoff_cancel(call); }
                })>
                    {strings.handoff_cancel}
                </button>
            </div>
        </section>
    }
}
