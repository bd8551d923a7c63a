"""Finding the agentrpc server binary.

Order: an explicit ``binary`` argument, ``$AGENTRPC_BIN``, the binary a
platform wheel carries inside this package (``agentrpc/bin/agentrpc``, see
``scripts/package``), ``agentrpc`` on ``PATH``, then a SwiftPM build
(``.build/debug`` then ``.build/release``) in the package's directory or any
directory above it, so a checkout of the repo works without installing
anything. The packaged binary comes before ``PATH`` because the wheel's own
console script ``agentrpc`` is on ``PATH`` too, and spawning it would start
Python before every server. When nothing fits, the error lists every place
looked at, because "not found" alone is useless to debug.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from .errors import BinaryNotFound

__all__ = ["ENV_VAR", "BINARY_NAME", "PACKAGED_BINARY", "find_binary", "repo_build_candidates"]

#: Environment variable naming the server binary.
ENV_VAR = "AGENTRPC_BIN"
#: The executable's name on PATH and in ``.build``.
BINARY_NAME = "agentrpc"
#: Where a platform wheel puts the server: inside this package. A source
#: checkout or a pure-Python install has no such file.
PACKAGED_BINARY = Path(__file__).resolve().parent / "bin" / BINARY_NAME


def _is_executable_file(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def repo_build_candidates(start: Path | None = None) -> list[Path]:
    """``.build/{debug,release}/agentrpc`` in ``start`` and each parent.

    ``start`` defaults to this package's directory, so an editable install
    inside the repo finds the repo's own build.
    """
    here = (start or Path(__file__)).resolve()
    if here.is_file():
        here = here.parent
    candidates: list[Path] = []
    for directory in (here, *here.parents):
        for config in ("debug", "release"):
            candidates.append(directory / ".build" / config / BINARY_NAME)
    return candidates


def _resolve_explicit(binary: str | os.PathLike[str], searched: list[str], label: str) -> str | None:
    """A path (anything with a separator) is used as-is; a bare name is looked up on PATH."""
    text = os.fspath(binary)
    if os.sep in text or (os.altsep and os.altsep in text):
        path = Path(text).expanduser()
        searched.append(f"{label}: {path}")
        return str(path) if _is_executable_file(path) else None
    searched.append(f"{label}: {text!r} on PATH")
    found = shutil.which(text)
    return found


def find_binary(
    binary: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    start: Path | None = None,
    packaged: Path | None = PACKAGED_BINARY,
    search_path: bool = True,
) -> str:
    """Return the path of the server binary or raise :class:`BinaryNotFound`.

    An explicit ``binary`` or ``$AGENTRPC_BIN`` that does not exist is an
    error rather than silently falling through to another binary: the caller
    asked for that one. ``packaged`` (the wheel's binary; None skips it) and
    ``search_path`` (False skips ``PATH``, for the console script, which is
    itself on ``PATH``) exist for the tests and ``python -m agentrpc``.
    """
    env = os.environ if environ is None else environ
    searched: list[str] = []

    if binary is not None:
        found = _resolve_explicit(binary, searched, "binary argument")
        if found is None:
            raise BinaryNotFound(searched)
        return found

    from_env = env.get(ENV_VAR)
    if from_env:
        found = _resolve_explicit(from_env, searched, f"${ENV_VAR}")
        if found is None:
            raise BinaryNotFound(searched)
        return found
    searched.append(f"${ENV_VAR}: not set")

    if packaged is not None:
        searched.append(f"{packaged} (the wheel's binary)")
        if _is_executable_file(packaged):
            return str(packaged)

    if search_path:
        on_path = shutil.which(BINARY_NAME, path=env.get("PATH"))
        searched.append(f"{BINARY_NAME!r} on PATH")
        if on_path:
            return on_path

    for candidate in repo_build_candidates(start):
        searched.append(str(candidate))
        if _is_executable_file(candidate):
            return str(candidate)
    raise BinaryNotFound(searched)
