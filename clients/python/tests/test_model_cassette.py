"""Model cassettes (docs/testing.md): record a provider's HTTP traffic against a
local fake model server, stop the server, replay it offline, and get the same
conversation back, byte for byte (ids and times aside)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrpc import AgentRPCError, Cassette, Client, ProviderError

from conftest import real_binary
from fake_provider import FIXTURES, Canned, FakeProvider

BINARY = real_binary()
SECRET = "sk-test-CASSETTE-SECRET-0123456789abcdef"
TIMEOUT = 30.0
RESPONSES = Path(__file__).resolve().parents[3] / "Tests" / "Fixtures" / "openai-responses"

pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN"),
    pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared/fixtures is not beside the repository"),
]

TOOLS = [
    {"name": "get_weather", "inputSchema": {"type": "object", "properties": {"location": {"type": "string"}, "city": {"type": "string"}}}},
    {"name": "GetWeatherArgs", "inputSchema": {"type": "object"}},
    {"name": "get_stock_price", "inputSchema": {"type": "object"}},
]


def sse(path: Path) -> Canned:
    return Canned(200, {"Content-Type": "text/event-stream"}, path.read_bytes())


def stream(*events: dict[str, Any]) -> Canned:
    """An Anthropic SSE stream of these events."""
    return Canned(200, {"Content-Type": "text/event-stream"}, "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode())


def chat_chunks(*deltas: dict[str, Any], finish: str = "stop") -> Canned:
    """An OpenAI chat stream of these deltas, then the finish reason and [DONE]."""
    lines = [{"choices": [{"index": 0, "delta": d}]} for d in deltas]
    lines.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
    body = "".join(f"data: {json.dumps(x)}\n\n" for x in lines) + "data: [DONE]\n\n"
    return Canned(200, {"Content-Type": "text/event-stream"}, body.encode())


RATE_LIMITED = Canned.error(429, {"error": {"message": "slow down", "type": "rate_limit_error"}}, {"Retry-After": "0", "x-request-id": "req_123"})
KEY_ECHO = Canned.error(401, {"error": {"message": f"Incorrect API key provided: {SECRET}.", "type": "invalid_request_error", "code": "invalid_api_key"}})


def cut(canned: Canned, marker: bytes) -> Canned:
    """The response closed mid-way: a few bytes into the event after the first
    one holding `marker` (so some text was streamed and the turn is not retried)."""
    start = canned.body.index(marker)
    return Canned(canned.status, canned.headers, canned.body, cut_after=canned.body.index(b"\n\n", start) + 12)


ANTHROPIC_THINKING = stream(
    {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me think "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "about it."}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-abc"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Forty-two."}},
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
)

# Two tool calls in one answer (Anthropic's fixtures hold one at most).
ANTHROPIC_PARALLEL = stream(
    {"type": "message_start", "message": {"usage": {"input_tokens": 7, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_p1", "name": "get_weather", "input": {}}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"city": "Paris"}'}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_p2", "name": "get_weather", "input": {}}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"city": "Rome"}'}},
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}},
    {"type": "message_stop"},
)

# Per provider: the turns of one conversation, each a prompt and the responses
# the fake server gives (text, reasoning, parallel tool calls, a 429 with
# Retry-After then success, a stream cut mid-way, an error that echoes the key).
SCENARIOS: dict[str, list[tuple[str, list[Canned]]]] = {
    "openai": [
        ("hello", [sse(FIXTURES / "openai-chat/text.sse")]),
        ("think first", [chat_chunks({"reasoning_content": "Hmm, "}, {"reasoning_content": "yes."}, {"content": "Done."})]),
        ("two cities", [sse(FIXTURES / "openai-chat/parallel-tool-calls.sse"), sse(FIXTURES / "openai-chat/text.sse")]),
        ("busy?", [RATE_LIMITED, sse(FIXTURES / "openai-chat/text.sse")]),
        ("key?", [KEY_ECHO]),
        ("cut", [cut(sse(FIXTURES / "openai-chat/text.sse"), b'"content":"I')]),
    ],
    "anthropic": [
        ("hello", [sse(FIXTURES / "anthropic/text.sse")]),
        ("think first", [ANTHROPIC_THINKING]),
        ("weather in Paris", [sse(FIXTURES / "anthropic/tool-use.sse"), sse(FIXTURES / "anthropic/text.sse")]),
        ("two cities", [ANTHROPIC_PARALLEL, sse(FIXTURES / "anthropic/text.sse")]),
        ("busy?", [RATE_LIMITED, sse(FIXTURES / "anthropic/text.sse")]),
        ("cut", [cut(sse(FIXTURES / "anthropic/text.sse"), b"text_delta")]),
    ],
    "openai-responses": [
        ("hello", [sse(RESPONSES / "text.sse")]),
        ("think, then call", [sse(RESPONSES / "reasoning-function-call.sse"), sse(RESPONSES / "text.sse")]),
        ("two calls", [sse(RESPONSES / "parallel-function-calls.sse"), sse(RESPONSES / "text.sse")]),
        ("busy?", [RATE_LIMITED, sse(RESPONSES / "text.sse")]),
        ("cut", [cut(sse(RESPONSES / "text.sse"), b"output_text.delta")]),
    ],
}


def without_ids(value: Any) -> Any:
    """`value` with the ids a server makes up per run (sessions, turns) left out."""
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items() if k not in ("turnId", "sessionId")}
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    return value


def steps(transcript: str) -> list[str]:
    return [line for line in transcript.splitlines() if line != '{"closeStdin":true}']


def model(provider: str, base_url: str, **extra: Any) -> dict[str, Any]:
    return {"provider": provider, "model": f"{provider}-test-model", "baseURL": base_url + "/v1", "apiKeyEnv": "TEST_PROVIDER_KEY", **extra}


async def converse(
    tmp_path: Path, name: str, cassette: Path, mode: str, model_config: dict[str, Any], prompts: list[str], *,
    key: bool = True, pace: str | None = None,
) -> tuple[list[Any], str]:
    """One server run: a session, `prompts` sent in turn. Returns each send's
    answer (or its error data) and the run's recorded RPC transcript."""
    transcript = tmp_path / f"{name}.transcript.jsonl"
    args = ["--ephemeral", "--record", str(transcript), "--model-cassette", str(cassette), "--cassette-mode", mode]
    if pace:
        args += ["--cassette-pace", pace]
    env = {"TEST_PROVIDER_KEY": SECRET} if key else {}
    outcomes: list[Any] = []
    async with Client.spawn(binary=BINARY, cwd=tmp_path, args=args, env=env, request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT) as client:
        client.on_request("tool/call", lambda params: {"outcome": "ok", "content": {"celsius": 18, "for": params["name"]}})
        session = await client.open_session(model=model_config, tools=TOOLS)
        for prompt in prompts:
            try:
                outcomes.append(dict((await session.send(prompt)).raw))
            except ProviderError as error:
                outcomes.append({"error": error.data})
    return outcomes, transcript.read_text()


