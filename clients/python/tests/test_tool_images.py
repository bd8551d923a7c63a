"""Images in tool results (docs/protocol.md, "Images in tool results") through
the real binary: a client tool's ``content`` blocks and an MCP server's image
reach the model in each provider's own shape (a local HTTP server plays the
APIs and records the bodies), a model without images gets the note, the
transcript names the bytes kept beside the journal, and a resumed session
sends them again.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agentrpc import Client, InvalidParams

from conftest import call, real_binary, spawn_real
from fake_provider import FIXTURES, Canned, FakeProvider
from test_mcp_fastmcp import turn_events
from test_mcp_servers import _python_with, wait_status

BINARY = real_binary()
SECRET = "sk-test-SECRET-images-0123456789"
TIMEOUT = 30.0
RESPONSES = Path(__file__).resolve().parents[3] / "Tests" / "Fixtures" / "openai-responses"
HERE = Path(__file__).parent

pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN"),
    pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared/fixtures is not beside the repository"),
]

#: A 1x1 PNG (red).
PIXEL = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
PIXEL_B64 = base64.b64encode(PIXEL).decode()
PIXEL_SHA = hashlib.sha256(PIXEL).hexdigest()
DATA_URL = "data:image/png;base64," + PIXEL_B64
NOTE = f"{len(PIXEL_B64)} bytes of base64 image data not shown"

WEATHER = {"name": "get_weather", "inputSchema": {"type": "object", "properties": {"location": {"type": "string"}, "city": {"type": "string"}, "unit": {"type": "string"}}}}
#: What the client tool answers: MCP's content blocks, a text and an image.
SCREEN = {"outcome": "ok", "content": [{"type": "text", "text": "the screen:"}, {"type": "image", "mimeType": "image/png", "data": PIXEL_B64}]}

FIRST = {
    "anthropic": Canned.sse("anthropic/tool-use.sse") if FIXTURES.is_dir() else None,
    "openai": Canned.sse("openai-chat/tool-call-nonstrict.sse") if FIXTURES.is_dir() else None,
    "openai-responses": Canned(200, {"Content-Type": "text/event-stream"}, (RESPONSES / "reasoning-function-call.sse").read_bytes()),
}
THEN = {
    "anthropic": lambda: Canned.sse("anthropic/text.sse"),
    "openai": lambda: Canned.sse("openai-chat/text.sse"),
    "openai-responses": lambda: Canned(200, {"Content-Type": "text/event-stream"}, (RESPONSES / "text.sse").read_bytes()),
}


def model(provider: str, fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    return {"provider": provider, "model": f"{provider}-test-model", "baseURL": fake.base_url + "/v1", "apiKeyEnv": "TEST_PROVIDER_KEY", **extra}


@asynccontextmanager
async def served(tmp_path: Path, config: dict[str, Any], answer: dict[str, Any] = SCREEN) -> AsyncIterator[Client]:
    """A server keeping its sessions in ``tmp_path/store``, whose client tool answers ``answer``."""
    (tmp_path / "agentrpc.json").write_text(json.dumps(config))
    async with Client.spawn(
        binary=BINARY, cwd=tmp_path, args=["--store", str(tmp_path / "store")], env={"TEST_PROVIDER_KEY": SECRET},
        request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT,
    ) as client:
        client.on_request("tool/call", lambda params: answer)
        yield client


def check_transcript_and_event(seen: list[dict[str, Any]]) -> None:
    """``toolCallFinished`` carries the image; the ``toolOutput`` entry names
    its bytes by SHA-256 and keeps the note in the content."""
    [finished] = [e for e in seen if e["type"] == "toolCallFinished"]
    assert finished["media"] == [{"type": "image", "mimeType": "image/png", "data": PIXEL_B64}]
    assert finished["content"] == [{"type": "text", "text": "the screen:"}, {"type": "image", "mimeType": "image/png", "note": NOTE}]
    [output] = [e["entry"] for e in seen if e["type"] == "entryAppended" and e["entry"]["type"] == "toolOutput"]
    assert output["media"] == [{"type": "image", "mimeType": "image/png", "sha256": PIXEL_SHA, "size": len(PIXEL)}]
    assert output["content"] == finished["content"]


async def one_turn(tmp_path: Path, provider: str, answer: dict[str, Any] = SCREEN, **model_extra: Any) -> tuple[list[dict[str, Any]], Any]:
    """One turn against a fake ``provider`` whose model calls the client tool
    once: the turn's events, and the body of the request after the call."""
    fake = FakeProvider()
    try:
        async with served(tmp_path, {"models": {"m": model(provider, fake, **model_extra)}}, answer) as client:
            fake.queue(FIRST[provider], THEN[provider]())
            session = await client.open_session(model="m", tools=[WEATHER])
            seen = await turn_events(session, client.notifications("session/event"), "look")
        return seen, fake.received[1].body
    finally:
        fake.close()


