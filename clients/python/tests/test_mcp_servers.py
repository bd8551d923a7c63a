"""MCP tool servers end to end: the real agentrpc binary as an MCP client of a
real server built with the ``mcp`` package from PyPI (``mcp_sdk_server.py``:
``MCPServer`` of mcp 2.x in the test environment, ``FastMCP`` of mcp 1.x from
the second environment ``scripts/test`` makes), and of the hostile fake in
``mcp_hostile_server.py``. docs/protocol.md, "MCP tool servers", is the oracle.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REAL_TIMEOUT, call, requires_real, spawn_real

pytestmark = requires_real

HERE = Path(__file__).parent
SDK_SERVER = str(HERE / "mcp_sdk_server.py")


def _python_with(module: str, explicit: str | None) -> str | None:
    """An interpreter that can import ``module``: ``explicit`` if given, else this one."""
    candidates = [explicit] if explicit else [sys.executable]
    for python in candidates:
        if python and subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0:
            return python
    return None


#: mcp 2.x (the test environment's own) and mcp 1.x (``$AGENTRPC_MCP1_PYTHON``).
MCP2_PYTHON = _python_with("mcp.server.mcpserver", None)
MCP1_PYTHON = _python_with("mcp.server.fastmcp", os.environ.get("AGENTRPC_MCP1_PYTHON"))

SDKS = [
    pytest.param(MCP2_PYTHON, "MCPServer", id="mcp2", marks=pytest.mark.skipif(MCP2_PYTHON is None, reason="mcp 2.x is not installed")),
    pytest.param(MCP1_PYTHON, "FastMCP", id="mcp1", marks=pytest.mark.skipif(MCP1_PYTHON is None, reason="no mcp 1.x environment (AGENTRPC_MCP1_PYTHON)")),
]


def stdio_server(python: str, name: str = "kit", **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": python, "args": [SDK_SERVER], **extra}


def scripted(*items: dict[str, Any], servers: list[Any], **extra: Any) -> dict[str, Any]:
    return {"model": {"provider": "scripted", "script": list(items)}, "mcpServers": servers, **extra}


async def wait_status(events: Any, server: str, status: str) -> dict[str, Any]:
    """The first ``mcpServerStatus`` of ``server`` with ``status`` (bounded)."""
    async with asyncio.timeout(REAL_TIMEOUT):
        async for note in events:
            event = note.params["event"]
            if event["type"] == "mcpServerStatus" and event["server"] == server and event["status"] == status:
                return dict(event)
    raise AssertionError(f"no {status} status for {server}")


async def finished_calls(events: Any) -> list[dict[str, Any]]:
    """The ``toolCallFinished`` events up to the turn's end."""
    out: list[dict[str, Any]] = []
    async with asyncio.timeout(REAL_TIMEOUT):
        async for note in events:
            event = note.params["event"]
            if event["type"] == "toolCallFinished":
                out.append(dict(event))
            if event["type"] == "turnEnded":
                return out
    raise AssertionError("no turnEnded")


async def get_state(client: Any, session: Any) -> dict[str, Any]:
    state: dict[str, Any] = await client.request("session/getState", {"sessionId": session.id})
    return state


@pytest.mark.parametrize(("python", "sdk"), SDKS)
async def test_list_call_structured_output_and_is_error(tmp_path: Path, python: str, sdk: str) -> None:
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__kit__echo", text="hi"), call("mcp__kit__add", a=2, b=3),
                           call("mcp__kit__fail", why="broken"), call("mcp__kit__sdk")]},
            {"text": ["done"]},
            servers=[stdio_server(python)]))
        ready = await wait_status(events, "kit", "ready")
        assert {"mcp__kit__echo", "mcp__kit__add", "mcp__kit__fail", "mcp__kit__slow"} <= set(ready["tools"])
        state = await get_state(client, session)
        [kit] = state["mcpServers"]
        assert kit["status"] == "ready" and kit["transport"] == "stdio" and kit["protocolVersion"] in {"2025-11-25", "2025-06-18"}
        assert "mcp__kit__wipe" in kit["tools"]
        result = await session.send("go")
        assert result.message.text == "done"
        calls = await finished_calls(events)
        by_name = {c["name"]: c for c in calls}
        assert by_name["mcp__kit__echo"]["outcome"] == "ok"
        assert by_name["mcp__kit__echo"]["source"] == {"mcp": "kit"}
        assert "echo: hi" in str(by_name["mcp__kit__echo"]["content"])
        assert by_name["mcp__kit__add"]["content"] == {"total": 5}
        assert by_name["mcp__kit__fail"]["outcome"] == "failed"
        assert "broken" in str(by_name["mcp__kit__fail"]["content"]) or "fail" in str(by_name["mcp__kit__fail"]["content"])
        assert sdk in str(by_name["mcp__kit__sdk"]["content"])


