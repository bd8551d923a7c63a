"""``agentrpc acp`` driven by the official ACP Python SDK (``agent-client-protocol``)
as an editor would drive it: the SDK spawns the real binary with
``spawn_agent_process`` and this file plays the editor (files, permissions,
terminals), on the scripted provider configured through ``--config``.

Every message the agent writes is checked to be a valid ACP frame (a JSON-RPC
message whose method the editor side knows, ``session/update`` payloads valid
against the SDK's models), and nothing the SDK could not parse may arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from acp import RequestError, spawn_agent_process, text_block
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    DeniedOutcome,
    FileSystemCapabilities,
    KillTerminalResponse,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    SessionNotification,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from acp_check import ACPFrames  # type: ignore[import-not-found]
from conftest import REAL_BINARY, requires_real, until_gone, until_listening  # type: ignore[import-not-found]

pytestmark = requires_real

WAIT = 20.0


class Editor:
    """The editor side: a virtual file system, a permission policy, fake terminals."""

    def __init__(self, files: dict[str, str] | None = None) -> None:
        self.files = dict(files or {})
        self.updates: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        #: Option ids to answer permission requests with, in order; None = the user never answers.
        self.permission_answers: list[str | None] = []
        self.permission_asked = asyncio.Event()
        self.never_answer_reads = False
        self.read_asked = asyncio.Event()
        self.exit_code = 0
        #: What the user fills in an MCP server's form (elicitation/create); None declines.
        self.form_answer: dict[str, Any] | None = None
        self.command_output = ""
        self._update_arrived = asyncio.Event()

    # -- what the agent calls --------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True, mode="json"))
        self._update_arrived.set()

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **_: Any) -> RequestPermissionResponse:
        self.calls.append(("request_permission", {"toolCall": tool_call.model_dump(by_alias=True, exclude_none=True, mode="json"),
                                                  "options": [o.model_dump(by_alias=True, mode="json") for o in options]}))
        self.permission_asked.set()
        answer = self.permission_answers.pop(0) if self.permission_answers else "allow_once"
        if answer is None:
            await asyncio.Event().wait()  # the user walked away; only a cancel ends this
        if answer == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=answer))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **_: Any) -> ReadTextFileResponse:
        self.calls.append(("read_text_file", {"path": path, "line": line, "limit": limit}))
        self.read_asked.set()
        if self.never_answer_reads:
            await asyncio.Event().wait()
        if path not in self.files:
            raise RequestError(-32002, f"no such file: {path}")
        return ReadTextFileResponse(content=self.files[path])

    async def write_text_file(self, session_id: str, path: str, content: str, **_: Any) -> WriteTextFileResponse:
        self.calls.append(("write_text_file", {"path": path, "content": content}))
        self.files[path] = content
        return WriteTextFileResponse()

    async def create_terminal(self, session_id: str, command: str, args: list[str] | None = None, env: Any = None,
                              cwd: str | None = None, output_byte_limit: int | None = None, **_: Any) -> CreateTerminalResponse:
        self.calls.append(("terminal/create", {"command": command, "args": args, "cwd": cwd, "outputByteLimit": output_byte_limit}))
        return CreateTerminalResponse(terminal_id="term-1")

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **_: Any) -> WaitForTerminalExitResponse:
        self.calls.append(("terminal/wait_for_exit", {"terminalId": terminal_id}))
        return WaitForTerminalExitResponse(exit_code=self.exit_code)

    async def terminal_output(self, session_id: str, terminal_id: str, **_: Any) -> TerminalOutputResponse:
        self.calls.append(("terminal/output", {"terminalId": terminal_id}))
        return TerminalOutputResponse(output=self.command_output, truncated=False)

    async def release_terminal(self, session_id: str, terminal_id: str, **_: Any) -> ReleaseTerminalResponse:
        self.calls.append(("terminal/release", {"terminalId": terminal_id}))
        return ReleaseTerminalResponse()

    async def kill_terminal(self, session_id: str, terminal_id: str, **_: Any) -> KillTerminalResponse:
        self.calls.append(("terminal/kill", {"terminalId": terminal_id}))
        return KillTerminalResponse()

    async def create_elicitation(self, message: str, mode: Any, **_: Any) -> Any:
        from acp.schema import AcceptElicitationResponse, DeclineElicitationResponse

        self.calls.append(("elicitation/create", {"message": message, **mode.model_dump(by_alias=True, exclude_none=True, mode="json")}))
        if self.form_answer is None:
            return DeclineElicitationResponse(action="decline")
        return AcceptElicitationResponse(action="accept", content=self.form_answer)

    # -- what the tests look at ------------------------------------------------------

    def called(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == method]

    def kinds(self) -> list[str]:
        return [u["sessionUpdate"] for u in self.updates]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u["content"]["text"] for u in self.updates if u["sessionUpdate"] == kind)

    def tool_updates(self, call_id: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u.get("toolCallId") == call_id]

    def statuses(self, call_id: str) -> list[str]:
        """The statuses a call's updates carried, in order."""
        return [u["status"] for u in self.tool_updates(call_id) if "status" in u]

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT):
            while not predicate():
                self._update_arrived.clear()
                await self._update_arrived.wait()


class FrameCheck:
    """Checks every message the agent writes against the ACP schema (acp_check.py),
    that the SDK's own models parse every update, and that the SDK logged no error."""

    def __init__(self) -> None:
        self.frames = ACPFrames()
        self.problems = self.frames.problems
        self.records: list[logging.LogRecord] = []

    def observe(self, event: StreamEvent) -> None:
        message = event.message
        if event.direction == StreamDirection.OUTGOING:
            self.frames.sent(message)
            return
        self.frames.received(message)
        if message.get("method") == "session/update":
            try:
                SessionNotification.model_validate(message["params"])
            except Exception as exc:  # noqa: BLE001 - reported below
                self.problems.append(f"invalid session/update {message['params']}: {exc}")

    def handler(self) -> logging.Handler:
        check = self

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                # The SDK has no handler for `$/cancel_request` (it logs the notification as unhandled).
                if "$/cancel_request" not in record.getMessage():
                    check.records.append(record)

        handler = Collect(level=logging.ERROR)
        return handler

    def verify(self) -> None:
        assert not self.problems, self.problems
        assert not self.records, [r.getMessage() for r in self.records]


def scripted(*items: dict[str, Any], **models: list[dict[str, Any]]) -> dict[str, Any]:
    """A config file naming the scripted model `s` (and any other scripted models) as default."""
    all_models = {"s": {"provider": "scripted", "script": list(items)}}
    all_models.update({name: {"provider": "scripted", "script": script} for name, script in models.items()})
    return {"models": all_models, "defaultModel": "s"}


