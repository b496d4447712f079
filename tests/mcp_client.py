"""An MCP client for the end-to-end tests: the official MCP Python SDK (`mcp` from PyPI)
talking to the gateway's `/mcp`, driven line by line by the Rust test, which plays the
person in the browser.

Usage: python3 mcp_client.py URL TOKEN

Reads one JSON command per line on stdin; writes one JSON line per event on stdout:

- {"op":"list","code":C}                        -> {"op":"list","code":C,"tools":[...]}
- {"op":"call","code":C,"tag":T,"name":N,"args":{...}}
      -> {"tag":T,"progress":n,"message":m} while it waits,
         then {"tag":T,"result":{"is_error":b,"structured":{...},"text":s,"meta":{...}}}
         or {"tag":T,"error":s}
- {"op":"cancel","tag":T}                       -> {"tag":T,"cancelled":true}
- {"op":"listen","code":C}                      -> {"op":"listening","code":C},
      then {"op":"tools_changed","code":C} on each change
- any of the above with "mode":"legacy": a 2025-11-25 session instead of 2026-07-28
      (its tool changes come as {"op":"tools_changed","code":C,"mode":"legacy"})
- {"op":"connect","token":X,"code":C}           -> {"op":"connect","ok":b,"error":s}
- {"op":"quit"}
"""

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL, TOKEN = sys.argv[1], sys.argv[2]


def say(**event):
    print(json.dumps(event), flush=True)


def leaves(group):
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from leaves(e)
        else:
            yield e


class Session:
    """One client per pairing code and mode: the code is a header on every request.
    `auto` negotiates 2026-07-28 (stateless); `legacy` is a 2025-11-25 session, which
    hears of tool changes on its session stream."""

    def __init__(self, code, mode="auto", token=TOKEN):
        self.code, self.mode = code, mode
        self.headers = {"Authorization": f"Bearer {token}", "Countersign-Page": code}

    async def notified(self, message):
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            say(op="tools_changed", code=self.code, mode=self.mode)

    async def run(self, ready, stop):
        async with httpx2.AsyncClient(headers=self.headers) as http:
            transport = streamable_http_client(URL, http_client=http)
            async with Client(transport, mode=self.mode, message_handler=self.notified) as client:
                say(op="connected", code=self.code, mode=self.mode,
                    protocol=str(client.protocol_version))
                self.client = client
                ready.set()
                await stop.wait()


async def main():
    sessions = {}
    calls = {}
    async with anyio.create_task_group() as tg:

        async def session(code, mode="auto"):
            if (code, mode) not in sessions:
                ready, stop = anyio.Event(), anyio.Event()
                s = Session(code, mode)
                sessions[(code, mode)] = (s, stop)
                tg.start_soon(s.run, ready, stop)
                await ready.wait()
            return sessions[(code, mode)][0].client

        async def call(client, tag, name, args):
            async def progress(n, total, message):
                say(tag=tag, progress=n, message=message)

            with anyio.CancelScope() as scope:
                calls[tag] = scope
                try:
                    r = await client.call_tool(name, args, progress_callback=progress)
                    text = "".join(c.text for c in r.content if c.type == "text")
                    say(tag=tag, result={"is_error": bool(r.is_error),
                                         "structured": r.structured_content, "text": text,
                                         "meta": r.meta})
                except Exception as e:  # a protocol error, said as it is
                    say(tag=tag, error=f"{type(e).__name__}: {e}")
            if scope.cancelled_caught:
                say(tag=tag, cancelled=True)

        async def listen(client, code):
            async with client.listen(tools_list_changed=True) as sub:
                say(op="listening", code=code)
                async for _ in sub:
                    say(op="tools_changed", code=code, mode="auto")

        async def connect(token, code):
            try:
                async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}",
                                                        "Countersign-Page": code}) as http:
                    async with Client(streamable_http_client(URL, http_client=http)) as c:
                        await c.list_tools()
                say(op="connect", ok=True)
            except BaseExceptionGroup as g:
                say(op="connect", ok=False, error="; ".join(str(e) for e in leaves(g)))
            except Exception as e:
                say(op="connect", ok=False, error=str(e))

        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                break
            cmd = json.loads(line)
            op = cmd["op"]
            if op == "quit":
                break
            if op == "list":
                client = await session(cmd["code"], cmd.get("mode", "auto"))
                tools = (await client.list_tools()).tools
                say(op="list", code=cmd["code"], tag=cmd.get("tag"), tools=[{
                    "name": t.name,
                    "input_schema": t.input_schema,
                    "read_only": t.annotations.read_only_hint if t.annotations else None,
                    "destructive": t.annotations.destructive_hint if t.annotations else None,
                } for t in tools])
            elif op == "call":
                client = await session(cmd["code"], cmd.get("mode", "auto"))
                tg.start_soon(call, client, cmd["tag"], cmd["name"], cmd.get("args", {}))
            elif op == "cancel":
                scope = calls.get(cmd["tag"])
                if scope is not None:
                    scope.cancel()
            elif op == "listen":
                client = await session(cmd["code"], cmd.get("mode", "auto"))
                tg.start_soon(listen, client, cmd["code"])
            elif op == "connect":
                await connect(cmd["token"], cmd.get("code", ""))
        tg.cancel_scope.cancel()


anyio.run(main)
