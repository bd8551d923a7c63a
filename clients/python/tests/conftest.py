"""Test support: run ``async def`` tests without a plugin, and locate servers.

``async def test_...`` functions run in a fresh event loop via
``asyncio.run`` with an overall time limit, so a client bug shows up as a
failure instead of a hung test run.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from agentrpc import Client, Event
from agentrpc.discovery import ENV_VAR, repo_build_candidates

TEST_TIMEOUT = 60.0
FAKE_SERVER = Path(__file__).with_name("fake_server.py")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run coroutine test functions to completion under ``TEST_TIMEOUT``, or
    the test's own ``time_bound(seconds)`` mark."""
    function = pyfuncitem.obj
    if not inspect.iscoroutinefunction(function):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    mark = pyfuncitem.get_closest_marker("time_bound")
    bound = float(mark.args[0]) if mark else TEST_TIMEOUT

    async def bounded() -> None:
        async with asyncio.timeout(bound):
            await function(**kwargs)

    asyncio.run(bounded())
    return True


@pytest.fixture(autouse=True)
def private_session_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test's servers keep their sessions in a fresh directory: never the
    user's ``~/.local/state``, never another test's (they may run at once)."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state / "agentrpc" / "sessions"


def spawn_fake(
    *,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    **kwargs: Any,
) -> Any:
    """``Client.spawn`` for the fake server (``python fake_server.py``)."""
    return Client.spawn(binary=sys.executable, args=[str(FAKE_SERVER), *args], env=env, **kwargs)


@pytest.fixture
def fake() -> Callable[..., Any]:
    """The :func:`spawn_fake` factory, as a fixture for readability."""
    return spawn_fake


def real_binary() -> str | None:
    """``$AGENTRPC_BIN``, else the repo's own ``.build/{debug,release}/agentrpc``."""
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        return from_env if os.access(from_env, os.X_OK) else None
    for candidate in repo_build_candidates(Path(__file__)):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


#: The real server binary, or None (then the real-server tests are skipped).
REAL_BINARY = real_binary()

#: Marks a module or test as needing the real binary.
requires_real = [
    pytest.mark.real_server,
    pytest.mark.skipif(
        REAL_BINARY is None,
        reason="no agentrpc binary: set AGENTRPC_BIN or run `swift build` so .build/debug/agentrpc exists",
    ),
]

#: Generous but bounded: a hung server fails the test instead of the run.
REAL_TIMEOUT = 20.0


def spawn_real(cwd: Path, **kwargs: Any) -> Any:
    """``Client.spawn`` for the real server in a scratch directory (any store it writes stays there)."""
    kwargs.setdefault("request_timeout", REAL_TIMEOUT)
    kwargs.setdefault("shutdown_timeout", REAL_TIMEOUT)
    return Client.spawn(binary=REAL_BINARY, cwd=cwd, **kwargs)


def call(tool_name: str, /, **arguments: Any) -> dict[str, Any]:
    """A scripted tool call."""
    return {"name": tool_name, "arguments": arguments}


def is_gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (no longer in /proc, or a zombie not yet reaped)."""
    try:
        state = Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError):
        return True
    return "zombie" in state


async def until_gone(pid: int, timeout: float = REAL_TIMEOUT) -> None:
    """Waits (bounded) until process ``pid`` has ended."""
    async with asyncio.timeout(timeout):
        while not is_gone(pid):
            await asyncio.sleep(0.05)


async def until_listening(port: int, timeout: float = REAL_TIMEOUT) -> None:
    """Waits (bounded) until something accepts connections on 127.0.0.1:``port``."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                return
            except OSError:
                await asyncio.sleep(0.05)


async def until(stream: Any, predicate: Any) -> Event:
    """The first event of ``stream`` that satisfies ``predicate`` (bounded)."""
    async with asyncio.timeout(REAL_TIMEOUT):
        async for event in stream:
            if predicate(event):
                return event
    raise AssertionError("stream ended before the awaited event")
