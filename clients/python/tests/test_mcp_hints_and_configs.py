"""MCP servers as people have them, through the real binary: which calls ask
(the specification's hint defaults, per-server ``confirm``, ``allow`` guards
and approval rules) against real servers from PyPI (``mcp-server-git``,
``mcp-server-time``) and the SDK server of ``mcp_sdk_server.py``; and
``mcpServers`` entries written for other clients (Claude Desktop, Cursor,
VS Code, Cline, Codex) that load with warnings instead of stopping agentrpc.
docs/protocol.md, "MCP tool servers", is the oracle.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrpc import AgentRPCError
from conftest import REAL_TIMEOUT, call, requires_real, spawn_real
from test_mcp_servers import MCP2_PYTHON, SDK_SERVER, get_state, status_of, wait_status

pytestmark = requires_real

BIN = Path(sys.executable).parent
GIT_SERVER = shutil.which("mcp-server-git", path=str(BIN)) or shutil.which("mcp-server-git")
TIME_SERVER = shutil.which("mcp-server-time", path=str(BIN)) or shutil.which("mcp-server-time")

needs_sdk = pytest.mark.skipif(MCP2_PYTHON is None, reason="mcp 2.x is not installed")


def kit(**extra: Any) -> dict[str, Any]:
    assert MCP2_PYTHON is not None
    return {"name": "kit", "command": MCP2_PYTHON, "args": [SDK_SERVER], **extra}


async def run_turn(session: Any, events: Any, text: str, answer: Any = None) -> dict[str, Any]:
    """Sends ``text`` and collects the turn's confirmation questions, how they
    were resolved and the finished calls. ``answer(event)`` answers a question
    (a test that expects none passes nothing: a question then fails it)."""
    turn = asyncio.create_task(session.send(text))
    asked: list[dict[str, Any]] = []
    resolved: dict[str, tuple[str, str]] = {}
    finished: dict[str, dict[str, Any]] = {}
    async with asyncio.timeout(REAL_TIMEOUT):
        async for note in events:
            event = note.params["event"]
            if event["type"] == "confirmationRequested":
                asked.append(dict(event))
                assert answer is not None, f"an unexpected question: {event}"
                await answer(event)
            elif event["type"] == "confirmationResolved":
                resolved[event["callId"]] = (event["decision"], event["source"])
            elif event["type"] == "toolCallFinished":
                finished[event["name"]] = dict(event)
            elif event["type"] == "turnEnded":
                break
    await turn
    return {"asked": asked, "resolved": resolved, "finished": finished}


def script(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"provider": "scripted", "script": [{"toolCalls": list(calls)}, {"text": ["done"]}]}


@needs_sdk
async def test_an_unannotated_write_tool_asks_and_a_read_only_one_does_not(tmp_path: Path) -> None:
    """``write`` has no annotations: by the MCP defaults it is not read-only and
    may destroy, so it asks, with a reason naming the server. ``echo`` is
    ``readOnlyHint: true`` and runs unasked. The annotations guards see are
    the defaults filled in."""
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session(
            {"model": script(call("mcp__kit__write", text="x"), call("mcp__kit__echo", text="y")), "mcpServers": [kit()]})
        await wait_status(events, "kit", "ready")

        async def deny(event: dict[str, Any]) -> None:
            await session.deny(event["callId"], "not now")

        turn = await run_turn(session, events, "go", deny)
    [asked] = turn["asked"]
    assert asked["name"] == "mcp__kit__write"
    assert asked["reason"] == "the MCP server 'kit' does not mark this tool read-only or non-destructive"
    assert turn["finished"]["mcp__kit__write"]["outcome"] == "denied"
    assert "wrote" not in str(turn["finished"]["mcp__kit__write"]["content"])
    assert turn["finished"]["mcp__kit__echo"]["outcome"] == "ok"
    assert "echo: y" in str(turn["finished"]["mcp__kit__echo"]["content"])


@pytest.mark.skipif(GIT_SERVER is None or TIME_SERVER is None, reason="mcp-server-git / mcp-server-time are not installed")
async def test_real_servers_from_pypi_ask_by_their_hints(tmp_path: Path) -> None:
    """``mcp-server-git`` marks ``git_status`` read-only and ``git_add``
    non-destructive (neither asks) and ``git_reset`` destructive (it asks);
    ``mcp-server-time``'s ``get_current_time`` is read-only."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    (repo / "a.txt").write_text("b\n")
    servers = [
        {"name": "git", "command": GIT_SERVER, "args": ["--repository", str(repo)]},
        {"name": "time", "command": TIME_SERVER},
    ]
    calls = [
        call("mcp__git__git_status", repo_path=str(repo)),
        call("mcp__git__git_add", repo_path=str(repo), files=["a.txt"]),
        call("mcp__git__git_reset", repo_path=str(repo)),
        call("mcp__time__get_current_time", timezone="UTC"),
    ]
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session({"model": script(*calls), "mcpServers": servers})
        await wait_status(events, "git", "ready")
        state = await get_state(client, session)
        assert {s["name"]: s["status"] for s in state["mcpServers"]}.get("time") in {"ready", "starting"}

        async def approve(event: dict[str, Any]) -> None:
            await session.approve(event["callId"])

        turn = await run_turn(session, events, "go", approve)
    assert [a["name"] for a in turn["asked"]] == ["mcp__git__git_reset"]
    finished = turn["finished"]
    assert {name: c["outcome"] for name, c in finished.items()} == {
        "mcp__git__git_status": "ok", "mcp__git__git_add": "ok", "mcp__git__git_reset": "ok", "mcp__time__get_current_time": "ok"}
    assert "UTC" in json.dumps(finished["mcp__time__get_current_time"]["content"])


