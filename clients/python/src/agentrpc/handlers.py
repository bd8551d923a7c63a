"""The client's own answers to the server's requests.

A session's tool functions answer ``tool/call``, the undo callables they
returned answer ``tool/undo``, ``on_confirm`` answers ``confirmation/request``
(and the built-in flow's ``confirmationRequested`` events), ``on_ask_user``
answers ``user/ask`` and ``on_elicitation`` answers ``user/elicit``.
:class:`ServerRequests` holds what those answers need between calls: the
tool threads, the undo callables, the tool exceptions a turn's error is
chained to.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from .errors import AgentRPCError, InternalError, InvalidParams, MethodNotFound, ToolExecutorError, TransportClosed
from .rpc import JSONObject, RequestHandler
from .schema import to_json
from .tools import Conflict, Denied, Failed, Tool, ToolContext, UndoCallable, Undoable
from .types import DECISIONS, ConfirmationCall, Decision, Elicitation, UserQuestion

if TYPE_CHECKING:
    from .client import Client
    from .session import Session

__all__ = ["ConfirmHandler", "MAX_KEPT_UNDO_PER_SESSION", "ServerRequests"]

_log = logging.getLogger("agentrpc.client")

#: ``on_confirm``: called with a :class:`~agentrpc.ConfirmationCall`; returns (or
#: awaits to) a bool, or ``(bool, reason)``. Sync callbacks run in a worker thread.
ConfirmHandler: TypeAlias = Callable[[ConfirmationCall], Any]

#: Undo callables kept per session after their turns committed, for ``session/rewind``
#: (the server keeps as many records; older ones are dropped first).
MAX_KEPT_UNDO_PER_SESSION: Final = 1000

_UNANSWERABLE: Final = (
    "nothing can answer this confirmation: the client has no on_confirm (Client.spawn or open_session) "
    "and nobody reads the session's events to call session.confirm()"
)


@dataclass(slots=True)
class _UndoRecord:
    session_id: str
    turn_id: str
    call_id: str
    name: str
    undo: UndoCallable


class ServerRequests:
    """The answers a :class:`~agentrpc.Client` gives the server's requests itself."""

    def __init__(self, client: Client, max_workers: int) -> None:
        self._client = client
        # Plain (non-async) tool functions run here, at most max_workers at once:
        # tool/call requests are handled concurrently, and a blocking tool must
        # neither hold up the event loop nor start unbounded threads.
        self.tool_workers = concurrent.futures.ThreadPoolExecutor(max_workers, thread_name_prefix="agentrpc-tool")
        #: Undo callables by the opaque token sent to the server.
        self.undo: dict[str, _UndoRecord] = {}
        # The latest turn's tool exceptions per session: (turnId, {callId: exc}).
        self._tool_exceptions: dict[str, tuple[str, dict[str, BaseException]]] = {}

    def handler(self, method: str, params: Any) -> RequestHandler | None:
        """The client's own handler for a server request, when it owns the answer.

        Session tools registered through :meth:`Client.open_session` answer
        ``tool/call``; undo tokens this client issued answer ``tool/undo``;
        ``on_confirm`` answers ``confirmation/request``. Anything else goes to
        a handler from :meth:`Client.on_request`.
        """
        if not isinstance(params, dict):
            return None
        client = self._client
        if method == "tool/call":
            session = client._sessions.get(params.get("sessionId"))  # type: ignore[arg-type]
            name = params.get("name")
            tool = session._tools.get(name) if session is not None and isinstance(name, str) else None
            if session is None or tool is None:
                return None
            return lambda p: self._run_tool(session, tool, p)
        if method == "tool/undo":
            token = params.get("undo")
            if isinstance(token, str) and token in self.undo:
                return self._run_undo
            return None
        if method == "confirmation/request" and self._confirm_handler(params.get("sessionId")) is not None:
            return self._run_confirm
        if method == "user/ask" and client.on_ask_user is not None:
            return self._run_ask_user
        if method == "user/elicit" and client.on_elicitation is not None:
            return self._run_elicitation
        return None

    def forget_session(self, session_id: str) -> None:
        """The session is closed or deleted: its undo callables and tool exceptions go."""
        self._tool_exceptions.pop(session_id, None)
        for token, record in list(self.undo.items()):
            if record.session_id == session_id:
                del self.undo[token]

    def _confirm_handler(self, session_id: Any) -> ConfirmHandler | None:
        """The session's own ``on_confirm``, else the client's."""
        session = self._client._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is not None and session.on_confirm is not None:
            return session.on_confirm
        return self._client.on_confirm

    # -- tools -------------------------------------------------------------------

    async def _run_tool(self, session: Session, tool: Tool[..., Any], params: JSONObject) -> JSONObject:
        context = ToolContext(
            session_id=session.id,
            turn_id=str(params.get("turnId") or ""),
            call_id=str(params.get("callId") or ""),
            name=tool.name,
            revision=revision if isinstance(revision := params.get("revision"), int) else 0,
            idempotency_key=str(params.get("idempotencyKey") or ""),
            in_doubt=params.get("inDoubt") is True,
            attempt=attempt if isinstance(attempt := params.get("attempt"), int) else 1,
            session=session,
        )
        try:
            kwargs = tool.bind(params.get("arguments"))
        except ValueError as exc:
            # The server validated against the schema, so this is rare; the
            # model can still correct itself from a failed outcome.
            return {"outcome": "failed", "content": f"invalid arguments for {tool.name!r}: {exc}"}
        try:
            value = await tool.run(kwargs, context, self.tool_workers)
        except AgentRPCError:
            raise
        except Exception as exc:
            if (tool.on_exception or self._client.tool_exceptions) == "report":
                _log.debug("tool %r raised %s: %s (reported to the model)", tool.name, type(exc).__name__, exc,
                           exc_info=exc)
                return {"outcome": "failed", "content": f"{type(exc).__name__}: {exc}"}
            # Not a warning: the exception reaches the caller, chained to the
            # turn's ToolExecutorError (see attach_tool_exception).
            _log.debug("tool %r raised %s: %s", tool.name, type(exc).__name__, exc, exc_info=exc)
            self._remember_tool_exception(context, exc)
            raise InternalError(
                f"tool {tool.name!r} raised {type(exc).__name__}: {exc}",
                {"exceptionType": type(exc).__name__},
            ) from exc
        try:
            return self._tool_answer(context, value)
        except TypeError as exc:
            self._remember_tool_exception(context, exc)
            raise InternalError(f"tool {tool.name!r} returned a value with no JSON form: {exc}") from exc

    def _tool_answer(self, context: ToolContext, value: Any) -> JSONObject:
        if isinstance(value, Failed):
            return {"outcome": "failed", "content": to_json(value.content)}
        if isinstance(value, Denied):
            return {"outcome": "denied", "content": to_json(value.reason)}
        if isinstance(value, Conflict):
            return {"outcome": "conflict", "content": to_json(value.content)}
        if isinstance(value, Undoable):
            content = to_json(value.value)
            if not callable(value.undo):
                raise TypeError(f"Undoable.undo must be callable, got {value.undo!r}")
            token = f"undo-{uuid.uuid4().hex}"
            self.undo[token] = _UndoRecord(context.session_id, context.turn_id, context.call_id,
                                           context.name, value.undo)
            self._bound_kept_undo(context.session_id)
            return {"outcome": "ok", "content": content, "undo": token}
        return {"outcome": "ok", "content": to_json(value)}

    def _remember_tool_exception(self, context: ToolContext, exc: BaseException) -> None:
        turn_id, by_call = self._tool_exceptions.get(context.session_id, ("", {}))
        if turn_id != context.turn_id:
            by_call = {}
        by_call[context.call_id] = exc
        self._tool_exceptions[context.session_id] = (context.turn_id, by_call)

    def attach_tool_exception(self, session_id: str, error: ToolExecutorError) -> None:
        """Chain the Python exception a tool raised to the turn's ToolExecutorError."""
        turn_id, by_call = self._tool_exceptions.get(session_id, ("", {}))
        call_id = error.call_id
        if call_id is None or call_id not in by_call or (error.turn_id and error.turn_id != turn_id):
            return
        original = by_call.pop(call_id)
        error.tool_exception = original
        error.__cause__ = original

    # -- undo ----------------------------------------------------------------------

    async def _run_undo(self, params: JSONObject) -> JSONObject:
        token = params.get("undo")
        record = self.undo.pop(token, None) if isinstance(token, str) else None
        if record is None:
            raise InvalidParams(f"unknown undo token {token!r}")
        try:
            await call_off_loop(record.undo)
        except Exception as exc:
            _log.warning("undo of %r (call %s) raised %s: %s", record.name, record.call_id,
                         type(exc).__name__, exc, exc_info=exc)
            raise InternalError(f"undo of {record.name!r} raised {type(exc).__name__}: {exc}") from exc
        return {}

    def _bound_kept_undo(self, session_id: str) -> None:
        """Keeps at most MAX_KEPT_UNDO_PER_SESSION undo callables per session, dropping the oldest."""
        tokens = [token for token, record in self.undo.items() if record.session_id == session_id]
        for token in tokens[: max(0, len(tokens) - MAX_KEPT_UNDO_PER_SESSION)]:
            del self.undo[token]

    def forget_undo(self, session_id: Any, turn_id: Any) -> None:
        """A turn that did not commit ended: its undo records can no longer be called.

        A committed turn's records stay: ``session/rewind`` may still undo them.
        """
        if not self.undo:
            return
        for token, record in list(self.undo.items()):
            if record.session_id == session_id and record.turn_id == turn_id:
                del self.undo[token]

    # -- confirmations, questions, forms ---------------------------------------------

    async def _run_confirm(self, params: JSONObject) -> JSONObject:
        handler = self._confirm_handler(params.get("sessionId"))
        if handler is None:  # pragma: no cover - routed here only when set
            raise MethodNotFound("no on_confirm handler")
        return await self._decide(handler, params)

    async def _decide(self, handler: ConfirmHandler, params: JSONObject) -> JSONObject:
        """Ask ``handler`` about one confirmation; an exception in it denies, with its message."""
        session_id = str(params.get("sessionId") or "")
        call = ConfirmationCall(
            session_id=session_id,
            turn_id=str(params.get("turnId") or ""),
            call_id=str(params.get("callId") or ""),
            name=str(params.get("name") or ""),
            arguments=params.get("arguments"),
            reason=params.get("reason") if isinstance(params.get("reason"), str) else None,
            session=self._client._sessions.get(session_id),
        )
        try:
            return decision_answer(await call_off_loop(handler, call))
        except Exception as exc:
            # One line, no traceback: the denial and its reason are the report.
            reason = str(exc) or type(exc).__name__
            _log.warning("on_confirm for %s (call %s) raised %s: %s; the call is denied",
                         call.name, call.call_id, type(exc).__name__, reason)
            return {"decision": "deny", "reason": reason}

    def on_confirmation_requested(self, params: JSONObject, event: JSONObject, listened: bool) -> None:
        """The built-in flow's question: answer it with the session's handler, or deny it if nothing can.

        A session with its own ``on_confirm`` answers through ``session/confirm``.
        Without any handler the answer must come from whoever reads the
        session's events; when nobody does, waiting would hang the turn until
        the confirmation timeout, so the call is denied at once with a reason.
        """
        session_id = params.get("sessionId")
        call_id = event.get("callId")
        if not isinstance(session_id, str) or not isinstance(call_id, str):
            return
        handler = self._confirm_handler(session_id)
        if handler is None and listened:
            return

        async def answer() -> None:
            if handler is not None:
                question = {**event, "sessionId": session_id, "turnId": params.get("turnId")}
                decision = await self._decide(handler, question)
            else:
                _log.warning("session %s: %s needs confirmation, but there is no on_confirm and nothing reads "
                             "the session's events; denied", session_id, event.get("name"))
                decision = {"decision": "deny", "reason": _UNANSWERABLE}
            confirm: JSONObject = {"sessionId": session_id, "callId": call_id, **decision}
            try:
                await self._client.request("session/confirm", confirm)
            except (AgentRPCError, TransportClosed) as exc:
                # Settled meanwhile (timeout, cancel, another answer) or gone.
                _log.debug("session/confirm for %s not applied: %s", call_id, exc)

        self._client._peer.run_in_background(answer())

    async def _run_ask_user(self, params: JSONObject) -> JSONObject:
        handler = self._client.on_ask_user
        if handler is None:  # pragma: no cover - routed here only when set
            raise MethodNotFound("no on_ask_user handler")
        session_id = str(params.get("sessionId") or "")
        options = params.get("options")
        question = UserQuestion(
            session_id=session_id,
            turn_id=str(params.get("turnId") or ""),
            call_id=str(params.get("callId") or ""),
            question=str(params.get("question") or ""),
            options=[o for o in options if isinstance(o, str)] if isinstance(options, list) else None,
            session=self._client._sessions.get(session_id),
        )
        answer = await call_off_loop(handler, question)
        if not isinstance(answer, str):
            raise TypeError(f"on_ask_user must return the answer as a str, not {answer!r:.80}")
        return {"answer": answer}

    async def _run_elicitation(self, params: JSONObject) -> JSONObject:
        handler = self._client.on_elicitation
        if handler is None:  # pragma: no cover - routed here only when set
            raise MethodNotFound("no on_elicitation handler")
        session_id = str(params.get("sessionId") or "")
        schema = params.get("requestedSchema")
        elicitation = Elicitation(
            session_id=session_id,
            turn_id=str(params.get("turnId") or ""),
            call_id=str(params.get("callId") or ""),
            server=str(params.get("server") or ""),
            message=str(params.get("message") or ""),
            requested_schema=dict(schema) if isinstance(schema, Mapping) else {},
            session=self._client._sessions.get(session_id),
        )
        answer = await call_off_loop(handler, elicitation)
        if isinstance(answer, Mapping):
            return {"action": "accept", "content": dict(answer)}
        if answer in ("decline", "cancel"):
            return {"action": answer}
        raise TypeError(f"on_elicitation must return the form's values (a mapping), 'decline' or 'cancel', not {answer!r:.80}")


async def call_off_loop(function: Callable[..., Any], *args: Any) -> Any:
    """Calls a user callback: a coroutine function is awaited; a plain one runs in
    a worker thread, since it may block (ask on the terminal), so the event loop
    stays free; an awaitable it returns is awaited too."""
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    result = await asyncio.to_thread(function, *args)
    if inspect.isawaitable(result):
        result = await result
    return result


def decision_answer(answer: Any) -> JSONObject:
    """An ``on_confirm`` answer as ``confirmation/request``'s result."""
    if isinstance(answer, Decision):
        return answer.to_wire()
    reason: Any = None
    if isinstance(answer, tuple) and len(answer) == 2:
        answer, reason = answer
    if isinstance(answer, bool):
        decision = "approve" if answer else "deny"
    elif answer in DECISIONS:
        decision = answer
    else:
        raise TypeError(f"on_confirm must return a bool, (bool, reason) or a Decision, not {answer!r:.80}")
    result: JSONObject = {"decision": decision}
    if reason is not None:
        result["reason"] = str(reason)
    return result
