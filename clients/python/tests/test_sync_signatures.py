"""The blocking facade declares no parameter list of its own where its async twin
has one: such a method takes the twin's parameters (``sync._forwards_to``), which
``inspect.signature`` and type checkers read through ``__wrapped__``."""

from __future__ import annotations

import inspect

import agentrpc
from agentrpc import sync

FORWARDED = {
    (sync.Client, agentrpc.Client): ["spawn", "open_session", "create_session", "resume_session", "list_sessions"],
    (sync.Session, agentrpc.Session): [
        "send", "stream", "generate_result", "confirm", "approve", "deny", "approve_for_session",
        "deny_and_stop", "set_approval_rules", "steer", "rewind", "mutate_transcript", "set_properties", "fork",
    ],
}


def test_forwarded_methods_take_the_async_parameters() -> None:
    for (facade, twin), names in FORWARDED.items():
        for name in names:
            method = getattr(facade, name)
            assert hasattr(method, "__wrapped__"), f"sync.{facade.__name__}.{name} spells out its own parameters"
            assert inspect.signature(method) == inspect.signature(getattr(twin, name)), name
