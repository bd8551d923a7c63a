"""Hand-written ground under the generated wire types (``_wire.py``).

``clients/python/scripts/generate.py`` writes ``_wire.py`` from ``schema/`` and
the error table of docs/protocol.md §13. What a schema cannot say lives here,
and only this: the lenient decoding helpers the generated ``from_wire``
methods call, the convenience properties some types add over their wire
fields (``TurnResult.text``, iterating a ``Transcript``), the base of every
event, and the error bases whose accessors read ``data``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from ._wire import RetryGuidance, RewindUndo, SessionInfo, StopReason, TurnMessage, Usage

# --- Lenient decoding ---------------------------------------------------------
# A missing or mistyped member takes a neutral value, so a newer (or buggy)
# server never makes the client fail to read a message.


def _obj(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _opt_obj(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, Mapping) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any, default: float = 0.0) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _opt_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _bool(value: Any) -> bool:
    return value is True


def _opt_bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def wire_word(value: Any, default: str) -> Any:
    """A wire enum word as received (``default`` when absent); typed by the caller.

    A newer server may send a word this client does not list yet; it is passed
    through unchanged.
    """
    return value if isinstance(value, str) else default


def _turn_input(value: Any) -> dict[str, Any]:
    """A turn's ``input``: the string shorthand becomes ``{"text": ...}``."""
    return {"text": value} if isinstance(value, str) else _obj(value)


def _error(value: Any) -> AgentRPCError | None:
    if not isinstance(value, Mapping):
        return None
    from .errors import error_from_wire  # errors imports the generated classes, which import this module

    return error_from_wire(value)


# --- Conveniences over generated result types ----------------------------------

#: Stop reasons that mean the answer was cut off before the model finished it.
STOP_REASONS_CUT = frozenset({"maxTokens", "contentFilter"})


class _WireLookup:
    """``result["wireKey"]`` reads the object as received, for code written
    against the plain-dict API (``result["message"]["text"]``)."""

    __slots__ = ()
    raw: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]


class _UsageConveniences:
    __slots__ = ()
    input_tokens: int | None
    output_tokens: int | None

    @property
    def reported(self) -> bool:
        """Whether the provider reported input or output tokens at all."""
        return self.input_tokens is not None or self.output_tokens is not None

    @property
    def total_tokens(self) -> int | None:
        """Input plus output tokens; ``None`` when neither was reported."""
        if not self.reported:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)


class _TurnResultConveniences(_WireLookup):
    __slots__ = ()
    stop_reason: StopReason
    message: TurnMessage

    @property
    def text(self) -> str:
        """Shortcut for ``message.text``."""
        return self.message.text

    @property
    def truncated(self) -> bool:
        """The answer was cut off by the token limit or the content filter."""
        return self.stop_reason in STOP_REASONS_CUT


class _TranscriptConveniences(_WireLookup):
    __slots__ = ()
    entries: list[dict[str, Any]]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def ids(self) -> list[str]:
        """The entry ids, in order."""
        return [_str(e.get("id")) for e in self.entries]

    def get(self, entry_id: str) -> dict[str, Any] | None:
        """The entry with ``entry_id``, or ``None``."""
        return next((e for e in self.entries if e.get("id") == entry_id), None)

    def of_type(self, entry_type: str) -> list[dict[str, Any]]:
        """Entries of one type (``"prompt"``, ``"response"``, ``"toolCalls"``, ...)."""
        return [e for e in self.entries if e.get("type") == entry_type]

    @property
    def turn_ids(self) -> list[str]:
        """The ``turnId`` of each turn with entries here, oldest first.

        Every entry a turn made carries that turn's ``turnId``; entries a
        client inserted with ``mutate_transcript`` carry none.
        """
        seen: dict[str, None] = {}
        for entry in self.entries:
            turn_id = entry.get("turnId")
            if isinstance(turn_id, str):
                seen.setdefault(turn_id)
        return list(seen)

    def of_turn(self, turn_id: str) -> list[dict[str, Any]]:
        """The entries the turn ``turn_id`` made, in order."""
        return [e for e in self.entries if e.get("turnId") == turn_id]


class _SessionListConveniences(_WireLookup):
    __slots__ = ()
    sessions: list[SessionInfo]

    def __iter__(self) -> Iterator[SessionInfo]:
        return iter(self.sessions)

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def ids(self) -> list[str]:
        """The session ids of this page, in order."""
        return [s.session_id for s in self.sessions]


class _RewindUndoConveniences(_WireLookup):
    __slots__ = ()
    status: str

    @property
    def ok(self) -> bool:
        """True when the undo ran."""
        return self.status == "undone"


class _RewindResultConveniences(_WireLookup):
    __slots__ = ()
    undos: list[RewindUndo]

    @property
    def failed_undos(self) -> list[RewindUndo]:
        """The undos that did not run."""
        return [u for u in self.undos if not u.ok]


