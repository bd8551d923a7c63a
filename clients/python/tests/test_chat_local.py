"""``agentrpc chat --local``: the chat starts the local model server itself and
stops it when it ends.

A stand-in for ``scripts/local-model`` (``AGENTRPC_LOCAL_MODEL_SCRIPT``) answers
``status``, ``describe`` and ``model-config`` like the real one and serves a
tiny OpenAI-compatible server, so these tests need no model; the real model is
tested end to end in test_local_model.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import real_binary
from test_chat import chat_env

BINARY = real_binary()
TIMEOUT = 30.0

pytestmark = [
    pytest.mark.real_server,
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary"),
]

SERVER = textwrap.dedent('''
    import json, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            with open(sys.argv[2], "a") as seen:
                seen.write(json.dumps(body) + "\\n")
            reply = {"id": "c1", "object": "chat.completion", "model": body.get("model"),
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": "Hello from the local stand-in."}}],
                     "usage": {"prompt_tokens": 5, "completion_tokens": 6}}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
''')


def stand_in(tmp_path: Path, serve: str | None = None) -> dict[str, str]:
    """Writes the stand-in script; returns the chat's environment pointing at it."""
    (tmp_path / "server.py").write_text(SERVER)
    serve = serve or f'echo $$ > "{tmp_path}/server.pid"; exec "{sys.executable}" "{tmp_path}/server.py" "$2" "{tmp_path}/requests.jsonl"'
    script = tmp_path / "local-model"
    script.write_text(textwrap.dedent(f'''\
        #!/usr/bin/env bash
        case "$1" in
            status) exit 0 ;;
            describe) echo "StandIn-1M" ;;
            model-config) printf '{{"provider": "openai", "model": "stand-in", "baseURL": "http://127.0.0.1:%s/v1", "options": {{"streamTools": false}}}}\\n' "$2" ;;
            serve) {serve} ;;
            *) exit 2 ;;
        esac
    '''))
    script.chmod(0o755)
    env = chat_env(tmp_path)
    env["AGENTRPC_LOCAL_MODEL_SCRIPT"] = str(script)
    return env


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_chat_local_starts_the_model_server_talks_to_it_and_stops_it(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(BINARY), "chat", "--local"], cwd=tmp_path, env=stand_in(tmp_path), input="hi\n",
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Starting the local model server on 127.0.0.1:" in proc.stdout
    assert "the local model StandIn-1M on 127.0.0.1:" in proc.stdout
    assert "Hello from the local stand-in." in proc.stdout
    assert '"model": "stand-in"' in (tmp_path / "requests.jsonl").read_text()
    pid = int((tmp_path / "server.pid").read_text())
    assert not alive(pid), "the chat left its model server running"


def test_chat_local_reports_a_server_that_dies_and_exits_1(tmp_path: Path) -> None:
    env = stand_in(tmp_path, serve='echo "model file is corrupt" >&2; exit 3')
    proc = subprocess.run(
        [str(BINARY), "chat", "--local"], cwd=tmp_path, env=env, input="", capture_output=True, text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 1
    assert "the local model server exited (status 3)" in proc.stderr
    assert "model file is corrupt" in proc.stderr


def test_chat_local_and_model_together_are_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(BINARY), "chat", "--local", "--model", "gpt"], cwd=tmp_path, env=stand_in(tmp_path), input="",
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert proc.returncode == 2
    assert "--local and --model" in proc.stderr
