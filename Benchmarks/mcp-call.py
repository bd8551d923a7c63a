#!/usr/bin/env python3
"""The cost of one MCP tool call over stdio and over streamable HTTP, against
the same call as a client tool.

One turn makes N tool calls in a single round trip (the scripted provider, so
no model time): to a minimal stdlib MCP server over stdio (`mcp__calc__add`),
to the tests' stdlib streamable HTTP server that answers plain JSON
(`clients/python/tests/mcp_http_fake.py`, `mcp__fake__echo`), and to a client
tool the Python client answers (`tool/call`). Prints, per call: wall time,
agentrpc's CPU time, and the MCP server's CPU time (read from /proc).

    AGENTRPC_BIN=.build/release/agentrpc python3 Benchmarks/mcp-call.py [N]
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
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
        r = {"tools": [{"name": "add", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]}
    elif m["method"] == "tools/call":
        a = m["params"]["arguments"]
        r = {"content": [{"type": "text", "text": str(a["a"] + a["b"])}]}
    else:
        # The modern era's probe (server/discover) and anything else: not this server's.
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}}) + "\n")
        sys.stdout.flush()
        continue
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


FAKE_HTTP = Path(__file__).resolve().parents[1] / "clients" / "python" / "tests" / "mcp_http_fake.py"


def http_server() -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    process = subprocess.Popen([sys.executable, str(FAKE_HTTP), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the HTTP MCP server did not start")


async def run(n: int, kind: str) -> tuple[float, float, float]:
    name = {"client": "add", "stdio": "mcp__calc__add", "http": "mcp__fake__echo"}[kind]
    arguments = (lambda i: {"text": str(i)}) if kind == "http" else (lambda i: {"a": i, "b": 1})
    calls = [{"name": name, "arguments": arguments(i)} for i in range(n)]
    http = http_server() if kind == "http" else None
    try:
        with tempfile.TemporaryDirectory() as scratch:
            pid_file = Path(scratch) / "pid"
            async with Client.spawn(env={"PID_FILE": str(pid_file)}, request_timeout=600) as client:
                extra: dict[str, object] = {"limits": {"maxToolCalls": n + 1}}
                if kind == "stdio":
                    extra["mcp_servers"] = [{"name": "calc", "command": sys.executable, "args": ["-c", SERVER]}]
                elif http:
                    extra["mcp_servers"] = [{"name": "fake", "type": "http", "url": f"http://127.0.0.1:{http[1]}/mcp"}]
                else:
                    extra["tools"] = [add]
                session = await client.open_session(
                    model=scripted({"text": ["ok"]}, {"toolCalls": calls}, {"text": ["done"]}), **extra)  # type: ignore[arg-type]
                # Warm up (and, for MCP, wait for the server to be ready) with a first turn.
                await session.send("warm up")
                server_pid = http[0].pid if http else int(pid_file.read_text()) if kind == "stdio" else None
                ours0 = cpu_seconds(client.pid)
                server0 = cpu_seconds(server_pid) if server_pid else 0.0
                start = time.perf_counter()
                result = await session.send("go")
                wall = time.perf_counter() - start
                assert result.tool_calls == n, result
                ours = cpu_seconds(client.pid) - ours0
                server = (cpu_seconds(server_pid) - server0) if server_pid else 0.0
    finally:
        if http:
            http[0].terminate()
            http[0].wait(timeout=10)
    return wall / n, ours / n, server / n


async def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    for label, kind in (("client tool (tool/call)", "client"), ("MCP tool over stdio", "stdio"), ("MCP tool over HTTP", "http")):
        wall, ours, server = await run(n, kind)
        line = f"{label:26s} {n} calls: {wall * 1e6:8.0f} µs wall/call, agentrpc CPU {ours * 1e6:6.0f} µs/call"
        if kind != "client":
            line += f", server CPU {server * 1e6:6.0f} µs/call"
        print(line)


if __name__ == "__main__":
    asyncio.run(main())
