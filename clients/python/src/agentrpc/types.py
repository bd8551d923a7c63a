"""Typed views of the server's results (docs/protocol.md §3 and §5).

Each class is a frozen dataclass with snake_case fields, built from the wire's
camelCase object by ``from_wire``. Decoding is lenient: a missing field takes
a neutral default and an unknown one is ignored, so a newer server never
makes the client fail to read a result. The object as received is kept in
``raw`` (left out of ``repr`` and comparisons) for fields this client does
not know yet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast

__all__ = [
    "StopReason",
    "TurnStatus",
    "UndoOutcome",
    "ToolOutcome",
    "Usage",
    "TurnMessage",
    "TurnResult",
    "GenerateResult",
    "ToolCall",
    "PendingConfirmation",
    "ConfirmationCall",
    "SchemaWarning",
    "ContextDiagnostic",
    "SessionState",
    "Transcript",
    "MutationResult",
    "PropertiesResult",
    "SessionInfo",
    "SessionList",
    "UndoInfo",
    "InterruptedTurn",
    "Limits",
    "ApprovalRule",
    "Decision",
    "UserQuestion",
    "RewindUndo",
    "RewindResult",
]

# The wire's closed sets of words (docs/protocol.md). A newer server may send a
# word this client does not list yet; it is passed through unchanged.
#: ``TurnResult.stopReason``.
StopReason: TypeAlias = Literal["completed", "finalAnswer", "maxTokens", "contentFilter", "refusal"]
#: ``turnEnded.status``.
TurnStatus: TypeAlias = Literal["completed", "failed", "cancelled"]
#: ``turnEnded.undo``: what happened to the turn's undo transaction.
UndoOutcome: TypeAlias = Literal["committed", "rolledBack", "none"]
#: A tool call's ``outcome``.
ToolOutcome: TypeAlias = Literal["ok", "failed", "denied", "conflict"]


def wire_word(value: Any, default: str) -> Any:
    """A wire enum word as received (``default`` when absent); typed by the caller."""
    return value if isinstance(value, str) else default



#: Stop reasons that mean the answer was cut off before the model finished it.
STOP_REASONS_CUT = frozenset({"maxTokens", "contentFilter"})


class _WireLookup:
    """``result["wireKey"]`` reads the object as received, for code written
    against the plain-dict API (``result["message"]["text"]``)."""

    __slots__ = ()
    raw: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]


def _obj(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of a turn (summed over its round trips) or of one report.

    A count the provider did not report is ``None``, never 0 (a local server
    that reports no usage gives ``Usage()`` with every field ``None``).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None

    @classmethod
    def from_wire(cls, value: Any) -> Usage:
        """Decode ``{inputTokens?, outputTokens?, cachedInputTokens?, reasoningTokens?}``."""
        obj = _obj(value)
        return cls(
            _opt_int(obj.get("inputTokens")),
            _opt_int(obj.get("outputTokens")),
            _opt_int(obj.get("cachedInputTokens")),
            _opt_int(obj.get("reasoningTokens")),
        )

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


@dataclass(frozen=True, slots=True)
class TurnMessage:
    """The response entry a completed turn appended."""

    entry_id: str
    text: str


@dataclass(frozen=True, slots=True)
class TurnResult(_WireLookup):
    """What ``session/send`` answers when a turn completes.

    ``stop_reason`` is ``"completed"``, ``"finalAnswer"`` (then
    ``final_answer`` holds the final tool's arguments), or how a reply that did
    not end normally ended: ``"maxTokens"`` and ``"contentFilter"`` (the answer
    is cut off: see ``truncated``) or ``"refusal"``.
    """

    turn_id: str
    message: TurnMessage
    stop_reason: StopReason
    final_answer: Any
    usage: Usage
    round_trips: int
    tool_calls: int
    revision: int
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def text(self) -> str:
        """Shortcut for ``message.text``."""
        return self.message.text

    @property
    def truncated(self) -> bool:
        """The answer was cut off by the token limit or the content filter."""
        return self.stop_reason in STOP_REASONS_CUT

    @classmethod
    def from_wire(cls, value: Any) -> TurnResult:
        """Decode a wire ``TurnResult``."""
        obj = _obj(value)
        message = _obj(obj.get("message"))
        return cls(
            turn_id=_str(obj.get("turnId")),
            message=TurnMessage(_str(message.get("entryId")), _str(message.get("text"))),
            stop_reason=cast(StopReason, wire_word(obj.get("stopReason"), "completed")),
            final_answer=obj.get("finalAnswer"),
            usage=Usage.from_wire(obj.get("usage")),
            round_trips=_int(obj.get("roundTrips")),
            tool_calls=_int(obj.get("toolCalls")),
            revision=_int(obj.get("revision")),
            raw=obj,
        )


@dataclass(frozen=True, slots=True)
class GenerateResult:
    """What ``session/generate`` answers: the validated value, its turn and usage.

    ``value`` is already converted to the requested Python type (a dataclass
    instance when a dataclass was given); ``raw_value`` is the JSON as received.
    """

    value: Any
    turn_id: str
    usage: Usage
    raw_value: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model made it (``activeToolCalls`` items)."""

    call_id: str
    name: str
    arguments: Any

    @classmethod
    def from_wire(cls, value: Any) -> ToolCall:
        """Decode ``{callId, name, arguments}``."""
        obj = _obj(value)
        return cls(_str(obj.get("callId")), _str(obj.get("name")), obj.get("arguments"))


@dataclass(frozen=True, slots=True)
class PendingConfirmation:
    """A tool call waiting for ``session/confirm``."""

    call_id: str
    name: str
    arguments: Any
    reason: str | None = None

    @classmethod
    def from_wire(cls, value: Any) -> PendingConfirmation:
        """Decode ``{callId, name, arguments, reason?}``."""
        obj = _obj(value)
        return cls(_str(obj.get("callId")), _str(obj.get("name")), obj.get("arguments"), _opt_str(obj.get("reason")))


@dataclass(frozen=True, slots=True)
class ConfirmationCall:
    """What an ``on_confirm`` callback is asked about (``confirmation/request``).

    ``session`` is the :class:`~agentrpc.Session` handle when the client knows
    the session (it was opened or resumed through this client), else ``None``.
    """

    session_id: str
    turn_id: str
    call_id: str
    name: str
    arguments: Any
    reason: str | None = None
    session: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class SchemaWarning:
    """A part of a tool's input schema the provider could not take as it is."""

    tool: str
    path: str
    message: str

    @classmethod
    def from_wire(cls, value: Any) -> SchemaWarning:
        """Decode ``{tool, path, message}``."""
        obj = _obj(value)
        return cls(_str(obj.get("tool")), _str(obj.get("path")), _str(obj.get("message")))


@dataclass(frozen=True, slots=True)
class ContextDiagnostic:
    """A context source that could not be refreshed."""

    source: str
    message: str

    @classmethod
    def from_wire(cls, value: Any) -> ContextDiagnostic:
        """Decode ``{source, message}``."""
        obj = _obj(value)
        return cls(_str(obj.get("source")), _str(obj.get("message")))


@dataclass(frozen=True, slots=True)
class SessionState(_WireLookup):
    """``session/getState``: an observable session (docs/protocol.md §3)."""

    session_id: str
    is_running: bool
    turn_id: str | None
    current_text: str
    active_tool_calls: list[ToolCall]
    pending_confirmation: PendingConfirmation | None
    last_usage_report: Usage | None
    last_schema_warnings: list[SchemaWarning]
    last_context_diagnostics: list[ContextDiagnostic]
    active_profile: str | None
    properties: dict[str, Any]
    revision: int
    entry_count: int
    #: Sends waiting to run as the next turns (``queue=True``).
    queued_sends: int = 0
    #: Standing approval rules (``approve_for_session``, ``set_approval_rules``).
    approval_rules: list[ApprovalRule] = field(default_factory=list)
    #: The usage of every ended turn of the session, summed (kept in the store
    #: with the session); ``None`` until some turn reported usage.
    usage_totals: Usage | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, value: Any) -> SessionState:
        """Decode a wire ``SessionState``."""
        obj = _obj(value)
        pending = obj.get("pendingConfirmation")
        usage = obj.get("lastUsageReport")
        totals = obj.get("usageTotals")
        return cls(
            session_id=_str(obj.get("sessionId")),
            is_running=obj.get("isRunning") is True,
            turn_id=_opt_str(obj.get("turnId")),
            current_text=_str(obj.get("currentText")),
            active_tool_calls=[ToolCall.from_wire(c) for c in obj.get("activeToolCalls") or []],
            pending_confirmation=PendingConfirmation.from_wire(pending) if isinstance(pending, Mapping) else None,
            last_usage_report=Usage.from_wire(usage) if isinstance(usage, Mapping) else None,
            last_schema_warnings=[SchemaWarning.from_wire(w) for w in obj.get("lastSchemaWarnings") or []],
            last_context_diagnostics=[ContextDiagnostic.from_wire(d) for d in obj.get("lastContextDiagnostics") or []],
            active_profile=_opt_str(obj.get("activeProfile")),
            properties=_obj(obj.get("properties")),
            revision=_int(obj.get("revision")),
            entry_count=_int(obj.get("entryCount")),
            queued_sends=_int(obj.get("queuedSends")),
            approval_rules=[ApprovalRule.from_wire(r) for r in obj.get("approvalRules") or [] if isinstance(r, Mapping)],
            usage_totals=Usage.from_wire(totals) if isinstance(totals, Mapping) else None,
            raw=obj,
        )


