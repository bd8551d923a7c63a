"""Typed ``session/event`` notifications (docs/protocol.md §4).

:func:`parse_event` turns one notification's params into an instance of the
class named by ``event.type``; a type this client does not know becomes a
plain :class:`Event`, so a newer server never breaks iteration. Every event
carries ``session_id``, ``turn_id`` (``None`` outside a turn), ``seq`` and the
``raw`` event object as received.

The event classes are generated from ``schema/`` into ``_wire.py``
(``python3 clients/python/scripts/generate.py``); this module re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._wire_base import Event, _int, _opt_str, _str
# <generated> by clients/python/scripts/generate.py: the names of _wire.py this module exports
from ._wire import (
    TurnStarted,
    ProfileActivated,
    RequestStarted,
    TextDelta,
    ReasoningDelta,
    ToolCallStarted,
    ToolProgress,
    ConfirmationRequested,
    ConfirmationResolved,
    ToolCallFinished,
    EntryAppended,
    PropertiesChanged,
    HookFired,
    UsageEvent,
    SchemaWarnings,
    ContextDiagnostics,
    CacheInvalidated,
    Retrying,
    TurnEnded,
    SteeringApplied,
    ApprovalRulesChanged,
    MCPServerStatusChanged,
    PlanUpdated,
    ContextCompacted,
    EVENT_TYPES,
)
# </generated>

__all__ = [
    # <generated>
    "TurnStarted",
    "ProfileActivated",
    "RequestStarted",
    "TextDelta",
    "ReasoningDelta",
    "ToolCallStarted",
    "ToolProgress",
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
    "MCPServerStatusChanged",
    "PlanUpdated",
    "ContextCompacted",
    "EVENT_TYPES",
    # </generated>
    "Event",
    "parse_event",
]


def parse_event(params: Any) -> Event:
    """Decode ``session/event`` params ``{sessionId, turnId?, seq, event}``.

    Never raises on a well-formed notification: unknown types and missing
    fields degrade to :class:`Event` and neutral defaults.
    """
    outer = dict(params) if isinstance(params, Mapping) else {}
    event = outer.get("event")
    body = dict(event) if isinstance(event, Mapping) else {}
    kind = _str(body.get("type"), "unknown")
    cls = EVENT_TYPES.get(kind, Event)
    return cls(
        type=kind,
        session_id=_str(outer.get("sessionId")),
        turn_id=_opt_str(outer.get("turnId")),
        seq=_int(outer.get("seq")),
        raw=body,
        **cls.fields_from_wire(body),
    )
