"""A hostile MCP server over stdio (no SDK): each mode breaks the protocol in
one way, so the tests can check that agentrpc bounds and reports it.

    python mcp_hostile_server.py MODE

Modes: badjson, badversion, unknownid, huge, manytools, endless, storm, silent,
immortal, ``version=V`` (answers initialize with protocol version V), asks (asks
the client for ping, sampling, roots and elicitation, does not advertise
``listChanged`` and still sends ``list_changed``) and relentless (after its tool
``provoke``, every ``tools/list`` answer comes after a new ``list_changed``: a
client that re-lists until no notification is left never stops), oddschema (a
tool whose input schema cannot be used, one whose arguments need an integer
``n``), spawner (starts a child of its own that ignores SIGTERM and reads no
input, and writes that child's pid to ``$MCP_TEST_PID_FILE``), deaf (its tool ``deafen``
answers, then the server never reads its input again; SIGTERM ends it), orphaner (starts a
child of its own that keeps the server's stdout open and writes its pid to
``$MCP_TEST_PID_FILE``; its tool ``crash`` ends the server with status 3). In every mode
the tool ``hang`` is never answered, ``big`` answers 2 MiB of text, and at the end of input the server writes
``eof`` to ``$MCP_TEST_EOF_FILE`` (if set) half a second later, then exits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

MODE = sys.argv[1] if len(sys.argv) > 1 else "badjson"

#: What ``asks`` asks the client once initialized (request id → method).
ASKS = {
    "ask-ping": "ping",
    "ask-sampling": "sampling/createMessage",
    "ask-roots": "roots/list",
    "ask-elicitation": "elicitation/create",
}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict[str, Any], result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def tool(name: str) -> dict[str, Any]:
    # Marked read-only: these tests are about the wire, not about confirmation.
    return {"name": name, "description": f"tool {name}", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}


def main() -> None:
    if MODE == "immortal":
        # Outlives a closed stdin and SIGTERM: only SIGKILL (or the parent-death signal) ends it.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pid_file = os.environ.get("MCP_TEST_PID_FILE")
        if pid_file:
            with open(pid_file, "w") as f:
                f.write(str(os.getpid()))
    if MODE == "spawner":
        grandchild = subprocess.Popen(
            [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.environ["MCP_TEST_PID_FILE"], "w") as f:
            f.write(str(grandchild.pid))
    if MODE == "orphaner":
        # Holds our stdout (inherited, as a careless helper process does) after we are gone.
        holder = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)"], stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.environ["MCP_TEST_PID_FILE"], "w") as f:
            f.write(str(holder.pid))
    page = 0
    grown = False
    answers: dict[str, Any] = {}
    waiting: dict[str, Any] | None = None
    for line in sys.stdin:
        request = json.loads(line)
        method = request.get("method")
        if method == "notifications/initialized" and MODE == "asks":
            for ask_id, ask in ASKS.items():
                send({"jsonrpc": "2.0", "id": ask_id, "method": ask, "params": {}})
        if "id" not in request:
            continue
        if method is None:
            # The client's answer to one of our asks.
            answers[str(request["id"])] = {k: v for k, v in request.items() if k in ("result", "error")}
            if waiting is not None and len(answers) == len(ASKS):
                answer(waiting, {"content": [{"type": "text", "text": json.dumps(answers, sort_keys=True)}]})
                waiting = None
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
            if MODE.startswith("version="):
                version = MODE.removeprefix("version=")
            answer(request, {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": MODE, "version": "0"}})
        elif method == "tools/list":
            if MODE == "manytools":
                answer(request, {"tools": [tool(f"t{i}") for i in range(10_000)]})
            elif MODE == "endless":
                page += 1
                answer(request, {"tools": [tool(f"p{page}")], "nextCursor": f"c{page}"})
            elif MODE == "asks":
                answer(request, {"tools": [tool("asked"), tool("grow")] + ([tool("extra")] if grown else [])})
            elif MODE == "oddschema":
                odd = {"name": "odd", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "#/$defs/nowhere"}}}, "annotations": {"readOnlyHint": True}}
                typed = {"name": "typed", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, "annotations": {"readOnlyHint": True}}
                answer(request, {"tools": [odd, typed, tool("ok")]})
            elif MODE == "orphaner":
                answer(request, {"tools": [tool("crash"), tool("ok")]})
            elif MODE == "deaf":
                answer(request, {"tools": [tool("deafen"), tool("ok")]})
            elif MODE == "relentless":
                if grown:
                    send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
                answer(request, {"tools": [tool("provoke"), tool("ok")]})
            else:
                answer(request, {"tools": [tool("huge"), tool("storm"), tool("ok"), tool("hang"), tool("big")]})
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
            elif name == "hang":
                continue
            elif name == "crash":
                os._exit(3)
            elif name == "deafen":
                answer(request, {"content": [{"type": "text", "text": "deaf from now on"}]})
                # Alive, and not reading: what agentrpc sends from now on fills the pipe.
                while True:
                    time.sleep(3600)
            elif name == "big":
                # 2 MiB of text: over the 1 MiB output bound, under the 16 MiB message bound.
                answer(request, {"content": [{"type": "text", "text": "y" * (2 * 1024 * 1024)}]})
            elif name == "asked":
                if len(answers) == len(ASKS):
                    answer(request, {"content": [{"type": "text", "text": json.dumps(answers, sort_keys=True)}]})
                else:
                    waiting = request
            elif name == "grow":
                grown = True
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
                answer(request, {"content": [{"type": "text", "text": "grown"}]})
            elif name == "extra":
                answer(request, {"content": [{"type": "text", "text": "extra ran"}]})
            elif name == "provoke":
                grown = True
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
                answer(request, {"content": [{"type": "text", "text": "provoked"}]})
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
    eof_file = os.environ.get("MCP_TEST_EOF_FILE")
    if eof_file:
        # A moment of cleanup: only a parent that waits for the exit lets it finish.
        time.sleep(0.5)
        with open(eof_file, "w") as f:
            f.write("eof")
    if MODE == "immortal":
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
