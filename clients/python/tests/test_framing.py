"""The newline-delimited JSON framer: chunking, limits, encoding."""

from __future__ import annotations

import json

from agentrpc.framing import LineFramer, encode_message


def test_encode_is_one_compact_line_without_raw_newlines() -> None:
    data = encode_message({"text": "a\nb\r\u2028ü", "n": 1})
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert b" " not in data.replace(b"\xc3\xbc", b"")  # compact separators
    assert "ü".encode() in data  # ensure_ascii=False
    assert json.loads(data) == {"text": "a\nb\r\u2028ü", "n": 1}


def test_lines_split_across_chunks_and_many_in_one_chunk() -> None:
    framer = LineFramer()
    stream = b'{"a":1}\n{"b":2}\r\n\n   \n{"c":' + b'3}\n'
    out: list[bytes] = []
    for i in range(len(stream)):  # one byte at a time
        out += framer.feed(stream[i : i + 1])
    assert out == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    assert LineFramer().feed(stream) == out
    assert framer.buffered == 0


def test_multibyte_characters_split_between_chunks() -> None:
    raw = encode_message({"t": "🚀ü"})
    framer = LineFramer()
    lines = framer.feed(raw[:9]) + framer.feed(raw[9:])
    assert [json.loads(line) for line in lines] == [{"t": "🚀ü"}]


def test_flush_returns_an_unterminated_last_line() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"x":1}\n{"y"') == [b'{"x":1}']
    assert framer.feed(b":2}") == []
    assert framer.flush() == b'{"y":2}'
    assert framer.flush() is None


def test_overlong_line_is_dropped_whole_and_the_stream_recovers() -> None:
    framer = LineFramer(max_line_bytes=10)
    out = framer.feed(b"x" * 8)
    out += framer.feed(b"y" * 8)  # now over the limit without a newline
    out += framer.feed(b"z" * 100)
    out += framer.feed(b"zz\nok\n" + b"w" * 20 + b"\nfine\n")
    assert out == [b"ok", b"fine"]
    assert framer.dropped == 2
    assert framer.buffered == 0
