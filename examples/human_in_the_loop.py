"""The user in the loop: steer a running turn, approve an edited call once or for
the session, answer the model's question, and undo a completed turn.

Runs offline on the built-in *scripted* provider: a deterministic stand-in
that replays the script below, not a language model.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentrpc import (
    Client,
    ConfirmationRequested,
    SteeringApplied,
    ToolCallFinished,
    Undoable,
    UserQuestion,
    scripted,
    tool,
)

files: dict[str, str] = {}
reading = asyncio.Event()
go_on = asyncio.Event()


@tool
async def read(path: str) -> str:
    """Read a file."""
    reading.set()
    await go_on.wait()  # the user types while this runs
    return files.get(path, "(empty)")


@tool(confirmation="always")
def write(path: str, text: str) -> Undoable:
    """Write a file; asks first, and can be undone."""
    before = files.get(path)
    files[path] = text

    def restore() -> None:
        if before is None:
            files.pop(path, None)
        else:
            files[path] = before

    return Undoable(f"wrote {path}", undo=restore)


def model() -> dict[str, Any]:
    return scripted(  # or a model name from agentrpc.json, e.g. "gpt"
        {"toolCalls": [{"name": "read", "arguments": {"path": "notes.md"}}]},
        {"toolCalls": [{"name": "ask_user", "arguments": {"question": "Title?", "options": ["Notes", "Ideas"]}}]},
        {"toolCalls": [{"name": "write", "arguments": {"path": "/etc/notes.md", "text": "# Ideas"}}]},
        {"toolCalls": [{"name": "write", "arguments": {"path": "notes.md", "text": "# Ideas\n- one"}}]},
        {"toolCalls": [{"name": "write", "arguments": {"path": "notes.md", "text": "# Ideas\n- one\n- two"}}]},
        {"text": ["Saved notes.md with the title Ideas."]},
    )


async def answer(question: UserQuestion) -> str:
    print(f"  model asks: {question.question} {question.options} -> Ideas")
    return "Ideas"


async def main() -> None:
    async with Client.spawn(on_ask_user=answer) as client:
        session = await client.open_session(model=model(), tools=[read, write], ask_user=True)
        turn = session.stream("Tidy notes.md")

        async def type_while_it_reads() -> None:
            await reading.wait()
            turn_id = (await session.state()).turn_id
            await session.steer("Keep it short", expected_turn_id=turn_id)
            go_on.set()

        typing = asyncio.create_task(type_while_it_reads())
        async with turn:
            async for event in turn:
                if isinstance(event, SteeringApplied):
                    print(f"  steering applied: {event.text!r}")
                elif isinstance(event, ConfirmationRequested) and event.arguments["path"].startswith("/"):
                    fixed = {**event.arguments, "path": "notes.md"}
                    print(f"  approve edited: {event.arguments['path']} -> {fixed['path']}")
                    await session.approve(event.call_id, arguments=fixed)
                elif isinstance(event, ConfirmationRequested):
                    rule = await session.approve_for_session(event.call_id, {"path": "notes.*"})
                    assert rule is not None  # the server answers with the rule it added
                    print(f"  approve for the session: {rule.tool} {rule.arguments}")
                elif isinstance(event, ToolCallFinished):
                    print(f"  {event.name}: {event.content}")
        await typing
        print("answer:", turn.result.text if turn.result else None)
        print("files:", files)
        rewound = await session.rewind(turn_id=turn.result.turn_id if turn.result else "", undo=True)
        print("rewind undid", len(rewound.undos), "write(s); files:", files)


if __name__ == "__main__":
    asyncio.run(main())
