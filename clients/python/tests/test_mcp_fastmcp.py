"""A ``fastmcp`` 4.x server from PyPI (``mcp_fastmcp_server.py``) through the
real binary: progress (and a client tool's own ``tool/progress``) as
``toolProgress`` events. docs/protocol.md, "Tool progress" and "MCP tool
servers", is the oracle.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentrpc import AgentRPCError, Elicitation, ToolContext, tool
from conftest import REAL_TIMEOUT, call, requires_real, spawn_real, until_listening
from test_mcp_hints_and_configs import TIME_SERVER
from test_mcp_servers import _python_with, wait_status

HERE = Path(__file__).parent
FASTMCP_SERVER = str(HERE / "mcp_fastmcp_server.py")
FASTMCP_PYTHON = _python_with("fastmcp", None)

pytestmark = [*requires_real, pytest.mark.skipif(FASTMCP_PYTHON is None, reason="fastmcp is not installed")]


def fm(**extra: Any) -> dict[str, Any]:
    assert FASTMCP_PYTHON is not None
    return {"name": "fm", "command": FASTMCP_PYTHON, "args": [FASTMCP_SERVER], **extra}


async def turn_events(session: Any, events: Any, text: str = "go") -> list[dict[str, Any]]:
    task = asyncio.create_task(session.send(text))
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(REAL_TIMEOUT):
        async for note in events:
            seen.append(dict(note.params["event"]))
            if seen[-1]["type"] == "turnEnded":
                break
    await task
    return seen


def check_progress_stream(seen: list[dict[str, Any]], call_id: str, elapsed: float) -> list[dict[str, Any]]:
    """The call's ``toolProgress`` events: between its start and finish, rising,
    at most ~10 a second; returns them."""
    started = next(i for i, e in enumerate(seen) if e["type"] == "toolCallStarted" and e["callId"] == call_id)
    finished = next(i for i, e in enumerate(seen) if e["type"] == "toolCallFinished" and e["callId"] == call_id)
    progress = [(i, e) for i, e in enumerate(seen) if e["type"] == "toolProgress"]
    assert progress, seen
    assert all(started < i < finished and e["callId"] == call_id for i, e in progress), seen
    values = [e["progress"] for _, e in progress]
    assert values == sorted(values)
    # ~10 a second: one at once, then one per 0.1 s of the call at most.
    assert len(progress) <= 2 + elapsed * 10, (len(progress), elapsed)
    return [e for _, e in progress]


async def test_a_servers_progress_becomes_tool_progress_events_paced(tmp_path: Path) -> None:
    """Every ``tools/call`` carries a ``progressToken``: fastmcp's
    ``ctx.report_progress`` reaches the client as ``toolProgress {callId,
    progress, total, message}``, 200 reports coalesced to at most ~10 a second,
    none after ``toolCallFinished``."""
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session({
            "model": {"provider": "scripted", "script": [{"toolCalls": [call("mcp__fm__steps", count=200)]}, {"text": ["done"]}]},
            "mcpServers": [fm()]})
        await wait_status(events, "fm", "ready")
        began = time.monotonic()
        seen = await turn_events(session, events)
        elapsed = time.monotonic() - began
    [started] = [e for e in seen if e["type"] == "toolCallStarted"]
    progress = check_progress_stream(seen, started["callId"], elapsed)
    first = progress[0]
    assert first["total"] == 200 and first["message"] == f"step {int(first['progress'])} of 200"
    [finished] = [e for e in seen if e["type"] == "toolCallFinished"]
    assert finished["outcome"] == "ok" and "200 steps" in str(finished["content"])


async def test_a_client_tool_reports_progress_with_tool_progress(tmp_path: Path) -> None:
    """A Python tool handler reports with ``context.report_progress`` (the
    ``tool/progress`` notification); the server sends it on as ``toolProgress``
    of that call. A report naming a call that is not running is ignored."""

    shown: list[Any] = []

    @tool
    async def resize(count: int, context: ToolContext) -> str:
        """Resizes images, reporting each."""
        for i in range(1, count + 1):
            await context.report_progress(i, count, f"image {i}")
        # Withdrawn, finished or made up: nothing comes of it.
        await context.session.client.notify("tool/progress", {"sessionId": context.session_id, "callId": "nope", "progress": 1})
        # A report still held when the call ends is dropped: the call ends once one was shown.
        async with asyncio.timeout(REAL_TIMEOUT):
            async for note in shown[0]:
                if note.params["event"]["type"] == "toolProgress":
                    break
        return "resized"

    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        shown.append(client.notifications("session/event"))
        session = await client.open_session(
            {"model": {"provider": "scripted", "script": [{"toolCalls": [call("resize", count=50)]}, {"text": ["done"]}]}},
            tools=[resize])
        began = time.monotonic()
        seen = await turn_events(session, events)
        elapsed = time.monotonic() - began
    [started] = [e for e in seen if e["type"] == "toolCallStarted"]
    progress = check_progress_stream(seen, started["callId"], elapsed)
    assert all(e["total"] == 50 and e["message"] == f"image {int(e['progress'])}" for e in progress)


async def test_a_server_with_resources_gets_a_read_resource_tool_that_follows_its_links(tmp_path: Path) -> None:
    """A server that declares ``resources`` offers ``mcp__<server>__read_resource
    {uri}`` (read-only: it never asks): the model follows the link one of its
    tools returned and reads the text; a resource over the output bound is cut
    like any output; an unknown URI is the server's refusal, a ``failed``
    outcome the turn goes on with. A server without ``resources``
    (``mcp-server-time``) gets no such tool."""
    reads = [call("mcp__fm__read_resource", uri=uri) for uri in ("note://readme", "note://big", "note://nope")]
    script = [{"toolCalls": [call("mcp__fm__link")]}, {"toolCalls": reads}, {"text": ["read"]}]
    servers = [fm()] + ([{"name": "time", "command": TIME_SERVER}] if TIME_SERVER else [])
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session({"model": {"provider": "scripted", "script": script}, "mcpServers": servers})
        ready = await wait_status(events, "fm", "ready")
        assert "mcp__fm__read_resource" in ready["tools"]
        seen = await turn_events(session, events)
        state = await client.request("session/getState", {"sessionId": session.id})
    assert not [e for e in seen if e["type"] == "confirmationRequested"]
    # The three reads run in parallel (read-only): their toolCallFinished come as they finish, so in
    # call order by id (call_<roundTrip>_<n>).
    finished = sorted((e for e in seen if e["type"] == "toolCallFinished"), key=lambda e: e["callId"])
    assert [f["callId"] for f in finished] == ["call_1_1", "call_2_1", "call_2_2", "call_2_3"], finished
    assert [f["outcome"] for f in finished] == ["ok", "ok", "ok", "failed"], finished
    assert "note://readme" in str(finished[0]["content"])
    assert finished[1]["content"] == "Read me: agentrpc reads resources."
    assert finished[2]["content"].endswith(f"[output cut: {1024 * 1024} of {2 * 1024 * 1024} bytes shown]")
    assert "refused the call" in finished[3]["content"] and "note://nope" in finished[3]["content"], finished[3]
    [turn_end] = [e for e in seen if e["type"] == "turnEnded"]
    assert turn_end["status"] == "completed"
    if TIME_SERVER:
        time = next(s for s in state["mcpServers"] if s["name"] == "time")
        assert time["status"] == "ready" and time["tools"] and "mcp__time__read_resource" not in time["tools"]


async def test_a_servers_prompts_are_listed_and_fetched_with_their_arguments(tmp_path: Path) -> None:
    """``session/getState`` lists a server's prompts with their arguments;
    ``session/getPrompt`` fetches one with its arguments filled in, as
    messages; a missing required argument is the server's refusal
    (``toolExecutorError``); an unknown prompt or server is ``invalidParams``."""
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session({"model": {"provider": "scripted", "script": []}, "mcpServers": [fm()]})
        await wait_status(events, "fm", "ready")
        state = await client.request("session/getState", {"sessionId": session.id})
        [review] = [p for p in state["mcpServers"][0]["prompts"] if p["name"] == "review"]
        assert review["description"] == "Asks for a review of a file."
        assert {a["name"]: a.get("required") for a in review["arguments"]} == {"path": True, "focus": False}
        got = await session.prompt("fm", "review", {"path": "a.py"})
        assert got["messages"] == [{"role": "user", "content": {"type": "text", "text": "Please review a.py, looking for bugs."}}]
        got = await client.request(
            "session/getPrompt", {"sessionId": session.id, "server": "fm", "name": "review", "arguments": {"path": "b.py", "focus": "style"}})
        assert got["messages"][0]["content"]["text"] == "Please review b.py, looking for style."
        with pytest.raises(AgentRPCError) as missing:
            await client.request("session/getPrompt", {"sessionId": session.id, "server": "fm", "name": "review"})
        assert (missing.value.data or {}).get("kind") == "toolExecutorError" and "review" in str(missing.value), missing.value
        for params, field in (({"server": "fm", "name": "nope"}, "name"), ({"server": "zz", "name": "review"}, "server")):
            with pytest.raises(AgentRPCError) as bad:
                await client.request("session/getPrompt", {"sessionId": session.id, **params})
            data = bad.value.data or {}
            assert data.get("kind") == "invalidParams" and data.get("field") == field, bad.value
        # A prompt the server takes its time over holds no other request, and is withdrawn with $/cancelRequest.
        slow = asyncio.create_task(client.request("session/getPrompt", {"sessionId": session.id, "server": "fm", "name": "slow"}))
        async with asyncio.timeout(10):
            while "session/getPrompt" not in client._peer.pending_methods.values():
                await asyncio.sleep(0)
        state = await client.request("session/getState", {"sessionId": session.id}, timeout=10)
        assert state["mcpServers"][0]["status"] == "ready" and not slow.done()
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        got = await client.request("session/getPrompt", {"sessionId": session.id, "server": "fm", "name": "review", "arguments": {"path": "c.py"}}, timeout=10)
        assert got["messages"][0]["content"]["text"] == "Please review c.py, looking for bugs."


# -- elicitation ---------------------------------------------------------------------


def fm_in(era: str) -> dict[str, Any]:
    """The fastmcp server as agentrpc finds it: 2026-07-28 (it answers the
    probe), or behind ``mcp_handshake_only.py`` as a server of the handshake era."""
    if era == "modern":
        return fm()
    assert FASTMCP_PYTHON is not None
    return {"name": "fm", "command": sys.executable, "args": [str(HERE / "mcp_handshake_only.py"), FASTMCP_PYTHON, FASTMCP_SERVER]}


ERAS = ["modern", "handshake"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_servers_form_reaches_on_elicitation_and_the_answer_the_server(tmp_path: Path, era: str) -> None:
    """fastmcp's ``book`` asks for a date: ``ctx.elicit`` (a server request,
    handshake era) or an ``InputRequiredResult`` (2026-07-28). Either way the
    client's ``on_elicitation`` gets ``user/elicit`` with the server, message,
    form and call, and what it returns goes back: accepted values, or a decline."""
    asked: list[Elicitation] = []

    def answer(elicitation: Elicitation) -> Any:
        asked.append(elicitation)
        return {"date": "2026-12-24"} if len(asked) == 1 else "decline"

    async with spawn_real(tmp_path, on_elicitation=answer) as client:
        events = client.notifications("session/event")
        session = await client.open_session({
            "model": {"provider": "scripted", "script": [
                {"toolCalls": [call("mcp__fm__book")]}, {"toolCalls": [call("mcp__fm__book")]}, {"text": ["done"]}]},
            "mcpServers": [fm_in(era)]})
        await wait_status(events, "fm", "ready")
        state = await client.request("session/getState", {"sessionId": session.id})
        assert state["mcpServers"][0]["protocolVersion"] == ("2026-07-28" if era == "modern" else "2025-11-25")
        seen = await turn_events(session, events)
    finished = [e for e in seen if e["type"] == "toolCallFinished"]
    assert [f["content"] for f in finished] == ["booked 2026-12-24", "not booked (decline)"], finished
    first = asked[0]
    assert first.server == "fm" and first.message == "Which date?" and first.session_id == session.id
    assert first.call_id == finished[0]["callId"] and first.turn_id
    assert first.requested_schema["properties"]["date"]["type"] == "string"


@pytest.mark.parametrize("era", ERAS)
async def test_without_on_elicitation_a_servers_form_is_refused(tmp_path: Path, era: str) -> None:
    """A client that declared no ``elicitation``: agentrpc declares none to its
    servers; fastmcp's ``ctx.elicit`` is refused (``-32601``), and an
    ``InputRequiredResult`` asking for it ends the call with a note saying so."""
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session({
            "model": {"provider": "scripted", "script": [{"toolCalls": [call("mcp__fm__book")]}, {"text": ["done"]}]},
            "mcpServers": [fm_in(era)]})
        await wait_status(events, "fm", "ready")
        seen = await turn_events(session, events)
    [finished] = [e for e in seen if e["type"] == "toolCallFinished"]
    assert finished["outcome"] == "failed", finished
    if era == "modern":
        assert "did not declare it can give (elicitation/create)" in str(finished["content"])


@pytest.mark.parametrize("era", ERAS)
async def test_a_form_waiting_for_the_user_is_withdrawn_with_the_turn(tmp_path: Path, era: str) -> None:
    """``session/cancel`` while ``on_elicitation`` waits: the turn ends
    cancelled at once and the client's handler is cancelled (``user/elicit``
    goes the way ``user/ask`` does)."""
    waiting = asyncio.Event()
    withdrawn = asyncio.Event()

    async def never(elicitation: Elicitation) -> Any:
        waiting.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            withdrawn.set()
            raise

    async with spawn_real(tmp_path, on_elicitation=never) as client:
        events = client.notifications("session/event")
        session = await client.open_session({
            "model": {"provider": "scripted", "script": [{"toolCalls": [call("mcp__fm__book")]}, {"text": ["done"]}]},
            "mcpServers": [fm_in(era)]})
        await wait_status(events, "fm", "ready")
        turn = asyncio.create_task(session.send("go"))
        async with asyncio.timeout(REAL_TIMEOUT):
            await waiting.wait()
        assert await session.cancel() is True
        async with asyncio.timeout(REAL_TIMEOUT):
            async for note in events:
                if note.params["event"]["type"] == "turnEnded":
                    assert note.params["event"]["status"] == "cancelled"
                    break
            await withdrawn.wait()
        with pytest.raises(AgentRPCError):
            await turn


@pytest.mark.time_bound(120)  # fastmcp takes seconds to start on a loaded machine
async def test_the_fastmcp_server_over_streamable_http(tmp_path: Path) -> None:
    """The same fastmcp server over streamable HTTP (2026-07-28, no MCP
    session): progress on the call's stream becomes ``toolProgress``, its image
    reaches the client (``toolCallFinished.media``), the model follows a
    ``resource_link`` with ``read_resource``, a form goes to ``on_elicitation``
    (an ``InputRequiredResult``, the call sent again with the answer), and a
    prompt is fetched with its arguments."""
    import subprocess

    from test_mcp_servers import _free_port, _stop, http_server

    assert FASTMCP_PYTHON is not None
    port = _free_port()
    server = subprocess.Popen([FASTMCP_PYTHON, FASTMCP_SERVER, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    asked: list[Elicitation] = []

    def answer(elicitation: Elicitation) -> Any:
        asked.append(elicitation)
        return {"date": "2026-12-24"}

    script = [{"toolCalls": [call("mcp__fm__steps", count=20), call("mcp__fm__screenshot"), call("mcp__fm__link"), call("mcp__fm__book")]},
              {"toolCalls": [call("mcp__fm__read_resource", uri="note://readme")]}, {"text": ["done"]}]
    try:
        # fastmcp's imports and uvicorn take a while on a loaded machine: bounded, longer than a plain SDK server.
        await until_listening(port, 60)
        async with spawn_real(tmp_path, on_elicitation=answer) as client:
            events = client.notifications("session/event")
            session = await client.open_session({"model": {"provider": "scripted", "script": script}, "mcpServers": [http_server(port, "fm")]})
            await wait_status(events, "fm", "ready")
            state = await client.request("session/getState", {"sessionId": session.id})
            [fm_state] = state["mcpServers"]
            assert fm_state["transport"] == "http" and fm_state["protocolVersion"] == "2026-07-28"
            assert "review" in [p["name"] for p in fm_state["prompts"]]
            seen = await turn_events(session, events)
            got = await session.prompt("fm", "review", {"path": "a.py"})
    finally:
        _stop(server)
    finished = {e["name"]: e for e in seen if e["type"] == "toolCallFinished"}
    assert all(e["outcome"] == "ok" for e in finished.values()), finished
    steps = finished["mcp__fm__steps"]
    assert [e for e in seen if e["type"] == "toolProgress" and e["callId"] == steps["callId"]], "no progress over HTTP"
    assert [m["mimeType"] for m in finished["mcp__fm__screenshot"]["media"]] == ["image/png"], finished["mcp__fm__screenshot"]
    assert finished["mcp__fm__book"]["content"] == "booked 2026-12-24" and [a.message for a in asked] == ["Which date?"]
    assert finished["mcp__fm__read_resource"]["content"] == "Read me: agentrpc reads resources."
    assert got["messages"] == [{"role": "user", "content": {"type": "text", "text": "Please review a.py, looking for bugs."}}]
