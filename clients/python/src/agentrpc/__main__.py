"""``python -m agentrpc`` and the wheel's ``agentrpc`` console script: the server itself.

Every argument goes to the server binary, which replaces this process
(``exec``), so stdin, stdout, signals and the exit status are the server's own.
"""

from __future__ import annotations

import os
import sys

from .discovery import find_binary
from .errors import BinaryNotFound


def main() -> None:
    """Run the server binary that ``Client.spawn()`` would start, with ``sys.argv[1:]``."""
    try:
        # Not PATH: this console script is on PATH itself and would exec itself forever.
        binary = find_binary(search_path=False)
    except BinaryNotFound as error:
        sys.exit(f"agentrpc: {error}")
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
