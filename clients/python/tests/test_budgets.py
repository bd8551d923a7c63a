"""Budgets (docs/protocol.md, "Budgets"), through the real binary with the
scripted provider, whose scripted `usage` is what the limits count: each of
the four limits, per turn (`limits`) and per session (`budget`), ends the turn
with `budgetExceeded` at the first round trip that passes it; the session's
totals survive a restart; a cost limit needs a price."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentrpc import AgentRPCError, Client

from conftest import real_binary

BINARY = real_binary()
TIMEOUT = 30.0

pytestmark = pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN")

#: Per measure: the limit, and one round trip's usage (two of them pass the limit, one does not).
MEASURES: dict[str, tuple[float, dict[str, int], float]] = {
    "maxInputTokens": (100, {"inputTokens": 60, "outputTokens": 1}, 120),
    "maxOutputTokens": (100, {"inputTokens": 1, "outputTokens": 60}, 120),
    "maxTotalTokens": (100, {"inputTokens": 30, "outputTokens": 30}, 120),
    # At a dollar per million tokens, 60 tokens cost 0.00006.
    "maxCostUSD": (0.0001, {"inputTokens": 30, "outputTokens": 30}, 0.00012),
}
PRICING = {"inputPerMTok": 1, "outputPerMTok": 1}


def model(script: list[dict[str, Any]]) -> dict[str, Any]:
    return {"provider": "scripted", "model": "scripted", "script": script, "pricing": PRICING}


async def round_trips_and_error(client: Client, session: Any, prompt: str, **options: Any) -> tuple[int, Any]:
    """Runs a turn that must fail; returns how many round trips it started and the error."""
    events = client.notifications("session/event")
    with pytest.raises(AgentRPCError) as failure:
        await session.send(prompt, **options)
    started = 0
    async for note in events:
        event = note.params["event"]
        if event["type"] == "requestStarted":
            started += 1
        if event["type"] == "turnEnded":
            break
    return started, failure.value


@pytest.mark.parametrize("name", list(MEASURES))
async def test_a_turn_limit_ends_the_turn_at_the_round_trip_that_passes_it(name: str) -> None:
    limit, usage, used = MEASURES[name]
    script = [
        {"text": ["Looking. "], "toolCalls": [{"name": "lookup", "id": "c1"}], "usage": usage},
        {"text": ["The answer"], "usage": usage},
        {"text": ["never sent"], "usage": usage},
    ]
    async with Client.spawn(binary=BINARY, args=["--ephemeral"], request_timeout=TIMEOUT) as client:
        client.on_request("tool/call", lambda params: {"outcome": "ok", "content": "42"})
        session = await client.open_session(model=model(script), tools=[{"name": "lookup"}])
        started, error = await round_trips_and_error(client, session, "q", options={"limits": {name: limit}})
        assert started == 2
        assert error.kind == "budgetExceeded" and error.code == -32023
        assert error.data["scope"] == "turn" and error.data["name"] == name and error.data["limit"] == limit
        assert error.data["used"] == pytest.approx(used)
        # The answer streamed so far is kept with the error, as with every limit.
        assert error.data["partialText"] == "The answer"
        # The tokens were spent: they count in the session's totals.
        totals = (await session.state()).raw["usageTotals"]
        assert totals["inputTokens"] == 2 * usage["inputTokens"] and totals["outputTokens"] == 2 * usage["outputTokens"]


@pytest.mark.parametrize("name", list(MEASURES))
async def test_a_session_budget_ends_the_turn_whose_round_trip_passes_it(name: str) -> None:
    limit, usage, used = MEASURES[name]
    script = [{"text": [f"answer {i}"], "usage": usage} for i in range(3)]
    async with Client.spawn(binary=BINARY, args=["--ephemeral"], request_timeout=TIMEOUT) as client:
        session = await client.open_session(model=model(script), budget={name: limit})
        first = await session.send("one")
        assert first["message"]["text"] == "answer 0"
        started, error = await round_trips_and_error(client, session, "two")
        assert started == 1
        assert error.kind == "budgetExceeded" and error.data["scope"] == "session" and error.data["name"] == name
        assert error.data["used"] == pytest.approx(used)
        # Spent: the next turn makes no request at all.
        started, error = await round_trips_and_error(client, session, "three")
        assert started == 0 and error.kind == "budgetExceeded" and error.data["used"] == pytest.approx(used)


async def test_the_session_totals_survive_a_restart(tmp_path: Path) -> None:
    """The budget counts what the session used before the server restarted."""
    store = tmp_path / "store"
    script = [{"text": ["ok"], "usage": {"inputTokens": 40, "outputTokens": 20}}]
    async with Client.spawn(binary=BINARY, args=["--store", str(store)], request_timeout=TIMEOUT) as client:
        session = await client.open_session(model=model(script * 3), budget={"maxTotalTokens": 100})
        await session.send("one")
        session_id = session.id
    async with Client.spawn(binary=BINARY, args=["--store", str(store)], request_timeout=TIMEOUT) as client:
        session = await client.resume_session(session_id)
        state = (await session.state()).raw
        assert state["usageTotals"]["inputTokens"] == 40 and state["usageTotals"]["outputTokens"] == 20
        assert state["usageTotals"]["costUSD"] == pytest.approx(0.00006)
        started, error = await round_trips_and_error(client, session, "two")
        assert started == 1 and error.data["scope"] == "session" and error.data["used"] == 120


async def test_a_cost_limit_needs_a_price() -> None:
    """Without `pricing` the cost cannot be known: the request is refused
    before it is sent, naming the limit."""
    script = [{"text": ["ok"], "usage": {"inputTokens": 1, "outputTokens": 1}}]
    unpriced = {"provider": "scripted", "model": "scripted", "script": script}
    async with Client.spawn(binary=BINARY, args=["--ephemeral"], request_timeout=TIMEOUT) as client:
        session = await client.open_session(model=unpriced, budget={"maxCostUSD": 1})
        started, error = await round_trips_and_error(client, session, "one")
        assert started == 0 and error.kind == "invalidConfiguration" and error.data["field"] == "budget.maxCostUSD"


@pytest.mark.parametrize(("where", "value", "field"), [
    ("budget", {"maxTotalTokens": 0}, "budget.maxTotalTokens"),
    ("budget", {"maxCostUSD": -1}, "budget.maxCostUSD"),
    ("limits", {"maxInputTokens": 0}, "limits.maxInputTokens"),
])
async def test_a_limit_must_be_positive(where: str, value: dict[str, Any], field: str) -> None:
    async with Client.spawn(binary=BINARY, args=["--ephemeral"], request_timeout=TIMEOUT) as client:
        with pytest.raises(AgentRPCError) as failure:
            await client.open_session(model=model([]), **{where: value})
        assert failure.value.kind == "invalidConfiguration" and failure.value.data["field"] == field
