"""A real MCP server built with the ``mcp`` package from PyPI, for agentrpc's
MCP tests: ``MCPServer`` in mcp 2.x, ``FastMCP`` in mcp 1.x (whichever the
interpreter running this file has).

    python mcp_sdk_server.py                 # stdio
    python mcp_sdk_server.py http PORT       # streamable HTTP on 127.0.0.1:PORT/mcp

``MCP_TEST_PID_FILE``, when set, receives the process id (the orphan test).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import anyio
from pydantic import BaseModel, Field

try:  # mcp 2.x
    from mcp.server.mcpserver import Context, MCPServer as Server
    from mcp_types import ToolAnnotations

    SDK = "MCPServer"
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context, FastMCP as Server  # type: ignore[no-redef]
    from mcp.types import ToolAnnotations  # type: ignore[no-redef]

    SDK = "FastMCP"

server: Any = Server("agentrpc-test")

#: The hints of a tool that only reads: it never asks for confirmation.
READS = ToolAnnotations(readOnlyHint=True)
#: The hints of a tool that changes something but destroys nothing.
CHANGES = ToolAnnotations(readOnlyHint=False, destructiveHint=False)


@server.tool(annotations=READS)
def echo(text: str) -> str:
    """Repeats the text."""
    return f"echo: {text}"


class Sum(BaseModel):
    total: int


@server.tool(annotations=READS)
def add(a: int, b: int) -> Sum:
    """Adds two integers (structured output)."""
    return Sum(total=a + b)


@server.tool(annotations=READS)
def fail(why: str) -> str:
    """Always fails: the SDK answers isError true."""
    raise ValueError(why)


@server.tool(annotations=READS)
async def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    await anyio.sleep(seconds)
    return "slept"


@server.tool(annotations=CHANGES)
def crash() -> str:
    """Ends the server process mid-call."""
    os._exit(3)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def wipe() -> str:
    """A destructive tool (confirmation by default)."""
    return "wiped"


@server.tool()
def write(text: str) -> str:
    """Writes the text somewhere (no annotations: the MCP defaults make it destructive)."""
    return f"wrote {text}"


@server.tool(annotations=CHANGES)
def count(label: str) -> str:
    """Appends the label to the file $MCP_TEST_COUNT_FILE: the test counts how often each call ran."""
    with open(os.environ["MCP_TEST_COUNT_FILE"], "a") as f:
        f.write(label + "\n")
    return f"counted {label}"


def extra() -> str:
    """Added at run time by grow."""
    return "extra ran"


@server.tool(annotations=CHANGES)
async def grow(ctx: Context) -> str:
    """Adds the tool 'extra' and says the tool list changed."""
    server.add_tool(extra, name="extra", annotations=READS)
    # Handshake era: on the session; 2026-07-28 (mcp 2.x): on the client's
    # subscriptions/listen stream (each is dropped where it does not apply).
    await ctx.session.send_tool_list_changed()
    if hasattr(ctx, "notify_tools_changed"):
        await ctx.notify_tools_changed()
    return "grown"


@server.tool(annotations=READS)
def locate(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    query: str,
    limit: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Limit"})] = 10,
    exact: Annotated[bool, Field(json_schema_extra={"x-mcp-header": "Exact"})] = False,
) -> str:
    """Runs a query in a region. Its region, limit and exact are ``x-mcp-header``
    arguments: over 2026-07-28 streamable HTTP, the mcp 2.x server refuses a call
    whose Mcp-Param-* headers do not match them (HeaderMismatch)."""
    return f"{query} in {region} (limit {limit}, exact {exact})"


@server.tool(annotations=READS)
def sdk() -> str:
    """Which server class this is."""
    return SDK


if __name__ == "__main__":
    pid_file = os.environ.get("MCP_TEST_PID_FILE")
    if pid_file:
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        if SDK == "MCPServer":
            server.run("streamable-http", port=int(sys.argv[2]))
        else:
            server.settings.port = int(sys.argv[2])
            server.run("streamable-http")
    else:
        server.run()
