"""A hostile model endpoint (docs/protocol.md, "Every limit and its default").

A local fake OpenAI-compatible server (port 0) serves absurd usage, giant tool
arguments, endless reasoning, single SSE lines of 10 MB and beyond the 16 MiB
line limit, and malformed JSON in `tool_calls`. Each turn completes sensibly or
fails with a typed error, and the server stays alive: another session's
`getState` answers after every case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrpc import AgentRPCError, Client
from conftest import real_binary
from fake_provider import Canned, FakeProvider

BINARY = real_binary()
TIMEOUT = 60.0

pytestmark = pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN")


def sse(*chunks: dict[str, Any], raw: bytes = b"") -> Canned:
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + raw + b"data: [DONE]\n\n"
    return Canned(200, {"Content-Type": "text/event-stream"}, body)


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def finish(reason: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def tool_call(arguments: str, call_id: str = "call_1") -> dict[str, Any]:
    return delta(tool_calls=[{"index": 0, "id": call_id, "type": "function", "function": {"name": "look", "arguments": arguments}}])


class Served:
    def __init__(self, tmp_path: Path) -> None:
        self.fake = FakeProvider()
        config = {"models": {"m": {"provider": "openai", "model": "hostile", "baseURL": self.fake.base_url + "/v1"}}}
        (tmp_path / "agentrpc.json").write_text(json.dumps(config))
        self.tmp_path = tmp_path
        self.tool_calls: list[dict[str, Any]] = []

    async def __aenter__(self) -> "Served":
        self.client_cm = Client.spawn(binary=BINARY, cwd=self.tmp_path, args=["--log-level", "warning"], request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT)
        self.client = await self.client_cm.__aenter__()

        def on_tool(params: dict[str, Any]) -> dict[str, Any]:
            self.tool_calls.append(params)
            return {"outcome": "ok", "content": "looked"}

        self.client.on_request("tool/call", on_tool)
        self.bystander = await self.client.open_session(model={"provider": "scripted", "script": [{"text": ["fine"]}]})
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.client_cm.__aexit__(*exc)
        finally:
            self.fake.close()

    async def session(self, **limits: Any) -> Any:
        return await self.client.open_session(model="m", tools=[{"name": "look", "inputSchema": {"type": "object"}}], limits=limits or None)

    async def alive(self) -> None:
        state = await self.client.get_state(self.bystander)
        assert state["isRunning"] is False


async def test_absurd_usage_is_ignored_and_the_turn_completes(tmp_path: Path) -> None:
    big = 2**63 - 1
    async with Served(tmp_path) as s:
        s.fake.queue(
            sse(tool_call("{}"), finish("tool_calls", {"prompt_tokens": big, "completion_tokens": -3, "total_tokens": big})),
            sse(delta(content="done"), finish("stop", {"prompt_tokens": big, "completion_tokens": big})),
        )
        result = await (await s.session()).send("go")
        assert result["message"]["text"] == "done"
        # Never summed, never passed on: nothing believable was reported.
        assert result["usage"].get("inputTokens", 0) == 0 and result["usage"].get("outputTokens", 0) == 0
        await s.alive()


async def test_giant_tool_arguments_and_ten_megabyte_lines_are_served(tmp_path: Path) -> None:
    giant = json.dumps({"q": "x" * 5_000_000})
    async with Served(tmp_path) as s:
        s.fake.queue(sse(tool_call(giant), finish("tool_calls")), sse(delta(content="y" * 10_000_000), finish("stop")))
        result = await (await s.session()).send("go")
        assert len(s.tool_calls) == 1 and len(s.tool_calls[0]["arguments"]["q"]) == 5_000_000
        assert len(result["message"]["text"]) == 10_000_000
        await s.alive()


async def test_an_sse_line_over_the_limit_fails_the_turn_typed(tmp_path: Path) -> None:
    async with Served(tmp_path) as s:
        line = b"data: " + json.dumps(delta(content="z" * (17 * 1024 * 1024))).encode() + b"\n\n"
        s.fake.queue(sse(raw=line))
        with pytest.raises(AgentRPCError) as failure:
            await (await s.session()).send("go")
        assert failure.value.kind == "providerContractViolation"
        assert "16777216" in failure.value.message
        await s.alive()


async def test_a_response_over_64_mib_in_small_lines_fails_the_turn_typed(tmp_path: Path) -> None:
    # Each line is well under the line limit; together they pass the stream limit.
    # Argument fragments are the cheapest to send: the server shows them to nobody.
    fragment = b"data: " + json.dumps(delta(tool_calls=[{"index": 0, "function": {"arguments": "x" * (8 * 1024 * 1024)}}])).encode() + b"\n\n"
    first = b"data: " + json.dumps(tool_call('{"q": "')).encode() + b"\n\n"
    async with Served(tmp_path) as s:
        s.fake.queue(Canned(200, {"Content-Type": "text/event-stream"}, first + fragment * 9))
        session = await s.session()
        with pytest.raises(AgentRPCError) as failure:
            await session.send("go")
        assert failure.value.kind == "providerContractViolation"
        assert "67108864" in failure.value.message
        assert s.tool_calls == []
        await s.alive()


async def test_malformed_tool_call_json_fails_that_tool_output_only(tmp_path: Path) -> None:
    async with Served(tmp_path) as s:
        s.fake.queue(sse(tool_call('{"q": [1, 2'), finish("tool_calls")), sse(delta(content="sorry"), finish("stop")))
        session = await s.session()
        result = await session.send("go")
        assert result["message"]["text"] == "sorry" and s.tool_calls == []
        transcript = await s.client.get_transcript(session)
        outputs = [e for e in transcript["entries"] if e["type"] == "toolOutput"]
        assert outputs[0]["outcome"] == "failed" and "not valid JSON" in outputs[0]["content"]
        await s.alive()


async def test_endless_reasoning_ends_at_the_wall_clock(tmp_path: Path) -> None:
    async with Served(tmp_path) as s:
        chunk = b"data: " + json.dumps(delta(reasoning_content="hmm " * 256)).encode() + b"\n\n"
        s.fake.queue(Canned(200, {"Content-Type": "text/event-stream"}, b"", slow_chunks=[chunk] * 100_000, pause=0.001))
        session = await s.session(wallClockSeconds=2)
        with pytest.raises(AgentRPCError) as failure:
            await session.send("think")
        assert failure.value.kind == "wallClockTimeoutExceeded"
        await s.alive()


async def test_usage_reported_before_a_failure_counts_in_the_session_totals(tmp_path: Path) -> None:
    # The request was paid for even though the stream then broke off: the
    # failed turn's usage, and so `usageTotals`, include it.
    usage = {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}
    async with Served(tmp_path) as s:
        s.fake.queue(Canned(200, {"Content-Type": "text/event-stream"},
                            b"data: " + json.dumps(delta(content="partial")).encode() + b"\n\n"
                            + b"data: " + json.dumps(usage).encode() + b"\n\n"))
        session = await s.session()
        with pytest.raises(AgentRPCError) as failure:
            await session.send("go")
        assert failure.value.kind == "providerError"
        state = await s.client.get_state(session)
        assert state["usageTotals"] == {"inputTokens": 11, "outputTokens": 7, "contextTokens": 18}, state.get("usageTotals")
        await s.alive()
