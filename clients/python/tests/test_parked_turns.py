"""Parked turns against the real binary (docs/protocol.md, "Durable sessions"):
a session created with ``onDisconnect: "park"`` keeps a turn the process left
open, and ``session/continue`` in another process goes on with it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentrpc import Client, ToolContext, scripted, tool

from conftest import REAL_BINARY, requires_real

pytestmark = requires_real

TIMEOUT = 20.0

# Three calls, the third confirmed by the user (confirmation/request), then the answer.
SCRIPT = scripted(
    {"toolCalls": [{"name": "step", "arguments": {"n": 1}}, {"name": "step", "arguments": {"n": 2}},
                   {"name": "guarded", "arguments": {"n": 3}}]},
    {"text": ["all done"]},
)
CONFIG = {
    "model": SCRIPT, "onDisconnect": "park",
    "tools": [{"name": "step"}, {"name": "guarded", "confirmation": "always"}],
}


class Host:
    """The client's side: runs each call at most once, by its idempotency key."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}
        self.results: dict[str, Any] = {}
        self.confirmations = 0
        #: The ``attempt`` of every confirmation/request answered (None: the first time).
        self.confirmation_attempts: list[int | None] = []

    def attach(self, client: Client) -> None:
        client.on_request("tool/call", self.tool_call)
        client.on_request("confirmation/request", self.confirm)

    def tool_call(self, params: Any) -> Any:
        key = params["idempotencyKey"]
        if key in self.results:
            assert params.get("inDoubt") is True, params  # only a call in doubt comes again
            return self.results[key]
        self.runs[key] = self.runs.get(key, 0) + 1
        self.results[key] = {"outcome": "ok", "content": f"ran {params['arguments']['n']}"}
        return self.results[key]

    def confirm(self, params: Any) -> Any:
        self.confirmations += 1
        self.confirmation_attempts.append(params.get("attempt"))
        return {"decision": "approve"}


@contextlib.asynccontextmanager
async def spawn(store: Path, host: Host, env: dict[str, str] | None = None, args: list[str] | None = None) -> AsyncIterator[Client]:
    async with Client.spawn(binary=REAL_BINARY, args=["--store", str(store), *(args or [])], env=env, request_timeout=TIMEOUT,
                            shutdown_timeout=TIMEOUT, capabilities={"tools": True, "confirmations": "request"}) as client:
        host.attach(client)
        yield client


async def kill_when(event: asyncio.Event, client: Client) -> None:
    """Waits (bounded) for ``event``, then SIGKILLs the server and waits until it is gone."""
    async with asyncio.timeout(TIMEOUT):
        await event.wait()
    os.kill(client.pid, signal.SIGKILL)
    async with asyncio.timeout(TIMEOUT):
        while client.returncode is None:
            await asyncio.sleep(0.01)


def shape(transcript: dict[str, Any]) -> list[Any]:
    """The entries without their ids (sessions differ from run to run)."""
    return [{k: v for k, v in e.items() if k not in ("id", "turnId")} for e in transcript["entries"]]


def requested_round_trips(dump: Path) -> list[int]:
    """The round trips the scripted model was asked for, from ``--dump-requests``."""
    if not dump.exists():
        return []
    return [json.loads(line)["roundTrip"] for line in dump.read_text().splitlines() if line.strip()]


#: The deterministic kill instants (docs/testing.md): before the server's Nth
#: journal write, and before the Nth frame it queues for the client.
KILL_HOOKS = {"journal write": "AGENTRPC_TEST_KILL_AT_JOURNAL_WRITE", "frame": "AGENTRPC_TEST_KILL_AT_FRAME"}


