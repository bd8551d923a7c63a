"""Typed ``session/event`` notifications (docs/protocol.md §4).

:func:`parse_event` turns one notification's params into an instance of the
class named by ``event.type``; a type this client does not know becomes a
plain :class:`Event`, so a newer server never breaks iteration. Every event
carries ``session_id``, ``turn_id`` (``None`` outside a turn), ``seq`` and the
``raw`` event object as received.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from .errors import AgentRPCError, error_from_wire
from .types import (
    ContextDiagnostic,
    SchemaWarning,
    StopReason,
    ToolOutcome,
    TurnStatus,
    UndoOutcome,
    Usage,
    wire_word,
)

__all__ = [
    "Event",
    "TurnStarted",
    "ProfileActivated",
    "RequestStarted",
    "TextDelta",
    "ReasoningDelta",
    "ToolCallStarted",
    "ConfirmationRequested",
    "ConfirmationResolved",
    "ToolCallFinished",
    "EntryAppended",
    "PropertiesChanged",
    "HookFired",
    "UsageEvent",
    "SchemaWarnings",
    "ContextDiagnostics",
    "CacheInvalidated",
    "Retrying",
    "TurnEnded",
    "SteeringApplied",
    "ApprovalRulesChanged",
    "parse_event",
    "EVENT_TYPES",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class Event:
    """One ``session/event``; the base of every typed event, and the type of unknown ones."""

    type: str
    session_id: str
    turn_id: str | None = None
    seq: int = 0
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnStarted(Event):
    """A turn began; ``input`` is ``{text, images?}``."""

    input: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The prompt text."""
        value = self.input.get("text")
        return value if isinstance(value, str) else ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileActivated(Event):
    """The active profile changed."""

    profile: str = ""
    previous: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestStarted(Event):
    """A provider round trip began."""

    round_trip: int = 0
    profile: str = ""
    provider: str = ""
    model: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta(Event):
    """A piece of the model's answer."""

    delta: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ReasoningDelta(Event):
    """A piece of the model's reasoning."""

    delta: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallStarted(Event):
    """The model called a tool (before validation, guards and confirmation)."""

    call_id: str = ""
    name: str = ""
    arguments: Any = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfirmationRequested(Event):
    """A call waits for ``session.confirm(call_id, ...)`` (built-in flow)."""

    call_id: str = ""
    name: str = ""
    arguments: Any = None
    reason: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfirmationResolved(Event):
    """A confirmation was settled; ``source`` is client, timeout, cancel, policy or rule.

    ``decision`` is approve, deny, approveForSession or denyAndStop.
    """

    call_id: str = ""
    decision: str = ""
    source: str = ""

    @property
    def approved(self) -> bool:
        """True when the call was approved (once or for the session)."""
        return self.decision in ("approve", "approveForSession")


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallFinished(Event):
    """A call produced its output; ``outcome`` is ok, failed, denied or conflict."""

    call_id: str = ""
    name: str = ""
    outcome: ToolOutcome = "ok"
    content: Any = None


@dataclass(frozen=True, kw_only=True, slots=True)
class EntryAppended(Event):
    """A transcript entry was appended (the wire dict, docs/protocol.md §3)."""

    entry: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class PropertiesChanged(Event):
    """Session properties changed: ``set`` holds new values, ``removed`` the dropped keys."""

    set: dict[str, Any] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class HookFired(Event):
    """A lifecycle hook ran."""

    hook: str = ""
    profile: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageEvent(Event):
    """The provider reported usage for a round trip (a count it left out is ``None``)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None

    @property
    def usage(self) -> Usage:
        """The same numbers as a :class:`~agentrpc.Usage`."""
        return Usage(self.input_tokens, self.output_tokens, self.cached_input_tokens, self.reasoning_tokens)


@dataclass(frozen=True, kw_only=True, slots=True)
class SchemaWarnings(Event):
    """Tool schemas were down-converted for the provider (never fatal)."""

    warnings: list[SchemaWarning] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextDiagnostics(Event):
    """Context sources that could not be refreshed."""

    diagnostics: list[ContextDiagnostic] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheInvalidated(Event):
    """A request's cacheable prefix differs from the previous one."""

    reason: str = ""
    first_changed_entry: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Retrying(Event):
    """A transient provider error is retried automatically after ``after_seconds``."""

    attempt: int = 0
    after_seconds: float = 0.0
    error: AgentRPCError | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnEnded(Event):
    """The turn ended: ``status`` completed, failed or cancelled; ``undo`` committed, rolledBack or none.

    ``stop_reason`` is set on a completed turn whose reply did not end normally:
    ``"maxTokens"``, ``"contentFilter"`` or ``"refusal"`` (``None`` otherwise).
    """

    status: TurnStatus = "completed"
    undo: UndoOutcome = "none"
    error: AgentRPCError | None = None
    stop_reason: StopReason | None = None


def _str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, kw_only=True, slots=True)
class SteeringApplied(Event):
    """``session.steer`` input joined the running turn as the prompt entry ``entry_id``."""

    entry_id: str = ""
    input: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The steering text."""
        return _str(self.input.get("text"))


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRulesChanged(Event):
    """The session's standing approval rules changed; ``rules`` is the whole new list."""

    rules: list[dict[str, Any]] = field(default_factory=list)


def _error(value: Any) -> AgentRPCError | None:
    return error_from_wire(value) if isinstance(value, Mapping) else None


