"""``agentrpc acp``'s permissions mean what they show, and its permission modes
(``ask``, ``auto-edit``, ``read-only``, ``full-access``) hold: through the real
binary with the official ACP SDK as the editor, every frame checked against the
ACP schema (acp_check.py)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import McpServerStdio

from conftest import requires_real  # type: ignore[import-not-found]
from test_acp import CALC_MCP_SERVER, WAIT, Editor, agent, scripted  # type: ignore[import-not-found]
from test_acp_workspace import NONE, call, model_tools, output  # type: ignore[import-not-found]

pytestmark = requires_real

WRITE_TOOLS = {"edit_file", "write_file", "run_command"}


async def go(conn: Any, session_id: str, text: str = "go") -> Any:
    return await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=[text_block(text)]), WAIT)


def asked(editor: Editor) -> list[str]:
    return [a["toolCall"]["toolCallId"] for a in editor.called("request_permission")]


async def test_an_edit_that_cannot_apply_fails_before_any_permission_request(tmp_path: Path) -> None:
    editor = Editor({"/work/project/a.txt": "one two\n"})
    config = scripted({"toolCalls": [call("call_missing", "edit_file", path="a.txt", old_text="three", new_text="3"),
                                     call("call_twice", "edit_file", path="a.txt", old_text="o", new_text="0"),
                                     call("call_nofile", "edit_file", path="b.txt", old_text="x", new_text="y")]},
                      {"text": ["ok"]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
        assert (await go(conn, session.session_id)).stop_reason == "end_turn"
    # Nobody was asked about an edit that could not be made (the card would have had no diff).
    assert asked(editor) == []
    assert "old_text does not occur in a.txt" in output(editor, "call_missing")
    assert "old_text occurs 2 times in a.txt" in output(editor, "call_twice")
    assert "cannot read b.txt" in output(editor, "call_nofile")
    for call_id in ("call_missing", "call_twice", "call_nofile"):
        assert editor.statuses(call_id)[-1] == "failed"
    assert not editor.called("write_text_file") and editor.files["/work/project/a.txt"] == "one two\n"


class ChangingEditor(Editor):
    """An editor whose file changes while the user looks at the permission card."""

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        self.files["/work/project/a.txt"] = "one two, changed meanwhile\n"
        return await super().request_permission(session_id, tool_call, options, **kwargs)


async def test_an_approved_edit_whose_file_changed_meanwhile_is_not_applied(tmp_path: Path) -> None:
    editor = ChangingEditor({"/work/project/a.txt": "one two\n"})
    config = scripted({"toolCalls": [call("call_e", "edit_file", path="a.txt", old_text="two", new_text="2")]}, {"text": ["ok"]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
        assert (await go(conn, session.session_id)).stop_reason == "end_turn"
    (card,) = editor.called("request_permission")
    assert card["toolCall"]["content"][0]["oldText"] == "one two\n"
    # What the user approved is not what would be written now: nothing is written.
    assert "changed after the user approved" in output(editor, "call_e")
    assert editor.files["/work/project/a.txt"] == "one two, changed meanwhile\n"


@pytest.mark.parametrize("how", ["load", "resume"])
async def test_allow_always_and_reject_always_hold_in_another_process(tmp_path: Path, how: str) -> None:
    store = tmp_path / "store"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    first = Editor()
    first.permission_answers = ["allow_always", "reject_always"]
    config = scripted({"toolCalls": [call("call_w1", "write_file", path="a.txt", content="v1"),
                                     call("call_r1", "run_command", command="touch", args=["ran1"])]},
                      {"text": ["one"]})
    async with agent(tmp_path, config, first, capabilities=NONE, store=store) as (conn, _):
        session = await asyncio.wait_for(conn.new_session(cwd=str(workspace), mcp_servers=[]), WAIT)
        await go(conn, session.session_id)
    assert asked(first) == ["call_w1", "call_r1"]
    assert (workspace / "a.txt").read_text() == "v1" and not (workspace / "ran1").exists()
    # Another process: neither tool asks again; the write runs, the command is refused.
    second = Editor()
    later = scripted({"toolCalls": [call("call_w2", "write_file", path="a.txt", content="v2"),
                                    call("call_r2", "run_command", command="touch", args=["ran2"])]},
                     {"text": ["two"]})
    async with agent(tmp_path, later, second, capabilities=NONE, store=store) as (conn, _):
        if how == "load":
            await asyncio.wait_for(conn.load_session(cwd=str(workspace), session_id=session.session_id, mcp_servers=[]), WAIT)
        else:
            await asyncio.wait_for(conn.resume_session(cwd=str(workspace), session_id=session.session_id, mcp_servers=[]), WAIT)
        await go(conn, session.session_id)
    assert asked(second) == []
    assert (workspace / "a.txt").read_text() == "v2"
    assert not (workspace / "ran2").exists() and second.statuses("call_r2") == ["pending", "failed"]
    assert "rejected every call of run_command" in output(second, "call_r2")


async def test_modes_ask_auto_edit_full_access(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    turn = lambda n: {"toolCalls": [call(f"call_e{n}", "write_file", path="a.txt", content=f"v{n}"),  # noqa: E731
                                    call(f"call_c{n}", "run_command", command="touch", args=[f"ran{n}"])]}
    config = scripted(turn(1), {"text": ["-"]}, turn(2), {"text": ["-"]}, turn(3), {"text": ["-"]})
    editor = Editor()
    async with agent(tmp_path, config, editor, capabilities=NONE) as (conn, _):
        session = await asyncio.wait_for(conn.new_session(cwd=str(workspace), mcp_servers=[]), WAIT)
        assert session.modes.current_mode_id == "ask"
        assert [m.id for m in session.modes.available_modes] == ["ask", "auto-edit", "read-only", "full-access"]
        mode = [o for o in session.config_options if o.id == "mode"][0]
        assert mode.category == "mode" and mode.current_value == "ask" and [o.value for o in mode.options] == [
            "ask", "auto-edit", "read-only", "full-access"]
        await go(conn, session.session_id)
        assert asked(editor) == ["call_e1", "call_c1"]
        # Set through session modes: the config option follows, and the editor hears of it.
        await asyncio.wait_for(conn.set_session_mode(session_id=session.session_id, mode_id="auto-edit"), WAIT)
        update = [u for u in editor.updates if u["sessionUpdate"] == "config_option_update"][-1]
        assert [o["currentValue"] for o in update["configOptions"] if o["id"] == "mode"] == ["auto-edit"]
        await go(conn, session.session_id)
        assert asked(editor) == ["call_e1", "call_c1", "call_c2"]
        # Set through the config option: session modes follow.
        changed = await asyncio.wait_for(conn.set_config_option(session_id=session.session_id, config_id="mode", value="full-access"), WAIT)
        assert [o.current_value for o in changed.config_options if o.id == "mode"] == ["full-access"]
        assert {"sessionUpdate": "current_mode_update", "currentModeId": "full-access"} in editor.updates
        await go(conn, session.session_id)
        assert asked(editor) == ["call_e1", "call_c1", "call_c2"]
        with pytest.raises(RequestError) as bad:
            await asyncio.wait_for(conn.set_session_mode(session_id=session.session_id, mode_id="yolo"), WAIT)
        assert bad.value.code == -32602 and "read-only" in str(bad.value)
    assert (workspace / "a.txt").read_text() == "v3"
    assert all((workspace / f"ran{n}").exists() for n in (1, 2, 3))


async def test_read_only_offers_no_tool_that_writes_and_the_mode_is_stored(tmp_path: Path) -> None:
    store = tmp_path / "store"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("alpha")
    dump = tmp_path / "requests.jsonl"
    config = scripted({"text": ["-"]}, {"toolCalls": [call("call_r", "read_file", path="a.txt"), call("call_w", "write_file", path="a.txt", content="changed")]},
                      {"text": ["-"]})
    editor = Editor()
    # An MCP tool that does not say it only reads is not offered either.
    unannotated = CALC_MCP_SERVER.replace(', "annotations": {"readOnlyHint": True}', "")
    assert unannotated != CALC_MCP_SERVER
    calc = McpServerStdio(name="calc", command=sys.executable, args=["-c", unannotated], env=[])
    async with agent(tmp_path, config, editor, "--dump-requests", str(dump), capabilities=NONE, store=store) as (conn, _):
        session = await asyncio.wait_for(conn.new_session(cwd=str(workspace), mcp_servers=[calc]), WAIT)
        await go(conn, session.session_id, "before")
        await asyncio.wait_for(conn.set_session_mode(session_id=session.session_id, mode_id="read-only"), WAIT)
        await go(conn, session.session_id)
    before, *offered = model_tools(dump)
    assert WRITE_TOOLS | {"mcp__calc__add"} <= set(before)
    assert offered and all(not (WRITE_TOOLS | {"mcp__calc__add"}) & set(tools) and {"read_file", "list_files", "search"} <= set(tools) for tools in offered)
    assert output(editor, "call_r") == "alpha"
    assert editor.statuses("call_w") == ["pending", "failed"] and "no tool named 'write_file'" in output(editor, "call_w")
    assert (workspace / "a.txt").read_text() == "alpha" and asked(editor) == []
    # The mode is stored with the session.
    async with agent(tmp_path, scripted({"text": ["-"]}), Editor(), capabilities=NONE, store=store) as (conn, _):
        loaded = await asyncio.wait_for(conn.load_session(cwd=str(workspace), session_id=session.session_id, mcp_servers=[]), WAIT)
        assert loaded.modes.current_mode_id == "read-only"
        assert [o.current_value for o in loaded.config_options if o.id == "mode"] == ["read-only"]


async def test_session_set_model_is_the_model_option(tmp_path: Path) -> None:
    editor = Editor()
    config = scripted({"text": ["default."]}, fast=[{"text": ["fast."]}])
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
        raw = conn._conn  # the SDK no longer has set_session_model: the unstable method left the schema
        assert await asyncio.wait_for(raw.send_request("session/set_model", {"sessionId": session.session_id, "modelId": "fast"}), WAIT) == {}
        await go(conn, session.session_id)
        with pytest.raises(RequestError) as bad:
            await asyncio.wait_for(raw.send_request("session/set_model", {"sessionId": session.session_id, "modelId": "gpt-9"}), WAIT)
        assert bad.value.code == -32602 and bad.value.data["field"] == "modelId"
        listed = await asyncio.wait_for(conn.set_config_option(session_id=session.session_id, config_id="model", value="fast"), WAIT)
        assert [o.current_value for o in listed.config_options if o.id == "model"] == ["fast"]
    assert editor.text() == "fast."


async def test_a_session_loaded_with_a_parked_turn_asks_the_pending_permission_again_and_goes_on(tmp_path: Path) -> None:
    """acp.session.onDisconnect "park": the editor goes away while a write waits
    for permission; a new agent process loads the session, asks the same
    permission again after the load's answer and, once allowed, writes and ends
    the turn (docs/acp.md, "Parked turns")."""
    store = tmp_path / "store"
    config = {**scripted(
        {"toolCalls": [{"id": "call_w", "name": "write_file", "arguments": {"path": "a.txt", "content": "new"}}]},
        {"text": ["Wrote it."]},
    ), "acp": {"session": {"onDisconnect": "park"}}}
    first = Editor({"/work/project/a.txt": "old"})
    first.permission_answers = [None]  # the user walks away with the editor
    async with agent(tmp_path, config, first, store=store) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
        running = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block("write")]))
        async with asyncio.timeout(WAIT):
            await first.permission_asked.wait()
    running.cancel()
    assert not first.called("write_text_file")

    second = Editor({"/work/project/a.txt": "old"})
    async with agent(tmp_path, config, second, store=store) as (conn, cwd):
        await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[]), WAIT)
        try:
            await second.wait_for(lambda: "Wrote it." in second.text())
        except TimeoutError:
            raise AssertionError((second.calls, second.updates)) from None
    (asked,) = second.called("request_permission")
    assert asked["toolCall"]["toolCallId"] == "call_w"
    assert second.files["/work/project/a.txt"] == "new"
    assert second.statuses("call_w")[-1] == "completed"
