"""Scores a small local GGUF model on what the demo asks of it (docs/local-model.md).

    PYTHONPATH=clients/python/src python3 Benchmarks/local-model-eval.py \\
        --python ~/.cache/agentrpc/local-model/venv/bin/python --gguf MODEL.gguf \\
        [--chat-format chatml-function-calling] [--runs 3]

It serves the model with llama-cpp-python's OpenAI-compatible server (the
``--python`` environment must have ``llama-cpp-python[server]``), then drives
the real agentrpc binary through the Python client, as scripts/demo does:

* the demo's tool task: "What's the weather in Paris?" with ``get_weather``,
  the call forced and then answered without tools (``quickstart.py
  --small-model``); sensible when the answer mentions 18 °C or sunny;
* the same with ``toolChoice: auto`` (at most 3 round trips): does the model
  call the tool with Paris, and then answer from its result?
* three plain questions, each checked for one expected word.

Each task runs ``--runs`` times; it prints every answer and a summary line.
It asserts nothing: answers of tiny sampled models vary, which is what the
repetition shows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentrpc import Client, ToolCallStarted, tool

QUESTIONS = [
    ("What is the capital of France? Answer in one sentence.", ["paris"]),
    ("What is 2 + 3? Answer with the number.", ["5", "five"]),
    ("Name one colour of the rainbow.", ["red", "orange", "yellow", "green", "blue", "indigo", "violet"]),
]


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    return {"city": city, "celsius": 18, "sky": "sunny"}


# The demo's profiles for a tiny model (examples/quickstart.py --small-model).
FORCED_PROFILES = {"selector": "phase", "cases": {
    "lookup": {"tools": ["get_weather"], "options": {"toolChoice": {"tool": "get_weather"}},
               "hooks": {"onToolOutput": [{"set": {"phase": "answer"}}]}},
    "answer": {"instructions": ["Answer in one sentence from the tool result."],
               "options": {"toolCallingMode": "disallowed"}},
}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(python: str, gguf: str, chat_format: str | None, port: int, log: Any) -> subprocess.Popen[bytes]:
    args = [python, "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", "4096", "--model_alias", "local"]
    if chat_format:
        args += ["--chat_format", chat_format]
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the model server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return process
        except OSError:
            time.sleep(0.3)
    process.kill()
    raise SystemExit("the model server did not start within 180 s")


async def evaluate(client: Client, runs: int) -> dict[str, int]:
    score = {"forced": 0, "auto called": 0, "auto answered": 0, "questions": 0}
    for run in range(runs):
        session = await client.open_session(model="local", tools=[get_weather], profiles=FORCED_PROFILES,
                                            properties={"phase": "lookup"})
        started = time.monotonic()
        answer = (await session.send("What's the weather in Paris?")).text
        ok = any(word in answer.lower() for word in ("18", "sunny"))
        score["forced"] += ok
        print(f"  forced tool, run {run + 1}: {'ok ' if ok else 'bad'} {time.monotonic() - started:4.1f}s {answer!r:.160}")

        session = await client.open_session(model="local", tools=[get_weather],
                                            limits={"max_round_trips": 3})
        calls: list[Any] = []
        stream = session.stream("What's the weather in Paris?")
        try:
            async for event in stream:
                if isinstance(event, ToolCallStarted):
                    calls.append(event.arguments)
        except Exception as exc:  # a tiny model may loop on tool calls until a limit
            print(f"  auto tool, run {run + 1}: error {type(exc).__name__}: {exc}"[:200])
        called = any(isinstance(c, dict) and "paris" in str(c.get("city", "")).lower() for c in calls)
        text = stream.result.text if stream.result else ""
        answered = called and any(word in text.lower() for word in ("18", "sunny"))
        score["auto called"] += called
        score["auto answered"] += answered
        print(f"  auto tool, run {run + 1}: {'called' if called else 'no call'}, "
              f"{'answered' if answered else 'no answer'}: {len(calls)} calls, first {json.dumps(calls[:1])} {text!r:.100}")

        for question, expected in QUESTIONS:
            session = await client.open_session(model="local")
            answer = (await session.send(question)).text
            ok = any(word in answer.lower() for word in expected)
            score["questions"] += ok
            print(f"  question, run {run + 1}: {'ok ' if ok else 'bad'} {question!r:.40} -> {answer!r:.120}")
    return score


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="a Python with llama-cpp-python[server]")
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--chat-format", default="chatml-function-calling",
                        help="llama-cpp-python's --chat_format ('' for the GGUF's own template)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-output-tokens", type=int, default=256)
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as scratch, open(Path(scratch) / "server.log", "wb") as log:
        server = start_server(args.python, args.gguf, args.chat_format or None, port, log)
        config = Path(scratch) / "agentrpc.json"
        config.write_text(json.dumps({"models": {"local": {
            "provider": "openai", "model": "local", "baseURL": f"http://127.0.0.1:{port}/v1",
            "options": {"streamTools": False, "maxOutputTokens": args.max_output_tokens}}}}))
        try:
            async with Client.spawn(args=["--config", str(config)], cwd=scratch) as client:
                print(f"{Path(args.gguf).name} ({args.chat_format or 'GGUF template'}), {args.runs} runs:")
                score = await evaluate(client, args.runs)
        finally:
            server.terminate()
            server.wait(10)
    total = args.runs
    print(f"SUMMARY {Path(args.gguf).name} [{args.chat_format or 'GGUF template'}]: "
          f"forced tool {score['forced']}/{total}, auto tool called {score['auto called']}/{total} "
          f"and answered {score['auto answered']}/{total}, "
          f"questions {score['questions']}/{total * len(QUESTIONS)}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
