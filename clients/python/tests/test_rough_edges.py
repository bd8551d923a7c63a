"""What a Python developer met writing small agents from docs/python.md:
abandoned streams, unanswerable confirmations, scripted errors, tool
exceptions, per-session ``on_confirm``, dropping a turn, and small surprises.

Every turn is scripted and runs through the real binary; waits are on events
or answers, never on the clock.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from agentrpc import (
    ConfirmationCall,
    ConfirmationRequested,
    EntryAppended,
    Event,
    InvalidParams,
    ProviderError,
    Session,
    TextDelta,
    ToolCallStarted,
    ToolExecutorError,
    TurnEnded,
    scripted,
    tool,
)

from conftest import call, REAL_TIMEOUT, requires_real, spawn_real, until

pytestmark = requires_real




# -- 1. an abandoned stream cancels its turn ------------------------------------------


async def test_breaking_out_of_a_stream_withdraws_its_turn(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["Hi"], "stall": True}, {"text": ["next"]}))
        async with session.watch() as watch:
            async for event in session.stream("go"):
                if isinstance(event, TextDelta):
                    break
            # No alreadyRunning: the next turn waits until the withdrawn one ended.
            assert (await session.send("again")).text == "next"
            first = await until(watch, lambda e: isinstance(e, TurnEnded))
        assert isinstance(first, TurnEnded) and first.status == "cancelled"


async def test_breaking_out_while_a_tool_runs_cancels_the_tool_and_commits_nothing(tmp_path: Path) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def slow() -> str:
        """Runs until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "done"  # pragma: no cover - never released

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted({"toolCalls": [call("slow")]}, {"text": ["after"]}, {"text": ["next"]}), tools=[slow],
        )
        async for event in session.stream("go"):
            if isinstance(event, ToolCallStarted):
                async with asyncio.timeout(REAL_TIMEOUT):
                    await started.wait()
                break
        result = await session.send("again")
        async with asyncio.timeout(REAL_TIMEOUT):
            await cancelled.wait()
        transcript = await session.transcript()
        assert transcript.of_type("toolOutput") == []
        assert result.text in ("after", "next")


async def test_cancelling_the_task_that_iterates_a_stream_withdraws_the_turn(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["Hi"], "stall": True}, {"text": ["next"]}))
        seen = asyncio.Event()

        async def consume() -> None:
            async for event in session.stream("go"):
                if isinstance(event, TextDelta):
                    seen.set()

        task = asyncio.create_task(consume())
        async with asyncio.timeout(REAL_TIMEOUT):
            await seen.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await session.send("again")).text == "next"
        assert (await session.state()).is_running is False


# -- 8. small surprises -----------------------------------------------------------------


async def test_iterating_a_finished_stream_again_raises(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["ok"]}))
        stream = session.stream("one")
        events = [event async for event in stream]
        assert events and stream.result is not None and stream.result.text == "ok"
        with pytest.raises(RuntimeError, match="call session.stream\\(\\) again"):
            async for _ in stream:
                pass
        assert (await stream.get_result()).text == "ok"  # the result stays available


async def test_using_open_session_without_await_says_so(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        opening = client.open_session(model=scripted({"text": ["ok"]}))
        with pytest.raises(TypeError, match="await client.open_session"):
            opening.send("hi")  # type: ignore[attr-defined]
        session = await opening
        assert isinstance(session, Session)
        assert (await session.send("hi")).text == "ok"


async def test_a_failed_generate_keeps_its_prompt_and_drop_last_turn_removes_it(tmp_path: Path) -> None:
    # docs/python.md: a failed turn keeps its prompt (the server's rule for
    # every turn), so a retry would leave two prompts in a row; drop it first.
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["not json"]}, {"text": ['{"n": 2}']}))
        with pytest.raises(Exception):
            await session.generate("Give n", {"type": "object", "properties": {"n": {"type": "integer"}}})
        assert [e["text"] for e in (await session.transcript()).of_type("prompt")] == ["Give n"]
        assert await session.drop_last_turn() is not None
        value = await session.generate("Give n", {"type": "object", "properties": {"n": {"type": "integer"}}})
        assert value == {"n": 2}
        assert [e["text"] for e in (await session.transcript()).of_type("prompt")] == ["Give n"]


