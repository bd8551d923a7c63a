"""The public names are static (type checkers see them) and the typed usage
file runs as written. ``mypy --strict`` over the client, the examples and
``typed_usage.py`` is a stage of scripts/test."""

from __future__ import annotations

import ast
from pathlib import Path

import agentrpc
import agentrpc.errors
import agentrpc.events
import agentrpc.types

from conftest import REAL_BINARY

import pytest

PACKAGE = Path(agentrpc.__file__).parent


def static_all(module_file: Path) -> list[str]:
    """``__all__`` as written in the source: a literal list a type checker can read."""
    tree = ast.parse(module_file.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return value
    raise AssertionError(f"no __all__ in {module_file}")


def test_the_package_lists_every_error_and_event_class_statically() -> None:
    listed = static_all(PACKAGE / "__init__.py")
    assert listed == agentrpc.__all__
    missing = [
        name for name in (*agentrpc.errors.__all__, *agentrpc.events.__all__, *agentrpc.types.__all__)
        if name not in listed
    ]
    assert missing == [], f"add these to agentrpc/__init__.py (import and __all__): {missing}"


def test_tool_keeps_the_functions_call() -> None:
    from typed_usage import add

    assert add(1, 2) == 3 and add.name == "add"


@pytest.mark.parametrize("which", ["async", "sync"])
@pytest.mark.real_server
@pytest.mark.skipif(REAL_BINARY is None, reason="no agentrpc binary")
def test_the_typed_usage_file_runs(tmp_path: Path, which: str) -> None:
    import asyncio

    import typed_usage

    assert REAL_BINARY is not None
    if which == "async":
        seen = asyncio.run(typed_usage.run_async(REAL_BINARY, str(tmp_path)))
        assert seen == ["ok", "3", "completed", "none", "completed", "Paris"]
    else:
        assert typed_usage.run_sync(REAL_BINARY, str(tmp_path)) == "Rome"