@pytest.mark.parametrize("instant", list(KILL_HOOKS))
async def test_a_kill_at_every_instant_then_continue_ends_as_an_uninterrupted_turn(tmp_path: Path, instant: str) -> None:
    """kill -9 at every journal write, and at every frame, of a turn of three
    calls and a confirmation; a new process resumes and continues it. Every
    time: the transcript of an uninterrupted run, no tool run twice (the host
    counts by idempotency key), no round trip asked of the model again once its
    answer was journaled (the requests both processes sent, --dump-requests)."""
    reference_host = Host()
    async with spawn(tmp_path / "reference", reference_host) as client:
        session_id = (await client.request("session/create", CONFIG))["sessionId"]
        reference = await client.request("session/send", {"sessionId": session_id, "input": "go"})
        expected = shape(await client.request("session/getTranscript", {"sessionId": session_id}))
    assert reference["toolCalls"] == 3 and reference["message"]["text"] == "all done"

    continued = 0
    n = 0
    while True:
        n += 1
        assert n <= 120, "the turn wrote more than expected"
        store = tmp_path / f"store-{n}"
        host = Host()
        sid: str | None = None
        first_dump, second_dump = tmp_path / f"first-{n}.jsonl", tmp_path / f"second-{n}.jsonl"
        first: Client | None = None
        try:
            async with spawn(store, host, {KILL_HOOKS[instant]: str(n)}, ["--dump-requests", str(first_dump)]) as first:
                sid = (await first.request("session/create", CONFIG))["sessionId"]
                await first.request("session/send", {"sessionId": sid, "input": "go"})
        except Exception as exc:
            # Killed, possibly before spawn's initialize was answered.
            if first is None:
                assert "-9" in str(exc), exc
            else:
                async with asyncio.timeout(TIMEOUT):
                    while first.returncode is None:
                        await asyncio.sleep(0.01)
                assert first.returncode == -signal.SIGKILL
        else:
            break  # N passed the turn's end: every instant before it was covered
        if sid is None:
            continue
        async with spawn(store, host, None, ["--dump-requests", str(second_dump)]) as second:
            await second.request("session/resume", {"sessionId": sid})
            state = await second.request("session/getState", {"sessionId": sid})
            if "parked" not in state:
                # Killed before the turn's prompt was journaled (nothing to go on with), or after its end.
                assert shape(await second.request("session/getTranscript", {"sessionId": sid})) in ([], expected), n
                continue
            journaled = shape(await second.request("session/getTranscript", {"sessionId": sid}))
            assert state["isRunning"] is False
            result = await second.request("session/continue", {"sessionId": sid})
            continued += 1
            assert result["message"]["text"] == "all done", (n, result)
            assert shape(await second.request("session/getTranscript", {"sessionId": sid})) == expected, n
            assert "parked" not in await second.request("session/getState", {"sessionId": sid})
        # No tool ran twice, whatever the instant.
        assert all(count == 1 for count in host.runs.values()), (n, host.runs)
        assert len(host.runs) == 3, (n, host.runs)
        # A round trip whose answer (its toolCalls or response entry) was journaled is not asked for again.
        answered = {"toolCalls": 1, "response": 2}
        done = max((answered.get(e["type"], 0) for e in journaled), default=0)
        again = requested_round_trips(second_dump)
        assert again == [r for r in (1, 2) if r > done], (n, again, requested_round_trips(first_dump))
    print(f"{instant}: {n - 1} instants, {continued} continued")
    assert continued >= (20 if instant == "frame" else 10), continued


async def close_input_at(n: int, store: Path, host: Host) -> tuple[str | None, bool]:
    """Drives a server over raw stdio (create, send, the host answering every
    tool/call and confirmation/request) and closes its input as the client
    receives its Nth frame, instead of handling that frame. Returns the session
    id (None before session/create was answered) and whether the turn ended first."""
    process = await asyncio.create_subprocess_exec(
        REAL_BINARY, "serve", "--store", str(store), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    stdin = process.stdin

    def write(message: dict[str, Any]) -> None:
        stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())

    write({"id": 1, "method": "initialize", "params": {"protocolVersion": 1, "capabilities": {"tools": True, "confirmations": "request"}}})
    received, sid, ended = 0, None, False
    async with asyncio.timeout(TIMEOUT):
        while line := await process.stdout.readline():
            received += 1
            if received == n:
                stdin.close()  # the client goes away
            if stdin.is_closing():
                continue
            message = json.loads(line)
            answer_to = message.get("id") if "method" not in message else None
            if answer_to == 1:
                write({"id": 2, "method": "session/create", "params": CONFIG})
            elif answer_to == 2:
                sid = message["result"]["sessionId"]
                write({"id": 3, "method": "session/send", "params": {"sessionId": sid, "input": "go"}})
            elif answer_to == 3:
                assert "result" in message, message
                ended = True
                stdin.close()
            elif message.get("method") == "tool/call":
                write({"id": message["id"], "result": host.tool_call(message["params"])})
            elif message.get("method") == "confirmation/request":
                write({"id": message["id"], "result": host.confirm(message["params"])})
        await process.wait()
    return sid, ended


