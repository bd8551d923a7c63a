import AgentRPCProtocol
import Foundation
#if canImport(FoundationNetworking)
// The fake server's /stats is read with `Data(contentsOf:)`, which needs
// FoundationNetworking on Linux; the server no longer links it, the bench may.
import FoundationNetworking
#endif

/// Figures for the HTTP providers against a local fake model server (a Python
/// `http.server`, started here): the server's CPU while a stream is idle, its
/// CPU per streamed delta for OpenAI chat, Anthropic and OpenAI Responses, and connection reuse.
struct HTTPFigures {
    var idleWallSeconds: Double
    var idleCPUSeconds: Double
    var idleCPUPercent: Double { idleCPUSeconds / idleWallSeconds * 100 }
    /// Server CPU per delta by provider name.
    var cpuNanosPerDelta: [String: Double]
    var requests: Int
    var connections: Int
    /// Median one-delta turn time with keep-alive, and with the server closing every connection.
    var keepAliveTurnNanos: UInt64
    var freshConnectionTurnNanos: UInt64
}

/// The fake model server. Paths: `/slow{S}/...` streams one chunk per second for
/// S seconds; `/d{N}/...` streams N one-token deltas; `/close/...` is `/d1/` and
/// closes the connection after it; `/tools{N}/...` calls the tool `echo` until the
/// request carries N tool results, then answers one delta; `GET /stats` answers
/// the connections accepted.
/// `.../chat/completions` speaks OpenAI, `.../messages` Anthropic.
final class FakeModelServer {
    static let script = #"""
    import http.server, sys, os, json, time, signal, threading
    signal.pthread_sigmask(signal.SIG_UNBLOCK, range(1, signal.NSIG))
    def watch_stdin():
        sys.stdin.buffer.read(); os._exit(0)
    threading.Thread(target=watch_stdin, daemon=True).start()
    CONNECTIONS = [0]
    LOCK = threading.Lock()
    def openai(n):
        chunk = lambda d: ("data: " + json.dumps({"choices": [{"index": 0, "delta": d, "finish_reason": None}]}) + "\n\n").encode()
        body = b"".join(chunk({"content": " t%d" % (i % 10)}) for i in range(n))
        return body + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%d}}\n\ndata: [DONE]\n\n' % n
    def anthropic(n):
        ev = lambda t, d: ("event: %s\ndata: %s\n\n" % (t, json.dumps(d))).encode()
        head = ev("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}}) + ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        body = b"".join(ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " t%d" % (i % 10)}}) for i in range(n))
        tail = ev("content_block_stop", {"type": "content_block_stop", "index": 0}) + ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n}}) + ev("message_stop", {"type": "message_stop"})
        return head + body + tail
    def responses(n):
        ev = lambda d: ("event: %s\ndata: %s\n\n" % (d["type"], json.dumps(d))).encode()
        head = ev({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_b", "status": "in_progress", "output": []}}) + ev({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"id": "msg_b", "type": "message", "status": "in_progress", "content": [], "role": "assistant"}})
        body = b"".join(ev({"type": "response.output_text.delta", "sequence_number": i + 2, "item_id": "msg_b", "output_index": 0, "content_index": 0, "delta": " t%d" % (i % 10), "logprobs": []}) for i in range(n))
        return head + body + ev({"type": "response.completed", "sequence_number": n + 2, "response": {"id": "resp_b", "status": "completed", "output": [], "usage": {"input_tokens": 5, "output_tokens": n}}})
    def openai_call(i):
        d = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_%d" % i, "type": "function", "function": {"name": "echo", "arguments": json.dumps({"i": i})}}]}, "finish_reason": None}]}
        return ("data: " + json.dumps(d) + "\n\n").encode() + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
    def anthropic_call(i):
        ev = lambda t, d: ("event: %s\ndata: %s\n\n" % (t, json.dumps(d))).encode()
        return (ev("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}})
            + ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_%d" % i, "name": "echo", "input": {}}})
            + ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": json.dumps({"i": i})}})
            + ev("content_block_stop", {"type": "content_block_stop", "index": 0})
            + ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 1}})
            + ev("message_stop", {"type": "message_stop"}))
    def responses_call(i):
        ev = lambda d: ("event: %s\ndata: %s\n\n" % (d["type"], json.dumps(d))).encode()
        item = {"id": "fc_%d" % i, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "call_%d" % i, "name": "echo"}
        done = dict(item, status="completed", arguments=json.dumps({"i": i}))
        return (ev({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_t", "status": "in_progress", "output": []}})
            + ev({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item})
            + ev({"type": "response.function_call_arguments.delta", "sequence_number": 2, "item_id": item["id"], "output_index": 0, "delta": done["arguments"]})
            + ev({"type": "response.output_item.done", "sequence_number": 3, "output_index": 0, "item": done})
            + ev({"type": "response.completed", "sequence_number": 4, "response": {"id": "resp_t", "status": "completed", "output": [done], "usage": {"input_tokens": 5, "output_tokens": 1}}}))
    # What marks one tool result in each API's request body (compact JSON, sorted keys).
    RESULT_MARKER = {"openai": b'"role":"tool"', "anthropic": b'"type":"tool_result"', "responses": b'"type":"function_call_output"'}
    CACHE = {}
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def setup(self):
            super().setup()
            with LOCK: CONNECTIONS[0] += 1
        def log_message(self, *a): pass
        def do_GET(self):
            body = json.dumps({"connections": CONNECTIONS[0]}).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
        def do_POST(self):
            request = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            first = self.path.split("/")[1]
            kind = "openai" if self.path.endswith("/chat/completions") else "responses" if self.path.endswith("/responses") else "anthropic"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            if first.startswith("tools"):
                results = request.count(RESULT_MARKER[kind])
                if results < int(first[5:]):
                    body = {"openai": openai_call, "anthropic": anthropic_call, "responses": responses_call}[kind](results)
                    self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body); self.wfile.flush()
                    return
                first = "d1"
            if first.startswith("slow"):
                self.send_header("Transfer-Encoding", "chunked"); self.end_headers()
                pieces = [b'data: {"choices":[{"index":0,"delta":{"content":"w"},"finish_reason":null}]}\n\n'] * int(first[4:])
                for p in pieces:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(p), p)); self.wfile.flush(); time.sleep(1)
                end = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(end), end)); self.wfile.flush()
                return
            n = 1 if first == "close" else int(first[1:])
            key = (kind, n)
            if key not in CACHE: CACHE[key] = {"openai": openai, "responses": responses, "anthropic": anthropic}[kind](n)
            body = CACHE[key]
            if first == "close":
                self.send_header("Connection", "close"); self.close_connection = True
            self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body); self.wfile.flush()
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    s.daemon_threads = True
    if len(sys.argv) >= 3:
        import ssl
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(sys.argv[1], sys.argv[2])
        s.socket = tls.wrap_socket(s.socket, server_side=True, do_handshake_on_connect=False)
    print(s.server_address[1], flush=True)
    s.serve_forever()
    """#

    let process = Process()
    let input = Pipe()
    let port: Int
    let scheme: String

    /// With `tls` (PEM certificate and key files) the server speaks https.
    init(tls: (certificate: String, key: String)? = nil) throws {
        let out = Pipe()
        scheme = tls == nil ? "http" : "https"
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script] + (tls.map { [$0.certificate, $0.key] } ?? [])
        process.standardOutput = out
        process.standardInput = input
        try process.run()
        var line = Data()
        while !line.contains(0x0A) {
            let d = out.fileHandleForReading.availableData
            if d.isEmpty { break }
            line.append(d)
        }
        guard let p = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw BenchError("the fake model server (python3) did not start")
        }
        port = p
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }

    func baseURL(_ prefix: String) -> String { "\(scheme)://127.0.0.1:\(port)/\(prefix)/v1" }

    func connections() throws -> Int {
        guard let url = URL(string: "http://127.0.0.1:\(port)/stats") else { throw BenchError("bad stats URL") }
        let data = try Data(contentsOf: url)
        guard let n = try JSONValue.parse([UInt8](data))["connections"]?.intValue else { throw BenchError("bad stats answer") }
        return n
    }
}

extension Measurements {
    /// One `session/send` "go": wall and server CPU time, and the text deltas seen.
    func timedTurn(_ server: ServerProcess, _ ids: IDs, sessionID: String, deltas: inout Int) throws -> (nanos: UInt64, cpu: UInt64) {
        let id = ids.take()
        let cpu0 = try server.cpuNanos()
        let t0 = nowNanos()
        try server.sendRequest(id: id, method: "session/send", params: ["sessionId": .string(sessionID), "input": "go"])
        var seen = 0
        try server.awaitResult(id: id) { line in if LineKind.isTextDelta(line) { seen += 1 } }
        deltas = seen
        return (nowNanos() - t0, try server.cpuNanos() - cpu0)
    }

    func httpProviders(idleSeconds: Int, deltas: Int, runs: Int, requests: Int) throws -> HTTPFigures {
        let fake = try FakeModelServer()
        let server = try start()
        defer { server.finish() }
        let ids = IDs()
        func model(_ provider: String, _ prefix: String) -> JSONValue {
            ["model": ["provider": .string(provider), "model": "bench", "baseURL": .string(fake.baseURL(prefix))]]
        }
        func turn(_ sid: String, count: inout Int) throws -> (nanos: UInt64, cpu: UInt64) {
            try timedTurn(server, ids, sessionID: sid, deltas: &count)
        }

        // Idle: a stream that sends one chunk per second. A first request warms the
        // connection, as in a conversation; the measured one then waits on it.
        let idleSession = try createSession(server, ids, config: model("openai", "slow\(idleSeconds)"))
        var seen = 0
        let idle = try turn(idleSession, count: &seen)

        var perDelta: [String: Double] = [:]
        for provider in ["openai", "anthropic", "openai-responses"] {
            var cpu: UInt64 = 0
            var total = 0
            for _ in 0..<runs {
                let sid = try createSession(server, ids, config: model(provider, "d\(deltas)"))
                let r = try turn(sid, count: &seen)
                guard seen == deltas else { throw BenchError("\(provider): expected \(deltas) deltas, got \(seen)") }
                cpu += r.cpu
                total += seen
            }
            perDelta[provider] = Double(cpu) / Double(total)
        }

        let before = try fake.connections()
        let reuse = try createSession(server, ids, config: model("openai", "d1"))
        var kept: [UInt64] = []
        for _ in 0..<requests { kept.append(try turn(reuse, count: &seen).nanos) }
        // The stats request itself came on a connection of its own.
        let connections = try fake.connections() - before - 1
        let fresh = try createSession(server, ids, config: model("openai", "close"))
        var closing: [UInt64] = []
        for _ in 0..<requests { closing.append(try turn(fresh, count: &seen).nanos) }

        return HTTPFigures(
            idleWallSeconds: Double(idle.nanos) / 1e9, idleCPUSeconds: Double(idle.cpu) / 1e9, cpuNanosPerDelta: perDelta,
            requests: requests, connections: connections,
            keepAliveTurnNanos: kept.sorted()[kept.count / 2], freshConnectionTurnNanos: closing.sorted()[closing.count / 2])
    }
}

/// Figures over https: the same fake server behind TLS with a self-signed
/// certificate the server is told to trust (`SSL_CERT_FILE`; and
/// `URLSessionCertificateAuthorityInfoFile`, which URLSession on Linux reads,
/// so a build that still sends https through URLSession can be measured too).
struct HTTPSFigures {
    /// The first request of the server: it opens the connection (TCP and TLS).
    var idleWallSeconds: Double
    var idleCPUSeconds: Double
    var idleCPUPercent: Double { idleCPUSeconds / idleWallSeconds * 100 }
    var cpuNanosPerDelta: Double
}

extension Measurements {
    func httpsProviders(idleSeconds: Int, deltas: Int, runs: Int) throws -> HTTPSFigures {
        let directory = scratch + "/tls-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificate = directory + "/cert.pem", key = directory + "/key.pem"
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate,
                             "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        guard openssl.terminationStatus == 0 else { throw BenchError("openssl could not make a certificate") }

        let fake = try FakeModelServer(tls: (certificate, key))
        let server = try start(environment: ["SSL_CERT_FILE": certificate, "URLSessionCertificateAuthorityInfoFile": certificate])
        defer { server.finish() }
        let ids = IDs()
        func turn(_ sid: String, count: inout Int) throws -> (nanos: UInt64, cpu: UInt64) {
            try timedTurn(server, ids, sessionID: sid, deltas: &count)
        }
        func model(_ prefix: String) -> JSONValue {
            ["model": ["provider": "openai", "model": "bench", "baseURL": .string(fake.baseURL(prefix))]]
        }
        var seen = 0
        let idleSession = try createSession(server, ids, config: model("slow\(idleSeconds)"))
        let idle = try turn(idleSession, count: &seen)
        guard seen == idleSeconds else { throw BenchError("https idle stream: expected \(idleSeconds) deltas, got \(seen)") }

        var cpu: UInt64 = 0
        var total = 0
        for _ in 0..<runs {
            let sid = try createSession(server, ids, config: model("d\(deltas)"))
            let r = try turn(sid, count: &seen)
            guard seen == deltas else { throw BenchError("https: expected \(deltas) deltas, got \(seen)") }
            cpu += r.cpu
            total += seen
        }
        return HTTPSFigures(
            idleWallSeconds: Double(idle.nanos) / 1e9, idleCPUSeconds: Double(idle.cpu) / 1e9,
            cpuNanosPerDelta: Double(cpu) / Double(total))
    }
}