async def test_destructive_hint_asks_for_confirmation(tmp_path: Path) -> None:
    if MCP2_PYTHON is None:
        pytest.skip("mcp 2.x is not installed")
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        # The typed keyword, as a user writes it.
        session = await client.open_session(
            {"model": {"provider": "scripted", "script": [{"toolCalls": [call("mcp__kit__wipe")]}, {"text": ["ok"]}]}},
            mcp_servers=[{"name": "kit", "command": MCP2_PYTHON, "args": [SDK_SERVER]}])
        await wait_status(events, "kit", "ready")
        turn = asyncio.create_task(session.send("wipe it"))
        async with asyncio.timeout(REAL_TIMEOUT):
            async for note in events:
                event = note.params["event"]
                if event["type"] == "confirmationRequested":
                    assert event["name"] == "mcp__kit__wipe"
                    await session.deny(event["callId"], "not today")
                    break
        await turn
        calls = await finished_calls(events)
        assert calls[0]["outcome"] == "denied"


async def test_list_changed_is_seen_by_the_next_round_trip(tmp_path: Path) -> None:
    if MCP2_PYTHON is None:
        pytest.skip("mcp 2.x is not installed")
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__kit__grow")]},
            {"toolCalls": [call("mcp__kit__extra")]},
            {"text": ["ok"]},
            servers=[stdio_server(MCP2_PYTHON)]))
        ready = await wait_status(events, "kit", "ready")
        assert "mcp__kit__extra" not in ready["tools"]
        await session.send("grow")
        calls = await finished_calls(events)
        assert [c["outcome"] for c in calls] == ["ok", "ok"], calls
        assert calls[1]["content"] == "extra ran" or "extra ran" in str(calls[1]["content"])
        assert "mcp__kit__extra" in (await get_state(client, session))["mcpServers"][0]["tools"]


async def test_cancel_during_a_slow_tool_ends_the_turn_at_once(tmp_path: Path) -> None:
    if MCP2_PYTHON is None:
        pytest.skip("mcp 2.x is not installed")
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__kit__slow", seconds=60)]}, {"toolCalls": [call("mcp__kit__echo", text="again")]}, {"text": ["ok"]},
            servers=[stdio_server(MCP2_PYTHON)]))
        await wait_status(events, "kit", "ready")
        turn = asyncio.create_task(session.send("slow"))
        async with asyncio.timeout(REAL_TIMEOUT):
            async for note in events:
                if note.params["event"]["type"] == "toolCallStarted":
                    break
        assert (await session.cancel()) is True
        async with asyncio.timeout(10):
            async for note in events:
                event = note.params["event"]
                if event["type"] == "turnEnded":
                    assert event["status"] == "cancelled"
                    break
        with pytest.raises(Exception):
            await turn
        # The server is still usable: the next turn's call goes through.
        await session.send("again")
        calls = await finished_calls(events)
        assert calls[-1]["name"] == "mcp__kit__echo" and calls[-1]["outcome"] == "ok"


