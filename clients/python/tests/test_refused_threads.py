"""A thread the system refuses (a process or user at its thread limit): every
place the binary starts one says so and nothing waits for it.

``AGENTRPC_TEST_REFUSE_THREAD=NAME`` (docs/testing.md) makes the binary refuse
threads whose name begins with NAME with EAGAIN, as ``pthread_create`` does at
the limit. Before, a refused stdin reader, stdout writer, HTTP driver or MCP
spawner left the process waiting for good; the replayer ran a reader on its own
thread and blocked until the child ended. docs/protocol.md, "Ending", says what
each one does.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import REAL_TIMEOUT, real_binary, requires_real
from test_startup_libraries import ask  # type: ignore[import-not-found]

pytestmark = requires_real

REFUSED = "Resource temporarily unavailable"
REPO = Path(__file__).resolve().parents[3]


def refusing(name: str, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(base if base is not None else os.environ)
    for key in ("AGENTRPC_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "AGENTRPC_LOG"):
        env.pop(key, None)
    env["AGENTRPC_TEST_REFUSE_THREAD"] = name
    return env


def thread_names(pid: int) -> list[str]:
    names = []
    for comm in Path(f"/proc/{pid}/task").glob("*/comm"):
        try:
            names.append(comm.read_text().strip())
        except OSError:
            continue  # ended meanwhile
    return names


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (cmdline.parent / "status").read_text()
        except OSError:
            continue
        if marker in text and "zombie" not in state.lower():
            found.append(int(cmdline.parent.name))
    return found


async def until_none_with(marker: str) -> None:
    async with asyncio.timeout(REAL_TIMEOUT):
        while processes_with(marker):
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("thread", ["agentrpc.stdin", "agentrpc.stdout", "agentrpc.deadlines", "agentrpc.exit-watchdog"])
@pytest.mark.parametrize("command", ["serve", "acp"])
def test_a_refused_thread_of_the_whole_life_stops_the_start_with_its_name(tmp_path: Path, command: str, thread: str) -> None:
    binary = real_binary()
    assert binary is not None
    # stdin stays open: a server that waited for a thread that never started would hang here.
    process = subprocess.Popen([binary, command, *(["--ephemeral"] if command == "acp" else [])], cwd=tmp_path,
                               env=refusing(thread), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = process.communicate(timeout=REAL_TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == 1, err
    assert out == b""
    prefix = "agentrpc acp: " if command == "acp" else "agentrpc: "
    assert f"{prefix}cannot start the thread '{thread}': {REFUSED}" in err.decode(), err


def test_log_lines_are_written_without_their_thread(tmp_path: Path) -> None:
    binary = real_binary()
    assert binary is not None
    frames = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientInfo": {"name": "t", "version": "1"}}},
              {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}, {"jsonrpc": "2.0", "method": "exit"}]
    proc = subprocess.run([binary, "--log-level", "info", "--ephemeral"], cwd=tmp_path, env=refusing("agentrpc.stderr"),
                          input="".join(json.dumps(f) + "\n" for f in frames).encode(), capture_output=True, timeout=REAL_TIMEOUT)
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert f"agentrpc[warning] cannot start the thread 'agentrpc.stderr': {REFUSED}; log lines are written without it" in err
    assert "agentrpc[info] shutting down: exit" in err
    answer = json.loads(proc.stdout.decode().splitlines()[0])
    assert answer["id"] == 1 and "result" in answer


class Served:
    """The binary on pipes, spoken to in newline-delimited JSON."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.tmp_path, self.env, self.next_id = tmp_path, env, 1

    async def __aenter__(self) -> Served:
        binary = real_binary()
        assert binary is not None
        self.process = await asyncio.create_subprocess_exec(
            binary, "--ephemeral", cwd=self.tmp_path, env=self.env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        assert "result" in await self.ask("initialize", {"protocolVersion": 1, "clientInfo": {"name": "t", "version": "1"}})
        return self

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        return await ask(self.process, {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})

    async def __aexit__(self, *exc: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), REAL_TIMEOUT)
        finally:
            if self.process.returncode is None:
                self.process.kill()


async def test_patterns_run_on_the_caller_when_no_worker_can_start(tmp_path: Path) -> None:
    create = {"egress": {"refuse": ["sk-[A-Za-z0-9]{8,}"]},
              "model": {"provider": "scripted", "script": [{"text": ["fine"]}]}}
    for env, workers in ((refusing("agentrpc.regex"), False), (refusing("no-such-thread"), True)):
        async with Served(tmp_path, env) as server:
            session = (await server.ask("session/create", create))["result"]["sessionId"]
            sent = await server.ask("session/send", {"sessionId": session, "input": "hello"})
            assert sent.get("result", {}).get("message", {}).get("text") == "fine", sent
            refused = await server.ask("session/send", {"sessionId": session, "input": "my key is sk-abcdefgh1234"})
            assert refused["error"]["code"] == -32040, refused
            # The control run shows the hook is what kept the workers away.
            assert any(name.startswith("agentrpc.regex") for name in thread_names(server.process.pid)) is workers