@dataclass(frozen=True, slots=True)
class Transcript(_WireLookup):
    """``session/getTranscript``: the entries, as wire dicts, and the instructions.

    Entries stay plain dicts (``{"id", "type", ...}``, docs/protocol.md §3) so they
    can be edited and handed straight back to ``mutate_transcript``.
    Iterating a transcript iterates its entries.
    """

    revision: int
    instructions: str
    entries: list[dict[str, Any]]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, value: Any) -> Transcript:
        """Decode ``{revision, instructions, entries}``."""
        obj = _obj(value)
        entries = [dict(e) for e in obj.get("entries") or [] if isinstance(e, Mapping)]
        return cls(_int(obj.get("revision")), _str(obj.get("instructions")), entries, obj)

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


@dataclass(frozen=True, slots=True)
class MutationResult:
    """``session/mutateTranscript``: the new revision and entry count."""

    revision: int
    entry_count: int


@dataclass(frozen=True, slots=True)
class PropertiesResult:
    """``session/setProperties``: the properties and active profile afterwards."""

    properties: dict[str, Any]
    active_profile: str | None


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-turn limits (docs/protocol.md §3 ``limits``); ``None`` keeps the server default.

    Usable for ``create_session(limits=...)`` and ``send(limits=...)``.
    """

    max_tool_calls: int | None = None
    max_round_trips: int | None = None
    wall_clock_seconds: float | None = None
    tool_timeout_seconds: float | None = None
    confirmation_timeout_seconds: float | None = None
    ask_user_timeout_seconds: float | None = None

    def to_wire(self) -> dict[str, Any]:
        """The wire object, without the fields left at ``None``."""
        return {
            wire: getattr(self, name)
            for name, wire in LIMITS_WIRE_NAMES.items()
            if getattr(self, name) is not None
        }


#: Limits' Python names and their wire names.
LIMITS_WIRE_NAMES: dict[str, str] = {
    "max_tool_calls": "maxToolCalls",
    "max_round_trips": "maxRoundTrips",
    "wall_clock_seconds": "wallClockSeconds",
    "tool_timeout_seconds": "toolTimeoutSeconds",
    "confirmation_timeout_seconds": "confirmationTimeoutSeconds",
    "ask_user_timeout_seconds": "askUserTimeoutSeconds",
}


@dataclass(frozen=True, slots=True)
class SessionInfo(_WireLookup):
    """One session in ``session/list``: loaded here, or only stored
    (docs/protocol.md, "Durable sessions")."""

    session_id: str
    #: The configured title, else the first prompt cut to 80 characters.
    title: str | None
    user_id: str | None
    #: The model's configured name, or an inline model's id.
    model: str | None
    #: RFC 3339 timestamps (UTC).
    created_at: str | None
    updated_at: str | None
    revision: int
    entry_count: int
    is_running: bool
    #: Loaded in this server process.
    loaded: bool
    #: Loaded by another server process on the same store (resuming it fails with SessionLocked).
    locked: bool
    #: That process's id, when known.
    locked_by: int | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, value: Any) -> SessionInfo:
        """Decode one ``SessionSummary``."""
        obj = _obj(value)
        return cls(
            session_id=_str(obj.get("sessionId")),
            title=_opt_str(obj.get("title")),
            user_id=_opt_str(obj.get("userId")),
            model=_opt_str(obj.get("model")),
            created_at=_opt_str(obj.get("createdAt")),
            updated_at=_opt_str(obj.get("updatedAt")),
            revision=_int(obj.get("revision")),
            entry_count=_int(obj.get("entryCount")),
            is_running=obj.get("isRunning") is True,
            loaded=obj.get("loaded") is True,
            locked=obj.get("locked") is True,
            locked_by=_opt_int(obj.get("lockedBy")),
            raw=obj,
        )


@dataclass(frozen=True, slots=True)
class SessionList(_WireLookup):
    """``session/list``: one page, newest-updated first. Iterating it iterates
    its sessions; ``next_cursor`` is ``None`` on the last page."""

    sessions: list[SessionInfo]
    next_cursor: str | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, value: Any) -> SessionList:
        """Decode ``{data, nextCursor?}``."""
        obj = _obj(value)
        data = obj.get("data")
        sessions = [SessionInfo.from_wire(s) for s in data if isinstance(s, Mapping)] if isinstance(data, list) else []
        return cls(sessions, _opt_str(obj.get("nextCursor")), obj)

    def __iter__(self) -> Iterator[SessionInfo]:
        return iter(self.sessions)

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def ids(self) -> list[str]:
        """The session ids of this page, in order."""
        return [s.session_id for s in self.sessions]


@dataclass(frozen=True, slots=True)
class UndoInfo:
    """A tool result's ``undo``, as ``tool/undo`` receives it."""

    call_id: str
    name: str
    undo: Any

    @classmethod
    def from_wire(cls, value: Any) -> UndoInfo:
        """Decode ``{callId, name, undo}``."""
        obj = _obj(value)
        return cls(_str(obj.get("callId")), _str(obj.get("name")), obj.get("undo"))


