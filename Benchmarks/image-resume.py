#!/usr/bin/env python3
"""How long `session/resume` takes for a session whose tools returned 100
one-megabyte screenshots (docs/protocol.md, "Images in tool results").

One turn of N round trips (the scripted provider, so no model time), each a
call of a client tool that answers a text and an image block of 1,000,000
random bytes (base64, 1.33 MB on the wire). Then, in a fresh server on the same
store, the session is resumed, closed and resumed again ROUNDS times; each
`session/resume` is timed from writing the request to reading its answer.
Prints the first (cold: a new process) and the median of the others (the
journal in the page cache), the journal's size and the media directory's.

    AGENTRPC_BIN=.build/release/agentrpc python3 Benchmarks/image-resume.py [N] [ROUNDS]
"""

from __future__ import annotations

import asyncio
import base64
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python" / "src"))
from agentrpc import Client  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BINARY = os.environ.get("AGENTRPC_BIN", str(ROOT / ".build" / "release" / "agentrpc"))
SIZE = 1_000_000


async def record(store: Path, count: int) -> str:
    """A stored session with `count` screenshots in its transcript; its id."""
    shots = [base64.b64encode(os.urandom(SIZE)).decode() for _ in range(count)]
    answered = iter(shots)

    def screenshot(_params: object) -> dict[str, object]:
        return {"outcome": "ok", "content": [{"type": "text", "text": "the screen:"}, {"type": "image", "mimeType": "image/png", "data": next(answered)}]}

    script = [{"toolCalls": [{"name": "screenshot", "arguments": {}}]} for _ in range(count)] + [{"text": ["seen"]}]
    async with Client.spawn(binary=BINARY, args=["--store", str(store), "--max-message-bytes", str(4 * SIZE)], request_timeout=600) as client:
        client.on_request("tool/call", screenshot)
        session = await client.open_session(
            {"model": {"provider": "scripted", "script": script}, "tools": [{"name": "screenshot", "inputSchema": {"type": "object"}}],
             "limits": {"maxRoundTrips": count + 1, "maxToolCalls": count}})
        await session.send("take the screenshots")
        return session.id


async def resumes(store: Path, session_id: str, rounds: int) -> list[float]:
    """Seconds per `session/resume`, the first in a fresh process."""
    times: list[float] = []
    async with Client.spawn(binary=BINARY, args=["--store", str(store)], request_timeout=600) as client:
        for _ in range(rounds):
            began = time.perf_counter()
            await client.request("session/resume", {"sessionId": session_id})
            times.append(time.perf_counter() - began)
            await client.close_session(session_id)
    return times


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir()) if path.is_dir() else path.stat().st_size


async def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    with tempfile.TemporaryDirectory(prefix="image-resume-") as directory:
        store = Path(directory)
        session_id = await record(store, count)
        times = await resumes(store, session_id, rounds)
        journal, media = size(store / f"{session_id}.jsonl"), size(store / f"{session_id}.media")
    print(f"{count} screenshots of {SIZE} bytes ({BINARY})")
    print(f"  session/resume, fresh process: {times[0] * 1000:.1f} ms")
    print(f"  session/resume, median of {len(times) - 1} more: {statistics.median(times[1:]) * 1000:.1f} ms")
    print(f"  journal {journal} bytes, media directory {media} bytes")


if __name__ == "__main__":
    asyncio.run(main())
