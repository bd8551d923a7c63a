"""Replays the recorded transcripts in ``Tests/Transcripts`` through the real
binary, one pytest case per file, using the server's own ``replay`` command."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import real_binary  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parents[3]
TRANSCRIPTS = sorted((ROOT / "Tests" / "Transcripts").glob("**/*.jsonl"))


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.relative_to(ROOT / "Tests" / "Transcripts").as_posix() for p in TRANSCRIPTS])
def test_transcript(path: Path) -> None:
    binary = real_binary()
    if binary is None:
        pytest.skip("no agentrpc binary: build it with `swift build` or set AGENTRPC_BIN")
    result = subprocess.run([str(binary), "replay", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
