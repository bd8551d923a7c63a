"""The client against the real agentrpc binary (docs/protocol.md is the oracle).

Skipped when no binary is found: set ``AGENTRPC_BIN`` or run ``swift build``
in the repository so ``.build/debug/agentrpc`` exists.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentrpc import (
    Client,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    NotInitialized,
    SessionNotFound,
)

from conftest import real_binary

BINARY = real_binary()

pytestmark = [
    pytest.mark.real_server,
    pytest.mark.skipif(
        BINARY is None,
        reason="no agentrpc binary: set AGENTRPC_BIN or run `swift build` so .build/debug/agentrpc exists",
    ),
]

# Generous but bounded: a hung server fails the test instead of the run.
TIMEOUT = 20.0


def spawn_real(cwd: Path, **kwargs: Any) -> Any:
    """Spawn the real server in a scratch directory, so any store it writes stays there."""
    kwargs.setdefault("request_timeout", TIMEOUT)
    return Client.spawn(binary=BINARY, cwd=cwd, shutdown_timeout=TIMEOUT, **kwargs)


async def test_handshake_reports_server_info_and_capabilities(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        assert client.protocol_version == 1
        assert client.server_info is not None
        assert client.server_info["name"] == "agentrpc"
        assert isinstance(client.server_info.get("version"), str)
        caps = client.server_capabilities
        assert caps is not None
        assert isinstance(caps.get("providers"), list)
        assert caps.get("transcriptMutation") is True
        assert caps.get("profiles") is True
    assert client.returncode == 0


async def test_session_create_get_state_list_and_close(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        created = await client.request("session/create", {})
        session_id = created["sessionId"]
        assert isinstance(session_id, str) and session_id
        assert isinstance(created["revision"], int)
        assert "activeProfile" in created

        other = (await client.create_session()).id
        assert other != session_id

        state = await client.get_state(session_id)
        assert state["sessionId"] == session_id
        assert state["isRunning"] is False
        assert state["currentText"] == ""
        assert state["activeToolCalls"] == []
        assert state["revision"] == created["revision"]
        assert state["entryCount"] == 0
        assert "pendingConfirmation" not in state or state["pendingConfirmation"] is None

        transcript = await client.get_transcript(session_id)
        assert transcript["entries"] == []
        assert transcript["revision"] == created["revision"]

        listed = await client.list_sessions()
        ids = [item["sessionId"] for item in listed["data"]]
        assert session_id in ids and other in ids

        await client.close_session(session_id)
        with pytest.raises(SessionNotFound):
            await client.get_state(session_id)
        # The other session is untouched.
        assert (await client.get_state(other))["sessionId"] == other


async def test_unknown_session_is_session_not_found(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        with pytest.raises(SessionNotFound) as caught:
            await client.get_state("no-such-session")
        assert caught.value.code == -32010


async def test_unknown_method_is_method_not_found(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        with pytest.raises(MethodNotFound) as caught:
            await client.request("session/doesNotExist", {})
        assert caught.value.code == -32601
        assert caught.value.kind == "methodNotFound"


async def test_bad_param_type_is_invalid_params(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        with pytest.raises(InvalidParams) as caught:
            await client.request("session/getState", {"sessionId": 42})
        assert caught.value.code == -32602
        with pytest.raises(InvalidParams):
            await client.request("session/list", {"limit": "ten"})
        # The connection survives bad params.
        assert isinstance((await client.list_sessions())["data"], list)


async def test_requests_before_initialize_are_not_initialized(tmp_path: Path) -> None:
    async with spawn_real(tmp_path, initialize=False) as client:
        with pytest.raises(NotInitialized) as caught:
            await client.request("session/list", {})
        assert caught.value.code == -32002
        await client.initialize()
        assert client.server_info is not None
        # A second initialize is refused (docs/protocol.md §2).
        with pytest.raises(InvalidRequest):
            await client.initialize()


def scripted(*items: dict[str, Any]) -> dict[str, Any]:
    """A session config on the offline scripted provider."""
    return {"model": {"provider": "scripted", "model": "test", "script": list(items)}}


async def test_scripted_turn_returns_a_turn_result_and_streams_events(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(scripted({"text": ["Hel", "lo"]}))
        events = session.events()
        result = await session.send("hi")
        assert result.message.text == "Hello"
        assert result.stop_reason == "completed"
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(TIMEOUT):
            async for note in events:
                seen.append(note.params)
                if note.params["event"]["type"] == "turnEnded":
                    break
        events.close()
        assert [p["seq"] for p in seen] == list(range(seen[0]["seq"], seen[0]["seq"] + len(seen)))
        assert [p["event"]["delta"] for p in seen if p["event"]["type"] == "textDelta"] == ["Hel", "lo"]
        assert seen[-1]["event"]["status"] == "completed"
        assert (await session.state()).current_text == "Hello"


async def _cancel_stalled_turn(session: Any) -> dict[str, Any]:
    """Start a turn, cancel the awaiting task once text streams, return turnEnded's event."""
    events = session.events()
    turn = asyncio.create_task(session.send("go"))
    async with asyncio.timeout(TIMEOUT):
        async for note in events:
            if note.params["event"]["type"] == "textDelta":
                break
        turn.cancel()  # the client withdraws session/send with $/cancelRequest
        with pytest.raises(asyncio.CancelledError):
            await turn
        async for note in events:
            if note.params["event"]["type"] == "turnEnded":
                events.close()
                ended: dict[str, Any] = note.params["event"]
                return ended
    raise AssertionError("no turnEnded event")


async def test_cancelling_the_send_task_cancels_the_turn(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(scripted({"text": ["Hi"], "stall": True}))
        ended = await _cancel_stalled_turn(session)
        assert ended["status"] == "cancelled"
        assert ended["error"]["data"]["kind"] == "cancelled"
        assert ended["error"]["data"]["partialText"] == "Hi"
        state = await session.state()
        assert state.is_running is False and state.current_text == "Hi"


async def test_cancelling_a_second_turn_also_reports_cancelled(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(scripted({"text": ["Hello"]}, {"text": ["Hi"], "stall": True}))
        assert (await session.send("first")).text == "Hello"
        ended = await _cancel_stalled_turn(session)
        assert ended["status"] == "cancelled"
