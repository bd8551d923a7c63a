"""``agentrpc acp`` and the images of tool results through the real binary with
the official ACP SDK: ``session/load`` replays a tool's image as the live
``tool_call_update`` showed it (an ``image`` content block after the text,
read from the store with ``session/getMedia``), and a load whose image is no
longer in the store shows the note and goes on. Every frame is checked against
the ACP schema (acp_check.py)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import sys
from pathlib import Path
from typing import Any

from acp import text_block
from acp.schema import McpServerStdio

from conftest import requires_real  # type: ignore[import-not-found]
from test_acp import WAIT, Editor, agent, scripted  # type: ignore[import-not-found]

pytestmark = requires_real

#: A 1x1 PNG (red).
PIXEL_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
PIXEL_SHA = hashlib.sha256(base64.b64decode(PIXEL_B64)).hexdigest()

#: A stdio MCP server (stdlib only) whose read-only tool answers a text and an image.
SCREEN_MCP_SERVER = """
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m: continue
    if m["method"] == "initialize": r = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "screen", "version": "1"}}
    elif m["method"] == "tools/list": r = {"tools": [{"name": "screenshot", "description": "Takes a screenshot.", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]}
    elif m["method"] == "tools/call": r = {"content": [{"type": "text", "text": "the screen:"}, {"type": "image", "mimeType": "image/png", "data": "%s"}]}
    else: r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
""" % PIXEL_B64


def last_update(editor: Editor, call_id: str) -> dict[str, Any]:
    """The call's final ``tool_call_update`` (completed or failed)."""
    return [u for u in editor.tool_updates(call_id) if u.get("status") in ("completed", "failed")][-1]


def blocks(update: dict[str, Any]) -> list[dict[str, Any]]:
    return [item["content"] for item in update["content"] if item["type"] == "content"]


async def test_a_load_replays_a_tools_image_as_the_live_update_showed_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    config = scripted({"toolCalls": [{"id": "call_s", "name": "mcp__screen__screenshot", "arguments": {}}]}, {"text": ["A red pixel."]})
    live = Editor()
    async with agent(tmp_path, config, live, store=store) as (conn, cwd):
        server = McpServerStdio(name="screen", command=sys.executable, args=["-c", SCREEN_MCP_SERVER], env=[])
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[server]), WAIT)
        answer = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("what is on the screen?")]), WAIT)
        assert answer.stop_reason == "end_turn"
    shown = last_update(live, "call_s")
    assert blocks(shown)[-1] == {"type": "image", "data": PIXEL_B64, "mimeType": "image/png"}
    assert (store / f"{session.session_id}.media" / PIXEL_SHA).exists()

    # Another process loads it: the same blocks, the image read from the store.
    loaded = Editor()
    async with agent(tmp_path, scripted({"text": ["-"]}), loaded, store=store) as (conn, cwd):
        await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[]), WAIT)
    replayed = last_update(loaded, "call_s")
    assert replayed["status"] == "completed"
    assert blocks(replayed) == blocks(shown)

    # The file gone (removed by hand): the load goes on, and the call shows its note only.
    (store / f"{session.session_id}.media" / PIXEL_SHA).unlink()
    without = Editor()
    async with agent(tmp_path, scripted({"text": ["-"]}), without, "--log-level", "warn", store=store) as (conn, cwd):
        await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[]), WAIT)
    note = last_update(without, "call_s")
    assert blocks(note) == blocks(shown)[:-1]
    assert "image data not shown" in blocks(note)[0]["text"]
    assert "shows its note only" in (tmp_path / "agent-stderr.log").read_text()
