"""The official MCP Python SDK (`mcp` from PyPI) calling one tool of a paired page through a
Countersign gateway, and printing the result as JSON (its `_meta` included).

Usage: python3 mcp_call.py URL TOKEN CODE TOOL ARGUMENTS_JSON
"""

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN, CODE, TOOL, ARGS = sys.argv[1:6]


async def main():
    headers = {"Authorization": f"Bearer {TOKEN}", "Countersign-Page": CODE}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(URL, http_client=http)) as client:
            r = await client.call_tool(TOOL, json.loads(ARGS))
    text = "".join(c.text for c in r.content if c.type == "text")
    print(json.dumps({"is_error": bool(r.is_error), "text": text, "meta": r.meta}), flush=True)


anyio.run(main)
