"""The protocol guide cannot drift: its exchanges are rendered from the
replayed transcripts by ``scripts/protocol-doc``, so the committed documents
must equal a fresh rendering, and together they must show every method and
event type of the protocol."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "protocol-doc"
REGENERATE = "scripts/protocol-doc"


def load_generator() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("protocol_doc", str(SCRIPT))
    spec = importlib.util.spec_from_loader("protocol_doc", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up by name while the class is created.
    sys.modules["protocol_doc"] = module
    loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load_generator()


@pytest.fixture(scope="module")
def rendered(generator: ModuleType) -> list:
    return [generator.render_document(path) for path in generator.DOCUMENTS]


def test_documents_match_the_transcripts(generator: ModuleType, rendered: list) -> None:
    stale = [d.path.relative_to(ROOT).as_posix() for d in rendered if d.path.read_text(encoding="utf-8") != d.text]
    assert not stale, f"out of date with the transcripts they show: {', '.join(stale)}. Regenerate with: {REGENERATE}"


def test_every_method_is_shown(generator: ModuleType, rendered: list) -> None:
    wanted = generator.protocol_methods()
    assert ("session/send", "request") in wanted and ("exit", "notification") in wanted, "schema/index.json lost its methods"
    methods, _, _ = generator.coverage([m for d in rendered for m in d.messages])
    missing = sorted(wanted - methods)
    assert not missing, f"no exchange in the docs shows these (method, kind) pairs: {missing}; add a directive (and a transcript under Tests/Transcripts/guide if none has one)"


def test_every_event_type_is_shown(generator: ModuleType, rendered: list) -> None:
    wanted = generator.protocol_event_types()
    assert {"turnStarted", "turnEnded", "textDelta"} <= wanted, "the event types could not be read from Events.swift"
    _, events, _ = generator.coverage([m for d in rendered for m in d.messages])
    missing = sorted(wanted - events)
    assert not missing, f"no exchange in the docs shows these event types: {missing}"


# The generator itself, on a small transcript of its own.

TRANSCRIPT = [
    {"transcript": {"description": "test", "args": ["--max-message-bytes", "300"]}},
    {"send": {"jsonrpc": "2.0", "id": 1, "method": "session/create", "params": {}}},
    {"expect": {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "$capture:a", "revision": 0, "activeProfile": "$string"}}},
    {"comment": "the turn"},
    {"send": {"jsonrpc": "2.0", "id": 2, "method": "session/send", "params": {"sessionId": "$ref:a", "input": "hi"}}},
    {"expect": {"jsonrpc": "2.0", "method": "session/event", "params": {"sessionId": "$ref:a", "turnId": "$capture:t", "seq": 1, "event": {"type": "textDelta", "delta": "x"}}}},
    {"expect": {"jsonrpc": "2.0", "id": "$capture:req", "method": "tool/call", "params": {"sessionId": "$ref:a", "callId": "$capture:c"}}},
    {"reply": {"jsonrpc": "2.0", "id": "$ref:req", "result": {"outcome": "ok", "content": "$$literal"}}},
    {"expect": {"jsonrpc": "2.0", "id": 2, "result": {"$partial": True, "turnId": "$ref:t", "skipped": "$absent"}}},
    {"send": {"jsonrpc": "2.0", "id": 3, "method": "session/create", "params": {}}},
    {"expect": {"jsonrpc": "2.0", "id": 3, "result": {"sessionId": "$capture:b"}}},
    {"expectFile": {"path": "$tmpdir/requests.jsonl", "lines": [{"$partial": True, "sessionId": "$ref:b", "roundTrip": 1}]}},
]


@pytest.fixture
def tiny(generator: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(s) for s in TRANSCRIPT) + "\n", encoding="utf-8")
    monkeypatch.setattr(generator, "TRANSCRIPTS", tmp_path)
    return generator


def test_requests_select_from_send_to_answer(tiny: ModuleType) -> None:
    text = tiny.render_directive("t.jsonl requests=2").text
    assert text.startswith("```jsonc\n→ ") and text.endswith("```\n")
    assert '"method": "session/send"' in text and '"id": 2, "result"' in text
    assert "session/create" not in text


def test_placeholders_are_shown_by_kind(tiny: ModuleType) -> None:
    text = tiny.render_directive("t.jsonl requests=1..3").text
    assert '"sessionId": "s-…"' in text
    assert '"sessionId": "s-…#2"' in text  # a second session in the same block
    assert '"turnId": "t-…"' in text and '"callId": "call_…"' in text
    assert '"id": ⟨id⟩, "method": "tool/call"' in text and '"id": ⟨id⟩, "result"' in text
    assert '"activeProfile": "…"' in text
    assert '"content": "$literal"' in text
    assert '"turnId": "t-…", …}' in text  # $partial ends the object with …
    assert "skipped" not in text  # $absent members are left out
    assert "$capture" not in text and "$ref" not in text


def test_hide_skip_comments_and_args(tiny: ModuleType) -> None:
    text = tiny.render_directive("t.jsonl requests=2 hide=textDelta comments=yes args=yes").text
    assert "textDelta" not in text and "// … 1 message not shown" in text
    assert "// the turn" in text
    assert "// $ agentrpc serve --max-message-bytes 300" in text
    skipped = tiny.render_directive("t.jsonl lines=5..9 skip=7..8").text
    assert "tool/call" not in skipped and "// … 2 messages not shown" in skipped


def test_file_checks_after_an_answer_belong_to_its_request(tiny: ModuleType) -> None:
    text = tiny.render_directive("t.jsonl requests=3").text
    assert "// the server writes to $tmpdir/requests.jsonl:" in text
    assert '» {"sessionId": "s-…", "roundTrip": 1, …}' in text


def test_coverage_counts_only_what_is_shown(tiny: ModuleType) -> None:
    shown = tiny.render_directive("t.jsonl requests=2 hide=textDelta,tool/call").messages
    methods, events, _ = tiny.coverage(shown)
    assert ("session/send", "request") in methods and ("tool/call", "request") not in methods
    assert "textDelta" not in events


def test_bad_directives_are_errors(tiny: ModuleType) -> None:
    for bad in ["t.jsonl requests=9", "missing.jsonl requests=1", "t.jsonl", "t.jsonl requests=1 lines=1..2", "t.jsonl bogus=1"]:
        with pytest.raises(tiny.DocError):
            tiny.render_directive(bad)


def test_a_document_gets_its_blocks_replaced(tiny: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- exchange: t.jsonl requests=1 -->\n```jsonc\nstale\n```\n<!-- /exchange -->\nafter\n"
                   "<!-- exchange: t.jsonl requests=3 -->\nend\n", encoding="utf-8")
    monkeypatch.setattr(tiny, "ROOT", tmp_path)
    out = tiny.render_document(doc).text
    assert "stale" not in out and out.count("<!-- /exchange -->") == 2
    assert out.startswith("intro\n<!-- exchange: t.jsonl requests=1 -->\n```jsonc\n→ ")
    assert "\nafter\n" in out and out.endswith("<!-- /exchange -->\nend\n")


def test_a_block_without_its_directive_is_an_error(tiny: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("```jsonc\nold\n```\n<!-- /exchange -->\n", encoding="utf-8")
    monkeypatch.setattr(tiny, "ROOT", tmp_path)
    with pytest.raises(tiny.DocError):
        tiny.render_document(doc)
