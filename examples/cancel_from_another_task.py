"""Stopping a turn from another task, both ways.

1. session.cancel(): cooperative. The turn stops at its next checkpoint
   (between tool calls, while waiting for the model); a tool already running
   finishes first. The send raises Cancelled, with the partial text.
2. Cancelling the task that awaits send(): immediate. The client withdraws
   the request ($/cancelRequest), which ends even a model that has stalled.

Runs offline on the built-in *scripted* provider: a deterministic stand-in
that replays the scripts below, not a language model.
"""

from __future__ import annotations

import asyncio

from agentrpc import Cancelled, Client, TextDelta, ToolCallStarted, TurnEnded, scripted, tool

stop_pressed = asyncio.Event()


@tool
async def fetch_page(url: str) -> str:
    """Fetch a web page."""
    await stop_pressed.wait()  # stands in for slow work; done once the user pressed stop
    return f"<html>{url}</html>"


async def cooperative(client: Client) -> None:
    session = await client.open_session(
        model=scripted({"text": ["Reading two pages. "], "toolCalls": [
            {"name": "fetch_page", "arguments": {"url": "a.example"}},
            {"name": "fetch_page", "arguments": {"url": "b.example"}},
        ]}),
        tools=[fetch_page],
    )
    async with session.watch() as events:
        turn = asyncio.create_task(session.send("Summarise a.example and b.example"))
        async for event in events:
            if isinstance(event, ToolCallStarted):
                print("user presses stop while", event.name, event.arguments, "runs")
                print("  session.cancel() ->", await session.cancel())
                stop_pressed.set()
                break
        try:
            await turn
        except Cancelled as error:
            print("  send raised Cancelled; partial text:", repr(error.partial_text))
    outputs = (await session.transcript()).of_type("toolOutput")
    print("  tool outputs kept:", [o["content"] for o in outputs])


async def immediate(client: Client) -> None:
    session = await client.open_session(model=scripted({"text": ["Let me think about"], "stall": True}))
    async with session.watch() as events:
        turn = asyncio.create_task(session.send("A hard question"))
        async for event in events:
            if isinstance(event, TextDelta):
                print("the model stalls after", repr(event.delta), "- cancelling the task")
                turn.cancel()
            elif isinstance(event, TurnEnded):
                print("  turnEnded:", event.status, "/", type(event.error).__name__)
                break
    await asyncio.wait({turn})
    print("  task cancelled:", turn.cancelled())
    state = await session.state()
    print("  running:", state.is_running, "| current text:", repr(state.current_text))


async def main() -> None:
    print("[scripted provider: a deterministic stand-in, not a language model]")
    async with Client.spawn() as client:
        await cooperative(client)
        await immediate(client)


if __name__ == "__main__":
    asyncio.run(main())
