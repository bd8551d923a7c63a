"""A surrogate pair split across two streamed deltas (`"A\\ud83d"` then
`"\\ude00B"`, each chunk its own JSON document) is rejoined, and a surrogate
with no partner becomes U+FFFD (docs/protocol.md, "Providers"), through the real
binary against a local HTTP server playing each provider's API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fake_provider import Canned
from test_http_providers import BINARY, FIXTURES, anthropic_stream, served
from test_openai_responses import served as served_responses
from test_provider_endings import openai_stream

pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN"),
    pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared/fixtures is not beside the repository"),
]

# json.dumps (ensure_ascii) writes a lone surrogate as the escape `\udXXX`, as providers do.
SPLIT = ["A\ud83d", "\ude00B"]
LONE = ["A\ud83d", "B\ude00"]


def anthropic_text(parts: list[str]) -> Canned:
    return anthropic_stream(
        {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *[{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}} for p in parts],
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    )


def responses_text(parts: list[str]) -> Canned:
    text = "".join(parts)
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        *[{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": p} for p in parts],
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": [
            {**item, "content": [{"type": "output_text", "text": text}]}],
            "usage": {"input_tokens": 3, "output_tokens": 3}}},
    ]
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return Canned(200, {"Content-Type": "text/event-stream"}, body.encode())


@pytest.mark.parametrize(("parts", "expected"), [(SPLIT, "A😀B"), (LONE, "A\ufffdB\ufffd")])
async def test_openai_chat(tmp_path: Path, parts: list[str], expected: str) -> None:
    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(openai_stream(*[{"delta": {"content": p}} for p in parts], {"delta": {}, "finish_reason": "stop"}))
        result = await session.send("hi")
        assert result["message"]["text"] == expected


@pytest.mark.parametrize(("parts", "expected"), [(SPLIT, "A😀B"), (LONE, "A\ufffdB\ufffd")])
async def test_anthropic(tmp_path: Path, parts: list[str], expected: str) -> None:
    async with served(tmp_path, "anthropic") as (session, fake, _client, _calls):
        fake.queue(anthropic_text(parts))
        result = await session.send("hi")
        assert result["message"]["text"] == expected


@pytest.mark.parametrize(("parts", "expected"), [(SPLIT, "A😀B"), (["A\ud83d"], "A\ufffd")])
async def test_openai_responses(tmp_path: Path, parts: list[str], expected: str) -> None:
    async with served_responses(tmp_path) as (session, fake, _client, _calls):
        fake.queue(responses_text(parts))
        result = await session.send("hi")
        assert result["message"]["text"] == expected


# Tool arguments arrive in fragments too: a pair split across two of them is
# joined, a lone one is U+FFFD, and no marker ever reaches the client.
ARGUMENT_PARTS = ['{"city": "Paris\ud83d', '\ude00 \ud83d"}']
ARGUMENTS = {"city": "Paris😀 \ufffd"}


async def test_openai_chat_tool_arguments(tmp_path: Path) -> None:
    async with served(tmp_path, "openai") as (session, fake, _client, calls):
        fragments = [{"delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                 "function": {"name": "get_weather", "arguments": ""}}]}}]
        fragments += [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": p}}]}} for p in ARGUMENT_PARTS]
        fake.queue(openai_stream(*fragments, {"delta": {}, "finish_reason": "tool_calls"}),
                   openai_stream({"delta": {"content": "done"}}, {"delta": {}, "finish_reason": "stop"}))
        await session.send("hi")
        assert [c["arguments"] for c in calls] == [ARGUMENTS]


async def test_anthropic_tool_arguments(tmp_path: Path) -> None:
    async with served(tmp_path, "anthropic") as (session, fake, _client, calls):
        fake.queue(anthropic_stream(
            {"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}},
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}},
            *[{"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}}
              for p in ARGUMENT_PARTS],
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
            {"type": "message_stop"},
        ), anthropic_text(["done"]))
        await session.send("hi")
        assert [c["arguments"] for c in calls] == [ARGUMENTS]
