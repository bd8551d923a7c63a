"""End to end against a real local model: SmolLM2-135M-Instruct served by
llama-cpp-python's OpenAI-compatible server (``scripts/local-model``).

Runs when the model environment exists (``scripts/test`` prepares it, cached);
skipped otherwise. The server's known quirks are part of what is tested: it
ignores ``stream_options.include_usage`` (no usage), returns an empty 200 body
when streaming with ``tool_choice: "auto"`` (hence ``streamTools: false``), and
rejects ``content: null`` in assistant messages (agentrpc sends ``""``).
"""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrpc import Client

from conftest import real_binary

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "local-model"
BINARY = real_binary()


def model_ready() -> bool:
    return SCRIPT.is_file() and subprocess.run([str(SCRIPT), "status"], capture_output=True).returncode == 0


pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary"),
    pytest.mark.skipif(not model_ready(), reason="the local model environment is not installed (scripts/local-model install)"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def local_server() -> Iterator[str]:
    port = free_port()
    # llama.cpp logs a lot while loading; a pipe nobody reads would fill and stall it.
    log = tempfile.TemporaryFile()
    process = subprocess.Popen([str(SCRIPT), "serve", str(port)], stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    try:
        while True:
            if process.poll() is not None:
                log.seek(0)
                pytest.fail(f"the local model server exited: {log.read().decode(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(base + "/models", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the local model server did not start within 120 s")
            time.sleep(0.5)  # polling a port that is not yet open: there is no event to wait on
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def config(tmp_path: Path, base: str) -> Path:
    path = tmp_path / "agentrpc.json"
    path.write_text(json.dumps({
        "models": {"local": {"provider": "openai", "model": "smollm2", "baseURL": base,
                             "options": {"streamTools": False, "maxOutputTokens": 48}}},
        "defaultModel": "local",
    }))
    return path


WEATHER = {"name": "get_weather", "description": "Get the current weather for a city.",
           "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


async def test_streamed_text_turn(local_server: str, tmp_path: Path) -> None:
    async with Client.spawn(binary=BINARY, args=["--config", str(config(tmp_path, local_server))], request_timeout=180) as client:
        session = await client.open_session()
        deltas: list[str] = []
        client.on_notification("session/event", lambda p: deltas.append(p["event"]["delta"]) if p["event"]["type"] == "textDelta" else None)
        result = await session.send("Say hello in five words.", options={"temperature": 0})
        assert result["message"]["text"].strip()
        assert len(deltas) > 1, "the answer should arrive as a stream of deltas"
        assert "".join(deltas) == result["message"]["text"]


async def test_tool_call_turn_with_a_named_tool_choice(local_server: str, tmp_path: Path) -> None:
    """Round 1 forces get_weather; its output switches the profile to one that
    disallows tools, so round 2 must answer in text (a 135M model otherwise
    keeps calling the tool)."""
    calls: list[dict[str, Any]] = []
    async with Client.spawn(binary=BINARY, args=["--config", str(config(tmp_path, local_server))], request_timeout=180) as client:
        def get_weather(params: dict[str, Any]) -> dict[str, Any]:
            calls.append(params)
            return {"outcome": "ok", "content": {"city": params["arguments"].get("city"), "celsius": 18, "sky": "sunny"}}

        client.on_request("tool/call", get_weather)
        session = await client.open_session(
            tools=[WEATHER],
            properties={"phase": "lookup"},
            profiles={"selector": "phase", "cases": {
                "lookup": {"instructions": ["Look the weather up with the tool."], "tools": ["get_weather"],
                           "options": {"toolChoice": {"tool": "get_weather"}},
                           "hooks": {"onToolOutput": [{"set": {"phase": "answer"}}]}},
                "answer": {"instructions": ["Answer briefly from the tool result."], "options": {"toolCallingMode": "disallowed"}},
            }},
        )
        result = await session.send("What is the weather in Paris?", options={"temperature": 0})
        assert len(calls) == 1 and calls[0]["name"] == "get_weather"
        assert isinstance(calls[0]["arguments"].get("city"), str) and calls[0]["arguments"]["city"]
        assert result["toolCalls"] == 1 and result["roundTrips"] == 2
        assert result["message"]["text"].strip()
        state = await session.state()
        assert state["activeProfile"] == "answer"