async def test_the_client_closing_its_input_at_every_frame_then_continue_ends_as_an_uninterrupted_turn(tmp_path: Path) -> None:
    """The same turn as above; the client closes its input as it receives its
    Nth frame, for every N; a new process continues the parked turn to the
    transcript of an uninterrupted run, every tool run once."""
    async with spawn(tmp_path / "reference", Host()) as client:
        sid = (await client.request("session/create", CONFIG))["sessionId"]
        await client.request("session/send", {"sessionId": sid, "input": "go"})
        expected = shape(await client.request("session/getTranscript", {"sessionId": sid}))
    continued = 0
    for n in range(1, 121):
        store, host = tmp_path / f"store-{n}", Host()
        session_id, ended = await close_input_at(n, store, host)
        if ended:
            break  # N passed the turn's end
        if session_id is None:
            continue
        async with spawn(store, host) as second:
            await second.request("session/resume", {"sessionId": session_id})
            if "parked" not in await second.request("session/getState", {"sessionId": session_id}):
                # Gone before the send was read, or after the turn had ended.
                assert shape(await second.request("session/getTranscript", {"sessionId": session_id})) in ([], expected), n
                continue
            result = await second.request("session/continue", {"sessionId": session_id})
            continued += 1
            assert result["message"]["text"] == "all done", (n, result)
            assert shape(await second.request("session/getTranscript", {"sessionId": session_id})) == expected, n
        assert all(count == 1 for count in host.runs.values()) and len(host.runs) == 3, (n, host.runs)
    else:
        raise AssertionError("the turn sent more frames than expected")
    print(f"closing input: {n - 1} instants, {continued} continued")
    assert continued >= 15, continued


async def test_cancel_of_a_parked_turn_ends_it_and_a_send_waits_for_it(tmp_path: Path) -> None:
    host = Host()
    waiting = asyncio.Event()

    async def hold(params: Any) -> Any:
        waiting.set()
        await asyncio.Event().wait()

    store = tmp_path / "store"
    async with spawn(store, host) as first:
        first.on_request("tool/call", hold)
        sid = (await first.request("session/create", CONFIG))["sessionId"]
        running = asyncio.create_task(first.request("session/send", {"sessionId": sid, "input": "go"}))
        await kill_when(waiting, first)
        running.cancel()
    async with spawn(store, host) as second:
        resumed = await second.request("session/resume", {"sessionId": sid})
        assert "interruptedTurn" not in resumed
        state = await second.request("session/getState", {"sessionId": sid})
        assert [(p["name"], p["state"]) for p in state["parked"]["pendingRequests"]] == [
            ("step", "inDoubt"), ("step", "notSent"), ("guarded", "notSent")]
        try:
            await second.request("session/send", {"sessionId": sid, "input": "again"})
            raise AssertionError("a send went past a parked turn")
        except Exception as exc:
            assert "parked" in str(exc)
        assert (await second.request("session/cancel", {"sessionId": sid}))["wasRunning"] is True
        state = await second.request("session/getState", {"sessionId": sid})
        assert "parked" not in state
        entries = (await second.request("session/getTranscript", {"sessionId": sid}))["entries"]
        assert [e["type"] for e in entries] == ["prompt"]  # keepCompleted: no call was answered


@pytest.mark.parametrize("wait_at", ["step 1", "step 2", "confirmation", "guarded 3"])
async def test_a_client_that_goes_away_while_a_request_waits_parks_the_turn(tmp_path: Path, wait_at: str) -> None:
    """The client closes (shutdown, end of input) while the turn waits on one of
    its requests; a new process continues the turn to the uninterrupted end."""
    async with spawn(tmp_path / "reference", Host()) as client:
        sid = (await client.request("session/create", CONFIG))["sessionId"]
        await client.request("session/send", {"sessionId": sid, "input": "go"})
        expected = shape(await client.request("session/getTranscript", {"sessionId": sid}))

    host = Host()
    waiting = asyncio.Event()
    store = tmp_path / "store"

    def holding(answer: Any, here: str) -> Any:
        async def handler(params: Any) -> Any:
            # A tool/call names its call; confirmation/request carries no key.
            name = f"{params['name']} {params['arguments']['n']}" if "idempotencyKey" in params else "confirmation"
            if name == here:
                waiting.set()
                await asyncio.Event().wait()  # the client goes away meanwhile
            return answer(params)
        return handler

    async with spawn(store, host) as first:
        first.on_request("tool/call", holding(host.tool_call, wait_at))
        first.on_request("confirmation/request", holding(host.confirm, wait_at))
        sid = (await first.request("session/create", CONFIG))["sessionId"]
        running = asyncio.create_task(first.request("session/send", {"sessionId": sid, "input": "go"}))
        async with asyncio.timeout(TIMEOUT):
            await waiting.wait()
    # Leaving the block closed the client's side: the server parked the turn and exited.
    with contextlib.suppress(Exception):
        await running
    async with spawn(store, host) as second:
        await second.request("session/resume", {"sessionId": sid})
        state = await second.request("session/getState", {"sessionId": sid})
        assert state["parked"]["turnId"] and state["isRunning"] is False
        result = await second.request("session/continue", {"sessionId": sid})
        assert result["message"]["text"] == "all done"
        assert shape(await second.request("session/getTranscript", {"sessionId": sid})) == expected
    assert all(count == 1 for count in host.runs.values()) and len(host.runs) == 3, host.runs


