"""Typed views of the server's results (docs/protocol.md §3 and §5).

Each class is a frozen dataclass with snake_case fields, built from the wire's
camelCase object by ``from_wire``. Decoding is lenient: a missing field takes
a neutral default and an unknown one is ignored, so a newer server never
makes the client fail to read a result. The object as received is kept in
``raw`` (left out of ``repr`` and comparisons) for fields this client does
not know yet.

The wire types are generated from ``schema/`` into ``_wire.py``
(``python3 clients/python/scripts/generate.py``); this module re-exports them
and adds the few types that are not a wire object as received: what a
callback is asked (:class:`ConfirmationCall`, :class:`UserQuestion`, which
carry the session handle), a converted ``generate`` value
(:class:`GenerateResult`) and the :class:`Decision` builder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._wire import DECISIONS as DECISIONS
from ._wire_base import STOP_REASONS_CUT as STOP_REASONS_CUT
from ._wire_base import wire_word as wire_word
# <generated> by clients/python/scripts/generate.py: the names of _wire.py this module exports
from ._wire import (
    StopReason,
    TurnStatus,
    UndoOutcome,
    ToolOutcome,
    Usage,
    TurnMessage,
    TurnResult,
    ToolCall,
    PendingConfirmation,
    SchemaWarning,
    ContextDiagnostic,
    ApprovalRule,
    SessionState,
    Transcript,
    MutationResult,
    PropertiesResult,
    Limits,
    SessionInfo,
    SessionList,
    UndoInfo,
    RoundTripCall,
    ParkedTurn,
    InterruptedTurn,
    RewindUndo,
    RewindResult,
)
# </generated>

__all__ = [
    # <generated>
    "StopReason",
    "TurnStatus",
    "UndoOutcome",
    "ToolOutcome",
    "Usage",
    "TurnMessage",
    "TurnResult",
    "ToolCall",
    "PendingConfirmation",
    "SchemaWarning",
    "ContextDiagnostic",
    "ApprovalRule",
    "SessionState",
    "Transcript",
    "MutationResult",
    "PropertiesResult",
    "Limits",
    "SessionInfo",
    "SessionList",
    "UndoInfo",
    "RoundTripCall",
    "ParkedTurn",
    "InterruptedTurn",
    "RewindUndo",
    "RewindResult",
    # </generated>
    "GenerateResult",
    "ConfirmationCall",
    "Decision",
    "UserQuestion",
    "Elicitation",
]

#: Limits' Python names and their wire names.
LIMITS_WIRE_NAMES: dict[str, str] = Limits.WIRE_NAMES


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
class Elicitation:
    """What an ``on_elicitation`` callback is asked (``user/elicit``): an MCP
    server, during call ``call_id``, asks the user to fill in a form.

    ``requested_schema`` is the form: a JSON Schema object whose properties are
    strings, numbers, booleans or enums. The callback returns the values (a
    mapping: the user accepted), or ``"decline"`` or ``"cancel"``.
    """

    session_id: str
    turn_id: str
    call_id: str
    server: str
    message: str
    requested_schema: dict[str, Any]
    session: Any = field(default=None, repr=False, compare=False)


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
