"""Durable sessions against the real binary (docs/protocol.md, "Durable sessions").

Each test spawns real ``agentrpc`` processes on a private store, kills them
with SIGKILL where the issue says so, and checks what a new process loads.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
from pathlib import Path
from typing import Any

import pytest

from agentrpc import Client, InterruptedTurn, SessionList, Usage, scripted
from agentrpc.errors import InvalidParams, JournalUnreadable, ProviderError, SessionBusy, SessionLocked, SessionNotFound

from conftest import REAL_BINARY, requires_real

pytestmark = requires_real

TIMEOUT = 20.0


def spawn(store: Path, **kwargs: Any) -> Any:
    kwargs.setdefault("request_timeout", TIMEOUT)
    kwargs.setdefault("shutdown_timeout", TIMEOUT)
    kwargs.setdefault("capabilities", {"tools": True})
    return Client.spawn(binary=REAL_BINARY, args=["--store", str(store)], **kwargs)


async def kill(client: Client) -> None:
    """SIGKILL the server and wait until it is gone (nothing it did after is seen)."""
    os.kill(client.pid, signal.SIGKILL)
    async with asyncio.timeout(TIMEOUT):
        while client.returncode is None:
            await asyncio.sleep(0.01)


async def until(predicate: Any, what: str) -> Any:
    """Waits (bounded) until ``await predicate()`` is truthy; returns it."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            value = await predicate()
            if value:
                return value
            await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")  # pragma: no cover


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def journal(store: Path, session_id: str) -> Path:
    return store / f"{session_id}.jsonl"


# -- kill -9 at the moments the issue names ----------------------------------------


