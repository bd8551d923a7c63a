"""Each exception class, raised by the real server where it can produce it.

Not covered here, because the server cannot produce them through this
client: ``ParseError`` (answered with ``id: null``, so no request can fail
with it; the client logs it) and ``InternalError`` (a server bug). The
fake-server tests in ``test_client_fake.py`` map every kind.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import agentrpc
from agentrpc import (
    AgentRPCError,
    AlreadyRunning,
    Cancelled,
    EgressRefused,
    HookError,
    InvalidConfiguration,
    InvalidParams,
    InvalidRequest,
    InvalidTranscript,
    MaxRoundTripsExceeded,
    MaxToolCallsExceeded,
    MessageTooLarge,
    MethodNotFound,
    NoPendingConfirmation,
    NotInitialized,
    Overloaded,
    ProviderContractViolation,
    ProviderError,
    RevisionMismatch,
    RunLimitExceeded,
    SessionBusy,
    SessionNotFound,
    StructuredOutputError,
    TextDelta,
    ToolChoiceNotHonored,
    ToolChoiceUnsupported,
    ToolExecutorError,
    UnreadableImageAttachment,
    WallClockTimeoutExceeded,
    ops,
    retry_once,
    scripted,
    tool,
)

from conftest import REAL_TIMEOUT, requires_real, spawn_real

pytestmark = requires_real


@tool
def noop() -> str:
    """Does nothing."""
    return "ok"


def call(tool_name: str) -> dict[str, Any]:
    return {"name": tool_name, "arguments": {}}


async def stalled_turn(session: agentrpc.Session) -> asyncio.Task[Any]:
    """Start a turn that streams "Hi" and then stalls; return its task once text arrived."""
    async with session.watch() as watch:
        turn = asyncio.create_task(session.send("go"))
        async with asyncio.timeout(REAL_TIMEOUT):
            async for event in watch:
                if isinstance(event, TextDelta):
                    return turn
    raise AssertionError("no text streamed")


async def test_protocol_level_errors(tmp_path: Path) -> None:
    async with spawn_real(tmp_path, initialize=False, args=["--max-message-bytes", "4096"]) as client:
        with pytest.raises(NotInitialized) as not_init:
            await client.list_sessions()
        assert not_init.value.code == -32002
        await client.initialize()
        with pytest.raises(InvalidRequest):
            await client.initialize()
        with pytest.raises(MethodNotFound):
            await client.request("session/nope", {})
        with pytest.raises(InvalidParams) as bad:
            await client.request("session/getState", {"sessionId": 42})
        assert type(bad.value) is InvalidParams
        with pytest.raises(MessageTooLarge) as too_large:
            await client.request("session/list", {"padding": "x" * 8000})
        assert isinstance(too_large.value, InvalidRequest) and too_large.value.data["limit"] == 4096
        with pytest.raises(SessionNotFound):
            await client.session("s-missing").state()


async def test_configuration_and_session_errors(tmp_path: Path) -> None:
    async with spawn_real(tmp_path, args=["--max-sessions", "2"]) as client:
        with pytest.raises(InvalidConfiguration) as bad_config:
            await client.open_session(limits={"max_tool_calls": 0})
        assert bad_config.value.data["field"] == "limits.maxToolCalls"
        with pytest.raises(InvalidConfiguration):
            await client.open_session({"notAField": 1})
        first = await client.open_session(model=scripted({"text": ["x"]}))
        await client.open_session()
        with pytest.raises(Overloaded):
            await client.open_session()
        await first.close()
        # Closing one frees a slot.
        await client.open_session()


async def test_preflight_errors_change_nothing(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["fine"]}))
        with pytest.raises(InvalidConfiguration):
            await session.send("x", tool_choice="required")
        with pytest.raises(UnreadableImageAttachment) as image:
            await session.send("x", images=[tmp_path / "missing.png"])
        assert image.value.index == 0
        picky = await client.open_session(model={**scripted({"text": ["x"]}), "supportsToolChoice": False},
                                          tools=[noop])
        with pytest.raises(ToolChoiceUnsupported):
            await picky.send("x", tool_choice=noop)
        # None of them consumed the script or appended anything.
        assert len(await session.transcript()) == 0
        assert (await session.send("x")).text == "fine"


async def test_running_turn_errors(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["Hi"], "stall": True}))
        turn = await stalled_turn(session)
        with pytest.raises(AlreadyRunning):
            await session.send("again")
        with pytest.raises(SessionBusy):
            await session.mutate_transcript(ops.truncate_after(None))
        with pytest.raises(NoPendingConfirmation):
            await session.confirm("call-x", approve=True)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn


async def test_transcript_errors(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"text": ["a"]}))
        await session.send("x")
        revision = (await session.transcript()).revision
        with pytest.raises(RevisionMismatch):
            await session.mutate_transcript(ops.truncate_after(None), expected_revision=revision - 1)
        with pytest.raises(InvalidTranscript) as orphan:
            await session.mutate_transcript(ops.insert(None, ops.tool_output("nope", "t", "x")))
        assert isinstance(orphan.value, InvalidParams)
        with pytest.raises(InvalidTranscript):
            await session.mutate_transcript(ops.remove("no-such-id"))
        assert (await session.transcript()).revision == revision


async def test_limit_errors_carry_the_limit(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        calls = await client.open_session(model=scripted({"toolCalls": [call("noop"), call("noop")]}),
                                          tools=[noop], limits={"max_tool_calls": 1})
        with pytest.raises(MaxToolCallsExceeded) as too_many:
            await calls.send("x")
        assert too_many.value.limit == 1 and isinstance(too_many.value, RunLimitExceeded)

        trips = await client.open_session(model=scripted({"toolCalls": [call("noop")]}, {"text": ["never"]}),
                                          tools=[noop], limits=agentrpc.Limits(max_round_trips=1))
        with pytest.raises(MaxRoundTripsExceeded) as round_trips:
            await trips.send("x")
        assert round_trips.value.limit == 1

        slow = await client.open_session(model=scripted({"text": ["Hi"], "stall": True}),
                                         limits={"wall_clock_seconds": 0.2})
        with pytest.raises(WallClockTimeoutExceeded) as wall:
            await slow.send("x")
        assert wall.value.limit == 0.2 and wall.value.partial_text == "Hi"


async def test_turn_errors(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        stubborn = await client.open_session(model=scripted({"text": ["plain"]}), tools=[noop], tool_choice="required")
        with pytest.raises(ToolChoiceNotHonored):
            await stubborn.send("x")

        guarded = await client.open_session(model=scripted({"text": ["x"]}), egress={"refuse": ["secret"]})
        with pytest.raises(EgressRefused) as egress:
            await guarded.send("my secret")
        assert egress.value.rule == "secret"

        @tool
        def broken() -> None:
            """Raises."""
            raise KeyError("gone")

        failing = await client.open_session(model=scripted({"toolCalls": [call("broken")]}), tools=[broken])
        with pytest.raises(ToolExecutorError) as executor:
            await failing.send("x")
        assert isinstance(executor.value.tool_exception, KeyError)

        cancelled = await client.open_session(model=scripted({"text": ["Hi"], "stall": True}))
        turn = await stalled_turn(cancelled)
        await cancelled.close()  # closing cancels the running turn
        with pytest.raises(Cancelled) as closed:
            await turn
        assert closed.value.partial_text == "Hi"


async def test_hook_errors(tmp_path: Path) -> None:
    profiles = {"cases": {"default": {"hooks": {"onPrompt": [{"client": True}]}}}}
    async with spawn_real(tmp_path) as client:
        # The client did not declare the hooks capability.
        undeclared = await client.open_session(model=scripted({"text": ["x"]}), profiles=profiles)
        with pytest.raises(HookError) as missing:
            await undeclared.send("x")
        assert missing.value.data["hook"] == "onPrompt"

    capabilities = {"tools": True, "confirmations": "notify", "hooks": True}
    async with spawn_real(tmp_path, capabilities=capabilities) as client:
        client.on_request("hook/call", lambda params: {"veto": True, "reason": "not today"})
        vetoed = await client.open_session(model=scripted({"text": ["x"]}), profiles=profiles)
        with pytest.raises(HookError) as veto:
            await vetoed.send("x")
        assert veto.value.data["reason"] == "not today" and veto.value.turn_id


async def test_structured_output_errors(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted(
            {"text": ["not json"]}, {"text": ['{"a": 1}']}, {"toolCalls": [call("noop")]},
        ))
        with pytest.raises(StructuredOutputError) as invalid:
            await session.generate("x", {"type": "object"})
        assert invalid.value.reason == "invalidJSON"
        with pytest.raises(StructuredOutputError) as violation:
            await session.generate("x", {"type": "object", "properties": {"a": {"type": "string"}}})
        assert (violation.value.reason, violation.value.path) == ("schemaViolation", "$.a")
        with pytest.raises(ProviderContractViolation):
            await session.generate("x", {"type": "object"})
        unable = await client.open_session(model={**scripted(), "supportsStructuredOutput": False})
        with pytest.raises(StructuredOutputError) as unsupported:
            await unable.generate("x", {"type": "object"})
        assert unsupported.value.reason == "unsupported"


# -- provider errors and retry_once ------------------------------------------------


async def test_provider_error_fields(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted(
            {"text": ["par"], "error": {"code": "rateLimited", "afterSeconds": 3, "httpStatus": 429, "message": "slow down"}},
            {"error": {"code": "authExpired"}},
            {"error": {"code": "authUserInvalid"}},
        ))
        with pytest.raises(ProviderError) as limited:
            await session.send("x")
        error = limited.value
        assert (error.provider_code, error.http_status) == ("rateLimited", 429)
        assert error.retry_guidance == agentrpc.RetryGuidance("retryWithBackoff", 3.0)
        assert error.is_retryable and not error.requires_user_action
        assert error.safe_description and error.unsafe_message == "slow down" and error.partial_text == "par"

        with pytest.raises(ProviderError) as expired:
            await session.send("x")
        assert expired.value.retry_guidance.kind == "refreshAuthThenRetry"

        with pytest.raises(ProviderError) as invalid:
            await session.send("x")
        assert invalid.value.retry_guidance.kind == "none" and invalid.value.requires_user_action


async def test_retry_once_follows_retry_with_backoff(tmp_path: Path) -> None:
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted(
            # Output before the error: the server does not retry it itself.
            {"text": ["par"], "error": {"code": "rateLimited", "afterSeconds": 0.01}},
            {"text": ["recovered"]},
            {"text": ["p"], "error": {"code": "serviceUnavailable", "afterSeconds": 0.01}},
            {"text": ["p"], "error": {"code": "serviceUnavailable", "afterSeconds": 0.01}},
        ))
        assert (await session.send("x", retry=True)).text == "recovered"
        # Only once: a second failure propagates.
        with pytest.raises(ProviderError):
            await retry_once(lambda: session.send("y"))


async def test_retry_once_refreshes_auth_then_retries(tmp_path: Path) -> None:
    refreshed: list[str] = []

    async def refresh() -> None:
        refreshed.append("async")

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted(
            {"error": {"code": "authExpired"}}, {"text": ["a"]},
            {"error": {"code": "authExpired"}}, {"text": ["b"]},
            {"error": {"code": "authExpired"}}, {"text": ["c"]},
        ))
        result = await retry_once(lambda: session.send("x"), refresh_auth=lambda: refreshed.append("sync"))
        assert result.text == "a"
        assert (await session.send("y", retry=True, refresh_auth=refresh)).text == "b"
        # Without a callback it still retries.
        assert (await session.send("z", retry=True)).text == "c"
        assert refreshed == ["sync", "async"]


async def test_retry_once_reraises_when_there_is_no_guidance(tmp_path: Path) -> None:
    attempts: list[int] = []
    async with spawn_real(tmp_path) as client:
        session = await client.open_session(model=scripted({"error": {"code": "badRequest"}}, {"text": ["unused"]}))

        async def attempt() -> Any:
            attempts.append(1)
            return await session.send("x")

        with pytest.raises(ProviderError) as caught:
            await retry_once(attempt)
        assert caught.value.retry_guidance.kind == "none" and attempts == [1]

        # Non-provider errors are not retried either.
        with pytest.raises(SessionNotFound):
            await retry_once(lambda: client.session("s-none").send("x"))
        with pytest.raises(AgentRPCError):
            await session.generate("x", {"type": "object"}, retry=True)  # "unused" is not JSON