@contextlib.asynccontextmanager
async def agent(tmp_path: Path, config: dict[str, Any] | None, editor: Editor, *args: str,
                capabilities: ClientCapabilities | None = None, store: Path | None = None,
                observe: Callable[[StreamEvent], None] | None = None, unstable: bool = False) -> AsyncIterator[tuple[Any, str]]:
    """Spawns `agentrpc acp`, initializes it, and yields (connection, cwd).

    `observe` sees every message as it is read or written (before any handler runs);
    `unstable` lets the editor answer ACP's unstable methods (`elicitation/create`)."""
    assert REAL_BINARY is not None
    argv = ["acp", *args]
    if config is not None:
        path = tmp_path / "agentrpc.json"
        path.write_text(json.dumps(config))
        argv += ["--config", str(path)]
    argv += ["--store", str(store)] if store is not None else ["--ephemeral"]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "AGENTRPC_CONFIG")}
    # Never the machine's local model: these tests pin what the configuration says.
    env["AGENTRPC_LOCAL_MODEL_SCRIPT"] = str(tmp_path / "no-local-model")
    check = FrameCheck()
    handler = check.handler()
    logging.getLogger().addHandler(handler)
    stderr = open(tmp_path / "agent-stderr.log", "ab")  # noqa: SIM115 - closed below
    try:
        observers = [check.observe] + ([observe] if observe is not None else [])
        async with spawn_agent_process(editor, REAL_BINARY, *argv, env=env, cwd=str(tmp_path),
                                       transport_kwargs={"stderr": stderr.fileno()}, observers=observers,
                                       use_unstable_protocol=unstable) as (conn, _process):
            caps = capabilities or ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True)
            await asyncio.wait_for(conn.initialize(protocol_version=1, client_capabilities=caps), WAIT)
            yield conn, "/work/project"
        check.verify()
    finally:
        logging.getLogger().removeHandler(handler)
        stderr.close()


async def new_session(conn: Any, cwd: str, **kwargs: Any) -> Any:
    return await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[], **kwargs), WAIT)


async def prompt(conn: Any, session_id: str, text: str) -> Any:
    return await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=[text_block(text)]), WAIT)


# -- initialize, new, prompt ------------------------------------------------------------


async def test_initialize_answers_version_1_and_the_capabilities(tmp_path: Path) -> None:
    async with agent(tmp_path, scripted(), Editor()) as (conn, _):
        pass
    assert REAL_BINARY is not None
    # A fresh process, asked directly, so the answer is seen as the wire carries it.
    editor = Editor()
    check = FrameCheck()
    env = {**os.environ, "AGENTRPC_LOCAL_MODEL_SCRIPT": str(tmp_path / "none")}
    async with spawn_agent_process(editor, REAL_BINARY, "acp", "--ephemeral", env=env, observers=[check.observe]) as (conn, _):
        answer = await asyncio.wait_for(conn.initialize(protocol_version=3, client_capabilities=ClientCapabilities()), WAIT)
        assert answer.protocol_version == 1
        caps = answer.agent_capabilities
        assert caps is not None and caps.load_session is True
        assert caps.mcp_capabilities is not None and caps.mcp_capabilities.http is True and caps.mcp_capabilities.sse is False
        assert caps.prompt_capabilities is not None and caps.prompt_capabilities.image and caps.prompt_capabilities.embedded_context
        assert caps.session_capabilities is not None
        for name in ("list", "delete", "resume", "close"):
            assert getattr(caps.session_capabilities, name) is not None, name
        assert answer.agent_info is not None and answer.agent_info.name == "agentrpc"
        assert answer.auth_methods, "authMethods say how to provide a key"
        with pytest.raises(RequestError) as second:
            await asyncio.wait_for(conn.initialize(protocol_version=1), WAIT)
        assert second.value.code == -32600
    check.verify()
    refused = FrameCheck()
    async with spawn_agent_process(Editor(), REAL_BINARY, "acp", "--ephemeral", env=env, observers=[refused.observe]) as (conn, _):
        with pytest.raises(RequestError) as old:
            await asyncio.wait_for(conn.initialize(protocol_version=0), WAIT)
        assert old.value.code == -32602 and "protocolVersion" in str(old.value)
    refused.verify()


async def test_new_and_prompt_stream_chunks(tmp_path: Path) -> None:
    editor = Editor()
    config = scripted({"reasoning": ["Let me think."], "text": ["Hel", "lo ", "there."], "usage": {"inputTokens": 5, "outputTokens": 3}},
                      other=[{"text": ["unused"]}])
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        models = [o for o in session.config_options or [] if o.category == "model"]
        assert len(models) == 1 and models[0].current_value == "s"
        assert {o.value for o in models[0].options} == {"s", "other"}
        answer = await prompt(conn, session.session_id, "Hi")
        assert answer.stop_reason == "end_turn"
        assert answer.field_meta["agentrpc"]["usage"] == {"inputTokens": 5, "outputTokens": 3, "contextTokens": 8}
    assert editor.kinds() == ["available_commands_update", "session_info_update",
                              "agent_thought_chunk", "agent_message_chunk", "agent_message_chunk", "agent_message_chunk"]
    assert editor.text() == "Hello there."
    assert editor.text("agent_thought_chunk") == "Let me think."


async def test_no_model_is_auth_required_never_a_hang(tmp_path: Path) -> None:
    async with agent(tmp_path, None, Editor()) as (conn, cwd):
        with pytest.raises(RequestError) as failure:
            await new_session(conn, cwd)
    assert failure.value.code == -32000
    message = str(failure.value)
    assert "OPENAI_API_KEY" in message and "agentrpc.json" in message
    # Toad showed "Failed to initialize agent —" and nothing after: it reads data.details.
    assert failure.value.data["details"] == message


CALC_MCP_SERVER = """
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m: continue
    if m["method"] == "initialize": r = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "calc", "version": "1"}}
    elif m["method"] == "tools/list": r = {"tools": [{"name": "add", "description": "Adds a and b.", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}, "annotations": {"readOnlyHint": True}}]}
    elif m["method"] == "tools/call":
        a = m["params"]["arguments"]
        r = {"content": [{"type": "text", "text": str(a["a"] + a["b"])}]}
    else: r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"""