@dataclass(frozen=True, slots=True)
class InterruptedTurn:
    """A turn cut by a crash, found by ``session/resume``: the transcript error
    policy was applied to it as to a failed turn."""

    turn_id: str
    #: Its ``ok`` tool results that carried ``undo``, newest first.
    undo: list[UndoInfo]
    #: ``"rolledBack"`` (``rollback=True`` undid them), ``"committed"`` (left
    #: as they are) or ``"none"`` (there were none).
    undo_outcome: str

    @classmethod
    def from_wire(cls, value: Any) -> InterruptedTurn:
        """Decode ``{turnId, undo, undoOutcome}``."""
        obj = _obj(value)
        undo = obj.get("undo")
        return cls(
            _str(obj.get("turnId")),
            [UndoInfo.from_wire(u) for u in undo] if isinstance(undo, list) else [],
            _str(obj.get("undoOutcome"), "none"),
        )


@dataclass(frozen=True, slots=True)
class ApprovalRule(_WireLookup):
    """A standing approval: calls of ``tool`` whose arguments match ``arguments``
    run without asking (docs/protocol.md §17). A string pattern is a glob over a
    string argument; any other value must be equal."""

    id: str
    tool: str
    arguments: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, value: Any) -> ApprovalRule:
        """Decode ``{id, tool, arguments?}``."""
        obj = _obj(value)
        arguments = obj.get("arguments")
        return cls(id=_str(obj.get("id")), tool=_str(obj.get("tool")),
                   arguments=dict(arguments) if isinstance(arguments, Mapping) else None, raw=obj)