async def test_a_refused_http_thread_is_a_typed_network_error_and_the_server_stays(tmp_path: Path) -> None:
    create = {"model": {"provider": "openai", "model": "m", "baseURL": "http://127.0.0.1:9/v1", "apiKeyEnv": "REFUSED_TEST_KEY"}}
    env = refusing("agentrpc-http")
    env["REFUSED_TEST_KEY"] = "k"
    async with Served(tmp_path, env) as server:
        session = (await server.ask("session/create", create))["result"]["sessionId"]
        started = time.monotonic()
        failed = await server.ask("session/send", {"sessionId": session, "input": "hi"})
        assert time.monotonic() - started < REAL_TIMEOUT
        provider = failed["error"]["data"]["provider"]
        assert provider["code"] == "network", failed
        assert "the system refused the HTTP thread" in provider["safeDescription"]
        state = await server.ask("session/getState", {"sessionId": session})
        assert "result" in state


@pytest.mark.parametrize("thread", ["agentrpc-mcp-spawner", "mcp-held-stdout", "mcp-held-stderr"])
async def test_an_mcp_server_whose_thread_is_refused_fails_and_does_not_run_on(tmp_path: Path, thread: str) -> None:
    marker = f"refused-thread-marker-{thread}-{os.getpid()}"
    server_spec = {"name": "held", "command": sys.executable, "args": ["-c", "import time; time.sleep(600)", marker]}
    create = {"mcpServers": [server_spec], "model": {"provider": "scripted", "script": [{"text": ["fine"]}]}}
    async with Served(tmp_path, refusing(thread)) as server:
        session = (await server.ask("session/create", create))["result"]["sessionId"]
        async with asyncio.timeout(REAL_TIMEOUT):
            while True:
                state = (await server.ask("session/getState", {"sessionId": session}))["result"]
                status = state["mcpServers"][0]
                if status["status"] == "failed":
                    break
                await asyncio.sleep(0.05)
        assert f"cannot start the thread '{thread}': {REFUSED}" in status["reason"], status
        await until_none_with(marker)
        sent = await server.ask("session/send", {"sessionId": session, "input": "hi"})
        assert sent["result"]["message"]["text"] == "fine", sent


@pytest.mark.parametrize("thread", ["replay-stdout", "replay-stderr", "replay-exit"])
def test_replay_says_which_thread_was_refused_and_leaves_no_server(tmp_path: Path, thread: str) -> None:
    binary = real_binary()
    assert binary is not None
    transcript = REPO / "Tests" / "Transcripts" / "foundation" / "handshake.jsonl"
    assert transcript.is_file()
    started = time.monotonic()
    proc = subprocess.run([binary, "replay", str(transcript)], env=refusing(thread), capture_output=True, timeout=REAL_TIMEOUT)
    text = proc.stdout.decode() + proc.stderr.decode()
    assert proc.returncode != 0, text
    assert re.search(rf"cannot start \S*/agentrpc: cannot start the thread '{thread}': {REFUSED}", text), text
    assert time.monotonic() - started < REAL_TIMEOUT


@pytest.mark.parametrize("thread", ["chat-input", "chat-server", "replay-stdout"])
def test_chat_says_which_thread_was_refused(tmp_path: Path, thread: str) -> None:
    binary = real_binary()
    assert binary is not None
    env = refusing(thread)
    env["HOME"] = str(tmp_path)
    env["TERM"] = "xterm"
    proc = subprocess.run([binary, "chat"], cwd=tmp_path, env=env, input=b"hello\n", capture_output=True, timeout=REAL_TIMEOUT)
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert f"cannot start the thread '{thread}': {REFUSED}" in err, err


@pytest.mark.parametrize("thread", ["acp-command-stdout", "acp-command-stderr"])
async def test_an_acp_command_whose_output_cannot_be_read_fails_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread: str) -> None:
    from acp import text_block

    from test_acp import WAIT, Editor, agent, scripted  # type: ignore[import-not-found]
    from test_acp_workspace import NONE, call, output, workspace  # type: ignore[import-not-found]

    monkeypatch.setenv("AGENTRPC_TEST_REFUSE_THREAD", thread)
    marker = f"refused-command-marker-{thread}-{os.getpid()}"
    root = workspace(tmp_path)
    config = scripted({"toolCalls": [call("call_run", "run_command", command=sys.executable,
                                          args=["-c", "import time; time.sleep(600)", marker])]}, {"text": ["ok"]})
    editor = Editor()
    async with agent(tmp_path, config, editor, capabilities=NONE) as (conn, _):
        session = await asyncio.wait_for(conn.new_session(cwd=str(root), mcp_servers=[]), WAIT)
        answer = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("go")]), WAIT)
        assert answer.stop_reason == "end_turn"
    assert editor.statuses("call_run")[-1] == "failed"
    assert f"cannot start the thread '{thread}': {REFUSED}" in output(editor, "call_run")
    await until_none_with(marker)


def test_replay_runs_a_transcript_on_its_own_thread_when_it_has_no_other() -> None:
    binary = real_binary()
    assert binary is not None
    transcript = REPO / "Tests" / "Transcripts" / "foundation" / "handshake.jsonl"
    proc = subprocess.run([binary, "replay", str(transcript)], env=refusing("transcript-replay"), capture_output=True, timeout=REAL_TIMEOUT)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    assert "1 passed, 0 failed" in proc.stdout.decode() + proc.stderr.decode()
