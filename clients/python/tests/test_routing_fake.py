"""How the client answers tool/call, tool/undo and confirmation/request (fake server).

The fake lets a test send any server request and read the client's raw
answer, which pins the routing rules: a session's own tools first, then an
``on_request`` handler, else a ``methodNotFound`` error naming the tool.
"""

from __future__ import annotations

from typing import Any

from agentrpc import ConfirmationCall, Undoable, tool

from conftest import spawn_fake


@tool
def add(a: int, b: int) -> int:
    """Adds."""
    return a + b


@tool
def unserialisable() -> Any:
    """Returns something JSON cannot hold."""
    return {1, 2}


def tool_call(name: str, arguments: Any, session: str = "s-1", call: str = "c1", turn: str = "t1") -> dict[str, Any]:
    return {"method": "tool/call", "params": {"sessionId": session, "turnId": turn, "callId": call, "name": name,
                                              "arguments": arguments, "revision": 1}}


async def ask(client: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The client's whole response message to a server request."""
    answer: dict[str, Any] = (await client.request("test/serverRequest", request))["response"]
    return answer


async def test_tool_calls_route_to_the_sessions_functions_then_to_handlers() -> None:
    async with spawn_fake() as client:
        session = await client.open_session(tools=[add, unserialisable, {"name": "raw"}])
        assert (await ask(client, tool_call("add", {"a": 1, "b": 2})))["result"] == {"outcome": "ok", "content": 3}
        # Arguments that do not fit the function become a failed outcome, not an error.
        failed = (await ask(client, tool_call("add", {"a": "x", "b": 2})))["result"]
        assert failed["outcome"] == "failed" and "a" in failed["content"]
        broken = (await ask(client, tool_call("unserialisable", {})))["error"]
        assert broken["data"]["kind"] == "internalError" and "no JSON form" in broken["message"]

        missing = (await ask(client, tool_call("raw", {})))["error"]
        assert missing["code"] == -32601 and "'raw'" in missing["message"] and session.id in missing["message"]
        other_session = (await ask(client, tool_call("add", {"a": 1, "b": 1}, session="s-other")))["error"]
        assert other_session["code"] == -32601

        client.on_request("tool/call", lambda params: {"outcome": "ok", "content": "handled " + params["name"]})
        assert (await ask(client, tool_call("raw", {})))["result"]["content"] == "handled raw"
        # The session's own function still wins for its tools.
        assert (await ask(client, tool_call("add", {"a": 2, "b": 2})))["result"]["content"] == 4

        # Functions can be attached to a handle later (e.g. after resume).
        @tool
        def raw() -> str:
            """Now a function."""
            return "function"

        session.add_tools(raw)
        assert (await ask(client, tool_call("raw", {})))["result"]["content"] == "function"
        resumed = await client.resume_session(session.id)
        assert resumed is session and set(resumed.tools) == {"add", "unserialisable", "raw"}


async def test_undo_tokens_are_opaque_called_once_and_forgotten_when_a_turn_does_not_commit() -> None:
    undone: list[str] = []

    @tool
    def step(name: str) -> Undoable:
        """Undoable."""
        return Undoable(name, undo=lambda: undone.append(name))

    async with spawn_fake() as client:
        await client.open_session(tools=[step])
        first = (await ask(client, tool_call("step", {"name": "a"}, call="c1")))["result"]
        second = (await ask(client, tool_call("step", {"name": "b"}, call="c2")))["result"]
        assert first["outcome"] == "ok" and first["content"] == "a"
        assert isinstance(first["undo"], str) and first["undo"] != second["undo"]

        def undo_request(token: Any) -> dict[str, Any]:
            return {"method": "tool/undo", "params": {"sessionId": "s-1", "turnId": "t1", "callId": "c2",
                                                      "name": "step", "undo": token}}

        assert (await ask(client, undo_request(second["undo"])))["result"] == {}
        assert undone == ["b"]
        # A token is used once; unknown tokens are not this client's.
        assert (await ask(client, undo_request(second["undo"])))["error"]["code"] == -32601
        # A committed turn keeps its tokens: session/rewind may still undo them.
        await client.request("test/notify", {"notifications": [{"method": "session/event", "params": {
            "sessionId": "s-1", "turnId": "t1", "seq": 1,
            "event": {"type": "turnEnded", "status": "completed", "undo": "committed"}}}]})
        assert (await ask(client, undo_request(first["undo"])))["result"] == {}
        assert undone == ["b", "a"]
        # A turn that did not commit forgets the rest: a late undo does nothing.
        third = (await ask(client, tool_call("step", {"name": "c"}, call="c3", turn="t2")))["result"]
        await client.request("test/notify", {"notifications": [{"method": "session/event", "params": {
            "sessionId": "s-1", "turnId": "t2", "seq": 2,
            "event": {"type": "turnEnded", "status": "cancelled", "undo": "rolledBack"}}}]})
        assert (await ask(client, undo_request(third["undo"])))["error"]["code"] == -32601
        assert undone == ["b", "a"]


async def test_on_confirm_declares_request_confirmations_and_answers_them() -> None:
    asked: list[ConfirmationCall] = []

    def decide(call: ConfirmationCall) -> Any:
        asked.append(call)
        return (False, "not today") if call.name == "rm" else True

    async with spawn_fake(on_confirm=decide, capabilities={"tools": True, "hooks": True}) as client:
        assert client.initialize_result is not None
        sent = client.initialize_result["receivedParams"]["capabilities"]
        assert sent == {"tools": True, "hooks": True, "confirmations": "request"}
        session = await client.open_session()

        def confirmation(name: str) -> dict[str, Any]:
            return {"method": "confirmation/request", "params": {
                "sessionId": session.id, "turnId": "t1", "callId": "c9", "name": name,
                "arguments": {"path": "/"}, "reason": "guard"}}

        assert (await ask(client, confirmation("rm")))["result"] == {"decision": "deny", "reason": "not today"}
        assert (await ask(client, confirmation("ls")))["result"] == {"decision": "approve"}
        assert asked[0].arguments == {"path": "/"} and asked[0].reason == "guard" and asked[0].session is session

    async with spawn_fake() as client:
        assert client.initialize_result is not None
        assert client.initialize_result["receivedParams"]["capabilities"]["confirmations"] == "notify"