@contextlib.asynccontextmanager
async def http_mcp_fake(tmp_path: Path) -> AsyncIterator[tuple[int, Path]]:
    """The tests' plain-JSON streamable HTTP MCP server (tests/mcp_http_fake.py), which
    logs what it receives: yields (port, log), once it accepts connections."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "http-requests.jsonl"
    fake = subprocess.Popen([sys.executable, str(Path(__file__).parent / "mcp_http_fake.py"), str(port), str(log)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await until_listening(port, WAIT)
        yield port, log
    finally:
        fake.terminate()
        fake.wait(timeout=WAIT)


async def test_the_editors_mcp_servers_are_started_and_those_that_cannot_be_are_named(tmp_path: Path) -> None:
    import sys

    from acp.schema import HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer

    async with http_mcp_fake(tmp_path) as (port, log):
        editor = Editor()
        config = scripted({"toolCalls": [{"id": "call_m", "name": "mcp__my_calc__add", "arguments": {"a": 2, "b": 3}},
                                         {"id": "call_h", "name": "mcp__remote__echo", "arguments": {"text": "over http"}}]},
                          {"text": ["5."]})
        async with agent(tmp_path, config, editor) as (conn, cwd):
            calc = McpServerStdio(name="my calc", command=sys.executable, args=["-c", CALC_MCP_SERVER], env=[])
            remote = HttpMcpServer(type="http", name="remote", url=f"http://127.0.0.1:{port}/mcp",
                                   headers=[HttpHeader(name="X-Editor", value="from the editor")])
            old = SseMcpServer(type="sse", name="old", url="https://mcp.example.com/sse", headers=[])
            session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[calc, remote, old]), WAIT)
            assert (await prompt(conn, session.session_id, "2 + 3?")).stop_reason == "end_turn"
    # The sse server is not started (mcpCapabilities.sse is false) and says so.
    (not_started,) = session.field_meta["agentrpc"]["mcpServersNotStarted"]
    assert not_started["name"] == "old" and "sse" in not_started["reason"]
    # The stdio and http ones ran the model's calls, through the engine's tool path.
    updates = editor.tool_updates("call_m")
    assert updates[0]["title"] == "add (my_calc)"
    assert updates[-1]["status"] == "completed" and "5" in json.dumps(updates[-1]["rawOutput"])
    remote_updates = editor.tool_updates("call_h")
    assert remote_updates[0]["title"] == "echo (remote)"
    assert remote_updates[-1]["status"] == "completed" and "echo: over http" in json.dumps(remote_updates[-1]["rawOutput"])
    # The editor's header went with every request.
    received = [json.loads(line) for line in log.read_text().splitlines()]
    assert received and all(r["headers"].get("x-editor") == "from the editor" for r in received)
    # Said to the user once, before the first answer.
    assert editor.text() == ("MCP server 'old' is not available: the sse transport is not supported "
                             "(mcpCapabilities says which are).\n\n5.")


# -- tools through the editor -----------------------------------------------------------


async def test_read_then_permission_then_edit_with_a_diff(tmp_path: Path) -> None:
    editor = Editor({"/work/project/src/a.txt": "one\ntwo\n"})
    config = scripted(
        {"text": ["Reading."], "toolCalls": [{"id": "call_read", "name": "read_file", "arguments": {"path": "src/a.txt"}}]},
        {"toolCalls": [{"id": "call_edit", "name": "edit_file", "arguments": {"path": "src/a.txt", "old_text": "two", "new_text": "2"}}]},
        {"text": ["Changed it."]},
    )
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        answer = await prompt(conn, session.session_id, "Change two to 2 in src/a.txt")
    assert answer.stop_reason == "end_turn"
    # The read went to the editor (which sees unsaved buffers), without asking.
    assert editor.called("read_text_file")[0]["path"] == "/work/project/src/a.txt"
    read = editor.tool_updates("call_read")
    assert read[0] == {"sessionUpdate": "tool_call", "toolCallId": "call_read", "title": "Read src/a.txt", "kind": "read",
                       "status": "pending", "rawInput": {"path": "src/a.txt"}, "locations": [{"path": "/work/project/src/a.txt"}]}
    assert read[-1]["status"] == "completed" and read[-1]["rawOutput"] == {"output": "one\ntwo\n"}
    # The edit asked first, showing the diff, with the four kinds of option.
    (asked,) = editor.called("request_permission")
    diff = {"type": "diff", "path": "/work/project/src/a.txt", "oldText": "one\ntwo\n", "newText": "one\n2\n"}
    assert asked["toolCall"]["toolCallId"] == "call_edit" and asked["toolCall"]["content"] == [diff]
    assert sorted(o["kind"] for o in asked["options"]) == ["allow_always", "allow_once", "reject_always", "reject_once"]
    assert editor.files["/work/project/src/a.txt"] == "one\n2\n"
    edit = editor.tool_updates("call_edit")
    assert edit[0]["kind"] == "edit" and edit[0]["status"] == "pending"
    assert edit[-1]["status"] == "completed" and diff in edit[-1]["content"]
    assert editor.text() == "Reading.Changed it."


async def test_edit_that_does_not_match_once_is_a_tool_error_the_model_sees(tmp_path: Path) -> None:
    editor = Editor({"/work/project/a.txt": "x x\n"})
    config = scripted(
        {"toolCalls": [{"id": "call_e", "name": "edit_file", "arguments": {"path": "a.txt", "old_text": "x", "new_text": "y"}}]},
        {"text": ["It matched twice."]},
    )
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        assert (await prompt(conn, session.session_id, "edit")).stop_reason == "end_turn"
    assert editor.files["/work/project/a.txt"] == "x x\n"
    assert not editor.called("write_text_file")
    last = editor.tool_updates("call_e")[-1]
    assert last["status"] == "failed" and "occurs 2 times" in last["rawOutput"]["output"]


async def test_a_command_runs_in_an_editor_terminal(tmp_path: Path) -> None:
    editor = Editor()
    editor.command_output = "all 3 tests passed\n"
    config = scripted(
        {"toolCalls": [{"id": "call_t", "name": "run_command", "arguments": {"command": "make", "args": ["test"]}}]},
        {"text": ["Tests pass."]},
    )
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        assert (await prompt(conn, session.session_id, "run the tests")).stop_reason == "end_turn"
    (created,) = editor.called("terminal/create")
    assert created["command"] == "make" and created["args"] == ["test"] and created["cwd"] == "/work/project"
    assert [name for name, _ in editor.calls if name.startswith("terminal/")] == [
        "terminal/create", "terminal/wait_for_exit", "terminal/output", "terminal/release"]
    (asked,) = editor.called("request_permission")
    assert asked["toolCall"]["kind"] == "execute" and "make test" in json.dumps(asked["toolCall"]["content"])
    updates = editor.tool_updates("call_t")
    assert editor.statuses("call_t") == ["pending", "in_progress", "in_progress", "completed"]
    assert {"type": "terminal", "terminalId": "term-1"} in updates[2]["content"]
    assert updates[-1]["status"] == "completed" and "all 3 tests passed" in updates[-1]["rawOutput"]["output"]


async def test_allow_always_and_reject_always_stand_for_the_session(tmp_path: Path) -> None:
    editor = Editor({"/work/project/a.txt": "a"})
    editor.permission_answers = ["allow_always", "reject_always"]
    write = lambda i: {"id": f"call_w{i}", "name": "write_file", "arguments": {"path": "a.txt", "content": f"v{i}"}}  # noqa: E731
    run = lambda i: {"id": f"call_r{i}", "name": "run_command", "arguments": {"command": "rm", "args": [str(i)]}}  # noqa: E731
    config = scripted({"toolCalls": [write(1)]}, {"toolCalls": [write(2)]}, {"toolCalls": [run(1)]}, {"toolCalls": [run(2)]}, {"text": ["ok"]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        assert (await prompt(conn, session.session_id, "go")).stop_reason == "end_turn"
    # Asked once per tool: the first write (allowed always), the first command (rejected always).
    assert [a["toolCall"]["toolCallId"] for a in editor.called("request_permission")] == ["call_w1", "call_r1"]
    assert editor.files["/work/project/a.txt"] == "v2"
    assert not editor.called("terminal/create")
    assert editor.tool_updates("call_r2")[-1]["status"] == "failed"


async def test_tools_follow_the_editors_capabilities_and_the_configured_permissions(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "listed.txt").write_text("-")
    a = str(workspace / "a.txt")
    editor = Editor({a: "old"})
    config = scripted(
        {"toolCalls": [{"id": "call_w", "name": "write_file", "arguments": {"path": "a.txt", "content": "new"}},
                       {"id": "call_t", "name": "run_command", "arguments": {"command": "ls"}}]},
        {"text": ["ok"]},
    )
    config["acp"] = {"permissions": []}
    # An editor with files but no terminals: the write goes to the editor, the command runs in the front end.
    caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False)
    async with agent(tmp_path, config, editor, capabilities=caps) as (conn, _):
        session = await new_session(conn, str(workspace))
        assert (await prompt(conn, session.session_id, "go")).stop_reason == "end_turn"
    assert not editor.called("request_permission"), "no tool needs permission when acp.permissions is empty"
    assert editor.files[a] == "new" and not (workspace / "a.txt").exists()
    assert not editor.called("terminal/create")
    last = editor.tool_updates("call_t")[-1]
    assert last["status"] == "completed" and "listed.txt" in last["rawOutput"]["output"]


def test_a_mistake_in_the_acp_section_is_named_at_start(tmp_path: Path) -> None:
    import subprocess

    assert REAL_BINARY is not None
    path = tmp_path / "agentrpc.json"
    path.write_text(json.dumps({**scripted(), "acp": {"tools": ["read_file", "format_disk"]}}))
    result = subprocess.run([REAL_BINARY, "acp", "--config", str(path), "--ephemeral"], input="", capture_output=True, text=True, timeout=WAIT)
    assert result.returncode == 2 and result.stdout == ""
    assert "acp.tools[1]" in result.stderr
    # A tool that only reads never asks.
    path.write_text(json.dumps({**scripted(), "acp": {"permissions": ["edit_file", "search"]}}))
    result = subprocess.run([REAL_BINARY, "acp", "--config", str(path), "--ephemeral"], input="", capture_output=True, text=True, timeout=WAIT)
    assert result.returncode == 2 and "acp.permissions[1]" in result.stderr and "never asks" in result.stderr


# -- cancellation -----------------------------------------------------------------------


async def test_cancel_mid_stream_answers_cancelled_and_the_session_goes_on(tmp_path: Path) -> None:
    editor = Editor()
    config = scripted({"text": ["Partial"], "stall": True}, {"text": ["Again."]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        running = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]))
        await editor.wait_for(lambda: editor.text() == "Partial")
        await conn.cancel(session_id=session.session_id)
        answer = await asyncio.wait_for(running, WAIT)
        assert answer.stop_reason == "cancelled"
        # Like every other answer, it says which turn it was.
        meta = answer.field_meta["agentrpc"]
        assert meta["stopReason"] == "cancelled" and meta["turnId"].startswith("t")
        assert (await prompt(conn, session.session_id, "again")).stop_reason == "end_turn"
    assert editor.text() == "PartialAgain."


async def test_session_cancel_sent_as_a_request_is_answered_null_and_cancels(tmp_path: Path) -> None:
    editor = Editor()
    config = scripted({"text": ["Partial"], "stall": True}, {"text": ["Again."]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        running = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]))
        await editor.wait_for(lambda: editor.text() == "Partial")
        # Some clients send the notification as a request (with an id): answered, and it cancels.
        assert await asyncio.wait_for(conn._conn.send_request("session/cancel", {"sessionId": session.session_id}), WAIT) is None
        assert (await asyncio.wait_for(running, WAIT)).stop_reason == "cancelled"
        # With nothing running, or for a session nobody has, it is answered all the same.
        assert await asyncio.wait_for(conn._conn.send_request("session/cancel", {"sessionId": "s-nobody"}), WAIT) is None
        assert (await prompt(conn, session.session_id, "again")).stop_reason == "end_turn"
    assert editor.text() == "PartialAgain."


async def test_every_call_goes_pending_then_in_progress_when_it_runs_then_ends(tmp_path: Path) -> None:
    import sys

    from acp.schema import McpServerStdio

    editor = Editor({"/work/project/a.txt": "alpha"})
    config = scripted({"toolCalls": [{"id": "call_r", "name": "read_file", "arguments": {"path": "a.txt"}},
                                     {"id": "call_m", "name": "mcp__calc__add", "arguments": {"a": 2, "b": 3}},
                                     {"id": "call_x", "name": "read_file", "arguments": {"path": "/etc/passwd"}},
                                     {"id": "call_u", "name": "no_such_tool", "arguments": {}}]},
                      {"text": ["Done."]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        calc = McpServerStdio(name="calc", command=sys.executable, args=["-c", CALC_MCP_SERVER], env=[])
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[calc]), WAIT)
        assert (await prompt(conn, session.session_id, "go")).stop_reason == "end_turn"
    # A read through the editor and an MCP tool: running, then done.
    assert editor.statuses("call_r") == ["pending", "in_progress", "completed"]
    assert editor.statuses("call_m") == ["pending", "in_progress", "completed"]
    assert editor.tool_updates("call_m")[-1]["rawOutput"] == {"output": "5"}
    # A path outside the workspace runs (and fails) in the front end; a tool nobody has never runs.
    assert editor.statuses("call_x") == ["pending", "in_progress", "failed"]
    assert editor.statuses("call_u") == ["pending", "failed"]
    assert "no tool named" in editor.tool_updates("call_u")[-1]["rawOutput"]["output"]


async def test_an_mcp_servers_progress_is_an_in_progress_update_with_its_message(tmp_path: Path) -> None:
    """A real ``fastmcp`` server's ``ctx.report_progress`` (``notifications/progress``,
    the engine's ``toolProgress``) reaches the editor as ``in_progress``
    ``tool_call_update``s whose content is the server's message."""
    from acp.schema import McpServerStdio
    from test_mcp_fastmcp import FASTMCP_PYTHON, FASTMCP_SERVER

    if FASTMCP_PYTHON is None:
        pytest.skip("fastmcp is not installed")
    editor = Editor()
    config = scripted({"toolCalls": [{"id": "call_s", "name": "mcp__fm__steps", "arguments": {"count": 3}}]}, {"text": ["Done."]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        fm = McpServerStdio(name="fm", command=FASTMCP_PYTHON, args=[FASTMCP_SERVER], env=[])
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[fm]), WAIT * 2)
        assert (await prompt(conn, session.session_id, "go")).stop_reason == "end_turn"
    updates = editor.tool_updates("call_s")
    statuses = [u.get("status") for u in updates]
    assert statuses[0] == "pending" and statuses[-1] == "completed" and set(statuses[1:-1]) == {"in_progress"}, statuses
    said = [u["content"][-1]["content"]["text"] for u in updates[1:-1] if u.get("content")]
    # Paced (at most ~10 a second): some reports may be coalesced, none is made up.
    assert said and all(t in {"step 1 of 3", "step 2 of 3", "step 3 of 3"} for t in said), said


