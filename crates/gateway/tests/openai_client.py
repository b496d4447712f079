"""The official OpenAI Python SDK against a running Countersign gateway.

Usage: python3 openai_client.py BASE_URL TOKEN
Exits non-zero (with a message) on the first expectation that fails.
"""
import sys

import openai

base_url, token = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url, api_key=token, max_retries=0, timeout=10)
tools = [{
    "type": "function",
    "function": {
        "name": "save_workspace_name",
        "description": "Save the shared workspace name.",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    },
}]
messages = [{"role": "user", "content": "rename the workspace to Apollo"}]

# Models.
models = client.models.list()
assert [m.id for m in models.data] == ["gpt-4o-mini"], models

# Not streaming, with tools.
completion = client.chat.completions.create(model="anything", messages=messages, tools=tools)
call = completion.choices[0].message.tool_calls[0]
assert completion.choices[0].finish_reason == "tool_calls", completion
assert call.function.name == "save_workspace_name", call
assert call.function.arguments == '{"name":"Apollo"}', call

# Streaming, with tool-call deltas assembled as the SDK does.
stream = client.chat.completions.create(model="anything", messages=messages, tools=tools, stream=True)
name, arguments, finish = "", "", None
for chunk in stream:
    choice = chunk.choices[0]
    for delta in choice.delta.tool_calls or []:
        name += delta.function.name or ""
        arguments += delta.function.arguments or ""
    finish = choice.finish_reason or finish
assert (name, arguments, finish) == ("archive_workspace", "{}", "tool_calls"), (name, arguments, finish)

# A wrong token is an authentication error the SDK recognises.
bad = openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0, timeout=10)
try:
    bad.models.list()
    raise SystemExit("a wrong token was accepted")
except openai.AuthenticationError as e:
    assert "bearer token" in str(e), e

print("openai sdk: 4 checks passed")
