"""A local HTTP server that plays a model API for integration tests.

Each test queues canned responses (a recorded SSE stream from
``shared/fixtures``, an error status with headers and body, an empty 200, a
stream cut off mid-way); the server answers requests in order and records
what it received, so tests can check exactly what agentrpc sent.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures"
if not FIXTURES.is_dir():
    FIXTURES = Path("/work/shared/fixtures")


@dataclass
class Canned:
    """One response: status, headers, body; ``cut_after`` closes the
    connection after that many body bytes without finishing the response."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    cut_after: int | None = None
    #: Sent one at a time after ``body``, ``pause`` seconds apart, as chunked
    #: transfer encoding (a model streaming slowly).
    slow_chunks: list[bytes] | None = None
    pause: float = 0.0

    @staticmethod
    def sse(fixture: str) -> Canned:
        return Canned(200, {"Content-Type": "text/event-stream"}, (FIXTURES / fixture).read_bytes())

    @staticmethod
    def error(status: int, body: Any, headers: dict[str, str] | None = None) -> Canned:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return Canned(status, {"Content-Type": "application/json", **(headers or {})}, raw)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any
    #: The client's (address, port): requests on one kept-alive connection share it.
    connection: tuple[str, int] = ("", 0)


class FakeProvider:
    """Start with ``FakeProvider()``; ``base_url`` is where agentrpc should point.
    With ``tls`` (an ``ssl.SSLContext`` holding the server's certificate) it
    speaks https; ``aborted`` counts responses the client hung up on."""

    def __init__(self, tls: ssl.SSLContext | None = None, responder: Callable[[Any], Canned] | None = None) -> None:
        self.responses: deque[Canned] = deque()
        #: Answers a request (its parsed body) when no canned response is queued:
        #: a model that reacts to what it is sent.
        self.responder = responder
        self.received: list[Received] = []
        self.aborted = 0
        self.tls = tls
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                with owner._lock:
                    owner.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body, tuple(self.client_address[:2])))
                    if owner.responses:
                        canned = owner.responses.popleft()
                    elif owner.responder is not None:
                        canned = owner.responder(body)
                    else:
                        canned = Canned.error(500, {"error": {"message": "no canned response left"}})
                self.send_response(canned.status)
                for key, value in canned.headers.items():
                    self.send_header(key, value)
                if canned.slow_chunks is not None:
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    try:
                        for piece in [canned.body, *canned.slow_chunks]:
                            if piece:
                                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                                self.wfile.flush()
                            time.sleep(canned.pause)
                        self.wfile.write(b"0\r\n\r\n")
                        self.wfile.flush()
                    except OSError:
                        with owner._lock:
                            owner.aborted += 1
                        self.close_connection = True
                elif canned.cut_after is None:
                    self.send_header("Content-Length", str(len(canned.body)))
                    self.end_headers()
                    self.wfile.write(canned.body)
                else:
                    self.send_header("Content-Length", str(len(canned.body)))
                    self.end_headers()
                    self.wfile.write(canned.body[: canned.cut_after])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            # The handshake runs on the handler's thread (first read), so a client
            # that rejects the certificate does not hold up the accepting loop.
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True, do_handshake_on_connect=False)
            # A rejected handshake is what some tests want: no traceback for it.
            self.server.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def connections(self) -> int:
        """How many distinct connections the requests so far came on."""
        with self._lock:
            return len({r.connection for r in self.received})

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def queue(self, *responses: Canned) -> None:
        with self._lock:
            self.responses.extend(responses)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def fixture_text(fixture: str) -> str:
    """The text a recorded stream spells out, for expectations."""
    text = []
    for line in (FIXTURES / fixture).read_text().splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            continue
        event = json.loads(payload)
        for choice in event.get("choices") or []:
            text.append((choice.get("delta") or {}).get("content") or "")
        delta = event.get("delta") or {}
        if event.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
            text.append(delta.get("text", ""))
    return "".join(text)
