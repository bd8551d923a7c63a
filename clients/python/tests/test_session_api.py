"""The typed session API against the real binary and its scripted provider.

Every turn here is scripted (``agentrpc.scripted``): deterministic and
offline. Waits are on events or answers, never on the clock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path
from typing import Any, TypedDict

import pytest

from agentrpc import (
    CacheInvalidated,
    Cancelled,
    Client,
    ConfirmationCall,
    ConfirmationRequested,
    ConfirmationResolved,
    Denied,
    EntryAppended,
    Event,
    Failed,
    Conflict,
    HookFired,
    ProfileActivated,
    Limits,
    NoPendingConfirmation,
    PropertiesChanged,
    ReasoningDelta,
    RequestStarted,
    SessionState,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolContext,
    ToolExecutorError,
    Transcript,
    TurnEnded,
    TurnResult,
    TurnStarted,
    Undoable,
    UsageEvent,
    ops,
    scripted,
    tool,
)

from conftest import call, REAL_TIMEOUT, requires_real, spawn_real, until

pytestmark = requires_real




# -- send, results, state, transcript ----------------------------------------------


async def test_send_returns_a_typed_turn_result_and_state_follows(tmp_path: Path) -> None:
    @tool
    def get_weather(city: str) -> dict[str, Any]:
        """Weather."""
        return {"city": city, "celsius": 18}

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted(
                {"text": ["Checking"], "toolCalls": [call("get_weather", city="Paris")]},
                {"text": ["It is ", "18"], "usage": {"inputTokens": 7, "outputTokens": 3, "cachedInputTokens": 2}},
            ),
            tools=[get_weather],
            persona="You are terse.",
            directives=["Answer in one line."],
            instructions="Weather only.",
            title="weather",
            user_id="u-1",
            properties={"mode": "chat"},
            limits=Limits(max_tool_calls=5),
            transcript_error_policy="keepCompleted",
            store=False,
        )
        assert session.tools.keys() == {"get_weather"}
        result = await session.send("Weather in Paris?")
        assert isinstance(result, TurnResult)
        assert result.text == result.message.text == "It is 18"
        assert result.stop_reason == "completed" and result.final_answer is None
        assert (result.round_trips, result.tool_calls) == (2, 1)
        assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.cached_input_tokens) == (7, 3, 2)
        assert result.usage.total_tokens == 10
        assert result.turn_id and result.message.entry_id and result.revision > 0

        state = await session.state()
        assert isinstance(state, SessionState)
        assert state.session_id == session.id and state.is_running is False
        assert state.current_text == "It is 18" and state.turn_id == result.turn_id
        assert state.last_usage_report is not None and state.last_usage_report.output_tokens == 3
        assert state.properties == {"mode": "chat"} and state.active_profile == "default"
        assert state.active_tool_calls == [] and state.pending_confirmation is None
        assert state.revision == result.revision and state.entry_count == 4

        transcript = await session.transcript()
        assert isinstance(transcript, Transcript)
        assert [e["type"] for e in transcript] == ["prompt", "toolCalls", "toolOutput", "response"]
        assert len(transcript) == 4 and transcript.revision == result.revision
        assert transcript.get(result.message.entry_id) == transcript.entries[-1]
        assert transcript.of_type("toolOutput")[0]["content"] == {"city": "Paris", "celsius": 18}
        assert "You are terse." in transcript.instructions and "Weather only." in transcript.instructions
        assert "Answer in one line." in transcript.instructions

        listed = await client.list_sessions()
        summary = next(s for s in listed if s.session_id == session.id)
        assert (summary.title, summary.user_id, summary.loaded, summary.locked) == ("weather", "u-1", True, False)
        assert summary["sessionId"] == session.id  # the wire form stays readable


async def test_create_session_is_open_session_and_sessions_are_registered(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.create_session(model=scripted({"text": ["hi"]}))
        assert client.session(session.id) is session
        resumed = await client.resume_session(session.id)
        assert resumed.id == session.id and isinstance(resumed.revision, int)
        assert (await client.get_state(session.id))["sessionId"] == session.id
        assert (await client.get_transcript(session))["entries"] == []  # a handle works as an id
        async with client.session(session.id) as handle:
            assert (await handle.send("x")).text == "hi"
        # Leaving `async with` closed it on the server: it stays stored, not loaded.
        listed = await client.list_sessions()
        assert [(s.session_id, s.loaded) for s in listed] == [(session.id, False)]
        assert session.id not in (await client.list_sessions(loaded=True)).ids


async def test_send_accepts_images_and_turn_options(tmp_path: Path) -> None:
    png = tmp_path / "pixel.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["seen"]}, {"text": ["again"]}))
        result = await session.send("look", images=[png, b"\x89PNG\r\n\x1a\n\0\0"], temperature=0.2,
                                    max_output_tokens=50, limits={"wall_clock_seconds": 30})
        assert result.text == "seen"
        prompt = (await session.transcript()).of_type("prompt")[0]
        assert prompt["images"][0] == {"path": str(png)}
        assert prompt["images"][1]["mimeType"] == "image/png"
        with pytest.raises(TypeError, match="unknown turn option"):
            await session.send("x", temprature=1)


async def test_set_properties_and_mutate_transcript_helpers(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted({"text": ["one"]}, {"text": ["two"]}, {"text": ["three"]}), properties={"a": 1},
        )
        watch = session.watch()
        props = await session.set_properties({"b": 2}, remove=["a"])
        assert props.properties == {"b": 2} and props.active_profile == "default"
        changed = await until(watch, lambda e: isinstance(e, PropertiesChanged))
        assert isinstance(changed, PropertiesChanged) and changed.set == {"b": 2} and changed.removed == ["a"]
        watch.close()

        first = await session.send("1")
        second = await session.send("2")
        transcript = await session.transcript()
        ids = transcript.ids
        assert len(ids) == 4

        edited = await session.mutate_transcript(
            ops.replace(second.message.entry_id, ops.response("TWO", id=second.message.entry_id)),
            expected_revision=transcript.revision,
        )
        assert edited.entry_count == 4 and edited.revision > transcript.revision
        assert (await session.transcript()).entries[-1]["text"] == "TWO"

        note = ops.prompt("a note", id="note-1")
        reply = ops.response("noted")
        done = await session.mutate_transcript([ops.insert(first.message.entry_id, [note, reply])])
        assert done.entry_count == 6
        assert (await session.transcript()).ids[2:4] == ["note-1", reply["id"]]

        await session.mutate_transcript([ops.remove(["note-1", reply["id"]])])
        assert (await session.transcript()).ids == ids

        await session.mutate_transcript(ops.truncate_after(first.message.entry_id))
        assert (await session.transcript()).ids == ids[:2]

        calls = ops.tool_calls([{"callId": "k1", "name": "lookup", "arguments": {}}])
        output = ops.tool_output("k1", "lookup", {"v": 1})
        assert output["outcome"] == "ok"
        await session.mutate_transcript(ops.set([ops.prompt("fresh"), calls, output, ops.reasoning("hm")]))
        assert [e["type"] for e in await session.transcript()] == ["prompt", "toolCalls", "toolOutput", "reasoning"]

        await session.mutate_transcript(ops.truncate_after(None))
        assert len(await session.transcript()) == 0
        assert (await session.send("3")).text == "three"


# -- streaming ---------------------------------------------------------------------


async def test_stream_yields_typed_events_then_the_result(tmp_path: Path) -> None:
    @tool
    def lookup(key: str) -> str:
        """Lookup."""
        return key.upper()

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted(
                {"reasoning": ["think"], "text": ["Let me see. "], "toolCalls": [call("lookup", key="k")]},
                {"text": ["Found ", "K"], "usage": {"inputTokens": 4, "outputTokens": 2, "reasoningTokens": 1}},
            ),
            tools=[lookup],
        )
        stream = session.stream("find k")
        assert not stream.started
        events = [event async for event in stream]
        assert stream.done and stream.error is None
        result = stream.result
        assert result is not None and result.text == "Found K"
        assert stream.text == "Let me see. Found K"

        by_type = {type(e) for e in events}
        assert {TurnStarted, RequestStarted, ReasoningDelta, TextDelta, ToolCallStarted, ToolCallFinished,
                EntryAppended, UsageEvent, TurnEnded} <= by_type
        assert all(e.session_id == session.id and e.turn_id == result.turn_id for e in events)
        seqs = [e.seq for e in events]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))

        started = next(e for e in events if isinstance(e, TurnStarted))
        assert started.text == "find k"
        request = next(e for e in events if isinstance(e, RequestStarted))
        assert (request.round_trip, request.provider) == (1, "scripted")
        assert [e.delta for e in events if isinstance(e, ReasoningDelta)] == ["think"]
        tool_started = next(e for e in events if isinstance(e, ToolCallStarted))
        assert (tool_started.name, tool_started.arguments) == ("lookup", {"key": "k"})
        finished = next(e for e in events if isinstance(e, ToolCallFinished))
        assert (finished.call_id, finished.outcome, finished.content) == (tool_started.call_id, "ok", "K")
        usage = next(e for e in events if isinstance(e, UsageEvent))
        assert (usage.usage.input_tokens, usage.reasoning_tokens) == (4, 1)
        entries = [e.entry["type"] for e in events if isinstance(e, EntryAppended)]
        assert entries == ["prompt", "reasoning", "toolCalls", "toolOutput", "response"]
        ended = events[-1]
        assert isinstance(ended, TurnEnded) and (ended.status, ended.undo, ended.error) == ("completed", "none", None)

        # A stream runs one turn: iterating it again says so instead of yielding nothing.
        with pytest.raises(RuntimeError, match="call session.stream"):
            [e async for e in stream]


async def test_stream_raises_the_turn_error_after_its_events(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["par", "tial"], "error": {"code": "badRequest"}}))
        seen: list[Event] = []
        with pytest.raises(Exception) as caught:
            async for event in session.stream("go"):
                seen.append(event)
        assert type(caught.value).__name__ == "ProviderError"
        ended = seen[-1]
        assert isinstance(ended, TurnEnded) and ended.status == "failed"
        assert ended.error is not None and ended.error.kind == "providerError"
        assert caught.value.partial_text == "partial"  # type: ignore[attr-defined]


async def test_stream_get_result_and_leaving_async_with_early_withdraws_the_turn(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["ok"]}, {"text": ["Hi"], "stall": True}))
        assert (await session.stream("one").get_result()).text == "ok"

        async with session.stream("two") as stream:
            assert stream.started
            await until(stream, lambda e: isinstance(e, TextDelta))
        # Leaving early cancelled the send task: the server withdrew the turn.
        assert stream.done and stream.result is None
        assert isinstance(stream.error, asyncio.CancelledError)
        state = await session.state()
        assert state.is_running is False and state.current_text == "Hi"


async def test_watch_sees_turns_run_by_another_task(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["a", "b"]}))
        async with session.watch() as watch:
            result = await session.send("x")
            ended = await until(watch, lambda e: isinstance(e, TurnEnded))
        assert ended.turn_id == result.turn_id
        raw = session.events()
        raw.close()
        assert [n async for n in raw] == []


async def test_profile_hook_and_cache_events(tmp_path: Path) -> None:
    hooks: list[dict[str, Any]] = []

    def on_hook(params: dict[str, Any]) -> dict[str, Any]:
        hooks.append(params)
        return {"set": {"hooked": params["hook"]}}

    capabilities = {"tools": True, "confirmations": "notify", "hooks": True}
    async with spawn_real(tmp_path, capabilities=capabilities) as client:
        client.on_request("hook/call", on_hook)
        session = await client.open_session(
            model=scripted({"text": ["one"]}, {"text": ["two"]}),
            properties={"mode": "chat"},
            profiles={"selector": "mode", "cases": {
                "chat": {"instructions": ["Chat."], "hooks": {"onPrompt": [{"set": {"mode": "plan"}}, {"client": True}]}},
                "plan": {"instructions": ["Plan."]},
                "quiet": {"instructions": ["Quiet."]},
            }},
        )
        first = [e async for e in session.stream("a")]
        fired = next(e for e in first if isinstance(e, HookFired))
        assert (fired.hook, fired.profile) == ("onPrompt", "chat")
        # The first request activates the initial profile (no previous); the hook then switches.
        activated = [(e.profile, e.previous) for e in first if isinstance(e, ProfileActivated)]
        assert activated == [("chat", None), ("plan", "chat")]
        assert [h["hook"] for h in hooks] == ["onPrompt"] and hooks[0]["sessionId"] == session.id
        assert (await session.state()).properties == {"mode": "plan", "hooked": "onPrompt"}

        await session.set_properties({"mode": "quiet"})
        second = [e async for e in session.stream("b")]
        invalidated = next(e for e in second if isinstance(e, CacheInvalidated))
        assert invalidated.reason == "instructionsChanged"
        assert (await session.state()).active_profile == "quiet"


# -- tools ---------------------------------------------------------------------------


async def test_sync_and_async_tools_and_every_outcome(tmp_path: Path) -> None:
    threads: dict[str, str] = {}

    @tool
    def sync_tool(n: int) -> int:
        """Runs in a worker thread."""
        threads["sync"] = threading.current_thread().name
        return n + 1

    @tool
    async def async_tool(n: int, ctx: ToolContext) -> dict[str, Any]:
        """Runs on the loop."""
        threads["async"] = threading.current_thread().name
        return {"n": n * 2, "call": ctx.call_id, "session": ctx.session.id, "key": ctx.idempotency_key,
                "turn": ctx.turn_id}

    @tool
    def failing() -> Failed:
        """Fails softly."""
        return Failed("disk full")

    @tool
    def denying() -> Denied:
        """Refuses."""
        return Denied("not allowed")

    @tool
    def conflicting() -> Conflict:
        """Conflicts."""
        return Conflict({"expected": 1, "actual": 2})

    @dataclasses.dataclass
    class Reading:
        celsius: float

    @tool
    def structured() -> Reading:
        """Returns a dataclass."""
        return Reading(21.5)

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted(
                {"toolCalls": [call("sync_tool", n=1), call("async_tool", n=2), call("failing"), call("denying"),
                               call("conflicting"), call("structured")]},
                {"text": ["done"]},
            ),
            tools=[sync_tool, async_tool, failing, denying, conflicting, structured],
        )
        stream = session.stream("go")
        finished = [e async for e in stream if isinstance(e, ToolCallFinished)]
        outcomes = {e.name: (e.outcome, e.content) for e in finished}
        assert stream.result is not None and stream.result.tool_calls == 6
        assert outcomes["sync_tool"] == ("ok", 2)
        assert outcomes["async_tool"][0] == "ok" and outcomes["async_tool"][1]["n"] == 4
        assert outcomes["async_tool"][1]["session"] == session.id
        # The key names the call for good: session, turn, round trip, call id.
        key = outcomes["async_tool"][1]
        assert key["key"] == f"{session.id}/{key['turn']}/1/{key['call']}"
        assert outcomes["failing"] == ("failed", "disk full")
        assert outcomes["denying"] == ("denied", "not allowed")
        assert outcomes["conflicting"] == ("conflict", {"expected": 1, "actual": 2})
        assert outcomes["structured"] == ("ok", {"celsius": 21.5})
    assert threads["sync"] != threads["async"]
    assert threads["async"] == "MainThread"


async def test_a_spec_without_a_function_ends_the_turn_with_tool_executor_error(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"toolCalls": [call("ghost")]}),
                                            tools=[{"name": "ghost", "inputSchema": {"type": "object"}}])
        with pytest.raises(ToolExecutorError) as caught:
            await session.send("x")
        assert caught.value.tool_name == "ghost"
        assert caught.value.client_error is not None and caught.value.client_error.kind == "methodNotFound"
        assert caught.value.tool_exception is None


async def test_a_raising_tool_fails_the_turn_and_undo_runs_newest_first(tmp_path: Path) -> None:
    undone: list[str] = []

    @tool
    def create_file(name: str) -> Undoable:
        """Sync tool with a sync undo."""
        return Undoable(f"created {name}", undo=lambda: undone.append(f"delete {name}"))

    @tool
    async def add_row(row: int) -> Undoable:
        """Async tool with an async undo."""

        async def remove() -> None:
            undone.append(f"remove row {row}")

        return Undoable({"row": row}, undo=remove)

    @tool
    def explode(reason: str) -> None:
        """Raises."""
        raise RuntimeError(reason)

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted(
                {"toolCalls": [call("create_file", name="a.txt")]},
                {"toolCalls": [call("add_row", row=7)]},
                {"toolCalls": [call("explode", reason="boom")]},
            ),
            tools=[create_file, add_row, explode],
        )
        stream = session.stream("go")
        events = []
        with pytest.raises(ToolExecutorError) as caught:
            async for event in stream:
                events.append(event)
        assert undone == ["remove row 7", "delete a.txt"]
        error = caught.value
        assert error.tool_name == "explode" and error.call_id
        assert isinstance(error.tool_exception, RuntimeError) and str(error.tool_exception) == "boom"
        assert error.__cause__ is error.tool_exception
        ended = events[-1]
        assert isinstance(ended, TurnEnded) and (ended.status, ended.undo) == ("failed", "rolledBack")
        # The undo registry was emptied by the turn's end.
        assert client._answers.undo == {}

        # send() chains the tool's exception the same way.
        again = await client.open_session(model=scripted({"toolCalls": [call("explode", reason="again")]}),
                                          tools=[explode])
        with pytest.raises(ToolExecutorError) as caught_again:
            await again.send("x")
        assert str(caught_again.value.__cause__) == "again"


async def test_a_committed_turn_keeps_its_undo_callables_for_rewind(tmp_path: Path) -> None:
    undone: list[int] = []

    @tool
    def step(n: int) -> Undoable:
        """Undoable step."""
        return Undoable(n, undo=lambda: undone.append(n))

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"toolCalls": [call("step", n=1)]}, {"text": ["ok"]}),
                                            tools=[step])
        stream = session.stream("x")
        ended = [e async for e in stream if isinstance(e, TurnEnded)]
        assert ended[0].undo == "committed" and undone == [] and len(client._answers.undo) == 1
        # Rewinding the turn runs the kept callable, once.
        rewound = await session.rewind(turn_id=ended[0].turn_id, undo=True)
        assert [u.ok for u in rewound.undos] == [True] and undone == [1] and client._answers.undo == {}


# -- confirmation ---------------------------------------------------------------------


@tool(confirmation="always")
def wire_money(amount: int) -> str:
    """Sends money."""
    return f"sent {amount}"


async def test_confirmation_with_the_built_in_flow(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted(
                {"toolCalls": [call("wire_money", amount=5), call("wire_money", amount=500)]},
                {"text": ["done"]},
            ),
            tools=[wire_money],
        )
        with pytest.raises(NoPendingConfirmation):
            await session.confirm("nothing", approve=True)
        stream = session.stream("pay")
        decisions: list[ConfirmationResolved] = []
        outcomes: list[ToolCallFinished] = []
        async for event in stream:
            if isinstance(event, ConfirmationRequested):
                assert (await session.state()).pending_confirmation is not None
                if event.arguments["amount"] < 100:
                    await session.confirm(event.call_id, approve=True)
                else:
                    await session.confirm(event.call_id, approve=False, reason="too much")
            elif isinstance(event, ConfirmationResolved):
                decisions.append(event)
            elif isinstance(event, ToolCallFinished):
                outcomes.append(event)
        assert [(d.decision, d.source, d.approved) for d in decisions] == [
            ("approve", "client", True), ("deny", "client", False)]
        assert outcomes[0].outcome == "ok" and outcomes[0].content == "sent 5"
        assert outcomes[1].outcome == "denied" and "too much" in outcomes[1].content
        assert stream.result is not None and stream.result.text == "done"


async def test_confirmation_with_an_on_confirm_callback(tmp_path: Path) -> None:
    asked: list[ConfirmationCall] = []

    def decide(call_: ConfirmationCall) -> Any:
        asked.append(call_)
        return call_.arguments["amount"] < 100 or (False, "over the limit")

    async with spawn_real(tmp_path, on_confirm=decide) as client:
        session = await client.open_session(
            model=scripted(
                {"toolCalls": [call("wire_money", amount=5), call("wire_money", amount=500)]},
                {"text": ["done"]},
            ),
            tools=[wire_money],
            guards=[{"match": {"name": "wire_*"}, "verdict": "confirm", "reason": "money moves"}],
        )
        stream = session.stream("pay")
        outcomes = [e async for e in stream if isinstance(e, (ToolCallFinished, ConfirmationRequested))]
        # With a callback, no built-in confirmationRequested events are sent.
        assert [type(e) for e in outcomes] == [ToolCallFinished, ToolCallFinished]
        assert [(o.outcome, o.content) for o in outcomes] == [
            ("ok", "sent 5"), ("denied", "The user declined this call: over the limit")]
        assert [c.arguments["amount"] for c in asked] == [5, 500]
        assert asked[0].reason == "money moves" and asked[0].session is session
        assert asked[0].session_id == session.id and asked[0].turn_id == stream.result.turn_id  # type: ignore[union-attr]

    async def approve_async(call_: ConfirmationCall) -> bool:
        return True

    async with spawn_real(tmp_path, on_confirm=approve_async) as client:
        assert client.initialize_result is not None
        session = await client.open_session(
            model=scripted({"toolCalls": [call("wire_money", amount=1)]}, {"text": ["ok"]}), tools=[wire_money])
        assert (await session.send("pay")).tool_calls == 1
        assert (await session.transcript()).of_type("toolOutput")[0]["outcome"] == "ok"


async def test_an_on_confirm_that_raises_or_answers_nonsense_denies(tmp_path: Path) -> None:
    answers: list[Any] = [RuntimeError("no terminal"), "maybe"]

    async def decide(call_: ConfirmationCall) -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async with spawn_real(tmp_path, on_confirm=decide) as client:
        session = await client.open_session(
            model=scripted({"toolCalls": [call("wire_money", amount=1), call("wire_money", amount=2)]},
                           {"text": ["ok"]}),
            tools=[wire_money],
        )
        await session.send("pay")
        outputs = (await session.transcript()).of_type("toolOutput")
        assert [o["outcome"] for o in outputs] == ["denied", "denied"]
        assert "no terminal" in outputs[0]["content"] and "maybe" in outputs[1]["content"]


# -- cancellation -----------------------------------------------------------------------


async def test_session_cancel_stops_the_turn_at_its_next_checkpoint(tmp_path: Path) -> None:
    # session/cancel is cooperative: a tool that is running finishes first,
    # and the turn stops before the next call.
    started = asyncio.Event()
    release = asyncio.Event()

    @tool
    async def slow() -> str:
        """Blocks until the test releases it."""
        started.set()
        await release.wait()
        return "done"

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted({"text": ["Hel"], "toolCalls": [call("slow"), call("slow")]}, {"text": ["next"]}),
            tools=[slow],
        )
        assert await session.cancel() is False  # nothing runs yet
        async with session.watch() as watch:
            turn = asyncio.create_task(session.send("go"))
            async with asyncio.timeout(REAL_TIMEOUT):
                await started.wait()
            assert await session.cancel() is True
            release.set()
            with pytest.raises(Cancelled) as caught:
                await turn
            ended = await until(watch, lambda e: isinstance(e, TurnEnded))
        assert caught.value.partial_text == "Hel" and caught.value.turn_id
        assert caught.value.data.get("source") == "session/cancel"
        assert isinstance(ended, TurnEnded) and ended.status == "cancelled"
        # The completed call stays, the one that never ran is trimmed (keepCompleted).
        outputs = (await session.transcript()).of_type("toolOutput")
        assert [o["content"] for o in outputs] == ["done"]
        assert (await session.send("again")).text == "next"


async def test_session_cancel_also_ends_a_stalled_stream(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["Hel"], "stall": True}))
        async with session.watch() as watch:
            turn = asyncio.create_task(session.send("go"))
            await until(watch, lambda e: isinstance(e, TextDelta))
            assert await session.cancel() is True
            with pytest.raises(Cancelled) as caught:
                await turn
        assert caught.value.partial_text == "Hel"
        assert (await session.state()).is_running is False


async def test_cancelling_the_send_task_withdraws_the_turn(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["Hi"], "stall": True}))
        async with session.watch() as watch:
            turn = asyncio.create_task(session.send("go"))
            await until(watch, lambda e: isinstance(e, TextDelta))
            turn.cancel()
            with pytest.raises(asyncio.CancelledError):
                await turn
            ended = await until(watch, lambda e: isinstance(e, TurnEnded))
        assert isinstance(ended, TurnEnded) and ended.status == "cancelled"
        assert isinstance(ended.error, Cancelled) and ended.error.partial_text == "Hi"


# -- generate -----------------------------------------------------------------------------


@dataclasses.dataclass
class City:
    name: str
    population: int
    capital: bool = False


class Pair(TypedDict):
    left: str
    right: int


async def test_generate_returns_dataclasses_typeddicts_and_raw_values(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted(
            {"text": ['{"name": "Paris", "population": 2100000, "capital": true}']},
            {"text": ['{"left": "a", "right": 1}']},
            {"text": ["[1, 2, 3]"]},
            {"text": ['{"x": 1}']},
            {"text": ['{"name": "Lyon", "population": 500000}']},
        ))
        city = await session.generate("Biggest French city?", City)
        assert city == City("Paris", 2100000, True)
        assert await session.generate("pair", Pair) == {"left": "a", "right": 1}
        assert await session.generate("numbers", list[int]) == [1, 2, 3]
        assert await session.generate("raw", {"type": "object"}) == {"x": 1}
        full = await session.generate_result("another", City)
        assert full.value == City("Lyon", 500000) and full.raw_value == {"name": "Lyon", "population": 500000}
        assert full.turn_id and full.usage.input_tokens is None  # the scripted model reports no usage
        # The prompt and the raw JSON were appended.
        assert (await session.transcript()).entries[-1]["text"] == '{"name": "Lyon", "population": 500000}'


# -- the lower-level client surface ------------------------------------------------------------


async def test_client_request_notify_and_handlers_against_the_real_server(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        assert isinstance(client, Client) and client.initialized and client.pid > 0
        session = await client.open_session(model=scripted({"text": ["x"]}, {"text": ["y"]}))
        # session/cancel is accepted as a notification too.
        await client.notify("session/cancel", {"sessionId": session.id})
        seen: list[str] = []
        unsubscribe = client.on_notification("session/event", lambda p: seen.append(p["event"]["type"]))
        events = client.notifications("session/event")
        await session.send("a")
        unsubscribe()
        assert seen[0] == "turnStarted" and seen[-1] == "turnEnded"
        first = await events.__anext__()
        assert first.params["event"]["type"] == "turnStarted"
        events.close()
        result = await client.request("session/send", {"sessionId": session.id, "input": "b"}, timeout=None)
        assert result["message"]["text"] == "y"
        await client.close_session(session.id)
        await client.close()
        assert await client.wait_closed(1.0) and client.returncode == 0
