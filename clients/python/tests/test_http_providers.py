"""Full turns through the real binary against a local HTTP server that plays
OpenAI's and Anthropic's APIs with the recorded streams in shared/fixtures and
with their error responses (docs/protocol.md §15, docs/protocol.md §13)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agentrpc import Client, ProviderError

from conftest import real_binary
from fake_provider import FIXTURES, Canned, FakeProvider, fixture_text

BINARY = real_binary()
SECRET = "sk-test-SECRET-0123456789abcdef"
TIMEOUT = 30.0

pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN"),
    pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared/fixtures is not beside the repository"),
]

WEATHER = {"name": "get_weather", "inputSchema": {"type": "object", "properties": {"location": {"type": "string"}, "city": {"type": "string"}}}}


@asynccontextmanager
async def served(tmp_path: Path, provider: str, *, tools: list[dict[str, Any]] | None = None, log: bool = False) -> AsyncIterator[tuple[Any, FakeProvider, Client, list[dict[str, Any]]]]:
    """A fake provider, a server configured to use it (key from the environment),
    a session, and the list of tool calls the client saw."""
    fake = FakeProvider()
    config = {"models": {"m": {"provider": provider, "model": f"{provider}-test-model", "baseURL": fake.base_url + "/v1", "apiKeyEnv": "TEST_PROVIDER_KEY"}}}
    (tmp_path / "agentrpc.json").write_text(json.dumps(config))
    args = ["--dump-requests", str(tmp_path / "dump.jsonl")]
    if log:
        args += ["--log-level", "trace"]
    calls: list[dict[str, Any]] = []
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, args=args, env={"TEST_PROVIDER_KEY": SECRET}, request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT) as client:
            def tool_call(params: dict[str, Any]) -> dict[str, Any]:
                calls.append(params)
                return {"outcome": "ok", "content": {"celsius": 18}}

            client.on_request("tool/call", tool_call)
            session = await client.open_session(model="m", tools=tools or [WEATHER])
            yield session, fake, client, calls
    finally:
        fake.close()


def events_of(client: Client) -> Any:
    return client.notifications("session/event")


async def test_openai_text_stream_is_a_completed_turn(tmp_path: Path) -> None:
    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(Canned.sse("openai-chat/text.sse"))
        result = await session.send("hello")
        assert result["message"]["text"] == fixture_text("openai-chat/text.sse")
        assert result["usage"]["inputTokens"] > 0
        sent = fake.received[0]
        assert sent.path == "/v1/chat/completions"
        assert sent.headers["authorization"] == f"Bearer {SECRET}"
        assert sent.body["stream"] is True and sent.body["stream_options"] == {"include_usage": True}
        assert sent.body["messages"][-1] == {"role": "user", "content": "hello"}


async def test_openai_tool_call_then_answer(tmp_path: Path) -> None:
    async with served(tmp_path, "openai") as (session, fake, _client, calls):
        fake.queue(Canned.sse("openai-chat/tool-call-nonstrict.sse"), Canned.sse("openai-chat/text.sse"))
        result = await session.send("weather?")
        assert result["toolCalls"] == 1 and result["roundTrips"] == 2
        assert calls[0]["name"] == "get_weather" and calls[0]["arguments"] == {"city": "New York City"}
        second = fake.received[1].body["messages"]
        assistant = next(m for m in second if m["role"] == "assistant")
        assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "get_weather"
        tool = next(m for m in second if m["role"] == "tool")
        assert json.loads(tool["content"]) == {"celsius": 18}


async def test_openai_parallel_tool_calls(tmp_path: Path) -> None:
    tools = [{"name": "GetWeatherArgs", "inputSchema": {"type": "object"}}, {"name": "get_stock_price", "inputSchema": {"type": "object"}}]
    async with served(tmp_path, "openai", tools=tools) as (session, fake, _client, calls):
        fake.queue(Canned.sse("openai-chat/parallel-tool-calls.sse"), Canned.sse("openai-chat/text.sse"))
        result = await session.send("two cities")
        assert result["toolCalls"] == 2
        assert [c["name"] for c in calls] == ["GetWeatherArgs", "get_stock_price"]
        assert len({c["callId"] for c in calls}) == 2


async def test_anthropic_tool_use_then_text(tmp_path: Path) -> None:
    async with served(tmp_path, "anthropic") as (session, fake, _client, calls):
        fake.queue(Canned.sse("anthropic/tool-use.sse"), Canned.sse("anthropic/text.sse"))
        result = await session.send("weather in Paris")
        assert calls[0]["arguments"] == {"location": "Paris"}
        assert result["message"]["text"] == fixture_text("anthropic/text.sse")
        first = fake.received[0]
        assert first.path == "/v1/messages" and first.headers["x-api-key"] == SECRET
        results = fake.received[1].body["messages"][-1]["content"]
        assert results[0]["type"] == "tool_result"


def anthropic_stream(*events: dict[str, Any]) -> Canned:
    """A synthetic Anthropic SSE stream of the given events (name taken from each `type`)."""
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return Canned(200, {"Content-Type": "text/event-stream"}, body.encode())


async def test_anthropic_signed_thinking_goes_back_before_tool_use(tmp_path: Path) -> None:
    """Extended thinking with tools: the API wants the thinking block, with its
    signature and unchanged, first in the assistant message before the tool_use."""
    thinking_then_tool = anthropic_stream(
        {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "The user wants "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Paris weather."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCkYIBx=="}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Paris\"}"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}},
        {"type": "message_stop"},
    )
    async with served(tmp_path, "anthropic") as (session, fake, _client, calls):
        fake.queue(thinking_then_tool, Canned.sse("anthropic/text.sse"))
        result = await session.send("weather in Paris", options={"reasoningLevel": "low"})
        assert calls[0]["arguments"] == {"city": "Paris"}
        assert result["message"]["text"] == fixture_text("anthropic/text.sse")
        second = fake.received[1].body
        assert second["thinking"]["type"] == "enabled"
        assistant = second["messages"][1]
        assert assistant["role"] == "assistant"
        assert assistant["content"][0] == {"type": "thinking", "thinking": "The user wants Paris weather.", "signature": "EqQBCkYIBx=="}
        assert assistant["content"][1]["type"] == "tool_use" and assistant["content"][1]["id"] == "toolu_1"
        entries = list(await session.transcript())
        reasoning = [e for e in entries if e["type"] == "reasoning"]
        assert reasoning[0]["text"] == "The user wants Paris weather." and reasoning[0]["signature"] == "EqQBCkYIBx=="


@pytest.mark.parametrize(
    ("status", "body", "headers", "code"),
    [
        (401, {"error": {"message": "bad key", "type": "invalid_request_error", "code": "invalid_api_key"}}, {}, "authUserInvalid"),
        (403, {"error": {"message": "no access", "type": "permission_error"}}, {}, "entitlementRequired"),
        (400, {"error": {"message": "too long", "code": "context_length_exceeded"}}, {}, "contextLengthExceeded"),
    ],
)
async def test_non_transient_errors_surface_typed_without_retry(tmp_path: Path, status: int, body: Any, headers: dict[str, str], code: str) -> None:
    async with served(tmp_path, "openai") as (session, fake, client, _calls):
        fake.queue(Canned.error(status, body, headers))
        with pytest.raises(ProviderError) as info:
            await session.send("hi")
        provider = info.value.provider
        assert provider["code"] == code and provider["httpStatus"] == status
        assert SECRET not in json.dumps(provider)
        assert len(fake.received) == 1
        assert info.value.safe_description and "bad key" not in info.value.safe_description


@pytest.mark.parametrize(
    ("canned", "code"),
    [
        (Canned.error(429, {"error": {"message": "slow down", "type": "rate_limit_error"}}, {"retry-after-ms": "20"}), "rateLimited"),
        (Canned.error(500, {"error": {"message": "oops"}}, {"retry-after": "0"}), "internalError"),
        # docs/protocol.md §13 counts modelUnavailable among the transient codes.
        (Canned.error(404, {"error": {"message": "no model", "code": "model_not_found"}}, {"retry-after": "0"}), "modelUnavailable"),
        (Canned.error(529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}, {"retry-after": "0"}), "serviceUnavailable"),
        (Canned(200, {"Content-Type": "text/event-stream"}, b""), "streamTruncated"),
    ],
)
async def test_transient_errors_before_output_are_retried(tmp_path: Path, canned: Canned, code: str) -> None:
    async with served(tmp_path, "openai") as (session, fake, client, _calls):
        fake.queue(canned, Canned.sse("openai-chat/text.sse"))
        stream = client.notifications("session/event")
        result = await session.send("hi")
        assert result["message"]["text"] == fixture_text("openai-chat/text.sse")
        assert len(fake.received) == 2
        retrying = []
        async for note in stream:
            event = note.params["event"]
            if event["type"] == "retrying":
                retrying.append(event)
            if event["type"] == "turnEnded":
                break
        assert retrying and retrying[0]["error"]["data"]["provider"]["code"] == code
        assert retrying[0]["attempt"] == 1


async def test_retry_after_header_sets_after_seconds(tmp_path: Path) -> None:
    async with served(tmp_path, "openai") as (session, fake, client, _calls):
        fake.queue(*[Canned.error(429, {"error": {"message": "slow"}}, {"retry-after-ms": "30"})] * 4)
        with pytest.raises(ProviderError) as info:
            await session.send("hi")
        guidance = info.value.retry_guidance
        assert guidance is not None and guidance.kind == "retryWithBackoff" and guidance.after_seconds == pytest.approx(0.03)
        assert info.value.is_retryable and not info.value.requires_user_action


async def test_stream_cut_mid_way_after_output_is_not_retried(tmp_path: Path) -> None:
    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        body = (FIXTURES / "openai-chat/text.sse").read_bytes()
        fake.queue(Canned(200, {"Content-Type": "text/event-stream"}, body, cut_after=len(body) // 2))
        with pytest.raises(ProviderError) as info:
            await session.send("hi")
        assert info.value.provider["code"] in ("streamTruncated", "network")
        assert info.value.partial_text
        assert len(fake.received) == 1


async def test_api_key_never_appears_in_dumps_logs_or_errors(tmp_path: Path) -> None:
    async with served(tmp_path, "openai", log=True) as (session, fake, client, _calls):
        fake.queue(Canned.error(401, {"error": {"message": f"Incorrect API key provided: {SECRET}", "code": "invalid_api_key"}}))
        with pytest.raises(ProviderError) as info:
            await session.send("hi")
        assert SECRET not in json.dumps(info.value.data)
        stderr = client.stderr_tail
    assert SECRET not in (tmp_path / "dump.jsonl").read_text()
    assert SECRET not in stderr


async def test_anthropic_disallowed_mode_still_defines_the_tools_its_history_used(tmp_path: Path) -> None:
    """Anthropic refuses tool_use/tool_result blocks in a request without tools,
    so `disallowed` sends the history's tools with tool_choice none."""
    fake = FakeProvider()
    config = {"models": {"m": {"provider": "anthropic", "model": "claude-test", "baseURL": fake.base_url + "/v1", "apiKeyEnv": "TEST_PROVIDER_KEY"}}}
    (tmp_path / "agentrpc.json").write_text(json.dumps(config))
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, env={"TEST_PROVIDER_KEY": SECRET}, request_timeout=TIMEOUT) as client:
            client.on_request("tool/call", lambda params: {"outcome": "ok", "content": "18 C"})
            session = await client.open_session(
                model="m", tools=[WEATHER], properties={"phase": "lookup"},
                profiles={"selector": "phase", "cases": {
                    "lookup": {"tools": ["get_weather"], "hooks": {"onToolOutput": [{"set": {"phase": "answer"}}]}},
                    "answer": {"options": {"toolCallingMode": "disallowed"}},
                }})
            fake.queue(Canned.sse("anthropic/tool-use.sse"), Canned.sse("anthropic/text.sse"))
            await session.send("weather in Paris")
            second = fake.received[1].body
            assert [t["name"] for t in second["tools"]] == ["get_weather"]
            assert second["tool_choice"] == {"type": "none"}
            first = fake.received[0].body
            assert "tool_choice" not in first or first["tool_choice"] != {"type": "none"}
    finally:
        fake.close()
