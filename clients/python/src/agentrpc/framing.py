"""Newline-delimited JSON framing (docs/protocol.md §1).

One compact JSON object per line. ``json.dumps`` escapes control characters
inside strings, so an encoded message never contains a raw newline and the
newline is an unambiguous frame boundary. The decoder is a pure incremental
byte parser: feed it chunks of any size, get whole lines back.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["encode_message", "LineFramer"]


def encode_message(message: Any) -> bytes:
    """Serialise one message as a single UTF-8 line ending in ``\\n``.

    ``allow_nan=False`` because NaN and Infinity are not JSON and the server
    would reject the whole frame as a parse error; failing here points at the
    caller's value instead.
    """
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8") + b"\n"


class LineFramer:
    """Splits a byte stream into lines without the trailing ``\\n`` (or ``\\r\\n``).

    ``max_line_bytes`` bounds memory against a peer that never sends a
    newline: an over-long line is dropped whole (up to its newline) and
    counted in ``dropped``; the stream stays usable afterwards.
    """

    def __init__(self, max_line_bytes: int | None = None) -> None:
        self._buffer = bytearray()
        # Where the next newline search starts, so a long line arriving in many
        # chunks is scanned once rather than once per chunk.
        self._scan_from = 0
        self._discarding = False
        self.max_line_bytes = max_line_bytes
        self.dropped = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add ``chunk`` and return every line it completed, in order."""
        self._buffer += chunk
        lines: list[bytes] = []
        while True:
            newline = self._buffer.find(b"\n", self._scan_from)
            if newline < 0:
                self._scan_from = len(self._buffer)
                if self.max_line_bytes is not None and len(self._buffer) > self.max_line_bytes:
                    # Too long already: forget the bytes, skip to the next newline.
                    if not self._discarding:
                        self.dropped += 1
                    self._discarding = True
                    self._buffer.clear()
                    self._scan_from = 0
                return lines
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            self._scan_from = 0
            if self._discarding:
                self._discarding = False
                continue
            if self.max_line_bytes is not None and len(line) > self.max_line_bytes:
                self.dropped += 1
                continue
            if line.endswith(b"\r"):
                line = line[:-1]
            if line.strip():
                lines.append(line)

    def flush(self) -> bytes | None:
        """At end of stream: the last line if it had no newline, else ``None``."""
        rest = bytes(self._buffer)
        self._buffer.clear()
        self._scan_from = 0
        discarding, self._discarding = self._discarding, False
        if discarding or not rest.strip():
            return None
        return rest.rstrip(b"\r")

    @property
    def buffered(self) -> int:
        """Bytes held waiting for a newline."""
        return len(self._buffer)
