"""The context meter, pricing and budgets (docs/protocol.md, "The context
meter", "Cost", "Budgets"), through the real binary against a local HTTP
server playing Anthropic's and OpenAI's APIs: what the model had in context
(cache reads and writes included) reaches the `usage` event, the turn's
result and `session/getState`; the window of a well-known model comes from
its provider's definition, an unknown model's stays unknown; a configured
price turns the tokens into `costUSD`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agentrpc import Client

from fake_provider import Canned, FakeProvider
from test_http_providers import BINARY, FIXTURES, SECRET, TIMEOUT

pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN"),
    pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared/fixtures is not beside the repository"),
]

#: US dollars per million tokens, made up: no test relies on a real price.
PRICING = {"inputPerMTok": 3.0, "outputPerMTok": 15.0, "cacheReadPerMTok": 0.3, "cacheWritePerMTok": 3.75}


@asynccontextmanager
async def model_server(tmp_path: Path, **model: Any) -> AsyncIterator[tuple[Client, FakeProvider]]:
    """A server whose model `m` is `model`, pointed at a fake provider."""
    fake = FakeProvider()
    config = {"models": {"m": {"baseURL": fake.base_url + "/v1", "apiKeyEnv": "TEST_PROVIDER_KEY", **model}}}
    (tmp_path / "agentrpc.json").write_text(json.dumps(config))
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, args=["--ephemeral"], env={"TEST_PROVIDER_KEY": SECRET},
                                request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT) as client:
            yield client, fake
    finally:
        fake.close()


async def usage_events(events: Any) -> list[dict[str, Any]]:
    """The `usage` events up to the turn's end."""
    found = []
    async for note in events:
        event = note.params["event"]
        if event["type"] == "usage":
            found.append(event)
        if event["type"] == "turnEnded":
            return found
    raise AssertionError("no turnEnded")


async def test_anthropic_cache_reads_and_writes_count_in_the_meter_and_the_cost(tmp_path: Path) -> None:
    """The recorded stream reports 12 input tokens, 3 read from the cache, 4
    written to it, 6 output: Anthropic counts the cache apart from
    `input_tokens`, so the model had 25 tokens in context, not 18."""
    async with model_server(tmp_path, provider="anthropic", model="claude-sonnet-4-5-20250929", pricing=PRICING) as (client, fake):
        fake.queue(Canned.sse("anthropic/beta-usage-omitted-with-optional-fields.sse"))
        session = await client.open_session(model="m")
        events = client.notifications("session/event")
        result = await session.send("Hi")
        cost = (12 * 3.0 + 3 * 0.3 + 4 * 3.75 + 6 * 15.0) / 1_000_000
        [usage] = await usage_events(events)
        assert usage["inputTokens"] == 12 and usage["cachedInputTokens"] == 3 and usage["outputTokens"] == 6
        assert usage["contextTokens"] == 25
        assert usage["costUSD"] == pytest.approx(cost)
        assert result["usage"]["contextTokens"] == 25 and result["usage"]["costUSD"] == pytest.approx(cost)
        state = (await session.state()).raw
        # The dated id takes the window of claude-sonnet-4-5 from the provider's definition.
        assert state["contextTokens"] == 25 and state["contextWindowTokens"] == 200_000
        assert state["usageTotals"]["costUSD"] == pytest.approx(cost)


async def test_openai_counts_cached_input_inside_input_tokens(tmp_path: Path) -> None:
    """OpenAI's `prompt_tokens` already holds the cached ones: the context is
    input plus output, and only the uncached input pays the input price."""
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "Hi"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 60}}},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    async with model_server(tmp_path, provider="openai", model="gpt-4o-2024-08-06", pricing=PRICING) as (client, fake):
        fake.queue(Canned(200, {"Content-Type": "text/event-stream"}, body.encode()))
        session = await client.open_session(model="m")
        result = await session.send("Hi")
        assert result["usage"]["contextTokens"] == 110
        assert result["usage"]["costUSD"] == pytest.approx((40 * 3.0 + 60 * 0.3 + 10 * 15.0) / 1_000_000)
        state = (await session.state()).raw
        assert state["contextTokens"] == 110 and state["contextWindowTokens"] == 128_000


@pytest.mark.parametrize(("model", "configured", "window"), [
    ("my-local-model", None, None),
    ("gpt-4o-mini-tts", None, None),
    ("my-local-model", 32_768, 32_768),
    ("gpt-4.1", 50_000, 50_000),
    ("gpt-4.1", None, 1_047_576),
])
async def test_a_window_is_known_from_the_configuration_or_the_provider_never_guessed(
    tmp_path: Path, model: str, configured: int | None, window: int | None
) -> None:
    """A model the provider's definition does not list (a local server's, or a
    name that only starts like a listed one) has no window; the model's
    configuration overrides the list."""
    extra = {} if configured is None else {"contextWindowTokens": configured}
    async with model_server(tmp_path, provider="openai", model=model, **extra) as (client, _fake):
        session = await client.open_session(model="m")
        state = (await session.state()).raw
        assert state.get("contextWindowTokens") == window
        # No round trip yet: no figure, and no cost without a price.
        assert "contextTokens" not in state


async def test_no_price_no_cost(tmp_path: Path) -> None:
    async with model_server(tmp_path, provider="anthropic", model="claude-haiku-4-5") as (client, fake):
        fake.queue(Canned.sse("anthropic/beta-usage-omitted-with-optional-fields.sse"))
        session = await client.open_session(model="m")
        result = await session.send("Hi")
        assert "costUSD" not in result["usage"] and result["usage"]["contextTokens"] == 25
