"""The connection to an agentrpc server, as its user sees it.

:class:`Client` owns one server process: the handshake, sessions, the
server's notifications (fanned out to streams and callbacks) and requests
(routed to a handler). The JSON-RPC mechanics are :class:`~agentrpc.rpc.Peer`'s
(no caller waits forever: every pending request ends with an answer, a
:class:`~agentrpc.errors.RequestTimeout`, or a
:class:`~agentrpc.errors.TransportClosed` when the connection goes away); the
answers the client gives itself (tools, undo, confirmations, questions, forms)
are :class:`~agentrpc.handlers.ServerRequests`'.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import os
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Protocol, TypeAlias

from ._version import __version__
from .cassette import Cassette, cassette_args
from .discovery import find_binary
from .config import MCPServer, session_config
from .errors import AgentRPCError, AgentRPCException, InternalError, MethodNotFound, TransportClosed
from .handlers import ConfirmHandler, ServerRequests
from .rpc import JSONObject, Peer, RequestHandler
from .session import Session
from .tools import DEFAULT_MAX_WORKERS, TOOL_EXCEPTION_POLICIES, Tool, ToolExceptionPolicy
from .transport import ProcessTransport
from .types import ContextDiagnostic, Elicitation, InterruptedTurn, Limits, ParkedTurn, SessionList, UserQuestion

__all__ = [
    "PROTOCOL_VERSION",
    "DEFAULT_CAPABILITIES",
    "DEFAULT",
    "Client",
    "Notification",
    "NotificationStream",
    "NotificationCallback",
    "RequestHandler",
    "ConfirmHandler",
    "JSONObject",
]

_log = logging.getLogger("agentrpc.client")

#: The protocol version this client speaks (docs/protocol.md §2).
PROTOCOL_VERSION: Final = 1
#: Capabilities sent by default: this client runs tools and gets confirmations
#: as notifications (answered with ``session/confirm``).
DEFAULT_CAPABILITIES: Final[Mapping[str, Any]] = {"tools": True, "confirmations": "notify"}

#: Called with a notification's ``params``; may be a coroutine function.
NotificationCallback: TypeAlias = Callable[[Any], "None | Awaitable[None]"]
#: ``on_ask_user``: called with a :class:`~agentrpc.UserQuestion`; returns (or
#: awaits to) the answer text. Sync callbacks run in a worker thread.
AskUserHandler: TypeAlias = Callable[[UserQuestion], Any]
#: ``on_elicitation``: called with an :class:`~agentrpc.Elicitation`; returns (or
#: awaits to) the form's values (a mapping), or ``"decline"`` / ``"cancel"``.
#: Sync callbacks run in a worker thread.
ElicitationHandler: TypeAlias = Callable[[Elicitation], Any]

class _Default(enum.Enum):
    """Sentinel type: "use the client's default", distinct from ``None`` (= no limit)."""

    DEFAULT = enum.auto()


#: Pass as ``timeout`` to use the client's ``request_timeout``.
DEFAULT: Final = _Default.DEFAULT


@dataclass(frozen=True, slots=True)
class Notification:
    """A notification received from the server."""

    method: str
    params: Any


_END = object()


class _Subscriber(Protocol):
    """What the reader fans notifications out to (NotificationStream, TurnStream)."""

    def _push(self, note: Notification) -> bool: ...

    def _end(self) -> None: ...


class NotificationStream(AsyncIterator[Notification]):
    """An async iterator over notifications, optionally of one method.

    It subscribes when created (not when first iterated), so nothing sent in
    between is lost. It ends when the connection closes or :meth:`close` is
    called. The queue is unbounded so a slow consumer never stalls the
    reader (and with it every other request); consume or close it.
    """

    def __init__(
        self,
        client: Client,
        method: str | None,
        predicate: Callable[[Notification], bool] | None = None,
    ) -> None:
        self._client = client
        self.method = method
        self._predicate = predicate
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._done = False
        client._streams.add(self)
        if client.closed:
            self._end()

    def _push(self, note: Notification) -> bool:
        """Queue ``note`` if this stream wants it; True if it did."""
        if self._done or (self.method is not None and self.method != note.method):
            return False
        if self._predicate is not None:
            try:
                if not self._predicate(note):
                    return False
            except Exception:
                _log.exception("notification stream predicate failed")
                return False
        self._queue.put_nowait(note)
        return True

    def _end(self) -> None:
        if not self._done:
            self._done = True
            self._queue.put_nowait(_END)
        self._client._streams.discard(self)

    def close(self) -> None:
        """Stop receiving; iteration ends after what is already queued."""
        self._end()

    def __aiter__(self) -> NotificationStream:
        return self

    async def __anext__(self) -> Notification:
        item = await self._queue.get()
        if item is _END:
            # Leave the marker for any other task iterating the same stream.
            self._queue.put_nowait(_END)
            raise StopAsyncIteration
        assert isinstance(item, Notification)
        return item

    async def __aenter__(self) -> NotificationStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class _SpawnContext:
    """What :meth:`Client.spawn` returns: use with ``async with`` or ``await``.

    ``async with`` closes the client on exit; a plain ``await`` hands the
    caller an open client to close with :meth:`Client.close`.
    """

    def __init__(self, factory: Callable[[], Awaitable[Client]]) -> None:
        self._factory = factory
        self._client: Client | None = None

    def __await__(self) -> Generator[Any, None, Client]:
        return self._factory().__await__()

    async def __aenter__(self) -> Client:
        self._client = await self._factory()
        return self._client

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._client is not None:
            await self._client.close()


class _SessionOpening(Awaitable[Session]):
    """What :meth:`Client.open_session` returns: await it for the :class:`Session`.

    Using it as a session without ``await`` (``client.open_session(...).send``)
    raises a :class:`TypeError` that says so, instead of the puzzling
    ``can't send non-None value to a just-started coroutine`` a bare coroutine
    gives (its ``send`` is the coroutine protocol's, not the session's).
    """

    def __init__(self, factory: Callable[[], Awaitable[Session]]) -> None:
        self._factory = factory

    def __await__(self) -> Generator[Any, None, Session]:
        return self._factory().__await__()

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_") and hasattr(Session, name):
            raise TypeError(
                f"open_session() returns an awaitable, not a Session: write "
                f"`session = await client.open_session(...)` before using session.{name}"
            )
        raise AttributeError(name)


class Client:
    """A connection to one agentrpc server process.

    Create it with :meth:`spawn`. Requests may be issued concurrently from
    many tasks; the server answers them in any order.
    """

    def __init__(
        self,
        transport: ProcessTransport,
        *,
        request_timeout: float | None = None,
        shutdown_timeout: float = 5.0,
        on_confirm: ConfirmHandler | None = None,
        tool_exceptions: ToolExceptionPolicy = "fail_turn",
        on_ask_user: AskUserHandler | None = None,
        max_workers: int = DEFAULT_MAX_WORKERS,
        on_elicitation: ElicitationHandler | None = None,
    ) -> None:
        """Wrap a started transport; most callers want :meth:`spawn` instead."""
        _check_max_workers(max_workers)
        self._transport = transport
        #: Decides confirmations of sessions that have no ``on_confirm`` of their
        #: own (``confirmation/request`` when ``initialize`` declared
        #: ``confirmations: "request"``, which :meth:`spawn` does when given one).
        self.on_confirm = on_confirm
        if tool_exceptions not in TOOL_EXCEPTION_POLICIES:
            raise ValueError(f"tool_exceptions must be 'fail_turn' or 'report', not {tool_exceptions!r}")
        #: What a tool's uncaught exception does unless the tool says (``@tool(on_exception=...)``).
        self.tool_exceptions: ToolExceptionPolicy = tool_exceptions
        #: Answers ``user/ask`` (only sent if ``initialize`` declared ``askUser``,
        #: which :meth:`spawn` does when given one).
        self.on_ask_user = on_ask_user
        #: Answers ``user/elicit`` (only sent if ``initialize`` declared
        #: ``elicitation``, which :meth:`spawn` does when given one).
        self.on_elicitation = on_elicitation
        # Sessions this client opened or resumed: routes tool/call to their tools.
        self._sessions: dict[str, Session] = {}
        self.request_timeout = request_timeout
        self.shutdown_timeout = shutdown_timeout
        self._notification_callbacks: dict[str, list[NotificationCallback]] = {}
        self._request_handlers: dict[str, RequestHandler] = {}
        # Weak: a stream nobody holds any more (a TurnStream left with `break`)
        # must be collectable, so that its finaliser can withdraw its turn.
        self._streams: weakref.WeakSet[_Subscriber] = weakref.WeakSet()
        self._close_task: asyncio.Task[None] | None = None
        self._initialized = False
        self.initialize_result: JSONObject | None = None
        self._answers = ServerRequests(self, max_workers)
        self._peer = Peer(transport, route=self._route, on_notification=self._handle_notification,
                          on_lost=self._end_streams)

    # -- construction --------------------------------------------------------

    @classmethod
    def spawn(
        cls,
        binary: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        initialize: bool = True,
        capabilities: Mapping[str, Any] | None = None,
        client_info: Mapping[str, Any] | None = None,
        request_timeout: float | None = None,
        *,
        on_confirm: ConfirmHandler | None = None,
        on_ask_user: AskUserHandler | None = None,
        shutdown_timeout: float = 5.0,
        stderr_tail_lines: int = 200,
        inherit_env: bool = True,
        tool_exceptions: ToolExceptionPolicy = "fail_turn",
        cassette: Cassette | str | os.PathLike[str] | None = None,
        max_workers: int = DEFAULT_MAX_WORKERS,
        on_elicitation: ElicitationHandler | None = None,
    ) -> _SpawnContext:
        """Start a server and (by default) run the ``initialize`` handshake.

        ``async with Client.spawn() as client:`` closes it politely on exit.
        The binary is found by :func:`agentrpc.discovery.find_binary`. ``env``
        is added to the inherited environment (``inherit_env=False`` uses it
        alone). ``request_timeout`` is the default for every request; ``None``
        waits as long as the server takes, which suits turns that run minutes.

        ``on_confirm(call) -> bool | (bool, reason)`` (sync or async) decides
        tool calls that need confirmation: the client then declares
        ``confirmations: "request"`` and answers ``confirmation/request``.
        Without it, confirmations arrive as ``ConfirmationRequested`` events,
        answered with :meth:`Session.confirm` or by a session's own
        ``on_confirm`` (:meth:`open_session`); a confirmation that nothing can
        answer (no handler, nobody reading the session's events) is denied at
        once with a reason saying so, instead of waiting forever.

        ``tool_exceptions`` is what a tool's uncaught exception does by default:
        ``"fail_turn"`` (the turn ends with :class:`~agentrpc.ToolExecutorError`)
        or ``"report"`` (the model sees a ``failed`` outcome with the message);
        ``@tool(on_exception=...)`` overrides it per tool.

        ``on_confirm`` may also return a
        :class:`~agentrpc.Decision` (edited arguments, approve for the session,
        deny and stop).

        ``on_ask_user(question) -> str`` (sync or async) answers the model's
        ``ask_user`` tool (:class:`~agentrpc.UserQuestion`): the client then
        declares ``askUser`` and answers ``user/ask`` with the returned text.

        ``on_elicitation(elicitation) -> values | "decline" | "cancel"`` (sync
        or async) fills in an MCP server's form (:class:`~agentrpc.Elicitation`,
        MCP's ``elicitation/create``): the client then declares ``elicitation``,
        agentrpc tells its MCP servers it can answer forms, and answers
        ``user/elicit`` with what the callback returns.

        ``cassette`` records or replays the server's model traffic
        (:class:`~agentrpc.Cassette`; a bare path replays): ``--model-cassette``,
        see docs/testing.md.

        Concurrent ``tool/call`` requests (calls the server runs in parallel,
        docs/protocol.md §5) are handled concurrently: an async tool as a task,
        a plain function on a pool of at most ``max_workers`` threads (default
        8); the calls beyond it wait for a free thread.
        """
        _check_max_workers(max_workers)  # before a process is started
        args = [*args, *cassette_args(cassette)]
        if on_confirm is not None:
            capabilities = {**(capabilities if capabilities is not None else DEFAULT_CAPABILITIES),
                            "confirmations": "request"}
        if on_ask_user is not None:
            capabilities = {**(capabilities if capabilities is not None else DEFAULT_CAPABILITIES), "askUser": True}
        if on_elicitation is not None:
            capabilities = {**(capabilities if capabilities is not None else DEFAULT_CAPABILITIES), "elicitation": True}

        async def factory() -> Client:
            path = find_binary(binary)
            environment: dict[str, str] | None
            if inherit_env:
                environment = dict(os.environ)
                environment.update(env or {})
            else:
                environment = dict(env or {})
            transport = await ProcessTransport.start(
                [path, *args], env=environment, cwd=cwd, stderr_tail_lines=stderr_tail_lines
            )
            client = cls(transport, request_timeout=request_timeout, shutdown_timeout=shutdown_timeout,
                         on_confirm=on_confirm, tool_exceptions=tool_exceptions, on_ask_user=on_ask_user,
                         max_workers=max_workers, on_elicitation=on_elicitation)
            if initialize:
                try:
                    await client.initialize(capabilities=capabilities, client_info=client_info)
                except BaseException:
                    await client.close()
                    raise
            return client

        return _SpawnContext(factory)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- handshake -----------------------------------------------------------

    async def initialize(
        self,
        capabilities: Mapping[str, Any] | None = None,
        client_info: Mapping[str, Any] | None = None,
        timeout: float | None | _Default = DEFAULT,
    ) -> JSONObject:
        """Send ``initialize``; must be the first request (docs/protocol.md §2)."""
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientInfo": dict(client_info) if client_info is not None else {
                "name": "agentrpc-python",
                "version": __version__,
            },
            "capabilities": dict(capabilities) if capabilities is not None else dict(DEFAULT_CAPABILITIES),
        }
        result = await self.request("initialize", params, timeout=timeout)
        if not isinstance(result, dict):
            raise InternalError(f"initialize returned {type(result).__name__}, not an object")
        version = result.get("protocolVersion")
        if version != PROTOCOL_VERSION:
            _log.warning("server speaks protocol version %r; this client speaks %d", version, PROTOCOL_VERSION)
        self.initialize_result = result
        self._initialized = True
        return result

    @property
    def initialized(self) -> bool:
        """True once ``initialize`` succeeded."""
        return self._initialized

    @property
    def server_info(self) -> JSONObject | None:
        """``serverInfo`` from the handshake (``{name, version}``)."""
        info = (self.initialize_result or {}).get("serverInfo")
        return info if isinstance(info, dict) else None

    @property
    def server_capabilities(self) -> JSONObject | None:
        """``capabilities`` from the handshake."""
        caps = (self.initialize_result or {}).get("capabilities")
        return caps if isinstance(caps, dict) else None

    @property
    def protocol_version(self) -> int | None:
        """The protocol version the server answered with."""
        version = (self.initialize_result or {}).get("protocolVersion")
        return version if isinstance(version, int) else None

    # -- process facts -------------------------------------------------------

    @property
    def stderr_tail(self) -> str:
        """The server's most recent stderr lines (bounded ring buffer)."""
        return self._transport.stderr_tail

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self._transport.pid

    @property
    def returncode(self) -> int | None:
        """The server's exit code once it has exited."""
        return self._transport.returncode

    @property
    def closed(self) -> bool:
        """True once the connection is gone (closed by us or by the server)."""
        return self._peer.closed

    async def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the connection is gone; ``False`` if ``timeout`` passed first."""
        return await self._peer.wait_closed(timeout)

    # -- requests ------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Any = None,
        timeout: float | None | _Default = DEFAULT,
    ) -> Any:
        """Send a request and return its ``result``.

        Raises the :class:`~agentrpc.errors.AgentRPCError` subclass matching
        an error answer, :class:`~agentrpc.errors.RequestTimeout` after
        ``timeout`` seconds (``DEFAULT``: the client's ``request_timeout``;
        ``None``: no limit), or :class:`~agentrpc.errors.TransportClosed`.
        Cancelling the awaiting task withdraws the request with
        ``$/cancelRequest`` so the server stops working on it.
        """
        limit = self.request_timeout if timeout is DEFAULT else timeout
        return await self._peer.request(method, params, limit)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer)."""
        await self._peer.notify(method, params)

    # -- notifications -------------------------------------------------------

    def on_notification(self, method: str, callback: NotificationCallback) -> Callable[[], None]:
        """Call ``callback(params)`` for each ``method`` notification.

        Plain callbacks run in the reader, in arrival order, and must not
        block; coroutine callbacks run as tasks. Exceptions are logged, never
        propagated (one faulty listener must not kill the connection).
        Returns a function that unsubscribes.
        """
        callbacks = self._notification_callbacks.setdefault(method, [])
        callbacks.append(callback)

        def unsubscribe() -> None:
            try:
                callbacks.remove(callback)
            except ValueError:
                pass

        return unsubscribe

    def notifications(
        self,
        method: str | None = None,
        *,
        predicate: Callable[[Notification], bool] | None = None,
    ) -> NotificationStream:
        """An async iterator of notifications (all, or only ``method``).

        ``predicate`` narrows further (e.g. to one session). It subscribes
        now, so create it before the request whose notifications you want.
        """
        return NotificationStream(self, method, predicate)

    # -- server → client requests ---------------------------------------------

    def on_request(self, method: str, handler: RequestHandler) -> Callable[[], None]:
        """Answer the server's ``method`` requests with ``handler(params)``.

        The handler may be sync or async; each request runs as its own task,
        so slow handlers do not block others. Raising an
        :class:`~agentrpc.errors.AgentRPCError` answers with that error; any
        other exception answers ``-32603``. A ``$/cancelRequest`` from the
        server cancels the task and answers ``-32800``. One handler per
        method: a new one replaces the old. Returns a function that removes
        it (only if it is still the registered one).
        """
        self._request_handlers[method] = handler

        def remove() -> None:
            if self._request_handlers.get(method) is handler:
                del self._request_handlers[method]

        return remove

    # -- what comes in ------------------------------------------------------------

    def _route(self, method: str, params: Any) -> RequestHandler | AgentRPCError:
        """Which handler answers a server request: the client's own (tools, undo,
        confirmations, questions, forms), else one from :meth:`on_request`."""
        handler = self._answers.handler(method, params) or self._request_handlers.get(method)
        if handler is not None:
            return handler
        if method == "tool/call" and isinstance(params, dict):
            return MethodNotFound(
                f"no function is registered for tool {params.get('name')!r} in session "
                f"{params.get('sessionId')!r} on this client",
                {"method": method, "name": params.get("name")},
            )
        return MethodNotFound(f"client does not handle {method!r}", {"method": method})

    def _handle_notification(self, method: str, params: Any) -> None:
        event = params.get("event") if method == "session/event" and isinstance(params, dict) else None
        if isinstance(event, dict) and event.get("type") == "turnEnded" and event.get("undo") != "committed":
            self._answers.forget_undo(params.get("sessionId"), params.get("turnId"))
        note = Notification(method, params)
        listened = bool(self._notification_callbacks.get(method))
        for stream in list(self._streams):
            listened = stream._push(note) or listened
        if isinstance(event, dict) and event.get("type") == "confirmationRequested":
            self._answers.on_confirmation_requested(params, event, listened)
        for callback in list(self._notification_callbacks.get(method, ())):
            try:
                outcome = callback(params)
            except Exception:
                _log.exception("notification callback for %s failed", method)
                continue
            if inspect.isawaitable(outcome):
                self._peer.run_in_background(outcome)

    # -- ending --------------------------------------------------------------

    def _end_streams(self, error: TransportClosed) -> None:
        for stream in list(self._streams):
            stream._end()

    async def close(self) -> None:
        """Shut the server down politely, then make sure it is gone.

        ``shutdown`` request, ``exit`` notification, close stdin, wait
        ``shutdown_timeout`` seconds, then SIGTERM and SIGKILL. Safe to call
        more than once and from several tasks; all wait for the same close.
        """
        if self._close_task is None:
            self._close_task = asyncio.create_task(self._close(), name="agentrpc-close")
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        alive = not self.closed and self._transport.returncode is None
        # From here on, end of stdout is expected, not a crash to warn about.
        self._peer.closing = True
        if alive and self._initialized:
            try:
                await self.request("shutdown", timeout=self.shutdown_timeout)
            except (AgentRPCException, TimeoutError) as exc:
                _log.debug("shutdown request failed: %s", exc)
            try:
                await asyncio.wait_for(self.notify("exit"), self.shutdown_timeout)
            except (AgentRPCException, TimeoutError):
                pass
        await self._transport.close_stdin(self.shutdown_timeout)
        await self._transport.stop(self.shutdown_timeout)
        reader = self._peer.reader
        try:
            await asyncio.wait_for(asyncio.shield(reader), self.shutdown_timeout)
        except TimeoutError:
            reader.cancel()
        except asyncio.CancelledError:  # pragma: no cover
            pass
        await self._transport.finish(1.0)
        self._peer.lose_connection(TransportClosed("the client closed the connection"))
        self._peer.cancel_background()
        # A tool still running in a thread cannot be stopped; it is not waited for.
        self._answers.tool_workers.shutdown(wait=False, cancel_futures=True)

    # -- sessions --------------------------------------------------------------

    def open_session(
        self,
        config: Mapping[str, Any] | None = None,
        /,
        *,
        model: str | Mapping[str, Any] | None = None,
        role: Mapping[str, Any] | None = None,
        persona: str | None = None,
        directives: str | Sequence[str] | None = None,
        instructions: str | None = None,
        tools: Sequence[Any] | None = None,
        guards: Sequence[Mapping[str, Any]] | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        tool_choice: Any = None,
        transcript_error_policy: str | None = None,
        egress: Mapping[str, Any] | None = None,
        context_sources: Sequence[str | Mapping[str, Any]] | None = None,
        properties: Mapping[str, Any] | None = None,
        profiles: Mapping[str, Any] | None = None,
        blocks: Mapping[str, Any] | None = None,
        router: Mapping[str, Any] | None = None,
        store: bool | None = None,
        user_id: str | None = None,
        title: str | None = None,
        ask_user: bool | None = None,
        mcp_servers: Sequence[str | MCPServer] | None = None,
        budget: Mapping[str, Any] | None = None,
        compaction: Mapping[str, Any] | None = None,
        on_confirm: ConfirmHandler | None = None,
    ) -> _SessionOpening:
        """``session/create``: a new session; ``await`` it for the :class:`Session`.

        Every SessionConfig field (docs/protocol.md §3) has a keyword:
        ``model`` (a name from agentrpc.json or an inline dict such as
        :func:`agentrpc.scripted`), ``role`` or ``persona`` / ``directives``,
        ``instructions``, ``tools`` (``@tool`` functions, plain functions or
        ToolSpec dicts), ``guards``, ``limits`` (:class:`~agentrpc.Limits` or a
        dict), ``tool_choice`` (``"auto"``, ``"none"``, ``"required"`` or a
        tool), ``transcript_error_policy``, ``egress``, ``context_sources``,
        ``properties``, ``profiles``, ``blocks``, ``router``, ``store``,
        ``user_id``, ``title``, ``ask_user`` (offer the model ``ask_user``; the
        client needs an ``on_ask_user`` handler), ``mcp_servers`` (MCP servers
        whose tools the session offers as ``mcp__<server>__<tool>``: names from
        agentrpc.json or :class:`~agentrpc.MCPServer` dicts), ``budget`` (the
        session's token and cost limits: ``max_input_tokens``,
        ``max_output_tokens``, ``max_total_tokens``, ``max_cost_usd``), ``compaction``
        (``{auto, threshold, keepLast, model, instructions}``: how the conversation
        is compacted). ``config`` is a raw wire config (camelCase)
        that the keywords override. The session's ``tool/call`` requests
        are answered by the functions of its tools.

        ``on_confirm`` decides this session's confirmations (see
        :meth:`spawn`), before the client's own; it is called with a
        :class:`~agentrpc.ConfirmationCall` whose ``session`` is this session.
        """
        params, session_tools = session_config(config, {
            "model": model, "role": role, "persona": persona, "directives": directives,
            "instructions": instructions, "tools": tools, "guards": guards, "limits": limits,
            "tool_choice": tool_choice, "transcript_error_policy": transcript_error_policy,
            "egress": egress, "context_sources": context_sources, "properties": properties,
            "profiles": profiles, "blocks": blocks, "router": router, "store": store,
            "user_id": user_id, "title": title, "ask_user": ask_user,
            "mcp_servers": list(mcp_servers) if mcp_servers is not None else None, "budget": budget,
            "compaction": compaction,
        })

        async def create() -> Session:
            result = await self.request("session/create", params)
            session = self._session_from(result, "session/create", session_tools)
            session.on_confirm = on_confirm
            return session

        return _SessionOpening(create)

    #: Same as :meth:`open_session`.
    create_session = open_session

    async def resume_session(
        self,
        session_id: str,
        rollback: bool = False,
        *,
        tools: Sequence[Any] = (),
        mcp_servers: Sequence[str | MCPServer] | None = None,
        start_mcp_servers: bool | None = None,
    ) -> Session:
        """``session/resume``: load a stored session (from disk, after a
        restart or a crash) and return its handle.

        When the process that ran the session died during a turn, the handle's
        ``interrupted_turn`` describes that turn (the transcript error policy
        has been applied to it); with ``rollback=True`` the server also sends
        ``tool/undo`` for its undoable tool results, newest first, before
        answering. ``warnings`` lists parts of the journal that did not load.
        Raises ``SessionLocked`` while another server process has it loaded.
        ``tools`` are the functions that answer its tool calls (the specs
        were stored with the session).

        The session's MCP servers start again in the background; ``mcp_servers``
        (names from agentrpc.json or :class:`~agentrpc.MCPServer` dicts)
        replaces them for this load, say to give back header values that were
        not stored, and ``start_mcp_servers=False`` defers their start to the
        next resume or the first round trip (docs/protocol.md §3).
        """
        params: JSONObject = {"sessionId": session_id}
        if rollback:
            params["rollback"] = True
        if mcp_servers is not None:
            params["mcpServers"] = list(mcp_servers)
        if start_mcp_servers is not None:
            params["startMCPServers"] = start_mcp_servers
        result = await self.request("session/resume", params)
        session = self._session_from(result, "session/resume", {})
        interrupted = result.get("interruptedTurn") if isinstance(result, dict) else None
        session.interrupted_turn = InterruptedTurn.from_wire(interrupted) if isinstance(interrupted, dict) else None
        parked = result.get("parkedTurn") if isinstance(result, dict) else None
        session.parked = ParkedTurn.from_wire(parked) if isinstance(parked, dict) else None
        warnings = result.get("warnings") if isinstance(result, dict) else None
        session.warnings = [ContextDiagnostic.from_wire(w) for w in warnings] if isinstance(warnings, list) else []
        session.add_tools(*tools)
        return session

    async def fork_session(self, session_id: str | Session, at_entry_id: str | None = None) -> Session:
        """``session/fork``: a new session with the same configuration and
        properties, whose transcript is a copy up to and including
        ``at_entry_id`` (default: all of it). A forked handle answers tool
        calls with the same functions as the one it came from."""
        params: JSONObject = {"sessionId": _sid(session_id)}
        if at_entry_id is not None:
            params["atEntryId"] = at_entry_id
        result = await self.request("session/fork", params)
        source = self._sessions.get(_sid(session_id))
        return self._session_from(result, "session/fork", source._tools if source is not None else {})

    def session(self, session_id: str) -> Session:
        """The :class:`Session` handle for an id (the registered one if this client has it)."""
        existing = self._sessions.get(session_id)
        if existing is not None:
            return existing
        handle = Session(self, session_id)
        self._sessions[session_id] = handle
        return handle

    def _session_from(self, result: Any, method: str, tools: Mapping[str, Tool[..., Any]]) -> Session:
        session_id = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(session_id, str):
            raise InternalError(f"{method} returned no sessionId: {result!r}")
        revision = result.get("revision")
        existing = self._sessions.get(session_id)
        if existing is not None:
            # Resuming a session this client already holds keeps its handle,
            # and with it the functions that answer its tool calls.
            existing.revision = revision if isinstance(revision, int) else existing.revision
            existing.active_profile = result.get("activeProfile", existing.active_profile)
            existing._tools.update(tools)
            return existing
        session = Session(
            self,
            session_id,
            revision=revision if isinstance(revision, int) else None,
            active_profile=result.get("activeProfile"),
            tools=tools,
        )
        self._sessions[session_id] = session
        return session

    def _forget_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self._answers.forget_session(session_id)

    # -- plain-dict helpers for the session methods ---------------------------

    async def get_state(self, session_id: str | Session) -> JSONObject:
        """``session/getState``: the SessionState (docs/protocol.md §3) as a dict."""
        result: JSONObject = await self.request("session/getState", {"sessionId": _sid(session_id)})
        return result

    async def get_transcript(self, session_id: str | Session) -> JSONObject:
        """``session/getTranscript``: ``{revision, instructions, entries}``."""
        result: JSONObject = await self.request("session/getTranscript", {"sessionId": _sid(session_id)})
        return result

    async def list_sessions(
        self,
        cursor: str | None = None,
        limit: int | None = None,
        *,
        loaded: bool | None = None,
        query: str | None = None,
        model: str | None = None,
        updated_after: str | None = None,
    ) -> SessionList:
        """``session/list``: one page of loaded and stored sessions, newest-updated
        first, as :class:`~agentrpc.types.SessionInfo` records. Pass the page's
        ``next_cursor`` for the next one; ``loaded=True`` lists only sessions
        loaded in this server, ``loaded=False`` only the others. ``query`` keeps
        sessions whose title contains it (ignoring case), ``model`` those of that
        model, ``updated_after`` (an RFC 3339 time) those updated after it.
        ``result["data"]`` still reads the wire form."""
        params: JSONObject = {}
        if cursor is not None:
            params["cursor"] = cursor
        if limit is not None:
            params["limit"] = limit
        if loaded is not None:
            params["loaded"] = loaded
        if query is not None:
            params["query"] = query
        if model is not None:
            params["model"] = model
        if updated_after is not None:
            params["updatedAfter"] = updated_after
        return SessionList.from_wire(await self.request("session/list", params))

    async def close_session(self, session_id: str | Session) -> None:
        """``session/close``: cancels a running turn and unloads the session."""
        session_id = _sid(session_id)
        await self.request("session/close", {"sessionId": session_id})
        self._forget_session(session_id)

    async def delete_session(self, session_id: str | Session) -> None:
        """``session/delete``: removes the session from the store."""
        session_id = _sid(session_id)
        await self.request("session/delete", {"sessionId": session_id})
        self._forget_session(session_id)


def _sid(session: str | Session) -> str:
    """A session id, given the id or its handle."""
    return session.id if isinstance(session, Session) else session


def _check_max_workers(max_workers: Any) -> None:
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise ValueError(f"max_workers must be a positive integer, not {max_workers!r}")
