"""The HTTP transport through the real binary against a local fake provider
(docs/protocol.md, "Provider connections"): waiting for a slow stream costs no
CPU, requests reuse one kept-alive connection, and a transport failure's text
is scrubbed of secrets."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentrpc import Client, ProviderError

from fake_provider import Canned, FakeProvider
from test_http_providers import BINARY, FIXTURES, SECRET, TIMEOUT, served

pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN"),
    pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared/fixtures is not beside the repository"),
]


def chunk(text: str) -> bytes:
    return f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': text}}]})}\n\n".encode()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to read the server's CPU time")
async def test_waiting_for_a_slow_stream_does_not_spin(tmp_path: Path) -> None:
    """A model that sends one chunk every 0.4 s for 2.4 s: the server's CPU over
    the whole turn stays far below the wall time (a busy wait burned ~75 %).
    The bound is loose on purpose; agentrpc-bench reports the real figure."""
    async with served(tmp_path, "openai") as (session, fake, client, _calls):
        pieces = [chunk(f"w{i} ") for i in range(6)] + [b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n']
        fake.queue(Canned(200, {"Content-Type": "text/event-stream"}, b"", slow_chunks=pieces, pause=0.4))
        pid = client.pid
        before = cpu_seconds(pid)
        result = await session.send("tell me slowly")
        used = cpu_seconds(pid) - before
        assert result["message"]["text"] == "w0 w1 w2 w3 w4 w5 "
        assert used < 0.6, f"the server used {used:.2f} s of CPU while waiting ~2.8 s"


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_requests_reuse_one_connection(tmp_path: Path, provider: str) -> None:
    fixture = "openai-chat/text.sse" if provider == "openai" else "anthropic/text.sse"
    async with served(tmp_path, provider) as (session, fake, _client, _calls):
        for n in range(4):
            fake.queue(Canned.sse(fixture))
            await session.send(f"turn {n}")
        assert len(fake.received) == 4
        assert fake.connections == 1


async def test_a_stale_kept_alive_connection_is_replaced(tmp_path: Path) -> None:
    """The server closes the idle connection between two requests: the second is
    sent again on a fresh connection instead of failing."""
    async with served(tmp_path, "openai") as (session, fake, _client, _calls):
        fake.queue(Canned(200, {"Content-Type": "text/event-stream", "Connection": "close"}, (FIXTURES / "openai-chat/text.sse").read_bytes()))
        await session.send("one")
        fake.queue(Canned.sse("openai-chat/text.sse"))
        result = await session.send("two")
        assert result["message"]["text"]
        assert fake.connections == 2


async def test_network_error_text_is_scrubbed(tmp_path: Path) -> None:
    """Nothing listens on the port: the `network` error's unsafeMessage comes from
    the system and names the endpoint; the key in the URL path is scrubbed."""
    fake = FakeProvider()
    port = fake.server.server_address[1]
    fake.close()
    for base in (f"http://127.0.0.1:{port}/{SECRET}/v1", f"https://127.0.0.1:{port}/{SECRET}/v1"):
        config = {"models": {"m": {"provider": "openai", "model": "x", "baseURL": base, "apiKeyEnv": "TEST_PROVIDER_KEY"}}}
        (tmp_path / "agentrpc.json").write_text(json.dumps(config))
        async with Client.spawn(binary=BINARY, cwd=tmp_path, env={"TEST_PROVIDER_KEY": SECRET}, request_timeout=TIMEOUT) as client:
            session = await client.open_session(model="m")
            with pytest.raises(ProviderError) as info:
                await session.send("hi", options={"limits": {"wallClockSeconds": 20}})
            assert info.value.provider["code"] == "network"
            assert SECRET not in json.dumps(info.value.data)