async def test_the_python_client_resumes_a_parked_turn_and_continues_it_with_its_tools(tmp_path: Path) -> None:
    store = tmp_path / "store"
    held = asyncio.Event()

    async def hold(params: Any) -> Any:
        held.set()
        await asyncio.Event().wait()

    async with Client.spawn(binary=REAL_BINARY, args=["--store", str(store)], request_timeout=TIMEOUT,
                            capabilities={"tools": True}) as first:
        first.on_request("tool/call", hold)
        sid = (await first.request("session/create", {
            "model": scripted({"toolCalls": [{"name": "step", "arguments": {"n": 1}}]}, {"text": ["ok"]}),
            "tools": [{"name": "step", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}],
            "onDisconnect": "park"}))["sessionId"]
        running = asyncio.create_task(first.request("session/send", {"sessionId": sid, "input": "go"}))
        await kill_when(held, first)
        running.cancel()

    seen: list[ToolContext] = []

    @tool
    def step(n: int, ctx: ToolContext) -> str:
        """One step."""
        seen.append(ctx)
        return f"ran {n}"

    async with Client.spawn(binary=REAL_BINARY, args=["--store", str(store)], request_timeout=TIMEOUT) as second:
        session = await second.resume_session(sid, tools=[step])
        assert session.parked is not None and session.interrupted_turn is None
        assert [(p.name, p.state) for p in session.parked.pending_requests] == [("step", "inDoubt")]
        result = await session.continue_turn()
        assert result.message is not None and result.message.text == "ok" and result.tool_calls == 1
        assert session.parked is None
    [ctx] = seen
    assert ctx.in_doubt is True and ctx.attempt == 2
    assert ctx.idempotency_key == f"{sid}/{ctx.turn_id}/1/{ctx.call_id}"


TWO_DAYS = 2 * 24 * 60 * 60


async def leave_at_the_confirmation(store: Path, host: Host, config: dict[str, Any]) -> tuple[str, list[Any]]:
    """A first process runs the turn until the third call's confirmation is
    asked, and its client goes away then (the turn parks). Returns the session
    id and the confirmation/request params that were never answered."""
    asked, first_asked = asyncio.Event(), list[Any]()

    async def hold(params: Any) -> Any:
        first_asked.append(params)
        asked.set()
        await asyncio.Event().wait()

    async with spawn(store, host) as first:
        first.on_request("confirmation/request", hold)
        sid = (await first.request("session/create", config))["sessionId"]
        running = asyncio.create_task(first.request("session/send", {"sessionId": sid, "input": "go"}))
        async with asyncio.timeout(TIMEOUT):
            await asked.wait()
    with contextlib.suppress(Exception):
        await running
    return sid, first_asked


