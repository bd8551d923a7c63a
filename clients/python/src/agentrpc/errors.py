"""Exceptions raised by the agentrpc client.

Two families share one root, :class:`AgentRPCException`:

* :class:`AgentRPCError` and its subclasses are JSON-RPC error *answers*
  (docs/protocol.md §13). The class is chosen by ``error.data.kind`` — the stable,
  machine-readable name — never by the message. An unknown kind falls back to
  the class of its code, then to :class:`AgentRPCError` itself, so a newer
  server never makes the client crash on an error it does not know.
* :class:`ClientError` and its subclasses are local failures: the server
  process died, a request timed out, the binary was not found.

Kinds that share a code are arranged so that catching the broader one still
works: ``except InvalidParams`` also catches :class:`InvalidTranscript` and
:class:`InvalidConfiguration`; ``except InvalidRequest`` also catches
:class:`MessageTooLarge`; ``except RunLimitExceeded`` catches all three limit
errors.

The classes of the wire's error kinds are generated from the table of
docs/protocol.md §13 into ``_wire.py`` (``python3 clients/python/scripts/generate.py``);
the accessors some of them add over ``data`` are written by hand in ``_wire_base.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._wire import (
    ERRORS_BY_CODE,
    ERRORS_BY_KIND,
)
from ._wire_base import AgentRPCError, AgentRPCException, RunLimitExceeded
# <generated> by clients/python/scripts/generate.py: the names of _wire.py this module exports
from ._wire import (
    RetryGuidance,
    ParseError,
    InvalidRequest,
    MessageTooLarge,
    MethodNotFound,
    InvalidParams,
    InvalidTranscript,
    InvalidConfiguration,
    InternalError,
    NotInitialized,
    Cancelled,
    SessionNotFound,
    AlreadyRunning,
    SessionBusy,
    RevisionMismatch,
    NoPendingConfirmation,
    NoRunningTurn,
    TurnMismatch,
    MaxToolCallsExceeded,
    MaxRoundTripsExceeded,
    WallClockTimeoutExceeded,
    BudgetExceeded,
    ToolChoiceUnsupported,
    ToolChoiceNotHonored,
    EgressRefused,
    UnreadableImageAttachment,
    RegexBudgetExceeded,
    ProviderError,
    ProviderContractViolation,
    ToolExecutorError,
    HookError,
    StructuredOutputError,
    Overloaded,
    SessionLocked,
    StoreUnavailable,
    JournalUnreadable,
)
# </generated>

__all__ = [
    # <generated>
    "RetryGuidance",
    "ParseError",
    "InvalidRequest",
    "MessageTooLarge",
    "MethodNotFound",
    "InvalidParams",
    "InvalidTranscript",
    "InvalidConfiguration",
    "InternalError",
    "NotInitialized",
    "Cancelled",
    "SessionNotFound",
    "AlreadyRunning",
    "SessionBusy",
    "RevisionMismatch",
    "NoPendingConfirmation",
    "NoRunningTurn",
    "TurnMismatch",
    "MaxToolCallsExceeded",
    "MaxRoundTripsExceeded",
    "WallClockTimeoutExceeded",
    "BudgetExceeded",
    "ToolChoiceUnsupported",
    "ToolChoiceNotHonored",
    "EgressRefused",
    "UnreadableImageAttachment",
    "RegexBudgetExceeded",
    "ProviderError",
    "ProviderContractViolation",
    "ToolExecutorError",
    "HookError",
    "StructuredOutputError",
    "Overloaded",
    "SessionLocked",
    "StoreUnavailable",
    "JournalUnreadable",
    # </generated>
    "AgentRPCException",
    "AgentRPCError",
    "RunLimitExceeded",
    "ClientError",
    "TransportClosed",
    "ServerExited",
    "RequestTimeout",
    "BinaryNotFound",
    "error_from_wire",
    "error_class_for",
]


def error_class_for(code: int, kind: str | None) -> type[AgentRPCError]:
    """The exception class for an error: by kind, else by code, else the base."""
    if kind is not None and kind in ERRORS_BY_KIND:
        return ERRORS_BY_KIND[kind]
    return ERRORS_BY_CODE.get(code, AgentRPCError)


def error_from_wire(error: Any) -> AgentRPCError:
    """Decode a JSON-RPC ``error`` member into the matching exception.

    Tolerates a malformed member (a peer bug) by producing an
    :class:`AgentRPCError` that says so instead of raising while decoding.
    """
    if not isinstance(error, Mapping):
        return AgentRPCError(-32603, f"malformed error object: {error!r}")
    code_raw = error.get("code")
    code = code_raw if isinstance(code_raw, int) and not isinstance(code_raw, bool) else -32603
    message_raw = error.get("message")
    message = message_raw if isinstance(message_raw, str) else ""
    data_raw = error.get("data")
    data: dict[str, Any] = dict(data_raw) if isinstance(data_raw, Mapping) else {}
    if data_raw is not None and not isinstance(data_raw, Mapping):
        # Keep a non-object `data` reachable rather than dropping it.
        data = {"value": data_raw}
    kind_raw = data.get("kind")
    kind = kind_raw if isinstance(kind_raw, str) else None
    cls = error_class_for(code, kind)
    return cls._from_parts(code, message, data, kind)


class ClientError(AgentRPCException):
    """A failure on this side of the connection, not an answer from the server."""


class TransportClosed(ClientError):
    """The connection is closed; no request can be sent or answered.

    Raised for every pending request when the connection goes away, so no
    caller ever hangs on a dead server. ``stderr_tail`` holds the server's
    last stderr lines, which usually say why.
    """

    def __init__(
        self,
        message: str = "connection closed",
        *,
        returncode: int | None = None,
        stderr_tail: str = "",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.returncode = returncode
        self.stderr_tail = stderr_tail

    def __str__(self) -> str:
        text = self.message
        if self.returncode is not None:
            text += f" (exit code {self.returncode})"
        if self.stderr_tail:
            text += "\n--- server stderr (tail) ---\n" + self.stderr_tail.rstrip("\n")
        return text


class ServerExited(TransportClosed):
    """The server process exited (or closed stdout) while the client was open."""


class RequestTimeout(ClientError, TimeoutError):
    """A request got no answer in time; it was withdrawn with ``$/cancelRequest``."""

    def __init__(self, method: str, timeout: float, request_id: int | str | None = None) -> None:
        super().__init__(f"request {method!r} (id {request_id}) timed out after {timeout:g}s")
        self.method = method
        self.timeout = timeout
        self.request_id = request_id


class BinaryNotFound(ClientError, FileNotFoundError):
    """No agentrpc binary was found; ``searched`` lists every place tried."""

    def __init__(self, searched: list[str]) -> None:
        lines = "\n".join(f"  - {place}" for place in searched)
        super().__init__(
            "could not find the agentrpc server binary; looked in:\n"
            f"{lines}\n"
            "Pass binary=..., set AGENTRPC_BIN, put agentrpc on PATH, or run `swift build`."
        )
        self.searched = list(searched)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "agentrpc binary not found"