@pytest.mark.parametrize("shows_forms", [True, False])
async def test_an_mcp_servers_form_goes_to_the_editor_that_shows_forms(tmp_path: Path, shows_forms: bool) -> None:
    """A real ``fastmcp`` server's form (``book`` asks for a date) is ACP's
    ``elicitation/create`` in form mode, tied to the session and tool call, for
    an editor that declared ``elicitation.form``; the values go back to the
    server. An editor that did not is never asked: the server hears ``cancel``."""
    from acp.schema import ElicitationCapabilities, ElicitationFormCapabilities, FileSystemCapabilities, McpServerStdio
    from test_mcp_fastmcp import FASTMCP_PYTHON, FASTMCP_SERVER

    if FASTMCP_PYTHON is None:
        pytest.skip("fastmcp is not installed")
    editor = Editor()
    editor.form_answer = {"date": "2026-12-24"}
    caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True,
                              elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()) if shows_forms else None)
    config = scripted({"toolCalls": [{"id": "call_b", "name": "mcp__fm__book", "arguments": {}}]}, {"text": ["Done."]})
    async with agent(tmp_path, config, editor, capabilities=caps, unstable=True) as (conn, cwd):
        fm = McpServerStdio(name="fm", command=FASTMCP_PYTHON, args=[FASTMCP_SERVER], env=[])
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[fm]), WAIT * 2)
        assert (await prompt(conn, session.session_id, "go")).stop_reason == "end_turn"
    output = json.dumps(editor.tool_updates("call_b")[-1]["rawOutput"])
    if shows_forms:
        [asked] = editor.called("elicitation/create")
        assert asked["message"] == "MCP server 'fm': Which date?"  # form mode: the frame check validated the request
        assert asked["sessionId"] == session.session_id and asked["toolCallId"] == "call_b"
        assert asked["requestedSchema"]["properties"]["date"]["type"] == "string"
        assert "booked 2026-12-24" in output
    else:
        assert editor.called("elicitation/create") == []
        assert "not booked (cancel)" in output


