//! Approve with edits: a person's edit of a waiting call's arguments is a new call,
//! linked to the original, that passes the whole pipeline again from validate.
//!
//! An edit approves nothing. The original call ends (its terminal record is
//! [`crate::audit::AuditEvent::Superseded`]); the edited arguments become a new call whose card
//! shows the original → edited diff and needs its own ticket. The model's result for the
//! tool call says it ran with the person's arguments, and which fields changed.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::call::CallId;

/// One top-level field a person changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldChange {
    /// The field's name.
    pub field: String,
    /// Its value in the call being edited (`None`: the field was absent).
    pub before: Option<Value>,
    /// Its value after the edit (`None`: the person removed it).
    pub after: Option<Value>,
}

/// What a person changed on a call before approving it: always against what the model
/// sent, however many edits it took.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditDiff {
    /// The call that was edited (it ended when the edit was submitted).
    pub from: CallId,
    /// The changed fields, in name order.
    pub changes: Vec<FieldChange>,
}

impl EditDiff {
    /// The changes between two argument objects, field by field.
    pub(crate) fn between(from: CallId, before: &Value, after: &Value) -> Self {
        let empty = Map::new();
        let before = before.as_object().unwrap_or(&empty);
        let after = after.as_object().unwrap_or(&empty);
        let mut fields: Vec<&String> = before.keys().chain(after.keys()).collect();
        fields.sort_unstable();
        fields.dedup();
        let changes = fields
            .into_iter()
            .filter(|f| before.get(*f) != after.get(*f))
            .map(|f| FieldChange {
                field: f.clone(),
                before: before.get(f).cloned(),
                after: after.get(f).cloned(),
            })
            .collect();
        Self { from, changes }
    }

    /// What the model sent, given the arguments this diff led to: the changed fields
    /// put back to their `before` values.
    pub(crate) fn model_arguments(&self, arguments: &Value) -> Value {
        let mut model = arguments.as_object().cloned().unwrap_or_default();
        for change in &self.changes {
            match &change.before {
                Some(value) => {
                    model.insert(change.field.clone(), value.clone());
                }
                None => {
                    model.remove(&change.field);
                }
            }
        }
        Value::Object(model)
    }

    /// This diff again, against what will really run (a rewrite hook may have
    /// normalised the person's values); `None` when nothing differs from the model's.
    pub(crate) fn rebased(&self, arguments: &Value) -> Option<Self> {
        let model = self.model_arguments(arguments);
        let diff = Self::between(self.from, &model, arguments);
        (!diff.changes.is_empty()).then_some(diff)
    }

    /// Whether every change's `after` is what `arguments` hold (a stored edit must
    /// describe the stored arguments, or it is not taken).
    pub(crate) fn describes(&self, arguments: &Value) -> bool {
        !self.changes.is_empty()
            && self
                .changes
                .iter()
                .all(|c| arguments.get(&c.field) == c.after.as_ref())
    }

    /// The names of the changed fields that the action's schema declares; any other
    /// (a free-form map's keys, which the model may have written) is named `…`. What
    /// the audit trail keeps: never a value, never a name the model made up.
    pub(crate) fn declared_fields(&self, schema: &Value) -> Vec<String> {
        let declared = schema.get("properties").and_then(Value::as_object);
        let mut names: Vec<String> = Vec::new();
        for change in &self.changes {
            let name = if declared.is_some_and(|p| p.contains_key(&change.field)) {
                change.field.clone()
            } else {
                "…".to_owned()
            };
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// What the model is told: the fields the person changed, with its value and the
    /// value that was used instead.
    pub(crate) fn to_model_json(&self) -> Value {
        let changes: Vec<Value> = self
            .changes
            .iter()
            .map(|c| {
                serde_json::json!({
                    "field": c.field,
                    "you_sent": c.before,
                    "person_set": c.after,
                })
            })
            .collect();
        serde_json::json!({
            "note": "the person edited your arguments before deciding; the call went ahead with their version, not yours",
            "changes": changes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_diff_names_added_removed_and_changed_fields_in_order() {
        let diff = EditDiff::between(
            CallId(1),
            &json!({"b": 1, "a": "x", "keep": true}),
            &json!({"a": "y", "keep": true, "c": null}),
        );
        let fields: Vec<&str> = diff.changes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["a", "b", "c"]);
        assert_eq!(diff.changes[1].after, None);
        assert_eq!(diff.changes[2].before, None);
    }

    #[test]
    fn undeclared_names_never_reach_the_trail() {
        let diff = EditDiff::between(
            CallId(1),
            &json!({"name": "a", "token sk-123": 1}),
            &json!({"name": "b"}),
        );
        let schema = json!({"properties": {"name": {"type": "string"}}});
        assert_eq!(diff.declared_fields(&schema), ["name", "…"]);
    }
}
