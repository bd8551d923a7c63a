"""An MCP server over stdio (no SDK) for calls in doubt (test_parked_turns.py):
``lookup`` declares ``idempotentHint: true``, ``charge`` does not. Every call
is appended to ``$MCP_TEST_LOG`` (one tool name a line) before anything else;
while ``$MCP_TEST_HOLD`` names a file that exists, a call is never answered
(the test kills agentrpc meanwhile), else it is answered at once. At the end
of input it exits."""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


TOOLS = [
    {"name": "lookup", "description": "Looks a price up.", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}},
    {"name": "charge", "description": "Charges a card.", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False}},
]


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        method = request.get("method")
        if "id" not in request or method is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request["id"], "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "doubt", "version": "0"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name = request["params"]["name"]
            with open(os.environ["MCP_TEST_LOG"], "a") as log:
                log.write(name + "\n")
            hold = os.environ.get("MCP_TEST_HOLD")
            if hold and os.path.exists(hold):
                continue
            send({"jsonrpc": "2.0", "id": request["id"], "result": {"content": [{"type": "text", "text": f"{name} done"}]}})
        else:
            send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
