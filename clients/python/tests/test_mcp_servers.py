"""MCP tool servers end to end: the real agentrpc binary as an MCP client of a
real server built with the ``mcp`` package from PyPI (``mcp_sdk_server.py``:
``MCPServer`` of mcp 2.x in the test environment, ``FastMCP`` of mcp 1.x from
the second environment ``scripts/test`` makes), and of the hostile fake in
``mcp_hostile_server.py``. docs/protocol.md, "MCP tool servers", is the oracle.
"""

from __future__ import annotations

import asyncio
import os
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrpc import Client
from conftest import REAL_BINARY, REAL_TIMEOUT, call, is_gone, requires_real, spawn_real, until_gone, until_listening

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

#: The protocol version each SDK's server settles on with agentrpc: mcp 2.x
#: answers the ``server/discover`` probe (2026-07-28, no handshake), mcp 1.x
#: refuses it and is initialized.
ERA_VERSIONS = {"MCPServer": {"2026-07-28"}, "FastMCP": {"2025-11-25", "2025-06-18"}}

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
        assert kit["status"] == "ready" and kit["transport"] == "stdio" and kit["protocolVersion"] in ERA_VERSIONS[sdk]
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


async def test_guards_and_approval_rules_decide_mcp_calls_as_client_calls(tmp_path: Path) -> None:
    """An MCP tool goes through the session's guards and standing approval
    rules like a client tool: a guard's deny never reaches the server, a
    guard matches the annotations the server's hints map to, a guard's confirm
    asks, and approving for the session lets the next call through unasked."""
    if MCP2_PYTHON is None:
        pytest.skip("mcp 2.x is not installed")
    guards = [
        {"match": {"name": "mcp__kit__echo"}, "verdict": "deny", "reason": "no echoes here"},
        {"match": {"annotations": ["destructive"]}, "verdict": "deny", "reason": "nothing destructive"},
        {"match": {"name": "mcp__kit__add"}, "verdict": "confirm", "reason": "sums need a look"},
    ]
    first = {"toolCalls": [call("mcp__kit__echo", text="hi"), call("mcp__kit__wipe"), call("mcp__kit__add", a=2, b=3)]}
    second = {"toolCalls": [call("mcp__kit__add", a=4, b=5)]}
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(
            scripted(first, {"text": ["one"]}, second, {"text": ["two"]}, servers=[stdio_server(MCP2_PYTHON)], guards=guards))
        await wait_status(events, "kit", "ready")

        turn = asyncio.create_task(session.send("go"))
        resolved: dict[str, dict[str, Any]] = {}
        calls: list[dict[str, Any]] = []
        async with asyncio.timeout(REAL_TIMEOUT):
            async for note in events:
                event = note.params["event"]
                if event["type"] == "confirmationRequested":
                    # Only the guard's confirm asks: the denied calls never do.
                    assert event["name"] == "mcp__kit__add" and event.get("reason") == "sums need a look"
                    await session.approve_for_session(event["callId"])
                elif event["type"] == "confirmationResolved":
                    resolved[event["callId"]] = dict(event)
                elif event["type"] == "toolCallFinished":
                    calls.append(dict(event))
                elif event["type"] == "turnEnded":
                    break
        await turn
        by_name = {c["name"]: c for c in calls}
        assert by_name["mcp__kit__echo"]["outcome"] == "denied" and "no echoes here" in str(by_name["mcp__kit__echo"]["content"])
        assert by_name["mcp__kit__wipe"]["outcome"] == "denied" and "nothing destructive" in str(by_name["mcp__kit__wipe"]["content"])
        # Had either reached the server, its answer ("echo: hi", "wiped") would be the content.
        assert "echo: hi" not in str(by_name["mcp__kit__echo"]["content"]) and "wiped" not in str(by_name["mcp__kit__wipe"]["content"])
        assert by_name["mcp__kit__add"]["outcome"] == "ok" and by_name["mcp__kit__add"]["content"] == {"total": 5}
        decided = {name: (resolved[c["callId"]]["decision"], resolved[c["callId"]]["source"]) for name, c in by_name.items()}
        assert decided == {
            "mcp__kit__echo": ("deny", "policy"), "mcp__kit__wipe": ("deny", "policy"),
            "mcp__kit__add": ("approveForSession", "client")}

        # The rule approveForSession made lets the next add through without asking.
        turn = asyncio.create_task(session.send("again"))
        seen: list[str] = []
        async with asyncio.timeout(REAL_TIMEOUT):
            async for note in events:
                event = note.params["event"]
                assert event["type"] != "confirmationRequested", event
                if event["type"] == "confirmationResolved":
                    assert (event["source"], event["decision"]) == ("rule", "approve")
                    seen.append("rule")
                elif event["type"] == "toolCallFinished":
                    assert event["name"] == "mcp__kit__add" and event["outcome"] == "ok" and event["content"] == {"total": 9}
                    seen.append("finished")
                elif event["type"] == "turnEnded":
                    break
        await turn
        assert seen == ["rule", "finished"]
        rules = (await get_state(client, session)).get("approvalRules") or []
        assert [r["tool"] for r in rules] == ["mcp__kit__add"], rules


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
        await until_gone(server_pid)