#: The decisions ``session/confirm`` and ``confirmation/request`` take.
DECISIONS = ("approve", "deny", "approveForSession", "denyAndStop")


@dataclass(frozen=True, slots=True)
class Decision:
    """A confirmation decision beyond approve/deny, for :meth:`Session.confirm`
    and as an ``on_confirm`` answer (docs/protocol.md §17).

    Build one with the class methods: ``Decision.approve(arguments={...})`` runs
    the call with edited arguments, ``Decision.approve_for_session(rule={"path":
    "src/*"})`` adds a standing rule, ``Decision.deny_and_stop(reason)`` denies
    and cancels the turn.
    """

    decision: str
    reason: str | None = None
    #: Edited arguments (approve decisions); the server checks them against the tool's schema.
    arguments: Any = None
    #: ``approveForSession``: argument patterns that scope the rule (None: every call of the tool).
    rule: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.decision not in DECISIONS:
            raise ValueError(f"decision must be one of {', '.join(DECISIONS)}, not {self.decision!r}")

    @classmethod
    def approve(cls, *, arguments: Any = None) -> Decision:
        """Run the call (with ``arguments`` instead of the model's, when given)."""
        return cls("approve", arguments=arguments)

    @classmethod
    def deny(cls, reason: str | None = None) -> Decision:
        """Do not run the call; ``reason`` is shown to the model."""
        return cls("deny", reason=reason)

    @classmethod
    def approve_for_session(cls, rule: Mapping[str, Any] | None = None, *, arguments: Any = None) -> Decision:
        """Run the call and approve later calls of the tool whose arguments match ``rule``."""
        return cls("approveForSession", arguments=arguments, rule=dict(rule) if rule is not None else None)

    @classmethod
    def deny_and_stop(cls, reason: str | None = None) -> Decision:
        """Deny the call and cancel the turn at once."""
        return cls("denyAndStop", reason=reason)

    def to_wire(self) -> dict[str, Any]:
        """The ``{decision, reason?, arguments?, rule?}`` members."""
        out: dict[str, Any] = {"decision": self.decision}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.arguments is not None:
            out["arguments"] = self.arguments
        if self.rule is not None:
            out["rule"] = {"arguments": self.rule}
        return out


