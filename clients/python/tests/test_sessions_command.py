"""`agentrpc sessions` end to end on a temporary store (docs/protocol.md, "Durable sessions")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from agentrpc import Client, scripted

from conftest import REAL_BINARY, requires_real

pytestmark = requires_real

TIMEOUT = 20.0


def spawn(store: Path, **kwargs: Any) -> Any:
    kwargs.setdefault("request_timeout", TIMEOUT)
    kwargs.setdefault("shutdown_timeout", TIMEOUT)
    kwargs.setdefault("capabilities", {"tools": True})
    return Client.spawn(binary=REAL_BINARY, args=["--store", str(store)], **kwargs)


def sessions(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert REAL_BINARY is not None
    return subprocess.run([REAL_BINARY, "sessions", *args, "--store", str(store)], capture_output=True, text=True, timeout=TIMEOUT)


async def make_sessions(store: Path) -> list[str]:
    """Three stored sessions, oldest first: a tool exchange, then two chats."""
    async with spawn(store) as client:
        client.on_request("tool/call", lambda p: {"outcome": "ok", "content": {"celsius": 18}})
        weather = await client.create_session(
            model=scripted(
                {"text": ["Let me check."], "toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_1"}]},
                {"text": ["It is 18 °C in Paris."]}),
            tools=[{"name": "get_weather"}], title="Weather in Paris")
        await weather.send("Weather in Paris?")
        ids = [weather.id]
        for title in ("Second", "Third"):
            s = await client.create_session(model=scripted({"text": ["fine"]}), title=title)
            await s.send("hello")
            ids.append(s.id)
        return ids


async def test_list_show_and_json(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ids = await make_sessions(store)
    table = sessions(store, "list")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["ID", "UPDATED", "ENTRIES", "MODEL", "TITLE"]
    # Newest first.
    assert [line.split()[0] for line in lines[1:]] == ids[::-1]
    assert "Weather in Paris" in lines[3] and lines[3].split()[3] == "4"
    listed = json.loads(sessions(store, "list", "--json").stdout)
    assert [s["sessionId"] for s in listed] == ids[::-1] and listed[2]["entryCount"] == 4 and listed[2]["title"] == "Weather in Paris"
    assert [s["sessionId"] for s in json.loads(sessions(store, "list", "--json", "--query", "weather").stdout)] == [ids[0]]

    shown = sessions(store, "show", ids[0])
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "Weather in Paris?" in text and "Let me check." in text
    assert 'tool call get_weather [call_1]: {"city":"Paris"}' in text
    assert 'tool get_weather [call_1] ok: {"celsius":18}' in text
    assert "It is 18 °C in Paris." in text
    raw = json.loads(sessions(store, "show", ids[0], "--json").stdout)
    async with spawn(store) as client:
        await client.resume_session(ids[0])
        assert raw == (await client.get_transcript(ids[0]))["entries"]


async def test_unknown_torn_and_locked_sessions(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ids = await make_sessions(store)
    unknown = sessions(store, "show", "s-never-was")
    assert unknown.returncode == 1 and "no session 's-never-was'" in unknown.stderr
    gone = sessions(store, "delete", "s-never-was")
    assert gone.returncode == 1 and "no session" in gone.stderr
    assert sessions(store, "show", "../etc").returncode == 1

    # A journal cut short by a crash: shown up to the torn line, with a warning.
    with open(store / f"{ids[1]}.jsonl", "ab") as journal:
        journal.write(b'{"type":"entryAppended","at":1,"entry":{"id":"e9","type":"pro')
    torn = sessions(store, "show", ids[1])
    assert torn.returncode == 0 and "cut short by a crash" in torn.stdout and "hello" in torn.stdout
    assert ids[1] in sessions(store, "list").stdout

    async with spawn(store) as holder:
        await holder.resume_session(ids[2])
        locked = sessions(store, "delete", ids[2])
        assert locked.returncode == 1
        assert f"session '{ids[2]}' is loaded by another agentrpc process (pid {holder.pid})" in locked.stderr
        assert f"[loaded by pid {holder.pid}]" in sessions(store, "list").stdout
        assert (await holder.get_state(ids[2]))["entryCount"] == 2
    assert (store / f"{ids[2]}.jsonl").exists()


async def test_delete_and_prune_need_an_id_or_an_age_and_skip_a_loaded_session(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ids = await make_sessions(store)
    assert sessions(store, "delete").returncode == 2
    helped = sessions(store, "--help")
    assert helped.returncode == 0 and "agentrpc sessions prune --older-than AGE" in helped.stdout
    refused = sessions(store, "prune")
    assert refused.returncode == 2 and "--older-than" in refused.stderr
    assert sessions(store, "prune", "--older-than", "soon").returncode == 2
    # Nothing is 30 days old.
    kept = sessions(store, "prune", "--older-than", "30d")
    assert kept.returncode == 0 and "0 session(s) deleted" in kept.stdout
    dry = sessions(store, "prune", "--older-than", "0s", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.count("would delete") == 3
    assert all((store / f"{i}.jsonl").exists() for i in ids)

    async with spawn(store) as holder:
        await holder.resume_session(ids[0])
        pruned = sessions(store, "prune", "--older-than", "0s")
        assert pruned.returncode == 0, pruned.stderr
        assert f"skipped {ids[0]}: loaded by another agentrpc process (pid {holder.pid})" in pruned.stdout
        assert "2 session(s) deleted, 1 skipped" in pruned.stdout
        assert (await holder.list_sessions()).ids == [ids[0]]
    assert [p.name for p in store.glob("*.jsonl")] == [f"{ids[0]}.jsonl"]
    deleted = sessions(store, "delete", ids[0])
    assert deleted.returncode == 0 and deleted.stdout.strip() == f"deleted {ids[0]}"
    assert json.loads(sessions(store, "list", "--json").stdout) == []


async def test_export_then_import_into_another_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    other = tmp_path / "other"
    ids = await make_sessions(store)
    exported = sessions(store, "export", ids[0])
    assert exported.returncode == 0
    lines = exported.stdout.splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["session", "snapshot"]
    file = tmp_path / "weather.jsonl"
    assert sessions(store, "export", ids[0], "--out", str(file)).returncode == 0
    imported = sessions(other, "import", str(file))
    assert imported.returncode == 0 and imported.stdout.strip() == f"imported {ids[0]}"
    again = sessions(other, "import", str(file))
    assert again.returncode == 1 and "already in" in again.stderr
    async with spawn(store) as first:
        await first.resume_session(ids[0])
        before = await first.get_transcript(ids[0])
    async with spawn(other) as second:
        resumed = await second.resume_session(ids[0])
        assert resumed.id == ids[0]
        assert await second.get_transcript(ids[0]) == before
        assert (await second.list_sessions()).sessions[0].title == "Weather in Paris"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "nonsense"}\n')
    refused = sessions(other, "import", str(bad))
    assert refused.returncode == 1 and "not a session header" in refused.stderr


def write_journal(store: Path, session_id: str, at_ms: int, prompt: str) -> None:
    """A one-turn journal in the documented format, last updated at ``at_ms``."""
    turn = f"t-{session_id}-1"
    lines = [
        {"type": "session", "format": 1, "sessionId": session_id, "createdAt": at_ms, "config": {"model": {"provider": "scripted", "script": [{"text": ["ok"]}]}}},
        {"type": "turnStarted", "at": at_ms, "turnId": turn, "number": 1},
        {"type": "entryAppended", "at": at_ms, "nextEntry": 2, "entry": {"id": "e1", "turnId": turn, "type": "prompt", "text": prompt}},
        {"type": "entryAppended", "at": at_ms, "nextEntry": 3, "entry": {"id": "e2", "turnId": turn, "type": "response", "profile": "default", "text": "ok"}},
        {"type": "turnEnded", "at": at_ms, "turnId": turn, "status": "completed", "stopReason": "completed", "undo": "none", "usage": {}},
    ]
    store.mkdir(mode=0o700, exist_ok=True)
    (store / f"{session_id}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


async def test_retention_prunes_at_start_in_the_background_and_skips_a_loaded_session(tmp_path: Path) -> None:
    import asyncio
    import time

    store = tmp_path / "store"
    now = int(time.time() * 1000)
    day = 86_400_000
    for i in range(6):
        write_journal(store, f"s-old{i}", now - (40 + i) * day, f"old {i}")
    for i in range(5):
        write_journal(store, f"s-new{i}", now - i * day, f"new {i}")
    config = tmp_path / "agentrpc.json"
    config.write_text(json.dumps({"store": {"maxAgeDays": 30, "maxSessions": 4}}))
    async with spawn(store) as holder:
        await holder.resume_session("s-old0")
        async with Client.spawn(
                binary=REAL_BINARY, args=["--store", str(store), "--config", str(config), "--log-level", "info"],
                request_timeout=TIMEOUT, shutdown_timeout=TIMEOUT) as pruning:
            async def remaining() -> list[str]:
                return (await pruning.list_sessions()).ids

            async with asyncio.timeout(TIMEOUT):
                while len(await remaining()) > 5:
                    await asyncio.sleep(0.05)
            # The four newest, and the old one another process has loaded.
            assert await remaining() == ["s-new0", "s-new1", "s-new2", "s-new3", "s-old0"]
            async with asyncio.timeout(TIMEOUT):
                while "removed 6 session(s), skipped 1 loaded" not in pruning.stderr_tail:
                    await asyncio.sleep(0.05)
            assert f"store retention: skipped s-old0, loaded by pid {holder.pid}" in pruning.stderr_tail
        assert (await holder.get_state("s-old0"))["entryCount"] == 2
    assert sorted(p.name for p in store.glob("*.jsonl")) == [f"s-new{i}.jsonl" for i in range(4)] + ["s-old0.jsonl"]


async def test_bad_retention_values_are_configuration_errors(tmp_path: Path) -> None:
    config = tmp_path / "agentrpc.json"
    config.write_text(json.dumps({"store": {"maxAgeDays": 0}}))
    assert REAL_BINARY is not None
    run = subprocess.run([REAL_BINARY, "--store", str(tmp_path / "store"), "--config", str(config)], input="", capture_output=True, text=True, timeout=TIMEOUT)
    assert run.returncode != 0 and "store.maxAgeDays" in run.stderr