async def test_anthropic_gets_the_image_inside_the_tool_result(tmp_path: Path) -> None:
    seen, body = await one_turn(tmp_path, "anthropic")
    check_transcript_and_event(seen)
    [result] = body["messages"][-1]["content"]
    assert result["type"] == "tool_result" and result["is_error"] is False
    text, image = result["content"]
    assert text["type"] == "text" and NOTE in text["text"]
    assert image == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL_B64}}


async def test_openai_responses_gets_the_image_in_the_function_call_output(tmp_path: Path) -> None:
    seen, body = await one_turn(tmp_path, "openai-responses")
    check_transcript_and_event(seen)
    [output] = [i for i in body["input"] if i.get("type") == "function_call_output"]
    text, image = output["output"]
    assert text["type"] == "input_text" and NOTE in text["text"]
    assert image == {"type": "input_image", "image_url": DATA_URL, "detail": "auto"}


async def test_openai_chat_gets_the_image_in_a_user_message_after_the_tool_results(tmp_path: Path) -> None:
    seen, body = await one_turn(tmp_path, "openai")
    check_transcript_and_event(seen)
    messages = body["messages"]
    tool_at = next(i for i, m in enumerate(messages) if m["role"] == "tool")
    # The tool message takes text only; the image follows as the user's message.
    assert isinstance(messages[tool_at]["content"], str) and NOTE in messages[tool_at]["content"]
    after = messages[tool_at + 1]
    assert after["role"] == "user" and tool_at + 2 == len(messages)
    assert after["content"][0] == {"type": "text", "text": "The image the tool returned:"}
    assert after["content"][1] == {"type": "image_url", "image_url": {"url": DATA_URL}}


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-responses"])
async def test_a_model_without_images_gets_the_note_only(tmp_path: Path, provider: str) -> None:
    """``supportsImages: false``: the text note, as before, and no image anywhere in the body."""
    seen, sent = await one_turn(tmp_path, provider, supportsImages=False)
    check_transcript_and_event(seen)
    body = json.dumps(sent)
    assert PIXEL_B64 not in body and NOTE in body
    assert "image_url" not in body and '"input_image"' not in body and '"base64"' not in body