@dataclass(frozen=True, slots=True)
class UserQuestion:
    """What an ``on_ask_user`` callback is asked (``user/ask``, from the model's ``ask_user``).

    ``options`` are the model's suggested answers; the user may answer freely.
    """

    session_id: str
    turn_id: str
    call_id: str
    question: str
    options: list[str] | None = None
    session: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class RewindUndo(_WireLookup):
    """One ``tool/undo`` a rewind sent: ``status`` is ``undone`` or ``failed``."""

    turn_id: str
    call_id: str
    name: str
    status: str
    error: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True when the undo ran."""
        return self.status == "undone"

    @classmethod
    def from_wire(cls, value: Any) -> RewindUndo:
        obj = _obj(value)
        return cls(turn_id=_str(obj.get("turnId")), call_id=_str(obj.get("callId")), name=_str(obj.get("name")),
                   status=_str(obj.get("status")), error=_opt_str(obj.get("error")), raw=obj)


@dataclass(frozen=True, slots=True)
class RewindResult(_WireLookup):
    """``session/rewind``: the transcript after the cut, what left it, and the undos sent."""

    revision: int
    entry_count: int
    removed_entries: list[str]
    undos: list[RewindUndo]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def failed_undos(self) -> list[RewindUndo]:
        """The undos that did not run."""
        return [u for u in self.undos if not u.ok]

    @classmethod
    def from_wire(cls, value: Any) -> RewindResult:
        obj = _obj(value)
        return cls(
            revision=_int(obj.get("revision")),
            entry_count=_int(obj.get("entryCount")),
            removed_entries=[e for e in obj.get("removedEntries") or [] if isinstance(e, str)],
            undos=[RewindUndo.from_wire(u) for u in obj.get("undos") or [] if isinstance(u, Mapping)],
            raw=obj,
        )
