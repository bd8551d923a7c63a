"""A hostile MCP server over stdio (no SDK): each mode breaks the protocol in
one way, so the tests can check that agentrpc bounds and reports it.

    python mcp_hostile_server.py MODE

Modes: badjson, badversion, unknownid, huge, manytools, endless, storm, silent, immortal.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

MODE = sys.argv[1] if len(sys.argv) > 1 else "badjson"


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict[str, Any], result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"tool {name}", "inputSchema": {"type": "object"}}


def main() -> None:
    if MODE == "immortal":
        # Outlives a closed stdin and SIGTERM: only SIGKILL (or the parent-death signal) ends it.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pid_file = os.environ.get("MCP_TEST_PID_FILE")
        if pid_file:
            with open(pid_file, "w") as f:
                f.write(str(os.getpid()))
    page = 0
    for line in sys.stdin:
        request = json.loads(line)
        method = request.get("method")
        if "id" not in request:
            continue
        if method == "initialize":
            if MODE == "silent":
                continue
            if MODE == "unknownid":
                send({"jsonrpc": "2.0", "id": 999, "result": {}})
            if MODE == "badjson":
                sys.stdout.write("this is {not json\n")
                sys.stdout.flush()
            version = "1999-01-01" if MODE == "badversion" else "2025-06-18"
            answer(request, {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": MODE, "version": "0"}})
        elif method == "tools/list":
            if MODE == "manytools":
                answer(request, {"tools": [tool(f"t{i}") for i in range(10_000)]})
            elif MODE == "endless":
                page += 1
                answer(request, {"tools": [tool(f"p{page}")], "nextCursor": f"c{page}"})
            else:
                answer(request, {"tools": [tool("huge"), tool("storm"), tool("ok")]})
        elif method == "tools/call":
            name = request["params"]["name"]
            if name == "huge":
                # One 50 MB line: agentrpc must skip it without holding it.
                sys.stdout.write('{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", "text": "' % json.dumps(request["id"]))
                chunk = "x" * (1024 * 1024)
                for _ in range(50):
                    sys.stdout.write(chunk)
                sys.stdout.write('"}]}}\n')
                sys.stdout.flush()
            elif name == "storm":
                for _ in range(5000):
                    send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
                answer(request, {"content": [{"type": "text", "text": "stormed"}]})
            else:
                answer(request, {"content": [{"type": "text", "text": "fine"}]})
        elif method == "ping":
            answer(request, {})
        else:
            send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no"}})
    if MODE == "immortal":
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
