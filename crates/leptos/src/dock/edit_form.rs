//! The card's edit form, generated from the action's params schema: text, numbers,
//! booleans, enums and optional fields. Anything else falls back to a JSON editor.
//! Every keystroke is checked against the action's params; submitting approves nothing,
//! it makes a new call that is checked and shown again.

use countersign::{ticket::EditError, ApprovalRequest, CallId};
use leptos::prelude::*;
use serde_json::{Map, Value};

use crate::countersign::Countersign;
use crate::i18n::Strings;

/// What a field's input is.
#[derive(Clone, Debug, PartialEq)]
enum Input {
    Text,
    Integer,
    Number,
    Boolean,
    /// An optional yes/no: yes, no, or left out (never quietly "no").
    MaybeBoolean,
    Choice(Vec<String>),
}

/// One field of the generated form.
#[derive(Clone, Debug)]
struct Field {
    name: String,
    input: Input,
    optional: bool,
    description: Option<String>,
}

/// The fields of a flat params schema, or `None` when the form cannot express it.
/// The edit form's state, shared by the queue and the card on screen.
#[derive(Clone, Copy)]
pub(crate) struct Editor {
    /// The call whose edit form is open.
    pub(crate) editing: RwSignal<Option<CallId>>,
    /// The card to show next (the one an edit made).
    pub(crate) prefer: RwSignal<Option<CallId>>,
}

impl Editor {
    /// The form closed: `Some(call)` when the edit became that call.
    pub(crate) fn done(self, to: Option<CallId>) {
        self.editing.set(None);
        if to.is_some() {
            self.prefer.set(to);
        }
    }
}