async def test_cancel_while_a_permission_waits(tmp_path: Path) -> None:
    editor = Editor({"/work/project/a.txt": "old"})
    editor.permission_answers = [None]
    config = scripted(
        {"toolCalls": [{"id": "call_w", "name": "write_file", "arguments": {"path": "a.txt", "content": "new"}}]},
        {"text": ["Next."]},
    )
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        running = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block("write")]))
        async with asyncio.timeout(WAIT):
            await editor.permission_asked.wait()
        await conn.cancel(session_id=session.session_id)
        answer = await asyncio.wait_for(running, WAIT)
        assert answer.stop_reason == "cancelled"
        assert (await prompt(conn, session.session_id, "next")).stop_reason == "end_turn"
    assert editor.files["/work/project/a.txt"] == "old"
    assert not editor.called("write_text_file")


async def test_a_cancelled_permission_outcome_denies_the_call(tmp_path: Path) -> None:
    editor = Editor({"/work/project/a.txt": "old"})
    editor.permission_answers = ["cancelled"]
    config = scripted({"toolCalls": [{"id": "call_w", "name": "write_file", "arguments": {"path": "a.txt", "content": "new"}}]}, {"text": ["ok"]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        assert (await prompt(conn, session.session_id, "write")).stop_reason == "end_turn"
    assert editor.files["/work/project/a.txt"] == "old"
    assert editor.tool_updates("call_w")[-1]["status"] == "failed"


# -- limits and failures ----------------------------------------------------------------


async def test_round_trip_limit_is_max_turn_requests(tmp_path: Path) -> None:
    editor = Editor({"/work/project/a.txt": "a"})
    read = {"toolCalls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "a.txt"}}]}
    config = scripted(read, {"text": ["never"]}, {"text": ["Fine."]})
    config["acp"] = {"session": {"limits": {"maxRoundTrips": 1}}}
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        answer = await prompt(conn, session.session_id, "read forever")
        assert answer.stop_reason == "max_turn_requests"
        assert answer.field_meta["agentrpc"]["error"]["data"]["kind"] == "maxRoundTripsExceeded"


async def test_a_provider_failure_is_an_error_with_kind_and_the_session_goes_on(tmp_path: Path) -> None:
    editor = Editor()
    config = scripted({"error": {"code": "quotaExceeded", "httpStatus": 429}}, {"text": ["Working again."]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        with pytest.raises(RequestError) as failure:
            await prompt(conn, session.session_id, "first")
        assert failure.value.code == -32050
        data = failure.value.data
        assert data["kind"] == "providerError"
        # The clients people use show data.details, not the message: it carries the same text.
        assert data["details"] == str(failure.value) and "quota" in data["details"].lower()
        assert data["provider"]["code"] == "quotaExceeded"
        assert data["provider"]["retryGuidance"] == {"kind": "none"} and data["provider"]["requiresUserAction"] is True
        assert (await prompt(conn, session.session_id, "second")).stop_reason == "end_turn"
    assert editor.text() == "Working again."


async def test_stop_reasons_max_tokens_refusal_and_the_tool_call_limit(tmp_path: Path) -> None:
    editor = Editor({"/work/project/a.txt": "a"})
    two_reads = {"toolCalls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "a.txt"}},
                               {"id": "call_2", "name": "read_file", "arguments": {"path": "a.txt"}}]}
    config = scripted({"text": ["Cut"], "stopReason": "maxTokens"}, {"refusal": ["I can't."]}, two_reads, {"text": ["never"]})
    config["acp"] = {"session": {"limits": {"maxToolCalls": 1}}}
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        assert (await prompt(conn, session.session_id, "long")).stop_reason == "max_tokens"
        assert (await prompt(conn, session.session_id, "bad")).stop_reason == "refusal"
        limited = await prompt(conn, session.session_id, "read twice")
        assert limited.stop_reason == "max_turn_requests"
        assert limited.field_meta["agentrpc"]["error"]["data"]["kind"] == "maxToolCallsExceeded"


async def test_an_edit_is_undone_in_the_editor_when_the_turn_fails(tmp_path: Path) -> None:
    editor = Editor({"/work/project/a.txt": "one\ntwo\n"})
    config = scripted(
        {"toolCalls": [{"id": "call_e", "name": "edit_file", "arguments": {"path": "a.txt", "old_text": "two", "new_text": "2"}}]},
        {"error": {"code": "quotaExceeded", "httpStatus": 429}},
    )
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        with pytest.raises(RequestError) as failure:
            await prompt(conn, session.session_id, "edit, then fail")
        assert failure.value.data["kind"] == "providerError"
    # Written once by the edit, then back to the old text by the engine's tool/undo.
    assert [w["content"] for w in editor.called("write_text_file")] == ["one\n2\n", "one\ntwo\n"]
    assert editor.files["/work/project/a.txt"] == "one\ntwo\n"


async def test_authenticate_and_audio(tmp_path: Path) -> None:
    async with agent(tmp_path, scripted({"text": ["-"]}), Editor()) as (conn, cwd):
        assert await asyncio.wait_for(conn._conn.send_request("authenticate", {"methodId": "agentrpc-json"}), WAIT) == {}
        session = await new_session(conn, cwd)
        with pytest.raises(RequestError) as audio:
            await asyncio.wait_for(conn._conn.send_request("session/prompt", {"sessionId": session.session_id, "prompt": [
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]}), WAIT)
        assert audio.value.code == -32602 and audio.value.data["field"] == "prompt[0]"
    bare = tmp_path / "bare"  # no ./agentrpc.json either
    bare.mkdir()
    async with agent(bare, None, Editor()) as (conn, cwd):
        with pytest.raises(RequestError) as none:
            await asyncio.wait_for(conn._conn.send_request("authenticate", {"methodId": "openai-api-key"}), WAIT)
        assert none.value.code == -32000 and "OPENAI_API_KEY" in str(none.value)


# -- sessions ---------------------------------------------------------------------------


async def test_load_replays_what_was_said(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = Editor({"/work/project/a.txt": "alpha"})
    config = scripted(
        {"reasoning": ["Look first."], "text": ["Let me ", "read it."], "toolCalls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"text": ["It says ", "alpha."]},
        {"text": ["Bye."]},
    )
    async with agent(tmp_path, config, first, store=store) as (conn, cwd):
        session = await new_session(conn, cwd)
        await prompt(conn, session.session_id, "What is in a.txt?")
        first_turn = len(first.updates)
        await prompt(conn, session.session_id, "Thanks")
    second = Editor()
    async with agent(tmp_path, config, second, store=store) as (conn, cwd):
        await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[]), WAIT)

    def said(updates: list[dict[str, Any]]) -> list[tuple[str, str]]:
        """What was said, in order: consecutive chunks of one kind joined, tool calls by id, title and final status."""
        out: list[tuple[str, str]] = []
        for u in updates:
            kind = u["sessionUpdate"]
            if kind.endswith("_chunk"):
                if out and out[-1][0] == kind:
                    out[-1] = (kind, out[-1][1] + u["content"]["text"])
                else:
                    out.append((kind, u["content"]["text"]))
            elif kind == "tool_call":
                out.append((kind, f"{u['toolCallId']} {u['title']} {u['kind']} {json.dumps(u['rawInput'], sort_keys=True)}"))
            elif kind == "tool_call_update" and u.get("status") in ("completed", "failed"):
                out.append((kind, f"{u['toolCallId']} {u['status']} {json.dumps(u.get('rawOutput'))}"))
        return out

    def user(text: str) -> dict[str, Any]:
        return {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}}

    # The live run, with the user's prompts where the editor showed them.
    live = [user("What is in a.txt?"), *first.updates[:first_turn], user("Thanks"), *first.updates[first_turn:]]
    assert said(second.updates) == said(live)
    assert said(second.updates)[:2] == [("user_message_chunk", "What is in a.txt?"), ("agent_thought_chunk", "Look first.")]


def marked_mcp_server(name: str, marker: Path) -> Any:
    """The calc MCP server, started through a shell that first appends a line to `marker`."""
    import sys

    from acp.schema import McpServerStdio

    return McpServerStdio(name=name, command="/bin/sh", args=["-c", 'echo started >> "$0"; exec "$1" -c "$2"', str(marker), sys.executable, CALC_MCP_SERVER], env=[])


def starts(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


async def test_load_replays_everything_before_an_mcp_server_starts_and_runs_the_editors_list(tmp_path: Path) -> None:
    store = tmp_path / "store"
    old_marker, new_marker = tmp_path / "old.marker", tmp_path / "new.marker"
    # A conversation of some megabytes: more than the agent queues for a slow editor
    # (1 MiB) and a pipe hold, so while the editor stops reading at the first replayed
    # update, the agent cannot finish the replay, and with it, start a server.
    count = 40
    files = {f"/work/project/f{i}.txt": f"{i}:" + "x" * 40_000 for i in range(count)}
    reads = [{"id": f"call_{i}", "name": "read_file", "arguments": {"path": f"f{i}.txt"}} for i in range(count)]
    first = Editor(files)
    async with agent(tmp_path, scripted({"toolCalls": reads}, {"text": ["Read them all."]}), first, store=store) as (conn, cwd):
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[marked_mcp_server("tools", old_marker)]), WAIT)
        assert (await prompt(conn, session.session_id, "Read every file")).stop_reason == "end_turn"
    assert starts(old_marker) == 1

    second = Editor()
    at_first_update: list[tuple[int, int]] = []
    replayed: list[dict[str, Any]] = []

    def observe(event: StreamEvent) -> None:
        if event.direction == StreamDirection.INCOMING and event.message.get("method") == "session/update":
            if not at_first_update:
                # The editor stops reading here (observers run in the SDK's reader) and looks
                # for a server start for a while: a server started before the replay shows up.
                deadline = time.monotonic() + 1.0
                while time.monotonic() < deadline and not (starts(old_marker) > 1 or new_marker.exists()):
                    time.sleep(0.01)
                at_first_update.append((starts(old_marker), starts(new_marker)))
            if event.message["params"]["update"]["sessionUpdate"] != "available_commands_update":
                replayed.append(event.message)

    config = scripted({"toolCalls": [{"id": "call_m", "name": "mcp__tools__add", "arguments": {"a": 1, "b": 2}}]}, {"text": ["3."]})
    async with agent(tmp_path, config, second, store=store, observe=observe) as (conn, cwd):
        loaded = await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[marked_mcp_server("tools", new_marker)]), WAIT)
        assert len(replayed) == 1 + 2 * count + 1  # the prompt, each call and its result, the answer
        assert loaded.field_meta is None, "every server the editor sent was started"
        # The editor's list replaced the one the session was created with.
        assert (await prompt(conn, session.session_id, "1 + 2?")).stop_reason == "end_turn"
        # Loaded again with the same list: the servers it runs stay as they are.
        await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[marked_mcp_server("tools", new_marker)]), WAIT)
    # No server had started when the first replayed update reached the editor.
    assert at_first_update == [(1, 0)]
    assert starts(old_marker) == 1 and starts(new_marker) == 1
    assert second.tool_updates("call_m")[-1]["status"] == "completed"


