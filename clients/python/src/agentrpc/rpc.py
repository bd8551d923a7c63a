"""JSON-RPC 2.0 over one server process's stdio.

:class:`Peer` matches answers to requests, runs the server's requests as
tasks (withdrawn by its ``$/cancelRequest``), and ends everything still
waiting when the connection goes. It knows the wire, not agentrpc: the
:class:`~agentrpc.Client` tells it which handler answers a server request and
takes every notification.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

from .errors import (
    AgentRPCError,
    ClientError,
    InternalError,
    RequestTimeout,
    ServerExited,
    TransportClosed,
    error_from_wire,
)
from .transport import ProcessTransport

__all__ = ["JSONObject", "Peer", "RequestHandler", "RequestId"]

_log = logging.getLogger("agentrpc.client")

JSONObject: TypeAlias = dict[str, Any]
RequestId: TypeAlias = int | str
#: Called with a server request's ``params``; returns (or awaits to) the result.
RequestHandler: TypeAlias = Callable[[Any], Any]
#: Given a server request's method and params: the handler that answers it, or
#: the error to answer with when nothing does.
RequestRouter: TypeAlias = Callable[[str, Any], "RequestHandler | AgentRPCError"]


class Peer:
    """The JSON-RPC side of one connection: requests out, answers and the
    server's requests and notifications in."""

    def __init__(
        self,
        transport: ProcessTransport,
        *,
        route: RequestRouter,
        on_notification: Callable[[str, Any], None],
        on_lost: Callable[[TransportClosed], None],
    ) -> None:
        self.transport = transport
        self._route = route
        self._on_notification = on_notification
        self._on_lost = on_lost
        self._next_id = 0
        self._pending: dict[RequestId, asyncio.Future[Any]] = {}
        #: The method of each request still waiting for its answer, by id.
        self.pending_methods: dict[RequestId, str] = {}
        # Server→client requests being handled, by the server's request id.
        self._inbound: dict[RequestId, asyncio.Task[None]] = {}
        self._inbound_cancelled: set[RequestId] = set()
        # Tasks started on the connection's behalf (async notification callbacks,
        # answers written later); kept so they are not GC'd, cancelled at close.
        self._background: set[asyncio.Task[Any]] = set()
        #: Set when the client itself closes: the end of stdout is then expected.
        self.closing = False
        self._closed_error: TransportClosed | None = None
        self._connection_lost = asyncio.Event()
        self.reader = asyncio.create_task(self._read_loop(), name="agentrpc-reader")

    # -- state -----------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the connection is gone (closed by us or by the server)."""
        return self._closed_error is not None

    async def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the connection is gone; ``False`` if ``timeout`` passed first."""
        try:
            await asyncio.wait_for(self._connection_lost.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def raise_if_closed(self) -> None:
        error = self._closed_error
        if error is not None:
            # A fresh instance per raise, so tracebacks do not pile up on one object.
            raise type(error)(error.message, returncode=error.returncode, stderr_tail=error.stderr_tail)

    # -- out -------------------------------------------------------------------

    async def request(self, method: str, params: Any, limit: float | None) -> Any:
        """Send a request and return its ``result`` (see :meth:`Client.request`)."""
        self.raise_if_closed()
        self._next_id += 1
        request_id: RequestId = self._next_id
        message: JSONObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self.pending_methods[request_id] = method
        try:
            # The write is inside the limit too: a server that stopped reading
            # must not block a caller forever on a full pipe.
            async with asyncio.timeout(limit):
                await self.transport.send(message)
                return await future
        except TimeoutError as exc:
            self._withdraw(request_id)
            raise RequestTimeout(method, limit or 0.0, request_id) from exc
        except asyncio.CancelledError:
            self._withdraw(request_id)
            raise
        finally:
            self._pending.pop(request_id, None)
            self.pending_methods.pop(request_id, None)

    def _withdraw(self, request_id: RequestId) -> None:
        """Tell the server we no longer want an answer (if one is still due)."""
        future = self._pending.get(request_id)
        # Cancelling the awaiting task has already cancelled the future; a
        # future that holds a result or error means the answer is in.
        if future is None or (future.done() and not future.cancelled()) or self.closed:
            return
        future.cancel()
        self.transport.send_nowait({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": request_id}})

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer)."""
        self.raise_if_closed()
        message: JSONObject = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.transport.send(message)

    def run_in_background(self, awaitable: Awaitable[Any]) -> None:
        """Runs ``awaitable`` as a task the connection keeps until it ends (and
        cancels at close); a failure is logged."""
        task = asyncio.ensure_future(awaitable)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("async notification callback failed", exc_info=task.exception())

    def cancel_background(self) -> None:
        for task in list(self._background):
            task.cancel()

    # -- in --------------------------------------------------------------------

    async def _read_loop(self) -> None:
        try:
            async for line in self.transport.lines():
                self._handle_line(line)
        except asyncio.CancelledError:
            raise
        except Exception:  # pragma: no cover - a bug here must still end the connection
            _log.exception("agentrpc reader failed")
        finally:
            await self._on_stdout_closed()

    def _handle_line(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            _log.warning("ignoring unparseable line from server (%s): %.200r", exc, line)
            return
        if isinstance(message, list):
            for item in message:
                self._handle_message(item)
        else:
            self._handle_message(message)

    def _handle_message(self, message: Any) -> None:
        if not isinstance(message, dict):
            _log.warning("ignoring non-object message from server: %.200r", message)
            return
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message and message["id"] is not None:
                self._handle_server_request(message["id"], method, message.get("params"))
            elif method == "$/cancelRequest":
                self._handle_inbound_cancel(message.get("params"))
            else:
                self._on_notification(method, message.get("params"))
            return
        if "result" in message or "error" in message:
            self._handle_response(message)
            return
        _log.warning("ignoring message that is neither request nor response: %.200r", message)

    def _handle_response(self, message: JSONObject) -> None:
        request_id = message.get("id")
        if request_id is None:
            # The server could not tell which message it answers (e.g. a
            # parse error). Nothing to resolve; say so loudly.
            _log.warning("server error without an id: %r", message.get("error"))
            return
        future = self._pending.get(request_id)
        if future is None or future.done():
            _log.debug("answer to unknown or withdrawn request %r", request_id)
            return
        if "error" in message:
            future.set_exception(error_from_wire(message["error"]))
        else:
            future.set_result(message.get("result"))

    def _handle_server_request(self, request_id: RequestId, method: str, params: Any) -> None:
        handler = self._route(method, params)
        if isinstance(handler, AgentRPCError):
            self._spawn_answer(request_id, error=handler.to_error_object())
            return
        if request_id in self._inbound:
            _log.warning("server reused request id %r while it is still running", request_id)
        task = asyncio.create_task(
            self._run_handler(request_id, method, handler, params), name=f"agentrpc-handle-{method}"
        )
        self._inbound[request_id] = task
        task.add_done_callback(lambda done: self._handler_finished(request_id, done))

    def _handle_inbound_cancel(self, params: Any) -> None:
        request_id = params.get("id") if isinstance(params, dict) else None
        if not isinstance(request_id, (int, str)):
            return
        task = self._inbound.get(request_id)
        if task is None or task.done():
            return
        # Recorded before cancel(), so the task's end can tell a withdrawal by
        # the server (answer -32800) from the client closing (answer nothing).
        self._inbound_cancelled.add(request_id)
        task.cancel()

    def _handler_finished(self, request_id: RequestId, task: asyncio.Task[None]) -> None:
        """Bookkeeping when a handler task ends, however it ends.

        Done here rather than inside the task because a task cancelled before
        its first step never runs its body, and the server still needs its
        ``-32800`` answer.
        """
        withdrawn = request_id in self._inbound_cancelled
        self._inbound_cancelled.discard(request_id)
        if self._inbound.get(request_id) is task:
            del self._inbound[request_id]
        if task.cancelled() and withdrawn and not self.closed:
            self._spawn_answer(request_id, error={
                "code": -32800,
                "message": "request cancelled by the server",
                "data": {"kind": "cancelled"},
            })

    async def _run_handler(self, request_id: RequestId, method: str, handler: RequestHandler, params: Any) -> None:
        """Run one handler and answer with its result or error.

        Cancellation propagates; :meth:`_handler_finished` answers it.
        """
        try:
            result = handler(params)
            if inspect.isawaitable(result):
                result = await result
        except AgentRPCError as exc:
            await self._answer(request_id, error=exc.to_error_object())
            return
        except Exception as exc:
            _log.exception("handler for %s failed", method)
            await self._answer(request_id, error=InternalError(
                f"client handler for {method!r} raised {type(exc).__name__}: {exc}"
            ).to_error_object())
            return
        await self._answer(request_id, result=result)

    async def _answer(self, request_id: RequestId, *, result: Any = None, error: Any = None) -> None:
        message: JSONObject = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        try:
            await self.transport.send(message)
        except (TypeError, ValueError) as exc:
            # The handler returned something that is not JSON; tell the server
            # rather than leaving its request unanswered.
            _log.error("handler result for request %r is not JSON: %s", request_id, exc)
            fallback = InternalError(f"client handler returned a non-JSON result: {exc}")
            await self._answer(request_id, error=fallback.to_error_object())
        except ClientError:
            _log.debug("cannot answer request %r: connection closed", request_id)

    def _spawn_answer(self, request_id: RequestId, **kwargs: Any) -> None:
        task = asyncio.ensure_future(self._answer(request_id, **kwargs))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- ending ----------------------------------------------------------------

    async def _on_stdout_closed(self) -> None:
        """stdout ended: the connection is over. Fail everything still waiting."""
        if self.closing:
            error: TransportClosed = TransportClosed("the client closed the connection")
        else:
            # Give the process a moment to report its exit code; bounded, since
            # a server can close stdout and keep running.
            code = await self.transport.wait(2.0)
            await self.transport.finish(1.0)
            reason = "the server exited" if code is not None else "the server closed its stdout"
            error = ServerExited(reason, returncode=code, stderr_tail=self.transport.stderr_tail)
            _log.warning("%s", error)
        self.lose_connection(error)

    def lose_connection(self, error: TransportClosed) -> None:
        """The connection is over: every request still waiting fails with ``error``,
        every server request still running is cancelled (and not answered)."""
        if self._closed_error is not None:
            return
        self._closed_error = error
        for future in list(self._pending.values()):
            if not future.done():
                future.set_exception(error)
        self._on_lost(error)
        for task in list(self._inbound.values()):
            task.cancel()
        self._connection_lost.set()