async def test_a_descriptor_agentrpc_inherited_does_not_reach_its_servers(tmp_path: Path) -> None:
    """Whatever agentrpc was started with beyond stdin, stdout and stderr (an editor
    that leaks descriptors into what it spawns, say) stays with agentrpc: an MCP server
    gets only its three streams. A leaked pipe's write end in a server, or in what it
    leaves running, keeps that pipe's reader from ever seeing its end of file."""
    if MCP2_PYTHON is None:
        pytest.skip("mcp 2.x is not installed")
    inherited = 9  # one digit: dash redirects no other
    wrapper = tmp_path / "agentrpc-with-a-leaked-descriptor"
    # Opened by the shell without close-on-exec, then agentrpc itself is exec'd with it.
    wrapper.write_text(f'#!/bin/sh\nexec {inherited}>>"{tmp_path / "leaked"}"\nexec "{REAL_BINARY}" "$@"\n')
    wrapper.chmod(0o755)
    pid_file = tmp_path / "server.pid"
    async with Client.spawn(binary=wrapper, cwd=tmp_path, env={"MCP_TEST_PID_FILE": str(pid_file)},
                            request_timeout=REAL_TIMEOUT, shutdown_timeout=REAL_TIMEOUT) as client:
        events = client.notifications("session/event")
        await client.open_session(scripted(servers=[stdio_server(MCP2_PYTHON)]))
        await wait_status(events, "kit", "ready")
        server_pid = int(pid_file.read_text())
        assert os.path.exists(f"/proc/{client.pid}/fd/{inherited}"), "agentrpc did not get the descriptor: the test proves nothing"
        assert sorted(int(fd) for fd in os.listdir(f"/proc/{server_pid}/fd") if int(fd) < 3) == [0, 1, 2]
        assert not os.path.exists(f"/proc/{server_pid}/fd/{inherited}"), "the MCP server inherited agentrpc's descriptor"


HOSTILE = str(HERE / "mcp_hostile_server.py")


def hostile(mode: str, **extra: Any) -> dict[str, Any]:
    return {"name": mode, "command": sys.executable, "args": [HOSTILE, mode], **extra}


async def started_hostile(client: Any, mode: str, pid_file: Path) -> tuple[Any, int]:
    """A session with the hostile server ``mode``, once it is ready, and the pid
    it wrote to ``pid_file`` (its own, or its child's: MCP_TEST_PID_FILE)."""
    events = client.notifications("session/event")
    session = await client.open_session(scripted(servers=[hostile(mode)]))
    await status_of(events, {mode})
    return session, int(pid_file.read_text())


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


async def test_a_server_that_stops_reading_its_input_holds_up_nothing_else(tmp_path: Path) -> None:
    """Calls whose arguments outgrow the pipe, to a server that no longer reads: they
    end at the call timeout, other sessions are served all along, and closing the
    session stops the server. (agentrpc wrote a server's stdin from the turn's
    tasks: a full pipe blocked them, and the cancellation that followed blocked
    behind them; with the pool's threads all held, every session stood still.)"""
    blob = "x" * (1024 * 1024)
    async with spawn_real(tmp_path, args=["--ephemeral"]) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__deaf__deafen")]},
            {"toolCalls": [call("mcp__deaf__ok", blob=blob, n=n) for n in range(4)]},
            {"text": ["went on"]},
            servers=[hostile("deaf")], limits={"toolTimeoutSeconds": 2}))
        bystander = await client.open_session({"model": {"provider": "scripted", "script": [{"text": ["still here"]}] * 3}})
        await status_of(events, {"deaf"})
        send = asyncio.ensure_future(session.send("go"))
        # While the calls wait on the deaf server, another session's turns run.
        for _ in range(3):
            assert (await bystander.send("hi")).message.text == "still here"
        assert (await send).message.text == "went on"
        finished: list[dict[str, Any]] = []
        async with asyncio.timeout(REAL_TIMEOUT):
            async for note in events:
                event = note.params["event"]
                if event["type"] == "toolCallFinished" and event["name"] == "mcp__deaf__ok":
                    finished.append(dict(event))
                    if len(finished) == 4:
                        break
        assert all(e["outcome"] == "failed" and "did not finish within 2" in e["content"] for e in finished), finished
        # Closing stops it: stdin closed (it does not notice), SIGTERM 2 s later.
        async with asyncio.timeout(REAL_TIMEOUT):
            await session.close()
        assert (await client.list_sessions()) is not None


async def test_a_server_that_dies_while_its_child_holds_its_output_is_seen_to_end(tmp_path: Path) -> None:
    """The server exits, but a process it started still holds its stdout: no end of
    file comes. Its end is seen all the same (the supervisor's exit): the call fails
    as for any crash, not at its timeout, what it left is killed, and it restarts."""
    pid_file = tmp_path / "holder.pid"
    async with spawn_real(tmp_path, args=["--ephemeral"], env={"MCP_TEST_PID_FILE": str(pid_file)}) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__orphaner__crash")]}, {"text": ["it crashed"]},
            {"toolCalls": [call("mcp__orphaner__ok")]}, {"text": ["ok"]},
            servers=[hostile("orphaner")], limits={"toolTimeoutSeconds": 600}))
        await status_of(events, {"orphaner"})
        holder = int(pid_file.read_text())
        assert (await session.send("crash")).message.text == "it crashed"
        seen = await turn_events(events)
        crashed = next(e for e in seen if e["type"] == "toolCallFinished")
        assert crashed["outcome"] == "failed" and "went away" in crashed["content"], crashed
        restarting = next(e for e in seen if e["type"] == "mcpServerStatus" and e["status"] == "restarting")
        assert "status 3" in restarting.get("reason", ""), restarting
        await until_gone(holder)
        assert (await session.send("again")).message.text == "ok"
        assert (await finished_calls(events))[-1]["outcome"] == "ok"


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
        _, server_pid = await started_hostile(client, "immortal", pid_file)
        os.kill(client.pid, signal.SIGKILL)
        await until_gone(server_pid)