class _ToWire:
    """Params a caller builds: ``to_wire`` leaves out the fields left at ``None``."""

    __slots__ = ()
    WIRE_NAMES: ClassVar[dict[str, str]]

    def to_wire(self) -> dict[str, Any]:
        """The wire object, without the fields left at ``None``."""
        return {
            wire: getattr(self, name)
            for name, wire in self.WIRE_NAMES.items()
            if getattr(self, name) is not None
        }


# --- Events --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """One ``session/event``; the base of every typed event, and the type of unknown ones."""

    type: str
    session_id: str
    turn_id: str | None = None
    seq: int = 0
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def fields_from_wire(cls, event: Mapping[str, Any]) -> dict[str, Any]:
        """The constructor fields of this class's members of a wire event."""
        return {}


class _InputText:
    __slots__ = ()
    input: dict[str, Any]

    @property
    def text(self) -> str:
        """The text of ``input``."""
        return _str(self.input.get("text"))


class _ConfirmationResolvedConveniences:
    __slots__ = ()
    decision: str

    @property
    def approved(self) -> bool:
        """True when the call was approved (once or for the session)."""
        return self.decision in ("approve", "approveForSession")


class _UsageEventConveniences:
    __slots__ = ()
    input_tokens: int | None
    output_tokens: int | None
    cached_input_tokens: int | None
    reasoning_tokens: int | None

    @property
    def usage(self) -> Usage:
        """The same numbers as a :class:`~agentrpc.Usage`."""
        from ._wire import Usage

        return Usage(self.input_tokens, self.output_tokens, self.cached_input_tokens, self.reasoning_tokens)


# --- Errors --------------------------------------------------------------------


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
        return _opt_str(self.data.get("turnId"))

    @property
    def partial_text(self) -> str | None:
        """Text the model had streamed before the turn failed, if any."""
        return _opt_str(self.data.get("partialText"))

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


# Hand-written bases of the generated classes whose `data` members get accessors.


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


class _EgressRefusedBase(_KnownError):
    @property
    def rule(self) -> str | None:
        """The egress rule (regex) that matched."""
        return _opt_str(self.data.get("rule"))


class _UnreadableImageAttachmentBase(_KnownError):
    @property
    def index(self) -> int | None:
        """Position of the offending image in ``input.images``."""
        return _opt_int(self.data.get("index"))


class _ProviderErrorBase(_KnownError):
    """Switch on ``provider_code``; the guidance fields come from the server so
    clients never parse text."""

    @property
    def provider(self) -> dict[str, Any]:
        """The raw ``data.provider`` object (empty if absent)."""
        return _obj(self.data.get("provider"))

    @property
    def provider_code(self) -> str | None:
        """e.g. ``"rateLimited"``, ``"authExpired"``, ``"contextLengthExceeded"``."""
        return _opt_str(self.provider.get("code"))

    @property
    def http_status(self) -> int | None:
        """The provider's HTTP status, when there was one."""
        return _opt_int(self.provider.get("httpStatus"))

    @property
    def cassette(self) -> dict[str, Any] | None:
        """``cassetteMiss`` only: why the model cassette had no answer (``reason``,
        ``nearest``, ``difference.pointer``: where the request drifted; docs/testing.md)."""
        value = self.provider.get("cassette")
        return dict(value) if isinstance(value, Mapping) else None

    @property
    def retry_guidance(self) -> RetryGuidance:
        """What to do next; ``RetryGuidance("none")`` when the server gave none."""
        from ._wire import RetryGuidance

        raw = self.provider.get("retryGuidance")
        return RetryGuidance.from_wire(raw) if isinstance(raw, Mapping) else RetryGuidance("none")

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
        return _opt_str(self.provider.get("safeDescription"))

    @property
    def unsafe_message(self) -> str | None:
        """The provider's own message: for logs, not for end users."""
        return _opt_str(self.provider.get("unsafeMessage"))


class _ToolExecutorErrorBase(_KnownError):
    """When the failing tool was a function registered with this client,
    ``tool_exception`` (and ``__cause__``) is the exception it raised."""

    #: The exception the client-side tool function raised, when known.
    tool_exception: BaseException | None = None

    @property
    def call_id(self) -> str | None:
        """The tool call that failed."""
        return _opt_str(self.data.get("callId"))

    @property
    def tool_name(self) -> str | None:
        """The name of the tool that failed."""
        return _opt_str(self.data.get("name"))

    @property
    def client_error(self) -> AgentRPCError | None:
        """The error the client answered ``tool/call`` with, decoded."""
        return _error(self.data.get("clientError"))


class _StructuredOutputErrorBase(_KnownError):
    @property
    def reason(self) -> str | None:
        """``"unsupported"``, ``"invalidJSON"``, ``"schemaViolation"``, ``"truncated"``
        (the answer was cut off by the token limit or the content filter before
        the JSON was complete) or ``"refusal"``."""
        return _opt_str(self.data.get("reason"))

    @property
    def path(self) -> str | None:
        """Where in the value the schema was violated, when known."""
        return _opt_str(self.data.get("path"))


class _SessionLockedBase(_KnownError):
    @property
    def pid(self) -> int | None:
        """The process holding the session, when known."""
        return _opt_int(self.data.get("pid"))

