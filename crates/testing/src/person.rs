//! A scripted person: the dock's controls pressed as a person presses them, each followed
//! by the wait for the page to follow. The page must take script clicks as a person's
//! (`CountersignOptions { trust_script_clicks: true, .. }`, for tests only): a real page
//! never does, so these helpers approve nothing outside a test.

use crate::{tick, Mounted};

impl Mounted {
    /// Clicks `selector`, then waits for the gate to act and Leptos to render.
    async fn press(&self, selector: &str) {
        self.click(selector);
        tick().await;
        tick().await;
    }

    /// "Allow once" on the first card.
    pub async fn allow_once(&self) {
        self.press(".cs-allow-once").await;
    }

    /// "Always allow" (this session) on the first card that offers it.
    pub async fn allow_for_session(&self) {
        self.press(".cs-allow-session").await;
    }

    /// "Allow all in this batch" on a model turn's cards.
    pub async fn allow_batch(&self) {
        self.press(".cs-allow-batch").await;
    }

    /// "Deny" on the first card.
    pub async fn deny(&self) {
        self.press(".cs-deny").await;
    }

    /// Opens the first card's edit form, fills `fields` (parameter name, value), and
    /// submits: the call goes on with the person's arguments, as a new card.
    pub async fn edit(&self, fields: &[(&str, &str)]) {
        self.press(".cs-edit-open").await;
        self.fill(".cs-card .cs-edit", fields);
        tick().await;
        self.press(".cs-edit-submit").await;
    }

    /// "I've done it" on the handoff: its `expect` is checked against the page now.
    pub async fn handoff_done(&self) {
        self.press(".cs-handoff-done").await;
    }

    /// "Cancel" on the handoff.
    pub async fn handoff_cancel(&self) {
        self.press(".cs-handoff-cancel").await;
    }

    /// Fills the question's `fields` (parameter name, value) and answers.
    pub async fn answer(&self, fields: &[(&str, &str)]) {
        self.fill(".cs-question", fields);
        tick().await;
        self.press(".cs-answer").await;
    }

    /// Declines the question.
    pub async fn decline(&self) {
        self.press(".cs-decline-question").await;
    }

    /// Types `message` into the dock's chat and sends it, as a person asks the assistant.
    pub async fn say(&self, message: &str) {
        self.type_into(".cs-input", message);
        self.press(".cs-send").await;
    }

    /// Sets each field of the form in `within`, by its parameter's name, as a person's
    /// typing or choosing does: a select takes the option's value, a checkbox
    /// `true`/`false`, a text field the text.
    #[allow(clippy::expect_used, clippy::panic)]
    fn fill(&self, within: &str, fields: &[(&str, &str)]) {
        use wasm_bindgen::JsCast;
        for (field, value) in fields {
            let selector = format!("{within} [data-field='{field}']");
            let element = self
                .q(&selector)
                .unwrap_or_else(|| panic!("no field `{field}` in `{within}`"));
            if let Some(select) = element.dyn_ref::<web_sys::HtmlSelectElement>() {
                select.set_value(value);
                let change = web_sys::Event::new("change").expect("an event");
                select.dispatch_event(&change).expect("dispatched");
            } else if let Some(input) = element
                .dyn_ref::<web_sys::HtmlInputElement>()
                .filter(|i| i.type_() == "checkbox")
            {
                input.set_checked(*value == "true");
                let change = web_sys::Event::new("change").expect("an event");
                input.dispatch_event(&change).expect("dispatched");
            } else {
                self.type_into(&selector, value);
            }
        }
    }
}