# "immortal" ignores SIGTERM (its own pid is written); "spawner" starts a
# child of its own (the child's pid is written).
@pytest.mark.parametrize("mode", ["immortal", "spawner"])
async def test_closing_the_session_stops_the_server_and_what_it_started(tmp_path: Path, mode: str) -> None:
    pid_file = tmp_path / f"{mode}.pid"
    async with spawn_real(tmp_path, env={"MCP_TEST_PID_FILE": str(pid_file)}) as client:
        session, pid = await started_hostile(client, mode, pid_file)
        await session.close()
        # close sends SIGKILL to what is left of the server's process group and answers
        # only once it is gone (the kernel ends a killed process asynchronously).
        assert is_gone(pid)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _http_server(command: list[str], port: int) -> subprocess.Popen[bytes]:
    """Starts an MCP server on streamable HTTP and waits (bounded) until it accepts connections."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    await until_listening(port)
    return process


def _sdk_http(python: str, port: int) -> list[str]:
    return [python, SDK_SERVER, "http", str(port)]


def http_server(port: int, name: str = "web", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "http", "url": f"http://127.0.0.1:{port}/mcp", **extra}


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(timeout=REAL_TIMEOUT)


async def turn_events(events: Any) -> list[dict[str, Any]]:
    """Every event up to the turn's end."""
    out: list[dict[str, Any]] = []
    async with asyncio.timeout(REAL_TIMEOUT):
        async for note in events:
            out.append(dict(note.params["event"]))
            if out[-1]["type"] == "turnEnded":
                return out
    raise AssertionError("no turnEnded")


def lists(event: dict[str, Any], server: str, tool: str) -> bool:
    return event["type"] == "mcpServerStatus" and event["server"] == server and tool in event.get("tools", [])


async def wait_tools(events: Any, server: str, tool: str) -> dict[str, Any]:
    """The first ``ready`` status of ``server`` whose tools include ``tool`` (a re-listing)."""
    async with asyncio.timeout(REAL_TIMEOUT):
        async for note in events:
            event = note.params["event"]
            if event["type"] == "mcpServerStatus" and event["server"] == server and tool in event.get("tools", []):
                return dict(event)
    raise AssertionError(f"{server} never listed {tool}")


@pytest.mark.parametrize(("python", "sdk"), SDKS)
async def test_streamable_http_list_call_structured_is_error_and_list_changed(tmp_path: Path, python: str, sdk: str) -> None:
    port = _free_port()
    server = await _http_server(_sdk_http(python, port), port)
    try:
        async with spawn_real(tmp_path) as client:
            events = client.notifications("session/event")
            session = await client.open_session(scripted(
                {"toolCalls": [call("mcp__web__add", a=1, b=2), call("mcp__web__fail", why="nope"),
                               call("mcp__web__sdk"), call("mcp__web__grow")]},
                {"text": ["done"]},
                {"toolCalls": [call("mcp__web__extra")]}, {"text": ["again"]},
                servers=[http_server(port)]))
            ready = await wait_status(events, "web", "ready")
            assert "mcp__web__add" in ready["tools"] and "mcp__web__extra" not in ready["tools"]
            [web] = (await get_state(client, session))["mcpServers"]
            assert web["transport"] == "http" and web["protocolVersion"] in ERA_VERSIONS[sdk]
            result = await session.send("go")
            assert result.message.text == "done"
            seen = await turn_events(events)
            # Read-only tools run in parallel and finish in any order: by name.
            calls = {e["name"]: e for e in seen if e["type"] == "toolCallFinished"}
            assert calls["mcp__web__add"]["content"] == {"total": 3} and calls["mcp__web__add"]["source"] == {"mcp": "web"}
            assert calls["mcp__web__fail"]["outcome"] == "failed" and "fail" in str(calls["mcp__web__fail"]["content"])
            assert sdk in str(calls["mcp__web__sdk"]["content"])
            # The SDK may send list_changed outside the request (its GET stream): the
            # re-listing shows in a status event, and the next turn may call the new tool.
            if not any(lists(e, "web", "mcp__web__extra") for e in seen):
                await wait_tools(events, "web", "mcp__web__extra")
            result = await session.send("again")
            assert result.message.text == "again"
            calls = await finished_calls(events)
            assert calls[0]["outcome"] == "ok" and "extra ran" in str(calls[0]["content"])
            await session.close()
    finally:
        _stop(server)


