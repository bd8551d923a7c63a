"""Builders for ``session/mutateTranscript`` operations and entries (docs/protocol.md §3).

>>> from agentrpc import ops
>>> ops.truncate_after("e3")
{'op': 'truncateAfter', 'id': 'e3'}

Pass a list of them to :meth:`agentrpc.Session.mutate_transcript`; the server
applies all or none. Entries are plain dicts; the entry builders below fill
in a fresh client-side id (``c-…``) unless you give one, because every entry
in a transcript needs a unique id.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from .types import ToolOutcome

__all__ = [
    "remove",
    "truncate_after",
    "replace",
    "insert",
    "set",
    "prompt",
    "response",
    "reasoning",
    "tool_calls",
    "tool_output",
    "new_id",
]

Entry = dict[str, Any]


def new_id() -> str:
    """A fresh entry id for entries made on the client."""
    return f"c-{uuid.uuid4().hex[:12]}"


def remove(ids: str | Iterable[str]) -> dict[str, Any]:
    """Remove the entries with these ids (one id or many)."""
    return {"op": "remove", "ids": [ids] if isinstance(ids, str) else builtins.list(ids)}


def truncate_after(entry_id: str | None) -> dict[str, Any]:
    """Keep entries up to and including ``entry_id``; ``None`` empties the transcript."""
    return {"op": "truncateAfter", "id": entry_id}


def replace(entry_id: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """Replace one entry (the new entry may keep the same id)."""
    return {"op": "replace", "id": entry_id, "entry": dict(entry)}


def insert(after: str | None, entries: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Insert entries after ``after`` (``None``: at the start)."""
    return {"op": "insert", "after": after, "entries": _entries(entries)}


def set(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:  # noqa: A001 - the op's wire name
    """Replace the whole transcript."""
    return {"op": "set", "entries": _entries(entries)}


def _entries(entries: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> builtins.list[dict[str, Any]]:
    if isinstance(entries, Mapping):
        return [dict(entries)]
    return [dict(e) for e in entries]


def prompt(text: str, *, id: str | None = None, images: Iterable[Mapping[str, Any]] | None = None) -> Entry:  # noqa: A002
    """A ``prompt`` entry (the user's turn input)."""
    entry: Entry = {"id": id or new_id(), "type": "prompt", "text": text}
    if images is not None:
        entry["images"] = [dict(i) for i in images]
    return entry


def response(text: str, *, id: str | None = None) -> Entry:  # noqa: A002
    """A ``response`` entry (the model's answer)."""
    return {"id": id or new_id(), "type": "response", "text": text}


def reasoning(text: str, *, id: str | None = None) -> Entry:  # noqa: A002
    """A ``reasoning`` entry."""
    return {"id": id or new_id(), "type": "reasoning", "text": text}


def tool_calls(calls: Iterable[Mapping[str, Any]], *, id: str | None = None) -> Entry:  # noqa: A002
    """A ``toolCalls`` entry; each call is ``{callId, name, arguments}``."""
    return {"id": id or new_id(), "type": "toolCalls", "calls": [dict(c) for c in calls]}


def tool_output(call_id: str, name: str, content: Any, *, outcome: ToolOutcome = "ok", id: str | None = None) -> Entry:  # noqa: A002
    """A ``toolOutput`` entry answering ``call_id``."""
    return {"id": id or new_id(), "type": "toolOutput", "callId": call_id, "name": name,
            "outcome": outcome, "content": content}
