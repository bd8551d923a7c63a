"""A model's `options` in what each HTTP provider receives, through the real
binary against a local fake provider (docs/protocol.md, "Model options"):
the common options mapped per provider as the model's defaults, a send's
options over them, other keys passed through, and every value a provider
cannot take reported as a `contextDiagnostics` warning, never dropped silently.
`--dump-requests` shows the same bodies."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agentrpc import Client

from fake_provider import Canned, FakeProvider
from test_http_providers import BINARY, FIXTURES, SECRET, TIMEOUT, WEATHER

pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN"),
    pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared/fixtures is not beside the repository"),
]

RESPONSES = Path(__file__).resolve().parents[3] / "Tests" / "Fixtures" / "openai-responses"
PROVIDERS = ["openai", "anthropic", "openai-responses"]
#: The issue's example: two common options and one in the provider's own spelling.
ISSUE_OPTIONS = {"maxOutputTokens": 512, "temperature": 0.2, "top_p": 0.5}


def text_reply(provider: str) -> Canned:
    if provider == "openai-responses":
        return Canned(200, {"Content-Type": "text/event-stream"}, (RESPONSES / "text.sse").read_bytes())
    return Canned.sse("openai-chat/text.sse" if provider == "openai" else "anthropic/text.sse")


def tool_reply(provider: str) -> Canned:
    if provider == "openai-responses":
        return Canned(200, {"Content-Type": "text/event-stream"}, (RESPONSES / "reasoning-function-call.sse").read_bytes())
    return Canned.sse("openai-chat/tool-call.sse" if provider == "openai" else "anthropic/tool-use.sse")


def model_config(provider: str, fake: FakeProvider, options: dict[str, Any] | None) -> dict[str, Any]:
    model: dict[str, Any] = {"provider": provider, "model": f"{provider}-test-model", "baseURL": fake.base_url + "/v1", "apiKeyEnv": "TEST_PROVIDER_KEY"}
    if options is not None:
        model["options"] = options
    return model


@asynccontextmanager
async def served(tmp_path: Path, provider: str, options: dict[str, Any] | None, *, inline: bool = False,
                 tools: list[dict[str, Any]] | None = None) -> AsyncIterator[tuple[Any, FakeProvider, Client]]:
    """A server whose model `m` (in agentrpc.json, or inline in session/create)
    has `options` and points at a fake provider; requests are dumped to dump.jsonl."""
    fake = FakeProvider()
    model = model_config(provider, fake, options)
    (tmp_path / "agentrpc.json").write_text(json.dumps({"models": {} if inline else {"m": model}}))
    args = ["--dump-requests", str(tmp_path / "dump.jsonl")]
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, args=args, env={"TEST_PROVIDER_KEY": SECRET},
                                request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT) as client:
            client.on_request("tool/call", lambda params: {"outcome": "ok", "content": {"celsius": 18}})
            session = await client.open_session(model=model if inline else "m", tools=tools)
            yield session, fake, client
    finally:
        fake.close()


def dumped_bodies(tmp_path: Path) -> list[Any]:
    return [json.loads(line).get("body") for line in (tmp_path / "dump.jsonl").read_text().splitlines() if line.strip()]


def conversation(provider: str, text: str = "hi") -> dict[str, Any]:
    """The members of a one-message request that are not options."""
    model = f"{provider}-test-model"
    if provider == "openai":
        return {"model": model, "messages": [{"role": "user", "content": text}], "stream": True, "stream_options": {"include_usage": True}}
    if provider == "anthropic":
        return {"model": model, "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}], "stream": True}
    return {"model": model, "input": [{"role": "user", "content": text}], "stream": True, "store": False,
            "include": ["reasoning.encrypted_content"], "reasoning": {"summary": "auto"}}


async def turn_events(stream: Any) -> list[dict[str, Any]]:
    seen = []
    async for note in stream:
        seen.append(note.params["event"])
        if seen[-1]["type"] == "turnEnded":
            return seen
    return seen


def option_warnings(events: list[dict[str, Any]]) -> list[str]:
    return [d["message"] for e in events if e["type"] == "contextDiagnostics" for d in e["diagnostics"] if d["source"] == "modelOptions"]


# -- the model's options reach the body, in each provider's spelling --------------


EXPECTED_ISSUE_OPTIONS = {
    "openai": {"max_tokens": 512, "temperature": 0.2, "top_p": 0.5},
    "anthropic": {"max_tokens": 512, "temperature": 0.2, "top_p": 0.5},
    "openai-responses": {"max_output_tokens": 512, "temperature": 0.2, "top_p": 0.5},
}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_issues_options_reach_the_exact_body_and_the_dump(tmp_path: Path, provider: str) -> None:
    async with served(tmp_path, provider, ISSUE_OPTIONS) as (session, fake, client):
        fake.queue(text_reply(provider))
        events = client.notifications("session/event")
        await session.send("hi")
        assert option_warnings(await turn_events(events)) == []
        sent = fake.received[0].body
    assert sent == {**conversation(provider), **EXPECTED_ISSUE_OPTIONS[provider]}
    # --dump-requests writes the exact body sent, for every HTTP provider.
    assert dumped_bodies(tmp_path) == [sent]
    assert SECRET not in (tmp_path / "dump.jsonl").read_text()


EVERY_OPTION = {"maxOutputTokens": 256, "temperature": 0.5, "topP": 0.9, "stop": ["END"], "seed": 7, "reasoningEffort": "low"}
EXPECTED_EVERY_OPTION = {
    "openai": {"max_tokens": 256, "temperature": 0.5, "top_p": 0.9, "stop": ["END"], "seed": 7, "reasoning_effort": "low"},
    # Extended thinking takes no temperature, and max_tokens is raised above its budget; seed is OpenAI's.
    "anthropic": {"max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024}, "top_p": 0.9, "stop_sequences": ["END"]},
    # The Responses API has neither stop nor seed.
    "openai-responses": {"max_output_tokens": 256, "temperature": 0.5, "top_p": 0.9, "reasoning": {"effort": "low", "summary": "auto"}},
}
EXPECTED_WARNINGS = {
    "openai": [],
    "anthropic": ["options.seed", "options.temperature"],
    "openai-responses": ["options.seed", "options.stop"],
}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_every_common_option_is_mapped_or_warned_about(tmp_path: Path, provider: str) -> None:
    async with served(tmp_path, provider, EVERY_OPTION) as (session, fake, client):
        fake.queue(text_reply(provider))
        events = client.notifications("session/event")
        await session.send("hi")
        warnings = option_warnings(await turn_events(events))
        state = await client.get_state(session)
        sent = fake.received[0].body
    assert sent == {**conversation(provider), **EXPECTED_EVERY_OPTION[provider]}
    assert sorted(w.split(":")[0] for w in warnings) == EXPECTED_WARNINGS[provider]
    # The warnings stay in the session state until the next turn.
    kept = [d["message"] for d in state["lastContextDiagnostics"] if d["source"] == "modelOptions"]
    assert kept == warnings
    assert dumped_bodies(tmp_path) == [sent]


async def test_the_max_completion_tokens_spelling_and_an_inline_model(tmp_path: Path) -> None:
    """`useMaxCompletionTokens` (a setting, never sent) picks the spelling;
    options in an inline model config of session/create work the same."""
    async with served(tmp_path, "openai", {"maxOutputTokens": 100, "useMaxCompletionTokens": True, "streamTools": True}, inline=True) as (session, fake, _client):
        fake.queue(text_reply("openai"))
        await session.send("hi")
        sent = fake.received[0].body
    assert sent == {**conversation("openai"), "max_completion_tokens": 100}


# -- precedence: a send's options over the model's --------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_sends_options_override_the_models_defaults(tmp_path: Path, provider: str) -> None:
    async with served(tmp_path, provider, {"maxOutputTokens": 512, "temperature": 0.2}) as (session, fake, _client):
        fake.queue(text_reply(provider), text_reply(provider))
        await session.send("hi", options={"maxOutputTokens": 64, "temperature": 0.9})
        await session.send("again")
        first, second = fake.received[0].body, fake.received[1].body
    tokens = "max_output_tokens" if provider == "openai-responses" else "max_tokens"
    assert (first[tokens], first["temperature"]) == (64, 0.9)
    # The next send without options is back to the model's defaults.
    assert (second[tokens], second["temperature"]) == (512, 0.2)
    assert dumped_bodies(tmp_path) == [first, second]


async def test_a_profile_cases_options_override_the_models_defaults(tmp_path: Path) -> None:
    fake = FakeProvider()
    model = model_config("openai", fake, {"temperature": 0.2, "maxOutputTokens": 512})
    (tmp_path / "agentrpc.json").write_text(json.dumps({"models": {"m": model}}))
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, env={"TEST_PROVIDER_KEY": SECRET}, request_timeout=TIMEOUT) as client:
            session = await client.open_session(model="m", profiles={"cases": {"careful": {"options": {"temperature": 0}}}})
            fake.queue(text_reply("openai"))
            await session.send("hi")
            sent = fake.received[0].body
    finally:
        fake.close()
    assert sent["temperature"] == 0 and sent["max_tokens"] == 512


# -- pass-through, protected keys, warnings ----------------------------------------


async def test_unknown_keys_pass_through_but_never_replace_the_conversation(tmp_path: Path) -> None:
    options = {"top_k": 40, "metadata": {"user_id": "u1"}, "model": "other-model", "messages": [], "stream": False,
               "store": True, "reasoningSummary": "detailed"}
    async with served(tmp_path, "anthropic", options) as (session, fake, client):
        fake.queue(text_reply("anthropic"))
        events = client.notifications("session/event")
        await session.send("hi")
        warnings = option_warnings(await turn_events(events))
        sent = fake.received[0].body
    assert sent == {**conversation("anthropic"), "max_tokens": 4096, "top_k": 40, "metadata": {"user_id": "u1"}}
    assert sorted(w.split(":")[0] for w in warnings) == ["options.messages", "options.model", "options.reasoningSummary",
                                                          "options.store", "options.stream"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_values_the_provider_cannot_take_are_warnings_once_per_turn(tmp_path: Path, provider: str) -> None:
    """Hostile numbers and wrong types: nothing traps, nothing bad is sent, each
    warning is reported once in a turn of two round trips."""
    options = {"maxOutputTokens": 1e300, "temperature": "hot", "topP": 7, "seed": "x", "stop": [1]}
    async with served(tmp_path, provider, options, tools=[WEATHER]) as (session, fake, client):
        fake.queue(tool_reply(provider), text_reply(provider))
        events = client.notifications("session/event")
        result = await session.send("weather in Paris?")
        warnings = option_warnings(await turn_events(events))
        bodies = [r.body for r in fake.received]
    assert result["roundTrips"] == 2
    assert sorted(w.split(":")[0] for w in warnings) == ["options.maxOutputTokens", "options.seed", "options.stop",
                                                          "options.temperature", "options.topP"]
    for body in bodies:
        for key in ("temperature", "top_p", "seed", "stop", "stop_sequences", "max_output_tokens", "max_completion_tokens"):
            assert key not in body
        if provider == "anthropic":
            assert body["max_tokens"] == 4096
        else:
            assert "max_tokens" not in body


async def test_a_sends_out_of_range_value_is_a_warning(tmp_path: Path) -> None:
    """Anthropic's temperature is 0 to 1; a negative token count is never sent."""
    async with served(tmp_path, "anthropic", None) as (session, fake, client):
        fake.queue(text_reply("anthropic"))
        events = client.notifications("session/event")
        await session.send("hi", options={"temperature": 1.5, "maxOutputTokens": -1})
        warnings = option_warnings(await turn_events(events))
        sent = fake.received[0].body
    assert "temperature" not in sent and sent["max_tokens"] == 4096
    assert sorted(w.split(":")[0] for w in warnings) == ["options.maxOutputTokens", "options.temperature"]