async def test_streamable_http_cancel_during_a_slow_tool(tmp_path: Path) -> None:
    if MCP2_PYTHON is None:
        pytest.skip("mcp 2.x is not installed")
    port = _free_port()
    server = await _http_server(_sdk_http(MCP2_PYTHON, port), port)
    try:
        async with spawn_real(tmp_path) as client:
            events = client.notifications("session/event")
            session = await client.open_session(scripted(
                {"toolCalls": [call("mcp__web__slow", seconds=60)]}, {"toolCalls": [call("mcp__web__echo", text="again")]}, {"text": ["ok"]},
                servers=[http_server(port)]))
            await wait_status(events, "web", "ready")
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
            await session.send("again")
            calls = await finished_calls(events)
            assert calls[-1]["name"] == "mcp__web__echo" and calls[-1]["outcome"] == "ok"
    finally:
        _stop(server)


async def test_streamable_http_server_gone_mid_call(tmp_path: Path) -> None:
    if MCP2_PYTHON is None:
        pytest.skip("mcp 2.x is not installed")
    port = _free_port()
    server = await _http_server(_sdk_http(MCP2_PYTHON, port), port)
    try:
        async with spawn_real(tmp_path) as client:
            events = client.notifications("session/event")
            session = await client.open_session(scripted(
                {"toolCalls": [call("mcp__web__crash")]}, {"text": ["it crashed"]},
                {"text": ["still here"]},
                servers=[http_server(port)]))
            await wait_status(events, "web", "ready")
            result = await session.send("crash")
            assert result.message.text == "it crashed"
            seen = await turn_events(events)
            calls = [e for e in seen if e["type"] == "toolCallFinished"]
            assert calls[0]["outcome"] == "failed" and "went away" in calls[0]["content"]
            # Nothing listens any more: each restart (a new initialize) fails, then the
            # server is failed; the turn's next round trip waited for that (bounded).
            failed = [e for e in seen if e["type"] == "mcpServerStatus" and e["status"] == "failed"]
            assert failed and "cannot" in failed[0]["reason"] and "restarted 3 times within 60 s" in failed[0]["reason"]
            result = await session.send("more")
            assert result.message.text == "still here"
    finally:
        server.wait(timeout=REAL_TIMEOUT)


@pytest.mark.parametrize(("python", "sdk"), SDKS)
async def test_streamable_http_reinitializes_after_a_404(tmp_path: Path, python: str, sdk: str) -> None:
    """mcp 1.x (handshake era): the restarted server answers 404 to our MCP
    session, and a new one carries the call. mcp 2.x (2026-07-28): there is no
    MCP session to lose; the restarted server just answers."""
    port = _free_port()
    server = await _http_server(_sdk_http(python, port), port)
    try:
        async with spawn_real(tmp_path) as client:
            events = client.notifications("session/event")
            session = await client.open_session(scripted(
                {"toolCalls": [call("mcp__web__add", a=1, b=2)]},
                {"toolCalls": [call("mcp__web__add", a=2, b=2)]}, {"text": ["done"]},
                servers=[http_server(port)]))
            await wait_status(events, "web", "ready")
            # A new server process knows nothing of our MCP session: it answers 404
            # (to the call, or to the GET stream opened again, whichever comes first).
            # (mcp 2.x's uvicorn would wait for our subscriptions/listen stream on SIGTERM.)
            server.kill()
            server.wait(timeout=REAL_TIMEOUT)
            server = await _http_server(_sdk_http(python, port), port)
            await session.send("go")
            seen: list[dict[str, Any]] = []
            async with asyncio.timeout(REAL_TIMEOUT):
                async for note in events:
                    seen.append(note.params["event"])
                    if seen[-1]["type"] == "turnEnded":
                        break
            # The 404 said the call was not processed: a new MCP session carried it
            # again, transparently (no restart, no failed call).
            assert not [e for e in seen if e["type"] == "mcpServerStatus" and e["status"] != "ready"]
            calls = [e for e in seen if e["type"] == "toolCallFinished"]
            # Read-only tools: the two calls ran in parallel, finishing in either order.
            assert sorted(c["content"]["total"] for c in calls) == [3, 4]
            state = await get_state(client, session)
            web = state["mcpServers"][0]
            assert web["status"] == "ready" and web["restarts"] == 0
            renewed = "the server ended the MCP session (HTTP 404); a new MCP session was started" in web.get("problems", [])
            assert renewed == (sdk == "FastMCP"), web
    finally:
        _stop(server)


