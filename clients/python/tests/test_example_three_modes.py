"""examples/three-modes/run.py runs against the real binary and shows the profile switches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "three-modes" / "run.py"


def test_three_modes_example_runs() -> None:
    binary = os.environ.get("AGENTRPC_BIN") or str(ROOT / ".build" / "debug" / "agentrpc")
    if not Path(binary).exists():
        pytest.skip("no agentrpc binary (set AGENTRPC_BIN or run swift build)")
    env = dict(os.environ, AGENTRPC_BIN=binary, PYTHONPATH=str(ROOT / "clients" / "python" / "src"))
    run = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "[client sets mode=planning; active profile is now planning]" in out
    # The handoff in turn 3: brainstorm's round trip 2, then planning takes round trip 3.
    assert "[round trip 2: brainstorm → model brainstormer]" in out
    assert "[profile planning, was brainstorm]" in out
    assert "[round trip 3: planning → model planner]" in out
    assert "agent: 1. Pick a trail. 2. Book a bus. 3. Pack lunches." in out
    requests = out.split("requests sent:\n", 1)[1].splitlines()
    assert [line.split()[1:3] for line in requests] == [
        ["1.1", "brainstorm"], ["2.1", "planning"], ["3.1", "brainstorm"],
        ["3.2", "brainstorm"], ["3.3", "planning"], ["4.1", "reviewing"],
    ]
    assert "tools=[none]" in requests[-1] and '"temperature": 0.3' in requests[-1]
