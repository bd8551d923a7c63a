"""``agentrpc acp`` as a coding agent in any editor: the same coding task done
through the real binary by an editor that declares no capabilities (the front end
reads, edits, lists, searches and runs commands itself, in the workspace on
disk) and by one that offers ``fs`` and ``terminal`` (the work goes through the
editor). Every frame is checked against the ACP schema (acp_check.py), which
also fails any ``fs/*`` or ``terminal/*`` request to an editor that did not declare it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities

from conftest import is_gone, requires_real  # type: ignore[import-not-found]
from test_acp import WAIT, Editor, agent, scripted  # type: ignore[import-not-found]

pytestmark = requires_real

NONE = ClientCapabilities()
FULL = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True)

APP = "def greet(name):\n    return 'Hello, ' + name\n"


def workspace(tmp_path: Path) -> Path:
    """A small project: a module, a test, a .gitignore that leaves build/ and *.log out."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "build").mkdir()
    (root / "src" / "app.py").write_text(APP)
    (root / "test_app.py").write_text("from src.app import greet\nassert greet('x') == 'Hello, x'\n")
    (root / "build" / "app.py").write_text("def greet(name): pass  # a build product\n")
    (root / "debug.log").write_text("def greet in a log\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    return root


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def output(editor: Editor, call_id: str) -> str:
    last = editor.tool_updates(call_id)[-1]
    assert isinstance(last["rawOutput"], dict)
    return str(last["rawOutput"]["output"])


TASK = scripted(
    {"toolCalls": [call("call_ls", "list_files", pattern="*.py"), call("call_grep", "search", pattern=r"def greet\(")]},
    {"toolCalls": [call("call_read", "read_file", path="src/app.py")]},
    {"toolCalls": [call("call_edit", "edit_file", path="src/app.py", old_text="'Hello, '", new_text="'Hi, '")]},
    {"toolCalls": [call("call_run", "run_command", command="python3", args=["-c", "print('ran here')"])]},
    {"text": ["Done."]},
    {"text": ["Still here."]},
)


@pytest.mark.parametrize("caps", ["none", "fs and terminal"])
async def test_a_whole_coding_task_in_any_editor(tmp_path: Path, caps: str) -> None:
    root = workspace(tmp_path)
    cwd = str(root)
    files = {str(root / "src" / "app.py"): APP}
    editor = Editor(files)
    editor.command_output = "ran in the editor\n"
    async with agent(tmp_path, TASK, editor, capabilities=NONE if caps == "none" else FULL) as (conn, _):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), WAIT)
        answer = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("Say Hi instead of Hello")]), WAIT)
        assert answer.stop_reason == "end_turn"
        edited = editor.files.get(str(root / "src" / "app.py")) if caps != "none" else (root / "src" / "app.py").read_text()
        assert edited == APP.replace("'Hello, '", "'Hi, '")
        # /undo: the last turn goes, and the file it edited gets its old text back.
        undone = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("/undo")]), WAIT)
        assert undone.stop_reason == "end_turn" and undone.field_meta["agentrpc"]["command"] == "undo"
        assert [u["status"] for u in undone.field_meta["agentrpc"]["undos"]] == ["undone"]
        assert editor.text().endswith("1 of 1 edit undone.")
        restored = editor.files.get(str(root / "src" / "app.py")) if caps != "none" else (root / "src" / "app.py").read_text()
        assert restored == APP
        # The session goes on; nothing to undo is said so.
        assert (await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("still there?")]), WAIT)).stop_reason == "end_turn"

    # list_files and search always run in the front end, on disk, and leave out what .gitignore does.
    assert output(editor, "call_ls").splitlines() == ["src/app.py", "test_app.py"]
    assert output(editor, "call_grep").splitlines() == ["src/app.py:1: def greet(name):"]
    assert editor.tool_updates("call_ls")[0]["kind"] == "search"
    for call_id in ("call_ls", "call_grep", "call_read", "call_edit", "call_run"):
        assert editor.statuses(call_id) in (["pending", "in_progress", "completed"], ["pending", "in_progress", "in_progress", "completed"]), call_id
    assert output(editor, "call_read") == APP

    # The edit asked first, with the diff; the command asked with its command line.
    edit_asked, run_asked = editor.called("request_permission")
    diff = {"type": "diff", "path": str(root / "src" / "app.py"), "oldText": APP, "newText": APP.replace("'Hello, '", "'Hi, '")}
    assert edit_asked["toolCall"]["content"] == [diff]
    assert run_asked["toolCall"]["kind"] == "execute" and "$ python3 -c print('ran here')" in json.dumps(run_asked["toolCall"]["content"])
    assert diff in editor.tool_updates("call_edit")[-1]["content"]

    if caps == "none":
        # Nothing went to the editor but updates and permission requests (the frame check
        # fails any fs/* or terminal/*); the front end did the work on disk.
        assert {name for name, _ in editor.calls} == {"request_permission"}
        assert "ran here" in output(editor, "call_run") and "[exit code 0]" in output(editor, "call_run")
    else:
        # Reads, the edit, its undo and the command went through the editor, as before.
        assert [c["path"] for c in editor.called("read_text_file")] == [str(root / "src" / "app.py")] * 3
        assert [w["content"] for w in editor.called("write_text_file")] == [diff["newText"], APP]
        assert (root / "src" / "app.py").read_text() == APP, "the editor's buffer was written, not the disk"
        assert [c["command"] for c in editor.called("terminal/create")] == ["python3"]
        assert "ran in the editor" in output(editor, "call_run")


