"""Model cassettes: a server's model traffic recorded once, replayed offline.

``Client.spawn(cassette=...)`` starts the server with ``--model-cassette``
(docs/testing.md). A bare path replays; :class:`Cassette` says how::

    async with Client.spawn(cassette=Cassette("tests/cassettes/weather.jsonl", mode="auto")) as client:
        ...

For pytest, :mod:`agentrpc.testing` has a ``model_cassette`` fixture that
records when the cassette is missing and replays when it is there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["Cassette", "CassetteMode", "CassettePace", "cassette_args"]

#: ``record``: every request is sent and written to a new cassette; ``replay``
#: (the default): every request is answered from it and nothing goes to the
#: network; ``auto``: replays what it holds and records what it lacks.
CassetteMode: TypeAlias = Literal["record", "replay", "auto"]
#: ``fast`` (the default) or ``recorded``: replayed answers arrive at the pace they were recorded at.
CassettePace: TypeAlias = Literal["fast", "recorded"]

_MODES = ("record", "replay", "auto")
_PACES = ("fast", "recorded")


@dataclass(frozen=True)
class Cassette:
    """A cassette file and what the server does with it."""

    path: str | os.PathLike[str]
    mode: CassetteMode = "replay"
    pace: CassettePace = "fast"

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ValueError(f"cassette mode must be one of {', '.join(_MODES)}, not {self.mode!r}")
        if self.pace not in _PACES:
            raise ValueError(f"cassette pace must be one of {', '.join(_PACES)}, not {self.pace!r}")

    def server_args(self) -> list[str]:
        """The ``agentrpc serve`` options for this cassette."""
        args = ["--model-cassette", os.fspath(self.path), "--cassette-mode", self.mode]
        if self.pace != "fast":
            args += ["--cassette-pace", self.pace]
        return args


def cassette_args(cassette: Cassette | str | os.PathLike[str] | None) -> list[str]:
    """Server options for ``Client.spawn(cassette=...)``: none for ``None``, a bare path replays."""
    if cassette is None:
        return []
    if not isinstance(cassette, Cassette):
        cassette = Cassette(cassette)
    return cassette.server_args()