fn fields_of(schema: &Value) -> Option<Vec<Field>> {
    let properties = schema.get("properties")?.as_object()?;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    properties
        .iter()
        .map(|(name, prop)| {
            let (kind, nullable) = match prop.get("type") {
                Some(Value::String(t)) => (t.as_str(), false),
                Some(Value::Array(types)) => {
                    let named: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
                    match named.as_slice() {
                        [t, "null"] | ["null", t] => (*t, true),
                        _ => return None,
                    }
                }
                _ => return None,
            };
            let optional = nullable || !required.contains(&name.as_str());
            let input = match (kind, prop.get("enum")) {
                // An optional yes/no has three states: left out stays left out.
                ("boolean", None) if optional => Input::MaybeBoolean,
                ("string", Some(Value::Array(options))) => Input::Choice(
                    options
                        .iter()
                        .map(|o| o.as_str().map(str::to_owned))
                        .collect::<Option<_>>()?,
                ),
                ("string", None) => Input::Text,
                ("integer", None) => Input::Integer,
                ("number", None) => Input::Number,
                ("boolean", None) => Input::Boolean,
                _ => return None,
            };
            Some(Field {
                name: name.clone(),
                input,
                optional: nullable || !required.contains(&name.as_str()),
                description: prop
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
        })
        .collect()
}

/// A field's starting text in the form.
fn initial(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The arguments the form's values make, or the first field that is not a number.
fn arguments_of(fields: &[Field], values: &[String], strings: &Strings) -> Result<String, String> {
    let mut out = Map::new();
    for (field, text) in fields.iter().zip(values) {
        if text.is_empty() && field.optional && field.input != Input::Boolean {
            continue;
        }
        let value = match &field.input {
            Input::MaybeBoolean => Value::Bool(text == "true"),
            Input::Text | Input::Choice(_) => Value::String(text.clone()),
            Input::Boolean => Value::Bool(text == "true"),
            Input::Integer => text
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| format!("{} {}", field.name, strings.edit_not_a_number))?,
            Input::Number => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("{} {}", field.name, strings.edit_not_a_number))?,
        };
        out.insert(field.name.clone(), value);
    }
    Ok(Value::Object(out).to_string())
}

/// The edit form for `card`. `done(Some(call))` when the edit became call `call`,
/// `done(None)` when the person cancels.
pub(crate) fn edit_form(
    cs: StoredValue<Countersign, LocalStorage>,
    strings: &'static Strings,
    card: &ApprovalRequest,
    editor: Editor,
) -> impl IntoView {
    let done = move |to: Option<CallId>| editor.done(to);
    let action = StoredValue::new(card.action.clone());
    let call = card.call;
    let schema = cs.with_value(|cs| cs.executor().params_schema(&card.action));
    let check = move |text: &str| {
        let action = action.get_value();
        cs.with_value(|cs| cs.executor().check_arguments(&action, text))
            .map(|_| ())
    };
    let trust_script = cs.with_value(Countersign::trusts_script_clicks);
    let SchemaForm { inputs, raw, error } = schema_form(
        strings,
        schema.as_ref(),
        &card.arguments,
        check,
        trust_script,
    );
    let submit = move || {
        let text = raw.get_untracked();
        if text.is_empty() {
            return;
        }
        match cs.with_value(|cs| cs.edit(call, &text)) {
            Ok(to) => done(Some(to)),
            Err(EditError::Unchanged) => error.set(Some(strings.edit_unchanged.to_owned())),
            Err(e) => error.set(Some(e.to_string())),
        }
    };
    view! {
        // The submit button's click decides (a person's, including Enter in a field,
        // whose implicit submission clicks it); a script's `requestSubmit()` does nothing.
        <form class="cs-edit" on:submit=move |ev| ev.prevent_default()>
            <h4 class="cs-edit__title">{strings.edit_heading}</h4>
            <p class="cs-edit__hint">{strings.edit_hint}</p>
            {inputs}
            <p class="cs-edit__error" aria-live="polite">{move || error.get()}</p>
            <div class="cs-buttons">
                <button type="submit" class="cs-btn cs-btn--primary cs-edit-submit" disabled=move || error.with(Option::is_some) on:click=move |ev| {
                    if cs.with_value(|cs| cs.by_person(&ev, call, countersign::reason::Control::Edit)) {
                        submit();
                    }
                }>
                    {strings.edit_submit}
                </button>
                // Guarded too: a script must not take the form away from under the
                // person's pointer (Allow would then be where "Check edit" was).
                <button type="button" class="cs-btn cs-edit-cancel" on:click=move |ev| {
                    if cs.with_value(|cs| cs.by_person(&ev, call, countersign::reason::Control::Edit)) {
                        done(None);
                    }
                }>
                    {strings.edit_cancel}
                </button>
            </div>
        </form>
    }
}

/// A form generated from a JSON Schema, with what it stands for.
pub(crate) struct SchemaForm {
    /// The inputs (or the JSON editor when the schema is beyond the form).
    pub(crate) inputs: AnyView,
    /// The JSON the form stands for now, once it passes `check` (empty until then).
    pub(crate) raw: RwSignal<String>,
    /// Why the form's value does not pass, as the person types.
    pub(crate) error: RwSignal<Option<String>>,
}

/// The inputs for `schema`, starting from `initial`, each change checked with `check`
/// (the action's own validation). Text, numbers, booleans, enums and optional fields
/// get inputs; anything else falls back to a JSON editor.
pub(crate) fn schema_form(
    strings: &'static Strings,
    schema: Option<&Value>,
    initial_value: &Value,
    check: impl Fn(&str) -> Result<(), String> + Copy + 'static,
    trust_script: bool,
) -> SchemaForm {
    let fields = schema.and_then(fields_of);
    let error = RwSignal::new(None::<String>);
    let raw = RwSignal::new(String::new());
    let check = move |text: Result<String, String>| match text
        .and_then(|text| check(&text).map(|()| text))
    {
        Ok(text) => {
            raw.set(text);
            error.set(None);
        }
        Err(why) => {
            raw.set(String::new());
            error.set(Some(why));
        }
    };
    let inputs = match fields {
        Some(fields) => {
            let values = RwSignal::new(
                fields
                    .iter()
                    .map(|f| initial(initial_value.get(&f.name)))
                    .collect::<Vec<_>>(),
            );
            let all = StoredValue::new(fields.clone());
            let refresh = move || {
                let text = all.with_value(|f| values.with(|v| arguments_of(f, v, strings)));
                check(text);
            };
            refresh();
            fields
                .into_iter()
                .enumerate()
                .map(|(i, field)| field_view(strings, field, i, values, refresh, trust_script))
                .collect_view()
                .into_any()
        }
        None => {
            let start = serde_json::to_string_pretty(initial_value).unwrap_or_default();
            let text = RwSignal::new(start);
            check(Ok(text.get_untracked()));
            view! {
                <label class="cs-edit__field">
                    <span class="cs-label">{strings.edit_json}</span>
                    <textarea
                        class="cs-edit__json"
                        rows="6"
                        prop:value=move || text.get()
                        on:input=move |ev| {
                            if !(ev.is_trusted() || trust_script) {
                                put_back(&ev, "value", &text.get_untracked().into());
                                return;
                            }
                            let value = event_target_value(&ev);
                            text.set(value.clone());
                            check(Ok(value));
                        }
                    ></textarea>
                </label>
            }
            .into_any()
        }
    };
    SchemaForm { inputs, raw, error }
}

/// Puts a field's shown value back to what the form holds (a script changed it).
fn put_back(ev: &web_sys::Event, property: &str, value: &wasm_bindgen::JsValue) {
    if let Some(target) = ev.target() {
        let _ = js_sys::Reflect::set(&target, &property.into(), value);
    }
}

fn field_view(
    strings: &'static Strings,
    field: Field,
    index: usize,
    values: RwSignal<Vec<String>>,
    refresh: impl Fn() + Copy + 'static,
    trust_script: bool,
) -> impl IntoView {
    let value = move || values.with(|v| v.get(index).cloned().unwrap_or_default());
    // Only what the person types counts: a script's `input`/`change` is undone on
    // screen, so what is shown is always what would be submitted.
    let typed = move |ev: &web_sys::Event, property: &str| {
        if ev.is_trusted() || trust_script {
            return true;
        }
        let shown = values.with_untracked(|v| v.get(index).cloned().unwrap_or_default());
        let shown = if property == "checked" {
            wasm_bindgen::JsValue::from_bool(shown == "true")
        } else {
            shown.into()
        };
        put_back(ev, property, &shown);
        false
    };
    let set = move |text: String| {
        values.update(|v| {
            if let Some(slot) = v.get_mut(index) {
                *slot = text;
            }
        });
        refresh();
    };
    let name = field.name.clone();
    let hint = field.optional.then_some(strings.edit_optional);
    // An optional yes/no is a choice with "—" for "left out".
    let input = match field.input {
        Input::MaybeBoolean => Input::Choice(vec!["true".into(), "false".into()]),
        other => other,
    };
    let control = match input {
        Input::Boolean => view! {
            <input type="checkbox" class="cs-edit__input" data-field=name.clone()
                prop:checked=move || value() == "true"
                on:change=move |ev| if typed(&ev, "checked") { set(event_target_checked(&ev).to_string()) } />
        }
        .into_any(),
        Input::Choice(options) => {
            let blank = field
                .optional
                .then(|| view! { <option value="">"—"</option> });
            let options = options
                .into_iter()
                .map(|o| view! { <option value=o.clone()>{o.clone()}</option> })
                .collect_view();
            view! {
                <select class="cs-edit__input" data-field=name.clone()
                    prop:value=value
                    on:change=move |ev| if typed(&ev, "value") { set(event_target_value(&ev)) }>
                    {blank}{options}
                </select>
            }
            .into_any()
        }
        Input::Integer | Input::Number | Input::MaybeBoolean => view! {
            <input type="text" inputmode="decimal" class="cs-edit__input" data-field=name.clone()
                prop:value=value on:input=move |ev| if typed(&ev, "value") { set(event_target_value(&ev)) } />
        }
        .into_any(),
        Input::Text => view! {
            <input type="text" class="cs-edit__input" data-field=name.clone()
                prop:value=value on:input=move |ev| if typed(&ev, "value") { set(event_target_value(&ev)) } />
        }
        .into_any(),
    };
    view! {
        <label class="cs-edit__field">
            <span class="cs-label">{name}</span>
            {control}
            {hint.map(|h| view! { <small class="cs-edit__optional">{h}</small> })}
            {field.description.map(|d| view! { <small class="cs-edit__desc">{d}</small> })}
        </label>
    }
}
