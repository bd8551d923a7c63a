"""The examples run, and the guide shows them exactly as they are.

``docs/python.md`` embeds example files after ``<!-- example: PATH -->``
and their output after ``<!-- output: PATH -->``. These tests run every
``examples/*.py`` against the real binary (all of them use the offline
scripted provider) and check that each embedded block equals the file, or
the output the file prints, so neither can rot. After changing an example,
refresh the guide with::

    AGENTRPC_BIN=.build/debug/agentrpc python3 clients/python/tests/test_examples.py --update
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
GUIDE = ROOT / "docs" / "python.md"
SOURCE = ROOT / "clients" / "python" / "src"
if __name__ == "__main__" and str(SOURCE) not in sys.path:
    sys.path.insert(0, str(SOURCE))  # `--update` runs without PYTHONPATH

from conftest import REAL_BINARY  # noqa: E402
_MARKER = re.compile(r"^<!-- (example|output): (\S+) -->$")


@dataclass
class Block:
    kind: str  # "example" or "output"
    path: str
    start: int  # index of the first content line
    end: int  # index of the closing fence
    text: str


def blocks(lines: list[str]) -> list[Block]:
    """Every marked fenced block of the guide."""
    found: list[Block] = []
    for index, line in enumerate(lines):
        match = _MARKER.match(line.strip())
        if not match:
            continue
        fence = index + 1
        if fence >= len(lines) or not lines[fence].startswith("```"):
            raise AssertionError(f"docs/python.md:{index + 1}: a marker must be followed by a fenced block")
        end = fence + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end >= len(lines):
            raise AssertionError(f"docs/python.md:{fence + 1}: unclosed fence")
        found.append(Block(match.group(1), match.group(2), fence + 1, end, "".join(lines[fence + 1:end])))
    return found


def run_example(path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if REAL_BINARY is not None:
        env["AGENTRPC_BIN"] = REAL_BINARY
    env["PYTHONPATH"] = str(SOURCE) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONIOENCODING"] = "utf-8"
    return subprocess.run([sys.executable, str(path)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


def guide_blocks() -> list[Block]:
    return blocks(GUIDE.read_text(encoding="utf-8").splitlines(keepends=True))


def test_every_embedded_example_is_the_file_verbatim() -> None:
    found = guide_blocks()
    examples = [b for b in found if b.kind == "example"]
    assert examples, "docs/python.md embeds no examples"
    for block in examples:
        path = ROOT / block.path
        assert path.is_file(), f"docs/python.md embeds {block.path}, which does not exist"
        assert block.text == path.read_text(encoding="utf-8"), (
            f"docs/python.md's copy of {block.path} differs from the file; run this module with --update")
    for block in found:
        if block.kind == "output":
            assert any(e.path == block.path for e in examples), f"output of {block.path} without its example"


def test_every_example_file_is_in_the_guide() -> None:
    shown = {b.path for b in guide_blocks() if b.kind == "example"}
    missing = [p.relative_to(ROOT).as_posix() for p in EXAMPLES if p.relative_to(ROOT).as_posix() not in shown]
    assert not missing, f"examples not shown in docs/python.md: {missing}"


@pytest.mark.real_server
@pytest.mark.skipif(REAL_BINARY is None, reason="no agentrpc binary: set AGENTRPC_BIN or run `swift build`")
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs_and_prints_what_the_guide_shows(path: Path, tmp_path: Path) -> None:
    completed = run_example(path, tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stdout.strip(), "the example printed nothing"
    relative = path.relative_to(ROOT).as_posix()
    for block in guide_blocks():
        if block.kind == "output" and block.path == relative:
            assert block.text == completed.stdout, (
                f"docs/python.md shows other output for {relative}; run this module with --update")


@pytest.mark.real_server
@pytest.mark.skipif(REAL_BINARY is None, reason="no agentrpc binary: set AGENTRPC_BIN or run `swift build`")
def test_the_package_readme_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "clients" / "python" / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```python\n(.*?)```", readme, re.S)
    assert match, "clients/python/README.md has no python example"
    script = tmp_path / "readme_example.py"
    script.write_text(match.group(1), encoding="utf-8")
    completed = run_example(script, tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "18 °C in Paris." in completed.stdout


def update_guide() -> None:
    """Rewrite every marked block of the guide from the files and their output."""
    import tempfile

    lines = GUIDE.read_text(encoding="utf-8").splitlines(keepends=True)
    with tempfile.TemporaryDirectory() as scratch:
        for block in reversed(blocks(lines)):
            path = ROOT / block.path
            if block.kind == "example":
                text = path.read_text(encoding="utf-8")
            else:
                completed = run_example(path, Path(scratch))
                if completed.returncode != 0:
                    raise SystemExit(f"{block.path} failed:\n{completed.stdout}{completed.stderr}")
                text = completed.stdout
            lines[block.start:block.end] = text.splitlines(keepends=True)
    GUIDE.write_text("".join(lines), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update_guide()
    else:
        raise SystemExit("usage: test_examples.py --update")