async def test_streamable_http_wire_ping_delete_and_no_secret_anywhere(tmp_path: Path) -> None:
    """Against a fake that answers plain JSON and logs what it receives."""
    port = _free_port()
    log = tmp_path / "requests.jsonl"
    fake = await _http_server([sys.executable, str(HERE / "mcp_http_fake.py"), str(port), str(log)], port)
    token, literal = "tok-7f3a9c-from-env", "literal-5be1d2-secret"
    args = ["--store", str(tmp_path / "store"), "--log-level", "trace", "--trace-file", str(tmp_path / "trace.jsonl"),
            "--trace-payloads", "--dump-requests", str(tmp_path / "dump.jsonl")]
    try:
        async with spawn_real(tmp_path, args=args, env={"FAKE_TOKEN": token}) as client:
            events = client.notifications("session/event")
            session = await client.open_session(scripted(
                {"toolCalls": [call("mcp__fake__echo", text="hi"), call("mcp__fake__grow")]}, {"text": ["one"]},
                {"toolCalls": [call("mcp__fake__extra")]}, {"text": ["two"]},
                servers=[http_server(port, "fake", headers={"Authorization": "Bearer ${FAKE_TOKEN}", "X-Literal": literal})]))
            await wait_status(events, "fake", "ready")
            assert (await session.send("go")).message.text == "one"
            seen = await turn_events(events)
            # Read-only tools: the two calls ran in parallel, finishing in either order.
            calls = {e["name"]: e for e in seen if e["type"] == "toolCallFinished"}
            assert calls["mcp__fake__echo"]["content"] == "echo: hi" and calls["mcp__fake__grow"]["outcome"] == "ok"
            # list_changed came on the GET stream.
            if not any(lists(e, "fake", "mcp__fake__extra") for e in seen):
                await wait_tools(events, "fake", "mcp__fake__extra")
            assert (await session.send("again")).message.text == "two"
            assert (await finished_calls(events))[0]["content"] == "extra ran"
            await session.close()
            stderr = client.stderr_tail
        received = [json.loads(line) for line in log.read_text().splitlines()]
    finally:
        _stop(fake)
    posts = [r for r in received if r["method"] == "POST"]
    # The probe of the 2026-07-28 era goes first, as a modern request (its version
    # and method in headers); the fake refuses it, so it is initialized as before.
    probe, init = posts[0], posts[1]
    assert probe["body"]["method"] == "server/discover"
    assert probe["body"]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert probe["headers"]["mcp-protocol-version"] == "2026-07-28" and probe["headers"]["mcp-method"] == "server/discover"
    assert init["body"]["method"] == "initialize" and "mcp-session-id" not in init["headers"]
    assert "mcp-protocol-version" not in init["headers"] and "mcp-method" not in init["headers"]
    for r in posts:
        assert r["headers"]["accept"] == "application/json, text/event-stream"
        assert r["headers"]["authorization"] == f"Bearer {token}" and r["headers"]["x-literal"] == literal
    for r in received[2:]:
        assert r["headers"]["mcp-session-id"] == "fake-session-1" and r["headers"]["mcp-protocol-version"] == "2025-06-18"
        assert "mcp-method" not in r["headers"]
        assert "io.modelcontextprotocol/protocolVersion" not in ((r["body"] or {}).get("params") or {}).get("_meta", {})
    assert posts[2]["body"] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    # The server's ping on the GET stream was answered with a POST.
    assert {"jsonrpc": "2.0", "id": "fake-ping-1", "result": {}} in [r["body"] for r in posts]
    assert any(r["method"] == "GET" and r["headers"]["accept"] == "text/event-stream" for r in received)
    assert received[-1]["method"] == "DELETE"
    # Neither the expanded token nor the literal header reaches the journal, the log, a trace or a dump.
    assert stderr and "fake" in stderr
    for path in tmp_path.rglob("*"):
        if path.is_file() and path != log:
            text = path.read_text(errors="replace")
            assert token not in text and literal not in text, path
    # At trace level every frame is logged as received: the client's own literal
    # value shows there and nowhere else; a ${NAME} value never shows.
    assert [line for line in stderr.splitlines() if token in line] == []
    assert [line for line in stderr.splitlines() if literal in line and not line.startswith("agentrpc[trace] <- ")] == []
    journal = "".join(p.read_text() for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert "${FAKE_TOKEN}" in journal


@pytest.mark.time_bound(120)  # two HTTP servers start on a loaded machine
async def test_x_mcp_header_arguments_go_in_mcp_param_headers_to_a_modern_http_server(tmp_path: Path) -> None:
    """2026-07-28 streamable HTTP: a tool's ``x-mcp-header`` arguments are sent
    again as ``Mcp-Param-{Name}`` headers (a string as it is, or base64 when not
    plain ASCII; an integer in decimal; a boolean ``true``/``false``; a nested
    argument through ``properties``; an absent one omitted). The real mcp 2.x
    server refuses a call whose headers do not match (``HeaderMismatch``): its
    calls run. The logging fake shows the headers, and that a tool with an
    invalid annotation is left out with a problem naming it, and that a call
    whose headers would exceed 8 KiB is not sent."""
    if MCP2_PYTHON is None:
        pytest.skip("mcp 2.x is not installed")
    port, fake_port = _free_port(), _free_port()
    log = tmp_path / "requests.jsonl"
    server = await _http_server(_sdk_http(MCP2_PYTHON, port), port)
    fake = await _http_server([sys.executable, str(HERE / "mcp_http_fake.py"), str(fake_port), str(log), "modern"], fake_port)
    try:
        async with spawn_real(tmp_path) as client:
            events = client.notifications("session/event")
            session = await client.open_session(scripted(
                {"toolCalls": [call("mcp__web__locate", region="Zürich", query="q", limit=3, exact=True),
                               call("mcp__web__locate", region="us-west1", query="r")]},
                {"toolCalls": [call("mcp__fake__locate", region="us-west1", query="q", options={"limit": 42, "exact": False}),
                               call("mcp__fake__locate", region=" padded ", query="q")]},
                {"toolCalls": [call("mcp__fake__locate", region="x" * 9000, query="q")]},
                {"text": ["done"]},
                servers=[http_server(port), http_server(fake_port, "fake")]))
            statuses: dict[str, dict[str, Any]] = {}
            async with asyncio.timeout(REAL_TIMEOUT):
                async for note in events:
                    event = note.params["event"]
                    if event["type"] == "mcpServerStatus" and event["status"] in ("ready", "failed"):
                        statuses[event["server"]] = dict(event)
                        if len(statuses) == 2:
                            break
            assert "mcp__fake__locate" in statuses["fake"]["tools"]
            assert not [t for t in statuses["fake"]["tools"] if "bad_" in t], statuses["fake"]["tools"]
            state = {s["name"]: s for s in (await get_state(client, session))["mcpServers"]}
            assert state["web"]["protocolVersion"] == "2026-07-28" and state["fake"]["protocolVersion"] == "2026-07-28"
            problems = "\n".join(state["fake"]["problems"])
            for bad in ("bad_items", "bad_number", "bad_twice", "bad_token"):
                assert f"the tool '{bad}' was left out" in problems, problems
            await session.send("go")
            calls = await finished_calls(events)
        received = [json.loads(line) for line in log.read_text().splitlines()]
    finally:
        _stop(server)
        _stop(fake)
    web = [c for c in calls if c["name"] == "mcp__web__locate"]
    assert sorted(c["content"]["result"] for c in web) == ["q in Zürich (limit 3, exact True)", "r in us-west1 (limit 10, exact False)"], web
    fake_calls = [c for c in calls if c["name"] == "mcp__fake__locate"]
    assert [c["outcome"] for c in fake_calls[:2]] == ["ok", "ok"], fake_calls
    too_long = fake_calls[2]
    assert too_long["outcome"] == "failed" and "too long for its header Mcp-Param-Region" in too_long["content"], too_long
    assert "the tool did not run" in too_long["content"]
    sent = [r for r in received if r["method"] == "POST" and (r["body"] or {}).get("method") == "tools/call"]
    by_region = {r["body"]["params"]["arguments"]["region"]: r["headers"] for r in sent}
    assert len(sent) == 2 and set(by_region) == {"us-west1", " padded "}, "the call with too long a header never left"
    plain = by_region["us-west1"]
    assert (plain["mcp-param-region"], plain["mcp-param-limit"], plain["mcp-param-exact"]) == ("us-west1", "42", "false")
    assert plain["mcp-name"] == "locate" and plain["mcp-method"] == "tools/call"
    padded = by_region[" padded "]
    assert padded["mcp-param-region"] == "=?base64?IHBhZGRlZCA=?="
    assert "mcp-param-limit" not in padded and "mcp-param-exact" not in padded


async def test_every_listed_protocol_version_is_accepted(tmp_path: Path) -> None:
    versions = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
    names = {f"v{i}": version for i, version in enumerate(versions)}
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call(f"mcp__{name}__ok") for name in names]}, {"text": ["all answered"]},
            servers=[{"name": name, "command": sys.executable, "args": [HOSTILE, f"version={version}"]}
                     for name, version in names.items()]))
        statuses = await status_of(events, set(names))
        assert {name: s["status"] for name, s in statuses.items()} == {name: "ready" for name in names}
        state = {s["name"]: s for s in (await get_state(client, session))["mcpServers"]}
        assert {name: state[name]["protocolVersion"] for name in names} == names
        assert (await session.send("go")).message.text == "all answered"
        calls = await finished_calls(events)
        assert [c["outcome"] for c in calls] == ["ok"] * len(names)


