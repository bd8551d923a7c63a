"""One session, three modes: brainstorm, planning and reviewing.

Each mode is a profile with its own instructions, tools, model and options
(session.json); the models are named in agentrpc.json. The client switches the
mode with session/setProperties between turns, and the brainstorming model
hands the conversation over to the planner in the middle of a turn.

The models are the built-in *scripted* provider: a deterministic, offline
stand-in that replays the scripts in agentrpc.json. It is not a language model;
point the profiles' "model" at real ones in agentrpc.json to talk to one.

    PYTHONPATH=clients/python/src python3 examples/three-modes/run.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentrpc import Client

HERE = Path(__file__).resolve().parent

CONVERSATION: list[tuple[str | None, str, dict[str, Any] | None]] = [
    # (mode to switch to first, or None; what the user says; call-site options)
    (None, "Ideas for our team offsite?", None),
    ("planning", "Plan the cooking class.", None),
    ("brainstorm", "Actually, we prefer the hike.", None),
    ("reviewing", "Review the plan.", {"temperature": 0.3}),
]


def run_tool(params: dict[str, Any]) -> dict[str, Any]:
    """Client tools run here; the server only asks for them."""
    if params["name"] == "save_idea":
        return {"outcome": "ok", "content": f"saved: {params['arguments']['idea']}"}
    return {"outcome": "failed", "content": f"unknown tool {params['name']}"}


def describe(event: dict[str, Any]) -> str | None:
    """One line for the events worth showing; text deltas are printed inline."""
    kind = event["type"]
    if kind == "profileActivated":
        previous = event.get("previous")
        return f"[profile {event['profile']}" + (f", was {previous}]" if previous else "]")
    if kind == "requestStarted":
        return f"[round trip {event['roundTrip']}: {event['profile']} → model {event['model']}]"
    if kind == "cacheInvalidated":
        return f"[prompt cache invalidated: {event['reason']}]"
    if kind == "toolCallStarted":
        return f"[tool {event['name']}({json.dumps(event['arguments'])})]"
    if kind == "toolCallFinished":
        return f"[→ {event['outcome']}: {event['content']}]"
    return None


async def main() -> int:
    session_config = json.loads((HERE / "session.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        dump = Path(tmp) / "requests.jsonl"
        args = ["serve", "--config", str(HERE / "agentrpc.json"), "--dump-requests", str(dump)]
        async with Client.spawn(args=args) as client:
            client.on_request("tool/call", run_tool)
            session = await client.open_session(session_config)
            print(f"[session {session.id}, starting in profile {session.active_profile}]")
            for mode, text, options in CONVERSATION:
                if mode is not None:
                    changed = await session.set_properties({"mode": mode})
                    print(f"\n[client sets mode={mode}; active profile is now {changed.active_profile}]")
                events = session.events()

                async def show(events: Any = events) -> None:
                    mid_line = False  # after streamed text that has no newline yet
                    async for note in events:
                        event = note.params["event"]
                        if event["type"] == "textDelta":
                            print(("agent: " if not mid_line else "") + event["delta"], end="", flush=True)
                            mid_line = True
                        elif event["type"] == "turnEnded":
                            if mid_line:
                                print()
                            return
                        elif (line := describe(event)) is not None:
                            print(("\n" if mid_line else "") + f"  {line}", flush=True)
                            mid_line = False

                printer = asyncio.create_task(show())
                print(f"\nyou: {text}", flush=True)
                result = await session.send(text, options=options)
                await asyncio.wait_for(printer, timeout=5)
                events.close()
                print(f"  [{result.stop_reason}: {result.round_trips} round trip(s), "
                      f"{result.usage.input_tokens} in / {result.usage.output_tokens} out tokens]")

        # What each model request carried (--dump-requests): the point of profiles.
        print("\nrequests sent:")
        for line in dump.read_text().splitlines():
            entry = json.loads(line)
            request = entry["request"]
            tools = ", ".join(tool["name"] for tool in request["tools"]) or "none"
            last_line = request["instructions"].splitlines()[-1] if request["instructions"] else ""
            turn = entry["turnId"].rsplit("-", 1)[-1]
            print(f"  turn {turn}.{entry['roundTrip']} {entry['profile']:<10} model={request['model']:<12} "
                  f"options={json.dumps(request['options'], sort_keys=True)} tools=[{tools}] "
                  f"messages={len(request['messages'])} instructions end: {last_line!r}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
