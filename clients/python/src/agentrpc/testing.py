"""pytest support for tests of an integration built on agentrpc.

Load it with ``pytest_plugins = ["agentrpc.testing"]`` in a ``conftest.py``
(an installed package also registers it on its own). It provides:

``model_cassette``
    A :class:`~agentrpc.Cassette` for the current test, kept at
    ``cassettes/<test module>/<test name>.jsonl`` beside the test file. When
    the file is missing the test records it (``mode="record"``: a real model
    must answer); when it is there the test replays it (``mode="replay"``:
    offline, no key, no model). Pass it on: ``Client.spawn(cassette=model_cassette)``.
    ``pytest --model-cassette-mode=record`` re-records every cassette
    (``auto`` fills in what is missing); the ``model_cassette(path)`` marker
    names another file (relative to the test file's directory).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .cassette import Cassette, CassetteMode

__all__ = ["model_cassette", "cassette_path"]

_OPTION = "--model-cassette-mode"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        _OPTION, choices=["record", "replay", "auto"], default=None,
        help="agentrpc model cassettes: record, replay or auto (default: record when the cassette is missing, else replay)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "model_cassette(path): the model cassette file of this test (agentrpc.testing)")


def cassette_path(request: pytest.FixtureRequest) -> Path:
    """Where the current test's cassette lives."""
    directory = Path(str(request.node.path)).parent
    marker = request.node.get_closest_marker("model_cassette")
    if marker is not None and marker.args:
        return directory / str(marker.args[0])
    module = Path(str(request.node.path)).stem
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name).strip("_") or "test"
    return directory / "cassettes" / module / f"{name}.jsonl"


@pytest.fixture
def model_cassette(request: pytest.FixtureRequest) -> Cassette:
    """The current test's model cassette: recorded when missing, replayed when present."""
    path = cassette_path(request)
    forced: CassetteMode | None = request.config.getoption(_OPTION)
    mode: CassetteMode = forced or ("replay" if path.exists() else "record")
    if mode != "replay":
        path.parent.mkdir(parents=True, exist_ok=True)
    return Cassette(path, mode=mode)
