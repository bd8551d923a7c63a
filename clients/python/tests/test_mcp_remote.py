"""Remote MCP servers that come back, through the real binary: a streamable
HTTP server (the SDK server of ``mcp_sdk_server.py``) restarted again and
again over a long session, whose MCP session id the new process does not
know (HTTP 404), and that is down for a while. Every call either runs once or
says it did not. Time is faked: ``AGENTRPC_TEST_MCP_CLOCK_FILE`` holds the
seconds agentrpc's MCP clock is ahead. docs/protocol.md, "MCP tool servers",
is the oracle.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import REAL_TIMEOUT, call, requires_real, spawn_real, until_listening
from test_mcp_servers import MCP2_PYTHON, SDK_SERVER, SDKS, _free_port, _stop, get_state, http_server, wait_status

pytestmark = [*requires_real, pytest.mark.skipif(MCP2_PYTHON is None, reason="mcp 2.x is not installed")]


async def start_server(port: int, count_file: Path, python: str | None = MCP2_PYTHON) -> subprocess.Popen[bytes]:
    """The SDK server on streamable HTTP, once it accepts connections (bounded)."""
    assert python is not None
    process = subprocess.Popen(
        [python, SDK_SERVER, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "MCP_TEST_COUNT_FILE": str(count_file)})
    await until_listening(port)
    return process


async def one_turn(session: Any, events: Any) -> dict[str, Any]:
    """Runs a turn (its script makes one call) and returns its events by type."""
    task = asyncio.create_task(session.send("go"))
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(REAL_TIMEOUT * 2):
        async for note in events:
            event = dict(note.params["event"])
            seen.append(event)
            if event["type"] == "turnEnded":
                break
    await task
    [finished] = [e for e in seen if e["type"] == "toolCallFinished"]
    return {"finished": finished, "statuses": [e for e in seen if e["type"] == "mcpServerStatus"]}


def counted(count_file: Path) -> list[str]:
    return count_file.read_text().split() if count_file.exists() else []


def _end(server: subprocess.Popen[bytes], sdk: str) -> None:
    """Stops the server process. mcp 2.x's uvicorn, on SIGTERM, waits for its
    open streams to end, and agentrpc holds a ``subscriptions/listen`` stream
    open as long as it is connected: that server is killed."""
    if sdk == "MCPServer":
        server.kill()
        server.wait(timeout=REAL_TIMEOUT)
    else:
        _stop(server)


@pytest.mark.parametrize(("python", "sdk"), SDKS)
async def test_a_server_restarted_five_times_over_ten_minutes_and_down_for_a_while(tmp_path: Path, python: str, sdk: str) -> None:
    """Five restarts of the server process, two minutes apart on agentrpc's
    clock: with mcp 1.x (handshake era) each new process answers our old MCP
    session id with 404, agentrpc starts a new session and sends the call
    again; with mcp 2.x (2026-07-28, no MCP session) the new process just
    answers. Either way the call runs exactly once (never a restart, never a
    failed call). Then the server is down: the
    call says it did not run, the restarts that cannot connect fail the server
    (at most three in a minute), ``session/getState`` shows when it is tried
    again, a call to its tool says it is unavailable, and the first turn after
    that time with the server back brings it back."""
    port = _free_port()
    count_file = tmp_path / "counts"
    clock_file = tmp_path / "clock"
    clock_file.write_text("0")
    labels = [f"t{i}" for i in range(1, 10)]
    script: list[dict[str, Any]] = []
    for label in labels:
        script += [{"toolCalls": [call("mcp__web__count", label=label)]}, {"text": [f"did {label}"]}]
    server = await start_server(port, count_file, python)
    try:
        async with spawn_real(tmp_path, env={"AGENTRPC_TEST_MCP_CLOCK_FILE": str(clock_file)}) as client:
            events = client.notifications("session/event")
            session = await client.open_session({"model": {"provider": "scripted", "script": script}, "mcpServers": [http_server(port)]})
            await wait_status(events, "web", "ready")
            minutes = 0.0
            for n, label in enumerate(labels[:6]):
                turn = await one_turn(session, events)
                assert turn["finished"]["outcome"] == "ok", turn
                assert f"counted {label}" in str(turn["finished"]["content"])
                # Never restarting: at most the listing of the new session.
                assert all(s["status"] == "ready" for s in turn["statuses"]), turn["statuses"]
                assert counted(count_file) == labels[: n + 1]
                if n < 5:
                    # A new process on the same port knows nothing of our MCP session.
                    _end(server, sdk)
                    server = await start_server(port, count_file, python)
                    minutes += 2
                    clock_file.write_text(str(minutes * 60))
            state = (await get_state(client, session))["mcpServers"][0]
            assert state["status"] == "ready" and state["restarts"] == 0
            renewals = sum("a new MCP session was started" in p for p in state.get("problems", []))
            assert renewals == (5 if sdk == "FastMCP" else 0), state
            assert state["protocolVersion"] == ("2025-11-25" if sdk == "FastMCP" else "2026-07-28")

            # Down: the call never reaches it, and says so.
            _end(server, sdk)
            turn = await one_turn(session, events)
            assert turn["finished"]["outcome"] == "failed"
            assert "did not reach the MCP server 'web'" in turn["finished"]["content"]
            assert "the tool did not run" in turn["finished"]["content"]
            assert counted(count_file) == labels[:6]
            statuses = [s["status"] for s in turn["statuses"]]
            assert statuses.count("restarting") == 3 and statuses[-1] == "failed", statuses
            failed = turn["statuses"][-1]
            assert "restarted 3 times within 60 s" in failed["reason"]
            state = (await get_state(client, session))["mcpServers"][0]
            assert state["status"] == "failed" and state["restarts"] == 3 and state["nextTryAt"]

            # Before the next try: not tried again, and the call says the server is unavailable.
            turn = await one_turn(session, events)
            assert turn["finished"]["outcome"] == "failed"
            assert "the MCP server 'web' is unavailable: " in turn["finished"]["content"], turn
            assert turn["statuses"] == []

            # Back, and the next try is due: the turn's first round trip starts it again.
            server = await start_server(port, count_file, python)
            minutes += 1
            clock_file.write_text(str(minutes * 60))
            turn = await one_turn(session, events)
            assert [s["status"] for s in turn["statuses"]] == ["starting", "ready"]
            assert turn["finished"]["outcome"] == "ok" and "counted t9" in str(turn["finished"]["content"])
            assert counted(count_file) == labels[:6] + ["t9"]
            state = (await get_state(client, session))["mcpServers"][0]
            assert state["status"] == "ready" and "nextTryAt" not in state
    finally:
        _stop(server)


async def test_the_restart_budget_is_a_rate_not_a_lifetime_count(tmp_path: Path) -> None:
    """A stdio server that crashes mid-call five times, two minutes apart on
    agentrpc's clock, is restarted each time (never more than three restarts
    in a minute, so never ``failed``); each crashed call says it may or may
    not have run, and the session's tools keep working."""
    assert MCP2_PYTHON is not None
    clock_file = tmp_path / "clock"
    clock_file.write_text("0")
    script: list[dict[str, Any]] = []
    for _ in range(5):
        script += [{"toolCalls": [call("mcp__kit__crash")]}, {"text": ["crashed"]}]
    script += [{"toolCalls": [call("mcp__kit__echo", text="still")]}, {"text": ["fine"]}]
    kit = {"name": "kit", "command": MCP2_PYTHON, "args": [SDK_SERVER]}
    async with spawn_real(tmp_path, env={"AGENTRPC_TEST_MCP_CLOCK_FILE": str(clock_file)}) as client:
        events = client.notifications("session/event")
        session = await client.open_session({"model": {"provider": "scripted", "script": script}, "mcpServers": [kit]})
        await wait_status(events, "kit", "ready")
        for n in range(1, 6):
            turn = await one_turn(session, events)
            assert turn["finished"]["outcome"] == "failed"
            assert "went away during the call" in turn["finished"]["content"]
            assert "the tool may or may not have run" in turn["finished"]["content"]
            # The turn's second round trip waited for the restart.
            assert [s["status"] for s in turn["statuses"]] == ["restarting", "ready"], turn["statuses"]
            state = (await get_state(client, session))["mcpServers"][0]
            assert state["status"] == "ready" and state["restarts"] == n
            clock_file.write_text(str(n * 120))
        turn = await one_turn(session, events)
        assert turn["finished"]["outcome"] == "ok" and "echo: still" in str(turn["finished"]["content"])
