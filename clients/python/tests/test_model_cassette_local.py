"""The model cassette examples record with the repository's local model
(SmolLM2, ``scripts/local-model``) and then replay what they recorded with no
model: the same line printed. Runs where the local model is installed
(``scripts/test`` prepares it); the committed cassettes replay in every run
(test_examples.py, examples.test.js)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_local_model import BINARY, local_server, model_ready  # noqa: F401 - the fixture is used by name

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "clients" / "python" / "src"
SECRET_NAMES = ("authorization", "bearer", "x-api-key")

pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary"),
    pytest.mark.skipif(not model_ready(), reason="the local model environment is not installed (scripts/local-model install)"),
]


def run(argv: list[str]) -> str:
    env = {**os.environ, "AGENTRPC_BIN": str(BINARY), "PYTHONPATH": str(SOURCE), "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def check_cassette(path: Path) -> None:
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["agentrpcCassette"]["providers"] == ["openai"]
    # The forced lookup, then the answer: two round trips were recorded.
    assert len(lines) == 3
    assert not any(name in path.read_text().lower() for name in SECRET_NAMES)


def test_the_python_example_records_with_the_local_model_and_replays_it(tmp_path: Path) -> None:
    cassette = tmp_path / "weather.jsonl"
    example = str(ROOT / "examples" / "model_cassette.py")
    recorded = run([sys.executable, example, "--record", "--cassette", str(cassette)])
    check_cassette(cassette)
    # No model runs now (the example stopped the one it started).
    assert run([sys.executable, example, "--cassette", str(cassette)]) == recorded
    assert recorded.startswith("1 tool call, 2 round trips: ")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_node_example_records_with_the_local_model_and_replays_it(local_server: str, tmp_path: Path) -> None:  # noqa: F811
    cassette = tmp_path / "weather-node.jsonl"
    port = local_server.rsplit(":", 1)[1].split("/")[0]
    example = str(ROOT / "examples" / "node" / "model_cassette.js")
    recorded = run(["node", example, "--record", "--cassette", str(cassette), "--port", port])
    check_cassette(cassette)
    # Another port, where nothing listens: only the cassette can answer.
    assert run(["node", example, "--cassette", str(cassette), "--port", "9"]) == recorded
    assert recorded.startswith("1 tool call, 2 round trips: ")
