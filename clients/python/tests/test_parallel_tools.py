"""Tool calls the server runs in parallel, handled concurrently by the clients
(docs/protocol.md §5 "Calls in parallel"), against the real binary.

No timing is asserted: a handler that needs its siblings waits for them on an
event or a barrier, with a timeout, so calls handled one after the other fail
the test instead of passing slowly.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from agentrpc import ToolCallFinished, ToolCallStarted, scripted, tool
from agentrpc import sync

from conftest import REAL_BINARY, REAL_TIMEOUT, call, requires_real, spawn_real

pytestmark = requires_real

WAIT = 10.0


class InFlight:
    """How many handlers run now, and the most that ever ran at once (any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.most = 0

    def __enter__(self) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def __exit__(self, *_: Any) -> None:
        with self._lock:
            self.now -= 1


def test_the_declaration_says_parallel_as_given() -> None:
    @tool(parallel=False, annotations={"read_only": True})
    def unsafe() -> str:
        """Not safe beside other calls."""
        return ""

    @tool(parallel=True)
    def safe() -> str:
        """Safe beside other calls."""
        return ""

    @tool
    def plain() -> str:
        """The server decides by its annotations."""
        return ""

    assert unsafe.spec()["parallel"] is False
    assert safe.spec()["parallel"] is True
    assert "parallel" not in plain.spec()
    with pytest.raises(ValueError, match="parallel"):
        tool(parallel=1)(plain.function)  # type: ignore[call-overload]


async def test_the_async_client_runs_concurrent_calls_concurrently(tmp_path: Path) -> None:
    started: list[str] = []
    all_started = asyncio.Event()

    @tool(annotations={"read_only": True})
    async def read(path: str) -> str:
        """Reads a file; answers only once all three calls are running."""
        started.append(path)
        if len(started) == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), WAIT)
        return f"contents of {path}"

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted({"toolCalls": [call("read", path=p) for p in "abc"]}, {"text": ["Read."]}), tools=[read])
        result = await session.send("Read a, b and c")
        assert result.tool_calls == 3
        outputs = [e["content"] for e in (await session.transcript()).entries if e["type"] == "toolOutput"]
    assert sorted(started) == ["a", "b", "c"]
    # In call order, whichever answered first.
    assert outputs == ["contents of a", "contents of b", "contents of c"]


async def test_plain_functions_run_on_at_most_max_workers_threads(tmp_path: Path) -> None:
    in_flight = InFlight()
    # Each call waits for a second one beside it: with two workers they go in pairs.
    pairs = threading.Barrier(2, timeout=WAIT)

    @tool(parallel=True)
    def fetch(n: int) -> int:
        """Fetches n, beside one other call."""
        with in_flight:
            pairs.wait()
        return n

    async with spawn_real(tmp_path, max_workers=2) as client:
        session = await client.open_session(
            model=scripted({"toolCalls": [call("fetch", n=n) for n in range(4)]}, {"text": ["Fetched."]}), tools=[fetch])
        result = await session.send("Fetch four")
    assert result.tool_calls == 4
    assert in_flight.most == 2


async def test_a_tool_declared_not_parallel_runs_alone(tmp_path: Path) -> None:
    @tool(parallel=False, annotations={"read_only": True})
    async def count(n: int) -> int:
        """Read-only, but not safe beside other calls."""
        return n

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model=scripted({"toolCalls": [call("count", n=1), call("count", n=2)]}, {"text": ["Counted."]}), tools=[count])
        events = [(type(e).__name__, e.call_id) async for e in session.stream("Count")
                  if isinstance(e, (ToolCallStarted, ToolCallFinished))]
    first, second = (c for kind, c in events if kind == "ToolCallStarted")
    # The second starts only once the first has finished.
    assert events == [("ToolCallStarted", first), ("ToolCallFinished", first),
                      ("ToolCallStarted", second), ("ToolCallFinished", second)]


def test_the_sync_client_runs_concurrent_calls_on_its_thread_pool(tmp_path: Path) -> None:
    all_three = threading.Barrier(3, timeout=WAIT)
    threads: set[str] = set()

    @tool(annotations={"read_only": True})
    def read(path: str) -> str:
        """Reads a file; answers only once all three calls are running."""
        threads.add(threading.current_thread().name)
        all_three.wait()
        return path.upper()

    with sync.Client.spawn(binary=REAL_BINARY, cwd=tmp_path, request_timeout=REAL_TIMEOUT, max_workers=3) as client:
        session = client.open_session(
            model=scripted({"toolCalls": [call("read", path=p) for p in "abc"]}, {"text": ["Read."]}), tools=[read])
        assert session.send("Read a, b and c").tool_calls == 3
    assert len(threads) == 3 and all(name.startswith("agentrpc-tool") for name in threads)


def test_max_workers_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_workers"):
        with sync.Client.spawn(binary=REAL_BINARY, cwd=tmp_path, max_workers=0):
            pass
