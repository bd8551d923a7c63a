"""Pure decoding and encoding: events, results, session config, options, images, ops."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrpc import (
    CacheInvalidated,
    ConfirmationResolved,
    ContextDiagnostics,
    Event,
    HookFired,
    MCPServerStatusChanged,
    Limits,
    PlanUpdated,
    ProfileActivated,
    PropertiesChanged,
    Retrying,
    SchemaWarnings,
    SessionState,
    TextDelta,
    Transcript,
    TurnEnded,
    TurnResult,
    TurnStarted,
    UsageEvent,
    ops,
    scripted,
    tool,
)
from agentrpc.handlers import decision_answer as _decision
from agentrpc.config import image, session_config, turn_input, turn_options
from agentrpc.errors import Cancelled, ProviderError
from agentrpc.events import EVENT_TYPES, parse_event


REPO = Path(__file__).resolve().parents[3]


def note(event: dict[str, Any], turn: str | None = "t-1") -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": "s-1", "seq": 9, "event": event}
    if turn is not None:
        params["turnId"] = turn
    return params


def schema_event_types() -> set[str]:
    """The `type` of every event `schema/session.event.params.json` declares."""
    schema = json.loads((REPO / "schema" / "session.event.params.json").read_text())
    shapes = schema["$defs"]["SessionEventParams"]["properties"]["event"]["oneOf"]
    return {shape["properties"]["type"]["const"] for shape in shapes}


def test_every_protocol_event_type_has_a_class() -> None:
    assert set(EVENT_TYPES) == schema_event_types()
    assert all(cls is not Event and issubclass(cls, Event) for cls in EVENT_TYPES.values())


def test_events_the_scripted_server_does_not_emit_yet_decode() -> None:
    profile = parse_event(note({"type": "profileActivated", "profile": "plan", "previous": "chat"}))
    assert isinstance(profile, ProfileActivated) and (profile.profile, profile.previous) == ("plan", "chat")
    hook = parse_event(note({"type": "hookFired", "hook": "onPrompt", "profile": "plan"}))
    assert isinstance(hook, HookFired) and hook.hook == "onPrompt"
    cache = parse_event(note({"type": "cacheInvalidated", "reason": "toolsChanged", "firstChangedEntry": "e3"}))
    assert isinstance(cache, CacheInvalidated) and cache.first_changed_entry == "e3"
    retry = parse_event(note({"type": "retrying", "attempt": 2, "afterSeconds": 1.5, "error": {
        "code": -32050, "message": "m", "data": {"kind": "providerError", "provider": {"code": "rateLimited"}}}}))
    assert isinstance(retry, Retrying) and retry.after_seconds == 1.5
    assert isinstance(retry.error, ProviderError) and retry.error.provider_code == "rateLimited"
    ended = parse_event(note({"type": "turnEnded", "status": "cancelled", "undo": "none",
                              "error": {"code": -32800, "message": "c", "data": {"kind": "cancelled", "partialText": "p"}}}))
    assert isinstance(ended, TurnEnded) and isinstance(ended.error, Cancelled) and ended.error.partial_text == "p"
    resolved = parse_event(note({"type": "confirmationResolved", "callId": "c", "decision": "deny", "source": "timeout"}))
    assert isinstance(resolved, ConfirmationResolved) and not resolved.approved
    status = parse_event(note({"type": "mcpServerStatus", "server": "git", "status": "ready",
                               "tools": ["mcp__git__status"]}, turn=None))
    assert isinstance(status, MCPServerStatusChanged) and status.turn_id is None
    assert (status.server, status.status, status.tools, status.reason) == ("git", "ready", ["mcp__git__status"], None)
    plan = parse_event(note({"type": "planUpdated", "entries": [{"content": "a", "priority": "high", "status": "in_progress"}]}))
    assert isinstance(plan, PlanUpdated) and plan.entries == [{"content": "a", "priority": "high", "status": "in_progress"}]
    props = parse_event(note({"type": "propertiesChanged", "set": {"a": 1}, "removed": ["b"]}, turn=None))
    assert isinstance(props, PropertiesChanged) and props.turn_id is None and props.set == {"a": 1}
    warnings = parse_event(note({"type": "schemaWarnings", "warnings": [{"tool": "t", "path": "#", "message": "m"}]}))
    assert isinstance(warnings, SchemaWarnings) and warnings.warnings[0].tool == "t"
    diagnostics = parse_event(note({"type": "contextDiagnostics", "diagnostics": [{"source": "s", "message": "m"}]}))
    assert isinstance(diagnostics, ContextDiagnostics) and diagnostics.diagnostics[0].source == "s"
    usage = parse_event(note({"type": "usage", "inputTokens": 1, "outputTokens": 2}))
    assert isinstance(usage, UsageEvent) and usage.usage.total_tokens == 3 and usage.cached_input_tokens is None
    started = parse_event(note({"type": "turnStarted", "input": "bare text"}))
    assert isinstance(started, TurnStarted) and started.text == "bare text"


def test_unknown_and_malformed_events_degrade_instead_of_raising() -> None:
    future = parse_event(note({"type": "somethingNew", "x": 1}))
    assert type(future) is Event and future.type == "somethingNew" and future.raw == {"type": "somethingNew", "x": 1}
    assert (future.session_id, future.turn_id, future.seq) == ("s-1", "t-1", 9)
    odd = parse_event(note({"type": "textDelta", "delta": 5}))
    assert isinstance(odd, TextDelta) and odd.delta == ""
    nothing = parse_event(None)
    assert nothing.type == "unknown" and nothing.session_id == ""


def test_results_decode_leniently() -> None:
    result = TurnResult.from_wire({"turnId": "t", "message": {"entryId": "e", "text": "hi"}, "stopReason": "finalAnswer",
                                   "finalAnswer": {"a": 1}, "usage": {"inputTokens": 1, "outputTokens": 2},
                                   "roundTrips": 1, "toolCalls": 0, "revision": 3, "newField": True})
    assert result.text == "hi" and result.final_answer == {"a": 1} and result.raw["newField"] is True
    empty = TurnResult.from_wire(None)
    assert empty.text == "" and empty.usage.input_tokens is None and not empty.usage.reported
    state = SessionState.from_wire({"sessionId": "s", "isRunning": True, "pendingConfirmation": {
        "callId": "c", "name": "n", "arguments": {}, "reason": "why"}, "activeToolCalls": [{"callId": "c", "name": "n"}]})
    assert state.pending_confirmation is not None and state.pending_confirmation.reason == "why"
    assert state.active_tool_calls[0].call_id == "c" and state.last_usage_report is None
    transcript = Transcript.from_wire({"revision": 2, "instructions": "i", "entries": [{"id": "e1", "type": "prompt"}, 7]})
    assert transcript.ids == ["e1"] and transcript.get("nope") is None


def test_typed_results_still_answer_wire_key_lookups() -> None:
    # Code written against the plain-dict API keeps working.
    result = TurnResult.from_wire({"turnId": "t", "message": {"entryId": "e", "text": "hi"}, "toolCalls": 2})
    assert result["message"]["text"] == "hi" and result["toolCalls"] == 2
    state = SessionState.from_wire({"sessionId": "s", "activeProfile": "answer"})
    assert state["activeProfile"] == "answer"
    transcript = Transcript.from_wire({"revision": 1, "entries": []})
    assert transcript["revision"] == 1
    with pytest.raises(KeyError):
        result["nope"]


def test_session_config_translates_python_names() -> None:
    @tool
    def t(a: int) -> int:
        """T."""
        return a

    params, tools = session_config({"model": "gpt", "store": True}, {
        "model": scripted({"text": ["x"]}), "persona": "P", "directives": "one rule", "tools": [t, {"name": "raw"}],
        "limits": {"max_tool_calls": 3, "wallClockSeconds": 9}, "tool_choice": t, "transcript_error_policy": "revert",
        "context_sources": ["docs", {"name": "news", "description": "d"}], "user_id": "u", "title": None,
        "guards": [{"match": {"name": "*"}, "verdict": "confirm"}],
    })
    assert params == {
        "model": {"provider": "scripted", "model": "scripted", "script": [{"text": ["x"]}]},
        "store": True,
        "role": {"persona": "P", "directives": ["one rule"]},
        "tools": [t.spec(), {"name": "raw"}],
        "limits": {"maxToolCalls": 3, "wallClockSeconds": 9},
        "toolChoice": {"tool": "t"},
        "transcriptErrorPolicy": "revert",
        "contextSources": [{"name": "docs"}, {"name": "news", "description": "d"}],
        "userId": "u",
        "guards": [{"match": {"name": "*"}, "verdict": "confirm"}],
    }
    assert tools == {"t": t}
    # Tools given in the raw config are registered too.
    raw_params, raw_tools = session_config({"tools": [t]}, {})
    assert raw_params["tools"] == [t.spec()] and raw_tools == {"t": t}
    with pytest.raises(ValueError, match="two tools"):
        session_config(None, {"tools": [t, t]})
    with pytest.raises(TypeError, match="unknown limit"):
        session_config(None, {"limits": {"max_calls": 1}})


def test_turn_options_inputs_and_images(tmp_path: Path) -> None:
    assert turn_options(None, {}) is None
    assert turn_options({"temperature": 1}, {"temperature": 0.5, "reasoning_level": "deep", "tool_choice": "none",
                                             "tool_calling_mode": "required", "model": "small",
                                             "limits": Limits(max_round_trips=2)}) == {
        "temperature": 0.5, "reasoningLevel": "deep", "toolChoice": "none", "toolCallingMode": "required",
        "model": "small", "limits": {"maxRoundTrips": 2}}
    with pytest.raises(TypeError):
        turn_options(None, {"temprature": 1})
    assert turn_input("hi", None) == "hi"
    assert turn_input({"text": "hi"}, ["https://x/y.png"]) == {"text": "hi", "images": [{"url": "https://x/y.png"}]}
    assert image("rel.png") == {"path": str(Path("rel.png").resolve())}
    assert image(tmp_path / "a.jpg") == {"path": str(tmp_path / "a.jpg")}
    assert image(b"\xff\xd8\xff\xe0")["mimeType"] == "image/jpeg"
    assert image(b"GIF89a")["mimeType"] == "image/gif"
    assert image(b"RIFF\0\0\0\0WEBPVP8 ")["mimeType"] == "image/webp"
    assert image({"url": "data:image/png;base64,AA=="}) == {"url": "data:image/png;base64,AA=="}
    with pytest.raises(ValueError):
        image(b"not an image")
    with pytest.raises(TypeError):
        image(42)


def test_ops_builders() -> None:
    assert ops.remove("e1") == {"op": "remove", "ids": ["e1"]}
    assert ops.remove(["e1", "e2"])["ids"] == ["e1", "e2"]
    assert ops.truncate_after(None) == {"op": "truncateAfter", "id": None}
    entry = ops.response("hi", id="e9")
    assert ops.replace("e9", entry) == {"op": "replace", "id": "e9", "entry": entry}
    assert ops.insert(None, entry) == {"op": "insert", "after": None, "entries": [entry]}
    assert ops.set([entry]) == {"op": "set", "entries": [entry]}
    fresh = ops.prompt("q", images=[{"path": "/a.png"}])
    assert fresh["id"].startswith("c-") and fresh["images"] == [{"path": "/a.png"}]
    assert ops.new_id() != ops.new_id()


def test_on_confirm_answers_map_to_decisions() -> None:
    assert _decision(True) == {"decision": "approve"}
    assert _decision(False) == {"decision": "deny"}
    assert _decision((False, "too risky")) == {"decision": "deny", "reason": "too risky"}
    assert _decision("approve") == {"decision": "approve"}
    with pytest.raises(TypeError):
        _decision(None)
