"""The blocking facade ``agentrpc.sync`` against the real binary (plain, non-async tests)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from agentrpc import (
    Cancelled,
    ConfirmationCall,
    ConfirmationRequested,
    InvalidRequest,
    NoPendingConfirmation,
    ProviderError,
    SessionNotFound,
    TextDelta,
    ToolCallFinished,
    ToolExecutorError,
    TurnEnded,
    Undoable,
    ops,
    scripted,
    tool,
)
from agentrpc.sync import Client, EventStream, Session, TurnStream

from conftest import call, REAL_BINARY, REAL_TIMEOUT, requires_real

pytestmark = requires_real


def spawn(cwd: Path, **kwargs: Any) -> Client:
    kwargs.setdefault("request_timeout", REAL_TIMEOUT)
    kwargs.setdefault("shutdown_timeout", REAL_TIMEOUT)
    return Client.spawn(binary=REAL_BINARY, cwd=cwd, **kwargs)



@dataclasses.dataclass
class Answer:
    value: int


def test_sync_client_runs_turns_streams_and_edits(tmp_path: Path) -> None:
    ran_in: list[str] = []

    @tool
    def add(a: int, b: int) -> int:
        """Adds."""
        ran_in.append(threading.current_thread().name)
        return a + b

    before = set(threading.enumerate())
    with spawn(tmp_path) as client:
        assert client.server_info is not None and client.server_info["name"] == "agentrpc"
        assert client.protocol_version == 1 and client.server_capabilities is not None
        assert client.initialize_result is not None and client.pid > 0 and not client.closed
        session = client.open_session(
            model=scripted(
                {"toolCalls": [call("add", a=1, b=2)]},
                {"text": ["3"]},
                {"text": ["str", "eamed"]},
                {"text": ['{"value": 7}']},
            ),
            tools=[add],
        )
        assert isinstance(session, Session) and session.tools.keys() == {"add"}
        assert client.session(session.id) is session
        result = session.send("1+2?")
        assert result.text == "3" and result.tool_calls == 1
        assert ran_in and ran_in[0] != threading.current_thread().name

        stream = session.stream("stream it")
        assert isinstance(stream, TurnStream)
        deltas = [e.delta for e in stream if isinstance(e, TextDelta)]
        assert deltas == ["str", "eamed"] and stream.text == "streamed" and stream.done
        assert stream.result is not None and stream.result.text == "streamed" and stream.error is None

        assert session.generate("json", Answer) == Answer(7)
        state = session.state()
        assert state.is_running is False and state.entry_count == 8
        transcript = session.transcript()
        assert transcript.entries[-1]["text"] == '{"value": 7}'
        edited = session.mutate_transcript(ops.truncate_after(transcript.ids[3]))
        assert edited.entry_count == 4
        props = session.set_properties({"k": 1})
        assert props.properties == {"k": 1}
        assert client.get_state(session.id)["entryCount"] == 4
        assert len(client.get_transcript(session.id)["entries"]) == 4
        assert session.id in [s["sessionId"] for s in client.list_sessions()["data"]]
        assert client.request("session/getState", {"sessionId": session.id})["sessionId"] == session.id
        client.notify("session/cancel", {"sessionId": session.id})
        with pytest.raises(InvalidRequest):
            client.initialize()
        session.close()
        with pytest.raises(SessionNotFound):
            session.state()
    assert client.closed and client.returncode == 0
    assert not threads_left_over(before)


def threads_left_over(before: set[threading.Thread]) -> list[threading.Thread]:
    """Threads started since `before` that do not end within a bounded wait
    (a loaded machine may still be winding one down when the client returns)."""
    extra = [t for t in threading.enumerate() if t not in before]
    for thread in extra:
        thread.join(timeout=10)
    return [t for t in extra if t.is_alive()]


def test_sync_tools_undo_and_errors(tmp_path: Path) -> None:
    undone: list[str] = []

    @tool
    def step(name: str) -> Undoable:
        """Undoable."""
        return Undoable(name, undo=lambda: undone.append(name))

    @tool
    def fail() -> None:
        """Raises."""
        raise ValueError("nope")

    with spawn(tmp_path) as client:
        session = client.open_session(
            model=scripted({"toolCalls": [call("step", name="a"), call("step", name="b")]},
                           {"toolCalls": [call("fail")]},
                           {"text": ["par"], "error": {"code": "rateLimited", "afterSeconds": 0.01}},
                           {"text": ["ok"]}),
            tools=[step, fail],
        )
        with pytest.raises(ToolExecutorError) as caught:
            session.send("go")
        assert isinstance(caught.value.tool_exception, ValueError)
        assert undone == ["b", "a"]
        refreshed: list[bool] = []
        assert session.send("retry", retry=True, refresh_auth=lambda: refreshed.append(True)).text == "ok"
        assert refreshed == []  # backoff guidance, not auth


def test_sync_confirmation_both_ways_and_leaving_a_stream_early(tmp_path: Path) -> None:
    @tool(confirmation="always")
    def launch(target: str) -> str:
        """Needs a yes."""
        return f"launched {target}"

    asked: list[ConfirmationCall] = []

    def decide(call_: ConfirmationCall) -> bool:
        asked.append(call_)
        return call_.arguments["target"] == "moon"

    with spawn(tmp_path, on_confirm=decide) as client:
        session = client.open_session(
            model=scripted({"toolCalls": [call("launch", target="moon"), call("launch", target="sun")]},
                           {"text": ["done"]}),
            tools=[launch],
        )
        finished = [e for e in session.stream("go") if isinstance(e, ToolCallFinished)]
        assert [e.outcome for e in finished] == ["ok", "denied"] and len(asked) == 2

    with spawn(tmp_path) as client:
        session = client.open_session(
            model=scripted({"toolCalls": [call("launch", target="moon")]}, {"text": ["Hel"], "stall": True}),
            tools=[launch],
        )
        approved: list[str] = []
        with session.stream("go") as stream:
            for event in stream:
                if isinstance(event, ConfirmationRequested):
                    session.approve(event.call_id)
                    approved.append(event.call_id)
                if isinstance(event, TextDelta):
                    break
        # Leaving `with` early withdrew the stalled turn and waited for its end.
        assert approved and stream.done and session.state().is_running is False
        assert session.transcript().of_type("toolOutput")[0]["content"] == "launched moon"
        with pytest.raises(NoPendingConfirmation):
            session.deny("nothing")
        with pytest.raises(NoPendingConfirmation):
            session.confirm("nothing", approve=False, reason="no")


def test_sync_cancel_and_watch_from_other_threads(tmp_path: Path) -> None:
    @tool
    def wait_for_cancel(ctx_note: str) -> str:
        """Blocks the turn until the main thread cancels it."""
        cancelled.wait(REAL_TIMEOUT)
        return ctx_note

    cancelled = threading.Event()
    with spawn(tmp_path) as client:
        session = client.open_session(
            model=scripted({"text": ["Hel"], "toolCalls": [call("wait_for_cancel", ctx_note="x"),
                                                           call("wait_for_cancel", ctx_note="y")]}),
            tools=[wait_for_cancel],
        )
        watch = session.watch()
        assert isinstance(watch, EventStream)
        outcome: dict[str, Any] = {}

        def run_turn() -> None:
            try:
                session.send("go")
            except Cancelled as exc:
                outcome["error"] = exc

        worker = threading.Thread(target=run_turn)
        worker.start()
        for event in watch:
            if event.type == "toolCallStarted":
                assert session.cancel() is True
                cancelled.set()
            if isinstance(event, TurnEnded):
                break
        worker.join(REAL_TIMEOUT)
        watch.close()
        assert isinstance(outcome.get("error"), Cancelled) and outcome["error"].partial_text == "Hel"


def test_sync_errors_propagate_and_spawn_failures_stop_the_loop(tmp_path: Path) -> None:
    with spawn(tmp_path) as client:
        session = client.open_session(model=scripted({"error": {"code": "badRequest"}},
                                                     {"text": ["Hi"], "error": {"code": "contentFiltered"}}))
        with pytest.raises(ProviderError):
            session.send("x")
        stream = session.stream("y")
        with pytest.raises(ProviderError) as caught:
            stream.get_result()
        assert caught.value.provider_code == "contentFiltered" and stream.text == "Hi"
        assert isinstance(stream.error, ProviderError)
    before = set(threading.enumerate())
    with pytest.raises(Exception):
        Client.spawn(binary=str(tmp_path / "missing-binary"))
    assert not threads_left_over(before)


def test_sync_handlers_notifications_and_session_lifecycle(tmp_path: Path) -> None:
    handler_threads: list[str] = []
    seen: list[str] = []

    def raw_tool(params: dict[str, Any]) -> dict[str, Any]:
        handler_threads.append(threading.current_thread().name)
        return {"outcome": "ok", "content": f"raw {params['arguments']['q']}"}

    @tool
    def attached(q: str) -> str:
        """Attached after creation."""
        return f"attached {q}"

    with spawn(tmp_path) as client:
        client.on_request("tool/call", raw_tool)
        unsubscribe = client.on_notification("session/event", lambda p: seen.append(p["event"]["type"]))
        session = client.open_session(
            model=scripted(
                {"toolCalls": [call("lookup", q="a")]}, {"text": ["one"]},
                {"toolCalls": [call("lookup", q="b")]}, {"text": ["two"]},
                {"text": ['{"value": 1}']},
            ),
            tools=[{"name": "lookup", "inputSchema": {"type": "object"}}],
        )
        assert session.send("x").text == "one"
        assert handler_threads and handler_threads[0] != threading.current_thread().name
        resumed = client.resume_session(session.id, tools=[tool(attached.function, name="lookup")])
        assert resumed is session and "lookup" in session.tools and session.revision is not None
        session.send("y")
        outputs = session.transcript().of_type("toolOutput")
        assert [o["content"] for o in outputs] == ["raw a", "attached b"]
        unsubscribe()
        assert seen[0] == "turnStarted" and "turnEnded" in seen
        full = session.generate_result("json", Answer)
        assert full.value == Answer(1) and full.turn_id and full.raw_value == {"value": 1}
        session.add_tools(attached)
        assert set(session.tools) == {"lookup", "attached"}

        other = client.create_session()
        client.close_session(other.id)
        third = client.open_session()
        third.delete()
        with pytest.raises(SessionNotFound):
            third.state()
        fourth = client.open_session()
        client.delete_session(fourth.id)
        with pytest.raises(SessionNotFound):
            client.get_state(fourth.id)
        assert isinstance(client.stderr_tail, str)
