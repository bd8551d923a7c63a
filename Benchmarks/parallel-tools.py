#!/usr/bin/env python3
"""Tool calls in parallel: one round trip of 8 calls of a tool that sleeps
200 ms, through the binary with the Python client (docs/protocol.md §5,
"Calls in parallel").

Sequential: the tool is declared `@tool(parallel=False)`, so the server sends
one call at a time (as every call went before parallel execution). Parallel:
the same tool declared `@tool(parallel=True)`; the server sends all 8 at once
(`limits.maxParallelToolCalls` 8) and the client runs them on its thread pool
(`max_workers` 8). Prints the turn's wall time and agentrpc's CPU time for
each, median of ROUNDS turns (each in a fresh session).

    AGENTRPC_BIN=.build/release/agentrpc python3 Benchmarks/parallel-tools.py [ROUNDS]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python" / "src"))
from agentrpc import Client, scripted, tool  # noqa: E402

CALLS = 8
SLEEP_SECONDS = 0.2


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def slow_tool(parallel: bool):  # noqa: ANN201 - a Tool
    def fetch(n: int) -> int:
        """Sleeps 200 ms (a network call, a subprocess), then answers n."""
        time.sleep(SLEEP_SECONDS)
        return n

    return tool(fetch, parallel=parallel)


async def measure(client: Client, parallel: bool) -> tuple[float, float]:
    script = scripted({"toolCalls": [{"name": "fetch", "arguments": {"n": n}} for n in range(CALLS)]}, {"text": ["done"]})
    session = await client.open_session(model=script, tools=[slow_tool(parallel)])
    pid = client.pid
    cpu_before, wall_before = cpu_seconds(pid), time.perf_counter()
    result = await session.send("go")
    wall, cpu = time.perf_counter() - wall_before, cpu_seconds(pid) - cpu_before
    assert result.tool_calls == CALLS
    return wall, cpu


async def main(rounds: int) -> None:
    binary = os.environ.get("AGENTRPC_BIN")
    async with Client.spawn(binary=binary, args=["--ephemeral"], max_workers=CALLS) as client:
        figures: dict[str, list[tuple[float, float]]] = {"sequential": [], "parallel": []}
        for _ in range(rounds):
            for name in figures:
                figures[name].append(await measure(client, name == "parallel"))
    print(f"{CALLS} calls of a tool that sleeps {SLEEP_SECONDS * 1000:.0f} ms, one round trip; median of {rounds} turns")
    print(f"{'':12} {'wall (s)':>9} {'agentrpc CPU (ms)':>18}")
    for name, runs in figures.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"{name:12} {wall:9.3f} {cpu * 1000:18.1f}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
