"""Steering, queued sends, richer approvals, ask_user and rewind (docs/protocol.md §17)
through the Python client, against the real binary and its scripted provider.

Waits are on events or answers, never on the clock.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentrpc import (
    AlreadyRunning,
    ApprovalRule,
    ApprovalRulesChanged,
    Cancelled,
    ConfirmationCall,
    ConfirmationRequested,
    ConfirmationResolved,
    Decision,
    InvalidConfiguration,
    InvalidParams,
    NoRunningTurn,
    SteeringApplied,
    ToolCallFinished,
    TurnMismatch,
    Undoable,
    UserQuestion,
    scripted,
    tool,
)
from agentrpc.sync import Client as SyncClient

from conftest import call, REAL_BINARY, REAL_TIMEOUT, requires_real, spawn_real

pytestmark = requires_real



# -- steering and queued sends --------------------------------------------------


async def test_steer_during_a_tool_call_reaches_the_next_request(tmp_path: Path) -> None:
    tool_started = asyncio.Event()
    release = asyncio.Event()

    @tool
    async def read(path: str) -> str:
        """Read a file."""
        tool_started.set()
        await release.wait()
        return f"contents of {path}"

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted({"toolCalls": [call("read", path="a")]}, {"text": ["read both"]}), tools=[read])
        with pytest.raises(NoRunningTurn):
            await session.steer("nobody listens")
        stream = session.stream("read a")
        steered: list[SteeringApplied] = []

        async def consume() -> None:
            async for event in stream:
                if isinstance(event, SteeringApplied):
                    steered.append(event)

        consumer = asyncio.create_task(consume())
        async with asyncio.timeout(REAL_TIMEOUT):
            await tool_started.wait()
        turn_id = (await session.state()).turn_id
        assert turn_id is not None
        with pytest.raises(TurnMismatch) as mismatch:
            await session.steer("wrong turn", expected_turn_id="t-gone")
        assert mismatch.value.data["turnId"] == turn_id
        assert await session.steer("and b too", expected_turn_id=turn_id) == turn_id
        release.set()
        async with asyncio.timeout(REAL_TIMEOUT):
            await consumer
        assert [s.text for s in steered] == ["and b too"]
        prompts = [e["text"] for e in (await session.transcript()).of_type("prompt")]
        assert prompts == ["read a", "and b too"]
        assert stream.result is not None and stream.result.round_trips == 2


async def test_a_queued_send_runs_next_and_cancel_drops_the_rest(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted(
            {"stall": True, "text": ["thinking"]}, {"text": ["never"]}))
        first = asyncio.create_task(session.send("long"))
        async with asyncio.timeout(REAL_TIMEOUT):
            while not (await session.state()).is_running:
                await asyncio.sleep(0)
        with pytest.raises(AlreadyRunning):
            await session.send("now")
        queued = asyncio.create_task(session.send("later", queue=True))
        async with asyncio.timeout(REAL_TIMEOUT):
            while (await session.state()).queued_sends != 1:
                await asyncio.sleep(0)
        assert await session.cancel() is True
        for task in (first, queued):
            with pytest.raises(Cancelled):
                await asyncio.wait_for(task, REAL_TIMEOUT)
        assert queued.exception().data.get("queued") is True  # type: ignore[union-attr]
        assert (await session.state()).queued_sends == 0

    async with spawn_real(tmp_path) as client:
        gate = asyncio.Event()

        @tool
        async def build() -> str:
            """Build."""
            await gate.wait()
            return "built"

        session = await client.open_session(
            model=scripted({"toolCalls": [call("build")]}, {"text": ["built"]}, {"text": ["tested"]}), tools=[build])
        first = asyncio.create_task(session.send("build"))
        async with asyncio.timeout(REAL_TIMEOUT):
            while not (await session.state()).active_tool_calls:
                await asyncio.sleep(0)
        second = asyncio.create_task(session.send("then test", queue=True))
        async with asyncio.timeout(REAL_TIMEOUT):
            while (await session.state()).queued_sends != 1:
                await asyncio.sleep(0)
        gate.set()
        results = await asyncio.wait_for(asyncio.gather(first, second), REAL_TIMEOUT)
        assert [r.text for r in results] == ["built", "tested"]
        assert results[0].turn_id != results[1].turn_id


# -- approvals ------------------------------------------------------------------


RUN_SCHEMA = {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}


async def test_built_in_flow_edited_arguments_rules_and_deny_and_stop(tmp_path: Path) -> None:
    ran: list[str] = []

    @tool(confirmation="always")
    def run(cmd: str) -> str:
        """Run a command."""
        ran.append(cmd)
        return f"ran {cmd}"

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted(
                {"toolCalls": [call("run", cmd="rm -rf build")]},
                {"toolCalls": [call("run", cmd="make test")]},
                {"toolCalls": [call("run", cmd="make test")]},
                {"toolCalls": [call("run", cmd="make deploy")]},
                {"text": ["never"]},
            ),
            tools=[run])
        stream = session.stream("go")
        resolved: list[ConfirmationResolved] = []
        rules: list[ApprovalRule | None] = []
        changed: list[ApprovalRulesChanged] = []
        with pytest.raises(Cancelled) as stopped:
            async for event in stream:
                if isinstance(event, ConfirmationRequested):
                    if event.arguments == {"cmd": "rm -rf build"}:
                        with pytest.raises(InvalidParams) as bad:
                            await session.approve(event.call_id, arguments={"cmd": 7})
                        assert bad.value.data["violations"][0]["path"] == "$.cmd"
                        await session.approve(event.call_id, arguments={"cmd": "ls build"})
                    elif event.arguments == {"cmd": "make test"}:
                        rules.append(await session.approve_for_session(event.call_id, {"cmd": "make t*"}))
                    else:
                        assert event.arguments == {"cmd": "make deploy"}
                        await session.deny_and_stop(event.call_id, "not today")
                elif isinstance(event, ConfirmationResolved):
                    resolved.append(event)
                elif isinstance(event, ApprovalRulesChanged):
                    changed.append(event)
        # The second "make test" matched the rule and ran unasked; "make deploy" did not.
        assert stopped.value.data["source"] == "confirmation"
        assert ran == ["ls build", "make test", "make test"]
        assert rules and rules[0] is not None and rules[0].arguments == {"cmd": "make t*"}
        assert [r.source for r in resolved][:3] == ["client", "client", "rule"]
        assert changed and changed[0].rules[0]["tool"] == "run"
        outputs = (await session.transcript()).of_type("toolOutput")
        assert outputs[0]["approvedArguments"] == {"cmd": "ls build"}
        state = await session.state()
        assert [r.id for r in state.approval_rules] == [rules[0].id]
        assert await session.set_approval_rules(remove=[rules[0].id]) == []


async def test_on_confirm_returns_richer_decisions(tmp_path: Path) -> None:
    asked: list[ConfirmationCall] = []

    def decide(call_: ConfirmationCall) -> Any:
        asked.append(call_)
        if call_.arguments["cmd"] == "make":
            return Decision.approve(arguments={"cmd": "make -j4"})
        if call_.arguments["cmd"] == "make test":
            return Decision.approve_for_session({"cmd": "make test"})
        return Decision.deny_and_stop("enough")

    ran: list[str] = []

    @tool(confirmation="always")
    def run(cmd: str) -> str:
        """Run a command."""
        ran.append(cmd)
        return "ok"

    async with spawn_real(tmp_path, on_confirm=decide) as client:
        session = await client.open_session(
            model=scripted(
                {"toolCalls": [call("run", cmd="make")]},
                {"toolCalls": [call("run", cmd="make test")]},
                {"toolCalls": [call("run", cmd="make test")]},
                {"toolCalls": [call("run", cmd="make clean")]},
                {"text": ["never"]},
            ),
            tools=[run])
        with pytest.raises(Cancelled) as stopped:
            await session.send("go")
        assert stopped.value.data["source"] == "confirmation"
        assert ran == ["make -j4", "make test", "make test"]
        # The second "make test" was answered by the rule: the callback was asked three times.
        assert [c.arguments["cmd"] for c in asked] == ["make", "make test", "make clean"]


def test_decision_checks_its_word() -> None:
    with pytest.raises(ValueError):
        Decision("maybe")
    assert Decision.approve_for_session({"p": "a*"}).to_wire() == {
        "decision": "approveForSession", "rule": {"arguments": {"p": "a*"}}}
    assert Decision.deny_and_stop("no").to_wire() == {"decision": "denyAndStop", "reason": "no"}


# -- ask_user -------------------------------------------------------------------


async def test_ask_user_is_answered_by_on_ask_user(tmp_path: Path) -> None:
    questions: list[UserQuestion] = []

    async def answer(question: UserQuestion) -> str:
        questions.append(question)
        return "blue"

    async with spawn_real(tmp_path, on_ask_user=answer) as client:
        session = await client.open_session(
            ask_user=True,
            model=scripted(
                {"toolCalls": [call("ask_user", question="Which colour?", options=["red", "blue"])]},
                {"text": ["Blue it is."]}))
        result = await session.send("paint it")
        assert result.text == "Blue it is."
        assert [(q.question, q.options, q.session is session) for q in questions] == [
            ("Which colour?", ["red", "blue"], True)]
        output = (await session.transcript()).of_type("toolOutput")[0]
        assert (output["outcome"], output["content"]) == ("ok", "blue")

    async with spawn_real(tmp_path) as client:
        with pytest.raises(InvalidConfiguration):
            await client.open_session(ask_user=True)


def test_ask_user_with_the_blocking_client(tmp_path: Path) -> None:
    with SyncClient.spawn(binary=REAL_BINARY, cwd=tmp_path, request_timeout=REAL_TIMEOUT,
                          on_ask_user=lambda q: q.options[0] if q.options else "?") as client:
        session = client.open_session(
            ask_user=True,
            model=scripted({"toolCalls": [call("ask_user", question="Pick", options=["left", "right"])]},
                           {"text": ["Left."]}))
        assert session.send("choose").text == "Left."
        assert session.transcript().of_type("toolOutput")[0]["content"] == "left"


# -- rewind ---------------------------------------------------------------------


async def test_rewind_undoes_a_committed_turn(tmp_path: Path) -> None:
    files: dict[str, str] = {}

    @tool
    def write(path: str, text: str) -> Undoable:
        """Write a file."""
        files[path] = text
        return Undoable(f"wrote {path}", undo=lambda: files.pop(path))

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted(
                {"toolCalls": [call("write", path="a", text="1")]}, {"text": ["wrote a"]},
                {"toolCalls": [call("write", path="b", text="2"), call("write", path="c", text="3")]},
                {"text": ["wrote b and c"]}),
            tools=[write])
        await session.send("write a")
        second = await session.send("write b and c")
        assert set(files) == {"a", "b", "c"}
        with pytest.raises(ValueError):
            await session.rewind(undo=True)
        # `undo` is the caller's decision every time, as on the wire: no default.
        with pytest.raises(TypeError):
            await session.rewind(turn_id=second.turn_id)  # type: ignore[call-arg]
        assert set(files) == {"a", "b", "c"}
        rewound = await session.rewind(turn_id=second.turn_id, undo=True)
        assert [(u.name, u.ok) for u in rewound.undos] == [("write", True), ("write", True)]
        assert rewound.failed_undos == [] and len(rewound.removed_entries) == 5
        assert set(files) == {"a"}
        transcript = await session.transcript()
        assert rewound.entry_count == len(transcript.entries) == 4
        # Keeping only the first prompt, without undo: "a" stays written.
        first_prompt = transcript.entries[0]["id"]
        kept = await session.rewind(to_entry_id=first_prompt, undo=False)
        assert kept.undos == [] and kept.entry_count == 1 and set(files) == {"a"}


async def test_cancel_withdraws_the_question(tmp_path: Path) -> None:
    asked = asyncio.Event()
    withdrawn = asyncio.Event()

    async def never_answers(question: UserQuestion) -> str:
        asked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            withdrawn.set()
            raise
        return "unreachable"

    async with spawn_real(tmp_path, on_ask_user=never_answers) as client:
        session = await client.open_session(
            ask_user=True, model=scripted({"toolCalls": [call("ask_user", question="Sure?")]}, {"text": ["never"]}))
        turn = asyncio.create_task(session.send("go"))
        async with asyncio.timeout(REAL_TIMEOUT):
            await asked.wait()
        assert await session.cancel() is True
        with pytest.raises(Cancelled):
            await asyncio.wait_for(turn, REAL_TIMEOUT)
        async with asyncio.timeout(REAL_TIMEOUT):
            await withdrawn.wait()
        output = (await session.transcript()).of_type("toolOutput")[0]
        assert output["outcome"] == "failed" and "withdrawn" in output["content"]


async def test_rewind_after_a_restart_undoes_a_committed_turn_once(tmp_path: Path) -> None:
    """The undo records of a committed turn are kept with the stored session, so a
    new process can rewind the turn and send its `tool/undo`, and only once."""
    from agentrpc import Client

    store = tmp_path / "store"

    def spawn() -> Any:
        return Client.spawn(binary=REAL_BINARY, args=["--store", str(store)], capabilities={"tools": True},
                            request_timeout=REAL_TIMEOUT, shutdown_timeout=REAL_TIMEOUT)

    async with spawn() as first:
        first.on_request("tool/call", lambda params: {
            "outcome": "ok", "content": f"wrote {params['arguments']['f']}", "undo": {"unwrite": params["arguments"]["f"]}})
        session_id = (await first.request("session/create", {
            "model": scripted({"toolCalls": [{"name": "write", "arguments": {"f": "a"}}]}, {"text": ["wrote a"]},
                              {"toolCalls": [{"name": "write", "arguments": {"f": "b"}},
                                             {"name": "write", "arguments": {"f": "c"}}]}, {"text": ["wrote b, c"]}),
            "tools": [{"name": "write"}],
        }))["sessionId"]
        await first.request("session/send", {"sessionId": session_id, "input": "write a"})
        second_turn = await first.request("session/send", {"sessionId": session_id, "input": "write b and c"})
        # An orderly end: the session is closed with the process, its records stay stored.

    undone: list[Any] = []
    async with spawn() as second:
        second.on_request("tool/undo", lambda params: undone.append(params["undo"]) or {})
        await second.resume_session(session_id)
        rewound = await second.request("session/rewind", {
            "sessionId": session_id, "turnId": second_turn["turnId"], "undo": True})
        assert undone == [{"unwrite": "c"}, {"unwrite": "b"}]
        assert [u["status"] for u in rewound["undos"]] == ["undone", "undone"]
        entries = (await second.get_transcript(session_id))["entries"]
        assert [e["type"] for e in entries] == ["prompt", "toolCalls", "toolOutput", "response"]
        await second.close_session(session_id)

    # The rewind was stored too: a third process neither sees the removed turn
    # nor can undo it again, while the first turn's record is still there.
    undone.clear()
    async with spawn() as third:
        third.on_request("tool/undo", lambda params: undone.append(params["undo"]) or {})
        await third.resume_session(session_id)
        first_prompt = (await third.get_transcript(session_id))["entries"][0]["id"]
        rewound = await third.request("session/rewind", {"sessionId": session_id, "toEntryId": first_prompt, "undo": True})
        assert undone == [{"unwrite": "a"}]
        assert len(rewound["undos"]) == 1