async def test_a_load_runs_the_editors_http_server_with_its_headers(tmp_path: Path) -> None:
    from acp.schema import HttpHeader, HttpMcpServer, SseMcpServer

    editor = Editor()
    config = scripted({"toolCalls": [{"id": "call_h", "name": "mcp__remote__echo", "arguments": {"text": "after the load"}}]}, {"text": ["Echoed."]})
    async with http_mcp_fake(tmp_path) as (port, log):
        async with agent(tmp_path, config, editor, store=tmp_path / "store") as (conn, cwd):
            session = await new_session(conn, cwd)
            # The editor now has an http server (headers are never stored: they come with each load) and an sse one.
            remote = HttpMcpServer(type="http", name="remote", url=f"http://127.0.0.1:{port}/mcp",
                                   headers=[HttpHeader(name="X-Editor", value="sent with the load")])
            old = SseMcpServer(type="sse", name="old", url="https://mcp.example.com/sse", headers=[])
            loaded = await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[remote, old]), WAIT)
            assert (await prompt(conn, session.session_id, "echo")).stop_reason == "end_turn"
    (not_started,) = loaded.field_meta["agentrpc"]["mcpServersNotStarted"]
    assert not_started["name"] == "old" and "sse" in not_started["reason"]
    assert editor.tool_updates("call_h")[-1]["status"] == "completed"
    received = [json.loads(line) for line in log.read_text().splitlines()]
    assert received and all(r["headers"].get("x-editor") == "sent with the load" for r in received)


async def test_a_loaded_session_keeps_the_model_chosen_for_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    config = scripted({"text": ["slow model."]}, fast=[{"text": ["fast."]}, {"text": ["fast again."]}])
    first = Editor()
    async with agent(tmp_path, config, first, store=store) as (conn, cwd):
        session = await new_session(conn, cwd)
        await asyncio.wait_for(conn.set_config_option(session_id=session.session_id, config_id="model", value="fast"), WAIT)
        await prompt(conn, session.session_id, "hi")
    assert first.text() == "fast."
    second = Editor()
    async with agent(tmp_path, config, second, store=store) as (conn, cwd):
        loaded = await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[]), WAIT)
        assert [o.current_value for o in loaded.config_options or [] if o.id == "model"] == ["fast"]
        await prompt(conn, session.session_id, "again")
        # A session without a choice starts with the default model.
        other = await new_session(conn, cwd)
        assert [o.current_value for o in other.config_options or [] if o.id == "model"] == ["s"]
    assert second.text("agent_message_chunk").endswith("fast.")


async def test_usage_update_when_the_context_window_is_known(tmp_path: Path) -> None:
    editor = Editor({"/work/project/a.txt": "a"})
    config = scripted(
        {"toolCalls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "a.txt"}}], "usage": {"inputTokens": 5, "outputTokens": 3}},
        {"text": ["Read."], "usage": {"inputTokens": 20, "outputTokens": 4, "cachedInputTokens": 5}},
        unknown=[{"text": ["No window."], "usage": {"inputTokens": 30, "outputTokens": 2}}],
    )
    config["models"]["s"]["contextWindowTokens"] = 1000
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        await prompt(conn, session.session_id, "read a.txt")
        # A model whose window is not configured: no usage_update (its size would be a guess).
        await asyncio.wait_for(conn.set_config_option(session_id=session.session_id, config_id="model", value="unknown"), WAIT)
        await prompt(conn, session.session_id, "again")
    usage = [u for u in editor.updates if u["sessionUpdate"] == "usage_update"]
    # After each round trip: what was sent plus what came back.
    assert usage == [{"sessionUpdate": "usage_update", "used": 8, "size": 1000}, {"sessionUpdate": "usage_update", "used": 24, "size": 1000}]
    assert editor.text().endswith("No window.")


async def test_cancel_request_on_a_prompt_answers_cancelled(tmp_path: Path) -> None:
    editor = Editor()
    prompt_ids: list[Any] = []

    def observe(event: StreamEvent) -> None:
        if event.direction == StreamDirection.OUTGOING and event.message.get("method") == "session/prompt":
            prompt_ids.append(event.message["id"])

    config = scripted({"text": ["Partial"], "stall": True}, {"text": ["Next."]})
    async with agent(tmp_path, config, editor, observe=observe) as (conn, cwd):
        session = await new_session(conn, cwd)
        running = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]))
        await editor.wait_for(lambda: editor.text() == "Partial")
        # An id nobody uses is ignored; the prompt's id cancels the turn like session/cancel.
        await conn._conn.send_notification("$/cancel_request", {"requestId": 987654})
        await conn._conn.send_notification("$/cancel_request", {"requestId": prompt_ids[-1]})
        assert (await asyncio.wait_for(running, WAIT)).stop_reason == "cancelled"
        assert (await prompt(conn, session.session_id, "next")).stop_reason == "end_turn"
    assert editor.text() == "PartialNext."


