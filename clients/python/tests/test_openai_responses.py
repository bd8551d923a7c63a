"""Full turns through the real binary against a local HTTP server that plays the
OpenAI Responses API (`"provider": "openai-responses"`, docs/protocol.md §15)
with the streams in Tests/Fixtures/openai-responses (written from the
documented event shapes, see their README)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agentrpc import Client, ProviderError, StructuredOutputError

from conftest import real_binary
from fake_provider import Canned, FakeProvider

BINARY = real_binary()
SECRET = "sk-test-SECRET-responses-0123456789"
TIMEOUT = 30.0
RESPONSES = Path(__file__).resolve().parents[3] / "Tests" / "Fixtures" / "openai-responses"

pytestmark = pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN")

WEATHER = {"name": "get_weather", "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}


def sse(name: str) -> Canned:
    return Canned(200, {"Content-Type": "text/event-stream"}, (RESPONSES / name).read_bytes())


def events(name: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in (RESPONSES / name).read_text(encoding="utf-8").splitlines() if line.startswith("data:")]


def streamed_text(name: str) -> str:
    return "".join(e["delta"] for e in events(name) if e["type"] == "response.output_text.delta")


@asynccontextmanager
async def served(tmp_path: Path, *, options: dict[str, Any] | None = None, log: bool = False) -> AsyncIterator[tuple[Any, FakeProvider, Client, list[dict[str, Any]]]]:
    fake = FakeProvider()
    model: dict[str, Any] = {"provider": "openai-responses", "model": "gpt-5-mini", "baseURL": fake.base_url + "/v1", "apiKeyEnv": "TEST_PROVIDER_KEY"}
    if options:
        model["options"] = options
    (tmp_path / "agentrpc.json").write_text(json.dumps({"models": {"m": model}}))
    args = ["--dump-requests", str(tmp_path / "dump.jsonl")] + (["--log-level", "trace"] if log else [])
    calls: list[dict[str, Any]] = []
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, args=args, env={"TEST_PROVIDER_KEY": SECRET}, request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT) as client:
            def tool_call(params: dict[str, Any]) -> dict[str, Any]:
                calls.append(params)
                return {"outcome": "ok", "content": {"celsius": 18}}

            client.on_request("tool/call", tool_call)
            session = await client.open_session(model="m", tools=[WEATHER])
            yield session, fake, client, calls
    finally:
        fake.close()


async def turn_events(stream: Any) -> list[dict[str, Any]]:
    """The events of a turn, from a `session/event` stream subscribed before it started, through `turnEnded`."""
    seen = []
    async for note in stream:
        seen.append(note.params["event"])
        if note.params["event"]["type"] == "turnEnded":
            return seen
    return seen


async def test_text_stream_is_a_completed_turn(tmp_path: Path) -> None:
    async with served(tmp_path) as (session, fake, _client, _calls):
        fake.queue(sse("text.sse"))
        result = await session.send("capital of France?")
        assert result["message"]["text"] == "The capital of France is Paris (Île-de-France) ✓."
        assert result["stopReason"] == "completed"
        assert result["usage"]["inputTokens"] == 21 and result["usage"]["outputTokens"] == 9
        sent = fake.received[0]
        assert sent.path == "/v1/responses"
        assert sent.headers["authorization"] == f"Bearer {SECRET}"
        body = sent.body
        assert body["model"] == "gpt-5-mini" and body["stream"] is True and body["store"] is False
        assert body["input"] == [{"role": "user", "content": "capital of France?"}]
        assert body["include"] == ["reasoning.encrypted_content"]
        assert body["tools"][0] == {"type": "function", "name": "get_weather", "description": "", "strict": False, "parameters": WEATHER["inputSchema"]}
        # `auto` is the API's default: not sent.
        assert "tool_choice" not in body


async def test_reasoning_and_function_call_round_trip_carries_encrypted_reasoning_back(tmp_path: Path) -> None:
    async with served(tmp_path) as (session, fake, client, calls):
        fake.queue(sse("reasoning-function-call.sse"), sse("text.sse"))
        stream = client.notifications("session/event")
        result = await session.send("weather in Paris?", options={"reasoningLevel": "low"})
        assert result["roundTrips"] == 2 and result["toolCalls"] == 1
        assert calls[0]["callId"] == "call_Q8x2Weather" and calls[0]["arguments"] == {"city": "Paris", "unit": "c"}
        seen = await turn_events(stream)
        reasoning = "".join(e["delta"] for e in seen if e["type"] == "reasoningDelta")
        assert reasoning == "**Finding the weather**\n\nThe user asks about Paris.\n\nI should call get_weather."
        usage = [e for e in seen if e["type"] == "usage"][0]
        assert usage["cachedInputTokens"] == 256 and usage["reasoningTokens"] == 64

        first, second = fake.received[0].body, fake.received[1].body
        assert first["reasoning"] == {"effort": "low", "summary": "auto"}
        items = second["input"]
        assert items[0] == {"role": "user", "content": "weather in Paris?"}
        # The reasoning item goes back whole (summary and encrypted content, no id),
        # before the call it led to; the call and its output pair by call_id.
        assert items[1] == {"type": "reasoning", "encrypted_content": "gAAAAABoEncryptedReasoningPayload02==",
                            "summary": [{"type": "summary_text", "text": "**Finding the weather**\n\nThe user asks about Paris."},
                                        {"type": "summary_text", "text": "I should call get_weather."}]}
        assert items[2] == {"type": "function_call", "call_id": "call_Q8x2Weather", "name": "get_weather", "arguments": '{"city":"Paris","unit":"c"}'}
        assert items[3]["type"] == "function_call_output" and items[3]["call_id"] == "call_Q8x2Weather"
        assert json.loads(items[3]["output"]) == {"celsius": 18}

        entries = list(await session.transcript())
        kept = [e for e in entries if e["type"] == "reasoning"]
        assert kept[0]["text"] == reasoning and "gAAAAABoEncryptedReasoningPayload02==" in kept[0]["signature"]


async def test_stream_split_anywhere_across_reads_on_one_kept_alive_connection(tmp_path: Path) -> None:
    """The recorded stream arrives 7 bytes at a time (splitting events, JSON and
    UTF-8 characters across reads); both round trips share one connection."""
    async with served(tmp_path) as (session, fake, _client, calls):
        body = (RESPONSES / "reasoning-function-call.sse").read_bytes()
        fake.queue(Canned(200, {"Content-Type": "text/event-stream"}, b"", slow_chunks=[body[i:i + 7] for i in range(0, len(body), 7)]))
        text = (RESPONSES / "text.sse").read_bytes()
        pieces = [text[i:i + 7] for i in range(0, len(text), 7)]
        assert any(p[0] & 0xC0 == 0x80 for p in pieces), "some read must start inside a UTF-8 character"
        fake.queue(Canned(200, {"Content-Type": "text/event-stream"}, b"", slow_chunks=pieces))
        result = await session.send("weather in Paris?")
        assert calls[0]["arguments"] == {"city": "Paris", "unit": "c"}
        assert result["message"]["text"] == "The capital of France is Paris (Île-de-France) ✓."
        assert len(fake.received) == 2 and fake.connections == 1


async def test_structured_output_and_reasoning_without_summary(tmp_path: Path) -> None:
    async with served(tmp_path) as (session, fake, _client, _calls):
        fake.queue(sse("structured-output.sse"), sse("text.sse"))
        schema = {"type": "object", "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}}, "required": ["city", "celsius"]}
        value = await session.generate("weather as JSON", schema)
        assert value == {"city": "Paris", "celsius": 18}
        fmt = fake.received[0].body["text"]["format"]
        assert fmt["type"] == "json_schema" and fmt["name"] == "response" and fmt["schema"]["properties"] == schema["properties"]
        # Reasoning that showed no summary is still sent back with the next request.
        await session.send("thanks")
        items = fake.received[1].body["input"]
        reasoning = [i for i in items if i.get("type") == "reasoning"]
        assert reasoning == [{"type": "reasoning", "summary": [], "encrypted_content": "gAAAAABoEncryptedNoSummary10=="}]
        assert items.index(reasoning[0]) == 1 and items[2] == {"role": "assistant", "content": streamed_text("structured-output.sse")}


async def test_store_and_summary_options(tmp_path: Path) -> None:
    async with served(tmp_path, options={"store": True, "reasoningSummary": "detailed"}) as (session, fake, _client, _calls):
        fake.queue(sse("text.sse"))
        await session.send("hi", options={"reasoningLevel": "high"})
        body = fake.received[0].body
        assert body["store"] is True and body["reasoning"] == {"effort": "high", "summary": "detailed"}


async def response_entry(session: Any) -> dict[str, Any]:
    return [e for e in await session.transcript() if e["type"] == "response"][-1]


@pytest.mark.parametrize(("fixture", "reason"), [("incomplete-max-output-tokens.sse", "maxTokens"), ("incomplete-content-filter.sse", "contentFilter")])
async def test_incomplete_reply_says_how_it_ended(tmp_path: Path, fixture: str, reason: str) -> None:
    async with served(tmp_path) as (session, fake, client, _calls):
        fake.queue(sse(fixture))
        stream = client.notifications("session/event")
        result = await session.send("go on")
        assert result["stopReason"] == reason and result["message"]["text"] == streamed_text(fixture)
        ended = [e for e in await turn_events(stream) if e["type"] == "turnEnded"][0]
        assert ended["status"] == "completed" and ended["stopReason"] == reason
        entry = await response_entry(session)
        assert entry["incomplete"] is True and entry["stopReason"] == reason


async def test_refusal_ends_refusal(tmp_path: Path) -> None:
    async with served(tmp_path) as (session, fake, _client, _calls):
        fake.queue(sse("refusal.sse"))
        result = await session.send("something harmful")
        assert result["stopReason"] == "refusal" and result["message"]["text"] == "I'm sorry, I can't help with that."


async def test_generate_cut_by_the_token_limit_fails_truncated(tmp_path: Path) -> None:
    async with served(tmp_path) as (session, fake, _client, _calls):
        fake.queue(sse("incomplete-max-output-tokens.sse"))
        with pytest.raises(StructuredOutputError) as info:
            await session.generate("a title", {"type": "object", "properties": {"title": {"type": "string"}}})
        assert info.value.reason == "truncated" and info.value.data["stopReason"] == "maxTokens"


async def test_function_call_cut_by_the_token_limit_is_not_run(tmp_path: Path) -> None:
    async with served(tmp_path) as (session, fake, _client, calls):
        fake.queue(sse("incomplete-truncated-function-call.sse"))
        result = await session.send("write it")
        assert result["stopReason"] == "maxTokens" and result["toolCalls"] == 0
        assert calls == [] and len(fake.received) == 1
        assert [e["type"] for e in await session.transcript()] == ["prompt", "response"]


@pytest.mark.parametrize(
    ("canned", "code"),
    [
        (Canned.error(429, {"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}, {"retry-after-ms": "20"}), "rateLimited"),
        (Canned.error(500, {"error": {"message": "oops", "type": "server_error"}}, {"retry-after": "0"}), "internalError"),
        (sse("failed.sse"), "internalError"),
        (Canned(200, {"Content-Type": "text/event-stream"}, b""), "streamTruncated"),
    ],
)
async def test_transient_failures_before_output_are_retried(tmp_path: Path, canned: Canned, code: str) -> None:
    async with served(tmp_path) as (session, fake, client, _calls):
        fake.queue(canned, sse("text.sse"))
        stream = client.notifications("session/event")
        result = await session.send("hi")
        assert result["message"]["text"] == streamed_text("text.sse")
        assert len(fake.received) == 2
        retrying = [e for e in await turn_events(stream) if e["type"] == "retrying"]
        assert retrying and retrying[0]["error"]["data"]["provider"]["code"] == code


async def test_error_event_after_output_fails_the_turn_without_retry(tmp_path: Path) -> None:
    async with served(tmp_path) as (session, fake, _client, _calls):
        fake.queue(sse("error-event.sse"))
        with pytest.raises(ProviderError) as info:
            await session.send("hi")
        assert info.value.provider["code"] == "rateLimited"
        assert info.value.partial_text == "Partial"
        assert len(fake.received) == 1


async def test_rejected_key_is_typed_and_never_leaked(tmp_path: Path) -> None:
    async with served(tmp_path, log=True) as (session, fake, client, _calls):
        fake.queue(Canned.error(401, {"error": {"message": f"Incorrect API key provided: {SECRET}", "type": "invalid_request_error", "code": "invalid_api_key"}}))
        with pytest.raises(ProviderError) as info:
            await session.send("hi")
        assert info.value.provider["code"] == "authUserInvalid" and info.value.requires_user_action
        assert SECRET not in json.dumps(info.value.data)
        stderr = client.stderr_tail
    assert SECRET not in (tmp_path / "dump.jsonl").read_text()
    assert SECRET not in stderr
