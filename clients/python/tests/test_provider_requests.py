"""What agentrpc sends to a provider and how it reads the end of a stream,
through the real binary against a local fake provider (docs/protocol.md,
"Provider connections" and "Model options")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrpc import Client

from fake_provider import Canned, FakeProvider, fixture_text
from test_http_providers import BINARY, FIXTURES, SECRET, TIMEOUT, WEATHER, anthropic_stream, served

pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN"),
    pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared/fixtures is not beside the repository"),
]


def sse(*payloads: Any, done: bool = True) -> Canned:
    lines = [f"data: {json.dumps(p)}\n\n" for p in payloads] + (["data: [DONE]\n\n"] if done else [])
    return Canned(200, {"Content-Type": "text/event-stream"}, "".join(lines).encode())


def delta(content: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content} if content else {}, "finish_reason": finish}]}


# -- 6. the end of a stream ------------------------------------------------------


async def test_openai_stream_that_finished_without_done_is_accepted(tmp_path: Path) -> None:
    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(sse(delta("All "), delta("done."), delta("", "stop"), done=False))
        result = await session.send("hi")
        assert result["message"]["text"] == "All done." and result["stopReason"] == "completed"
        assert len(fake.received) == 1


async def test_anthropic_stream_that_finished_without_message_stop_is_accepted(tmp_path: Path) -> None:
    async with served(tmp_path, "anthropic") as (session, fake, _client, _calls):
        fake.queue(anthropic_stream(
            {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "All done."}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
        ))
        result = await session.send("hi")
        assert result["message"]["text"] == "All done."
        assert len(fake.received) == 1


async def test_a_stream_that_never_said_it_finished_is_still_truncated(tmp_path: Path) -> None:
    from agentrpc import ProviderError

    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(sse(delta("Half an"), done=False))
        with pytest.raises(ProviderError) as info:
            await session.send("hi")
        assert info.value.provider["code"] == "streamTruncated"


# -- 7. tool_choice ----------------------------------------------------------------


async def test_tool_choice_auto_is_not_sent(tmp_path: Path) -> None:
    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(Canned.sse("openai-chat/text.sse"))
        await session.send("hi")
        body = fake.received[0].body
        assert body["tools"] and "tool_choice" not in body


async def test_anthropic_tool_choice_auto_is_not_sent(tmp_path: Path) -> None:
    async with served(tmp_path, "anthropic") as (session, fake, _client, _calls):
        fake.queue(Canned.sse("anthropic/text.sse"))
        await session.send("hi")
        body = fake.received[0].body
        assert body["tools"] and "tool_choice" not in body


async def test_tool_choice_is_never_sent_when_the_model_does_not_support_it(tmp_path: Path) -> None:
    fake = FakeProvider()
    config = {"models": {"m": {"provider": "openai", "model": "local", "baseURL": fake.base_url + "/v1", "supportsToolChoice": False}}}
    (tmp_path / "agentrpc.json").write_text(json.dumps(config))
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, request_timeout=TIMEOUT) as client:
            session = await client.open_session(model="m", tools=[WEATHER])
            fake.queue(Canned.sse("openai-chat/text.sse"))
            await session.send("hi", options={"toolChoice": "none"})
            body = fake.received[0].body
            assert "tool_choice" not in body
    finally:
        fake.close()


# -- 9. usage that was not reported -------------------------------------------------


async def test_unreported_usage_is_absent_in_result_events_and_traces(tmp_path: Path) -> None:
    """llama.cpp streams no usage: the result's usage is empty, no usage event is
    sent, and the spans carry no token counts (not zeros)."""
    fake = FakeProvider()
    config = {"models": {"m": {"provider": "openai", "model": "local", "baseURL": fake.base_url + "/v1"}}}
    (tmp_path / "agentrpc.json").write_text(json.dumps(config))
    trace = tmp_path / "trace.jsonl"
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, args=["--trace-file", str(trace)], request_timeout=TIMEOUT) as client:
            session = await client.open_session(model="m")
            fake.queue(sse(delta("Hi"), delta("", "stop")))
            events = client.notifications("session/event")
            result = await session.send("hi")
            assert result["usage"] == {}
            assert result.usage.input_tokens is None and result.usage.total_tokens is None
            seen = []
            async for note in events:
                seen.append(note.params["event"]["type"])
                if seen[-1] == "turnEnded":
                    break
            assert "usage" not in seen
    finally:
        fake.close()
    spans = trace.read_text()
    assert "agentrpc.turn" in spans or spans.strip(), "the trace file is empty"
    assert "gen_ai.usage.input_tokens" not in spans and "gen_ai.usage.output_tokens" not in spans


async def test_a_failed_model_call_s_span_says_the_safe_description_not_the_provider_s_text(tmp_path: Path) -> None:
    """A trace is written without --trace-payloads: a failed round trip's span
    status is agentrpc's own description of the error, never the provider's
    prose (which the client still gets as ``unsafe_message``)."""
    from agentrpc import ProviderError

    fake = FakeProvider()
    config = {"models": {"m": {"provider": "openai", "model": "local", "baseURL": fake.base_url + "/v1"}}}
    (tmp_path / "agentrpc.json").write_text(json.dumps(config))
    trace = tmp_path / "trace.jsonl"
    prose = "the provider's own words, account 7731 of Alice"
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, args=["--trace-file", str(trace)], request_timeout=TIMEOUT) as client:
            session = await client.open_session(model="m")
            fake.queue(Canned.error(400, {"error": {"message": prose, "type": "invalid_request_error"}}))
            with pytest.raises(ProviderError) as failed:
                await session.send("hi")
    finally:
        fake.close()
    assert prose in failed.value.unsafe_message
    spans = [span for line in trace.read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]
    completion = [s for s in spans if s["name"] == "llm.completion"]
    assert completion and completion[-1]["status"] == {"code": 2, "message": failed.value.safe_description}
    assert "account 7731" not in trace.read_text()


# -- 5. retry policy ----------------------------------------------------------------


async def test_insufficient_quota_is_not_retried_and_needs_the_user(tmp_path: Path) -> None:
    from agentrpc import ProviderError

    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(Canned.error(429, {"error": {"message": "pay up", "type": "insufficient_quota", "code": "insufficient_quota"}}, {"retry-after": "0"}),
                   Canned.sse("openai-chat/text.sse"))
        with pytest.raises(ProviderError) as info:
            await session.send("hi")
        provider = info.value.provider
        assert provider["code"] == "quotaExceeded" and provider["requiresUserAction"] is True
        assert provider["retryGuidance"]["kind"] == "none" and not provider["isRetryable"]
        assert len(fake.received) == 1


async def test_x_should_retry_false_is_honoured(tmp_path: Path) -> None:
    from agentrpc import ProviderError

    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(Canned.error(503, {"error": {"message": "busy"}}, {"x-should-retry": "false", "retry-after": "0"}),
                   Canned.sse("openai-chat/text.sse"))
        with pytest.raises(ProviderError) as info:
            await session.send("hi")
        assert info.value.provider["code"] == "serviceUnavailable"
        assert info.value.provider["retryGuidance"]["kind"] == "none"
        assert len(fake.received) == 1


async def test_without_a_hint_no_after_seconds_is_claimed(tmp_path: Path) -> None:
    from agentrpc import ProviderError

    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(*[Canned.error(500, {"error": {"message": "oops"}})] * 4)
        with pytest.raises(ProviderError) as info:
            await session.send("hi", options={"limits": {"wallClockSeconds": 60}})
        guidance = info.value.provider["retryGuidance"]
        assert guidance["kind"] == "retryWithBackoff" and "afterSeconds" not in guidance


async def test_a_retry_after_past_the_wall_clock_is_not_waited_for(tmp_path: Path) -> None:
    """Retry-After 100 s (honoured up to 120 s) with a 5 s wall clock: the error
    is reported at once, with the hint, instead of a wait the turn cannot afford."""
    from agentrpc import ProviderError

    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(Canned.error(429, {"error": {"message": "slow down", "type": "rate_limit_error"}}, {"retry-after": "100"}),
                   Canned.sse("openai-chat/text.sse"))
        with pytest.raises(ProviderError) as info:
            await session.send("hi", options={"limits": {"wallClockSeconds": 5}})
        assert info.value.provider["retryGuidance"] == {"kind": "retryWithBackoff", "afterSeconds": 100}
        assert len(fake.received) == 1


# -- 10. --dump-requests shows the exact body ---------------------------------------


@pytest.mark.parametrize(("provider", "fixture"), [("openai", "openai-chat/text.sse"), ("anthropic", "anthropic/text.sse")])
async def test_dump_requests_holds_the_exact_body_sent(tmp_path: Path, provider: str, fixture: str) -> None:
    async with served(tmp_path, provider) as (session, fake, _client, _calls):
        fake.queue(Canned.sse(fixture))
        await session.send("hi")
        sent = fake.received[0].body
    lines = [json.loads(line) for line in (tmp_path / "dump.jsonl").read_text().splitlines() if line.strip()]
    assert lines[0]["body"] == sent
    # What the neutral form leaves out is there: stream_options, cache_control, the max_tokens default.
    if provider == "openai":
        assert lines[0]["body"]["stream_options"] == {"include_usage": True}
    else:
        assert lines[0]["body"]["max_tokens"] == 4096
    assert SECRET not in (tmp_path / "dump.jsonl").read_text()