async def test_list_resume_close_delete(tmp_path: Path) -> None:
    store = tmp_path / "store"
    editor = Editor()
    config = scripted({"text": ["One."]})
    async with agent(tmp_path, config, editor, store=store) as (conn, cwd):
        a = await new_session(conn, cwd)
        b = await new_session(conn, "/work/other")
        await prompt(conn, a.session_id, "First question")
        listed = await asyncio.wait_for(conn.list_sessions(), WAIT)
        by_id = {s.session_id: s for s in listed.sessions}
        assert set(by_id) == {a.session_id, b.session_id}
        assert by_id[a.session_id].cwd == cwd and by_id[a.session_id].title == "First question"
        assert by_id[b.session_id].cwd == "/work/other"
        only = await asyncio.wait_for(conn.list_sessions(cwd="/work/other"), WAIT)
        assert [s.session_id for s in only.sessions] == [b.session_id]
        await asyncio.wait_for(conn.close_session(session_id=a.session_id), WAIT)
        with pytest.raises(RequestError) as closed:
            await prompt(conn, a.session_id, "still there?")
        assert closed.value.data["kind"] == "sessionNotFound"
        # resume: loaded again, without a replay (the slash commands are announced again, nothing else).
        before = len(editor.updates)
        await asyncio.wait_for(conn.resume_session(cwd=cwd, session_id=a.session_id, mcp_servers=[]), WAIT)
        await editor.wait_for(lambda: "available_commands_update" in editor.kinds()[before:])
        assert [u["sessionUpdate"] for u in editor.updates[before:]] == ["available_commands_update"]
        raw = conn._conn  # the SDK has no helper for session/delete
        assert await asyncio.wait_for(raw.send_request("session/delete", {"sessionId": b.session_id}), WAIT) == {}
        assert await asyncio.wait_for(raw.send_request("session/delete", {"sessionId": "s-never-was"}), WAIT) == {}
        listed = await asyncio.wait_for(conn.list_sessions(), WAIT)
        assert [s.session_id for s in listed.sessions] == [a.session_id]


def option(options: Any, option_id: str) -> Any:
    (found,) = [o for o in options or [] if o.id == option_id]
    return found


async def test_configured_profiles_are_a_config_option_beside_the_mode_and_the_model(tmp_path: Path) -> None:
    editor = Editor()
    handoff = {"toolCalls": [{"id": "call_h", "name": "handoff_to_code", "arguments": {"reason": "code is wanted"}}]}
    config = scripted({"text": ["asked."]}, handoff, coder=[{"text": ["coded."]}, {"text": ["coded again."]}], fast=[{"text": ["fast."]}])
    config["acp"] = {"session": {"profiles": {"selector": "role", "cases": {
        "ask": {"description": "answers questions", "instructions": ["Answer."], "tools": [{"handoff": "code"}]},
        "code": {"description": "writes code", "instructions": ["Code."], "model": "coder"}}},
        "properties": {"role": "ask"}}}
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        # Session modes are the permission modes; the profiles are an option of their own.
        assert session.modes is not None and session.modes.current_mode_id == "ask"
        assert [o.id for o in session.config_options] == ["mode", "model", "profile"]
        profiles = option(session.config_options, "profile")
        assert profiles.current_value == "ask" and [(o.value, o.description) for o in profiles.options] == [
            ("ask", "answers questions"), ("code", "writes code")]
        await prompt(conn, session.session_id, "q")
        # The editor's choice: the next turn runs the code profile (and its model).
        chosen = await asyncio.wait_for(conn.set_config_option(session_id=session.session_id, config_id="profile", value="code"), WAIT)
        assert option(chosen.config_options, "profile").current_value == "code"
        await prompt(conn, session.session_id, "write it")
        with pytest.raises(RequestError) as bad_profile:
            await asyncio.wait_for(conn.set_config_option(session_id=session.session_id, config_id="profile", value="nope"), WAIT)
        assert bad_profile.value.code == -32602
        await asyncio.wait_for(conn.set_config_option(session_id=session.session_id, config_id="profile", value="ask"), WAIT)
        assert not any(u["sessionUpdate"] == "config_option_update" for u in editor.updates)
        # The engine's own change (a handoff) is news to the editor.
        await prompt(conn, session.session_id, "hand over")
        (update,) = [u for u in editor.updates if u["sessionUpdate"] == "config_option_update"]
        assert [o["currentValue"] for o in update["configOptions"] if o["id"] == "profile"] == ["code"]
        changed = await asyncio.wait_for(conn.set_config_option(session_id=session.session_id, config_id="model", value="fast"), WAIT)
        assert option(changed.config_options, "model").current_value == "fast"
        await prompt(conn, session.session_id, "quick")
        with pytest.raises(RequestError) as bad_model:
            await asyncio.wait_for(conn.set_config_option(session_id=session.session_id, config_id="model", value="gpt-9"), WAIT)
        assert bad_model.value.code == -32602
    assert editor.text() == "asked.coded.coded again.fast."


# -- bad input --------------------------------------------------------------------------


async def test_unknown_session_second_prompt_and_malformed_blocks(tmp_path: Path) -> None:
    editor = Editor()
    config = scripted({"text": ["slow"], "stall": True}, {"text": ["ok"]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        with pytest.raises(RequestError) as unknown:
            await prompt(conn, "s-nobody", "hello")
        assert unknown.value.data["kind"] == "sessionNotFound"
        session = await new_session(conn, cwd)
        raw = conn._conn
        for blocks, field in (([{"type": "text"}], "prompt[0]"), ([{"type": "video", "url": "x"}], "prompt[0]"),
                              ([{"type": "text", "text": "a"}, "plain"], "prompt[1]"), ([], "prompt")):
            with pytest.raises(RequestError) as malformed:
                await asyncio.wait_for(raw.send_request("session/prompt", {"sessionId": session.session_id, "prompt": blocks}), WAIT)
            assert malformed.value.code == -32602 and malformed.value.data["field"] == field, blocks
        running = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[text_block("one")]))
        await editor.wait_for(lambda: editor.text() == "slow")
        with pytest.raises(RequestError) as second:
            await prompt(conn, session.session_id, "two")
        assert second.value.data["kind"] == "alreadyRunning"
        await conn.cancel(session_id=session.session_id)
        assert (await asyncio.wait_for(running, WAIT)).stop_reason == "cancelled"
        assert (await prompt(conn, session.session_id, "three")).stop_reason == "end_turn"