async def test_server_requests_ping_answered_sampling_roots_elicitation_refused(tmp_path: Path) -> None:
    """The server asks once initialized; it also never advertises ``listChanged``
    and still sends ``list_changed``, which the next round trip sees."""
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__asks__asked"), call("mcp__asks__grow")]},
            {"toolCalls": [call("mcp__asks__extra")]}, {"text": ["done"]},
            servers=[hostile("asks")]))
        ready = await status_of(events, {"asks"})
        assert ready["asks"]["status"] == "ready" and "mcp__asks__extra" not in ready["asks"]["tools"]
        assert (await session.send("go")).message.text == "done"
        # Read-only tools run in parallel and finish in any order: by name.
        calls = {e["name"]: e for e in await finished_calls(events)}
        answers = json.loads(calls["mcp__asks__asked"]["content"])
        assert answers["ask-ping"] == {"result": {}}
        for refused in ("ask-sampling", "ask-roots", "ask-elicitation"):
            assert answers[refused]["error"]["code"] == -32601, answers
        assert calls["mcp__asks__grow"]["content"] == "grown"
        assert calls["mcp__asks__extra"]["outcome"] == "ok" and calls["mcp__asks__extra"]["content"] == "extra ran"


async def test_a_list_changed_before_every_listing_does_not_hold_the_next_round_trip(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__relentless__provoke")]}, {"toolCalls": [call("mcp__relentless__ok")]}, {"text": ["calm"]},
            servers=[hostile("relentless")]))
        await status_of(events, {"relentless"})
        # Every listing brings a new list_changed, so re-listing never ends: a round
        # trip waits for one listing that covers the notifications seen so far.
        assert (await session.send("go")).message.text == "calm"
        calls = await finished_calls(events)
        assert [c["outcome"] for c in calls] == ["ok", "ok"]
        await session.close()


