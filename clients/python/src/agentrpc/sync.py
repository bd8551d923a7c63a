"""A blocking facade over the asyncio client, for scripts and notebooks.

>>> from agentrpc.sync import Client                      # doctest: +SKIP
>>> with Client.spawn() as client:
...     session = client.open_session(model="gpt", tools=[get_weather])
...     print(session.send("Weather in Paris?").text)
...     for event in session.stream("And in Rome?"):
...         ...

The same methods as :class:`agentrpc.Client` and :class:`agentrpc.Session`,
returning the same types, but blocking. An event loop runs in a background
thread owned by the client; every call hands a coroutine to it and waits.
Consequences worth knowing:

* ``@tool`` functions, ``on_confirm`` and ``on_request`` handlers that are
  plain functions run in worker threads, so they may block (ask on the
  terminal, do I/O); coroutine functions run on the background loop.
* ``on_notification`` callbacks run on the background loop's thread and
  must return quickly.
* Ctrl-C (``KeyboardInterrupt``) while a call blocks withdraws that request:
  a running ``send`` is cancelled on the server with ``$/cancelRequest``.
* To stop a turn from another thread, call ``session.cancel()`` there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

from . import client as _async_client
from . import session as _async_session
from .client import DEFAULT, AskUserHandler, ConfirmHandler, JSONObject, NotificationCallback, RequestHandler, _Default
from .events import Event
from .handlers import call_off_loop
from .tools import Tool, ToolExceptionPolicy
from .types import (
    ApprovalRule,
    ContextDiagnostic,
    RewindResult,
    GenerateResult,
    InterruptedTurn,
    Limits,
    SessionList,
    MutationResult,
    ParkedTurn,
    PropertiesResult,
    SessionState,
    Transcript,
    TurnResult,
)

__all__ = ["Client", "Session", "TurnStream", "EventStream"]

_T = TypeVar("_T")
_R = TypeVar("_R")
_P = ParamSpec("_P")


class _Portal:
    """An event loop in a daemon thread, and a blocking way to run coroutines on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="agentrpc-sync-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
            self.loop.close()

    def call(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coroutine`` on the loop and wait; Ctrl-C cancels it there."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError(
                "a blocking agentrpc.sync call was made from the client's own loop thread "
                "(inside an async tool or callback); use the asyncio API there"
            )
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            raise
        except concurrent.futures.CancelledError as exc:
            raise asyncio.CancelledError() from exc

    def soon(self, function: Callable[[], Any]) -> None:
        """Run ``function`` on the loop thread without waiting."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(function)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop and join its thread (bounded)."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)


def _threaded(handler: Callable[..., Any]) -> Callable[..., Any]:
    """A plain function becomes a coroutine function that runs it in a worker thread."""
    if inspect.iscoroutinefunction(handler):
        return handler

    async def run(*args: Any) -> Any:
        return await call_off_loop(handler, *args)

    return run


def _forwards_to(
    async_method: Callable[Concatenate[Any, _P], Any],
) -> Callable[[Callable[..., _R]], Callable[Concatenate[Any, _P], _R]]:
    """Gives a facade method the parameters of the async method it calls, so they
    are declared once (type checkers and ``inspect.signature`` read them from there)."""

    def decorate(method: Callable[..., _R]) -> Callable[Concatenate[Any, _P], _R]:
        method.__wrapped__ = async_method  # type: ignore[attr-defined]
        return method

    return decorate


def _forwards_to_function(
    async_function: Callable[_P, Any],
) -> Callable[[Callable[..., _R]], Callable[Concatenate[Any, _P], _R]]:
    """`_forwards_to` for a class method: `async_function` is already bound to its class."""

    def decorate(method: Callable[..., _R]) -> Callable[Concatenate[Any, _P], _R]:
        # The unbound function, whose first parameter (`cls`) binding drops again.
        method.__wrapped__ = getattr(async_function, "__func__", async_function)  # type: ignore[attr-defined]
        return method

    return decorate


class Client:
    """Blocking twin of :class:`agentrpc.Client`; create it with :meth:`spawn`."""

    def __init__(self, portal: _Portal, inner: _async_client.Client) -> None:
        self._portal = portal
        #: The underlying asyncio client (lives on the background loop).
        self.async_client = inner
        self._session_handles: dict[str, Session] = {}

    @classmethod
    @_forwards_to_function(_async_client.Client.spawn)
    def spawn(cls, *args: Any, **options: Any) -> Client:
        """Start a server and run the handshake; see :meth:`agentrpc.Client.spawn`.

        Use as ``with Client.spawn() as client:``, or call :meth:`close`.
        """
        for handler in ("on_confirm", "on_ask_user", "on_elicitation"):
            if options.get(handler) is not None:
                options[handler] = _threaded(options[handler])
        portal = _Portal()

        async def start() -> _async_client.Client:
            return await _async_client.Client.spawn(*args, **options)

        try:
            inner = portal.call(start())
        except BaseException:
            portal.stop()
            raise
        return cls(portal, inner)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Shut the server down politely and stop the background loop."""
        if self._portal.loop.is_closed():
            return
        try:
            self._portal.call(self.async_client.close())
        finally:
            self._portal.stop()

    def _call(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return self._portal.call(coroutine)

    # -- facts -----------------------------------------------------------------

    @property
    def initialize_result(self) -> JSONObject | None:
        """The ``initialize`` result."""
        return self.async_client.initialize_result

    @property
    def server_info(self) -> JSONObject | None:
        """``serverInfo`` from the handshake."""
        return self.async_client.server_info

    @property
    def server_capabilities(self) -> JSONObject | None:
        """``capabilities`` from the handshake."""
        return self.async_client.server_capabilities

    @property
    def protocol_version(self) -> int | None:
        """The protocol version the server answered with."""
        return self.async_client.protocol_version

    @property
    def stderr_tail(self) -> str:
        """The server's most recent stderr lines."""
        return self.async_client.stderr_tail

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self.async_client.pid

    @property
    def returncode(self) -> int | None:
        """The server's exit code once it has exited."""
        return self.async_client.returncode

    @property
    def closed(self) -> bool:
        """True once the connection is gone."""
        return self.async_client.closed

    # -- plain requests ----------------------------------------------------------

    def initialize(self, capabilities: Mapping[str, Any] | None = None,
                   client_info: Mapping[str, Any] | None = None) -> JSONObject:
        """``initialize`` (for a client spawned with ``initialize=False``)."""
        return self._call(self.async_client.initialize(capabilities, client_info))

    def request(self, method: str, params: Any = None, timeout: float | None | _Default = DEFAULT) -> Any:
        """Send a request and return its result (see :meth:`agentrpc.Client.request`)."""
        return self._call(self.async_client.request(method, params, timeout))

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        self._call(self.async_client.notify(method, params))

    def on_notification(self, method: str, callback: NotificationCallback) -> Callable[[], None]:
        """Call ``callback(params)`` for each ``method`` notification (on the loop thread)."""
        return self.async_client.on_notification(method, callback)

    def on_request(self, method: str, handler: RequestHandler) -> Callable[[], None]:
        """Answer the server's ``method`` requests; plain functions run in a worker thread."""
        return self.async_client.on_request(method, _threaded(handler))

    # -- sessions ------------------------------------------------------------------

    def _wrap(self, inner: _async_session.Session) -> Session:
        handle = self._session_handles.get(inner.id)
        if handle is None or handle.async_session is not inner:
            handle = Session(self, inner)
            self._session_handles[inner.id] = handle
        return handle

    @_forwards_to(_async_client.Client.open_session)
    def open_session(self, config: Mapping[str, Any] | None = None, /, **options: Any) -> Session:
        """``session/create``; the same keywords as :meth:`agentrpc.Client.open_session`."""
        on_confirm = options.get("on_confirm")
        if on_confirm is not None:
            options["on_confirm"] = _threaded(on_confirm)
        inner = self._call(_awaited(self.async_client.open_session(config, **options)))
        return self._wrap(inner)

    #: Same as :meth:`open_session`.
    create_session = open_session

    @_forwards_to(_async_client.Client.resume_session)
    def resume_session(self, *args: Any, **kwargs: Any) -> Session:
        """``session/resume``: load a stored session (see the async client)."""
        return self._wrap(self._call(self.async_client.resume_session(*args, **kwargs)))

    def fork_session(self, session_id: str, at_entry_id: str | None = None) -> Session:
        """``session/fork``: a copy of a session up to an entry."""
        return self._wrap(self._call(self.async_client.fork_session(session_id, at_entry_id)))

    def session(self, session_id: str) -> Session:
        """The handle for a session id."""
        return self._wrap(self.async_client.session(session_id))

    def get_state(self, session_id: str) -> JSONObject:
        """``session/getState`` as a dict."""
        return self._call(self.async_client.get_state(session_id))

    def get_transcript(self, session_id: str) -> JSONObject:
        """``session/getTranscript`` as a dict."""
        return self._call(self.async_client.get_transcript(session_id))

    @_forwards_to(_async_client.Client.list_sessions)
    def list_sessions(self, *args: Any, **kwargs: Any) -> SessionList:
        """``session/list``: typed records, newest-updated first."""
        return self._call(self.async_client.list_sessions(*args, **kwargs))

    def close_session(self, session_id: str) -> None:
        """``session/close``."""
        self._call(self.async_client.close_session(session_id))
        self._session_handles.pop(session_id, None)

    def delete_session(self, session_id: str) -> None:
        """``session/delete``."""
        self._call(self.async_client.delete_session(session_id))
        self._session_handles.pop(session_id, None)


class Session:
    """Blocking twin of :class:`agentrpc.Session`."""

    def __init__(self, client: Client, inner: _async_session.Session) -> None:
        self.client = client
        #: The underlying asyncio session.
        self.async_session = inner

    def __repr__(self) -> str:
        return f"sync.Session({self.id!r})"

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.client.closed:
            self.close()

    def _call(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return self.client._portal.call(coroutine)

    @property
    def id(self) -> str:
        """The session id."""
        return self.async_session.id

    @property
    def revision(self) -> int | None:
        """Revision reported when the session was created or resumed."""
        return self.async_session.revision

    @property
    def active_profile(self) -> Any:
        """Active profile reported when the session was created or resumed."""
        return self.async_session.active_profile

    @property
    def tools(self) -> Mapping[str, Tool[..., Any]]:
        """The client-side tools of this session."""
        return self.async_session.tools

    def add_tools(self, *tools: Any) -> None:
        """Answer this session's calls of these tools with their functions."""
        self.async_session.add_tools(*tools)

    @property
    def interrupted_turn(self) -> InterruptedTurn | None:
        """Set by ``resume_session`` when the last turn was cut by a crash."""
        return self.async_session.interrupted_turn

    @property
    def warnings(self) -> list[ContextDiagnostic]:
        """Set by ``resume_session``: parts of the journal that did not load."""
        return self.async_session.warnings

    @_forwards_to(_async_session.Session.fork)
    def fork(self, *args: Any, **kwargs: Any) -> Session:
        """``session/fork``: a copy of this session up to ``at_entry_id``."""
        return self.client._wrap(self._call(self.async_session.fork(*args, **kwargs)))

    @_forwards_to(_async_session.Session.send)
    def send(self, *args: Any, **kwargs: Any) -> TurnResult:
        """Run one turn and return its :class:`~agentrpc.TurnResult` (see the async ``send``)."""
        if kwargs.get("refresh_auth") is not None:
            kwargs["refresh_auth"] = _threaded(kwargs["refresh_auth"])
        return self._call(self.async_session.send(*args, **kwargs))

    @_forwards_to(_async_session.Session.park)
    def park(self, *args: Any, **kwargs: Any) -> ParkedTurn | None:
        """Park the running turn (see the async ``park``)."""
        return self._call(self.async_session.park(*args, **kwargs))

    @_forwards_to(_async_session.Session.continue_turn)
    def continue_turn(self, *args: Any, **kwargs: Any) -> TurnResult:
        """Go on with the parked turn (see the async ``continue_turn``)."""
        return self._call(self.async_session.continue_turn(*args, **kwargs))

    @_forwards_to(_async_session.Session.stream)
    def stream(self, *args: Any, **kwargs: Any) -> TurnStream:
        """Run one turn, iterating its events; ``stream.result`` afterwards."""
        return TurnStream(self.client._portal, self.async_session.stream(*args, **kwargs))

    @overload
    def generate(self, input: _async_session.Input, schema: type[_T], **kwargs: Any) -> _T: ...

    @overload
    def generate(self, input: _async_session.Input, schema: Mapping[str, Any] | Any, **kwargs: Any) -> Any: ...

    def generate(self, input: _async_session.Input, schema: Any, **kwargs: Any) -> Any:
        """Structured output (see the async ``generate``): an instance of ``schema`` when it is a type."""
        return self.generate_result(input, schema, **kwargs).value

    @_forwards_to(_async_session.Session.generate_result)
    def generate_result(self, *args: Any, **kwargs: Any) -> GenerateResult:
        """Structured output with the turn id and usage."""
        if kwargs.get("refresh_auth") is not None:
            kwargs["refresh_auth"] = _threaded(kwargs["refresh_auth"])
        return self._call(self.async_session.generate_result(*args, **kwargs))

    def cancel(self) -> bool:
        """``session/cancel`` (safe to call from any thread)."""
        return self._call(self.async_session.cancel())

    @_forwards_to(_async_session.Session.confirm)
    def confirm(self, *args: Any, **kwargs: Any) -> ApprovalRule | None:
        """``session/confirm`` (see the async ``confirm``)."""
        return self._call(self.async_session.confirm(*args, **kwargs))

    @_forwards_to(_async_session.Session.approve)
    def approve(self, *args: Any, **kwargs: Any) -> None:
        """Approve the pending call (with edited ``arguments``, when given)."""
        self._call(self.async_session.approve(*args, **kwargs))

    @_forwards_to(_async_session.Session.deny)
    def deny(self, *args: Any, **kwargs: Any) -> None:
        """Deny the pending call."""
        self._call(self.async_session.deny(*args, **kwargs))

    @_forwards_to(_async_session.Session.approve_for_session)
    def approve_for_session(self, *args: Any, **kwargs: Any) -> ApprovalRule | None:
        """Approve the call and later matching calls of its tool (see the async method)."""
        return self._call(self.async_session.approve_for_session(*args, **kwargs))

    @_forwards_to(_async_session.Session.deny_and_stop)
    def deny_and_stop(self, *args: Any, **kwargs: Any) -> None:
        """Deny the call and cancel the turn at once."""
        self._call(self.async_session.deny_and_stop(*args, **kwargs))

    @_forwards_to(_async_session.Session.set_approval_rules)
    def set_approval_rules(self, *args: Any, **kwargs: Any) -> list[ApprovalRule]:
        """``session/setApprovalRules``."""
        return self._call(self.async_session.set_approval_rules(*args, **kwargs))

    @_forwards_to(_async_session.Session.steer)
    def steer(self, *args: Any, **kwargs: Any) -> str:
        """``session/steer`` (safe to call from any thread while a turn runs)."""
        return self._call(self.async_session.steer(*args, **kwargs))

    @_forwards_to(_async_session.Session.rewind)
    def rewind(self, *args: Any, **kwargs: Any) -> RewindResult:
        """``session/rewind`` (see the async ``rewind``)."""
        return self._call(self.async_session.rewind(*args, **kwargs))

    @_forwards_to(_async_session.Session.media)
    def media(self, *args: Any, **kwargs: Any) -> JSONObject:
        """``session/getMedia`` (see the async ``media``)."""
        return self._call(self.async_session.media(*args, **kwargs))

    @_forwards_to(_async_session.Session.prompt)
    def prompt(self, *args: Any, **kwargs: Any) -> JSONObject:
        """``session/getPrompt`` (see the async ``prompt``)."""
        return self._call(self.async_session.prompt(*args, **kwargs))

    @_forwards_to(_async_session.Session.compact)
    def compact(self, *args: Any, **kwargs: Any) -> JSONObject:
        """``session/compact`` (see the async ``compact``)."""
        return self._call(self.async_session.compact(*args, **kwargs))

    def state(self) -> SessionState:
        """``session/getState``."""
        return self._call(self.async_session.state())

    def transcript(self) -> Transcript:
        """``session/getTranscript``."""
        return self._call(self.async_session.transcript())

    @_forwards_to(_async_session.Session.mutate_transcript)
    def mutate_transcript(self, *args: Any, **kwargs: Any) -> MutationResult:
        """``session/mutateTranscript`` (build operations with :mod:`agentrpc.ops`)."""
        return self._call(self.async_session.mutate_transcript(*args, **kwargs))

    def drop_last_turn(self) -> str | None:
        """Remove the newest turn's entries; return its ``turnId`` (see the async one)."""
        return self._call(self.async_session.drop_last_turn())

    @_forwards_to(_async_session.Session.set_properties)
    def set_properties(self, *args: Any, **kwargs: Any) -> PropertiesResult:
        """``session/setProperties``."""
        return self._call(self.async_session.set_properties(*args, **kwargs))

    def close(self) -> None:
        """``session/close``."""
        self.client.close_session(self.id)

    def delete(self) -> None:
        """``session/delete``."""
        self.client.delete_session(self.id)

    def watch(self) -> EventStream:
        """This session's typed events until :meth:`EventStream.close` (from any thread)."""
        return EventStream(self.client._portal, self.async_session.watch())


async def _awaited(awaitable: Awaitable[_T]) -> _T:
    """A coroutine for the portal from any awaitable."""
    return await awaitable


async def _next(iterator: Any) -> tuple[bool, Any]:
    try:
        return True, await iterator.__anext__()
    except StopAsyncIteration:
        return False, None


class TurnStream(Iterator[Event]):
    """Blocking twin of :class:`agentrpc.TurnStream`: ``for event in stream``."""

    def __init__(self, portal: _Portal, inner: _async_session.TurnStream) -> None:
        self._portal = portal
        #: The underlying asyncio stream.
        self.async_stream = inner

    def __iter__(self) -> TurnStream:
        if self.async_stream._exhausted:
            raise RuntimeError(_async_session.STREAM_CONSUMED)
        return self

    def __next__(self) -> Event:
        more, event = self._portal.call(_next(self.async_stream))
        if not more:
            raise StopIteration
        assert isinstance(event, Event)
        return event

    @property
    def result(self) -> TurnResult | None:
        """The turn's result once iteration ended normally."""
        return self.async_stream.result

    @property
    def error(self) -> BaseException | None:
        """The exception the turn failed with, if it did."""
        return self.async_stream.error

    @property
    def text(self) -> str:
        """Text streamed so far."""
        return self.async_stream.text

    @property
    def done(self) -> bool:
        """True once iteration is over."""
        return self.async_stream.done

    def get_result(self) -> TurnResult:
        """Consume the remaining events; return the result or raise the turn's error."""
        return self._portal.call(self.async_stream.get_result())

    def close(self) -> None:
        """Stop; withdraw the turn if it still runs."""
        self._portal.call(self.async_stream.aclose())

    def __enter__(self) -> TurnStream:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.done:
            self.close()


class EventStream(Iterator[Event]):
    """Blocking twin of :class:`agentrpc.EventStream`."""

    def __init__(self, portal: _Portal, inner: _async_session.EventStream) -> None:
        self._portal = portal
        self._inner = inner

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> Event:
        more, event = self._portal.call(_next(self._inner))
        if not more:
            raise StopIteration
        assert isinstance(event, Event)
        return event

    def close(self) -> None:
        """Stop receiving; safe from any thread, ends a blocked iteration."""
        self._portal.soon(self._inner.close)

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
