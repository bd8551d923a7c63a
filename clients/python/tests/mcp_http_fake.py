"""A streamable HTTP MCP server written for agentrpc's tests, stdlib only.

Unlike the SDK's server it answers every request with plain JSON
(``application/json``), and it writes each request it receives (method,
headers, body) to a log as one JSON line, so a test can check what agentrpc
sent: ``Accept``, ``Mcp-Session-Id``, ``MCP-Protocol-Version``, the
configured headers, the ``DELETE`` at close. Its GET stream sends the server's
own ``ping`` request at once and ``notifications/tools/list_changed`` after
the tool ``grow`` ran. With ``trickle``, it answers ``DELETE`` and
``notifications/initialized`` with a body that never ends: one byte a second.
With ``modern``, it is a server of 2026-07-28: it answers ``server/discover``,
has no MCP session, and lists tools with ``x-mcp-header`` arguments (``locate``)
beside tools whose annotations the specification makes invalid (``bad_*``).

    python mcp_http_fake.py PORT LOG [trickle | modern]
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SESSION = "fake-session-1"
VERSION = "2025-06-18"
LOG = sys.argv[2] if len(sys.argv) > 2 else "/dev/null"
TRICKLE = sys.argv[3:4] == ["trickle"]
MODERN = sys.argv[3:4] == ["modern"]

# Marked read-only: these tests are about the wire, not about confirmation.
READS = {"readOnlyHint": True}
TOOLS: list[dict[str, Any]] = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}, "annotations": READS},
    {"name": "grow", "inputSchema": {"type": "object"}, "annotations": READS},
]
EXTRA = {"name": "extra", "inputSchema": {"type": "object"}, "annotations": READS}


def header(kind: str, name: str) -> dict[str, Any]:
    return {"type": kind, "x-mcp-header": name}


if MODERN:
    TOOLS += [
        {"name": "locate", "annotations": READS, "inputSchema": {"type": "object", "properties": {
            "region": header("string", "Region"), "query": {"type": "string"},
            "options": {"type": "object", "properties": {"limit": header("integer", "Limit"), "exact": header("boolean", "Exact")}}}}},
        {"name": "bad_items", "annotations": READS, "inputSchema": {"type": "object", "properties": {
            "ids": {"type": "array", "items": header("string", "Id")}}}},
        {"name": "bad_number", "annotations": READS, "inputSchema": {"type": "object", "properties": {"ratio": header("number", "Ratio")}}},
        {"name": "bad_twice", "annotations": READS, "inputSchema": {"type": "object", "properties": {
            "a": header("string", "Same"), "b": header("string", "SAME")}}},
        {"name": "bad_token", "annotations": READS, "inputSchema": {"type": "object", "properties": {"a": header("string", "Not a token")}}},
    ]
server_messages: queue.Queue[dict[str, Any]] = queue.Queue()
log_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def record(self, body: Any) -> None:
        entry = {"method": self.command, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
        with log_lock, open(LOG, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def answer(self, status: int, body: bytes = b"", content_type: str = "application/json", session: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if session:
            self.send_header("Mcp-Session-Id", SESSION)
        self.end_headers()
        self.wfile.write(body)

    def trickle(self) -> None:
        """A 200 whose body never ends: a byte a second, until the client goes."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "1000000")
        self.end_headers()
        self.close_connection = True
        try:
            while True:
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(1)
        except OSError:
            pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.record(body)
        if TRICKLE and body.get("method") == "notifications/initialized":
            return self.trickle()
        if "method" not in body or "id" not in body:  # a notification, or an answer to our ping
            return self.answer(202)
        method = body["method"]
        if not MODERN and method != "initialize" and self.headers.get("Mcp-Session-Id") != SESSION:
            return self.answer(404)
        result: dict[str, Any]
        if MODERN and method == "server/discover":
            result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "serverInfo": {"name": "fake-http", "version": "1"}}
        elif method == "initialize":
            result = {"protocolVersion": VERSION, "capabilities": {"tools": {"listChanged": True}},
                      "serverInfo": {"name": "fake-http", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            name = body["params"]["name"]
            if name == "grow" and EXTRA not in TOOLS:
                TOOLS.append(EXTRA)
                server_messages.put({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            arguments = body["params"]["arguments"]
            if name == "echo":
                text = f"echo: {arguments.get('text')}"
            else:
                text = f"{name} ran with {json.dumps(arguments, sort_keys=True)}" if name == "locate" else f"{name} ran"
            result = {"content": [{"type": "text", "text": text}]}
        else:
            error = {"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32601, "message": "no such method"}}
            return self.answer(200, json.dumps(error).encode())
        answer = {"jsonrpc": "2.0", "id": body["id"], "result": result}
        self.answer(200, json.dumps(answer).encode(), session=method == "initialize")

    def do_GET(self) -> None:
        self.record(None)
        if self.headers.get("Mcp-Session-Id") != SESSION:
            return self.answer(404)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        outgoing: list[dict[str, Any]] = [{"jsonrpc": "2.0", "id": "fake-ping-1", "method": "ping"}]
        try:
            while True:
                for message in outgoing:
                    self.wfile.write(f"data: {json.dumps(message)}\n\n".encode())
                self.wfile.flush()
                try:
                    outgoing = [server_messages.get(timeout=5)]
                except queue.Empty:
                    outgoing = []
                    self.wfile.write(b": keep-alive\n\n")
        except OSError:
            pass

    def do_DELETE(self) -> None:
        self.record(None)
        if TRICKLE:
            return self.trickle()
        self.answer(200)


if __name__ == "__main__":
    http = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    http.daemon_threads = True
    http.serve_forever()