async def test_resume_session_takes_start_mcp_servers_and_mcp_servers(tmp_path: Path) -> None:
    from agentrpc import MCPServer

    async with spawn_real(tmp_path, args=["--store", str(tmp_path / "store")]) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(servers=[hostile("badjson")]))
        await status_of(events, {"badjson"})
        await session.close()
        # Deferred: the session loads without starting its servers.
        deferred = await client.resume_session(session.id, start_mcp_servers=False)
        assert (await get_state(client, deferred)).get("mcpServers", []) == []
        await deferred.close()
        # A list in place of the stored one, for this load (typed as a user writes it).
        given: MCPServer = {"name": "given", "command": sys.executable, "args": [HOSTILE, "unknownid"]}
        replaced = await client.resume_session(session.id, mcp_servers=[given])
        assert (await status_of(events, {"given"}))["given"]["status"] == "ready"
        assert [s["name"] for s in (await get_state(client, replaced))["mcpServers"]] == ["given"]
        await replaced.close()
        # Not stored: the next load runs the stored server again.
        again = await client.resume_session(session.id)
        assert [s["name"] for s in (await get_state(client, again))["mcpServers"]] == ["badjson"]


async def test_streamable_http_a_trickled_answer_to_a_notification_or_delete_is_bounded(tmp_path: Path) -> None:
    """The fake answers notifications/initialized and DELETE with a byte a second,
    forever: the idle timeout never fires, the bound of each wait does."""
    port = _free_port()
    fake = await _http_server([sys.executable, str(HERE / "mcp_http_fake.py"), str(port), str(tmp_path / "requests.jsonl"), "trickle"], port)
    try:
        async with spawn_real(tmp_path) as client:
            events = client.notifications("session/event")
            session = await client.open_session(scripted(
                {"toolCalls": [call("mcp__fake__echo", text="hi")]}, {"text": ["done"]},
                servers=[http_server(port, "fake")]))
            assert (await wait_status(events, "fake", "ready"))["tools"] == ["mcp__fake__echo", "mcp__fake__grow"]
            assert (await session.send("go")).message.text == "done"
            assert (await finished_calls(events))[0]["content"] == "echo: hi"
            await session.close()
    finally:
        _stop(fake)


async def test_agentrpc_json_servers_are_named_by_sessions_and_profiles(tmp_path: Path) -> None:
    from agentrpc import InvalidConfiguration

    (tmp_path / "agentrpc.json").write_text(json.dumps({"mcpServers": {
        "shared": {"command": sys.executable, "args": [HOSTILE, "badjson"]},
        "extra": {"command": sys.executable, "args": [HOSTILE, "unknownid"]},
        "idle": {"command": sys.executable, "args": [HOSTILE, "badjson"]},
    }}))
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        with pytest.raises(InvalidConfiguration) as raised:
            await client.open_session(scripted(servers=["nowhere"]))
        assert "nowhere" in str(raised.value) and "extra, idle, shared" in str(raised.value)
        # The session names one server of agentrpc.json; its profile case another,
        # which then starts with the session too. "idle" is named by nobody.
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__shared__ok"), call("mcp__extra__ok")]}, {"text": ["both"]},
            servers=["shared"], properties={"mode": "work"},
            profiles={"selector": "mode", "cases": {"work": {"mcpServers": ["shared", "extra"]}}}))
        statuses = await status_of(events, {"shared", "extra"})
        assert {name: s["status"] for name, s in statuses.items()} == {"shared": "ready", "extra": "ready"}
        assert [s["name"] for s in (await get_state(client, session))["mcpServers"]] == ["shared", "extra"]
        assert (await session.send("go")).message.text == "both"
        assert [c["outcome"] for c in await finished_calls(events)] == ["ok", "ok"]


async def test_mcp_calls_keep_the_turn_contract_timeout_trace_and_max_tool_calls(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    async with spawn_real(tmp_path, args=["--ephemeral", "--trace-file", str(trace)]) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__badjson__hang"), call("mcp__badjson__ok")]}, {"text": ["went on"]},
            servers=[hostile("badjson")], limits={"toolTimeoutSeconds": 1}))
        await status_of(events, {"badjson"})
        # The call the server never answers ends failed at the per-call timeout; the turn goes on.
        assert (await session.send("go")).message.text == "went on"
        # Both tools are read-only, so the calls ran in parallel: ok finished first.
        by_name = {e["name"]: e for e in await finished_calls(events)}
        hang, ok = by_name["mcp__badjson__hang"], by_name["mcp__badjson__ok"]
        assert hang["outcome"] == "failed" and "did not finish within 1" in hang["content"]
        assert ok["outcome"] == "ok" and ok["content"] == "fine"
        # Each call is a tool span (the file is written as spans end: read until both are in).
        async with asyncio.timeout(REAL_TIMEOUT):
            while not all(f'"tool.mcp__badjson__{t}"' in trace.read_text() for t in ("hang", "ok")):
                await asyncio.sleep(0.05)
        # maxToolCalls counts MCP calls like any other.
        limited = await client.open_session(scripted(
            {"toolCalls": [call("mcp__badjson__ok"), call("mcp__badjson__ok")]}, {"text": ["never"]},
            servers=[hostile("badjson")], limits={"maxToolCalls": 1}))
        await status_of(events, {"badjson"})
        from agentrpc import MaxToolCallsExceeded

        with pytest.raises(MaxToolCallsExceeded):
            await limited.send("go")