# -- 7. turnId on entries, drop_last_turn ------------------------------------------------


async def test_drop_last_turn_removes_exactly_the_newest_turns_entries(tmp_path: Path) -> None:
    @tool
    def echo(word: str) -> str:
        """Echo a word."""
        return word

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted({"text": ["first"]}, {"toolCalls": [call("echo", word="x")]}, {"text": ["second"]}),
            tools=[echo],
        )
        assert await session.drop_last_turn() is None  # nothing to drop yet
        one = await session.send("one")
        two = await session.send("two")
        before = await session.transcript()
        assert before.turn_ids == [one.turn_id, two.turn_id]
        assert {e["type"] for e in before.of_turn(two.turn_id)} == {"prompt", "toolCalls", "toolOutput", "response"}
        assert await session.drop_last_turn() == two.turn_id
        after = await session.transcript()
        assert after.entries == before.of_turn(one.turn_id)


# -- 2. a confirmation nobody can answer is denied, never a hang ------------------------------


async def test_a_confirmation_nothing_can_answer_is_denied_with_a_reason(tmp_path: Path, caplog: Any) -> None:
    @tool(confirmation="always")
    def wipe() -> str:
        """Needs a yes."""
        return "wiped"

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted({"toolCalls": [call("wipe")]}, {"text": ["gave up"]}), tools=[wipe],
        )
        with caplog.at_level(logging.WARNING, logger="agentrpc.client"):
            async with asyncio.timeout(REAL_TIMEOUT):
                result = await session.send("wipe it")
        assert result.text == "gave up"
        [output] = (await session.transcript()).of_type("toolOutput")
        assert output["outcome"] == "denied"
        assert "nothing can answer" in str(output["content"])
        assert any("needs confirmation" in r.getMessage() for r in caplog.records)


async def test_a_confirmation_someone_reads_is_left_to_them(tmp_path: Path) -> None:
    @tool(confirmation="always")
    def wipe() -> str:
        """Needs a yes."""
        return "wiped"

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted({"toolCalls": [call("wipe")]}, {"text": ["done"]}), tools=[wipe],
        )
        stream = session.stream("wipe it")
        async for event in stream:
            if isinstance(event, ConfirmationRequested):
                await session.approve(event.call_id)
        assert stream.result is not None and stream.result.text == "done"
        [output] = (await session.transcript()).of_type("toolOutput")
        assert output["outcome"] == "ok" and output["content"] == "wiped"


# -- 5. on_confirm per session -----------------------------------------------------------------


async def test_on_confirm_per_session_sees_its_session_and_an_exception_denies_once(
    tmp_path: Path, caplog: Any
) -> None:
    @tool(confirmation="always")
    def wipe() -> str:
        """Needs a yes."""
        return "wiped"

    asked: list[ConfirmationCall] = []

    def yes(call_: ConfirmationCall) -> bool:
        asked.append(call_)
        return True

    def broken(call_: ConfirmationCall) -> bool:
        raise ValueError("the approver is offline")

    script = ({"toolCalls": [call("wipe")]}, {"text": ["end"]})
    async with spawn_real(tmp_path) as client:  # no client-wide on_confirm
        trusting = await client.open_session(model=scripted(*script), tools=[wipe], on_confirm=yes)
        failing = await client.open_session(model=scripted(*script), tools=[wipe], on_confirm=broken)
        await trusting.send("go")
        with caplog.at_level(logging.WARNING, logger="agentrpc.client"):
            await failing.send("go")
        [approved] = (await trusting.transcript()).of_type("toolOutput")
        [denied] = (await failing.transcript()).of_type("toolOutput")
    assert approved["outcome"] == "ok"
    assert [c.session for c in asked] == [trusting]
    assert denied["outcome"] == "denied" and "the approver is offline" in str(denied["content"])
    warnings = [r for r in caplog.records if "on_confirm" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].exc_info is None