async def test_a_crash_mid_call_is_a_tool_error_and_the_server_restarts(tmp_path: Path) -> None:
    if MCP2_PYTHON is None:
        pytest.skip("mcp 2.x is not installed")
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__kit__crash")]}, {"text": ["it crashed"]},
            {"toolCalls": [call("mcp__kit__echo", text="back")]}, {"text": ["ok"]},
            servers=[stdio_server(MCP2_PYTHON)]))
        await wait_status(events, "kit", "ready")
        result = await session.send("crash")
        assert result.message.text == "it crashed"
        # The round trip after the crash waits (bounded) for the restart, so the
        # model is offered the server's tools again: both events come before turnEnded.
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(REAL_TIMEOUT):
            async for note in events:
                event = note.params["event"]
                seen.append(event)
                if event["type"] == "turnEnded":
                    break
        assert any(e["type"] == "mcpServerStatus" and e["status"] == "ready" for e in seen)
        crashed = next(e for e in seen if e["type"] == "toolCallFinished")
        assert crashed["outcome"] == "failed" and "went away" in crashed["content"]
        restarting = next(e for e in seen if e["type"] == "mcpServerStatus" and e["status"] == "restarting")
        assert "status 3" in restarting.get("reason", "")
        again = await session.send("again")
        calls = await finished_calls(events)
        assert calls and calls[-1]["outcome"] == "ok"
        assert (await get_state(client, session))["mcpServers"][0]["restarts"] == 1


async def test_startup_failure_is_reported_and_the_session_works(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__gone__anything")]}, {"text": ["fine"]},
            servers=[{"name": "gone", "command": str(tmp_path / "no-such-program")},
                     {"name": "quits", "command": sys.executable, "args": ["-c", "import sys; sys.stderr.write('bad config\\n')"]}]))
        failures: dict[str, dict[str, Any]] = {}
        async with asyncio.timeout(REAL_TIMEOUT):
            async for note in events:
                event = note.params["event"]
                if event["type"] == "mcpServerStatus" and event["status"] == "failed":
                    failures[event["server"]] = event
                    if len(failures) == 2:
                        break
        assert "cannot find" in failures["gone"]["reason"]
        assert failures["quits"]["stderr"] == ["bad config"]
        assert "exited with status 0" in failures["quits"]["reason"]
        result = await session.send("go")
        assert result.message.text == "fine"
        state = await get_state(client, session)
        assert {s["name"]: s["status"] for s in state["mcpServers"]} == {"gone": "failed", "quits": "failed"}


async def test_a_clash_with_a_client_tool_is_an_error_at_create(tmp_path: Path) -> None:
    from agentrpc import InvalidConfiguration

    async with spawn_real(tmp_path) as client:
        with pytest.raises(InvalidConfiguration) as raised:
            await client.open_session(scripted(
                servers=[{"name": "kit", "command": "true"}],
                tools=[{"name": "mcp__kit__echo"}]))
        assert "mcp__kit__echo" in str(raised.value) and "kit" in str(raised.value)


async def test_no_orphan_after_kill_9_of_agentrpc(tmp_path: Path) -> None:
    if MCP2_PYTHON is None:
        pytest.skip("mcp 2.x is not installed")
    pid_file = tmp_path / "server.pid"
    async with spawn_real(tmp_path, env={"MCP_TEST_PID_FILE": str(pid_file)}) as client:
        events = client.notifications("session/event")
        await client.open_session(scripted(servers=[stdio_server(MCP2_PYTHON)]))
        await wait_status(events, "kit", "ready")
        server_pid = int(pid_file.read_text())
        os.kill(server_pid, 0)  # alive
        os.kill(client.pid, signal.SIGKILL)
        async with asyncio.timeout(REAL_TIMEOUT):
            while Path(f"/proc/{server_pid}").exists() and "zombie" not in _proc_state(server_pid):
                await asyncio.sleep(0.05)


def _proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return "zombie"


HOSTILE = str(HERE / "mcp_hostile_server.py")


def hostile(mode: str, **extra: Any) -> dict[str, Any]:
    return {"name": mode, "command": sys.executable, "args": [HOSTILE, mode], **extra}


