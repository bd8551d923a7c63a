"""A real MCP server built with ``fastmcp`` 4.x from PyPI, for agentrpc's MCP
tests of progress, images, resources, prompts and elicitation.

    python mcp_fastmcp_server.py                 # stdio
    python mcp_fastmcp_server.py http PORT       # streamable HTTP on 127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import base64
import sys
from dataclasses import dataclass

from fastmcp import Context, FastMCP
from fastmcp.prompts import Message
from fastmcp.utilities.types import Image
from mcp.types import ToolAnnotations

server = FastMCP("agentrpc-fastmcp-test")
READS = ToolAnnotations(readOnlyHint=True)

#: A 1x1 PNG (red), the image tools return.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")


@server.tool(annotations=READS)
async def steps(count: int, ctx: Context) -> str:
    """Reports progress `count` times as fast as it can, then answers."""
    for i in range(1, count + 1):
        await ctx.report_progress(progress=i, total=count, message=f"step {i} of {count}")
    return f"{count} steps"


@server.tool(annotations=READS)
def screenshot():  # type: ignore[no-untyped-def]  # a list of blocks; an annotation would ask for structured output
    """A text and an image (a 1x1 PNG)."""
    return ["the screen:", Image(data=PIXEL, format="png")]


@server.tool(annotations=READS)
def link() -> dict[str, str]:
    """Names a resource the model can read with read_resource."""
    return {"see": "note://readme"}


@server.resource("note://readme", mime_type="text/plain", description="The readme note.")
def readme() -> str:
    return "Read me: agentrpc reads resources."


@server.resource("note://big", mime_type="text/plain", description="A note over the output bound.")
def big() -> str:
    return "x" * (2 * 1024 * 1024)


#: The form ``book`` asks the user to fill in.
WHEN = {"type": "object", "properties": {"date": {"type": "string", "description": "YYYY-MM-DD"}}, "required": ["date"]}


@dataclass
class When:
    date: str


@server.tool(annotations=READS)
async def book(ctx: Context):  # type: ignore[no-untyped-def]  # a text, or an InputRequiredResult (2026-07-28)
    """Asks the user for a date, and books it: ``ctx.elicit`` on the handshake
    era; on 2026-07-28, which has no server-to-client requests, an
    ``InputRequiredResult`` asking the same form, read back on the retry."""
    from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

    if ctx.request_context.protocol_version == "2026-07-28":
        answer = (ctx.input_responses or {}).get("when")
        if answer is None:
            form = ElicitRequestFormParams(mode="form", message="Which date?", requested_schema=WHEN)
            return InputRequiredResult(input_requests={"when": ElicitRequest(params=form)})
        action, content = answer.action, answer.content or {}
    else:
        result = await ctx.elicit("Which date?", response_type=When)
        action = result.action
        content = {"date": result.data.date} if action == "accept" else {}
    return f"booked {content['date']}" if action == "accept" else f"not booked ({action})"


@server.prompt(description="Asks for a review of a file.")
def review(path: str, focus: str = "bugs") -> str:
    return f"Please review {path}, looking for {focus}."


@server.prompt(description="Shows the answer style with an example exchange.")
def example(topic: str) -> list[Message]:
    return [Message(f"Explain {topic} briefly."), Message(f"{topic}: in one line.", role="assistant"),
            Message(f"Now explain {topic} in the same style.")]


@server.prompt(description="Drafts release notes.")
def release_notes(version: str) -> str:
    return f"Draft the release notes for {version}."


@server.prompt(description="Never comes (until cancelled).")
async def slow() -> str:
    import asyncio

    await asyncio.Event().wait()
    return "never"


@server.prompt(description="Refuses every request.")
def broken(reason: str) -> str:
    raise ValueError(f"broken on purpose: {reason}")


# Offered once ``unlock`` ran (a server whose prompts change while it runs).
server.disable(names={"release_notes"}, components={"prompt"})


@server.tool(annotations=READS)
async def unlock(ctx: Context) -> str:
    """Offers the prompt release_notes, and says so with notifications/prompts/list_changed (only)."""
    from mcp_types import PromptListChangedNotification

    server.enable(names={"release_notes"}, components={"prompt"})
    await ctx.send_notification(PromptListChangedNotification())
    return "unlocked"


@dataclass
class Name:
    name: str


@server.tool(annotations=READS)
async def greet(ctx: Context) -> str:
    """Asks the user for a name (elicitation, form mode), then greets."""
    answer = await ctx.elicit("What is your name?", response_type=Name)
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("http", host="127.0.0.1", port=int(sys.argv[2]), show_banner=False)
    else:
        server.run(show_banner=False)
