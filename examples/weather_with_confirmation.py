"""Tools that need the user's yes: the built-in flow, then an on_confirm callback.

Runs offline on the built-in *scripted* provider: a deterministic stand-in
that replays the script below, not a language model.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentrpc import (
    Client,
    ConfirmationCall,
    ConfirmationRequested,
    ToolCallFinished,
    scripted,
    tool,
)


@tool(annotations={"read_only": True})
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    return {"city": city, "sky": "rain", "celsius": 11}


@tool(confirmation="always")
def order_umbrellas(city: str, quantity: int = 1) -> str:
    """Order umbrellas delivered to a city. Costs money, so it asks first."""
    return f"{quantity} umbrella(s) on the way to {city}"


def model() -> dict[str, Any]:
    return scripted(  # or a model name from agentrpc.json, e.g. "gpt"
        {"text": ["Checking the sky. "], "toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": ["Rain. Ordering umbrellas. "],
         "toolCalls": [{"name": "order_umbrellas", "arguments": {"city": "Paris", "quantity": 10}}]},
        {"text": ["Ten was too many; one then. "],
         "toolCalls": [{"name": "order_umbrellas", "arguments": {"city": "Paris"}}]},
        {"text": ["It rains in Paris; one umbrella is on its way."]},
    )


def policy(arguments: dict[str, Any]) -> tuple[bool, str | None]:
    """The user's answer: small orders only."""
    if arguments.get("quantity", 1) <= 2:
        return True, None
    return False, "no more than two umbrellas"


async def with_events() -> None:
    """Built-in flow: a ConfirmationRequested event, answered with session.confirm()."""
    async with Client.spawn() as client:
        session = await client.open_session(model=model(), tools=[get_weather, order_umbrellas])
        stream = session.stream("Will I need an umbrella in Paris?")
        async for event in stream:
            if isinstance(event, ConfirmationRequested):
                approve, reason = policy(event.arguments)
                print(f"  ? {event.name}({event.arguments}) -> {'yes' if approve else 'no'}")
                await session.confirm(event.call_id, approve=approve, reason=reason)
            elif isinstance(event, ToolCallFinished):
                print(f"  {event.name}: {event.outcome}: {event.content}")
        assert stream.result is not None
        print("agent:", stream.result.text)


async def with_callback() -> None:
    """on_confirm: the client declares confirmations "request" and the callback decides."""

    def on_confirm(call: ConfirmationCall) -> tuple[bool, str | None]:
        print(f"  ? {call.name}({call.arguments})")
        return policy(call.arguments)

    async with Client.spawn(on_confirm=on_confirm) as client:
        session = await client.open_session(model=model(), tools=[get_weather, order_umbrellas])
        result = await session.send("Will I need an umbrella in Paris?")
        outputs = (await session.transcript()).of_type("toolOutput")
        for output in outputs:
            print(f"  {output['name']}: {output['outcome']}: {output['content']}")
        print("agent:", result.text)


async def main() -> None:
    print("[scripted provider: a deterministic stand-in, not a language model]")
    print("-- with events and session.confirm()")
    await with_events()
    print("-- with an on_confirm callback")
    await with_callback()


if __name__ == "__main__":
    asyncio.run(main())
