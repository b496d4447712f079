//! The session grants in force, each revocable.

use leptos::prelude::*;

use crate::countersign::Countersign;
use crate::i18n::Strings;

/// "Allowed for this session": renders nothing while there are no grants.
#[component]
pub(crate) fn GrantList(
    /// The page's Countersign, stored locally (it is not `Send`).
    cs: StoredValue<Countersign, LocalStorage>,
) -> impl IntoView {
    let dock = cs.with_value(Countersign::dock);
    let strings: &'static Strings = cs.with_value(|cs| cs.locale().strings());
    move || {
        let grants = dock.grants.get();
        (!grants.is_empty()).then(|| {
            let rows = grants
                .into_iter()
                .map(|grant| {
                    let id = grant.id;
                    view! {
                        <li class="cs-grant" data-action=grant.action.clone()>
                            <span>
                                <strong>{grant.title.clone()}</strong>
                                <span class="cs-label cs-grant__rule">{strings.grant_covers(grant.rule.description.as_deref(), &grant.title, grant.basis.caller)}</span>
                            </span>
                            <button class="cs-btn cs-btn--link cs-revoke" on:click=move |_| cs.with_value(|cs| { cs.revoke(id); })>
                                {strings.revoke}
                            </button>
                        </li>
                    }
                })
                .collect_view();
            view! {
                <section class="cs-grants" aria-label=strings.grants>
                    <h3 class="cs-section-title">{strings.grants}</h3>
                    <ul>{rows}</ul>
                </section>
            }
        })
    }
}