async def test_a_cancelled_command_takes_its_whole_process_group_within_a_second(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    script = "sleep 60 & echo $! > bg.pid; echo $$ > sh.pid; wait"
    config = scripted({"toolCalls": [call("call_long", "run_command", command="sh", args=["-c", script])]}, {"text": ["Next."]})
    config["acp"] = {"permissions": []}
    editor = Editor()
    async with agent(tmp_path, config, editor, capabilities=NONE) as (conn, _):
        session = await asyncio.wait_for(conn.new_session(cwd=str(root), mcp_servers=[]), WAIT)
        running = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block("run it")]))
        async with asyncio.timeout(WAIT):
            while not ((root / "bg.pid").exists() and (root / "sh.pid").exists() and (root / "sh.pid").read_text().strip()):
                await asyncio.sleep(0.05)
        pids = [int((root / name).read_text()) for name in ("sh.pid", "bg.pid")]
        assert not any(is_gone(pid) for pid in pids)
        await conn.cancel(session_id=session.session_id)
        cancelled_at = time.monotonic()
        assert (await asyncio.wait_for(running, WAIT)).stop_reason == "cancelled"
        # The shell and what it started in the background: gone within a second of the cancel.
        while not all(is_gone(pid) for pid in pids):
            assert time.monotonic() - cancelled_at < 1.0, f"still running a second after the cancel: {[p for p in pids if not is_gone(p)]}"
            await asyncio.sleep(0.02)
        assert editor.statuses("call_long") == ["pending", "in_progress", "failed"]
        answer = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("next")]), WAIT)
        assert answer.stop_reason == "end_turn"


async def test_a_command_is_bounded_by_the_tool_timeout_and_its_output_by_the_tail_kept(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    config = scripted({"toolCalls": [call("call_slow", "run_command", command="sleep 30"),
                                     call("call_loud", "run_command", command="python3", args=["-c", "print('x' * 200000 + 'END')"]),
                                     call("call_missing", "run_command", command="no-such-program-here"),
                                     call("call_fails", "run_command", command="sh", args=["-c", "echo oops >&2; exit 3"])]},
                      {"text": ["ok"]})
    # 3 s: long enough for the other commands (a python3 start on a loaded machine), far below sleep 30.
    config["acp"] = {"permissions": [], "session": {"limits": {"toolTimeoutSeconds": 3}}}
    editor = Editor()
    async with agent(tmp_path, config, editor, capabilities=NONE) as (conn, _):
        session = await asyncio.wait_for(conn.new_session(cwd=str(root), mcp_servers=[]), WAIT)
        started = time.monotonic()
        assert (await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]), WAIT)).stop_reason == "end_turn"
        assert time.monotonic() - started < 20
    slow = output(editor, "call_slow")
    assert editor.statuses("call_slow")[-1] == "failed" and "did not finish within" in slow and "was killed" in slow
    loud = output(editor, "call_loud")
    assert "[earlier output was cut" in loud and loud.endswith("END\n[exit code 0]") and len(loud) < 70_000
    assert editor.statuses("call_missing")[-1] == "failed" and "cannot run no-such-program-here" in output(editor, "call_missing")
    fails = output(editor, "call_fails")
    assert editor.statuses("call_fails")[-1] == "failed" and "oops" in fails and "[exit code 3]" in fails


