"""Byte-level mutation fuzzing of the frames the server reads in place (docs/protocol.md, "Malformed input").

`test_fuzz_schema.py` sends well-formed JSON. The answers to `tool/call` and the
params of `session/send` are read straight from the frame's bytes when they have
their common shape (a fast path beside the full parser), so this file sends those
two frames damaged at the byte level: bytes deleted, inserted (quotes, braces,
backslashes, NUL, bytes that are not UTF-8), flipped, spans repeated, frames cut
short; each damaged frame is followed by the intact one. Arguments, contents and
prompts carry escapes, surrogates, multi-byte text and long runs. The server must
never die, never write anything but JSON frames to stdout, and answer every
`session/send` (a damaged frame that still parses is served like any other).

A short seeded pass runs with the normal test command. For a long one:

    AGENTRPC_FUZZ_TURNS=5000 AGENTRPC_FUZZ_SEED=7 \\
        python3 -m pytest clients/python/tests/test_fuzz_frames.py -q
"""

import json
import os
import random
import select
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BIN = os.environ.get("AGENTRPC_BIN", str(ROOT / ".build" / "debug" / "agentrpc"))

# JSON string content (escaped where it must be) that the in-place readers treat specially. No
# unpaired surrogate: the server refuses those as a parse error (pinned elsewhere), and the intact
# frames must be valid.
ODD = ["\\u0000", "\\ud83d\\ude00", "é", "\U0001F600", '\\"', "\\\\", "\\/", "\\n", "\x7f", "\\u002e", "a" * 300]
DAMAGE = b'{}[]":,\\ 0e.-+tfnu\x00\x80\xff\xc3\xe2'


class Fuzz:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.seed = seed

    def text(self):
        return json.loads('"' + "".join(self.rng.choice(ODD + ["x", " "]) for _ in range(self.rng.randint(0, 8))) + '"')

    def value(self, depth=0):
        r = self.rng.random()
        if depth > 3 or r < 0.3:
            return self.rng.choice([0, -1, 1.5, 2**53 + 1, -(2**63), 1e300, True, None, "s", ""])
        if r < 0.6:
            return self.text()
        if r < 0.8:
            return [self.value(depth + 1) for _ in range(self.rng.randint(0, 3))]
        return {self.text() or "k": self.value(depth + 1) for _ in range(self.rng.randint(0, 3))}

    def damage(self, frame: bytes) -> bytes:
        b = bytearray(frame)
        for _ in range(self.rng.randint(1, 4)):
            op, i = self.rng.random(), self.rng.randrange(len(b) + 1)
            if op < 0.25 and b:
                del b[min(i, len(b) - 1)]
            elif op < 0.5:
                b[i:i] = bytes([self.rng.choice(DAMAGE)])
            elif op < 0.65:
                del b[i:]
            elif op < 0.8 and b:
                b[min(i, len(b) - 1)] ^= 1 << self.rng.randrange(8)
            else:
                j = self.rng.randrange(len(b) + 1)
                b[i:i] = b[min(i, j) : max(i, j)]
        # One frame per line: a damaged frame must not run into the intact one after it.
        return bytes(b).replace(b"\n", b" ").replace(b"\r", b" ")


class Server:
    def __init__(self, seed):
        self.seed = seed
        self.process = subprocess.Popen(
            [BIN, "serve", "--ephemeral"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.pending = b""
        self.next_id = 100

    def write(self, frame: bytes):
        assert self.process.stdin is not None
        self.process.stdin.write(frame + b"\n")
        self.process.stdin.flush()

    def frames(self, timeout, waiting_for):
        """Frames from stdout until the caller stops; fails on junk, death or `timeout` seconds of silence."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                try:
                    frame = json.loads(line)
                except ValueError:
                    raise AssertionError(f"seed {self.seed}: not a JSON frame on stdout: {line[:300]!r}")
                assert isinstance(frame, dict) and frame.get("jsonrpc") == "2.0", f"seed {self.seed}: {line[:300]!r}"
                yield frame
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [], max(0, left))
            if not ready:
                raise AssertionError(f"seed {self.seed}: nothing within {timeout} s while waiting for {waiting_for}")
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                raise AssertionError(f"seed {self.seed}: the server ended (status {self.process.wait()}) while waiting for {waiting_for}")
            self.pending += chunk

    def request(self, method, params, damaged=None):
        self.next_id += 1
        frame = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode()
        if damaged is not None:
            self.write(damaged(frame))
        self.write(frame)
        return self.next_id


def test_damaged_tool_answers_and_sends_are_survived_and_every_turn_answered():
    seed = int(os.environ.get("AGENTRPC_FUZZ_SEED", "1"))
    turns = int(os.environ.get("AGENTRPC_FUZZ_TURNS", "200"))
    fuzz = Fuzz(seed)
    server = Server(seed)
    try:
        server.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": 1, "capabilities": {"tools": True}, "clientInfo": {"name": "fuzz-frames", "version": "1"}}}).encode())
        next(f for f in server.frames(30, "initialize") if f.get("id") == 1)
        answered = damaged_answers = 0
        for _ in range(turns):
            calls = [
                {"id": f"c{k}", "name": "t",
                 "arguments": fuzz.value() if fuzz.rng.random() < 0.3 else {fuzz.text() or "q": fuzz.value()}}
                for k in range(fuzz.rng.randint(1, 4))
            ]
            script = [{"toolCalls": [call]} for call in calls] + [{"text": [fuzz.text() or "done"]}]
            created = server.request("session/create", {"model": {"provider": "scripted", "model": "m", "script": script}, "tools": [{"name": "t"}]})
            answer = next(f for f in server.frames(30, "session/create") if f.get("id") == created)
            session_id = answer["result"]["sessionId"]
            damage_send = fuzz.rng.random() < 0.5
            sent = server.request("session/send", {"sessionId": session_id, "input": fuzz.text() or "go"},
                                  damaged=fuzz.damage if damage_send else None)
            for frame in server.frames(30, f"the answer to session/send {sent}"):
                if frame.get("method") == "tool/call":
                    intact = json.dumps(
                        {"jsonrpc": "2.0", "id": frame["id"], "result": {"content": fuzz.text(), "outcome": fuzz.rng.choice(["ok", "error"])}},
                        ensure_ascii=fuzz.rng.random() < 0.5,
                    ).encode()
                    if fuzz.rng.random() < 0.7:
                        server.write(fuzz.damage(intact))
                        damaged_answers += 1
                    server.write(intact)
                elif frame.get("id") == sent:
                    answered += 1
                    break
        assert answered == turns
        assert damaged_answers > turns // 2, "the fuzz must damage answers, or it tests nothing"
        # Still serving after all of it.
        alive = server.request("session/list", {})
        assert "result" in next(f for f in server.frames(30, "session/list") if f.get("id") == alive)
    finally:
        if server.process.stdin:
            server.process.stdin.close()
        try:
            status = server.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.process.kill()
            raise
    assert status == 0, f"seed {seed}: the server exited with {status} at the end of its input"
