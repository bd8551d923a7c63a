#!/usr/bin/env python3
"""How long `agentrpc acp` takes to answer a cancelled prompt (issue 19: `session/cancel`
answers `stopReason: cancelled` within 100 ms when nothing slow is outstanding).

Drives the binary with the official ACP Python SDK, as an editor does: per run, a prompt whose
scripted model streams a word and then stalls, `session/cancel` once the word arrived, and the
time until the prompt's answer. Also: a prompt cancelled while a permission request waits (the
request is withdrawn). Prints the median, 95th percentile and maximum in milliseconds.

    .build/python-test/bin/python Benchmarks/acp-cancel.py [--runs N] [--binary PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from acp import spawn_agent_process, text_block
from acp.schema import AllowedOutcome, ClientCapabilities, FileSystemCapabilities, ReadTextFileResponse, RequestPermissionResponse

ROOT = Path(__file__).resolve().parents[1]


class Editor:
    def __init__(self) -> None:
        self.chunk = asyncio.Event()
        self.asked = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        if getattr(update, "session_update", "") == "agent_message_chunk":
            self.chunk.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **_: Any) -> RequestPermissionResponse:
        self.asked.set()
        await asyncio.Event().wait()  # never decides; only the cancel ends the wait
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id="allow_once"))

    async def read_text_file(self, session_id: str, path: str, **_: Any) -> ReadTextFileResponse:
        return ReadTextFileResponse(content="old")


async def measure(binary: str, runs: int, permission: bool) -> list[float]:
    stall = {"text": ["Partial"], "stall": True}
    write = {"toolCalls": [{"id": "call_w", "name": "write_file", "arguments": {"path": "a.txt", "content": "new"}}]}
    config = {"models": {"s": {"provider": "scripted", "script": [write if permission else stall] * runs}}, "defaultModel": "s"}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agentrpc.json"
        path.write_text(json.dumps(config))
        env = {**os.environ, "AGENTRPC_LOCAL_MODEL_SCRIPT": "/nonexistent"}
        times: list[float] = []
        editor = Editor()
        async with spawn_agent_process(editor, binary, "acp", "--config", str(path), "--ephemeral", env=env) as (conn, _):
            caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True)
            await conn.initialize(protocol_version=1, client_capabilities=caps)
            session = await conn.new_session(cwd="/work", mcp_servers=[])
            for _ in range(runs):
                waited = editor.asked if permission else editor.chunk
                waited.clear()
                running = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]))
                await asyncio.wait_for(waited.wait(), 20)
                start = time.perf_counter()
                await conn.cancel(session_id=session.session_id)
                answer = await asyncio.wait_for(running, 20)
                times.append((time.perf_counter() - start) * 1000)
                assert answer.stop_reason == "cancelled", answer
        return times


def report(label: str, times: list[float]) -> None:
    ordered = sorted(times)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    print(f"{label}: n={len(times)} median {statistics.median(times):.1f} ms, p95 {p95:.1f} ms, max {max(times):.1f} ms")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--binary", default=os.environ.get("AGENTRPC_BIN", str(ROOT / ".build" / "debug" / "agentrpc")))
    args = parser.parse_args()
    report("cancel mid-stream -> prompt answered", await measure(args.binary, args.runs, permission=False))
    report("cancel while a permission waits -> prompt answered", await measure(args.binary, args.runs, permission=True))


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
