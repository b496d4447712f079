//! The projection: the tool list the model sees.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{json, Value};

use crate::policy::{ApprovalPolicy, Kind};

/// One tool as the model sees it, with risk annotations.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The action id: the function name the model calls.
    pub name: String,
    /// The declaration's description plus one sentence on how the gate treats it.
    pub description: String,
    /// The JSON Schema of the params, derived from the same type that validates them.
    pub parameters: Value,
    /// Risk hints, named as MCP names them.
    pub annotations: ToolAnnotations,
}

/// Risk hints for a tool (MCP's `ToolAnnotations` names).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// The action's title.
    pub title: String,
    /// `true` for `Read` actions.
    pub read_only_hint: bool,
    /// `true` for `Danger` actions.
    pub destructive_hint: bool,
    /// The resolved approval policy.
    pub approval: ApprovalPolicy,
    /// `true` when the person does the last step.
    pub handoff: bool,
    /// `true` when its result is untrusted (WebMCP `untrustedContentHint`, MCP `openWorldHint`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untrusted_content_hint: bool,
}

/// The OpenAI `tools` array, without annotations (the API accepts only its own fields).
pub fn openai_tools(tools: &[ToolSpec]) -> Value {
    let tool = |t: &ToolSpec| {
        json!({ "type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters,
        } })
    };
    Value::Array(tools.iter().map(tool).collect())
}

pub(crate) fn describe(
    description: &str,
    kind: Kind,
    policy: ApprovalPolicy,
    handoff: bool,
) -> String {
    let gate = if handoff {
        "The person does the last step in the page; you cannot do it for them."
    } else {
        match (policy, kind) {
            (ApprovalPolicy::None, Kind::Read) => "Runs without asking; changes nothing.",
            (ApprovalPolicy::None, _) => "Runs without asking.",
            (ApprovalPolicy::Ask, _) => "The person is asked to approve it first.",
            (ApprovalPolicy::AskAlways, _) => "The person is asked to approve it every time.",
        }
    };
    if description.is_empty() {
        gate.to_owned()
    } else {
        format!("{description} {gate}")
    }
}

/// The params schema as tool `parameters` expect it: inlined, no `$schema` or `title`.
pub(crate) fn schema_for<P: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema: Value = generator.into_root_schema_for::<P>().into();
    if let Some(object) = schema.as_object_mut() {
        object.remove("title");
        object.remove("$schema");
        // A model sees one object type; `{}`-params types may omit it.
        object.entry("type").or_insert_with(|| json!("object"));
        object
            .entry("properties")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
    }
    schema
}
