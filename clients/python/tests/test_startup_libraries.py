"""What the server loads at start (issue 35): no Foundation, no ICU until a pattern.

The binary imports FoundationEssentials, not Foundation: libFoundation,
libFoundationInternationalization and lib_FoundationICU (a 40 MB ICU library and its
data) cost a cold start ~8 ms and ~6 MB of resident memory. ICU is loaded only when a
user pattern is compiled (egress rules, redactions, schema patterns) or a session/list
query that is not ASCII is folded. In the static package build ICU is linked into the
binary, so only the first half applies there.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from conftest import REAL_TIMEOUT, real_binary, requires_real

pytestmark = requires_real

FOUNDATION = ("libFoundation.so", "libFoundationInternationalization.so", "lib_FoundationICU.so")


def loaded(pid: int) -> set[str]:
    """The file names of the shared objects mapped into the process."""
    with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
        return {os.path.basename(line.split()[-1]) for line in maps if len(line.split()) >= 6}


def is_dynamic(binary: str) -> bool:
    """Whether the binary loads the Swift runtime as shared libraries (the dynamic build)."""
    with open(binary, "rb") as f:
        return b"libswiftCore.so" in f.read()


async def ask(process: Any, message: dict[str, Any]) -> dict[str, Any]:
    process.stdin.write((json.dumps(message) + "\n").encode())
    await process.stdin.drain()
    while True:
        line = await asyncio.wait_for(process.stdout.readline(), REAL_TIMEOUT)
        assert line, "the server closed its output"
        frame = json.loads(line)
        if frame.get("id") == message["id"]:
            return frame


async def test_foundation_is_not_loaded_and_icu_only_after_a_pattern(tmp_path: Path) -> None:
    binary = real_binary()
    assert binary is not None
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}
    process = await asyncio.create_subprocess_exec(
        binary, cwd=tmp_path, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        answer = await ask(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                     "params": {"protocolVersion": 1, "clientInfo": {"name": "startup", "version": "1"}}})
        assert "result" in answer
        at_start = loaded(process.pid)
        assert not at_start & set(FOUNDATION), sorted(at_start & set(FOUNDATION))
        assert "libFoundationEssentials.so" in at_start or not is_dynamic(binary)

        created = await ask(process, {"jsonrpc": "2.0", "id": 2, "method": "session/create", "params": {
            "egress": {"refuse": ["sk-[A-Za-z0-9]{8,}"]}, "model": {"provider": "scripted", "script": [{"text": ["ok"]}]}}})
        assert "result" in created, created
        after = loaded(process.pid)
        assert not after & set(FOUNDATION[:2]), sorted(after & set(FOUNDATION[:2]))
        if is_dynamic(binary):
            assert "lib_FoundationICU.so" in after
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), REAL_TIMEOUT)