@needs_sdk
async def test_an_allow_guard_and_an_auto_approve_rule_lift_a_hints_question(tmp_path: Path) -> None:
    """An ``allow`` guard on ``write`` lifts the question its hints ask (no
    question, no resolution); ``autoApprove`` on ``wipe`` is a standing
    approval rule, listed in ``approvalRules``, that answers for the user
    (``source: "rule"``)."""
    guards = [{"match": {"name": "mcp__kit__write"}, "verdict": "allow"}]
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session({
            "model": script(call("mcp__kit__write", text="x"), call("mcp__kit__wipe")),
            "mcpServers": [kit(autoApprove=["wipe"])], "guards": guards})
        await wait_status(events, "kit", "ready")
        rules = (await get_state(client, session)).get("approvalRules") or []
        assert [(r["tool"], r.get("arguments")) for r in rules] == [("mcp__kit__wipe", None)]
        turn = await run_turn(session, events, "go")
    assert turn["asked"] == []
    assert "wrote x" in str(turn["finished"]["mcp__kit__write"]["content"])
    assert "wiped" in str(turn["finished"]["mcp__kit__wipe"]["content"])
    resolved = {turn["finished"][n]["callId"]: n for n in turn["finished"]}
    assert {resolved[c]: d for c, d in turn["resolved"].items()} == {"mcp__kit__wipe": ("approve", "rule")}


@needs_sdk
async def test_confirm_never_never_asks_and_always_asks_even_past_an_allow_guard(tmp_path: Path) -> None:
    """``confirm: "never"``: the unannotated ``write`` and the destructive
    ``wipe`` run unasked. ``confirm: "always"``: the read-only ``echo`` asks,
    and an ``allow`` guard does not lift it."""
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session({
            "model": script(call("mcp__kit__write", text="x"), call("mcp__kit__wipe")), "mcpServers": [kit(confirm="never")]})
        await wait_status(events, "kit", "ready")
        turn = await run_turn(session, events, "go")
        assert turn["asked"] == []
        assert {n: c["outcome"] for n, c in turn["finished"].items()} == {"mcp__kit__write": "ok", "mcp__kit__wipe": "ok"}

        always = await client.open_session({
            "model": script(call("mcp__kit__echo", text="z")), "mcpServers": [kit(confirm="always")],
            "guards": [{"match": {"name": "mcp__kit__echo"}, "verdict": "allow"}]})
        await wait_status(events, "kit", "ready")

        async def approve(event: dict[str, Any]) -> None:
            await always.approve(event["callId"])

        turn = await run_turn(always, events, "go", approve)
    assert [a["name"] for a in turn["asked"]] == ["mcp__kit__echo"]
    assert "echo: z" in str(turn["finished"]["mcp__kit__echo"]["content"])


def other_clients_config(tmp_path: Path) -> dict[str, Any]:
    """One ``agentrpc.json`` holding the entry shapes other clients write."""
    assert MCP2_PYTHON is not None
    return {
        "mcpServers": {
            # Claude Desktop: command/args/env, no type.
            "desktop": {"command": MCP2_PYTHON, "args": [SDK_SERVER], "env": {"X": "1"}},
            # Cline: disabled, autoApprove, timeout (a key agentrpc does not read).
            "cline": {"command": MCP2_PYTHON, "args": [SDK_SERVER], "disabled": True, "autoApprove": ["echo"], "timeout": 60},
            # Cursor: a url and no type is http.
            "cursor": {"url": "http://127.0.0.1:9/mcp"},
            # Windsurf/Cline remote: type streamable-http.
            "remote": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Y": "z"}},
            # VS Code: type sse (deprecated HTTP+SSE), envFile.
            "legacy": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
            # Roo Code: alwaysAllow; VS Code's envFile is another unknown key.
            "roo": {"type": "stdio", "command": MCP2_PYTHON, "args": [SDK_SERVER], "alwaysAllow": ["write"], "envFile": "/nowhere/.env"},
        }
    }


