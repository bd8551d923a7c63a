"""``agentrpc acp`` driven by an ACP client people install, not by our own test
editor: ``acp-client`` (PyPI), which declares ``fs.readTextFile: false``,
``fs.writeTextFile: false`` and ``terminal: false``, answers permission requests
through a handler, carries a session on with ``session/load``, and answers every
other request the agent sends with ``-32601``. It is stricter than the schema in
one way that matters: anything the agent asks of it but a permission fails.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import REAL_BINARY, requires_real  # type: ignore[import-not-found]
from test_acp import WAIT, scripted  # type: ignore[import-not-found]

acp_client = pytest.importorskip("acp_client")

pytestmark = requires_real

APP = "def greet(name):\n    return 'Hello, ' + name\n"


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def command(tmp_path: Path, config: dict[str, Any], name: str) -> list[str]:
    assert REAL_BINARY is not None
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config))
    return [REAL_BINARY, "acp", "--config", str(path), "--store", str(tmp_path / "store")]


async def test_a_coding_task_then_carried_on_by_a_new_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # acp-client passes the test's environment on: never the machine's local model or keys.
    monkeypatch.setenv("AGENTRPC_LOCAL_MODEL_SCRIPT", str(tmp_path / "no-local-model"))
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "AGENTRPC_CONFIG"):
        monkeypatch.delenv(key, raising=False)
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text(APP)
    first = scripted(
        {"toolCalls": [call("c_ls", "list_files", pattern="*.py"), call("c_read", "read_file", path="app.py")]},
        {"toolCalls": [call("c_edit", "edit_file", path="app.py", old_text="'Hello, '", new_text="'Hi, '")]},
        {"toolCalls": [call("c_run", "run_command", command="python3", args=["-c", "import app; print(app.greet('x'))"])]},
        {"text": ["Done: it says Hi now."]},
    )
    asked: list[dict[str, Any]] = []

    async def permit(request: dict[str, Any]) -> str | None:
        asked.append(request)
        return next(o["optionId"] for o in request["options"] if o["kind"] == "allow_once")

    updates: list[dict[str, Any]] = []
    agent = acp_client.Agent(command(tmp_path, first, "first"), root, permission=permit)
    try:
        answer = await asyncio.wait_for(agent.ask("Say Hi instead of Hello", on_update=updates.append), WAIT)
        session = agent.session
    finally:
        await agent.stop()
    assert answer.endswith("Done: it says Hi now.")
    assert (root / "app.py").read_text() == APP.replace("'Hello, '", "'Hi, '"), "the front end edited the file on disk"

    # Every tool call finished on the client's screen: pending, in_progress, then completed,
    # with rawOutput an object in every update that has one.
    calls = [u for u in updates if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
    for call_id in ("c_ls", "c_read", "c_edit", "c_run"):
        statuses = [u["status"] for u in calls if u["toolCallId"] == call_id and "status" in u]
        assert statuses[0] == "pending" and "in_progress" in statuses and statuses[-1] == "completed", (call_id, statuses)
    assert all(isinstance(u["rawOutput"], dict) for u in calls if "rawOutput" in u)
    ran = [u for u in calls if u["toolCallId"] == "c_run" and "rawOutput" in u][-1]["rawOutput"]["output"]
    assert "Hi, x" in ran

    # The edit and the command asked (ask is the default mode); reading and listing did not.
    assert [r["toolCall"]["toolCallId"] for r in asked] == ["c_edit", "c_run"]
    assert asked[0]["toolCall"]["content"][0]["type"] == "diff"

    # A new process carries the session on (session/load): the client hears the conversation
    # again, and the model sees it (its tool results included) on the next question.
    second = scripted({"text": ["I remember."]})
    replayed: list[dict[str, Any]] = []
    again = acp_client.Agent(command(tmp_path, second, "second"), root, permission=permit, session=session)
    try:
        await asyncio.wait_for(again.start(on_update=replayed.append), WAIT)
        assert again.session == session and not again.fresh
        reply = await asyncio.wait_for(again.ask("Still there?"), WAIT)
    finally:
        await again.stop()
    assert reply == "I remember."
    said = "".join(u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk")
    assert "Say Hi instead of Hello" in said
    replayed_calls = [u for u in replayed if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
    assert {u["toolCallId"] for u in replayed_calls} == {"c_ls", "c_read", "c_edit", "c_run"}
    assert all(isinstance(u["rawOutput"], dict) for u in replayed_calls if "rawOutput" in u)
    assert os.listdir(tmp_path / "store"), "the session was stored"