async def status_of(events: Any, servers: set[str], wanted: set[str] = {"ready", "failed"}) -> dict[str, dict[str, Any]]:
    """The first settled status (ready or failed) of each of ``servers``."""
    seen: dict[str, dict[str, Any]] = {}
    async with asyncio.timeout(REAL_TIMEOUT):
        async for note in events:
            event = note.params["event"]
            if event["type"] == "mcpServerStatus" and event["server"] in servers and event["status"] in wanted:
                seen.setdefault(event["server"], dict(event))
                if len(seen) == len(servers):
                    return seen
    raise AssertionError(f"statuses seen: {seen}")


async def test_hostile_servers_are_bounded_and_reported_and_other_sessions_keep_working(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        modes = ["badjson", "badversion", "unknownid", "manytools", "endless", "silent"]
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__badjson__ok"), call("mcp__unknownid__ok")]}, {"text": ["survived"]},
            # Only the server that never answers gets a short startup bound: a loaded
            # machine may take longer than that to start the others.
            servers=[hostile(m, **({"startupTimeoutSeconds": 2} if m == "silent" else {})) for m in modes]))
        bystander = await client.open_session({"model": {"provider": "scripted", "script": [{"text": ["still here"]}]}})
        statuses = await status_of(events, set(modes))
        assert statuses["badversion"]["status"] == "failed"
        assert "1999-01-01" in statuses["badversion"]["reason"] and "2025-11-25" in statuses["badversion"]["reason"]
        assert statuses["silent"]["status"] == "failed" and "initialize" in statuses["silent"]["reason"]
        assert statuses["manytools"]["status"] == "ready" and len(statuses["manytools"]["tools"]) == 512
        assert statuses["endless"]["status"] == "ready" and len(statuses["endless"]["tools"]) == 50
        assert statuses["badjson"]["status"] == "ready" and statuses["unknownid"]["status"] == "ready"
        state = {s["name"]: s for s in (await get_state(client, session))["mcpServers"]}
        assert any("not JSON" in p for p in state["badjson"]["problems"])
        assert any("999" in p for p in state["unknownid"]["problems"])
        assert any("more than 512 tools" in p for p in state["manytools"]["problems"])
        assert any("pages" in p for p in state["endless"]["problems"])
        result = await session.send("go")
        assert result.message.text == "survived"
        assert (await bystander.send("hi")).message.text == "still here"


async def test_a_50_mb_result_is_dropped_with_a_note_and_a_storm_is_coalesced(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__badjson__huge")]}, {"toolCalls": [call("mcp__badjson__storm")]},
            {"toolCalls": [call("mcp__badjson__ok")]}, {"text": ["done"]},
            servers=[hostile("badjson")]))
        await status_of(events, {"badjson"})
        result = await session.send("go")
        assert result.message.text == "done"
        calls = await finished_calls(events)
        assert calls[0]["outcome"] == "failed" and "exceeds the limit" in calls[0]["content"]
        assert calls[1]["outcome"] == "ok" and calls[1]["content"] == "stormed"
        assert calls[2]["outcome"] == "ok"


async def test_no_orphan_after_kill_9_even_when_the_server_ignores_end_of_input(tmp_path: Path) -> None:
    pid_file = tmp_path / "immortal.pid"
    async with spawn_real(tmp_path, env={"MCP_TEST_PID_FILE": str(pid_file)}) as client:
        events = client.notifications("session/event")
        await client.open_session(scripted(servers=[hostile("immortal")]))
        await status_of(events, {"immortal"})
        server_pid = int(pid_file.read_text())
        os.kill(client.pid, signal.SIGKILL)
        async with asyncio.timeout(REAL_TIMEOUT):
            while Path(f"/proc/{server_pid}").exists() and "zombie" not in _proc_state(server_pid):
                await asyncio.sleep(0.05)


async def test_closing_the_session_stops_a_server_that_ignores_sigterm(tmp_path: Path) -> None:
    pid_file = tmp_path / "immortal.pid"
    async with spawn_real(tmp_path, env={"MCP_TEST_PID_FILE": str(pid_file)}) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(servers=[hostile("immortal")]))
        await status_of(events, {"immortal"})
        server_pid = int(pid_file.read_text())
        await session.close()
        assert not Path(f"/proc/{server_pid}").exists() or "zombie" in _proc_state(server_pid)
