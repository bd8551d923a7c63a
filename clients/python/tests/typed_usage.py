"""Typed use of the client, checked by ``mypy --strict`` (scripts/test) and run
by tests/test_typing.py against the real binary.

``assert_type`` fails the type check when the client's annotations lose a
type (a ``@tool`` that became ``Any``, a ``generate`` that returns ``Any``,
an event field that is a plain ``str`` instead of its ``Literal``).
"""

from __future__ import annotations

import dataclasses
import os
from typing import assert_type

from agentrpc import (
    AgentRPCError,
    Client,
    ProviderError,
    Session,
    StopReason,
    TextDelta,
    ToolCallFinished,
    ToolOutcome,
    TurnEnded,
    TurnResult,
    TurnStatus,
    UndoOutcome,
    scripted,
    tool,
)
from agentrpc import sync


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(on_exception="report")
async def shout(word: str) -> str:
    """Upper-case a word."""
    return word.upper()


@dataclasses.dataclass
class City:
    name: str
    population: int


SCRIPT = scripted(
    {"toolCalls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
    {"text": ["3"]},
    {"text": ['{"name": "Paris", "population": 2100000}']},
)


async def run_async(binary: str, cwd: str) -> list[str]:
    """One turn with a tool, streamed, then structured output; returns what it saw."""
    assert_type(add(1, 2), int)
    seen: list[str] = []
    async with Client.spawn(binary, cwd=cwd) as client:
        session = await client.open_session(model=SCRIPT, tools=[add, shout])
        assert_type(session, Session)
        stream = session.stream("What is 1 + 2?")
        async for event in stream:
            if isinstance(event, TextDelta):
                seen.append(event.delta)
            elif isinstance(event, ToolCallFinished):
                outcome = assert_type(event.outcome, ToolOutcome)
                seen.append(outcome)
            elif isinstance(event, TurnEnded):
                status = assert_type(event.status, TurnStatus)
                undo = assert_type(event.undo, UndoOutcome)
                seen.extend([status, undo])
        result = stream.result
        assert result is not None
        assert_type(result, TurnResult)
        seen.append(assert_type(result.stop_reason, StopReason))
        city = await session.generate("A city?", City)
        seen.append(assert_type(city, City).name)
    return seen


def run_sync(binary: str, cwd: str) -> str:
    """The blocking client: ``generate`` returns the schema's type."""
    with sync.Client.spawn(binary, cwd=cwd) as client:
        session = client.open_session(model=scripted({"text": ['{"name": "Rome", "population": 2800000}']}))
        city = session.generate("A city?", City)
        assert_type(city, City)
        try:
            session.send("no script left")
        except ProviderError as exc:
            assert_type(exc, ProviderError)
        except AgentRPCError:
            raise
        return city.name


if __name__ == "__main__":  # pragma: no cover - a manual run
    import asyncio
    import tempfile

    from agentrpc import find_binary

    with tempfile.TemporaryDirectory() as scratch:
        print(asyncio.run(run_async(os.fspath(find_binary()), scratch)))
        print(run_sync(os.fspath(find_binary()), scratch))