async def test_sigterm_of_agentrpc_stops_its_servers_politely(tmp_path: Path) -> None:
    """The server sees its input end and agentrpc waits for its exit (the polite
    stop): a server that dies only by the parent-death SIGKILL, when agentrpc
    exits at once, writes no marker (it writes it half a second after the end of input)."""
    eof = tmp_path / "eof"
    async with spawn_real(tmp_path, env={"MCP_TEST_EOF_FILE": str(eof)}) as client:
        events = client.notifications("session/event")
        await client.open_session(scripted(servers=[hostile("badjson")]))
        await status_of(events, {"badjson"})
        os.kill(client.pid, signal.SIGTERM)
        async with asyncio.timeout(REAL_TIMEOUT):
            while not eof.exists():
                await asyncio.sleep(0.05)
        assert eof.read_text() == "eof"


async def test_input_schemas_are_checked_and_an_unusable_one_is_a_schema_warning(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__oddschema__typed"), call("mcp__oddschema__odd", x=1)]},
            {"toolCalls": [call("mcp__oddschema__typed", n=2)]}, {"text": ["done"]},
            servers=[hostile("oddschema")]))
        await status_of(events, {"oddschema"})
        assert (await session.send("go")).message.text == "done"
        seen = await turn_events(events)
        # Reported once in the turn, though both round trips offered the tool.
        [warned] = [e for e in seen if e["type"] == "schemaWarnings"]
        assert [(w["tool"], w["path"]) for w in warned["warnings"]] == [("mcp__oddschema__odd", "#/properties/x/$ref")]
        missing, odd, typed = [e for e in seen if e["type"] == "toolCallFinished"]
        assert missing["outcome"] == "failed" and "missing required property `n`" in missing["content"]
        assert odd["outcome"] == "ok" and typed["outcome"] == "ok"


async def test_output_over_the_limit_is_cut_with_a_note_the_model_sees(tmp_path: Path) -> None:
    async with spawn_real(tmp_path, args=["--ephemeral"]) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(
            {"toolCalls": [call("mcp__badjson__big")]}, {"text": ["cut"]}, servers=[hostile("badjson")]))
        await status_of(events, {"badjson"})
        assert (await session.send("go")).message.text == "cut"
        [big] = await finished_calls(events)
        assert big["outcome"] == "ok"
        assert big["content"].endswith(f"[output cut: {1024 * 1024} of {2 * 1024 * 1024} bytes shown]")
        # The model is sent the cut text, note included.
        entries = (await client.request("session/getTranscript", {"sessionId": session.id}))["entries"]
        [output] = [e for e in entries if e["type"] == "toolOutput"]
        assert output["content"] == big["content"]


async def test_a_fork_starts_its_own_servers_and_delete_stops_them(tmp_path: Path) -> None:
    eof = tmp_path / "eof"
    async with spawn_real(tmp_path, args=["--store", str(tmp_path / "store")], env={"MCP_TEST_EOF_FILE": str(eof)}) as client:
        events = client.notifications("session/event")
        session = await client.open_session(scripted(servers=[hostile("badjson")]))
        await status_of(events, {"badjson"})
        fork = await session.fork()
        # The fork's own server reports on the fork's session.
        async with asyncio.timeout(REAL_TIMEOUT):
            async for note in events:
                event = note.params["event"]
                if note.params["sessionId"] == fork.id and event["type"] == "mcpServerStatus" and event["status"] == "ready":
                    break
        assert [s["name"] for s in (await get_state(client, fork))["mcpServers"]] == ["badjson"]
        await fork.delete()
        # Deleting waited for the polite stop: the server wrote its marker after its input ended.
        assert eof.read_text() == "eof"
        assert (await get_state(client, session))["mcpServers"][0]["status"] == "ready"


async def test_no_process_a_server_started_outlives_kill_9_of_agentrpc(tmp_path: Path) -> None:
    """The server's own child ignores SIGTERM and reads no input: only the
    supervisor, seeing agentrpc's lifeline end, kills it (with the whole group)."""
    pid_file = tmp_path / "grandchild.pid"
    async with spawn_real(tmp_path, env={"MCP_TEST_PID_FILE": str(pid_file)}) as client:
        _, grandchild = await started_hostile(client, "spawner", pid_file)
        os.kill(grandchild, 0)  # alive
        os.kill(client.pid, signal.SIGKILL)
        await until_gone(grandchild)


async def test_an_exit_the_watchdog_ends_takes_every_server_and_what_it_started_with_it(tmp_path: Path) -> None:
    """One SIGTERM, and an exit that hangs before the MCP servers are stopped
    (the test hook ``AGENTRPC_TEST_HANG_AT_EXIT``): the exit watchdog ends agentrpc
    after its bound (status 124, the reason on stderr), and the supervisor, seeing
    the lifeline end, kills the server's whole group, a child that ignores SIGTERM
    included. docs/protocol.md, "The end of a connection"."""
    pid_file = tmp_path / "grandchild.pid"
    env = {"MCP_TEST_PID_FILE": str(pid_file), "AGENTRPC_TEST_HANG_AT_EXIT": "1", "AGENTRPC_TEST_EXIT_BOUND_SECONDS": "1"}
    async with spawn_real(tmp_path, env=env) as client:
        _, grandchild = await started_hostile(client, "spawner", pid_file)
        os.kill(grandchild, 0)  # alive
        os.kill(client.pid, signal.SIGTERM)
        assert await client.wait_closed(REAL_TIMEOUT), "agentrpc is still running"
        assert client.returncode == 124
        assert "the exit (signal 15) did not finish within 1 s" in client.stderr_tail
        await until_gone(grandchild)
