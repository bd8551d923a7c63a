"""Finding the server binary, and saying where we looked when we cannot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentrpc
from agentrpc import BinaryNotFound, find_binary

# The directory holding the package under test, for the `python -m agentrpc` subprocesses.
SOURCE = str(Path(agentrpc.__file__).resolve().parent.parent)


def make_executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_explicit_binary_wins(tmp_path: Path) -> None:
    binary = make_executable(tmp_path / "custom" / "agentrpc")
    other = make_executable(tmp_path / "env" / "agentrpc")
    assert find_binary(binary, environ={"AGENTRPC_BIN": str(other)}) == str(binary)


def test_explicit_binary_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(BinaryNotFound) as caught:
        find_binary(tmp_path / "missing", environ={})
    assert str(tmp_path / "missing") in str(caught.value)


def test_env_var_is_used_next(tmp_path: Path) -> None:
    binary = make_executable(tmp_path / "agentrpc")
    assert find_binary(environ={"AGENTRPC_BIN": str(binary), "PATH": ""}) == str(binary)
    with pytest.raises(BinaryNotFound) as caught:
        find_binary(environ={"AGENTRPC_BIN": str(tmp_path / "nope"), "PATH": ""})
    assert "AGENTRPC_BIN" in str(caught.value)


def test_path_then_repo_build(tmp_path: Path) -> None:
    on_path = make_executable(tmp_path / "bin" / "agentrpc")
    assert find_binary(environ={"PATH": str(on_path.parent)}) == str(on_path)

    repo = tmp_path / "repo"
    release = make_executable(repo / ".build" / "release" / "agentrpc")
    start = repo / "clients" / "python" / "src" / "agentrpc"
    start.mkdir(parents=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert find_binary(environ={"PATH": str(empty)}, start=start) == str(release)
    debug = make_executable(repo / ".build" / "debug" / "agentrpc")
    assert find_binary(environ={"PATH": str(empty)}, start=start) == str(debug)


def test_not_found_lists_every_place(tmp_path: Path) -> None:
    start = tmp_path / "a" / "b"
    start.mkdir(parents=True)
    with pytest.raises(BinaryNotFound) as caught:
        find_binary(environ={"PATH": str(tmp_path)}, start=start)
    searched = caught.value.searched
    assert any("AGENTRPC_BIN" in s for s in searched)
    assert any("PATH" in s for s in searched)
    assert str(start / ".build" / "debug" / "agentrpc") in searched
    assert str(tmp_path / ".build" / "release" / "agentrpc") in searched
    assert "swift build" in str(caught.value)


def test_a_non_executable_file_is_skipped(tmp_path: Path) -> None:
    start = tmp_path / "x"
    start.mkdir()
    plain = start / ".build" / "debug" / "agentrpc"
    plain.parent.mkdir(parents=True)
    plain.write_text("not executable")
    os.chmod(plain, 0o644)
    with pytest.raises(BinaryNotFound):
        find_binary(environ={"PATH": str(tmp_path)}, start=start)


def test_the_wheels_binary_comes_after_the_env_var_and_before_path(tmp_path: Path) -> None:
    packaged = make_executable(tmp_path / "site-packages" / "agentrpc" / "bin" / "agentrpc")
    from_env = make_executable(tmp_path / "env" / "agentrpc")
    on_path = make_executable(tmp_path / "path" / "agentrpc")
    repo = tmp_path / "repo"
    build = make_executable(repo / ".build" / "debug" / "agentrpc")
    start = repo / "clients" / "python" / "src" / "agentrpc"
    start.mkdir(parents=True)
    path = str(on_path.parent)
    environ = {"AGENTRPC_BIN": str(from_env), "PATH": path}
    assert find_binary(environ=environ, start=start, packaged=packaged) == str(from_env)
    assert find_binary(environ={"PATH": path}, start=start, packaged=packaged) == str(packaged)
    # Without it (a checkout, a pure-Python install) the search goes on as before.
    missing = tmp_path / "none" / "bin" / "agentrpc"
    assert find_binary(environ={"PATH": path}, start=start, packaged=missing) == str(on_path)
    assert find_binary(environ={"PATH": path}, start=start, packaged=missing, search_path=False) == str(build)
    with pytest.raises(BinaryNotFound) as caught:
        find_binary(environ={"PATH": path}, start=tmp_path / "none", packaged=missing, search_path=False)
    assert f"{missing} (the wheel's binary)" in caught.value.searched
    assert not any("PATH" in place for place in caught.value.searched)


def test_python_m_agentrpc_runs_the_server_with_its_arguments(tmp_path: Path) -> None:
    # A stand-in server that prints its arguments: `python -m agentrpc` must exec it with them.
    fake = tmp_path / "agentrpc"
    fake.write_text('#!/bin/sh\necho "server got: $*"\nexit 7\n')
    fake.chmod(0o755)
    environ = {**os.environ, "AGENTRPC_BIN": str(fake), "PYTHONPATH": SOURCE}
    done = subprocess.run(
        [sys.executable, "-m", "agentrpc", "--version", "x y"],
        env=environ, capture_output=True, text=True, timeout=60, check=False,
    )
    assert (done.returncode, done.stdout) == (7, "server got: --version x y\n")


def test_python_m_agentrpc_without_a_server_says_where_it_looked(tmp_path: Path) -> None:
    environ = {**os.environ, "AGENTRPC_BIN": str(tmp_path / "missing"), "PYTHONPATH": SOURCE}
    done = subprocess.run(
        [sys.executable, "-m", "agentrpc"], env=environ, capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 1
    assert "could not find the agentrpc server binary" in done.stderr
    assert str(tmp_path / "missing") in done.stderr