async def test_kill_mid_stream_keeps_everything_announced_as_final(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with spawn(store) as first:
        session = await first.create_session(
            model=scripted({"text": ["first answer"]}, {"text": ["partial"], "stall": True}))
        await session.send("one")
        running = asyncio.create_task(session.send("two"))
        await until(lambda: _current_text(first, session.id, "partial"), "the second turn to stream")
        announced = await first.get_transcript(session.id)
        await kill(first)
        running.cancel()
    async with spawn(store) as second:
        resumed = await second.resume_session(session.id)
        assert isinstance(resumed.interrupted_turn, InterruptedTurn)
        assert resumed.interrupted_turn.undo == [] and resumed.interrupted_turn.undo_outcome == "none"
        # Byte for byte: the prompt of the cut turn was announced, its streamed text was not final.
        assert canonical(await second.get_transcript(session.id)) == canonical(announced)
        assert [e["type"] for e in announced["entries"]] == ["prompt", "response", "prompt"]


async def _current_text(client: Client, session_id: str, text: str) -> bool:
    return (await client.get_state(session_id)).get("currentText") == text


async def test_kill_while_tool_call_waits_then_resume_rolls_back(tmp_path: Path) -> None:
    store = tmp_path / "store"
    waiting = asyncio.Event()

    async def answer_tool(params: Any) -> Any:
        if params["name"] == "mark":
            return {"outcome": "ok", "content": "marked", "undo": {"unmark": params["callId"]}}
        waiting.set()
        await asyncio.Event().wait()  # never answers: the process is killed meanwhile

    async with spawn(store) as first:
        first.on_request("tool/call", answer_tool)
        result = await first.request("session/create", {
            "model": scripted({"toolCalls": [{"name": "mark", "arguments": {}}, {"name": "wait", "arguments": {}}]}, {"text": ["done"]}),
            "tools": [{"name": "mark"}, {"name": "wait"}],
        })
        session_id = result["sessionId"]
        running = asyncio.create_task(first.request("session/send", {"sessionId": session_id, "input": "go"}))
        async with asyncio.timeout(TIMEOUT):
            await waiting.wait()
        announced = await first.get_transcript(session_id)
        await kill(first)
        running.cancel()
    # What was announced: the prompt, both calls, the first call's output.
    assert [e["type"] for e in announced["entries"]] == ["prompt", "toolCalls", "toolOutput"]

    undone: list[Any] = []
    async with spawn(store) as second:
        second.on_request("tool/undo", lambda params: undone.append(params) or {})
        resumed = await second.resume_session(session_id, rollback=True)
        turn = resumed.interrupted_turn
        assert turn is not None and turn.undo_outcome == "rolledBack"
        assert [(u.name, u.undo) for u in turn.undo] == [("mark", {"unmark": turn.undo[0].call_id})]
        assert [(u["name"], u["undo"]) for u in undone] == [("mark", {"unmark": turn.undo[0].call_id})]
        # keepCompleted: the call whose output never came is dropped, the completed exchange stays.
        entries = (await second.get_transcript(session_id))["entries"]
        assert [e["type"] for e in entries] == ["prompt", "toolCalls", "toolOutput"]
        assert [c["name"] for c in entries[1]["calls"]] == ["mark"]
        assert entries[2] == announced["entries"][2]
        await second.close_session(session_id)
        # The recovery was recorded: a second load finds the turn ended.
        again = await second.resume_session(session_id)
        assert again.interrupted_turn is None


THREE_CALLS = scripted(
    {"toolCalls": [{"name": "step", "arguments": {"n": 1}}, {"name": "step", "arguments": {"n": 2}},
                   {"name": "step", "arguments": {"n": 3}}]},
    {"text": ["done"]},
)


async def test_kill_while_the_second_of_three_calls_waits_reports_each_calls_state(tmp_path: Path) -> None:
    """The journal records each call's send before the call leaves: the call the
    client holds is in doubt, the one before it completed, the one after it not sent."""
    store = tmp_path / "store"
    received: list[Any] = []
    waiting = asyncio.Event()

    async def answer_tool(params: Any) -> Any:
        received.append(params)
        if params["arguments"]["n"] == 1:
            return {"outcome": "ok", "content": "one"}
        waiting.set()
        await asyncio.Event().wait()  # never answers: the process is killed meanwhile

    async with spawn(store) as first:
        first.on_request("tool/call", answer_tool)
        result = await first.request("session/create", {"model": THREE_CALLS, "tools": [{"name": "step"}]})
        session_id = result["sessionId"]
        running = asyncio.create_task(first.request("session/send", {"sessionId": session_id, "input": "go"}))
        async with asyncio.timeout(TIMEOUT):
            await waiting.wait()
        await kill(first)
        running.cancel()
    # Every call names itself for good: session, turn, round trip, call id.
    assert [p["idempotencyKey"] for p in received] == [
        f"{session_id}/{p['turnId']}/1/{p['callId']}" for p in received]
    async with spawn(store) as second:
        turn = (await second.resume_session(session_id)).interrupted_turn
        assert turn is not None and turn.turn_id == received[0]["turnId"]
        assert [(c.call_id, c.name, c.state) for c in turn.calls[:2]] == [
            (received[0]["callId"], "step", "completed"), (received[1]["callId"], "step", "inDoubt")]
        assert turn.calls[2].state == "notSent" and len(turn.calls) == 3 and len(received) == 2


async def test_a_kill_at_any_journal_write_never_reports_a_sent_call_as_not_sent(tmp_path: Path) -> None:
    """AGENTRPC_TEST_KILL_AT_JOURNAL_WRITE=N stops the server just before its Nth
    journal write; at every N over a turn of three calls, what a new process reports
    agrees with what the client saw: a call it received is never ``notSent``, a call
    it never received is never ``inDoubt`` or ``completed``."""
    n = 0
    seen_states: set[str] = set()
    while True:
        n += 1
        assert n <= 60, "the turn wrote more journal records than expected"
        store = tmp_path / f"store-{n}"
        received: list[str] = []
        session_id: str | None = None

        def answer_tool(params: Any) -> Any:
            received.append(params["callId"])
            return {"outcome": "ok", "content": str(params["arguments"]["n"])}

        async with spawn(store, env={"AGENTRPC_TEST_KILL_AT_JOURNAL_WRITE": str(n)}) as first:
            first.on_request("tool/call", answer_tool)
            try:
                result = await first.request("session/create", {"model": THREE_CALLS, "tools": [{"name": "step"}]})
                session_id = result["sessionId"]
                await first.request("session/send", {"sessionId": session_id, "input": "go"})
            except Exception:  # the server died under the request
                async with asyncio.timeout(TIMEOUT):
                    while first.returncode is None:
                        await asyncio.sleep(0.01)
                assert first.returncode == -signal.SIGKILL
            else:
                break  # the whole turn ran before the Nth write: every instant was covered
        if session_id is None:
            continue  # killed before the session was created
        async with spawn(store) as second:
            turn = (await second.resume_session(session_id)).interrupted_turn
            for call in (turn.calls if turn is not None else []):
                seen_states.add(call.state)
                if call.state == "notSent":
                    assert call.call_id not in received, (n, call)
                else:
                    assert call.call_id in received, (n, call)
    # The instants covered all three states.
    assert seen_states == {"completed", "inDoubt", "notSent"}


async def test_kill_during_mutate_transcript_loads_before_or_after(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with spawn(store) as first:
        session = await first.create_session(model=scripted({"text": ["a"]}, {"text": ["b"]}))
        await session.send("one")
        await session.send("two")
        before = await first.get_transcript(session.id)
        # Answered: the mutation is final and must survive.
        await session.mutate_transcript({"op": "remove", "ids": [before["entries"][3]["id"]]})
        answered = await first.get_transcript(session.id)
        # Not awaited: killed while the server may be applying it.
        await first.notify("session/mutateTranscript", {"sessionId": session.id, "operations": [{"op": "truncateAfter", "id": None}]})
        await kill(first)
    async with spawn(store) as second:
        await second.resume_session(session.id)
        loaded = await second.get_transcript(session.id)
        emptied = dict(answered, entries=[], revision=answered["revision"] + 1)
        assert canonical(loaded) in (canonical(answered), canonical(emptied))


async def test_usage_totals_are_the_same_after_kill_and_resume(tmp_path: Path) -> None:
    """The usage of every ended turn (completed and failed) is part of the stored
    state; the turn the kill cut had not ended, so it is in neither."""
    store = tmp_path / "store"
    async with spawn(store) as first:
        first.on_request("tool/call", lambda params: {"outcome": "ok", "content": "done"})
        session = await first.create_session(
            model=scripted(
                {"text": ["one"], "usage": {"inputTokens": 12, "outputTokens": 3}},
                # The second turn fails after one round trip: its usage so far counts.
                {"toolCalls": [{"name": "step", "arguments": {}}], "usage": {"inputTokens": 20, "outputTokens": 5, "reasoningTokens": 2}},
                {"error": {"code": "badRequest"}},
                {"text": ["partial"], "stall": True},
            ),
            tools=[{"name": "step"}],
        )
        assert (await session.state()).usage_totals is None
        await session.send("one")
        with pytest.raises(ProviderError):
            await session.send("two")
        running = asyncio.create_task(session.send("three"))
        await until(lambda: _current_text(first, session.id, "partial"), "the third turn to stream")
        live = await session.state()
        await kill(first)
        running.cancel()
    # contextTokens is the last round trip's reading, not a sum.
    assert live.usage_totals == Usage(input_tokens=32, output_tokens=8, reasoning_tokens=2, context_tokens=25)
    async with spawn(store) as second:
        resumed = await second.resume_session(session.id)
        assert resumed.interrupted_turn is not None
        loaded = await resumed.state()
        assert loaded.raw["usageTotals"] == live.raw["usageTotals"] == {"inputTokens": 32, "outputTokens": 8, "reasoningTokens": 2, "contextTokens": 25}
        # And again after a clean close, from the journal the recovery extended.
        await second.close_session(session.id)
        again = await (await second.resume_session(session.id)).state()
        assert again.usage_totals == live.usage_totals


# -- damaged journals ------------------------------------------------------------


async def test_torn_last_line_is_ignored_and_cut_off(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with spawn(store) as first:
        session = await first.create_session(model=scripted({"text": ["a"]}, {"text": ["b"]}))
        await session.send("one")
        announced = await first.get_transcript(session.id)
    with journal(store, session.id).open("ab") as f:
        f.write(b'{"at":1,"type":"entryAppended","entry":{"id":"e3","ty')
    async with spawn(store) as second:
        resumed = await second.resume_session(session.id)
        assert resumed.warnings == [] and resumed.interrupted_turn is None
        assert canonical(await second.get_transcript(session.id)) == canonical(announced)
        await resumed.send("two")
    lines = journal(store, session.id).read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])


async def test_corrupt_middle_line_loads_up_to_it_and_keeps_the_rest_aside(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with spawn(store) as first:
        session = await first.create_session(model=scripted({"text": ["a"]}, {"text": ["b"]}, {"text": ["c"]}))
        await session.send("one")
        await session.send("two")
    path = journal(store, session.id)
    lines = path.read_text().splitlines()
    # Line 6 starts the second turn: break it.
    assert json.loads(lines[5])["type"] == "turnStarted"
    lines[5] = "{this is not json"
    path.write_text("\n".join(lines) + "\n")
    async with spawn(store) as second:
        resumed = await second.resume_session(session.id)
        assert len(resumed.warnings) >= 1 and "line 6" in resumed.warnings[0].message
        entries = (await second.get_transcript(session.id))["entries"]
        assert [e["text"] for e in entries] == ["one", "a"]
        # The server goes on: a new turn is journaled after what loaded.
        assert (await resumed.send("three")).text == "a"
    assert any(p.name.startswith(f"{session.id}.jsonl.corrupt-") for p in store.iterdir())
    async with spawn(store) as third:
        again = await third.resume_session(session.id)
        assert again.warnings == []
        assert [e["text"] for e in (await third.get_transcript(session.id))["entries"]] == ["one", "a", "three", "a"]


async def test_newer_format_version_is_a_clear_error_and_the_others_still_load(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with spawn(store) as first:
        future = await first.create_session(model=scripted({"text": ["a"]}))
        fine = await first.create_session(model=scripted({"text": ["b"]}), title="fine")
    path = journal(store, future.id)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["format"] = 99
    lines[0] = json.dumps(header)
    path.write_text("\n".join(lines) + "\n")
    async with spawn(store) as second:
        with pytest.raises(JournalUnreadable) as caught:
            await second.resume_session(future.id)
        assert caught.value.data["formatVersion"] == 99 and caught.value.data["supportedVersion"] == 1
        assert "99" in str(caught.value)
        listed = await second.list_sessions()
        assert listed.ids == [fine.id]
        assert (await second.resume_session(fine.id)).id == fine.id


async def test_a_fifo_or_a_device_under_a_journal_s_name_is_unreadable_not_a_hang(tmp_path: Path) -> None:
    """A FIFO named like a journal blocked the index check's open, and so every
    session/list, forever; a link to /dev/zero would be read without end. Both
    are journalUnreadable now, and the store's real sessions list and resume."""
    store = tmp_path / "store"
    async with spawn(store) as first:
        fine = await first.create_session(model=scripted({"text": ["b"]}), title="fine")
    os.mkfifo(store / "s-fifo.jsonl")
    os.symlink("/dev/zero", store / "s-zero.jsonl")
    (store / ".index").unlink()  # rebuilt from the journals, the odd ones included
    async with spawn(store) as second:
        listed = await second.list_sessions()
        assert listed.ids == [fine.id]
        for odd in ("s-fifo", "s-zero"):
            with pytest.raises(JournalUnreadable) as caught:
                await second.resume_session(odd)
            assert "is not a regular file" in str(caught.value)
        assert (await second.resume_session(fine.id)).id == fine.id


# -- two servers, one store ------------------------------------------------------


async def test_second_process_gets_session_locked_until_the_first_dies(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with spawn(store) as first, spawn(store) as second:
        session = await first.create_session(model=scripted({"text": ["a"]}), title="held")
        with pytest.raises(SessionLocked) as caught:
            await second.resume_session(session.id)
        assert caught.value.pid == first.pid
        with pytest.raises(SessionLocked):
            await second.delete_session(session.id)
        listed = await second.list_sessions()
        assert isinstance(listed, SessionList)
        [info] = listed.sessions
        assert (info.session_id, info.loaded, info.locked, info.locked_by) == (session.id, False, True, first.pid)
        await kill(first)
        # The lock died with its process: no stale lock.
        resumed = await second.resume_session(session.id)
        assert resumed.id == session.id
        [info] = (await second.list_sessions()).sessions
        assert (info.loaded, info.locked) == (True, False)


# -- fork, compaction, ids, modes -----------------------------------------------------


async def test_fork_copies_up_to_an_entry_and_has_its_own_journal(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with spawn(store) as first:
        session = await first.create_session(
            model=scripted({"text": ["a"]}, {"text": ["b"]}), properties={"topic": "x"}, title="source")
        await session.send("one")
        await session.send("two")
        source = await first.get_transcript(session.id)
        fork = await session.fork(at_entry_id=source["entries"][1]["id"])
        assert fork.id != session.id and fork.revision == 0
        forked = await first.get_transcript(fork.id)
        assert forked["entries"] == source["entries"][:2]
        assert (await first.get_state(fork.id))["properties"] == {"topic": "x"}
        whole = await first.fork_session(session.id)
        assert (await first.get_transcript(whole.id))["entries"] == source["entries"]
        assert journal(store, fork.id).exists()
    async with spawn(store) as second:
        await second.resume_session(fork.id)
        assert (await second.get_transcript(fork.id))["entries"] == source["entries"][:2]


async def test_fork_is_refused_while_a_turn_runs(tmp_path: Path) -> None:
    async with spawn(tmp_path / "store") as client:
        session = await client.create_session(model=scripted({"text": ["x"], "stall": True}))
        running = asyncio.create_task(session.send("go"))
        await until(lambda: _current_text(client, session.id, "x"), "the turn to stream")
        with pytest.raises(SessionBusy):
            await session.fork()
        running.cancel()


async def test_compaction_rewrites_a_large_journal_and_keeps_the_state(tmp_path: Path) -> None:
    store = tmp_path / "store"
    big = "x" * 20_000
    async with spawn(store) as first:
        session = await first.create_session(model=scripted({"text": ["a"]}))
        await session.send("one")
        for i in range(12):
            # Insert a large entry and remove it again: the journal grows, the state does not.
            await session.mutate_transcript({"op": "insert", "after": None, "entries": [{"id": f"big{i}", "type": "prompt", "text": big}]})
            await session.mutate_transcript({"op": "remove", "ids": [f"big{i}"]})
        await session.set_properties({"k": 1})
        final = await first.get_transcript(session.id)
        state = await first.get_state(session.id)
    lines = journal(store, session.id).read_text().splitlines()
    assert json.loads(lines[1])["type"] == "snapshot"
    # Without compaction it would hold all twelve big entries (over 240 KB).
    assert journal(store, session.id).stat().st_size < 100_000
    async with spawn(store) as second:
        await second.resume_session(session.id)
        assert canonical(await second.get_transcript(session.id)) == canonical(final)
        again = await second.get_state(session.id)
        assert (again["revision"], again["properties"]) == (state["revision"], {"k": 1})


def write_long_journal(store: Path, session_id: str, turns: int) -> None:
    """A journal of ``turns`` completed turns, written as the server writes them
    (docs/protocol.md, "Durable sessions"), without the server's fsyncs."""
    store.mkdir(mode=0o700, parents=True, exist_ok=True)
    lines: list[dict[str, Any]] = [{
        "type": "session", "format": 1, "sessionId": session_id, "createdAt": 1_700_000_000_000,
        "config": {"model": {"provider": "scripted", "script": [{"text": ["ok"]}]}},
    }]
    for n in range(1, turns + 1):
        turn_id, at = f"t-long-{n}", 1_700_000_000_000 + n
        lines += [
            {"type": "turnStarted", "at": at, "turnId": turn_id, "number": n},
            {"type": "entryAppended", "at": at, "nextEntry": 2 * n, "entry": {"id": f"e{2 * n - 1}", "turnId": turn_id, "type": "prompt", "text": f"question {n}"}},
            {"type": "entryAppended", "at": at, "nextEntry": 2 * n + 1, "entry": {"id": f"e{2 * n}", "turnId": turn_id, "type": "response", "profile": "default", "text": f"answer {n}"}},
            {"type": "turnEnded", "at": at, "turnId": turn_id, "status": "completed", "stopReason": "completed", "undo": "none", "usage": {"inputTokens": 3, "outputTokens": 2}},
        ]
    path = journal(store, session_id)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    path.chmod(0o600)


async def test_a_long_journal_is_rewritten_as_a_snapshot_when_closed(tmp_path: Path) -> None:
    """Over 1,000 records since the last snapshot: closing the session rewrites
    the journal as its first line plus one snapshot, which loads the same state."""
    store = tmp_path / "store"
    write_long_journal(store, "s-long", turns=300)
    async with spawn(store) as first:
        await first.resume_session("s-long")
        before = canonical(await first.get_transcript("s-long"))
        state = await first.get_state("s-long")
        assert state["usageTotals"] == {"inputTokens": 900, "outputTokens": 600}
        assert len(journal(store, "s-long").read_text().splitlines()) == 1 + 4 * 300
        await first.close_session("s-long")
        lines = journal(store, "s-long").read_text().splitlines()
        assert len(lines) == 2 and json.loads(lines[1])["type"] == "snapshot"
        assert [s.session_id for s in (await first.list_sessions()).sessions] == ["s-long"]
        assert (await first.list_sessions()).sessions[0].entry_count == 600
    async with spawn(store) as second:
        await second.resume_session("s-long")
        assert canonical(await second.get_transcript("s-long")) == before
        again = await second.get_state("s-long")
        assert (again["revision"], again["usageTotals"]) == (state["revision"], state["usageTotals"])
        # The turn counter was kept: the next turn's id follows the 300th.
        turn = await second.request("session/send", {"sessionId": "s-long", "input": "more"})
        assert turn["turnId"].endswith("-301")


async def test_bad_session_ids_are_invalid_params_and_touch_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with spawn(store) as client:
        for bad in ["../x", "/etc/passwd", "a" * 10_000, ".hidden", ""]:
            for method in ("resume_session", "delete_session", "fork_session"):
                with pytest.raises(InvalidParams):
                    await getattr(client, method)(bad)
        assert not store.exists()
        with pytest.raises(SessionNotFound):
            await client.resume_session("s-never-was")


async def test_store_modes_and_store_false(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with spawn(store) as client:
        kept = await client.create_session(model=scripted({"text": ["a"]}))
        loose = await client.create_session(model=scripted({"text": ["a"]}), store=False)
        await loose.send("not on disk")
        assert client.server_capabilities["store"] is True
        assert client.server_capabilities["storeDirectory"] == str(store)
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    files = list(store.iterdir())
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert journal(store, kept.id).exists() and not journal(store, loose.id).exists()


async def test_default_store_is_under_xdg_state_home(tmp_path: Path, private_session_store: Path) -> None:
    async with Client.spawn(binary=REAL_BINARY, request_timeout=TIMEOUT) as client:
        assert client.server_capabilities["storeDirectory"] == str(private_session_store)
        session = await client.create_session(model=scripted({"text": ["a"]}))
    assert journal(private_session_store, session.id).exists()


async def test_ephemeral_keeps_nothing(tmp_path: Path, private_session_store: Path) -> None:
    async with Client.spawn(binary=REAL_BINARY, args=["--ephemeral"], request_timeout=TIMEOUT) as client:
        assert client.server_capabilities["store"] is False
        session = await client.create_session(model=scripted({"text": ["a"]}))
        await session.send("hi")
    assert not private_session_store.exists()


async def test_list_pages_stored_sessions_newest_first(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with spawn(store) as first:
        ids = []
        for i in range(5):
            s = await first.create_session(model=scripted({"text": ["a"]}))
            await s.send(f"prompt number {i} " + "y" * 100)
            ids.append(s.id)
    async with spawn(store) as second:
        page = await second.list_sessions(limit=2)
        assert page.ids == ids[::-1][:2] and page.next_cursor
        rest = await second.list_sessions(cursor=page.next_cursor)
        assert rest.ids == ids[::-1][2:] and rest.next_cursor is None
        assert all(not s.loaded for s in rest)
        assert page.sessions[0].title == ("prompt number 4 " + "y" * 100)[:80]
        assert page.sessions[0].entry_count == 2 and page.sessions[0].model == "scripted"


async def test_temporary_files_a_crash_left_are_removed_at_start(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with spawn(store) as first:
        session = await first.create_session(model=scripted({"text": ["a"]}))
        await session.send("one")
    # A process that is gone, as one killed in the middle of a rewrite would be.
    gone = await asyncio.create_subprocess_exec("true")
    await gone.wait()
    left = [store / f".index.tmp-{gone.pid}", store / f"{session.id}.jsonl.tmp-{gone.pid}"]
    live = store / f"s-other.jsonl.tmp-{os.getpid()}"  # a live process's: being written
    for path in [*left, live]:
        path.write_bytes(b'{"type":"sess')
    async with spawn(store) as second:

        async def cleaned() -> bool:
            return not any(path.exists() for path in left)

        await until(cleaned, "the leftovers to be removed")
        assert live.exists()
        resumed = await second.resume_session(session.id)
        transcript = await second.get_transcript(session.id)
        assert resumed.warnings == [] and len(transcript["entries"]) == 2