@pytest.mark.parametrize("ttl_days", [None, 3, 1])
async def test_a_parked_confirmation_answered_two_days_later_in_another_process(tmp_path: Path, ttl_days: int | None) -> None:
    """The client goes away while the confirmation of the third call waits; a
    second process whose clock reads two days later (AGENTRPC_TEST_CLOCK_OFFSET_SECONDS)
    asks it again and the turn ends as an uninterrupted one, unless
    ``limits.parkedTTLSeconds`` is shorter than two days: then the resume ends
    the turn as cancelled and nothing is asked again."""
    config: dict[str, Any] = dict(CONFIG)
    if ttl_days is not None:
        config["limits"] = {"parkedTTLSeconds": ttl_days * 24 * 60 * 60}
    host = Host()
    store = tmp_path / "store"
    sid, first_asked = await leave_at_the_confirmation(store, host, config)
    assert host.confirmations == 0 and len(host.runs) == 2

    ended: list[Any] = []
    async with spawn(store, host, {"AGENTRPC_TEST_CLOCK_OFFSET_SECONDS": str(TWO_DAYS)}) as later:
        later.on_notification("session/event", lambda params: ended.append(params["event"]) if params["event"]["type"] == "turnEnded" else None)
        resumed = await later.request("session/resume", {"sessionId": sid})
        state = await later.request("session/getState", {"sessionId": sid})
        if ttl_days == 1:
            assert "parkedTurn" not in resumed and "parked" not in state
            assert [(e["status"], e["error"]["data"]["source"]) for e in ended] == [("cancelled", "parkedTTLSeconds")]
            try:
                await later.request("session/continue", {"sessionId": sid})
                raise AssertionError("an expired turn was continued")
            except Exception as exc:
                assert "no parked turn" in str(exc)
            entries = (await later.request("session/getTranscript", {"sessionId": sid}))["entries"]
            # keepCompleted: the two answered calls stay, the unanswered third is trimmed.
            assert [e["type"] for e in entries] == ["prompt", "toolCalls", "toolOutput", "toolOutput"]
            assert host.confirmations == 0
            return
        assert [(p["name"], p["state"]) for p in resumed["parkedTurn"]["pendingRequests"]] == [("guarded", "notSent")]
        result = await later.request("session/continue", {"sessionId": sid})
        assert result["message"]["text"] == "all done" and result["toolCalls"] == 3
    # Asked the first time without attempt, again two days later as the second.
    assert "attempt" not in first_asked[0] and host.confirmation_attempts == [2]
    assert all(count == 1 for count in host.runs.values()) and len(host.runs) == 3, host.runs


async def test_a_ttl_and_test_hooks_out_of_range_are_refused(tmp_path: Path) -> None:
    async with spawn(tmp_path / "store", Host()) as client:
        try:
            await client.request("session/create", {**CONFIG, "limits": {"parkedTTLSeconds": 0}})
            raise AssertionError("a TTL of 0 was taken")
        except Exception as exc:
            assert "limits.parkedTTLSeconds" in str(exc)
    for variable, bad in [("AGENTRPC_TEST_CLOCK_OFFSET_SECONDS", "abc"), ("AGENTRPC_TEST_CLOCK_OFFSET_SECONDS", "-1"),
                          ("AGENTRPC_TEST_CLOCK_OFFSET_SECONDS", "1e12"), ("AGENTRPC_TEST_KILL_AT_FRAME", "0")]:
        process = await asyncio.create_subprocess_exec(
            REAL_BINARY, "serve", "--store", str(tmp_path / "store"), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, variable: bad})
        async with asyncio.timeout(TIMEOUT):
            _, stderr = await process.communicate(b"")
        assert process.returncode == 2 and variable.encode() in stderr, (variable, bad, stderr)


@pytest.mark.parametrize("tool_name", ["lookup", "charge"])
async def test_an_mcp_call_in_doubt_is_sent_again_only_to_an_idempotent_tool(tmp_path: Path, tool_name: str) -> None:
    """The server is killed while an MCP server runs the call; continuing in a new
    process sends it again to ``lookup`` (idempotentHint: true), while ``charge``
    gets a failed outcome saying the call may have run, and is not run again."""
    import sys
    log, hold = tmp_path / "calls.log", tmp_path / "hold"
    hold.write_text("")
    server = {"name": "shop", "command": sys.executable, "args": [str(Path(__file__).parent / "mcp_in_doubt_server.py")],
              "env": {"MCP_TEST_LOG": str(log), "MCP_TEST_HOLD": str(hold)}, "confirm": "never"}
    config = {
        "model": scripted({"toolCalls": [{"name": f"mcp__shop__{tool_name}", "arguments": {}}]}, {"text": ["paid"]}),
        "onDisconnect": "park", "mcpServers": [server]}
    store = tmp_path / "store"
    async with spawn(store, Host()) as first:
        sid = (await first.request("session/create", config))["sessionId"]
        running = asyncio.create_task(first.request("session/send", {"sessionId": sid, "input": "go"}))
        async with asyncio.timeout(TIMEOUT):
            while not log.exists() or log.read_text() != f"{tool_name}\n":
                await asyncio.sleep(0.01)
        os.kill(first.pid, signal.SIGKILL)
        async with asyncio.timeout(TIMEOUT):
            while first.returncode is None:
                await asyncio.sleep(0.01)
        running.cancel()
    hold.unlink()
    finished: list[Any] = []
    async with spawn(store, Host()) as second:
        second.on_notification("session/event", lambda p: finished.append(p["event"]) if p["event"]["type"] == "toolCallFinished" else None)
        # A server's env is not stored (it may hold credentials): the resume names it again.
        resumed = await second.request("session/resume", {"sessionId": sid, "mcpServers": [server]})
        assert [(p["name"], p["state"]) for p in resumed["parkedTurn"]["pendingRequests"]] == [(f"mcp__shop__{tool_name}", "inDoubt")]
        result = await second.request("session/continue", {"sessionId": sid})
        assert result["message"]["text"] == "paid"
    [call] = finished
    if tool_name == "lookup":
        assert (call["outcome"], call["content"]) == ("ok", "lookup done"), call
        assert log.read_text() == "lookup\nlookup\n"
    else:
        assert call["outcome"] == "failed" and "may have run" in call["content"], call
        assert log.read_text() == "charge\n"