@needs_sdk
async def test_entries_other_clients_write_load_with_warnings(tmp_path: Path) -> None:
    """An ``agentrpc.json`` with Claude Desktop, Cline, Cursor, streamable-http,
    sse and Roo entries starts (no exit 2). The disabled one is ``disabled``,
    the sse one ``failed`` without a start, url-only and streamable-http are
    http, unknown keys are problems of their server, and ``alwaysAllow`` is an
    approval rule that lets ``write`` run unasked."""
    (tmp_path / "agentrpc.json").write_text(json.dumps(other_clients_config(tmp_path)))
    names = ["desktop", "cline", "cursor", "remote", "legacy", "roo"]
    async with spawn_real(tmp_path) as client:
        events = client.notifications("session/event")
        session = await client.open_session({"model": script(call("mcp__roo__write", text="w")), "mcpServers": names})
        statuses = await status_of(events, {"roo", "desktop"})
        assert {name: s["status"] for name, s in statuses.items()} == {"roo": "ready", "desktop": "ready"}
        state = {s["name"]: s for s in (await get_state(client, session))["mcpServers"]}
        assert state["cline"]["status"] == "disabled" and state["cline"]["reason"] == "disabled in its configuration"
        assert "the configuration key 'timeout' is not one agentrpc reads; it was ignored" in state["cline"]["problems"]
        assert state["legacy"]["status"] == "failed" and "HTTP+SSE" in state["legacy"]["reason"]
        assert state["legacy"]["transport"] == "sse"
        assert state["cursor"]["transport"] == "http" and state["remote"]["transport"] == "http"
        assert "the configuration key 'envFile' is not one agentrpc reads; it was ignored" in state["roo"]["problems"]
        assert "problems" not in state["desktop"]
        rules = (await get_state(client, session)).get("approvalRules") or []
        # cline's autoApprove names a tool of a server that is not started: its rule is there all the same.
        assert sorted(r["tool"] for r in rules) == ["mcp__cline__echo", "mcp__roo__write"]
        turn = await run_turn(session, events, "go")
    assert turn["asked"] == []
    assert "wrote w" in str(turn["finished"]["mcp__roo__write"]["content"])


async def test_session_create_takes_the_same_shapes_inline(tmp_path: Path) -> None:
    """The same entries inline in ``session/create`` are accepted; a wrong value
    of a key agentrpc reads is still ``invalidConfiguration`` naming the key."""
    async with spawn_real(tmp_path) as client:
        ok = await client.request("session/create", {
            "model": {"provider": "scripted", "script": []},
            "mcpServers": [
                {"name": "off", "command": "nowhere-such-program", "disabled": True, "autoApprove": ["x"], "timeout": 5},
                {"name": "web", "url": "http://127.0.0.1:9/mcp", "alwaysAllow": ["y"]},
                {"name": "old", "type": "sse", "url": "http://127.0.0.1:9/sse"},
            ]})
        assert ok["sessionId"]
        for bad, field in [
            ({"name": "w", "type": "websocket", "url": "ws://x"}, "mcpServers[0].type"),
            ({"name": "d", "command": "x", "disabled": "yes"}, "mcpServers[0].disabled"),
            ({"name": "c", "command": "x", "confirm": "sometimes"}, "mcpServers[0].confirm"),
            ({"name": "a", "command": "x", "autoApprove": "echo"}, "mcpServers[0].autoApprove"),
        ]:
            with pytest.raises(AgentRPCError) as failure:
                await client.request("session/create", {"model": {"provider": "scripted", "script": []}, "mcpServers": [bad]})
            data = failure.value.data or {}
            assert data.get("kind") in {"invalidParams", "invalidConfiguration"}, failure.value
            assert data.get("field") == field, (field, failure.value, data)


async def test_a_wrong_value_in_agentrpc_json_stops_the_start_naming_the_key(tmp_path: Path) -> None:
    """A known key with a wrong value in ``agentrpc.json`` is still an error at
    start (exit 2), naming ``mcpServers.<name>.<key>``; an unknown key is not."""
    from conftest import real_binary

    binary = real_binary()
    assert binary is not None
    config = tmp_path / "agentrpc.json"
    config.write_text(json.dumps({"mcpServers": {"w": {"command": "x", "disabled": "yes", "timeout": 3}}}))
    done = subprocess.run([binary, "--config", str(config)], input=b"", capture_output=True, timeout=REAL_TIMEOUT)
    assert done.returncode == 2
    assert b"mcpServers.w" in done.stderr and b"disabled" in done.stderr and b"timeout" not in done.stderr