async def test_embedded_and_linked_context_reach_the_model(tmp_path: Path) -> None:
    from acp.schema import EmbeddedResourceContentBlock, ImageContentBlock, ResourceContentBlock, TextResourceContents

    editor = Editor()
    blocks = [text_block("Explain"),
              EmbeddedResourceContentBlock(type="resource", resource=TextResourceContents(uri="file:///work/project/m.py", text="def f(): pass")),
              ResourceContentBlock(type="resource_link", uri="file:///work/project/README.md", name="README.md"),
              ImageContentBlock(type="image", data="iVBORw0KGgo=", mime_type="image/png")]
    async with agent(tmp_path, scripted({"text": ["Seen."]}), editor, store=tmp_path / "store") as (conn, cwd):
        session = await new_session(conn, cwd)
        await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=blocks), WAIT)
        # The prompt as the model got it comes back in the replay of session/load.
        await asyncio.wait_for(conn.load_session(cwd=cwd, session_id=session.session_id, mcp_servers=[]), WAIT)
    said = "".join(u["content"].get("text", "") for u in editor.updates if u["sessionUpdate"] == "user_message_chunk")
    assert said == ('Explain\n<context uri="file:///work/project/m.py">\ndef f(): pass\n</context>\n'
                    "[@README.md](file:///work/project/README.md) (file README.md)")
    images = [u["content"] for u in editor.updates if u["sessionUpdate"] == "user_message_chunk" and u["content"]["type"] == "image"]
    assert images == [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]


async def test_a_path_outside_the_workspace_is_a_tool_error(tmp_path: Path) -> None:
    editor = Editor({"/etc/passwd": "root", "/work/lib/util.txt": "shared"})
    config = scripted(
        {"toolCalls": [{"id": "call_x", "name": "read_file", "arguments": {"path": "../../etc/passwd"}},
                       {"id": "call_y", "name": "read_file", "arguments": {"path": "/etc/passwd"}},
                       {"id": "call_z", "name": "read_file", "arguments": {"path": "../lib/util.txt"}}]},
        {"text": ["Not allowed."]},
    )
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd, additional_directories=["/work/lib"])
        assert (await prompt(conn, session.session_id, "read passwd")).stop_reason == "end_turn"
    # Only the file inside an additional directory was read.
    assert [c["path"] for c in editor.called("read_text_file")] == ["/work/lib/util.txt"]
    assert editor.tool_updates("call_z")[-1]["status"] == "completed"
    for call in ("call_x", "call_y"):
        last = editor.tool_updates(call)[-1]
        assert last["status"] == "failed" and "outside the workspace" in last["rawOutput"]["output"]


async def test_an_unknown_permission_option_denies_the_call(tmp_path: Path) -> None:
    editor = Editor({"/work/project/a.txt": "old"})
    editor.permission_answers = ["yes-please"]
    config = scripted({"toolCalls": [{"id": "call_w", "name": "write_file", "arguments": {"path": "a.txt", "content": "new"}}]}, {"text": ["ok"]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        assert (await prompt(conn, session.session_id, "write")).stop_reason == "end_turn"
    assert editor.files["/work/project/a.txt"] == "old"
    last = editor.tool_updates("call_w")[-1]
    assert last["status"] == "failed" and "yes-please" in last["rawOutput"]["output"]


async def test_an_editor_that_never_answers_a_read_is_bounded_by_the_tool_timeout(tmp_path: Path) -> None:
    editor = Editor({"/work/project/a.txt": "a"})
    editor.never_answer_reads = True
    config = scripted({"toolCalls": [{"id": "call_r", "name": "read_file", "arguments": {"path": "a.txt"}}]}, {"text": ["Gave up."]})
    config["acp"] = {"session": {"limits": {"toolTimeoutSeconds": 0.5}}}
    async with agent(tmp_path, config, editor) as (conn, cwd):
        session = await new_session(conn, cwd)
        assert (await prompt(conn, session.session_id, "read")).stop_reason == "end_turn"
    last = editor.tool_updates("call_r")[-1]
    assert last["status"] == "failed" and "did not finish within 0.5 seconds" in last["rawOutput"]["output"]
    assert editor.text() == "Gave up."


# -- the default without any configuration: the installed local model ----------------------


LOCAL_MODEL_SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "local-model"


def local_model_ready() -> bool:
    import subprocess

    return LOCAL_MODEL_SCRIPT.is_file() and subprocess.run([str(LOCAL_MODEL_SCRIPT), "status"], capture_output=True).returncode == 0


@pytest.mark.skipif(not local_model_ready(), reason="the local model environment is not installed (scripts/local-model install)")
@pytest.mark.parametrize("end", ["close", "signal"])
async def test_without_configuration_the_installed_local_model_answers_and_stops_with_the_agent(tmp_path: Path, end: str) -> None:
    import signal
    import subprocess

    assert REAL_BINARY is not None
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "AGENTRPC_CONFIG")}
    env["AGENTRPC_LOCAL_MODEL_SCRIPT"] = str(LOCAL_MODEL_SCRIPT)
    editor = Editor()
    check = FrameCheck()
    async with spawn_agent_process(editor, REAL_BINARY, "acp", "--ephemeral", env=env, cwd=str(tmp_path), observers=[check.observe]) as (conn, process):
        await asyncio.wait_for(conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities()), WAIT)
        session = await asyncio.wait_for(conn.new_session(cwd=str(tmp_path), mcp_servers=[]), 240)
        assert [o.current_value for o in session.config_options or [] if o.id == "model"] == ["local"]
        answer = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("Say hello.")]), 240)
        assert answer.stop_reason == "end_turn"
        agent_pid = process.pid
        children = subprocess.run(["pgrep", "-P", str(agent_pid)], capture_output=True, text=True).stdout.split()
        assert children, "the model server runs as the agent's child"
        if end == "signal":
            process.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(process.wait(), WAIT) == 128 + signal.SIGTERM
    check.verify()
    # The agent stops its model server when the editor closes the pipe, or a signal ends it.
    for pid in children:
        await until_gone(pid, WAIT)


# -- the end ----------------------------------------------------------------------------


async def test_an_exit_the_watchdog_ends_takes_the_local_model_server_with_it(tmp_path: Path) -> None:
    """The editor closes its input and the exit hangs (the test hook
    ``AGENTRPC_TEST_HANG_AT_EXIT``) before the local model server is stopped: the
    exit watchdog kills that server (it has no supervisor) and ends agentrpc with
    status 124, the reason on stderr, nothing but frames on stdout (docs/acp.md)."""
    from test_chat_local import stand_in

    assert REAL_BINARY is not None
    env = stand_in(tmp_path) | {"AGENTRPC_TEST_HANG_AT_EXIT": "1", "AGENTRPC_TEST_EXIT_BOUND_SECONDS": "1"}
    proc = await asyncio.create_subprocess_exec(
        REAL_BINARY, "acp", "--ephemeral", cwd=tmp_path, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        frames: list[dict[str, Any]] = []
        requests = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
                    # No model is configured: the session starts the local model (the stand-in).
                    {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}}]
        for request in requests:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            await proc.stdin.drain()
            async with asyncio.timeout(WAIT):
                while not frames or frames[-1].get("id") != request["id"]:
                    frames.append(json.loads(await proc.stdout.readline()))
            assert "result" in frames[-1], frames[-1]
        model = int((tmp_path / "server.pid").read_text())
        os.kill(model, 0)  # running
        proc.stdin.close()
        stdout, stderr = await asyncio.wait_for(proc.communicate(), WAIT)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 124
    assert "agentrpc[error] the exit (the end of input) did not finish within 1 s" in stderr.decode()
    assert all(isinstance(json.loads(line), dict) for line in stdout.splitlines())
    await until_gone(model, WAIT)
