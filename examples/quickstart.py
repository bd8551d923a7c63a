"""A conversation with a tool call, streamed as it arrives.

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

from agentrpc import Client, TextDelta, ToolCallFinished, ToolCallStarted, scripted, tool


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    # The tool runs here, in the client: the server only asks for it.
    return {"city": city, "celsius": 18, "sky": "sunny"}


SCRIPTED_MODEL = scripted(
    {"text": ["Let me check ", "the weather in Paris."],
     "toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
    {"text": ["It is ", "18 °C and sunny ", "in Paris."], "usage": {"inputTokens": 42, "outputTokens": 9}},
    model="scripted-demo",
)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", help="a model name from agentrpc.json (or `openai` / `anthropic` from an API key)")
    parser.add_argument("--config", help="the agentrpc.json to read models from")
    parser.add_argument("--small-model", action="store_true",
                        help="force the tool call, then answer without tools (tiny local models loop otherwise)")
    parser.add_argument("prompt", nargs="?", default="What's the weather in Paris?")
    args = parser.parse_args()
    if args.model:
        model: Any = args.model
        print(f"[model: {args.model}]")
    else:
        model = SCRIPTED_MODEL
        print("[model: the built-in scripted provider — an offline stand-in replaying a fixed script, "
              "not a language model]")

    profiles: dict[str, Any] | None = None
    if args.small_model:
        # Dynamic profiles: `lookup` forces the tool; its output switches to `answer`, which has none.
        profiles = {"selector": "phase", "cases": {
            "lookup": {"tools": ["get_weather"], "options": {"toolChoice": {"tool": "get_weather"}},
                       "hooks": {"onToolOutput": [{"set": {"phase": "answer"}}]}},
            "answer": {"instructions": ["Answer in one sentence from the tool result."],
                       "options": {"toolCallingMode": "disallowed"}},
        }}
    async with Client.spawn(args=["--config", args.config] if args.config else ()) as client:
        session = await client.open_session(
            model=model, tools=[get_weather], profiles=profiles,
            properties={"phase": "lookup"} if profiles else None)
        print(f"you: {args.prompt}\nagent: ", end="", flush=True)
        stream = session.stream(args.prompt)
        async for event in stream:
            if isinstance(event, TextDelta):
                print(event.delta, end="", flush=True)
            elif isinstance(event, ToolCallStarted):
                print(f"\n  → tool {event.name}({json.dumps(event.arguments)})", flush=True)
            elif isinstance(event, ToolCallFinished):
                print(f"  ← {event.outcome}: {json.dumps(event.content)}", flush=True)
        result = stream.result
        assert result is not None
        print(f"\n[{result.round_trips} round trips, {result.tool_calls} tool call(s), "
              f"{result.usage.input_tokens} in / {result.usage.output_tokens} out tokens]")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
