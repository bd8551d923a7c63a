"""The tests shown in docs/testing.md for the scripted provider and for
recorded RPC transcripts run as they are written (the model cassette's
runnable example, examples/model_cassette.py, runs in test_examples.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import real_binary  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parents[3]
BINARY = real_binary()


def section_tests(heading: str) -> list[str]:
    """The Python blocks defining tests in the section of docs/testing.md that starts with `heading`."""
    text = (ROOT / "docs" / "testing.md").read_text()
    section = text.split("\n## " + heading, 1)[1].split("\n## ", 1)[0]
    return [block for block in re.findall(r"```python\n(.*?)```", section, re.S) if "def test_" in block]


@pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN")
@pytest.mark.parametrize("heading", ["1. The scripted provider", "2. Recorded RPC transcripts"])
def test_the_documented_test_passes(tmp_path: Path, heading: str) -> None:
    blocks = section_tests(heading)
    assert len(blocks) == 1, f"docs/testing.md, {heading}: expected one test block"
    (tmp_path / "test_documented.py").write_text(blocks[0])
    assert BINARY is not None
    env = {**os.environ, "AGENTRPC_BIN": str(BINARY), "PYTHONPATH": str(ROOT / "clients" / "python" / "src"),
           "PATH": f"{Path(BINARY).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_documented.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
