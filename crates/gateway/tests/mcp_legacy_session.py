"""The official MCP Python SDK (`mcp` from PyPI) opening one legacy (2025-11-25) session
with a Countersign gateway, and saying what it got.

Usage: python3 mcp_legacy_session.py URL TOKEN
Prints `connected` (then ends its session), or `refused: <the error as the SDK raised it>`.
"""

import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN = sys.argv[1], sys.argv[2]


def leaves(error):
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error


async def main():
    try:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            transport = streamable_http_client(URL, http_client=http)
            async with Client(transport, mode="legacy") as client:
                await client.list_tools()
        print("connected", flush=True)
    except BaseException as error:  # what the SDK raised, said as it is
        said = "; ".join(f"{type(e).__name__}: {e}" for e in leaves(error))
        print(f"refused: {said}", flush=True)


anyio.run(main)