async def test_a_resumed_session_sends_the_image_again_from_the_store_and_delete_removes_it(tmp_path: Path) -> None:
    """The journal names the image (no base64 in it); the bytes are a file
    beside it, read when the resumed session's next request is built; a fork
    gets its own copy; ``session/delete`` removes them with the session."""
    fake = FakeProvider()
    store = tmp_path / "store"
    config = {"models": {"m": model("anthropic", fake)}}
    try:
        async with served(tmp_path, config) as client:
            fake.queue(FIRST["anthropic"], THEN["anthropic"]())
            session = await client.open_session(model="m", tools=[WEATHER])
            await session.send("look")
            session_id = session.id
        journal = (store / f"{session_id}.jsonl").read_text()
        assert PIXEL_SHA in journal and PIXEL_B64 not in journal
        assert (store / f"{session_id}.media" / PIXEL_SHA).read_bytes() == PIXEL

        async with served(tmp_path, config) as client:
            fake.queue(THEN["anthropic"]())
            resumed = await client.resume_session(session_id)
            await resumed.send("and now?")
            history = fake.received[-1].body["messages"]
            results = [b for m in history if m["role"] == "user" and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
            assert results[0]["content"][1]["source"]["data"] == PIXEL_B64
            fork = await resumed.fork()
            assert (store / f"{fork.id}.media" / PIXEL_SHA).read_bytes() == PIXEL
            await resumed.delete()
            assert not (store / f"{session_id}.media").exists()
            assert (store / f"{fork.id}.media" / PIXEL_SHA).exists()
    finally:
        fake.close()


async def test_an_unreadable_image_block_stays_a_note(tmp_path: Path) -> None:
    """Data that is not base64 is kept as nothing: the note stays, no media is named."""
    bad = {"outcome": "ok", "content": [{"type": "image", "mimeType": "image/png", "data": "%%% not base64 %%%"}]}
    seen, body = await one_turn(tmp_path, "anthropic", answer=bad)
    [output] = [e["entry"] for e in seen if e["type"] == "entryAppended" and e["entry"]["type"] == "toolOutput"]
    assert "media" not in output and "bytes of base64 image data not shown" in json.dumps(output["content"])
    [result] = body["messages"][-1]["content"]
    assert isinstance(result["content"], str)


FASTMCP_PYTHON = _python_with("fastmcp", None)


@pytest.mark.skipif(FASTMCP_PYTHON is None, reason="fastmcp is not installed")
@pytest.mark.time_bound(120)  # fastmcp takes seconds to start on a loaded machine
async def test_an_mcp_servers_image_reaches_the_model_and_the_client(tmp_path: Path) -> None:
    """fastmcp's ``Image`` result: ``toolCallFinished.media`` carries it, the
    entry names it, and the model's request holds it (the dump of a scripted
    model's request shows its size)."""
    assert FASTMCP_PYTHON is not None
    server = {"name": "fm", "command": FASTMCP_PYTHON, "args": [str(HERE / "mcp_fastmcp_server.py")]}
    dump = tmp_path / "dump.jsonl"
    async with spawn_real(tmp_path, args=["--dump-requests", str(dump)]) as client:
        events = client.notifications("session/event")
        session = await client.open_session({
            "model": {"provider": "scripted", "script": [{"toolCalls": [call("mcp__fm__screenshot")]}, {"text": ["seen"]}]},
            "mcpServers": [server]})
        await wait_status(events, "fm", "ready")
        seen = await turn_events(session, events, "look")
    check_transcript_and_event(seen)
    last = json.loads(dump.read_text().splitlines()[-1])["request"]["messages"]
    [tool] = [m for m in last if m["role"] == "tool"]
    assert tool["images"] == [{"mimeType": "image/png", "bytes": len(PIXEL)}]
    # The images again after the round trip's tool results, for an API whose tool results take text only.
    assert last[-1] == {"role": "toolResultImages", "images": [{"mimeType": "image/png", "bytes": len(PIXEL)}]}


@pytest.mark.skipif(FASTMCP_PYTHON is None, reason="fastmcp is not installed")
@pytest.mark.time_bound(120)  # fastmcp takes seconds to start on a loaded machine
async def test_the_editor_gets_an_image_content_block_in_the_tool_call_update(tmp_path: Path) -> None:
    """``agentrpc acp``: the MCP server's image is an ACP ``image`` content
    block of the call's last ``tool_call_update``, after its text (the SDK's
    models check the frame)."""
    import asyncio

    from acp import text_block
    from acp.schema import McpServerStdio
    from test_acp import Editor, agent, scripted

    assert FASTMCP_PYTHON is not None
    editor = Editor()
    config = scripted({"toolCalls": [{"id": "call_s", "name": "mcp__fm__screenshot", "arguments": {}}]}, {"text": ["A red pixel."]})
    async with agent(tmp_path, config, editor) as (conn, cwd):
        server = McpServerStdio(name="fm", command=FASTMCP_PYTHON, args=[str(HERE / "mcp_fastmcp_server.py")], env=[])
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[server]), 90)
        answer = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("what is on the screen?")]), 90)
        assert answer.stop_reason == "end_turn"
    last = editor.tool_updates("call_s")[-1]
    assert last["status"] == "completed"
    blocks = [item["content"] for item in last["content"] if item["type"] == "content"]
    assert blocks[-1] == {"type": "image", "data": PIXEL_B64, "mimeType": "image/png"}
    assert blocks[0]["type"] == "text" and NOTE in blocks[0]["text"]