async def test_session_park_parks_a_waiting_turn_and_continue_turn_goes_on(tmp_path: Path) -> None:
    """The Python client's ``session.park()``: the turn waits on a tool call, is
    parked (the send raises, source ``session/park``), ``session.parked`` names
    the call in doubt, and ``continue_turn()`` sends it again and ends the turn."""
    seen: list[ToolContext] = []
    held = asyncio.Event()

    @tool
    async def step(n: int, ctx: ToolContext) -> str:
        """One step."""
        seen.append(ctx)
        if len(seen) == 1:
            held.set()
            await asyncio.Event().wait()  # still running when the park comes
        return f"ran {n}"

    async with Client.spawn(binary=REAL_BINARY, args=["--store", str(tmp_path / "store")], request_timeout=TIMEOUT) as client:
        session = await client.open_session({
            "model": scripted({"toolCalls": [{"name": "step", "arguments": {"n": 1}}]}, {"text": ["ok"]}),
            "onDisconnect": "park"}, tools=[step])
        running = asyncio.create_task(session.send("go"))
        async with asyncio.timeout(TIMEOUT):
            await held.wait()
        parked = await session.park()
        assert parked is not None and session.parked == parked
        assert [(p.name, p.state) for p in parked.pending_requests] == [("step", "inDoubt")]
        with pytest.raises(Exception) as raised:
            await running
        assert "parked" in str(raised.value)
        result = await session.continue_turn()
        assert result.message is not None and result.message.text == "ok"
        assert await session.park() is None  # nothing runs now
    assert [c.attempt for c in seen] == [1, 2]


async def test_a_turn_loaded_parked_ends_when_its_ttl_runs_out_by_the_engines_clock(tmp_path: Path) -> None:
    """A turn parked by one process (its client went away during the
    confirmation) and loaded by another whose clock reads a day, less five
    seconds, later: with ``limits.parkedTTLSeconds`` of a day the resume finds
    it still parked, and a few seconds later, unasked, the server ends it as
    cancelled (``data.source: "parkedTTLSeconds"``) — the TTL counts in a live
    process, by the engine's clock (AGENTRPC_TEST_CLOCK_OFFSET_SECONDS)."""
    day = 24 * 60 * 60
    config = {**CONFIG, "limits": {"parkedTTLSeconds": day}}
    host, store = Host(), tmp_path / "store"
    sid, _ = await leave_at_the_confirmation(store, host, config)

    ended: list[Any] = []
    gone = asyncio.Event()

    def note(params: Any) -> None:
        if params["event"]["type"] == "turnEnded":
            ended.append(params["event"])
            gone.set()

    async with spawn(store, host, {"AGENTRPC_TEST_CLOCK_OFFSET_SECONDS": str(day - 5)}) as later:
        later.on_notification("session/event", note)
        resumed = await later.request("session/resume", {"sessionId": sid})
        assert [(p["name"], p["state"]) for p in resumed["parkedTurn"]["pendingRequests"]] == [("guarded", "notSent")]
        async with asyncio.timeout(TIMEOUT):
            await gone.wait()
        assert [(e["status"], e["error"]["data"]["source"]) for e in ended] == [("cancelled", "parkedTTLSeconds")]
        assert "parked" not in await later.request("session/getState", {"sessionId": sid})
        entries = (await later.request("session/getTranscript", {"sessionId": sid}))["entries"]
        # keepCompleted: the two answered calls stay, the unconfirmed third is trimmed.
        assert [e["type"] for e in entries] == ["prompt", "toolCalls", "toolOutput", "toolOutput"]
    assert host.confirmations == 0


