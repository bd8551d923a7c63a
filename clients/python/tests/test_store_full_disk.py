"""A store on a disk that fills up (docs/protocol.md, "Durable sessions"): the
call that needed the write fails with ``storeUnavailable``, the session in
memory is intact, and once there is room again nothing stored is lost or torn.

The disk is a real one: a 1 MiB tmpfs mounted as the store. That needs the
right to mount (root, as on this project's CI machine); elsewhere the test says
why it cannot run.
"""

from __future__ import annotations

import errno
import json
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from agentrpc import Client, scripted
from agentrpc.errors import StoreUnavailable

from conftest import REAL_BINARY, REAL_TIMEOUT, requires_real

pytestmark = requires_real


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mountpoint)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def fill(disk: Path) -> Path:
    """Writes a file until the disk says ENOSPC; returns it (delete it to make room)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as f:
        block = b"\0" * 4096
        while True:
            try:
                f.write(block)
            except OSError as e:
                assert e.errno == errno.ENOSPC, e
                break
    return filler


def assert_whole_lines(journal: bytes) -> None:
    assert journal.endswith(b"\n"), journal[-200:]
    for line in journal.splitlines():
        json.loads(line)
    assert b"ppppp" not in journal


def spawn(store: Path) -> Any:
    return Client.spawn(binary=REAL_BINARY, args=["--store", str(store)],
                        request_timeout=REAL_TIMEOUT, shutdown_timeout=REAL_TIMEOUT)


async def test_a_full_disk_fails_the_send_keeps_the_session_and_loses_nothing(small_disk: Path) -> None:
    store = small_disk / "sessions"
    big_prompt = "p" * 64 * 1024  # more than the last page of the journal can hold
    async with spawn(store) as first:
        session = await first.open_session(model=scripted({"text": ["one"]}, {"text": ["three"]}))
        await session.send("first")
        before = await first.get_transcript(session.id)

        filler = fill(small_disk)
        with pytest.raises(StoreUnavailable) as failure:
            await session.send(big_prompt)
        assert failure.value.data.get("errno") == errno.ENOSPC, failure.value.data
        # Nothing torn on disk: the part of the record that fitted was cut off again.
        assert_whole_lines((store / f"{session.id}.jsonl").read_bytes())
        # Intact in memory: the failed send changed nothing.
        assert await first.get_transcript(session.id) == before
        state = await first.get_state(session.id)
        assert state["isRunning"] is False

        # Room again: the session goes on where it was, on disk too.
        filler.unlink()
        result = await session.send("third")
        assert result["message"]["text"] == "three"
        announced = await first.get_transcript(session.id)
        await first.close_session(session.id)

    # No torn or partial record was left behind: a new process loads it all, without warnings.
    journal = (store / f"{session.id}.jsonl").read_bytes()
    assert_whole_lines(journal)
    async with spawn(store) as second:
        resumed = await second.resume_session(session.id)
        assert resumed.warnings == []
        assert await second.get_transcript(session.id) == announced
        assert [e["type"] for e in announced["entries"]] == ["prompt", "response", "prompt", "response"]


async def test_a_store_directory_that_cannot_be_made_is_explained_in_words(tmp_path: Path) -> None:
    """The storeUnavailable message gives the file system's reason as a sentence
    (Foundation's wording, kept off Foundation), not an error object's dump."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    async with spawn(blocker / "store") as client:
        with pytest.raises(StoreUnavailable) as raised:
            await client.open_session(model=scripted({"text": ["hi"]}))
    message = str(raised.value)
    assert f"cannot create the store directory {blocker / 'store'}: The operation could not be completed." in message
    assert "UserInfo" not in message and "CocoaError(" not in message
