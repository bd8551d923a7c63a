"""Compaction (docs/protocol.md, "Compaction"), through the real binary: a long
conversation against a model that counts what it is sent and refuses what
does not fit its window runs to the end, compacted automatically, recorded
into a model cassette and replayed from it; an overflow is compacted and
retried once; a preview changes nothing; a compaction is undone exactly, in
the same process and after a restart; a long turn's oldest tool outputs are
elided first; the running turn is never summarized."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrpc import AgentRPCError, Cassette, Client

from conftest import real_binary
from fake_provider import Canned, FakeProvider

BINARY = real_binary()
TIMEOUT = 30.0
SECRET = "sk-test-compaction"

pytestmark = pytest.mark.skipif(BINARY is None, reason="no agentrpc binary: run `swift build` or set AGENTRPC_BIN")

#: The fake model's window, and how it counts: a quarter of the bytes of the
#: request's messages as JSON (not the engine's estimate, which it never sees).
WINDOW = 4000


def counted_tokens(body: dict[str, Any]) -> int:
    return len(json.dumps(body.get("messages", []))) // 4


def openai_answer(text: str, prompt_tokens: int, completion_tokens: int) -> Canned:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": text}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return Canned(200, {"Content-Type": "text/event-stream"}, body.encode())


def too_long(tokens: int) -> Canned:
    return Canned.error(400, {"error": {
        "message": f"This model's maximum context length is {WINDOW} tokens. However, your messages resulted in {tokens} tokens.",
        "type": "invalid_request_error", "code": "context_length_exceeded"}})


class WindowedModel:
    """A model with a 4,000-token window: it refuses a request that does not
    fit, answers a summary request with a short summary, and otherwise says
    which question it answers, at some length."""

    def __init__(self) -> None:
        self.refused = 0
        self.summaries = 0

    def __call__(self, body: dict[str, Any]) -> Canned:
        tokens = counted_tokens(body)
        if tokens > WINDOW:
            self.refused += 1
            return too_long(tokens)
        last = body["messages"][-1]["content"]
        if last == "Write the summary now.":
            self.summaries += 1
            return openai_answer(f"Summary {self.summaries}: the user asked numbered questions about rivers.", tokens, 20)
        text = f"Here is what I know about {last[:20]}: " + "the river runs long and wide. " * 8
        return openai_answer(text, tokens, len(text) // 4)


def windowed_config(tmp_path: Path, fake: FakeProvider) -> None:
    config = {"models": {"m": {"provider": "openai", "model": "windowed-test-model", "baseURL": fake.base_url + "/v1",
                               "apiKeyEnv": "TEST_PROVIDER_KEY", "contextWindowTokens": WINDOW}}}
    (tmp_path / "agentrpc.json").write_text(json.dumps(config))


async def long_conversation(client: Client, turns: int) -> tuple[list[str], list[dict[str, Any]]]:
    """Sends `turns` prompts; returns the answers and the contextCompacted events."""
    events = client.notifications("session/event")
    session = await client.open_session(model="m")
    answers = []
    for n in range(turns):
        result = await session.send(f"Question {n}: tell me about river number {n}, its length, its sources and its towns.")
        answers.append(result["message"]["text"])
    compactions = [n.params["event"] async for n in _until_turn_ended(events, count=turns) if n.params["event"]["type"] == "contextCompacted"]
    state = (await session.state()).raw
    assert state["contextWindowTokens"] == WINDOW and state["contextTokens"] <= WINDOW
    return answers, compactions


@pytest.mark.time_bound(240)
async def test_a_300_turn_conversation_in_a_4000_token_window_runs_to_the_end(tmp_path: Path) -> None:
    model = WindowedModel()
    fake = FakeProvider(responder=model)
    windowed_config(tmp_path, fake)
    cassette = tmp_path / "long.cassette.jsonl"
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, args=["--ephemeral"], env={"TEST_PROVIDER_KEY": SECRET},
                                request_timeout=TIMEOUT, cassette=Cassette(cassette, mode="record")) as client:
            recorded, compactions = await long_conversation(client, 300)
    finally:
        fake.close()
    # Never refused: every compaction came before the window was passed.
    assert model.refused == 0
    assert len(recorded) == 300 and all(text.startswith("Here is what I know about Question") for text in recorded)
    assert len(compactions) >= 5 and {c["trigger"] for c in compactions} == {"threshold"}
    assert all(c["tokensAfter"] < c["tokensBefore"] and c["entriesRemoved"] > 0 for c in compactions)
    assert model.summaries == len(compactions)

    # The same conversation from the cassette alone: the same requests, so the same answers.
    async with Client.spawn(binary=BINARY, cwd=tmp_path, args=["--ephemeral"], request_timeout=TIMEOUT,
                            cassette=Cassette(cassette, mode="replay")) as client:
        replayed, again = await long_conversation(client, 300)
    assert replayed == recorded and len(again) == len(compactions)


async def test_an_overflow_is_compacted_and_retried_once(tmp_path: Path) -> None:
    """The provider refuses the round trip: the conversation is compacted and
    the round trip sent again; a second refusal of the same round trip ends
    the turn (no second compaction)."""
    model = WindowedModel()
    fake = FakeProvider(responder=model)
    windowed_config(tmp_path, fake)
    try:
        async with Client.spawn(binary=BINARY, cwd=tmp_path, args=["--ephemeral"], env={"TEST_PROVIDER_KEY": SECRET},
                                request_timeout=TIMEOUT) as client:
            events = client.notifications("session/event")
            session = await client.open_session(model="m", compaction={"keepLast": 2})
            for n in range(4):
                await session.send(f"Question {n}")
            sent = len(fake.received)
            fake.queue(too_long(5000))
            result = await session.send("Question 4")
            assert result["message"]["text"].startswith("Here is what I know about Question 4")
            # The refused round trip, the summary request, the round trip again.
            assert len(fake.received) == sent + 3
            assert fake.received[sent + 1].body["messages"][-1]["content"] == "Write the summary now."
            assert fake.received[sent + 2].body == fake.received[sent].body | {"messages": fake.received[sent + 2].body["messages"]}
            compacted = [n.params["event"] async for n in _until_turn_ended(events, count=5) if n.params["event"]["type"] == "contextCompacted"]
            assert [c["trigger"] for c in compacted] == ["overflow"]

            fake.queue(too_long(5000), too_long(5000))
            with pytest.raises(AgentRPCError) as failure:
                await session.send("Question 5")
            assert failure.value.kind == "providerError" and failure.value.data["provider"]["code"] == "contextLengthExceeded"
    finally:
        fake.close()


async def _until_turn_ended(events: Any, count: int) -> Any:
    ended = 0
    async for note in events:
        yield note
        if note.params["event"]["type"] == "turnEnded":
            ended += 1
            if ended == count:
                return


def scripted_session(turns: int, **compaction: Any) -> dict[str, Any]:
    """A scripted conversation model and a scripted summarizer."""
    model = {"provider": "scripted", "script": [{"text": [f"answer {i}"], "usage": {"inputTokens": 10 * i, "outputTokens": 2}} for i in range(turns)]}
    summarizer = {"provider": "scripted", "model": "summarizer",
                  "script": [{"text": [f"summary {i}"], "usage": {"inputTokens": 7, "outputTokens": 3}} for i in range(4)]}
    return {"model": model, "compaction": {"model": summarizer, **compaction}}


async def test_a_preview_changes_nothing_and_a_compaction_is_undone_exactly(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with Client.spawn(binary=BINARY, args=["--store", str(store)], request_timeout=TIMEOUT) as client:
        session = await client.open_session(scripted_session(6, keepLast=2))
        for n in range(3):
            await session.send(f"q{n}")
        before = (await session.transcript()).raw
        preview = await client.request("session/compact", {"sessionId": session.id, "preview": True})
        assert preview["preview"] is True and preview["summary"] == "summary 0" and preview["entriesRemoved"] == 4
        assert "entryId" not in preview and preview["revision"] == before["revision"]
        assert (await session.transcript()).raw == before

        done = await client.request("session/compact", {"sessionId": session.id, "instructions": "Keep the numbers."})
        compacted = (await session.transcript()).raw
        assert done["revision"] == before["revision"] + 1 and done["entriesRemoved"] == 4
        assert [e["type"] for e in compacted["entries"]] == ["summary", "prompt", "response"]
        assert compacted["entries"][0] == {"id": done["entryId"], "type": "summary", "text": "summary 1"}
        # The summary's request and both compactions count in the totals.
        totals = (await session.state()).raw["usageTotals"]
        assert totals["inputTokens"] == 0 + 10 + 20 + 7 + 7 and totals["outputTokens"] == 3 * 2 + 3 + 3
        session_id = session.id

    # The compaction is stored: a new process loads it, and undoes it exactly.
    async with Client.spawn(binary=BINARY, args=["--store", str(store)], request_timeout=TIMEOUT) as client:
        session = await client.resume_session(session_id)
        assert (await session.transcript()).raw["entries"] == compacted["entries"]
        undone = await client.request("session/rewind", {"sessionId": session.id, "compaction": done["entryId"], "undo": False})
        assert undone["removedEntries"] == [done["entryId"]] and undone["restoredEntries"] == [e["id"] for e in before["entries"][:4]]
        restored = (await session.transcript()).raw
        assert restored["entries"] == before["entries"] and restored["revision"] == done["revision"] + 1
        # Once undone it is gone: a second undo has nothing to undo.
        with pytest.raises(AgentRPCError) as failure:
            await client.request("session/rewind", {"sessionId": session.id, "compaction": done["entryId"], "undo": False})
        assert failure.value.kind == "invalidParams" and failure.value.data["field"] == "compaction"


async def test_a_rewind_to_a_summarized_turn_puts_it_back_first() -> None:
    async with Client.spawn(binary=BINARY, args=["--ephemeral"], request_timeout=TIMEOUT) as client:
        session = await client.open_session(scripted_session(6, keepLast=2))
        turns = [(await session.send(f"q{n}"))["turnId"] for n in range(3)]
        before = (await session.transcript()).raw["entries"]
        compacted = await session.compact()
        assert compacted["entriesRemoved"] == 4
        rewound = await session.rewind(turn_id=turns[1], undo=False)
        assert (await session.transcript()).raw["entries"] == before[:2]
        assert rewound.restored_entries == [before[0]["id"], before[1]["id"]]


async def test_compaction_refuses_what_it_cannot_do() -> None:
    async with Client.spawn(binary=BINARY, args=["--ephemeral"], request_timeout=TIMEOUT) as client:
        session = await client.open_session(scripted_session(6, keepLast=2))
        await session.send("q0")
        # Two entries, both kept.
        with pytest.raises(AgentRPCError) as failure:
            await client.request("session/compact", {"sessionId": session.id})
        assert failure.value.kind == "invalidParams" and failure.value.data["field"] == "keepLast"
        with pytest.raises(AgentRPCError) as failure:
            await client.request("session/compact", {"sessionId": session.id, "keepLast": -1})
        assert failure.value.kind == "invalidParams"


async def test_a_long_turn_elides_its_oldest_tool_outputs_and_keeps_its_own_entries() -> None:
    """Within one turn nothing is summarized; when the context passes the
    threshold the turn's oldest tool outputs are replaced by a note, the
    latest call's output stays."""
    big = "x" * 2000
    script = [{"toolCalls": [{"name": "read", "id": f"c{i}"}], "usage": {"inputTokens": 300 + 400 * i, "outputTokens": 5}} for i in range(4)]
    script.append({"text": ["done"], "usage": {"inputTokens": 900, "outputTokens": 2}})
    model = {"provider": "scripted", "script": script, "contextWindowTokens": 2000}
    async with Client.spawn(binary=BINARY, args=["--ephemeral"], request_timeout=TIMEOUT) as client:
        client.on_request("tool/call", lambda params: {"outcome": "ok", "content": big})
        events = client.notifications("session/event")
        session = await client.open_session(model=model, tools=[{"name": "read"}])
        result = await session.send("read it all")
        assert result["message"]["text"] == "done"
        entries = (await session.transcript()).raw["entries"]
        outputs = [e for e in entries if e["type"] == "toolOutput"]
        assert len(entries) == 1 + 4 * 2 + 1 and entries[0]["type"] == "prompt"
        assert outputs[-1]["content"] == big
        elided = [o for o in outputs if o["content"] != big]
        assert elided and all("was elided to fit the context window" in o["content"] for o in elided)
        compacted = [n.params["event"] async for n in _until_turn_ended(events, count=1) if n.params["event"]["type"] == "contextCompacted"]
        assert compacted and all(c["trigger"] == "threshold" and c["entriesRemoved"] == 0 for c in compacted)
        assert sum(c["outputsElided"] for c in compacted) == len(elided)
