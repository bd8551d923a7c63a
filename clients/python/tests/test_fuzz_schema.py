"""Schema-driven fuzzing of the real binary (docs/protocol.md, "Every limit and its default").

Random, well-formed JSON-RPC requests are generated from the committed `schema/`
itself: every method the client may call, every field its params schema declares,
filled with hostile values (huge and negative numbers, NaN-like strings, long
strings, deep objects, wrong types) or, now and then, plausible ones so that
deeper code runs too. The server must answer every request, answer the
requests it sends (tool calls, hooks, confirmations) are answered by this client,
and it must still be alive and answering at the end.

A short seeded pass runs with the normal test command. For a long one:

    AGENTRPC_FUZZ_REQUESTS=20000 AGENTRPC_FUZZ_SEED=7 \
        python3 -m pytest clients/python/tests/test_fuzz_schema.py -q

(any seed; a failure prints the seed and the request that was not answered).
"""

import json
import os
import queue
import random
import subprocess
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "schema"
BIN = os.environ.get("AGENTRPC_BIN", str(ROOT / ".build" / "debug" / "agentrpc"))

HUGE_NUMBERS = [0, -1, 1, 2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1, -(2**63), 1e11, 1.7e20, 1e19, 1e300, -1e300, 5e-324, 0.5, -0.0]
STRINGS = ["", "NaN", "Infinity", "-Infinity", "1e309", "null", "\u0000", "\ud83d\ude00", "s-x", "t-x", "(a+)+$", "[", "\\", "x" * 70_000, "é" * 5000]


class Generator:
    """Random instances of a JSON Schema, biased towards hostile values."""

    def __init__(self, rng, defs):
        self.rng = rng
        self.defs = defs

    def hostile(self, depth):
        r = self.rng.random()
        if r < 0.35:
            return self.rng.choice(HUGE_NUMBERS)
        if r < 0.7:
            return self.rng.choice(STRINGS)
        if r < 0.8:
            deep = None
            for _ in range(self.rng.choice([10, 100, 400])):
                deep = {"a": deep} if self.rng.random() < 0.5 else [deep]
            return deep
        return self.rng.choice([None, True, False, [], {}, [1, "a", None]])

    def value(self, schema, depth=0):
        if depth > 12 or not isinstance(schema, dict):
            return self.hostile(depth)
        if "$ref" in schema:
            return self.value(self.defs.get(schema["$ref"].split("/")[-1], {}), depth + 1)
        # Wrong types everywhere, now and then.
        if self.rng.random() < 0.15:
            return self.hostile(depth)
        for key in ("oneOf", "anyOf"):
            if key in schema:
                return self.value(self.rng.choice(schema[key]), depth + 1)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self.rng.choice(schema["enum"])
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = self.rng.choice(kind)
        if kind == "object" or "properties" in schema:
            out = {}
            required = set(schema.get("required", []))
            for name, sub in schema.get("properties", {}).items():
                if name in required or self.rng.random() < 0.4:
                    out[name] = self.value(sub, depth + 1)
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and self.rng.random() < 0.3:
                out[self.rng.choice(["k", "", "x" * 300])] = self.value(extra, depth + 1)
            return out
        if kind == "array":
            return [self.value(schema.get("items", {}), depth + 1) for _ in range(self.rng.choice([0, 1, 2, 3]))]
        if kind in ("integer", "number"):
            if self.rng.random() < 0.5:
                lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
                hi = schema.get("maximum", 100)
                return self.rng.choice([lo, hi, (lo + hi) / 2 if kind == "number" else int((lo + hi) // 2)])
            return self.rng.choice(HUGE_NUMBERS)
        if kind == "string":
            return self.rng.choice(STRINGS + ["s", "default", "t"])
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        return self.hostile(depth)


class Server:
    def __init__(self):
        self.proc = subprocess.Popen([BIN, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.inbox = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.inbox.put(json.loads(line))
            except ValueError:
                self.inbox.put({"unparseable": line[:200]})
        self.inbox.put(None)

    def send(self, message):
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()


def answer_server_request(server, message):
    """Answers what the server asks of the client so that turns can end."""
    method = message["method"]
    if method == "tool/call":
        result = {"outcome": "ok", "content": "fine"}
    elif method == "confirmation/request":
        result = {"decision": "deny"}
    elif method == "context/refresh":
        result = {"content": ""}
    else:
        server.send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "not here"}})
        return
    server.send({"jsonrpc": "2.0", "id": message["id"], "result": result})


def test_schema_driven_fuzz_is_answered_and_survived():
    seed = int(os.environ.get("AGENTRPC_FUZZ_SEED", "1"))
    count = int(os.environ.get("AGENTRPC_FUZZ_REQUESTS", "300"))
    rng = random.Random(seed)
    index = json.loads((SCHEMA / "index.json").read_text())
    methods = []
    for m in index["methods"]:
        if m["direction"] != "clientToServer" or m["method"] in ("exit", "shutdown"):
            continue
        doc = json.loads((SCHEMA / m["params"]).read_text())
        methods.append((m["method"], m["kind"], doc))
    server = Server()
    sessions = []
    pending = {}
    next_id = 1

    def call(method, params):
        nonlocal next_id
        request_id = next_id
        next_id += 1
        pending[request_id] = (method, params)
        server.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def handle(message):
        assert message is not None, f"seed {seed}: the server exited; unanswered: {[str(v)[:300] for v in list(pending.values())[:3]]}"
        assert "unparseable" not in message, f"seed {seed}: not JSON on stdout: {message}"
        if "method" in message:
            if "id" in message:
                answer_server_request(server, message)
            return
        answered = pending.pop(message.get("id"), None)
        if answered and answered[0] == "session/create" and "result" in message:
            sessions.append(message["result"]["sessionId"])

    def drain():
        while True:
            try:
                handle(server.inbox.get_nowait())
            except queue.Empty:
                return

    def wait_for(ids, timeout=30):
        while any(i in pending for i in ids):
            try:
                handle(server.inbox.get(timeout=timeout))
            except queue.Empty:
                waiting = [i for i in ids if i in pending]
                raise AssertionError(f"seed {seed}: no answer within {timeout} s to {[str(pending[i])[:300] for i in waiting[:2]]}")

    wait_for([call("initialize", {"protocolVersion": 1, "clientInfo": {"name": "fuzz", "version": "1"}})])
    wait_for([call("session/create", {"model": {"provider": "scripted", "script": [{"text": ["hi"]}] * 50}, "tools": [{"name": "t"}]})])
    for _ in range(count):
        method, kind, doc = rng.choice(methods)
        gen = Generator(rng, doc.get("$defs", {}))
        params = gen.value(doc)
        if isinstance(params, dict) and "sessionId" in params and sessions and rng.random() < 0.6:
            params["sessionId"] = rng.choice(sessions)
        if kind == "notification":
            server.send({"jsonrpc": "2.0", "method": method, "params": params})
        else:
            call(method, params)
        drain()
    # Turns that wait on a stalled model or a long limit end at end of input;
    # before that, the server must still answer quickly.
    wait_for([call("session/list", {})])
    server.proc.stdin.close()
    wait_for(list(pending), timeout=60)
    assert server.proc.wait(timeout=60) == 0
