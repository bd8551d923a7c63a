"""Runs an MCP stdio server as one of the handshake era (2025-11-25 and
earlier): the ``server/discover`` probe of 2026-07-28 is refused here with
``-32601``, as such a server refuses it, and everything else passes through.
agentrpc then initializes the server, which serves the handshake era.

    python mcp_handshake_only.py COMMAND [ARG...]
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading


def main() -> None:
    child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()

    def write(line: bytes) -> None:
        with lock:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

    def relay() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            write(line)

    threading.Thread(target=relay, daemon=True).start()
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("method") == "server/discover" and "id" in message:
            refusal = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}}
            write((json.dumps(refusal) + "\n").encode())
            continue
        child.stdin.write(line)
        child.stdin.flush()
    child.stdin.close()
    child.wait()


if __name__ == "__main__":
    main()
