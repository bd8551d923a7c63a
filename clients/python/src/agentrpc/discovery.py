"""Finding the agentrpc server binary.

Order: an explicit ``binary`` argument, ``$AGENTRPC_BIN``, ``agentrpc`` on
``PATH``, then a SwiftPM build (``.build/debug`` then ``.build/release``) in
the package's directory or any directory above it, so a checkout of the repo
works without installing anything. When nothing fits, the error lists every
place looked at, because "not found" alone is useless to debug.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from .errors import BinaryNotFound

__all__ = ["ENV_VAR", "BINARY_NAME", "find_binary", "repo_build_candidates"]

#: Environment variable naming the server binary.
ENV_VAR = "AGENTRPC_BIN"
#: The executable's name on PATH and in ``.build``.
BINARY_NAME = "agentrpc"


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
) -> str:
    """Return the path of the server binary or raise :class:`BinaryNotFound`.

    An explicit ``binary`` or ``$AGENTRPC_BIN`` that does not exist is an
    error rather than silently falling through to another binary: the caller
    asked for that one.
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

    on_path = shutil.which(BINARY_NAME, path=env.get("PATH"))
    searched.append(f"{BINARY_NAME!r} on PATH")
    if on_path:
        return on_path

    for candidate in repo_build_candidates(start):
        searched.append(str(candidate))
        if _is_executable_file(candidate):
            return str(candidate)
    raise BinaryNotFound(searched)
