"""A real conversation end to end: spawn agentrpc, give the model a tool,
stream the turn as it arrives.

Which model answers: ``--model NAME`` from agentrpc.json if given; otherwise
the built-in *scripted* provider, a deterministic offline stand-in that
replays a fixed script (it is not a language model, and says so below).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from agentrpc import Client

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "inputSchema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}

SCRIPTED_MODEL = {
    "provider": "scripted",
    "model": "scripted-demo",
    "script": [
        {"text": ["Let me check ", "the weather in Paris."], "toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": ["It is ", "18 °C and sunny ", "in Paris."], "usage": {"inputTokens": 42, "outputTokens": 9}},
    ],
}


def get_weather(arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool runs here, in the client: the server only asks for it."""
    return {"outcome": "ok", "content": {"city": arguments["city"], "celsius": 18, "sky": "sunny"}}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", help="a model name from agentrpc.json")
    parser.add_argument("prompt", nargs="?", default="What's the weather in Paris?")
    args = parser.parse_args()

    async with Client.spawn() as client:
        client.on_request("tool/call", lambda params: get_weather(params["arguments"]))
        if args.model:
            model: Any = args.model
            print(f"[model: {args.model} from agentrpc.json]")
        else:
            model = SCRIPTED_MODEL
            print("[model: the built-in scripted provider — an offline stand-in replaying a fixed script, not a language model]")
        session = await client.open_session(model=model, tools=[WEATHER_TOOL])

        events = session.events()  # subscribe before sending, so nothing is missed

        async def show_events() -> None:
            async for note in events:
                event = note.params["event"]
                kind = event["type"]
                if kind == "textDelta":
                    print(event["delta"], end="", flush=True)
                elif kind == "toolCallStarted":
                    print(f"\n  → tool {event['name']}({json.dumps(event['arguments'])})", flush=True)
                elif kind == "toolCallFinished":
                    print(f"  ← {event['outcome']}: {json.dumps(event['content'])}", flush=True)
                elif kind == "turnEnded":
                    return

        printer = asyncio.create_task(show_events())
        print(f"you: {args.prompt}\nagent: ", end="", flush=True)
        result = await session.send(args.prompt)
        await asyncio.wait_for(printer, timeout=5)
        usage = result["usage"]
        print(f"\n[turn {result['turnId']}: {result['roundTrips']} round trips, {result['toolCalls']} tool call(s), "
              f"{usage['inputTokens']} in / {usage['outputTokens']} out tokens]")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
