"""The client's own behaviour, against the scriptable fake server.

These stay valid whatever the real server does: they pin error mapping,
cancellation, death handling, stderr draining and the lifecycle.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import agentrpc
from agentrpc import (
    AgentRPCError,
    BinaryNotFound,
    Cancelled,
    Client,
    InternalError,
    InvalidParams,
    MethodNotFound,
    NotInitialized,
    Notification,
    RequestTimeout,
    ServerExited,
    TransportClosed,
)

from conftest import spawn_fake

WAIT = 10.0


async def received(client: Client, method: str) -> list[Any]:
    """Messages of ``method`` the fake server has seen so far."""
    result: list[Any] = await client.request("test/received", {"method": method}, timeout=WAIT)
    return result


async def wait_until_received(client: Client, method: str, count: int = 1) -> list[Any]:
    """Poll the fake (no sleeps: each query is a round trip) until it saw ``count`` messages."""
    async with asyncio.timeout(WAIT):
        while True:
            seen = await received(client, method)
            if len(seen) >= count:
                return seen


# -- handshake and plain requests ------------------------------------------------


async def test_initialize_sends_protocol_version_client_info_and_default_capabilities() -> None:
    async with spawn_fake() as client:
        assert client.initialized
        assert client.server_info == {"name": "fake-agentrpc", "version": "0.0"}
        assert client.server_capabilities is not None
        assert client.server_capabilities["transcriptMutation"] is True
        assert client.protocol_version == 1
        assert client.initialize_result is not None
        sent = client.initialize_result["receivedParams"]
        assert sent["protocolVersion"] == 1
        assert sent["clientInfo"] == {"name": "agentrpc-python", "version": agentrpc.__version__}
        assert sent["capabilities"] == {"tools": True, "confirmations": "notify"}


async def test_initialize_passes_custom_capabilities_and_client_info() -> None:
    caps = {"tools": False, "confirmations": "request", "hooks": True}
    async with spawn_fake(capabilities=caps, client_info={"name": "host", "version": "9"}) as client:
        assert client.initialize_result is not None
        sent = client.initialize_result["receivedParams"]
        assert sent["capabilities"] == caps
        assert sent["clientInfo"] == {"name": "host", "version": "9"}


async def test_spawn_can_be_awaited_and_closed_explicitly() -> None:
    client = await spawn_fake()
    try:
        assert await client.request("test/echo", {"a": 1}) == {"a": 1}
    finally:
        await client.close()
    assert client.closed


async def test_round_trip_keeps_unicode_and_newlines_in_strings() -> None:
    payload = {"text": "line one\nline two\r\n\u2028ünïcödé 🚀", "n": [1, 2.5, None, True]}
    async with spawn_fake() as client:
        assert await client.request("test/echo", payload) == payload


async def test_concurrent_requests_get_their_own_answers() -> None:
    async with spawn_fake() as client:
        results = await asyncio.gather(*(client.request("test/echo", {"i": i}) for i in range(50)))
        assert results == [{"i": i} for i in range(50)]


async def test_non_json_params_fail_locally_and_the_connection_survives() -> None:
    async with spawn_fake() as client:
        with pytest.raises(ValueError):
            await client.request("test/echo", {"x": float("nan")})
        with pytest.raises(TypeError):
            await client.request("test/echo", {"x": object()})
        assert await client.request("test/echo", [1]) == [1]


# -- errors ------------------------------------------------------------------------

ERROR_TABLE: list[tuple[int, str, type[AgentRPCError]]] = [
    (-32700, "parseError", agentrpc.ParseError),
    (-32600, "invalidRequest", agentrpc.InvalidRequest),
    (-32600, "messageTooLarge", agentrpc.MessageTooLarge),
    (-32601, "methodNotFound", agentrpc.MethodNotFound),
    (-32602, "invalidParams", agentrpc.InvalidParams),
    (-32602, "invalidTranscript", agentrpc.InvalidTranscript),
    (-32602, "invalidConfiguration", agentrpc.InvalidConfiguration),
    (-32603, "internalError", agentrpc.InternalError),
    (-32002, "notInitialized", agentrpc.NotInitialized),
    (-32800, "cancelled", agentrpc.Cancelled),
    (-32010, "sessionNotFound", agentrpc.SessionNotFound),
    (-32011, "alreadyRunning", agentrpc.AlreadyRunning),
    (-32012, "sessionBusy", agentrpc.SessionBusy),
    (-32013, "revisionMismatch", agentrpc.RevisionMismatch),
    (-32014, "noPendingConfirmation", agentrpc.NoPendingConfirmation),
    (-32020, "maxToolCallsExceeded", agentrpc.MaxToolCallsExceeded),
    (-32021, "maxRoundTripsExceeded", agentrpc.MaxRoundTripsExceeded),
    (-32022, "wallClockTimeoutExceeded", agentrpc.WallClockTimeoutExceeded),
    (-32030, "toolChoiceUnsupported", agentrpc.ToolChoiceUnsupported),
    (-32031, "toolChoiceNotHonored", agentrpc.ToolChoiceNotHonored),
    (-32040, "egressRefused", agentrpc.EgressRefused),
    (-32041, "unreadableImageAttachment", agentrpc.UnreadableImageAttachment),
    (-32050, "providerError", agentrpc.ProviderError),
    (-32051, "providerContractViolation", agentrpc.ProviderContractViolation),
    (-32060, "toolExecutorError", agentrpc.ToolExecutorError),
    (-32061, "hookError", agentrpc.HookError),
    (-32070, "structuredOutput", agentrpc.StructuredOutputError),
    (-32001, "overloaded", agentrpc.Overloaded),
]


async def test_every_error_kind_raises_its_class_over_the_wire() -> None:
    async with spawn_fake() as client:
        for code, kind, cls in ERROR_TABLE:
            error = {"code": code, "message": f"boom {kind}", "data": {"kind": kind, "turnId": "t-1"}}
            with pytest.raises(cls) as caught:
                await client.request("test/error", error)
            assert type(caught.value) is cls, kind
            assert caught.value.code == code
            assert caught.value.kind == kind
            assert caught.value.message == f"boom {kind}"
            assert caught.value.turn_id == "t-1"


async def test_turn_error_fields_survive_the_wire() -> None:
    async with spawn_fake() as client:
        with pytest.raises(Cancelled) as cancelled:
            await client.request("test/error", {
                "code": -32800, "message": "turn cancelled",
                "data": {"kind": "cancelled", "turnId": "t-9", "partialText": "Hello, wor"},
            })
        assert cancelled.value.partial_text == "Hello, wor"
        assert cancelled.value.turn_id == "t-9"

        with pytest.raises(agentrpc.ProviderError) as provider:
            await client.request("test/error", {
                "code": -32050, "message": "rate limited",
                "data": {"kind": "providerError", "turnId": "t-2", "partialText": "",
                         "provider": {"code": "rateLimited", "httpStatus": 429,
                                      "retryGuidance": {"kind": "retryWithBackoff", "afterSeconds": 7},
                                      "isRetryable": True, "requiresUserAction": False,
                                      "safeDescription": "Too many requests.",
                                      "unsafeMessage": "429 from upstream"}},
            })
        err = provider.value
        assert err.provider_code == "rateLimited"
        assert err.http_status == 429
        assert err.retry_guidance == agentrpc.RetryGuidance("retryWithBackoff", 7.0)
        assert err.is_retryable and not err.requires_user_action
        assert err.safe_description == "Too many requests."
        assert err.unsafe_message == "429 from upstream"

        with pytest.raises(agentrpc.RunLimitExceeded) as limit:
            await client.request("test/error", {
                "code": -32021, "message": "too many round trips",
                "data": {"kind": "maxRoundTripsExceeded", "limit": 32},
            })
        assert isinstance(limit.value, agentrpc.MaxRoundTripsExceeded)
        assert limit.value.limit == 32


async def test_unknown_kind_falls_back_by_code_then_to_the_base_class() -> None:
    async with spawn_fake() as client:
        with pytest.raises(InvalidParams) as by_code:
            await client.request("test/error", {"code": -32602, "message": "x", "data": {"kind": "brandNew"}})
        assert by_code.value.kind == "brandNew"

        with pytest.raises(AgentRPCError) as unknown:
            await client.request("test/error", {"code": -31999, "message": "novel", "data": {"kind": "novel"}})
        assert type(unknown.value) is AgentRPCError
        assert unknown.value.code == -31999

        with pytest.raises(MethodNotFound) as no_data:
            await client.request("test/error", {"code": -32601, "message": "no data at all"})
        assert no_data.value.kind is None


async def test_unknown_method_on_the_server_raises_method_not_found() -> None:
    async with spawn_fake() as client:
        with pytest.raises(MethodNotFound):
            await client.request("no/such/method")


# -- notifications ---------------------------------------------------------------


def _notes(*items: tuple[str, Any]) -> dict[str, Any]:
    return {"notifications": [{"method": m, "params": p} for m, p in items]}


async def test_sync_and_async_notification_callbacks_and_unsubscribe() -> None:
    async with spawn_fake() as client:
        sync_seen: list[Any] = []
        async_seen: list[Any] = []
        async_done = asyncio.Event()

        async def on_async(params: Any) -> None:
            async_seen.append(params)
            if len(async_seen) == 2:
                async_done.set()

        unsubscribe = client.on_notification("session/event", sync_seen.append)
        client.on_notification("session/event", on_async)
        await client.request("test/notify", _notes(("session/event", {"seq": 1}), ("other", 0),
                                                  ("session/event", {"seq": 2})))
        # The answer comes after the notifications on the same pipe, and sync
        # callbacks run in arrival order, so they have all run by now.
        assert sync_seen == [{"seq": 1}, {"seq": 2}]
        await asyncio.wait_for(async_done.wait(), WAIT)
        assert async_seen == [{"seq": 1}, {"seq": 2}]

        unsubscribe()
        unsubscribe()  # idempotent
        await client.request("test/notify", _notes(("session/event", {"seq": 3})))
        assert sync_seen == [{"seq": 1}, {"seq": 2}]


async def test_a_failing_callback_does_not_break_the_connection(caplog: pytest.LogCaptureFixture) -> None:
    def broken(params: Any) -> None:
        raise RuntimeError("listener bug")

    async with spawn_fake() as client:
        seen: list[Any] = []
        client.on_notification("n", broken)
        client.on_notification("n", seen.append)
        with caplog.at_level(logging.ERROR, logger="agentrpc.client"):
            await client.request("test/notify", _notes(("n", 1)))
        assert seen == [1]
        assert "listener bug" in caplog.text
        assert await client.request("test/echo", 5) == 5


async def test_notification_stream_filters_and_ends_when_the_client_closes() -> None:
    async with spawn_fake() as client:
        everything = client.notifications()
        events = client.notifications("session/event")
        await client.request("test/notify", _notes(("session/event", {"seq": 1}), ("log", "x"),
                                                  ("session/event", {"seq": 2})))
        await client.close()
        assert [n async for n in events] == [
            Notification("session/event", {"seq": 1}),
            Notification("session/event", {"seq": 2}),
        ]
        assert [n.method async for n in everything] == ["session/event", "log", "session/event"]


async def test_closing_a_stream_stops_it() -> None:
    async with spawn_fake() as client:
        async with client.notifications("n") as stream:
            await client.request("test/notify", _notes(("n", 1)))
            assert (await anext(stream)).params == 1
        await client.request("test/notify", _notes(("n", 2)))
        assert [n async for n in stream] == []


async def test_garbage_lines_are_ignored_and_batches_are_unpacked() -> None:
    async with spawn_fake() as client:
        seen: list[Any] = []
        client.on_notification("n", seen.append)
        await client.request("test/raw", {"lines": [
            "this is not json",
            "42",
            '[{"jsonrpc":"2.0","method":"n","params":1},{"jsonrpc":"2.0","method":"n","params":2}]',
            '{"jsonrpc":"2.0","id":999999,"result":"nobody asked"}',
        ]})
        assert seen == [1, 2]
        assert await client.request("test/echo", "still fine") == "still fine"


# -- server → client requests -------------------------------------------------------


async def test_sync_and_async_request_handlers_answer_with_their_result() -> None:
    async with spawn_fake() as client:
        client.on_request("tool/call", lambda params: {"outcome": "ok", "content": params["arguments"]})

        async def confirm(params: Any) -> dict[str, Any]:
            await asyncio.sleep(0)
            return {"decision": "approve"}

        client.on_request("confirmation/request", confirm)
        answer = await client.request("test/serverRequest", {"method": "tool/call", "params": {"arguments": {"x": 1}}})
        assert answer["response"]["result"] == {"outcome": "ok", "content": {"x": 1}}
        answer = await client.request("test/serverRequest", {"method": "confirmation/request", "params": {}})
        assert answer["response"]["result"] == {"decision": "approve"}


async def test_handler_errors_become_error_answers() -> None:
    async with spawn_fake() as client:
        def rejects(params: Any) -> None:
            raise InvalidParams("arguments must be an object", {"field": "arguments"})

        def crashes(params: Any) -> None:
            raise KeyError("oops")

        client.on_request("a", rejects)
        client.on_request("b", crashes)
        client.on_request("c", lambda params: object())  # not JSON

        r = (await client.request("test/serverRequest", {"method": "a"}))["response"]
        assert r["error"] == {"code": -32602, "message": "arguments must be an object",
                              "data": {"kind": "invalidParams", "field": "arguments"}}
        r = (await client.request("test/serverRequest", {"method": "b"}))["response"]
        assert r["error"]["code"] == -32603 and "KeyError" in r["error"]["message"]
        assert r["error"]["data"]["kind"] == "internalError"
        r = (await client.request("test/serverRequest", {"method": "c"}))["response"]
        assert r["error"]["code"] == -32603


async def test_request_handlers_run_concurrently() -> None:
    async with spawn_fake() as client:
        started = 0
        both_started = asyncio.Event()

        async def tool(params: Any) -> dict[str, Any]:
            nonlocal started
            started += 1
            if started == 2:
                both_started.set()
            # A serialising client would never let the second call start.
            await asyncio.wait_for(both_started.wait(), WAIT)
            return {"outcome": "ok", "content": params["n"]}

        client.on_request("tool/call", tool)
        answers = await asyncio.gather(*(
            client.request("test/serverRequest", {"method": "tool/call", "params": {"n": n}}) for n in (1, 2)
        ))
        assert sorted(a["response"]["result"]["content"] for a in answers) == [1, 2]


async def test_unknown_server_request_is_answered_method_not_found() -> None:
    async with spawn_fake() as client:
        r = (await client.request("test/serverRequest", {"method": "hook/call", "params": {}}))["response"]
        assert r["error"]["code"] == -32601
        assert r["error"]["data"]["kind"] == "methodNotFound"


async def test_removed_handler_no_longer_answers() -> None:
    async with spawn_fake() as client:
        remove = client.on_request("tool/call", lambda params: {})
        remove()
        r = (await client.request("test/serverRequest", {"method": "tool/call"}))["response"]
        assert r["error"]["code"] == -32601


async def test_server_cancel_request_cancels_the_handler_and_answers_cancelled() -> None:
    async with spawn_fake() as client:
        started = asyncio.Event()
        handler_cancelled = asyncio.Event()

        async def slow_tool(params: Any) -> dict[str, Any]:
            started.set()
            try:
                await asyncio.Event().wait()  # until cancelled (the test is bounded)
            except asyncio.CancelledError:
                handler_cancelled.set()
                raise
            return {}

        client.on_request("tool/call", slow_tool)

        async def go_when_started() -> None:
            await asyncio.wait_for(started.wait(), WAIT)
            await client.notify("test/go")

        go = asyncio.create_task(go_when_started())
        answer = await client.request(
            "test/serverRequestCancel", {"method": "tool/call", "params": {}, "waitFor": "test/go"}
        )
        await go
        assert handler_cancelled.is_set()
        assert answer["response"]["error"]["code"] == -32800
        assert answer["response"]["error"]["data"]["kind"] == "cancelled"


async def test_server_cancel_before_the_handler_starts_still_answers_cancelled() -> None:
    async with spawn_fake() as client:
        ran: list[Any] = []
        client.on_request("tool/call", ran.append)
        answer = await client.request(
            "test/serverRequestCancel", {"method": "tool/call", "params": {}, "immediate": True}
        )
        assert answer["response"]["error"]["code"] == -32800
        assert ran == []


# -- cancellation and timeouts ----------------------------------------------------


async def test_cancelling_the_awaiting_task_sends_cancel_request() -> None:
    async with spawn_fake() as client:
        task = asyncio.create_task(client.request("test/hang"))
        await wait_until_received(client, "test/hang")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        cancels = await wait_until_received(client, "$/cancelRequest")
        hung = (await received(client, "test/hang"))[0]
        assert cancels[0]["params"] == {"id": hung["id"]}
        # The late -32800 answer to the withdrawn request is dropped quietly.
        assert await client.request("test/echo", 1) == 1


async def test_timeout_raises_request_timeout_and_withdraws_the_request() -> None:
    async with spawn_fake() as client:
        # Set after the handshake: on a busy machine starting the fake server
        # alone can take longer than the 0.2 s this test waits for test/hang.
        client.request_timeout = 0.2
        with pytest.raises(RequestTimeout) as caught:
            await client.request("test/hang")
        assert isinstance(caught.value, TimeoutError)
        assert caught.value.method == "test/hang"
        cancels = await wait_until_received(client, "$/cancelRequest")
        assert cancels[0]["params"] == {"id": caught.value.request_id}
        # An explicit None overrides the client default: no limit.
        assert await client.request("test/echo", 2, timeout=None) == 2


async def test_a_server_that_stops_reading_cannot_block_requests_or_close() -> None:
    async with spawn_fake(shutdown_timeout=0.5) as client:
        await client.request("test/stopReading")
        # Far more than a pipe buffer: the write itself blocks, and the limit covers it.
        with pytest.raises(RequestTimeout):
            await client.request("test/echo", "x" * (8 * 1024 * 1024), timeout=0.5)
    assert client.closed and client.returncode is not None


# -- death, stderr, shutdown --------------------------------------------------------


async def test_server_death_fails_every_pending_request_with_the_stderr_tail() -> None:
    async with spawn_fake() as client:
        hung = [asyncio.create_task(client.request("test/hang")) for _ in range(3)]
        stream = client.notifications()
        await wait_until_received(client, "test/hang", 3)
        with pytest.raises(ServerExited) as died:
            await client.request("test/die", {"code": 7, "stderr": "fatal: the engine fell over\n"})
        assert died.value.returncode == 7
        assert "the engine fell over" in died.value.stderr_tail
        assert "the engine fell over" in str(died.value)
        for task in hung:
            with pytest.raises(ServerExited):
                await task
        assert client.closed
        assert await client.wait_closed(timeout=WAIT)
        assert [n async for n in stream] == []
        with pytest.raises(TransportClosed):
            await client.request("test/echo", 1)
        with pytest.raises(TransportClosed):
            await client.notify("anything")
    assert client.returncode == 7


async def test_server_closing_stdout_is_reported_as_server_exited() -> None:
    async with spawn_fake(shutdown_timeout=1.0) as client:
        pending = asyncio.create_task(client.request("test/hang"))
        await wait_until_received(client, "test/hang")
        await client.request("test/closeStdout")
        with pytest.raises(ServerExited):
            await pending


async def test_large_stderr_never_blocks_the_server() -> None:
    async with spawn_fake(stderr_tail_lines=50) as client:
        result = await client.request("test/stderr", {"bytes": 3 * 1024 * 1024}, timeout=30)
        assert result["written"] >= 3 * 1024 * 1024
        # The answer can overtake the last stderr bytes; wait for them, bounded.
        async with asyncio.timeout(WAIT):
            while "last stderr line" not in client.stderr_tail:
                await client.request("test/echo", None)
        assert len(client.stderr_tail.splitlines()) <= 51
        assert len(client.stderr_tail) < 50 * 8300


async def test_stderr_spew_before_the_handshake_does_not_deadlock() -> None:
    async with spawn_fake(env={"FAKE_STARTUP_STDERR": str(2 * 1024 * 1024)}, request_timeout=30) as client:
        assert client.initialized
        assert "startup noise done" in client.stderr_tail


async def test_stderr_reaches_the_debug_logger(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="agentrpc.server"):
        async with spawn_fake() as client:
            await client.request("test/stderr", {"bytes": 10, "line": "hello from stderr"})
    assert "hello from stderr" in caplog.text


async def test_close_sends_shutdown_then_exit_and_is_idempotent() -> None:
    async with spawn_fake() as client:
        await asyncio.gather(client.close(), client.close())
        await client.close()
        assert client.returncode == 0
        assert "fake: exiting after shutdown,exit" in client.stderr_tail
        with pytest.raises(TransportClosed) as closed:
            await client.request("test/echo", 1)
        assert not isinstance(closed.value, ServerExited)


async def test_close_kills_a_server_that_ignores_exit_and_sigterm() -> None:
    env = {"FAKE_IGNORE_EXIT": "1", "FAKE_IGNORE_SIGTERM": "1"}
    async with spawn_fake(env=env, shutdown_timeout=0.5) as client:
        pass
    assert client.returncode is not None and client.returncode < 0  # killed by a signal


async def test_close_fails_requests_still_pending() -> None:
    env = {"FAKE_IGNORE_EXIT": "1"}
    async with spawn_fake(env=env, shutdown_timeout=0.5) as client:
        pending = asyncio.create_task(client.request("test/hang"))
        await wait_until_received(client, "test/hang")
        await client.close()
        with pytest.raises(TransportClosed):
            await pending


async def test_requests_before_initialize_get_not_initialized() -> None:
    async with spawn_fake(env={"FAKE_REQUIRE_INIT": "1"}, initialize=False) as client:
        assert not client.initialized
        assert client.server_info is None
        with pytest.raises(NotInitialized):
            await client.request("test/echo", 1)
        await client.initialize()
        assert await client.request("test/echo", 1) == 1


async def test_missing_binary_names_where_it_looked() -> None:
    with pytest.raises(BinaryNotFound) as caught:
        async with Client.spawn(binary="/nonexistent/dir/agentrpc"):
            pass
    assert "/nonexistent/dir/agentrpc" in str(caught.value)
    assert isinstance(caught.value, FileNotFoundError)


async def test_failed_handshake_leaves_no_process_behind() -> None:
    # `python -c` that exits at once: initialize must fail with ServerExited.
    with pytest.raises(ServerExited) as caught:
        async with Client.spawn(binary=__import__("sys").executable,
                                args=["-c", "import sys; sys.stderr.write('no protocol here'); sys.exit(4)"]):
            pass
    assert caught.value.returncode == 4
    assert "no protocol here" in caught.value.stderr_tail


async def test_internal_error_is_an_agentrpc_error() -> None:
    assert issubclass(InternalError, AgentRPCError)
    assert issubclass(ServerExited, agentrpc.AgentRPCException)
