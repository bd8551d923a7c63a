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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

__all__ = [
    "AgentRPCException",
    "AgentRPCError",
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
    "RunLimitExceeded",
    "MaxToolCallsExceeded",
    "MaxRoundTripsExceeded",
    "WallClockTimeoutExceeded",
    "ToolChoiceUnsupported",
    "ToolChoiceNotHonored",
    "EgressRefused",
    "UnreadableImageAttachment",
    "RetryGuidance",
    "ProviderError",
    "ProviderContractViolation",
    "ToolExecutorError",
    "HookError",
    "StructuredOutputError",
    "Overloaded",
    "SessionLocked",
    "StoreUnavailable",
    "JournalUnreadable",
    "ClientError",
    "TransportClosed",
    "ServerExited",
    "RequestTimeout",
    "BinaryNotFound",
    "error_from_wire",
    "error_class_for",
]


class AgentRPCException(Exception):
    """Root of everything this package raises, so one ``except`` catches all."""


_E = TypeVar("_E", bound="AgentRPCError")


class AgentRPCError(AgentRPCException):
    """A JSON-RPC error answer: ``{code, message, data: {kind, ...}}``.

    Subclasses exist per ``data.kind``; this base class is used as-is for
    kinds and codes the client does not know. Handlers of server→client
    requests may raise it (or a subclass) to answer with that error.
    """

    #: The ``data.kind`` a subclass stands for (``None`` on the base class).
    KIND: ClassVar[str | None] = None
    #: The JSON-RPC code a subclass stands for (``None`` on the base class).
    CODE: ClassVar[int | None] = None

    code: int
    message: str
    data: dict[str, Any]
    kind: str | None

    def __init__(
        self,
        code: int,
        message: str,
        data: Mapping[str, Any] | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.data = dict(data) if data is not None else {}
        # Prefer an explicit kind, then the one on the wire; keep data.kind in
        # sync so the error re-serialises exactly as it was received.
        resolved = kind if kind is not None else self.data.get("kind")
        self.kind = resolved if isinstance(resolved, str) else None
        if self.kind is not None:
            self.data["kind"] = self.kind

    @classmethod
    def _from_parts(
        cls: type[_E], code: int, message: str, data: Mapping[str, Any] | None, kind: str | None
    ) -> _E:
        """Build an instance without the subclass's convenience ``__init__``.

        Subclasses take ``(message, data)`` for convenience when raised by user
        code; decoding from the wire always has all four parts.
        """
        err = cls.__new__(cls)
        AgentRPCError.__init__(err, code, message, data, kind)
        return err

    # Fields every turn error carries (docs/protocol.md §13, last paragraph).
    @property
    def turn_id(self) -> str | None:
        """The turn this error ended, when it is a turn error."""
        value = self.data.get("turnId")
        return value if isinstance(value, str) else None

    @property
    def partial_text(self) -> str | None:
        """Text the model had streamed before the turn failed, if any."""
        value = self.data.get("partialText")
        return value if isinstance(value, str) else None

    def to_error_object(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for this exception."""
        obj: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data:
            obj["data"] = dict(self.data)
        return obj

    def __str__(self) -> str:
        kind = f" {self.kind}" if self.kind else ""
        return f"[{self.code}{kind}] {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
            f"data={self.data!r})"
        )


class _KnownError(AgentRPCError):
    """A kind from docs/protocol.md §13: code and kind default from the class.

    ``raise InvalidParams("bad 'limit'", {"field": "limit"})`` is the common
    shape when a server→client request handler rejects its params.
    """

    def __init__(
        self,
        message: str = "",
        data: Mapping[str, Any] | None = None,
        *,
        code: int | None = None,
        kind: str | None = None,
    ) -> None:
        resolved_code = code if code is not None else self.CODE
        if resolved_code is None:  # pragma: no cover - every subclass sets CODE
            raise TypeError(f"{type(self).__name__} has no default code")
        super().__init__(resolved_code, message or (self.KIND or ""), data, kind or self.KIND)


class ParseError(_KnownError):
    """The peer could not parse a message as JSON (-32700)."""

    KIND = "parseError"
    CODE = -32700


class InvalidRequest(_KnownError):
    """Not a valid JSON-RPC request, or a second ``initialize`` (-32600)."""

    KIND = "invalidRequest"
    CODE = -32600


class MessageTooLarge(InvalidRequest):
    """A frame exceeded the server's ``--max-message-bytes`` (-32600)."""

    KIND = "messageTooLarge"
    CODE = -32600


class MethodNotFound(_KnownError):
    """The peer does not implement the method (-32601)."""

    KIND = "methodNotFound"
    CODE = -32601


class InvalidParams(_KnownError):
    """The params were missing, of the wrong type or out of range (-32602)."""

    KIND = "invalidParams"
    CODE = -32602


class InvalidTranscript(InvalidParams):
    """A transcript mutation would leave a malformed history (-32602)."""

    KIND = "invalidTranscript"
    CODE = -32602


class InvalidConfiguration(InvalidParams):
    """A session configuration is inconsistent (-32602)."""

    KIND = "invalidConfiguration"
    CODE = -32602


class InternalError(_KnownError):
    """A bug in the peer, reported instead of crashing (-32603)."""

    KIND = "internalError"
    CODE = -32603


class NotInitialized(_KnownError):
    """A request came before ``initialize`` (-32002)."""

    KIND = "notInitialized"
    CODE = -32002


class Cancelled(_KnownError):
    """A turn was cancelled, or a request withdrawn (-32800).

    ``partial_text`` holds what the model had streamed before the cancel.
    """

    KIND = "cancelled"
    CODE = -32800


class SessionNotFound(_KnownError):
    """No loaded session has that id (-32010)."""

    KIND = "sessionNotFound"
    CODE = -32010


class AlreadyRunning(_KnownError):
    """A ``session/send`` while a turn is already in flight (-32011)."""

    KIND = "alreadyRunning"
    CODE = -32011


class SessionBusy(_KnownError):
    """A transcript mutation while a turn runs (-32012)."""

    KIND = "sessionBusy"
    CODE = -32012


class RevisionMismatch(_KnownError):
    """``expectedRevision`` was stale (-32013)."""

    KIND = "revisionMismatch"
    CODE = -32013


class NoPendingConfirmation(_KnownError):
    """``session/confirm`` with nothing waiting for a decision (-32014)."""

    KIND = "noPendingConfirmation"
    CODE = -32014


class NoRunningTurn(_KnownError):
    """``session/steer`` with no turn running to take the input (-32015): send instead."""

    KIND = "noRunningTurn"
    CODE = -32015


class TurnMismatch(_KnownError):
    """``session/steer`` whose ``expected_turn_id`` is not the running turn (-32016).

    The turn meant has ended; ``data["turnId"]`` is the one running now.
    """

    KIND = "turnMismatch"
    CODE = -32016


class RunLimitExceeded(_KnownError):
    """Base of the three per-turn limit errors; ``limit`` is the limit hit.

    Not a kind of its own on the wire; catch it to handle every limit alike.
    """

    @property
    def limit(self) -> int | float | None:
        """The configured limit that was exceeded (seconds for wall clock)."""
        value = self.data.get("limit")
        if isinstance(value, bool):
            return None
        return value if isinstance(value, (int, float)) else None


class MaxToolCallsExceeded(RunLimitExceeded):
    """The turn made more tool calls than ``limits.maxToolCalls`` (-32020)."""

    KIND = "maxToolCallsExceeded"
    CODE = -32020


class MaxRoundTripsExceeded(RunLimitExceeded):
    """The turn made more provider round trips than allowed (-32021)."""

    KIND = "maxRoundTripsExceeded"
    CODE = -32021


class WallClockTimeoutExceeded(RunLimitExceeded):
    """The turn ran longer than ``limits.wallClockSeconds`` (-32022)."""

    KIND = "wallClockTimeoutExceeded"
    CODE = -32022


class ToolChoiceUnsupported(_KnownError):
    """The provider cannot honour the requested ``toolChoice`` (-32030)."""

    KIND = "toolChoiceUnsupported"
    CODE = -32030


class ToolChoiceNotHonored(_KnownError):
    """The model answered in text although a tool call was demanded (-32031)."""

    KIND = "toolChoiceNotHonored"
    CODE = -32031


class EgressRefused(_KnownError):
    """The egress filter refused to send the request (-32040)."""

    KIND = "egressRefused"
    CODE = -32040

    @property
    def rule(self) -> str | None:
        """The egress rule (regex) that matched."""
        value = self.data.get("rule")
        return value if isinstance(value, str) else None


class UnreadableImageAttachment(_KnownError):
    """An image of the input could not be read (-32041)."""

    KIND = "unreadableImageAttachment"
    CODE = -32041

    @property
    def index(self) -> int | None:
        """Position of the offending image in ``input.images``."""
        value = self.data.get("index")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class RetryGuidance:
    """What a provider error says to do next (``data.provider.retryGuidance``).

    ``kind`` is ``"refreshAuthThenRetry"``, ``"retryWithBackoff"`` or ``"none"``.
    """

    kind: str
    after_seconds: float | None = None


class ProviderError(_KnownError):
    """The model provider failed (-32050); switch on ``provider_code``.

    The guidance fields come from the server so clients never parse text.
    """

    KIND = "providerError"
    CODE = -32050

    @property
    def provider(self) -> dict[str, Any]:
        """The raw ``data.provider`` object (empty if absent)."""
        value = self.data.get("provider")
        return dict(value) if isinstance(value, Mapping) else {}

    @property
    def provider_code(self) -> str | None:
        """e.g. ``"rateLimited"``, ``"authExpired"``, ``"contextLengthExceeded"``."""
        value = self.provider.get("code")
        return value if isinstance(value, str) else None

    @property
    def http_status(self) -> int | None:
        """The provider's HTTP status, when there was one."""
        value = self.provider.get("httpStatus")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def retry_guidance(self) -> RetryGuidance:
        """What to do next; ``RetryGuidance("none")`` when the server gave none."""
        raw = self.provider.get("retryGuidance")
        if not isinstance(raw, Mapping):
            return RetryGuidance("none")
        kind = raw.get("kind")
        after = raw.get("afterSeconds")
        return RetryGuidance(
            kind if isinstance(kind, str) else "none",
            float(after) if isinstance(after, (int, float)) and not isinstance(after, bool) else None,
        )

    @property
    def is_retryable(self) -> bool:
        """True when retrying the same request may succeed."""
        return self.provider.get("isRetryable") is True

    @property
    def requires_user_action(self) -> bool:
        """True when a person must act first (bad credentials, no entitlement)."""
        return self.provider.get("requiresUserAction") is True

    @property
    def safe_description(self) -> str | None:
        """A description fit to show an end user."""
        value = self.provider.get("safeDescription")
        return value if isinstance(value, str) else None

    @property
    def unsafe_message(self) -> str | None:
        """The provider's own message: for logs, not for end users."""
        value = self.provider.get("unsafeMessage")
        return value if isinstance(value, str) else None


class ProviderContractViolation(_KnownError):
    """The provider's stream was malformed (-32051)."""

    KIND = "providerContractViolation"
    CODE = -32051


class ToolExecutorError(_KnownError):
    """The client answered ``tool/call`` with an error, ending the turn (-32060).

    When the failing tool was a function registered with this client,
    ``tool_exception`` (and ``__cause__``) is the exception it raised.
    """

    KIND = "toolExecutorError"
    CODE = -32060

    #: The exception the client-side tool function raised, when known.
    tool_exception: BaseException | None = None

    @property
    def call_id(self) -> str | None:
        """The tool call that failed."""
        value = self.data.get("callId")
        return value if isinstance(value, str) else None

    @property
    def tool_name(self) -> str | None:
        """The name of the tool that failed."""
        value = self.data.get("name")
        return value if isinstance(value, str) else None

    @property
    def client_error(self) -> AgentRPCError | None:
        """The error the client answered ``tool/call`` with, decoded."""
        value = self.data.get("clientError")
        return error_from_wire(value) if isinstance(value, Mapping) else None


class HookError(_KnownError):
    """A lifecycle hook vetoed or failed (-32061)."""

    KIND = "hookError"
    CODE = -32061


class StructuredOutputError(_KnownError):
    """``session/generate`` could not produce a valid value (-32070)."""

    KIND = "structuredOutput"
    CODE = -32070

    @property
    def reason(self) -> str | None:
        """``"unsupported"``, ``"invalidJSON"``, ``"schemaViolation"``, ``"truncated"``
        (the answer was cut off by the token limit or the content filter before
        the JSON was complete) or ``"refusal"``."""
        value = self.data.get("reason")
        return value if isinstance(value, str) else None

    @property
    def path(self) -> str | None:
        """Where in the value the schema was violated, when known."""
        value = self.data.get("path")
        return value if isinstance(value, str) else None


class Overloaded(_KnownError):
    """Too many sessions or queued requests; retry later (-32001)."""

    KIND = "overloaded"
    CODE = -32001


class SessionLocked(_KnownError):
    """Another server process has the stored session loaded (-32017).
    It can be resumed once that process closes it or exits."""

    KIND = "sessionLocked"
    CODE = -32017

    @property
    def pid(self) -> int | None:
        """The process holding the session, when known."""
        value = self.data.get("pid")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


class StoreUnavailable(_KnownError):
    """The session store could not be written or read: a full disk, a
    read-only or missing directory (-32080). The session in memory is intact."""

    KIND = "storeUnavailable"
    CODE = -32080


class JournalUnreadable(_KnownError):
    """A stored session cannot be loaded: its journal is of a newer format
    version (``data.formatVersion``, ``data.supportedVersion``) or has no valid
    first line (-32081). Other sessions are unaffected."""

    KIND = "journalUnreadable"
    CODE = -32081


def _kinded_classes() -> list[type[_KnownError]]:
    """Every class that stands for one wire kind, found by walking subclasses."""
    found: list[type[_KnownError]] = []
    stack: list[type[_KnownError]] = list(_KnownError.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.KIND is not None and cls.__module__ == __name__:
            found.append(cls)
    return found


_BY_KIND: dict[str, type[AgentRPCError]] = {cls.KIND: cls for cls in _kinded_classes() if cls.KIND}

# The fallback for an unknown kind: the most general class of each code.
_BY_CODE: dict[int, type[AgentRPCError]] = {
    -32700: ParseError,
    -32600: InvalidRequest,
    -32601: MethodNotFound,
    -32602: InvalidParams,
    -32603: InternalError,
    -32002: NotInitialized,
    -32001: Overloaded,
    -32800: Cancelled,
    -32010: SessionNotFound,
    -32011: AlreadyRunning,
    -32012: SessionBusy,
    -32013: RevisionMismatch,
    -32014: NoPendingConfirmation,
    -32015: NoRunningTurn,
    -32016: TurnMismatch,
    -32017: SessionLocked,
    -32080: StoreUnavailable,
    -32081: JournalUnreadable,
    -32020: MaxToolCallsExceeded,
    -32021: MaxRoundTripsExceeded,
    -32022: WallClockTimeoutExceeded,
    -32030: ToolChoiceUnsupported,
    -32031: ToolChoiceNotHonored,
    -32040: EgressRefused,
    -32041: UnreadableImageAttachment,
    -32050: ProviderError,
    -32051: ProviderContractViolation,
    -32060: ToolExecutorError,
    -32061: HookError,
    -32070: StructuredOutputError,
}


def error_class_for(code: int, kind: str | None) -> type[AgentRPCError]:
    """The exception class for an error: by kind, else by code, else the base."""
    if kind is not None and kind in _BY_KIND:
        return _BY_KIND[kind]
    return _BY_CODE.get(code, AgentRPCError)


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