@pytest.mark.parametrize("provider", sorted(SCENARIOS))
async def test_replay_without_the_server_is_the_recorded_conversation(tmp_path: Path, provider: str) -> None:
    scenario = SCENARIOS[provider]
    prompts = [prompt for prompt, _ in scenario]
    cassette = tmp_path / "model.cassette.jsonl"
    fake = FakeProvider()
    try:
        for _, responses in scenario:
            fake.queue(*responses)
        config = model(provider, fake.base_url)
        recorded, recorded_transcript = await converse(tmp_path, "recorded", cassette, "record", config, prompts)
        assert len(fake.received) == sum(len(responses) for _, responses in scenario)
    finally:
        fake.close()
    # What the scenario is meant to show did happen in the recording.
    assert '"retrying"' in recorded_transcript
    assert "error" in recorded[-1]
    # Parallel tool calls: one answer of the model asked for two.
    assert any(r.get("toolCalls", 0) >= 2 and r.get("roundTrips") == 2 for r in recorded if "error" not in r)

    # The server is gone and no key is given: everything comes from the cassette.
    replayed, replayed_transcript = await converse(tmp_path, "replayed", cassette, "replay", config, prompts, key=False)
    assert without_ids(replayed) == without_ids(recorded)
    # (When the client closes the server's input around `exit` is its own race, not the model's.)
    assert steps(replayed_transcript) == steps(recorded_transcript)

    text = cassette.read_text()
    assert SECRET not in text and "Bearer" not in text and "x-api-key" not in text.lower()
    header = json.loads(text.splitlines()[0])["agentrpcCassette"]
    assert header["formatVersion"] == 1 and header["providers"] == [provider] and header["agentrpcVersion"]
    exchanges = [json.loads(line) for line in text.splitlines()[1:]]
    assert len(exchanges) == len(fake.received)
    rate_limited = next(e for e in exchanges if e["response"].get("status") == 429)
    assert rate_limited["response"]["headers"] == {"content-type": "application/json", "retry-after": "0", "x-request-id": "req_123"}
    # SSE bodies are kept as text, chunk by chunk, with their times.
    assert all("text" in chunk and isinstance(chunk["ms"], int) for e in exchanges for chunk in e["response"]["chunks"])

    # The recorded RPC transcript replays against the recorded model traffic.
    transcript = tmp_path / "recorded.transcript.jsonl"
    run = subprocess.run([str(BINARY), "replay", str(transcript), "--model-cassette", str(cassette)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr


def first_user_message_index(body: dict[str, Any], key: str = "messages") -> int:
    return next(i for i, m in enumerate(body[key]) if m.get("role") == "user")


async def record_one(tmp_path: Path, cassette: Path, provider: str, prompts: list[str], responses: list[Canned]) -> dict[str, Any]:
    fake = FakeProvider()
    try:
        fake.queue(*responses)
        config = model(provider, fake.base_url)
        await converse(tmp_path, "record", cassette, "record", config, prompts)
    finally:
        fake.close()
    return config


async def test_a_drifted_request_is_a_cassette_miss_naming_the_first_difference(tmp_path: Path) -> None:
    cassette = tmp_path / "drift.jsonl"
    config = await record_one(tmp_path, cassette, "openai", ["hello"], [sse(FIXTURES / "openai-chat/text.sse")])
    recorded_body = json.loads(cassette.read_text().splitlines()[1])["request"]["body"]
    index = first_user_message_index(recorded_body)

    outcomes, _ = await converse(tmp_path, "drifted", cassette, "replay", config, ["hullo"], key=False)
    error = outcomes[0]["error"]
    provider = error["provider"]
    assert provider["code"] == "cassetteMiss" and provider["isRetryable"] is False
    miss = provider["cassette"]
    assert miss["reason"] == "noMatch"
    assert miss["request"] == {"provider": "openai", "path": "/v1/chat/completions"}
    assert miss["nearest"] == {"provider": "openai", "path": "/v1/chat/completions", "line": 2}
    assert miss["difference"] == {"part": "body", "pointer": f"/messages/{index}/content", "recorded": '"hello"', "sent": '"hullo"'}
    assert miss["file"] == str(cassette)

    # The same request twice (two sessions of one server): the one recorded answer was already used.
    args = ["--ephemeral", "--model-cassette", str(cassette)]
    async with Client.spawn(binary=BINARY, cwd=tmp_path, args=args, request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT) as client:
        first = await client.open_session(model=config, tools=TOOLS)
        assert (await first.send("hello")).message.text
        second = await client.open_session(model=config, tools=TOOLS)
        with pytest.raises(ProviderError) as raised:
            await second.send("hello")
    assert raised.value.provider_code == "cassetteMiss"
    miss = raised.value.cassette
    assert miss is not None and miss["reason"] == "exhausted" and miss["nearest"]["line"] == 2


async def test_a_cassette_never_answers_another_provider(tmp_path: Path) -> None:
    cassette = tmp_path / "openai.jsonl"
    config = await record_one(tmp_path, cassette, "openai", ["hello"], [sse(FIXTURES / "openai-chat/text.sse")])
    other = {**config, "provider": "openai-responses"}
    outcomes, _ = await converse(tmp_path, "other", cassette, "replay", other, ["hello"], key=False)
    miss = outcomes[0]["error"]["provider"]["cassette"]
    assert miss["request"]["provider"] == "openai-responses"
    assert miss["difference"]["part"] == "provider"


async def test_auto_replays_what_it_has_and_records_what_it_lacks(tmp_path: Path) -> None:
    cassette = tmp_path / "partial.jsonl"
    await record_one(tmp_path, cassette, "openai", ["one"], [sse(FIXTURES / "openai-chat/text.sse")])
    fake = FakeProvider()
    try:
        fake.queue(chat_chunks({"content": "Second answer."}))
        config = model("openai", fake.base_url)
        filled, _ = await converse(tmp_path, "auto", cassette, "auto", config, ["one", "two"])
        # "one" came from the cassette; only "two" reached the server.
        assert len(fake.received) == 1 and fake.received[0].body["messages"][-1]["content"] == "two"
    finally:
        fake.close()
    assert len(cassette.read_text().splitlines()) == 3
    replayed, _ = await converse(tmp_path, "replay", cassette, "replay", config, ["one", "two"], key=False)
    assert [r["message"]["text"] for r in replayed] == [r["message"]["text"] for r in filled]
    assert replayed[1]["message"]["text"] == "Second answer."


async def test_recorded_pace_reproduces_a_timeout(tmp_path: Path) -> None:
    """A model that paused 1.5 s mid-answer: replayed fast, the answer is whole;
    at the recorded pace, a 0.5 s idle timeout fires where it would have live."""
    cassette = tmp_path / "slow.jsonl"
    first = b'data: {"choices":[{"index":0,"delta":{"content":"Slow "}}]}\n\n'
    rest = [b'data: {"choices":[{"index":0,"delta":{"content":"answer."},"finish_reason":"stop"}]}\n\n', b"data: [DONE]\n\n"]
    config = await record_one(tmp_path, cassette, "openai", ["slowly"], [Canned(200, {"Content-Type": "text/event-stream"}, first, slow_chunks=rest, pause=1.5)])
    impatient = {**config, "timeoutSeconds": 0.5}
    fast, _ = await converse(tmp_path, "fast", cassette, "replay", impatient, ["slowly"], key=False)
    assert fast[0]["message"]["text"] == "Slow answer."
    paced, _ = await converse(tmp_path, "paced", cassette, "replay", impatient, ["slowly"], key=False, pace="recorded")
    error = paced[0]["error"]
    assert error["provider"]["code"] == "network" and error["partialText"] == "Slow "
    assert "timed out waiting for data" in error["provider"]["safeDescription"]


async def test_a_torn_last_line_loads_what_is_intact(tmp_path: Path) -> None:
    cassette = tmp_path / "torn.jsonl"
    config = await record_one(
        tmp_path, cassette, "openai", ["one", "two"], [sse(FIXTURES / "openai-chat/text.sse"), chat_chunks({"content": "Two."})])
    lines = cassette.read_bytes().split(b"\n")
    assert len(lines) == 4 and lines[-1] == b""
    # Killed while writing the last exchange: half a line, no newline.
    cassette.write_bytes(b"\n".join(lines[:2]) + b"\n" + lines[2][: len(lines[2]) // 2])
    outcomes, _ = await converse(tmp_path, "torn", cassette, "replay", config, ["one", "two"], key=False)
    assert "error" not in outcomes[0]
    assert outcomes[1]["error"]["provider"]["code"] == "cassetteMiss"

    # auto cuts the torn line off before it appends.
    fake = FakeProvider()
    try:
        fake.queue(chat_chunks({"content": "Two again."}))
        await converse(tmp_path, "mend", cassette, "auto", model("openai", fake.base_url), ["one", "two"])
    finally:
        fake.close()
    mended = cassette.read_text().splitlines()
    assert len(mended) == 3 and all(json.loads(line) for line in mended)


async def test_replay_needs_the_cassette(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        str(BINARY), "serve", "--model-cassette", str(tmp_path / "missing.jsonl"), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path)
    _, stderr = await asyncio.wait_for(process.communicate(b""), TIMEOUT)
    assert process.returncode == 2
    assert b"missing.jsonl does not exist" in stderr


async def test_client_spawn_takes_a_cassette(tmp_path: Path) -> None:
    path = tmp_path / "spawned.jsonl"
    fake = FakeProvider()
    try:
        fake.queue(chat_chunks({"content": "From the model."}))
        config = model("openai", fake.base_url)
        async with Client.spawn(binary=BINARY, cwd=tmp_path, args=["--ephemeral"], env={"TEST_PROVIDER_KEY": SECRET},
                                cassette=Cassette(path, mode="record"), request_timeout=TIMEOUT) as client:
            recorded = await (await client.open_session(model=config)).send("hi")
    finally:
        fake.close()
    # A bare path replays.
    async with Client.spawn(binary=BINARY, cwd=tmp_path, args=["--ephemeral"], cassette=path, request_timeout=TIMEOUT) as client:
        replayed = await (await client.open_session(model=config)).send("hi")
    assert replayed.message.text == recorded.message.text == "From the model."
    assert Cassette(path, mode="auto", pace="recorded").server_args() == [
        "--model-cassette", str(path), "--cassette-mode", "auto", "--cassette-pace", "recorded"]
    with pytest.raises(ValueError):
        Cassette(path, mode="rewind")  # type: ignore[arg-type]


INNER_TEST = '''
import os

from agentrpc.sync import Client


def test_hello(model_cassette):
    model = {"provider": "openai", "model": "m", "baseURL": os.environ["FAKE_URL"] + "/v1"}
    with Client.spawn(binary=os.environ["AGENTRPC_BIN"], args=["--ephemeral"], cassette=model_cassette, request_timeout=20) as client:
        answer = client.open_session(model=model).send("hello")
    assert answer.message.text == "Pinned."
    print("cassette mode:", model_cassette.mode)
'''


def test_the_pytest_fixture_records_when_missing_and_replays_when_present(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["agentrpc.testing"]\n')
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    src = str(Path(__file__).resolve().parents[1] / "src")
    fake = FakeProvider()

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": src, "FAKE_URL": fake.base_url, "AGENTRPC_BIN": str(BINARY)}
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *extra, "test_inner.py"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    try:
        fake.queue(chat_chunks({"content": "Pinned."}))
        first = run()
        assert first.returncode == 0, first.stdout + first.stderr
        assert "cassette mode: record" in first.stdout and len(fake.received) == 1
    finally:
        fake.close()
    assert (tmp_path / "cassettes" / "test_inner" / "test_hello.jsonl").is_file()
    # The model is gone: the test replays.
    second = run()
    assert second.returncode == 0, second.stdout + second.stderr
    assert "cassette mode: replay" in second.stdout
    # --model-cassette-mode=record forces a new recording, which needs the model.
    forced = run("--model-cassette-mode=record")
    assert forced.returncode != 0 and "cassette mode: record" not in forced.stdout


@pytest.mark.parametrize("command", ["serve", "chat", "acp"])
def test_every_command_takes_the_cassette_options(tmp_path: Path, command: str) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BINARY), command, *args], cwd=tmp_path, input="", capture_output=True, text=True, timeout=60)

    wrong = run("--model-cassette", "c.jsonl", "--cassette-mode", "rewind")
    assert wrong.returncode == 2 and "--cassette-mode is record, replay or auto" in wrong.stderr + wrong.stdout
    alone = run("--cassette-pace", "recorded")
    assert alone.returncode == 2 and "need --model-cassette FILE" in alone.stderr + alone.stdout
    if command != "chat":
        # The server opens the cassette at start: a replay of a file that is not there stops it.
        missing = run("--model-cassette", "missing.jsonl")
        assert missing.returncode == 2 and "missing.jsonl does not exist" in missing.stderr


async def test_a_session_or_the_config_file_names_the_cassette_and_side_requests_go_through_it(tmp_path: Path) -> None:
    """`modelCassette` in session/create and in agentrpc.json (relative to the
    file), and a side request (structured output) recorded and replayed like a turn."""
    cassette = tmp_path / "cassettes" / "session.jsonl"
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    structured = chat_chunks({"content": '{"city": "Paris"}'})
    fake = FakeProvider()
    try:
        fake.queue(chat_chunks({"content": "Per session."}), structured)
        config = model("openai", fake.base_url)
        async with Client.spawn(binary=BINARY, cwd=tmp_path, args=["--ephemeral"], env={"TEST_PROVIDER_KEY": SECRET}, request_timeout=TIMEOUT) as client:
            session = await client.open_session({"model": config, "modelCassette": {"path": "cassettes/session.jsonl", "mode": "record"}})
            assert (await session.send("hi")).message.text == "Per session."
            assert await session.generate("Which city?", schema) == {"city": "Paris"}
        assert len(fake.received) == 2
    finally:
        fake.close()
    assert len(cassette.read_text().splitlines()) == 3

    # The config file's cassette, its path relative to the file; the server's cwd is elsewhere.
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "agentrpc.json").write_text(json.dumps({"modelCassette": {"path": "../cassettes/session.jsonl"}, "models": {"m": config}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with Client.spawn(binary=BINARY, cwd=elsewhere, args=["--ephemeral", "--config", str(tmp_path / "conf" / "agentrpc.json")], request_timeout=TIMEOUT) as client:
        session = await client.open_session(model="m")
        assert (await session.send("hi")).message.text == "Per session."
        assert await session.generate("Which city?", schema) == {"city": "Paris"}

    # A session naming a cassette that is not there is refused at create time.
    async with Client.spawn(binary=BINARY, cwd=tmp_path, args=["--ephemeral"], request_timeout=TIMEOUT) as client:
        with pytest.raises(AgentRPCError) as raised:
            await client.open_session({"model": config, "modelCassette": {"path": "nowhere.jsonl"}})
    assert raised.value.kind == "invalidConfiguration" and raised.value.data.get("field") == "modelCassette.path"


async def test_agentrpc_acp_records_and_replays_through_the_cassette(tmp_path: Path) -> None:
    """`agentrpc acp --model-cassette`: an editor's prompt is answered by the
    model once, then by the cassette with the model gone, the same chunks."""
    from test_acp import Editor, agent, new_session, prompt

    cassette = tmp_path / "acp.jsonl"
    fake = FakeProvider()
    try:
        fake.queue(chat_chunks({"content": "Recorded "}, {"content": "for the editor."}))
        config = {"models": {"m": {"provider": "openai", "model": "m", "baseURL": fake.base_url + "/v1"}}, "defaultModel": "m"}
        recording = Editor()
        async with agent(tmp_path, config, recording, "--model-cassette", str(cassette), "--cassette-mode", "record") as (conn, cwd):
            session = await new_session(conn, cwd)
            assert (await prompt(conn, session.session_id, "hello")).stop_reason == "end_turn"
        assert len(fake.received) == 1
    finally:
        fake.close()
    replaying = Editor()
    async with agent(tmp_path, config, replaying, "--model-cassette", str(cassette)) as (conn, cwd):
        session = await new_session(conn, cwd)
        assert (await prompt(conn, session.session_id, "hello")).stop_reason == "end_turn"
    assert replaying.text() == recording.text() == "Recorded for the editor."
    assert len(cassette.read_text().splitlines()) == 2


def tool_call_chunks(call_id: str, name: str, arguments: dict[str, Any]) -> Canned:
    """An OpenAI chat stream whose answer is one tool call."""
    call = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return chat_chunks({"tool_calls": [call]}, finish="tool_calls")


async def test_router_consult_and_summary_requests_are_recorded_and_replayed(tmp_path: Path) -> None:
    """The side requests of a turn (an llm router, a consulted profile, a
    history summary) go through the cassette as the turn's own requests do:
    each model has its own fake server, and the replay, with every server
    gone, gives the recorded conversation."""
    cassette = tmp_path / "side.jsonl"
    servers = {name: FakeProvider() for name in ("main", "classifier", "titles", "summarizer")}
    try:
        servers["classifier"].queue(*[tool_call_chunks(f"r{i}", "select_agent", {"agent": "writer"}) for i in (1, 2)])
        servers["main"].queue(
            chat_chunks({"content": "Once upon a time, a cat."}),
            tool_call_chunks("c1", "ask_titles", {"question": "A title for a story about a brave cat?"}),
            chat_chunks({"content": "Title: Whiskers the Bold."}))
        servers["titles"].queue(chat_chunks({"content": "Whiskers the Bold"}))
        servers["summarizer"].queue(chat_chunks({"content": "The user asked for a cat story."}))
        models = {name: model("openai", fake.base_url, model=name) for name, fake in servers.items()}
        params = {
            "model": models["main"],
            "properties": {"agent": "writer"},
            "router": {"kind": "llm", "model": models["classifier"]},
            "profiles": {"selector": "agent", "cases": {
                "writer": {
                    "description": "Writes stories.", "instructions": ["You write short stories."],
                    "tools": [{"consult": "titles", "name": "ask_titles", "description": "Ask the title expert."}],
                    "hooks": {"onPrompt": [{"summarizeHistory": {"threshold": 2, "keepLast": 1, "into": "memo", "model": models["summarizer"]}}]},
                },
                "titles": {"description": "Suggests titles.", "instructions": ["You only suggest titles."], "model": models["titles"]},
            }},
        }

        async def run(mode: str, name: str, key: bool) -> tuple[list[Any], str]:
            transcript = tmp_path / f"{name}.transcript.jsonl"
            args = ["--ephemeral", "--record", str(transcript), "--model-cassette", str(cassette), "--cassette-mode", mode]
            answers: list[Any] = []
            async with Client.spawn(binary=BINARY, cwd=tmp_path, args=args, env={"TEST_PROVIDER_KEY": SECRET} if key else {},
                                    request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT) as client:
                session = await client.open_session(params)
                for prompt in ("Write a story about a cat.", "And a title?"):
                    answers.append(dict((await session.send(prompt)).raw))
            return answers, transcript.read_text()

        recorded, recorded_transcript = await run("record", "recorded", key=True)
        assert {name: len(fake.received) for name, fake in servers.items()} == {"main": 3, "classifier": 2, "titles": 1, "summarizer": 1}
    finally:
        for fake in servers.values():
            fake.close()
    assert recorded[1]["message"]["text"] == "Title: Whiskers the Bold."
    exchanges = [json.loads(line)["request"]["body"] for line in cassette.read_text().splitlines()[1:]]
    assert sorted(body["model"] for body in exchanges) == ["classifier", "classifier", "main", "main", "main", "summarizer", "titles"]
    # Each side request is what its purpose sends: the router offers select_agent, the summary asks for one.
    assert all(body["tools"][0]["function"]["name"] == "select_agent" for body in exchanges if body["model"] == "classifier")
    assert any("Summarize the conversation" in json.dumps(body) for body in exchanges if body["model"] == "summarizer")

    replayed, replayed_transcript = await run("replay", "replayed", key=False)
    assert without_ids(replayed) == without_ids(recorded)
    assert steps(replayed_transcript) == steps(recorded_transcript)


async def test_a_failed_connection_is_recorded_and_fails_the_same_way_in_replay(tmp_path: Path) -> None:
    """Nothing listens at the model's address: each attempt (the first and its
    retries, equal requests) is recorded as a connection failure with no
    response head, and the replay fails with the same error."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cassette = tmp_path / "refused.jsonl"
    config = model("openai", f"http://127.0.0.1:{port}")
    recorded, _ = await converse(tmp_path, "recorded", cassette, "record", config, ["hello"])
    assert recorded[0]["error"]["provider"]["code"] == "network"
    exchanges = [json.loads(line) for line in cassette.read_text().splitlines()[1:]]
    assert len(exchanges) > 1 and len({json.dumps(e["request"], sort_keys=True) for e in exchanges}) == 1
    assert all("status" not in e["response"] and e["response"]["end"]["error"]["code"] == "network" for e in exchanges)
    replayed, _ = await converse(tmp_path, "replayed", cassette, "replay", config, ["hello"], key=False)
    assert without_ids(replayed) == without_ids(recorded)


def cassette_with(line: str) -> str:
    header = json.dumps({"agentrpcCassette": {"agentrpcVersion": "0.1.0", "formatVersion": 1, "providers": ["openai"]}})
    return header + "\n" + line + "\n"


GOOD_EXCHANGE = json.dumps({
    "request": {"provider": "openai", "method": "POST", "path": "/v1/chat/completions", "body": {"model": "m"}},
    "response": {"status": 200, "ms": 1, "headers": {"content-type": "text/event-stream"}, "chunks": [{"ms": 2, "text": "data: [DONE]\n\n"}], "end": {"ms": 3}},
})

# A cassette that cannot be read, and what the refusal names.
BAD_CASSETTES = {
    "broken line": (cassette_with("{broken") + GOOD_EXCHANGE + "\n", "line 2: not JSON"),
    "newer format": ('{"agentrpcCassette": {"formatVersion": 2, "providers": []}}\n', "line 1: format version 2 is newer"),
    "no header": (GOOD_EXCHANGE + "\n", "line 1: the first line is not a cassette header"),
    "empty": ("", "line 1: the file is empty"),
    "not an exchange": (cassette_with("[1, 2]"), "line 2: an exchange needs"),
    "negative time": (cassette_with(GOOD_EXCHANGE.replace('{"ms": 2,', '{"ms": -9223372036854775808,')), "line 2: response.chunks[0].ms"),
    "status out of range": (cassette_with(GOOD_EXCHANGE.replace('"status": 200', '"status": 70000')), "line 2: response.status"),
    "binary": ("\x00\xff garbage\n", "line 1: not JSON"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASSETTES))
async def test_a_cassette_that_cannot_be_read_is_refused_naming_the_line(tmp_path: Path, case: str) -> None:
    """At start (`serve` exits 2 with the reason) and at session/create
    (`invalidConfiguration`, `field: modelCassette.path`), never a crash."""
    text, reason = BAD_CASSETTES[case]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(text.encode("latin-1") if case == "binary" else text.encode())
    process = await asyncio.create_subprocess_exec(
        str(BINARY), "serve", "--model-cassette", str(path), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path)
    stdout, stderr = await asyncio.wait_for(process.communicate(b""), TIMEOUT)
    assert process.returncode == 2 and stdout == b""
    assert "invalidConfiguration" in stderr.decode() and reason in stderr.decode(), stderr.decode()

    async with Client.spawn(binary=BINARY, cwd=tmp_path, args=["--ephemeral"], request_timeout=TIMEOUT) as client:
        with pytest.raises(AgentRPCError) as raised:
            await client.open_session({"model": model("openai", "http://127.0.0.1:9"), "modelCassette": {"path": "bad.jsonl"}})
        assert raised.value.kind == "invalidConfiguration" and raised.value.data.get("field") == "modelCassette.path"
        assert reason in str(raised.value)
        # The server is still there.
        assert await client.open_session(model=model("openai", "http://127.0.0.1:9"))


def test_no_committed_cassette_holds_a_secret() -> None:
    """The cassettes in the repository (examples, fixtures) hold no key, no
    credential header and no cookie."""
    root = Path(__file__).resolve().parents[3]
    cassettes = sorted({*root.glob("examples/**/cassettes/*.jsonl"), *root.glob("Tests/Fixtures/cassettes/*.jsonl")})
    assert cassettes
    import re

    for path in cassettes:
        text = path.read_text()
        assert json.loads(text.splitlines()[0])["agentrpcCassette"]["formatVersion"] == 1
        for line in text.splitlines()[1:]:
            headers = json.loads(line)["response"].get("headers", {})
            assert not any("auth" in name or "cookie" in name or "key" in name for name in headers), path
        assert not re.search(r"sk-[A-Za-z0-9_-]{8,}|Bearer |x-api-key", text, re.IGNORECASE), path


def test_agentrpc_chat_records_and_replays_through_the_cassette(tmp_path: Path) -> None:
    """`agentrpc chat --model-cassette`, at a terminal: the model answers once,
    then the cassette does with the model gone, the same text on the screen."""
    from test_chat import PROMPT, Terminal, chat_env

    cassette = tmp_path / "chat.jsonl"
    fake = FakeProvider()
    try:
        fake.queue(chat_chunks({"content": "Recorded "}, {"content": "at the terminal."}))
        config = {"models": {"m": model("openai", fake.base_url)}, "defaultModel": "m"}
        (tmp_path / "agentrpc.json").write_text(json.dumps(config))
        env = {**chat_env(tmp_path), "TEST_PROVIDER_KEY": SECRET}
        for mode, with_env in (("record", env), ("replay", chat_env(tmp_path))):
            if mode == "replay":
                fake.close()
            term = Terminal(["--model-cassette", str(cassette), "--cassette-mode", mode], tmp_path, with_env)
            try:
                term.expect(PROMPT)
                term.line("hello")
                term.expect("Recorded at the terminal.")
                term.expect(PROMPT)
                term.line("/exit")
                assert term.wait_exit() == 0
            finally:
                term.close()
        assert len(fake.received) == 1
    finally:
        fake.close()
    text = cassette.read_text()
    assert len(text.splitlines()) == 2 and SECRET not in text


async def test_recorded_pace_lets_a_test_cancel_mid_answer(tmp_path: Path) -> None:
    """A model that paused 2 s mid-answer, replayed at the recorded pace: a
    cancel sent when the first text arrives ends the turn in the pause, with
    the text so far, as it would live."""
    from agentrpc import Cancelled, TextDelta, TurnEnded
    from conftest import until

    cassette = tmp_path / "slow.jsonl"
    first = b'data: {"choices":[{"index":0,"delta":{"content":"Slow "}}]}\n\n'
    rest = [b'data: {"choices":[{"index":0,"delta":{"content":"answer."},"finish_reason":"stop"}]}\n\n', b"data: [DONE]\n\n"]
    config = await record_one(tmp_path, cassette, "openai", ["slowly"], [Canned(200, {"Content-Type": "text/event-stream"}, first, slow_chunks=rest, pause=2.0)])
    args = ["--ephemeral", "--model-cassette", str(cassette), "--cassette-pace", "recorded"]
    async with Client.spawn(binary=BINARY, cwd=tmp_path, args=args, request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT) as client:
        session = await client.open_session(model=config, tools=TOOLS)
        async with session.watch() as watch:
            turn = asyncio.create_task(session.send("slowly"))
            await until(watch, lambda e: isinstance(e, TextDelta))
            assert await session.cancel() is True
            with pytest.raises(Cancelled) as caught:
                await turn
            ended = await until(watch, lambda e: isinstance(e, TurnEnded))
    assert caught.value.partial_text == "Slow "
    assert isinstance(ended, TurnEnded) and ended.status == "cancelled"


async def test_a_configured_secret_header_value_is_scrubbed_wherever_it_appears(tmp_path: Path) -> None:
    """A credential in a configured header (not the API key) never reaches the
    cassette: not from the prompt in the request body, the answer's text or a
    kept response header. Matching uses the scrubbed body, so the replay
    still finds the exchange."""
    token = "gw-0123456789-gateway-secret"
    cassette = tmp_path / "headers.jsonl"
    answer = chat_chunks({"content": f"Your token {token} works."})
    answer.headers["x-request-id"] = f"req-{token}"
    fake = FakeProvider()
    try:
        fake.queue(answer)
        config = model("openai", fake.base_url, headers={"X-Gateway-Token": token})
        recorded, _ = await converse(tmp_path, "recorded", cassette, "record", config, [f"Is {token} right?"])
        assert fake.received[0].headers["x-gateway-token"] == token
    finally:
        fake.close()
    assert recorded[0]["message"]["text"] == f"Your token {token} works."
    text = cassette.read_text()
    assert token not in text and "x-gateway-token" not in text.lower()
    exchange = json.loads(text.splitlines()[1])
    assert exchange["response"]["headers"]["x-request-id"] == "req-[REDACTED]"
    replayed, _ = await converse(tmp_path, "replayed", cassette, "replay", config, [f"Is {token} right?"], key=False)
    assert replayed[0]["message"]["text"] == "Your token [REDACTED] works."
