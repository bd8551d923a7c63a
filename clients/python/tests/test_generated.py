"""The generated wire types (``agentrpc/_wire.py``) match ``schema/`` and the
error table of docs/protocol.md §13.

If the first test fails, the schema or the table changed without the client:
run ``python3 clients/python/scripts/generate.py`` and commit the result.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

import agentrpc
from agentrpc import _wire

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "clients" / "python" / "scripts" / "generate.py"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agentrpc_generate", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses in the script look their module up
    spec.loader.exec_module(module)
    return module


GENERATE = load_generator()


def test_the_committed_files_equal_a_fresh_generation() -> None:
    files = GENERATE.outputs(REPO)
    assert Path(_wire.__file__).resolve() in {p.resolve() for p in files}
    for path, fresh in files.items():
        assert path.read_text(encoding="utf-8") == fresh, (
            f"{path.name} is stale: run `python3 clients/python/scripts/generate.py`"
        )


def test_the_check_mode_agrees() -> None:
    assert GENERATE.main(["--check"]) == 0


def copy_sources(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "schema", tmp_path / "schema")
    (tmp_path / "docs").mkdir()
    shutil.copy(REPO / "docs" / "protocol.md", tmp_path / "docs" / "protocol.md")
    return tmp_path


def test_a_schema_change_changes_the_generated_module(tmp_path: Path) -> None:
    root = copy_sources(tmp_path)
    for path in (root / "schema").glob("*.json"):  # every file that defines TurnResult (send, continue)
        schema = json.loads(path.read_text(encoding="utf-8"))
        if "TurnResult" in schema.get("$defs", {}):
            schema["$defs"]["TurnResult"]["properties"]["cacheHits"] = {"type": "integer"}
            path.write_text(json.dumps(schema), encoding="utf-8")
    fresh = GENERATE.generate(root)
    assert fresh != GENERATE.generate(REPO)
    assert "    cache_hits: int | None = None\n" in fresh
    assert 'cache_hits=_opt_int(obj.get("cacheHits")),' in fresh


def test_a_new_error_kind_gets_a_class(tmp_path: Path) -> None:
    root = copy_sources(tmp_path)
    for path in (root / "schema").glob("*.json"):  # ErrorData is in every file that can carry an error
        schema = json.loads(path.read_text(encoding="utf-8"))
        if "ErrorData" in schema.get("$defs", {}):
            schema["$defs"]["ErrorData"]["properties"]["kind"]["enum"].append("quotaExhausted")
            path.write_text(json.dumps(schema), encoding="utf-8")
    with pytest.raises(SystemExit, match="quotaExhausted"):
        GENERATE.generate(root)  # the table of §13 must name it too
    doc = root / "docs" / "protocol.md"
    text = doc.read_text(encoding="utf-8")
    row = "| -32081 | `journalUnreadable` |"
    at = text.index(row)
    end = text.index("\n", at)
    text = text[: end + 1] + "| -32090 | `quotaExhausted` | the account ran out | |\n" + text[end + 1:]
    doc.write_text(text, encoding="utf-8")
    fresh = GENERATE.generate(root)
    assert 'class QuotaExhausted(_KnownError):' in fresh and '    -32090: QuotaExhausted,\n' in fresh


def test_a_new_event_type_must_be_declared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = copy_sources(tmp_path)
    path = root / "schema" / "session.event.params.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    schema["$defs"]["SessionEventParams"]["properties"]["event"]["oneOf"].append({
        "type": "object", "additionalProperties": False, "required": ["type"],
        "properties": {"type": {"const": "budgetWarning"}, "remaining": {"type": "number"}},
    })
    path.write_text(json.dumps(schema), encoding="utf-8")
    with pytest.raises(SystemExit, match="budgetWarning"):
        GENERATE.generate(root)
    # One line in the generator's table is all it takes: the class, the dispatch
    # table and the package's exports follow.
    monkeypatch.setitem(GENERATE.EVENTS, "budgetWarning", GENERATE.EventSpec("The budget runs low."))
    files = GENERATE.outputs(root)
    wire = files[GENERATE.OUT_FILE]
    assert "class BudgetWarning(Event):" in wire and "    remaining: float | None = None\n" in wire
    assert '    "budgetWarning": BudgetWarning,\n' in wire
    package = files[GENERATE.REGION_FILES["__init__"]]
    assert "    BudgetWarning,\n" in package and '    "BudgetWarning",\n' in package
    assert '    "BudgetWarning",\n' in files[GENERATE.REGION_FILES["events"]]


def test_every_schema_event_and_error_kind_is_covered() -> None:
    schema_events = json.loads((REPO / "schema" / "session.event.params.json").read_text(encoding="utf-8"))
    variants = schema_events["$defs"]["SessionEventParams"]["properties"]["event"]["oneOf"]
    consts = [v["properties"]["type"]["const"] for v in variants]
    assert list(_wire.SCHEMA_EVENT_TYPES) == consts
    assert set(agentrpc.EVENT_TYPES) == set(consts) - GENERATE.UNTYPED_EVENTS
    kinds = json.loads((REPO / "schema" / "error.json").read_text(encoding="utf-8"))
    kinds = kinds["$defs"]["ErrorData"]["properties"]["kind"]["enum"]
    assert set(_wire.ERRORS_BY_KIND) == set(kinds)
    for kind, cls in _wire.ERRORS_BY_KIND.items():
        assert agentrpc.error_class_for(-1, kind) is cls and cls.KIND == kind
        assert getattr(agentrpc, cls.__name__) is cls, f"{cls.__name__} is exported by agentrpc"
    index = json.loads((REPO / "schema" / "index.json").read_text(encoding="utf-8"))
    assert [m for m, _, _ in _wire.METHODS] == [m["method"] for m in index["methods"]]


def test_generated_types_decode_their_own_wire_names() -> None:
    # Every member of every generated type is read from its wire name.
    defs: dict[str, dict[str, object]] = {}
    for path in (REPO / "schema").glob("*.json"):
        defs.update(json.loads(path.read_text(encoding="utf-8")).get("$defs", {}))
    for spec in GENERATE.TYPES:
        cls = getattr(_wire, spec.name)
        properties = defs[spec.schema].get("properties", {})
        assert isinstance(properties, dict)
        for wire in properties:
            name = spec.rename.get(wire, GENERATE.snake(wire))
            assert name in cls.__dataclass_fields__, f"{spec.name}.{name} ({wire})"
