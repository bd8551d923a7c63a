#!/usr/bin/env python3
"""A scriptable stdio JSON-RPC peer that stands in for agentrpc in client tests.

It tests the *client's* behaviour (error mapping, cancellation, death, stderr
draining), so it speaks newline-delimited JSON-RPC and obeys ``test/*``
methods that make it misbehave on demand:

``test/echo``                 answer with the params
``test/error``                answer with the given ``{code, message, data}`` error
``test/notify``               send ``notifications: [{method, params}]``, then answer
``test/raw``                  write ``lines`` verbatim to stdout, then answer
``test/serverRequest``        send ``{method, params}`` to the client and answer with
                              the client's whole response message
``test/serverRequestCancel``  like ``test/serverRequest``, but once the client sends
                              the notification named ``waitFor`` (or at once, with
                              ``immediate``) it withdraws the request with
                              ``$/cancelRequest``
``test/hang``                 never answer, unless ``$/cancelRequest`` arrives: then
                              answer ``-32800``
``test/received``             answer with every message received (optionally only
                              those of ``method``)
``test/stderr``               write ``bytes`` bytes of stderr (in lines), then answer
``test/die``                  write ``stderr`` to stderr and exit with ``code`` at once
``test/closeStdout``          close stdout and keep running
``test/stopReading``          answer, then stop reading stdin for a while
``session/*``                 ``create`` makes ids ``s-1``, ``s-2``...; ``cancel`` says
                              ``wasRunning``; the others answer ``{method, params}``

Environment switches: ``FAKE_STARTUP_STDERR=N`` writes N bytes of stderr
before reading anything; ``FAKE_IGNORE_EXIT=1`` ignores ``exit`` and end of
stdin (so the client must terminate it); ``FAKE_IGNORE_SIGTERM=1`` also
ignores SIGTERM (so the client must kill it); ``FAKE_REQUIRE_INIT=1`` answers
``-32002`` to anything before ``initialize``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from typing import Any

_out_lock = threading.Lock()
_state_lock = threading.Lock()
_received: list[Any] = []
_hanging: dict[Any, threading.Event] = {}
_client_responses: dict[int, tuple[threading.Event, list[Any]]] = {}
_notes_seen: dict[str, threading.Event] = {}
_sessions: list[str] = []
_next_id = 0
_initialized = False
WAIT = 20.0  # every wait in here is bounded too


def write_line(text: str) -> None:
    with _out_lock:
        try:
            sys.stdout.buffer.write(text.encode("utf-8") + b"\n")
            sys.stdout.buffer.flush()
        except (BrokenPipeError, ValueError):
            pass


def send(message: Any) -> None:
    write_line(json.dumps(message, ensure_ascii=False, separators=(",", ":")))


def answer(request_id: Any, result: Any = None, error: Any = None) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    if error is not None:
        message["error"] = error
    else:
        message["result"] = result
    send(message)


def note_event(method: str) -> threading.Event:
    with _state_lock:
        return _notes_seen.setdefault(method, threading.Event())


def call_client(method: str, params: Any, and_cancel: bool = False) -> tuple[int, threading.Event, list[Any]]:
    """Send a request to the client; the reader thread fills in the answer.

    ``and_cancel`` writes its ``$/cancelRequest`` in the same write, so the
    client reads both in one chunk, before its handler task can start.
    """
    global _next_id
    with _state_lock:
        _next_id += 1
        request_id = _next_id
        slot: tuple[threading.Event, list[Any]] = (threading.Event(), [])
        _client_responses[request_id] = slot
    request = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    lines = [request]
    if and_cancel:
        lines.append({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": request_id}})
    write_line("\n".join(json.dumps(m, separators=(",", ":")) for m in lines))
    return request_id, slot[0], slot[1]


def server_request(request_id: Any, params: dict[str, Any], cancel: bool) -> None:
    immediate = cancel and bool(params.get("immediate"))
    client_id, done, box = call_client(params["method"], params.get("params"), and_cancel=immediate)
    if cancel and not immediate:
        if not note_event(params["waitFor"]).wait(WAIT):
            answer(request_id, error={"code": -32603, "message": "client never sent " + params["waitFor"]})
            return
        send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": client_id}})
    if not done.wait(WAIT):
        answer(request_id, error={"code": -32603, "message": "client never answered"})
        return
    answer(request_id, {"response": box[0]})


def handle_request(request_id: Any, method: str, params: Any) -> None:
    global _initialized
    p = params if isinstance(params, dict) else {}
    if os.environ.get("FAKE_REQUIRE_INIT") and not _initialized and method != "initialize":
        answer(request_id, error={"code": -32002, "message": "not initialized", "data": {"kind": "notInitialized"}})
        return
    if method == "initialize":
        _initialized = True
        answer(request_id, {
            "protocolVersion": 1,
            "serverInfo": {"name": "fake-agentrpc", "version": "0.0"},
            "capabilities": {"providers": ["scripted"], "transcriptMutation": True, "profiles": True},
            "receivedParams": params,
        })
    elif method == "shutdown":
        answer(request_id, None)
    elif method == "session/create":
        with _state_lock:
            _sessions.append(f"s-{len(_sessions) + 1}")
            session_id = _sessions[-1]
        answer(request_id, {"sessionId": session_id, "revision": 3, "activeProfile": "default", "config": params})
    elif method == "session/resume":
        answer(request_id, {"sessionId": p.get("sessionId"), "revision": 3, "activeProfile": "default"})
    elif method == "session/cancel":
        answer(request_id, {"wasRunning": True})
    elif method.startswith("session/"):
        answer(request_id, {"method": method, "params": params})
    elif method == "test/echo":
        answer(request_id, params)
    elif method == "test/error":
        answer(request_id, error=p)
    elif method == "test/notify":
        notes = p.get("notifications", [])
        for note in notes:
            send({"jsonrpc": "2.0", "method": note["method"], "params": note.get("params")})
        answer(request_id, {"sent": len(notes)})
    elif method == "test/raw":
        for line in p.get("lines", []):
            write_line(line)
        answer(request_id, {"written": len(p.get("lines", []))})
    elif method in ("test/serverRequest", "test/serverRequestCancel"):
        threading.Thread(
            target=server_request, args=(request_id, p, method == "test/serverRequestCancel"), daemon=True
        ).start()
    elif method == "test/hang":
        with _state_lock:
            _hanging[request_id] = threading.Event()
    elif method == "test/received":
        wanted = p.get("method")
        with _state_lock:
            messages = [m for m in _received if wanted is None or (isinstance(m, dict) and m.get("method") == wanted)]
        answer(request_id, messages)
    elif method == "test/stderr":
        total = int(p.get("bytes", 0))
        line = (p.get("line") or "stderr noise from the fake server").encode() + b"\n"
        written = 0
        while written < total:
            sys.stderr.buffer.write(line)
            written += len(line)
        sys.stderr.buffer.write(b"last stderr line\n")
        sys.stderr.buffer.flush()
        answer(request_id, {"written": written})
    elif method == "test/die":
        sys.stderr.write(p.get("stderr", ""))
        sys.stderr.flush()
        os._exit(int(p.get("code", 3)))
    elif method == "test/stopReading":
        answer(request_id, {})
        threading.Event().wait(WAIT)  # blocks the reader: stdin fills up
    elif method == "test/closeStdout":
        answer(request_id, {})
        with _out_lock:
            sys.stdout.flush()
            os.close(sys.stdout.fileno())
    else:
        answer(request_id, error={
            "code": -32601, "message": f"unknown method {method!r}",
            "data": {"kind": "methodNotFound", "method": method},
        })


def handle(message: Any) -> None:
    with _state_lock:
        _received.append(message)
    if not isinstance(message, dict):
        return
    method = message.get("method")
    if method is None:
        slot = _client_responses.get(message.get("id"))  # type: ignore[arg-type]  # an answer from the client
        if slot is not None:
            slot[1].append(message)
            slot[0].set()
        return
    if "id" in message:
        handle_request(message["id"], method, message.get("params"))
        return
    # Notifications.
    note_event(method).set()
    if method == "$/cancelRequest":
        target = (message.get("params") or {}).get("id")
        with _state_lock:
            hanging = _hanging.pop(target, None)
        if hanging is not None:
            answer(target, error={"code": -32800, "message": "cancelled", "data": {"kind": "cancelled"}})
    elif method == "exit" and not os.environ.get("FAKE_IGNORE_EXIT"):
        with _state_lock:
            order = [str(m.get("method")) for m in _received if isinstance(m, dict) and m.get("method") in ("shutdown", "exit")]
        sys.stderr.write(f"fake: exiting after {','.join(order)}\n")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(0)


def main() -> None:
    if os.environ.get("FAKE_IGNORE_SIGTERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    startup = int(os.environ.get("FAKE_STARTUP_STDERR", "0"))
    if startup:
        line = b"x" * 99 + b"\n"
        for _ in range(startup // 100 + 1):
            sys.stderr.buffer.write(line)
        sys.stderr.buffer.write(b"startup noise done\n")
        sys.stderr.buffer.flush()
    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        try:
            message = json.loads(raw)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error",
                                                         "data": {"kind": "parseError"}}})
            continue
        for item in message if isinstance(message, list) else [message]:
            handle(item)
    if os.environ.get("FAKE_IGNORE_EXIT"):
        threading.Event().wait()  # linger until killed
    os._exit(0)


if __name__ == "__main__":
    main()
