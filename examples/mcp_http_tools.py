"""A session that uses the tools of an MCP server over streamable HTTP.

The server here is a few lines of stdlib Python on a local port that answers
each POST with plain JSON (a real one: ``https://.../mcp``, answering JSON or
SSE). Its token comes from agentrpc's environment through ``${DOCS_TOKEN}``,
so it is neither stored with the session nor logged. The model is the offline
scripted provider, which calls the server's ``search`` tool.
"""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentrpc import Client, scripted

TOKEN = "example-token"


class DocsServer(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def reply(self, status: int, body: dict[str, Any] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if body is not None and body.get("result", {}).get("serverInfo"):
            self.send_header("Mcp-Session-Id", "docs-1")  # handed out with initialize's answer
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self.reply(401)
        if "id" not in message or "method" not in message:
            return self.reply(202)  # a notification
        method = message["method"]
        if method == "initialize":
            result: dict[str, Any] = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                      "serverInfo": {"name": "docs", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "search", "description": "Searches the docs.", "inputSchema": {
                "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
                "annotations": {"readOnlyHint": True}}]}
        else:
            query = message["params"]["arguments"]["query"]
            result = {"content": [{"type": "text", "text": f"1 page mentions {query}"}]}
        self.reply(200, {"jsonrpc": "2.0", "id": message["id"], "result": result})

    def do_GET(self) -> None:
        self.reply(405)  # no stream of server-initiated messages

    def do_DELETE(self) -> None:
        self.reply(200)  # agentrpc ends the MCP session when the session closes


async def main() -> None:
    http = ThreadingHTTPServer(("127.0.0.1", 0), DocsServer)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{http.server_address[1]}/mcp"
    try:
        async with Client.spawn(env={"DOCS_TOKEN": TOKEN}) as client:
            session = await client.open_session(
                model=scripted(
                    {"toolCalls": [{"name": "mcp__docs__search", "arguments": {"query": "resume"}}]},
                    {"text": ["The docs mention it once."]},
                ),
                mcp_servers=[{"name": "docs", "type": "http", "url": url,
                              "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}],
            )
            async for event in session.stream("Where do the docs talk about resume?"):
                if event.type == "toolCallFinished":
                    print(f"{event.raw['name']} -> {event.raw['content']}")
            state = await client.request("session/getState", {"sessionId": session.id})
            for server in state["mcpServers"]:
                print(f"server {server['name']} ({server['transport']}): {server['status']}")
            await session.close()
    finally:
        http.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