async def test_a_session_on_confirm_wins_over_the_clients(tmp_path: Path) -> None:
    @tool(confirmation="always")
    def wipe() -> str:
        """Needs a yes."""
        return "wiped"

    async with spawn_real(tmp_path, on_confirm=lambda c: (False, "client says no")) as client:
        own = await client.open_session(
            model=scripted({"toolCalls": [call("wipe")]}, {"text": ["end"]}), tools=[wipe],
            on_confirm=lambda c: True,
        )
        default = await client.open_session(
            model=scripted({"toolCalls": [call("wipe")]}, {"text": ["end"]}), tools=[wipe],
        )
        await own.send("go")
        await default.send("go")
        [mine] = (await own.transcript()).of_type("toolOutput")
        [theirs] = (await default.transcript()).of_type("toolOutput")
    assert mine["outcome"] == "ok"
    assert theirs["outcome"] == "denied" and "client says no" in str(theirs["content"])


# -- 4. tool exceptions: fail the turn, or report them to the model ------------------------


async def test_a_tool_can_report_its_exception_to_the_model(tmp_path: Path) -> None:
    @tool(on_exception="report")
    def lookup(city: str) -> str:
        """Look a city up."""
        raise LookupError(f"no such city: {city}")

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted({"toolCalls": [call("lookup", city="Atlantis")]}, {"text": ["Sorry."]}), tools=[lookup],
        )
        result = await session.send("Where is Atlantis?")
        [output] = (await session.transcript()).of_type("toolOutput")
    assert result.text == "Sorry."
    assert output["outcome"] == "failed" and output["content"] == "LookupError: no such city: Atlantis"


async def test_the_clients_default_reports_and_a_tool_can_still_fail_the_turn(tmp_path: Path) -> None:
    @tool
    def flaky() -> str:
        """Fails."""
        raise RuntimeError("flaky broke")

    @tool(on_exception="fail_turn")
    def strict() -> str:
        """Fails the turn."""
        raise RuntimeError("strict broke")

    async with spawn_real(tmp_path, tool_exceptions="report") as client:
        session = await client.open_session(
            model=scripted({"toolCalls": [call("flaky")]}, {"text": ["carried on"]},
                           {"toolCalls": [call("strict")]}, {"text": ["never"]}),
            tools=[flaky, strict],
        )
        assert (await session.send("one")).text == "carried on"
        with pytest.raises(ToolExecutorError) as caught:
            await session.send("two")
    assert isinstance(caught.value.tool_exception, RuntimeError)
    def quiet() -> None:
        """Never runs."""

    with pytest.raises(ValueError, match="on_exception"):
        tool(on_exception="ignore")(quiet)  # type: ignore[call-overload]


# -- 3. scripted errors say what they are -------------------------------------------------------


async def test_a_scripted_error_that_ends_the_script_is_what_the_caller_sees(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted({"error": {"code": "rateLimited", "afterSeconds": 0.01, "message": "slow down"}}),
        )
        with pytest.raises(ProviderError) as caught:
            await session.send("hi")
        assert caught.value.provider_code == "rateLimited"
        # A retry that the script answers succeeds, as with a real provider.
        retried = await client.open_session(
            model=scripted({"error": {"code": "rateLimited", "afterSeconds": 0.01}}, {"text": ["ok"]}),
        )
        assert (await retried.send("hi")).text == "ok"


async def test_an_unknown_scripted_error_code_is_rejected_at_create(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        with pytest.raises(InvalidParams) as caught:
            await client.open_session(model=scripted({"error": {"code": "weird"}}))
    assert "weird" in str(caught.value) or "code" in str(caught.value.data)


# -- sync facade ------------------------------------------------------------------------------


def test_sync_break_withdraws_and_second_iteration_raises(tmp_path: Path) -> None:
    from agentrpc.sync import Client as SyncClient

    from conftest import REAL_BINARY

    with SyncClient.spawn(REAL_BINARY, cwd=tmp_path, request_timeout=REAL_TIMEOUT) as client:
        session = client.open_session(
            model=scripted({"text": ["Hi"], "stall": True}, {"text": ["next"]}, {"text": ["last"]}),
        )
        for event in session.stream("go"):
            if isinstance(event, TextDelta):
                break
        assert session.send("again").text == "next"
        stream = session.stream("three")
        assert [e for e in stream if isinstance(e, EntryAppended)]
        with pytest.raises(RuntimeError, match="stream"):
            for _ in stream:
                pass