async def test_the_ttl_ends_neither_a_turn_continued_in_time_nor_one_whose_session_closed(tmp_path: Path) -> None:
    """Three sessions with a TTL of a second, parked one after the other by
    ``session/park`` while a tool call waits: the first is continued at once
    (its call waits past its TTL), the second is closed, the third is left
    alone. Once the third has ended by its TTL (both others' deadlines have
    passed by then) the first goes on to its end, and the second was not ended
    in that process: the next resume finds it in its journal, past its TTL."""
    config = {"model": scripted({"toolCalls": [{"name": "step", "arguments": {"n": 1}}]}, {"text": ["ok"]}),
              "tools": [{"name": "step"}], "onDisconnect": "park", "limits": {"parkedTTLSeconds": 1}}
    waiting: dict[str, asyncio.Event] = {}
    release = asyncio.Event()
    held_once: set[str] = set()

    async def step(params: Any) -> Any:
        sid = params["sessionId"]
        waiting.setdefault(sid, asyncio.Event()).set()
        if sid not in held_once:
            held_once.add(sid)
            await asyncio.Event().wait()  # parked meanwhile
        await release.wait()
        return {"outcome": "ok", "content": "ran"}

    ended: dict[str, list[Any]] = {}
    third_ended = asyncio.Event()
    store = tmp_path / "store"
    async with spawn(store, Host()) as client:
        client.on_request("tool/call", step)
        sids = [(await client.request("session/create", config))["sessionId"] for _ in range(3)]

        def note(params: Any) -> None:
            if params["event"]["type"] == "turnEnded":
                ended.setdefault(params["sessionId"], []).append(params["event"])
                if params["sessionId"] == sids[2]:
                    third_ended.set()

        client.on_notification("session/event", note)
        sends = []
        for sid in sids:
            waiting[sid] = asyncio.Event()
            sends.append(asyncio.create_task(client.request("session/send", {"sessionId": sid, "input": "go"})))
            async with asyncio.timeout(TIMEOUT):
                await waiting[sid].wait()
            assert (await client.request("session/park", {"sessionId": sid}))["parked"]["pendingRequests"][0]["state"] == "inDoubt"
            if sid == sids[0]:
                waiting[sid] = asyncio.Event()
                continued = asyncio.create_task(client.request("session/continue", {"sessionId": sid}))
                async with asyncio.timeout(TIMEOUT):
                    await waiting[sid].wait()  # the call is out again: the turn runs
            elif sid == sids[1]:
                await client.request("session/close", {"sessionId": sid})
        async with asyncio.timeout(TIMEOUT):
            await third_ended.wait()
        assert [(e["status"], e["error"]["data"]["source"]) for e in ended[sids[2]]] == [("cancelled", "parkedTTLSeconds")]
        release.set()
        result = await continued
        assert result["message"]["text"] == "ok"
        assert [e["status"] for e in ended[sids[0]]] == ["completed"]
        assert sids[1] not in ended
        for send in sends:
            with contextlib.suppress(Exception):
                await send
    # The closed session's turn is still open in its journal: the next resume finds it past its TTL.
    later: list[Any] = []
    async with spawn(store, Host()) as again:
        again.on_notification("session/event", lambda p: later.append(p["event"]) if p["event"]["type"] == "turnEnded" else None)
        resumed = await again.request("session/resume", {"sessionId": sids[1]})
        assert "parkedTurn" not in resumed
        assert [(e["status"], e["error"]["data"]["source"]) for e in later] == [("cancelled", "parkedTTLSeconds")]


@pytest.mark.parametrize("method", ["session/send", "session/generate"])
async def test_a_generate_turn_killed_in_a_session_that_parks_is_recovered_not_parked(tmp_path: Path, method: str) -> None:
    """kill -9 while the model answers, in a session that parks: a send's turn
    is found parked by the next process, a session/generate turn (which never
    parks) is recovered as an interrupted one, as in a session that cancels."""
    config = {"model": scripted({"delayMs": 60000, "text": ["{}"]}), "onDisconnect": "park"}
    params: dict[str, Any] = {"input": "go"}
    if method == "session/generate":
        params["schema"] = {"type": "object"}
    asking = asyncio.Event()
    store = tmp_path / "store"
    async with spawn(store, Host()) as first:
        first.on_notification("session/event", lambda p: asking.set() if p["event"]["type"] == "requestStarted" else None)
        sid = (await first.request("session/create", config))["sessionId"]
        running = asyncio.create_task(first.request(method, {"sessionId": sid, **params}))
        await kill_when(asking, first)
        running.cancel()
    async with spawn(store, Host()) as second:
        resumed = await second.request("session/resume", {"sessionId": sid})
        if method == "session/send":
            assert "interruptedTurn" not in resumed and resumed["parkedTurn"]["pendingRequests"] == []
            return
        assert "parkedTurn" not in resumed and resumed["interruptedTurn"]["turnId"]
        assert "parked" not in await second.request("session/getState", {"sessionId": sid})
        with pytest.raises(Exception, match="no parked turn"):
            await second.request("session/continue", {"sessionId": sid})



