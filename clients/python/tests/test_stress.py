"""Seeded random conversations against the real binary: sends with random tool
calls, tool answers of every kind (ok with undo, failed, denied, conflict,
thrown errors, slow answers), cancels both ways at random moments, transcript
edits between turns. Whatever happens, the invariants of the turn contract
must hold: every send is answered (a result or a typed error), nothing hangs,
`seq` rises by exactly one, the transcript stays a well-formed history, and the
session is idle and usable afterwards."""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path
from typing import Any

import pytest

from agentrpc import AgentRPCError, Client

from conftest import real_binary

BINARY = real_binary()
pytestmark = pytest.mark.skipif(BINARY is None, reason="no agentrpc binary")

TOOLS = [{"name": f"t{i}", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}} for i in range(3)]
TURN_ERRORS = {"cancelled", "toolExecutorError", "maxToolCallsExceeded", "maxRoundTripsExceeded", "providerError", "wallClockTimeoutExceeded"}


def random_script(rng: random.Random) -> list[dict[str, Any]]:
    """One turn's worth of script items: some tool-call round trips, then text
    (sometimes a stall, so cancels and the wall clock have something to stop)."""
    items: list[dict[str, Any]] = []
    for _ in range(rng.randint(0, 3)):
        calls = [{"name": rng.choice(["t0", "t1", "t2", "nope"]), "arguments": {"n": rng.randint(0, 9)}} for _ in range(rng.randint(1, 3))]
        item: dict[str, Any] = {"toolCalls": calls}
        if rng.random() < 0.5:
            item["text"] = ["thinking ", "aloud"]
        items.append(item)
    last: dict[str, Any] = {"text": [f"answer {rng.randint(0, 99)} "] * rng.randint(1, 4)}
    if rng.random() < 0.2:
        last["stall"] = True
    items.append(last)
    return items


def check_history(entries: list[dict[str, Any]]) -> None:
    """Every toolOutput answers a call made before it; ids are unique."""
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)), ids
    open_calls: set[str] = set()
    for entry in entries:
        if entry["type"] == "toolCalls":
            open_calls.update(call["callId"] for call in entry["calls"])
        elif entry["type"] == "toolOutput":
            assert entry["callId"] in open_calls, f"orphaned output {entry}"
            open_calls.discard(entry["callId"])


@pytest.mark.parametrize("seed", [int(s) for s in os.environ.get("AGENTRPC_STRESS_SEEDS", "1,2,3").split(",")])
async def test_random_conversations_keep_the_contract(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    turns = 25
    script: list[dict[str, Any]] = []
    for _ in range(turns):
        script += random_script(rng)
    seqs: list[int] = []
    outcomes: list[str] = []

    async with Client.spawn(binary=BINARY, cwd=tmp_path, request_timeout=30) as client:
        async def tool_call(params: dict[str, Any]) -> dict[str, Any]:
            roll = rng.random()
            if roll < 0.1:
                await asyncio.sleep(0.05)  # a slow tool, so cancels can land while it runs
            if roll < 0.45:
                return {"outcome": "ok", "content": f"did {params['name']}", "undo": {"call": params["callId"]}}
            if roll < 0.6:
                return {"outcome": rng.choice(["failed", "denied", "conflict"]), "content": "no"}
            if roll < 0.7:
                raise AgentRPCError(-32000, "tool crashed", {"kind": "toolCrashed"})
            return {"outcome": "ok", "content": {"n": params["arguments"].get("n")}}

        client.on_request("tool/call", tool_call)
        client.on_request("tool/undo", lambda params: {})

        events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        def on_event(params: dict[str, Any]) -> None:
            seqs.append(params["seq"])
            events.put_nowait(params["event"])

        client.on_notification("session/event", on_event)

        async def until_turn_event(count: int) -> bool:
            """Waits for the running turn's `count`-th event; False if it ended first."""
            seen = 0
            while True:
                event = await asyncio.wait_for(events.get(), timeout=20)
                if event["type"] == "turnEnded":
                    return False
                seen += 1
                if seen >= count:
                    return True

        async def until_turn_ended() -> None:
            while (await asyncio.wait_for(events.get(), timeout=20))["type"] != "turnEnded":
                pass
        session = await client.open_session(
            model={"provider": "scripted", "script": script}, tools=TOOLS,
            limits={"maxToolCalls": 6, "maxRoundTrips": 4, "wallClockSeconds": 2, "toolTimeoutSeconds": 2},
            transcript_error_policy=rng.choice(["keepCompleted", "revert", "preserve"]))
        for _ in range(turns):
            while not events.empty():
                events.get_nowait()
            send = asyncio.create_task(session.send(f"go {rng.randint(0, 999)}"))
            action = rng.random()
            # Cancels land at a random event of the turn, not after a guessed delay.
            still_running = action < 0.4 and await until_turn_event(rng.randint(1, 8))
            if still_running and action < 0.25:
                await session.cancel()
            elif still_running:
                send.cancel()  # $/cancelRequest on the send id
            try:
                await asyncio.wait_for(send, timeout=20)
                outcomes.append("completed")
            except asyncio.CancelledError:
                outcomes.append("withdrawn")
            except AgentRPCError as error:
                assert error.kind in TURN_ERRORS, error
                outcomes.append(error.kind)
            if still_running:
                await until_turn_ended()
            state = await session.state()
            assert not state.is_running
            transcript = await session.transcript()
            check_history(transcript.entries)
            if rng.random() < 0.2 and transcript.entries:
                keep = transcript.ids[rng.randrange(len(transcript.ids))]
                try:
                    await session.mutate_transcript([{"op": "truncateAfter", "id": keep}])
                except AgentRPCError as error:
                    # Cutting between a call and its output is refused, never applied.
                    assert error.kind == "invalidTranscript"
                check_history((await session.transcript()).entries)
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "seq must rise by one with no gaps"
        # The run must have exercised more than the happy path.
        assert "completed" in outcomes and len(set(outcomes)) >= 3, outcomes