async def test_local_files_stay_inside_the_workspace(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (root / "link").symlink_to(outside)
    (root / "linkdir").symlink_to(tmp_path)
    config = scripted({"toolCalls": [call("call_link", "read_file", path="link"),
                                     call("call_through", "write_file", path="linkdir/new.txt", content="x"),
                                     call("call_dotdot", "read_file", path="../secret.txt"),
                                     call("call_list", "list_files", path=".."),
                                     call("call_search", "search", pattern="secret")]},
                      {"text": ["ok"]})
    config["acp"] = {"permissions": []}
    editor = Editor()
    async with agent(tmp_path, config, editor, capabilities=NONE) as (conn, _):
        session = await asyncio.wait_for(conn.new_session(cwd=str(root), mcp_servers=[]), WAIT)
        assert (await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]), WAIT)).stop_reason == "end_turn"
    for call_id in ("call_link", "call_through", "call_dotdot", "call_list"):
        assert editor.statuses(call_id)[-1] == "failed", call_id
        assert "outside the workspace" in output(editor, call_id), call_id
    assert not (tmp_path / "new.txt").exists()
    # The search does not follow the link out of the workspace either.
    assert output(editor, "call_search") == "No matches."


async def test_list_files_and_search_are_bounded(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    many = root / "many"
    many.mkdir()
    for i in range(30):
        (many / f"f{i:02}.txt").write_text("needle\n" * 3)
    config = scripted({"toolCalls": [call("call_ls", "list_files", path="many", limit=5),
                                     call("call_grep", "search", pattern="needle", path="many", limit=4),
                                     call("call_bad", "search", pattern="(unclosed"),
                                     call("call_case", "search", pattern="DEF GREET", ignore_case=True, glob="*.py")]},
                      {"text": ["ok"]})
    editor = Editor()
    async with agent(tmp_path, config, editor, capabilities=NONE) as (conn, _):
        session = await asyncio.wait_for(conn.new_session(cwd=str(root), mcp_servers=[]), WAIT)
        assert (await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]), WAIT)).stop_reason == "end_turn"
    listed = output(editor, "call_ls").splitlines()
    assert listed[:5] == [f"many/f{i:02}.txt" for i in range(5)] and "more files not shown" in listed[5]
    found = output(editor, "call_grep").splitlines()
    assert found[:4] == ["many/f00.txt:1: needle", "many/f00.txt:2: needle", "many/f00.txt:3: needle", "many/f01.txt:1: needle"]
    assert "more matches not shown" in found[4]
    assert editor.statuses("call_bad")[-1] == "failed" and "not a valid regular expression" in output(editor, "call_bad")
    assert output(editor, "call_case").splitlines() == ["src/app.py:1: def greet(name):"]


def model_tools(dump: Path) -> list[list[str]]:
    """The tool names each model request carried, in order (from --dump-requests)."""
    return [sorted(t["name"] for t in json.loads(line)["request"].get("tools") or []) for line in dump.read_text().splitlines()]


@pytest.mark.parametrize("how", ["resume", "load"])
async def test_capabilities_belong_to_the_connection(tmp_path: Path, how: str) -> None:
    """A session made by an editor with fs and terminal, resumed by one with none:
    nothing goes to the second editor that it did not declare (the frame check fails
    any fs/* or terminal/*), its reads and commands run in the front end, and the model
    is offered the same tools in both."""
    root = workspace(tmp_path)
    store = tmp_path / "store"
    dump = tmp_path / "requests.jsonl"
    config = scripted({"toolCalls": [call("call_1", "read_file", path="src/app.py")]}, {"text": ["Read."]})
    config["acp"] = {"permissions": []}
    # Each process plays its model's script from the start.
    later = scripted({"toolCalls": [call("call_2", "read_file", path="src/app.py"), call("call_3", "run_command", command="echo from the front end")]},
                     {"text": ["Again."]})
    later["acp"] = {"permissions": []}
    first = Editor({str(root / "src" / "app.py"): "the editor's buffer"})
    async with agent(tmp_path, config, first, "--dump-requests", str(dump), capabilities=FULL, store=store) as (conn, _):
        session = await asyncio.wait_for(conn.new_session(cwd=str(root), mcp_servers=[]), WAIT)
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("read")]), WAIT)
    assert output(first, "call_1") == "the editor's buffer"
    second = Editor()
    async with agent(tmp_path, later, second, "--dump-requests", str(dump), capabilities=NONE, store=store) as (conn, _):
        if how == "resume":
            await asyncio.wait_for(conn.resume_session(cwd=str(root), session_id=session.session_id, mcp_servers=[]), WAIT)
        else:
            await asyncio.wait_for(conn.load_session(cwd=str(root), session_id=session.session_id, mcp_servers=[]), WAIT)
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("again")]), WAIT)
    assert output(second, "call_2") == APP, "read from disk: the second editor reads no files"
    assert "from the front end" in output(second, "call_3")
    assert {name for name, _ in second.calls} <= {"request_permission"}
    offered = model_tools(dump)
    assert len(offered) == 4 and all(tools == offered[0] for tools in offered)
    assert {"read_file", "edit_file", "write_file", "run_command", "list_files", "search"} <= set(offered[0])
