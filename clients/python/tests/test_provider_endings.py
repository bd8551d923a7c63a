"""How a reply ended (docs/protocol.md, "How a reply ended"), through the real
binary against a local HTTP server playing OpenAI's and Anthropic's APIs:
token limit, content filter and refusal reach the result, `turnEnded` and the
response entry; structured output cut off is `truncated`; tool arguments cut
by the token limit are handled the same way for both providers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrpc import StructuredOutputError

from fake_provider import Canned
from test_http_providers import BINARY, FIXTURES, anthropic_stream, served

pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN"),
    pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared/fixtures is not beside the repository"),
]


def openai_stream(*chunks: dict[str, Any], done: bool = True) -> Canned:
    """A synthetic OpenAI chat stream: each chunk is one `choices[0]` object."""
    lines = [f"data: {json.dumps({'choices': [{'index': 0, **c}]})}\n\n" for c in chunks]
    if done:
        lines.append("data: [DONE]\n\n")
    return Canned(200, {"Content-Type": "text/event-stream"}, "".join(lines).encode())


async def turn_ended(stream: Any) -> dict[str, Any]:
    async for note in stream:
        event = note.params["event"]
        if event["type"] == "turnEnded":
            return event
    raise AssertionError("no turnEnded")


async def response_entry(session: Any) -> dict[str, Any]:
    entries = list(await session.transcript())
    return [e for e in entries if e["type"] == "response"][-1]


@pytest.mark.parametrize(
    ("provider", "canned", "reason", "text"),
    [
        ("openai", openai_stream({"delta": {"content": "Once upon a"}}, {"delta": {}, "finish_reason": "length"}), "maxTokens", "Once upon a"),
        ("openai", openai_stream({"delta": {"content": "The recipe"}}, {"delta": {}, "finish_reason": "content_filter"}), "contentFilter", "The recipe"),
        ("anthropic", anthropic_stream(
            {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Once upon a"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 3}},
            {"type": "message_stop"},
        ), "maxTokens", "Once upon a"),
    ],
)
async def test_a_cut_off_reply_says_so_everywhere(tmp_path: Path, provider: str, canned: Canned, reason: str, text: str) -> None:
    async with served(tmp_path, provider) as (session, fake, client, _calls):
        fake.queue(canned)
        events = client.notifications("session/event")
        result = await session.send("tell me a story")
        assert result["stopReason"] == reason and result.stop_reason == reason and result.truncated
        assert result["message"]["text"] == text
        ended = await turn_ended(events)
        assert ended["status"] == "completed" and ended["stopReason"] == reason
        entry = await response_entry(session)
        assert entry["incomplete"] is True and entry["stopReason"] == reason and entry["text"] == text


async def test_an_anthropic_refusal_is_a_refusal_not_incomplete(tmp_path: Path) -> None:
    async with served(tmp_path, "anthropic") as (session, fake, client, _calls):
        fake.queue(Canned.sse("anthropic/refusal-stop-details.sse"))
        events = client.notifications("session/event")
        result = await session.send("something harmful")
        assert result["stopReason"] == "refusal" and not result.truncated
        assert (await turn_ended(events))["stopReason"] == "refusal"
        entry = await response_entry(session)
        assert entry["stopReason"] == "refusal" and "incomplete" not in entry


async def test_an_openai_refusal_field_is_a_refusal(tmp_path: Path) -> None:
    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(Canned.sse("openai-chat/refusal.sse"))
        result = await session.send("something harmful")
        assert result["stopReason"] == "refusal"
        assert result["message"]["text"]


async def test_a_normal_end_has_no_stop_reason_on_the_event_or_entry(tmp_path: Path) -> None:
    async with served(tmp_path, "openai") as (session, fake, client, _calls):
        fake.queue(Canned.sse("openai-chat/text.sse"))
        events = client.notifications("session/event")
        result = await session.send("hi")
        assert result["stopReason"] == "completed" and not result.truncated
        assert "stopReason" not in await turn_ended(events)
        entry = await response_entry(session)
        assert "stopReason" not in entry and "incomplete" not in entry


async def test_generate_cut_by_the_token_limit_fails_truncated(tmp_path: Path) -> None:
    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        # The recorded stream: `{"` and then finish_reason length.
        fake.queue(Canned.sse("openai-chat/finish-length.sse"))
        with pytest.raises(StructuredOutputError) as info:
            await session.generate("a person", {"type": "object", "properties": {"name": {"type": "string"}}})
        assert info.value.reason == "truncated"
        assert info.value.data["stopReason"] == "maxTokens"


async def test_generate_whose_json_is_complete_despite_the_limit_succeeds(tmp_path: Path) -> None:
    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(openai_stream({"delta": {"content": '{"name": "Ada"}'}}, {"delta": {}, "finish_reason": "length"}))
        value = await session.generate("a person", {"type": "object", "properties": {"name": {"type": "string"}}})
        assert value == {"name": "Ada"}


OPENAI_CUT_CALL = openai_stream(
    {"delta": {"content": "Let me look."}},
    {"delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}},
    {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Par'}}]}},
    {"delta": {}, "finish_reason": "length"},
)


@pytest.mark.parametrize(("provider", "canned"), [("openai", OPENAI_CUT_CALL), ("anthropic", Canned.sse("anthropic/truncated-tool-json.sse"))])
async def test_tool_arguments_cut_by_the_token_limit_end_the_turn_alike(tmp_path: Path, provider: str, canned: Canned) -> None:
    """Both providers: the cut call is not run, not sent back, not in the
    transcript; the turn completes with stopReason maxTokens."""
    tools = [{"name": "get_weather", "inputSchema": {"type": "object"}}, {"name": "make_file", "inputSchema": {"type": "object"}}]
    async with served(tmp_path, provider, tools=tools) as (session, fake, client, calls):
        fake.queue(canned)
        events = client.notifications("session/event")
        result = await session.send("go")
        assert result["stopReason"] == "maxTokens" and result["toolCalls"] == 0
        assert calls == [] and len(fake.received) == 1
        assert (await turn_ended(events))["stopReason"] == "maxTokens"
        entries = list(await session.transcript())
        assert [e["type"] for e in entries] == ["prompt", "response"]
        assert entries[-1]["incomplete"] is True


@pytest.mark.parametrize(
    ("provider", "canned", "usage"),
    [
        ("openai", Canned(200, {"Content-Type": "text/event-stream"}, (
            f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': 'Once'}}]})}\n\n"
            f"data: {json.dumps({'choices': [], 'usage': {'prompt_tokens': 11, 'completion_tokens': 7}})}\n\n").encode()),
         {"inputTokens": 11, "outputTokens": 7}),
        ("anthropic", Canned(200, {"Content-Type": "text/event-stream"}, "".join(
            f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in (
                {"type": "message_start", "message": {"usage": {"input_tokens": 13, "output_tokens": 1}}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Once"}},
            )).encode()),
         {"inputTokens": 13, "outputTokens": 1}),
    ],
)
async def test_usage_reported_before_the_stream_broke_off_is_counted(
        tmp_path: Path, provider: str, canned: Canned, usage: dict[str, int]) -> None:
    # The request was paid for: the failed turn's usage event and the session's
    # totals say so, though the stream never ended.
    async with served(tmp_path, provider) as (session, fake, client, _calls):
        fake.queue(canned)
        events = client.notifications("session/event")
        with pytest.raises(Exception) as failure:
            await session.send("tell me a story")
        assert getattr(failure.value, "kind", None) == "providerError"
        reported = []
        async for note in events:
            event = note.params["event"]
            if event["type"] == "usage":
                reported.append({k: v for k, v in event.items() if k != "type"})
            if event["type"] == "turnEnded":
                assert event["status"] == "failed"
                break
        assert reported and {k: reported[-1][k] for k in usage} == usage, reported
        totals = (await session.state()).raw["usageTotals"]
        assert {k: totals[k] for k in usage} == usage, totals
