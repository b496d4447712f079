//! Approve with edits: a person's edit of a waiting call becomes a new, linked call that needs
//! its own ticket (an edit approves nothing); the model is told which fields changed.

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

/// What a person changed on a call: always against what the model sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditDiff {
    /// The call that was edited (it ended when the edit was submitted).
    pub from: CallId,
    /// The changed fields, in name order.
    pub changes: Vec<FieldChange>,
}

impl EditDiff {
    pub(crate) fn between(from: CallId, before: &Value, after: &Value) -> Self {
        let empty = Map::new();
        let before = before.as_object().unwrap_or(&empty);
        let after = after.as_object().unwrap_or(&empty);
        // Both maps are sorted by key: merge them in order (no sort routine in the page).
        let mut fields: Vec<&String> = before.keys().collect();
        for key in after.keys() {
            if let Err(at) = fields.binary_search(&key) {
                fields.insert(at, key);
            }
        }
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

    /// What the model sent: `arguments` with the changed fields put back.
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

    /// This diff against what will really run (after a rewrite); `None` if nothing differs.
    pub(crate) fn rebased(&self, arguments: &Value) -> Option<Self> {
        let model = self.model_arguments(arguments);
        let diff = Self::between(self.from, &model, arguments);
        (!diff.changes.is_empty()).then_some(diff)
    }

    pub(crate) fn describes(&self, arguments: &Value) -> bool {
        !self.changes.is_empty()
            && self
                .changes
                .iter()
                .all(|c| arguments.get(&c.field) == c.after.as_ref())
    }

    /// Changed field names for the trail: declared ones as named, any other as `…`; no values.
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

    /// What the model is told: each changed field, its value and the person's.
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