def test_the_config_files_unusable_options_are_named_on_stderr_at_start(tmp_path: Path) -> None:
    import subprocess

    model = {"provider": "anthropic", "model": "x", "baseURL": "http://127.0.0.1:9/v1", "options": {"seed": "x", "streamTools": True}}
    (tmp_path / "agentrpc.json").write_text(json.dumps({"models": {"m": model}}))
    done = subprocess.run([str(BINARY), "serve", "--log-level", "warning", "--ephemeral"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0 and done.stdout == ""
    assert "models.m.options.seed: must be an integer; not sent" in done.stderr
    assert "models.m.options.streamTools: a setting of the openai provider only" in done.stderr


async def test_a_side_requests_model_options_are_warned_about_too(tmp_path: Path) -> None:
    """The `llm` router's classifier model has options it cannot take: the
    warning comes in the turn that asked it, beside the router's own diagnostic."""
    fake = FakeProvider()
    classifier = model_config("anthropic", fake, {"seed": 7, "top_k": 5})
    scripted = {"provider": "scripted", "script": [{"text": ["ok"]}]}
    (tmp_path / "agentrpc.json").write_text(json.dumps({"models": {"classifier": classifier}}))
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, env={"TEST_PROVIDER_KEY": SECRET}, request_timeout=TIMEOUT) as client:
            session = await client.open_session(
                model=scripted, properties={"mode": "a"}, router={"kind": "llm", "model": "classifier"},
                profiles={"selector": "mode", "cases": {"a": {"description": "A"}, "b": {"description": "B"}}})
            fake.queue(text_reply("anthropic"))
            events = client.notifications("session/event")
            await session.send("hi")
            warnings = option_warnings(await turn_events(events))
            sent = fake.received[0].body
    finally:
        fake.close()
    assert warnings == ["options.seed: anthropic takes no seed; not sent"]
    assert sent["top_k"] == 5 and "seed" not in sent