def _fields(kind: str, e: dict[str, Any]) -> tuple[type[Event], dict[str, Any]]:
    """The class and constructor fields for one wire event."""
    if kind == "turnStarted":
        raw_input = e.get("input")
        input_obj = {"text": raw_input} if isinstance(raw_input, str) else dict(raw_input or {})
        return TurnStarted, {"input": input_obj}
    if kind == "profileActivated":
        return ProfileActivated, {"profile": _str(e.get("profile")), "previous": _opt_str(e.get("previous"))}
    if kind == "requestStarted":
        return RequestStarted, {
            "round_trip": _int(e.get("roundTrip")),
            "profile": _str(e.get("profile")),
            "provider": _str(e.get("provider")),
            "model": _str(e.get("model")),
        }
    if kind == "textDelta":
        return TextDelta, {"delta": _str(e.get("delta"))}
    if kind == "reasoningDelta":
        return ReasoningDelta, {"delta": _str(e.get("delta"))}
    if kind == "toolCallStarted":
        return ToolCallStarted, {"call_id": _str(e.get("callId")), "name": _str(e.get("name")), "arguments": e.get("arguments")}
    if kind == "confirmationRequested":
        return ConfirmationRequested, {
            "call_id": _str(e.get("callId")),
            "name": _str(e.get("name")),
            "arguments": e.get("arguments"),
            "reason": _opt_str(e.get("reason")),
        }
    if kind == "confirmationResolved":
        return ConfirmationResolved, {
            "call_id": _str(e.get("callId")),
            "decision": _str(e.get("decision")),
            "source": _str(e.get("source")),
        }
    if kind == "toolCallFinished":
        return ToolCallFinished, {
            "call_id": _str(e.get("callId")),
            "name": _str(e.get("name")),
            "outcome": cast(ToolOutcome, wire_word(e.get("outcome"), "ok")),
            "content": e.get("content"),
        }
    if kind == "entryAppended":
        entry = e.get("entry")
        return EntryAppended, {"entry": dict(entry) if isinstance(entry, Mapping) else {}}
    if kind == "propertiesChanged":
        changed = e.get("set")
        removed = e.get("removed")
        return PropertiesChanged, {
            "set": dict(changed) if isinstance(changed, Mapping) else {},
            "removed": [r for r in removed if isinstance(r, str)] if isinstance(removed, list) else [],
        }
    if kind == "hookFired":
        return HookFired, {"hook": _str(e.get("hook")), "profile": _str(e.get("profile"))}
    if kind == "usage":
        return UsageEvent, {
            "input_tokens": _opt_int(e.get("inputTokens")),
            "output_tokens": _opt_int(e.get("outputTokens")),
            "cached_input_tokens": _opt_int(e.get("cachedInputTokens")),
            "reasoning_tokens": _opt_int(e.get("reasoningTokens")),
        }
    if kind == "schemaWarnings":
        return SchemaWarnings, {"warnings": [SchemaWarning.from_wire(w) for w in e.get("warnings") or []]}
    if kind == "contextDiagnostics":
        return ContextDiagnostics, {"diagnostics": [ContextDiagnostic.from_wire(d) for d in e.get("diagnostics") or []]}
    if kind == "cacheInvalidated":
        return CacheInvalidated, {"reason": _str(e.get("reason")), "first_changed_entry": _opt_str(e.get("firstChangedEntry"))}
    if kind == "retrying":
        after = e.get("afterSeconds")
        return Retrying, {
            "attempt": _int(e.get("attempt")),
            "after_seconds": float(after) if isinstance(after, (int, float)) and not isinstance(after, bool) else 0.0,
            "error": _error(e.get("error")),
        }
    if kind == "turnEnded":
        return TurnEnded, {
            "status": cast(TurnStatus, wire_word(e.get("status"), "completed")),
            "undo": cast(UndoOutcome, wire_word(e.get("undo"), "none")),
            "error": _error(e.get("error")),
            "stop_reason": cast("StopReason | None", _opt_str(e.get("stopReason"))),
        }
    if kind == "steeringApplied":
        raw_input = e.get("input")
        input_obj = {"text": raw_input} if isinstance(raw_input, str) else dict(raw_input or {})
        return SteeringApplied, {"entry_id": _str(e.get("entryId")), "input": input_obj}
    if kind == "approvalRulesChanged":
        rules = e.get("rules")
        return ApprovalRulesChanged, {"rules": [dict(r) for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []}
    return Event, {}


#: Wire ``type`` → event class, for every type this client knows.
EVENT_TYPES: dict[str, type[Event]] = {
    name: _fields(name, {})[0]
    for name in (
        "turnStarted", "profileActivated", "requestStarted", "textDelta", "reasoningDelta",
        "toolCallStarted", "confirmationRequested", "confirmationResolved", "toolCallFinished",
        "entryAppended", "propertiesChanged", "hookFired", "usage", "schemaWarnings",
        "contextDiagnostics", "cacheInvalidated", "retrying", "turnEnded", "steeringApplied",
        "approvalRulesChanged",
    )
}


def parse_event(params: Any) -> Event:
    """Decode ``session/event`` params ``{sessionId, turnId?, seq, event}``.

    Never raises on a well-formed notification: unknown types and missing
    fields degrade to :class:`Event` and neutral defaults.
    """
    outer = dict(params) if isinstance(params, Mapping) else {}
    event = outer.get("event")
    body = dict(event) if isinstance(event, Mapping) else {}
    kind = _str(body.get("type"), "unknown")
    cls, fields = _fields(kind, body)
    return cls(
        type=kind,
        session_id=_str(outer.get("sessionId")),
        turn_id=_opt_str(outer.get("turnId")),
        seq=_int(outer.get("seq")),
        raw=body,
        **fields,
    )
