"""A session that uses the tools of an MCP server, next to its own.

The server here is a few lines of stdlib Python speaking MCP on stdio (any MCP
server works the same: ``npx -y @modelcontextprotocol/server-filesystem DIR``,
``uvx mcp-server-git``, ...). The model is the offline scripted provider, which
calls the server's ``add`` tool as ``mcp__calc__add``.
"""

from __future__ import annotations

import asyncio
import sys

from agentrpc import Client, scripted

CALC_SERVER = r'''
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue  # notifications
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "calc", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "add", "description": "Adds a and b.", "inputSchema": {
            "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
            "annotations": {"readOnlyHint": True}}]}
    elif m["method"] == "tools/call":
        a = m["params"]["arguments"]
        r = {"content": [{"type": "text", "text": str(a["a"] + a["b"])}]}
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
'''


async def main() -> None:
    async with Client.spawn() as client:
        session = await client.open_session(
            model=scripted(
                {"toolCalls": [{"name": "mcp__calc__add", "arguments": {"a": 2, "b": 40}}]},
                {"text": ["2 + 40 = 42."]},
            ),
            mcp_servers=[{"name": "calc", "command": sys.executable, "args": ["-c", CALC_SERVER]}],
        )
        async for event in session.stream("What is 2 + 40?"):
            if event.type == "toolCallFinished":
                print(f"{event.raw['name']} (from MCP server {event.raw['source']['mcp']}) -> {event.raw['content']}")
            elif event.type == "turnEnded":
                print("turn", event.raw["status"])
        state = await client.request("session/getState", {"sessionId": session.id})
        for server in state["mcpServers"]:
            print(f"server {server['name']}: {server['status']}, tools {server['tools']}")


if __name__ == "__main__":
    asyncio.run(main())
