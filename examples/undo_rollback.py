"""Side effects that roll back when a turn fails.

A tool returns Undoable(value, undo=callable). If the turn later fails (here:
a tool raises), the server asks the client to undo every recorded call,
newest first, and the send raises ToolExecutorError with the tool's
exception as its __cause__. A tool that returns Failed(...) instead lets the
model see the problem and carry on.

Runs offline on the built-in *scripted* provider: a deterministic stand-in
that replays the script below, not a language model.
"""

from __future__ import annotations

import asyncio

from agentrpc import Client, ToolExecutorError, Undoable, scripted, tool

files: dict[str, str] = {}


@tool
def write_file(path: str, text: str) -> Undoable:
    """Write a text file."""
    previous = files.get(path)
    files[path] = text

    def restore() -> None:
        print(f"  undo: restore {path}")
        if previous is None:
            del files[path]
        else:
            files[path] = previous

    return Undoable(f"wrote {len(text)} characters to {path}", undo=restore)


@tool
def publish(path: str) -> str:
    """Publish a file."""
    raise PermissionError(f"no permission to publish {path}")


async def main() -> None:
    print("[scripted provider: a deterministic stand-in, not a language model]")
    files["index.md"] = "old home page"
    async with Client.spawn() as client:
        session = await client.open_session(
            model=scripted(
                {"toolCalls": [{"name": "write_file", "arguments": {"path": "index.md", "text": "new home"}}]},
                {"toolCalls": [{"name": "write_file", "arguments": {"path": "about.md", "text": "about us"}}]},
                {"toolCalls": [{"name": "publish", "arguments": {"path": "index.md"}}]},
            ),
            tools=[write_file, publish],
        )
        try:
            await session.send("Update the site and publish it.")
        except ToolExecutorError as error:
            print(f"turn failed in {error.tool_name}: {error.__cause__!r}")
    print("files afterwards:", files)


if __name__ == "__main__":
    asyncio.run(main())
