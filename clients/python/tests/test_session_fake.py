"""The Session handle sends the right method and params (fake server echoes them)."""

from __future__ import annotations

from typing import Any

from agentrpc import Client, Notification, Session

from conftest import spawn_fake


async def test_open_session_and_helpers_send_protocol_params() -> None:
    async with spawn_fake() as client:
        session = await client.open_session({"model": "gpt"}, instructions="Be brief.")
        assert isinstance(session, Session)
        assert (session.id, session.revision, session.active_profile) == ("s-1", 3, "default")
        assert (await client.create_session()).id == "s-2"

        async def last_sent(method: str) -> Any:
            seen = await client.request("test/received", {"method": method})
            return seen[-1]["params"]

        sid = {"sessionId": "s-1"}
        # The fake answers {method, params}, which is not a TurnResult: the typed
        # results come out empty, and what matters here is what was sent.
        await session.send("hi")
        assert await last_sent("session/send") == {**sid, "input": "hi"}
        await session.send({"text": "hi", "images": [{"path": "a.png"}]}, options={"temperature": 0})
        assert await last_sent("session/send") == {
            **sid, "input": {"text": "hi", "images": [{"path": "a.png"}]}, "options": {"temperature": 0}}
        await session.send("hi", temperature=0.5, max_output_tokens=10, limits={"max_tool_calls": 2})
        assert await last_sent("session/send") == {
            **sid, "input": "hi", "options": {"temperature": 0.5, "maxOutputTokens": 10, "limits": {"maxToolCalls": 2}}}
        await session.generate("list", {"type": "array"}, strict=True)
        assert await last_sent("session/generate") == {
            **sid, "input": "list", "schema": {"type": "array"}, "strict": True}
        await session.state()
        assert await last_sent("session/getState") == sid
        await session.transcript()
        assert await last_sent("session/getTranscript") == sid
        ops = [{"op": "truncateAfter", "id": None}]
        await session.mutate_transcript(ops, expected_revision=3)
        assert await last_sent("session/mutateTranscript") == {**sid, "operations": ops, "expectedRevision": 3}
        await session.set_properties({"mode": "plan"}, ["summary"])
        assert await last_sent("session/setProperties") == {**sid, "set": {"mode": "plan"}, "remove": ["summary"]}
        assert await session.cancel() is True

        # Methods that return nothing still reach the server with the right params.
        await session.approve("c-1")
        await session.deny("c-2", "not now")
        await session.confirm("c-3", approve=False)
        await session.delete()
        await client.delete_session("s-2")
        confirms = await client.request("test/received", {"method": "session/confirm"})
        assert [m["params"] for m in confirms] == [
            {**sid, "callId": "c-1", "decision": "approve"},
            {**sid, "callId": "c-2", "decision": "deny", "reason": "not now"},
            {**sid, "callId": "c-3", "decision": "deny"},
        ]
        assert len(await client.request("test/received", {"method": "session/delete"})) == 2

        resumed = await client.resume_session("s-1")
        assert resumed.id == "s-1"
        assert client.session("s-9").id == "s-9"


async def test_async_with_session_closes_it() -> None:
    async with spawn_fake() as client:
        async with await client.open_session() as session:
            pass
        closes = await client.request("test/received", {"method": "session/close"})
        assert [m["params"] for m in closes] == [{"sessionId": session.id}]


async def test_session_events_only_yield_that_session() -> None:
    def event(session_id: str, seq: int) -> dict[str, Any]:
        return {"method": "session/event",
                "params": {"sessionId": session_id, "seq": seq, "event": {"type": "textDelta", "delta": "x"}}}

    async with spawn_fake() as client:
        session: Session = await client.open_session()
        events = session.events()
        await client.request("test/notify", {"notifications": [
            event("s-1", 1), event("other", 1), {"method": "log", "params": "s-1"}, event("s-1", 2),
        ]})
        await client.close()
        seen: list[Notification] = [n async for n in events]
        assert [n.params["seq"] for n in seen] == [1, 2]
        assert isinstance(client, Client)