@pytest.mark.parametrize("how", ["session/park", "kill -9"])
@pytest.mark.parametrize("hook", ["onPrompt", "onActivate", "onToolOutput", "onResponse"])
async def test_a_client_hook_that_had_no_answer_is_asked_again_by_continue(tmp_path: Path, hook: str, how: str) -> None:
    """The turn parks while a client hook waits (session/park, or kill -9 and
    a new process); session/continue asks that hook again first (hookFired,
    then hook/call with the same payload) and the turn ends as an
    uninterrupted one. These four are hooks a continued turn's flow would not
    come back to: without the journal's hookAsked they were skipped, a veto
    never heard."""
    config = {"model": scripted({"toolCalls": [{"name": "step", "arguments": {"n": 1}}]}, {"text": ["all done"]}),
              "tools": [{"name": "step"}], "onDisconnect": "park",
              "profiles": {"cases": {"main": {"instructions": ["Work."], "tools": ["step"]}},
                           "defaults": {"hooks": {hook: [{"client": True}]}}}}
    asked: list[tuple[str, Any]] = []
    fired: list[str] = []
    hold = {"next": False}
    holding = asyncio.Event()

    async def hook_call(params: Any) -> Any:
        asked.append((params["hook"], params["payload"]))
        if hold["next"]:
            hold["next"] = False
            holding.set()
            await asyncio.Event().wait()  # no answer: the turn parks meanwhile
        return {}

    def spawn_hooked(store: Path, host: Host) -> Any:
        @contextlib.asynccontextmanager
        async def run() -> AsyncIterator[Client]:
            async with Client.spawn(binary=REAL_BINARY, args=["--store", str(store)], request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT,
                                    capabilities={"tools": True, "hooks": True}) as client:
                host.attach(client)
                client.on_request("hook/call", hook_call)
                client.on_notification("session/event", lambda p: fired.append(p["event"]["hook"]) if p["event"]["type"] == "hookFired" else None)
                yield client
        return run()

    async with spawn_hooked(tmp_path / "reference", Host()) as client:
        sid = (await client.request("session/create", config))["sessionId"]
        await client.request("session/send", {"sessionId": sid, "input": "go"})
        expected = shape(await client.request("session/getTranscript", {"sessionId": sid}))
    [(reference_hook, reference_payload)] = asked
    assert reference_hook == hook
    asked.clear()

    async def go_on(client: Client, sid: str) -> None:
        fired.clear()
        result = await client.request("session/continue", {"sessionId": sid})
        assert result["message"]["text"] == "all done"
        assert shape(await client.request("session/getTranscript", {"sessionId": sid})) == expected

    store, host = tmp_path / "store", Host()
    hold["next"] = True
    async with spawn_hooked(store, host) as first:
        sid = (await first.request("session/create", config))["sessionId"]
        running = asyncio.create_task(first.request("session/send", {"sessionId": sid, "input": "go"}))
        if how == "kill -9":
            await kill_when(holding, first)
            running.cancel()
        else:
            async with asyncio.timeout(TIMEOUT):
                await holding.wait()
            parked = await first.request("session/park", {"sessionId": sid})
            assert parked["wasRunning"] is True and parked["parked"]["turnId"]
            with pytest.raises(Exception, match="parked"):
                await running
            await go_on(first, sid)
    if how == "kill -9":
        async with spawn_hooked(store, host) as second:
            resumed = await second.request("session/resume", {"sessionId": sid})
            assert "parkedTurn" in resumed
            await go_on(second, sid)
    # Asked, withdrawn or lost with the process, then asked again first, alike
    # (ids differ from the reference run's: the payload's members do not).
    assert [h for h, _ in asked] == [hook, hook] and asked[0][1] == asked[1][1], asked
    assert set(asked[0][1]) == set(reference_payload), (asked, reference_payload)
    assert fired[0] == hook
    assert all(count == 1 for count in host.runs.values()) and len(host.runs) == 1, host.runs