def sessions(store: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    """``agentrpc sessions ARGS --store STORE``, bounded."""
    import subprocess

    assert BINARY is not None
    return subprocess.run([str(BINARY), "sessions", *args, "--store", str(store)], capture_output=True, text=True, timeout=TIMEOUT)


async def a_stored_session_with_an_image(tmp_path: Path, fake: FakeProvider, config: dict[str, Any]) -> str:
    """A session in ``tmp_path/store`` whose client tool returned ``PIXEL``; its id."""
    async with served(tmp_path, config) as client:
        fake.queue(FIRST["anthropic"], THEN["anthropic"]())
        session = await client.open_session(model="m", tools=[WEATHER])
        await session.send("look")
        return session.id


async def next_request_after_resume(
    tmp_path: Path, fake: FakeProvider, config: dict[str, Any], session_id: str,
) -> tuple[Any, list[dict[str, Any]], dict[str, Any] | None]:
    """Resumes ``session_id`` from ``tmp_path/store`` and sends one prompt: the
    resume's warnings, the tool_result blocks of the model request, and what
    ``session/getMedia`` answers for the image (None: not in the store)."""
    async with served(tmp_path, config) as client:
        fake.queue(THEN["anthropic"]())
        resumed = await client.resume_session(session_id)
        await resumed.send("and now?")
        got: dict[str, Any] | None
        try:
            got = await resumed.media(PIXEL_SHA)
        except InvalidParams as error:
            assert error.data.get("field") == "sha256" and "not in the store" in str(error)
            got = None
        history = fake.received[-1].body["messages"]
        results = [b for m in history if m["role"] == "user" and isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
        # session/getMedia: the image whole, as toolCallFinished carried it (None: not in the store).
        assert got is None or got == {"type": "image", "mimeType": "image/png", "data": PIXEL_B64}
        return resumed.warnings, results, got


async def test_an_exported_session_carries_its_images_into_another_store(tmp_path: Path) -> None:
    """``sessions export`` writes one media line per image (base64, its
    SHA-256); ``sessions import`` into a fresh store checks them and writes them
    back beside the journal, so the next turn's model request holds the image."""
    fake = FakeProvider()
    config = {"models": {"m": model("anthropic", fake)}}
    try:
        session_id = await a_stored_session_with_an_image(tmp_path, fake, config)
        exported = tmp_path / "exported.jsonl"
        done = sessions(tmp_path / "store", "export", session_id, "--out", str(exported))
        assert done.returncode == 0, done.stderr
        lines = [json.loads(line) for line in exported.read_text().splitlines()]
        assert [line["type"] for line in lines] == ["session", "snapshot", "media"]
        assert lines[2] == {"type": "media", "sha256": PIXEL_SHA, "data": PIXEL_B64}

        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        done = sessions(elsewhere / "store", "import", str(exported))
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"imported {session_id} with 1 image(s) or audio clip(s)"
        assert (elsewhere / "store" / f"{session_id}.media" / PIXEL_SHA).read_bytes() == PIXEL
        assert not [p.name for p in (elsewhere / "store").iterdir() if p.name.startswith(".import-media")]

        (elsewhere / "agentrpc.json").write_text(json.dumps(config))
        warnings, results, got = await next_request_after_resume(elsewhere, fake, config, session_id)
        assert not warnings and got is not None
        assert results[0]["content"][1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL_B64}}
    finally:
        fake.close()


async def test_an_import_refuses_media_that_do_not_match_or_are_missing(tmp_path: Path) -> None:
    """A media line whose data is not what its SHA-256 says, or an export that
    lacks an image its entries name (as one made before exports carried media):
    the import fails, saying which and why, and stores nothing. With
    ``--allow-missing-media`` it imports, warns, and ``session/resume`` says so
    (``warnings``, source ``media``): the model gets the note."""
    fake = FakeProvider()
    config = {"models": {"m": model("anthropic", fake)}}
    try:
        session_id = await a_stored_session_with_an_image(tmp_path, fake, config)
        exported = tmp_path / "exported.jsonl"
        assert sessions(tmp_path / "store", "export", session_id, "--out", str(exported)).returncode == 0
        header, snapshot, media = exported.read_text().splitlines()

        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        store = elsewhere / "store"
        changed = tmp_path / "changed.jsonl"
        other = base64.b64encode(PIXEL[:-1] + b"\x00").decode()
        changed.write_text("\n".join([header, snapshot, media.replace(PIXEL_B64, other)]) + "\n")
        done = sessions(store, "import", str(changed))
        assert done.returncode == 1
        assert f"line 3 (media): its data's SHA-256 is not {PIXEL_SHA}" in done.stderr
        assert sorted(p.name for p in store.iterdir() if not p.name.startswith(".")) == []

        without = tmp_path / "without.jsonl"
        without.write_text("\n".join([header, snapshot]) + "\n")
        done = sessions(store, "import", str(without))
        assert done.returncode == 1
        assert "does not carry the media its session names: 1 image(s) or audio clip(s)" in done.stderr
        assert f"image/png sha256 {PIXEL_SHA[:12]}" in done.stderr and "--allow-missing-media" in done.stderr
        assert not (store / f"{session_id}.jsonl").exists()

        done = sessions(store, "import", str(without), "--allow-missing-media")
        assert done.returncode == 0, done.stderr
        assert "warning" in done.stderr and PIXEL_SHA[:12] in done.stderr
        assert not (store / f"{session_id}.media").exists()

        (elsewhere / "agentrpc.json").write_text(json.dumps(config))
        warnings, results, got = await next_request_after_resume(elsewhere, fake, config, session_id)
        assert got is None
        [warning] = warnings
        assert warning.source == "media" and PIXEL_SHA[:12] in warning.message and "notes" in warning.message
        assert isinstance(results[0]["content"], str) and NOTE in results[0]["content"]
    finally:
        fake.close()


async def test_sessions_delete_and_prune_remove_the_media_and_a_fork_keeps_its_own_copy(tmp_path: Path) -> None:
    """A fork copies the media its entries name (each session owns its
    files), so ``agentrpc sessions delete`` of the source leaves the fork's
    image; ``sessions prune`` (retention's way) removes the fork's with it."""
    fake = FakeProvider()
    store = tmp_path / "store"
    config = {"models": {"m": model("anthropic", fake)}}
    try:
        session_id = await a_stored_session_with_an_image(tmp_path, fake, config)
        async with served(tmp_path, config) as client:
            fork = await (await client.resume_session(session_id)).fork()
            fork_id = fork.id
        assert (store / f"{fork_id}.media" / PIXEL_SHA).read_bytes() == PIXEL

        done = sessions(store, "delete", session_id)
        assert done.returncode == 0, done.stderr
        assert not (store / f"{session_id}.media").exists() and not (store / f"{session_id}.jsonl").exists()
        assert (store / f"{fork_id}.media" / PIXEL_SHA).read_bytes() == PIXEL

        done = sessions(store, "prune", "--older-than", "0s")
        assert done.returncode == 0, done.stderr
        assert f"deleted {fork_id}" in done.stdout
        assert not (store / f"{fork_id}.media").exists()
        assert not [p.name for p in store.iterdir() if p.name.endswith(".media")]
    finally:
        fake.close()


async def test_a_python_tools_image_reaches_the_client_as_event_entry_and_media(tmp_path: Path) -> None:
    """A ``@tool`` function that returns MCP content blocks: the stream's
    ``ToolCallFinished.media`` carries the image, the ``toolOutput`` entry
    names it, ``session.media(sha256)`` gives it back whole, and a digest the
    session does not name is ``InvalidParams``."""
    from agentrpc import ToolCallFinished, tool

    @tool
    def screenshot() -> list[dict[str, str]]:
        """Takes a screenshot."""
        return [{"type": "text", "text": "the screen:"}, {"type": "image", "mimeType": "image/png", "data": PIXEL_B64}]

    async with spawn_real(tmp_path) as client:
        session = await client.open_session(
            model={"provider": "scripted", "script": [{"toolCalls": [call("screenshot")]}, {"text": ["A red pixel."]}]}, tools=[screenshot])
        finished = [event async for event in session.stream("look") if isinstance(event, ToolCallFinished)]
        image = {"type": "image", "mimeType": "image/png", "data": PIXEL_B64}
        assert [f.media for f in finished] == [[image]]
        [output] = (await session.transcript()).of_type("toolOutput")
        assert output["media"] == [{"type": "image", "mimeType": "image/png", "sha256": PIXEL_SHA, "size": len(PIXEL)}]
        assert await session.media(PIXEL_SHA) == image
        with pytest.raises(InvalidParams, match="no tool result of this session names media"):
            await session.media("0" * 64)


async def test_retention_removes_a_pruned_sessions_media_and_leaves_its_forks(tmp_path: Path) -> None:
    """``store.maxSessions`` at start (retention, in the background): the
    older session goes with its ``.media``; its fork keeps its own copy."""
    import asyncio

    fake = FakeProvider()
    store = tmp_path / "store"
    config: dict[str, Any] = {"models": {"m": model("anthropic", fake)}}
    try:
        session_id = await a_stored_session_with_an_image(tmp_path, fake, config)
        async with served(tmp_path, config) as client:
            fork_id = (await (await client.resume_session(session_id)).fork()).id
        async with served(tmp_path, {**config, "store": {"maxSessions": 1}}) as client:
            async with asyncio.timeout(TIMEOUT):
                while (await client.list_sessions()).ids != [fork_id]:
                    await asyncio.sleep(0.05)
        assert not (store / f"{session_id}.media").exists() and not (store / f"{session_id}.jsonl").exists()
        assert (store / f"{fork_id}.media" / PIXEL_SHA).read_bytes() == PIXEL
    finally:
        fake.close()
