"""Image attachments given as ``{path}`` are the client's paths, read by the
server: a FIFO nobody writes to, a device or a huge file named ``x.png`` must
not block the session or fill memory (docs/protocol.md §8, the limits table).

Every check runs through the real binary.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agentrpc import scripted
from agentrpc.errors import UnreadableImageAttachment

from conftest import REAL_TIMEOUT, requires_real, spawn_real

pytestmark = requires_real

# The smallest valid PNG header is enough: the scripted model does not decode it.
PNG = bytes.fromhex("89504e470d0a1a0a")
LIMIT = 20 * 1024 * 1024


async def send_with_image(client: Any, session_id: str, path: Path) -> Any:
    return await client.request(
        "session/send", {"sessionId": session_id, "input": {"text": "Look", "images": [{"path": str(path)}]}})


async def refusal(client: Any, session_id: str, path: Path) -> dict[str, Any]:
    with pytest.raises(UnreadableImageAttachment) as raised:
        await send_with_image(client, session_id, path)
    return raised.value.data


async def test_a_fifo_a_directory_and_a_device_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "cat.png"
    os.mkfifo(fifo)
    directory = tmp_path / "dir.png"
    directory.mkdir()
    device = tmp_path / "zero.png"
    device.symlink_to("/dev/zero")
    async with spawn_real(tmp_path) as client:
        session = await client.create_session(model=scripted({"text": ["unused"]}))
        for path in (fifo, directory, device):
            # Bounded: before the fix, opening the FIFO blocked the session forever.
            data = await asyncio.wait_for(refusal(client, session.id, path), REAL_TIMEOUT)
            assert data["reason"] == "notRegularFile", (path, data)
            assert data["index"] == 0
        state = await client.request("session/getState", {"sessionId": session.id})
        assert state["entryCount"] == 0 and state["revision"] == 0


async def test_a_file_over_the_limit_is_refused_and_one_at_the_limit_is_sent(tmp_path: Path) -> None:
    big = tmp_path / "big.png"
    with big.open("wb") as f:
        f.write(PNG)
        f.truncate(LIMIT + 1)  # sparse: costs no disk
    exact = tmp_path / "exact.png"
    with exact.open("wb") as f:
        f.write(PNG)
        f.truncate(LIMIT)
    small = tmp_path / "small.png"
    small.write_bytes(PNG)
    dump = tmp_path / "requests.jsonl"
    async with spawn_real(tmp_path, args=["--dump-requests", str(dump)]) as client:
        session = await client.create_session(model=scripted({"text": ["one"]}, {"text": ["two"]}))
        data = await refusal(client, session.id, big)
        assert data["reason"] == "tooLarge"
        assert (await send_with_image(client, session.id, exact))["stopReason"] == "completed"
        assert (await send_with_image(client, session.id, small))["stopReason"] == "completed"
    requests = [json.loads(line)["request"] for line in dump.read_text().splitlines()]
    images = [image for request in requests for message in request["messages"] for image in message.get("images", [])]
    # The second request carries both turns' prompts, so both files reached the model whole.
    assert {"mimeType": "image/png", "bytes": LIMIT} in images
    assert images[-1] == {"mimeType": "image/png", "bytes": len(PNG)}
