"""A real model's answers, recorded once and replayed offline (a model cassette).

By default this replays ``examples/cassettes/weather.jsonl``: no model, no
key, no network, and the same answer every time. ``--record`` runs the
repository's local model (``scripts/local-model``, SmolLM2) and records the
cassette again. See docs/testing.md.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentrpc import Cassette, Client, tool

ROOT = Path(__file__).resolve().parents[1]
CASSETTE = ROOT / "examples" / "cassettes" / "weather.jsonl"
# Where the local model listens while recording; a replay never connects to it.
DEFAULT_PORT = 8642


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    return {"city": city, "celsius": 18, "sky": "sunny"}


def local_model(port: int) -> dict[str, Any]:
    """The local model, as the session names it (the same when recording and replaying)."""
    return {"provider": "openai", "model": "smollm2", "baseURL": f"http://127.0.0.1:{port}/v1",
            "options": {"streamTools": False, "maxOutputTokens": 48, "temperature": 0}}


@contextmanager
def local_model_server(port: int) -> Iterator[None]:
    """scripts/local-model serving on `port` until the block ends."""
    process = subprocess.Popen([str(ROOT / "scripts" / "local-model"), "serve", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the local model server did not start (scripts/local-model install?)")
                time.sleep(0.5)  # the port is not open yet: nothing to wait on but time
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


async def ask(cassette: Cassette, port: int) -> str:
    async with Client.spawn(args=["--ephemeral"], cassette=cassette) as client:
        session = await client.open_session(
            model=local_model(port), tools=[get_weather],
            # Force the lookup, then answer without tools: a 135M model would otherwise keep calling it.
            properties={"phase": "lookup"},
            profiles={"selector": "phase", "cases": {
                "lookup": {"tools": ["get_weather"], "options": {"toolChoice": {"tool": "get_weather"}},
                           "hooks": {"onToolOutput": [{"set": {"phase": "answer"}}]}},
                "answer": {"instructions": ["Answer in one sentence from the tool result."],
                           "options": {"toolCallingMode": "disallowed"}},
            }})
        result = await session.send("What's the weather in Paris?")
        return f"{result.tool_calls} tool call, {result.round_trips} round trips: {result.message.text.strip()}"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--record", action="store_true", help="record the cassette again with the local model")
    parser.add_argument("--cassette", type=Path, default=CASSETTE, help="the cassette file (default: %(default)s)")
    args = parser.parse_args()
    if args.record:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        with local_model_server(port):
            print(await ask(Cassette(args.cassette, mode="record"), port))
        return 0
    print(await ask(Cassette(args.cassette), DEFAULT_PORT))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
