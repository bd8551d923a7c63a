#!/usr/bin/env python3
"""The cost of one MCP tool call over stdio, against the same call as a client tool.

One turn makes N tool calls in a single round trip (the scripted provider, so
no model time): once to a minimal stdlib MCP server (`mcp__calc__add`), once to
a client tool the Python client answers (`tool/call`). Prints, per call: wall
time, agentrpc's CPU time, and the MCP server's CPU time (read from /proc).

    AGENTRPC_BIN=.build/release/agentrpc python3 Benchmarks/mcp-call.py [N]
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python" / "src"))
from agentrpc import Client, scripted, tool  # noqa: E402

SERVER = r'''
import json, os, sys
open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "calc", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "add", "inputSchema": {"type": "object"}}]}
    else:
        a = m["params"]["arguments"]
        r = {"content": [{"type": "text", "text": str(a["a"] + a["b"])}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
'''


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@tool
def add(a: int, b: int) -> str:
    """Adds a and b."""
    return str(a + b)


async def run(n: int, mcp: bool) -> tuple[float, float, float]:
    name = "mcp__calc__add" if mcp else "add"
    calls = [{"name": name, "arguments": {"a": i, "b": 1}} for i in range(n)]
    with tempfile.TemporaryDirectory() as scratch:
        pid_file = Path(scratch) / "pid"
        async with Client.spawn(env={"PID_FILE": str(pid_file)}, request_timeout=600) as client:
            extra: dict[str, object] = {"limits": {"maxToolCalls": n + 1}}
            if mcp:
                extra["mcp_servers"] = [{"name": "calc", "command": sys.executable, "args": ["-c", SERVER]}]
            else:
                extra["tools"] = [add]
            session = await client.open_session(
                model=scripted({"text": ["ok"]}, {"toolCalls": calls}, {"text": ["done"]}), **extra)  # type: ignore[arg-type]
            # Warm up (and, for MCP, wait for the server to be ready) with a first turn.
            await session.send("warm up")
            server_pid = int(pid_file.read_text()) if mcp else None
            ours0 = cpu_seconds(client.pid)
            server0 = cpu_seconds(server_pid) if server_pid else 0.0
            start = time.perf_counter()
            result = await session.send("go")
            wall = time.perf_counter() - start
            assert result.tool_calls == n, result
            ours = cpu_seconds(client.pid) - ours0
            server = (cpu_seconds(server_pid) - server0) if server_pid else 0.0
    return wall / n, ours / n, server / n


async def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    for label, mcp in (("client tool (tool/call)", False), ("MCP tool over stdio", True)):
        wall, ours, server = await run(n, mcp)
        line = f"{label:26s} {n} calls: {wall * 1e6:8.0f} µs wall/call, agentrpc CPU {ours * 1e6:6.0f} µs/call"
        if mcp:
            line += f", server CPU {server * 1e6:6.0f} µs/call"
        print(line)


if __name__ == "__main__":
    asyncio.run(main())
