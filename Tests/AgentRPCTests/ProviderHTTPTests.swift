import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// A Python `http.server` on 127.0.0.1 that replays fixtures, started per test.
/// It prints its port on stdout once listening, so no sleep is needed to wait for it.
final class FixtureServer {
    static let script = #"""
    import http.server, sys, os, time, signal, threading
    # The test process may have blocked signals we inherit; and we exit when the
    # test closes our stdin, so no server outlives its test.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, range(1, signal.NSIG))
    def watch_stdin():
        sys.stdin.buffer.read()
        os._exit(0)
    threading.Thread(target=watch_stdin, daemon=True).start()
    FIX = sys.argv[1]
    KEY = "Bearer sk-test-key-0123456789"
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0")); self.rfile.read(n)
            p = self.path
            if p.endswith("/chat/completions") and self.headers.get("Authorization") != KEY:
                return self.send_json(401, b'{"error":{"message":"Incorrect API key provided: sk-test-key-0123456789","type":"invalid_request_error","code":"invalid_api_key"}}')
            if p.startswith("/ratelimited/"):
                return self.send_json(429, b'{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}', {"retry-after-ms": "2500"})
            if p.startswith("/json/"):
                return self.send_json(200, b'{"choices":[{"message":{"role":"assistant","content":"plain"},"finish_reason":"stop"}]}')
            if p.startswith("/stall/"):
                self.start_sse()
                self.chunk(b'data: {"choices":[{"index":0,"delta":{"content":"first"},"finish_reason":null}]}\n\n')
                try:
                    while True:
                        time.sleep(0.05)
                        self.wfile.write(b": keep-alive\n\n"); self.wfile.flush()
                except Exception:
                    return
            if p.startswith("/cut/"):
                self.start_sse()
                self.chunk(b'data: {"choices":[{"index":0,"delta":{"content":"par"},"finish_reason":null}]}\n\n')
                return
            name = "openai-chat/text.sse" if p.endswith("/chat/completions") else "anthropic/tool-use.sse"
            data = open(os.path.join(FIX, name), "rb").read()
            self.start_sse()
            for i in range(0, len(data), 37):
                self.chunk(data[i:i + 37])
        def start_sse(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
        def chunk(self, b):
            self.wfile.write(b); self.wfile.flush()
        def send_json(self, status, body, headers={}):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in headers.items(): self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    print(s.server_address[1], flush=True)
    s.serve_forever()
    """#

    static var pythonAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") || ProcessInfo.processInfo.environment["PATH"]?
            .split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/python3") } == true
    }

    let process = Process()
    let input = Pipe()
    let port: Int

    init() throws {
        let out = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script, Fixtures.directory.path]
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
            try? input.fileHandleForWriting.close()
            process.terminate()
            throw ProviderContractViolation("fixture server did not start")
        }
        port = p
    }

    deinit {
        // Closing stdin makes the server exit; terminate() is the backup.
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }

    func config(_ prefix: String = "", key: String = "sk-test-key-0123456789") throws -> HTTPProviderConfiguration {
        HTTPProviderConfiguration(
            baseURL: try #require(URL(string: "http://127.0.0.1:\(port)/\(prefix)v1")), apiKey: key, model: "gpt-4o", timeoutSeconds: 20)
    }
}

func collect(_ stream: ProviderEventStream) async -> (events: [ProviderEvent], error: (any Error)?) {
    var events: [ProviderEvent] = []
    do {
        for try await e in stream { events.append(e) }
        return (events, nil)
    } catch {
        return (events, error)
    }
}

@Suite(.serialized, .enabled(if: FixtureServer.pythonAvailable)) struct ProviderHTTPTests {
    static let request = ModelRequest(model: "", instructions: "hi", messages: [.user(text: "weather?", images: [])])

    @Test func openAIReplaysTextFixture() async throws {
        let server = try FixtureServer()
        let result = await collect(OpenAIProvider(configuration: try server.config()).stream(Self.request))
        #expect(result.error == nil)
        let expected = decodeOutcome(OpenAIChatStreamDecoder(), chunks: [try Fixtures.bytes("openai-chat/text.sse")])
        #expect(result.events == expected.events)
        #expect(Assembled(result.events).stop == .endTurn)
    }

    @Test func anthropicReplaysToolUseFixture() async throws {
        let server = try FixtureServer()
        let result = await collect(AnthropicProvider(configuration: try server.config()).stream(Self.request))
        #expect(result.error == nil)
        #expect(Assembled(result.events).toolCalls.map(\.name) == ["get_weather"])
    }

    @Test func httpErrorsAreMappedWithoutLeakingTheKey() async throws {
        let server = try FixtureServer()
        let wrongKey = "sk-wrong-key-9876543210"
        let unauthorized = await collect(OpenAIProvider(configuration: try server.config(key: wrongKey)).stream(Self.request))
        let e401 = try #require(unauthorized.error as? ProviderError)
        #expect(e401.code == .authUserInvalid)
        #expect(e401.httpStatus == 401)
        #expect(!e401.unsafeMessage.contains("0123456789"))

        let limited = await collect(OpenAIProvider(configuration: try server.config("ratelimited/")).stream(Self.request))
        let e429 = try #require(limited.error as? ProviderError)
        #expect(e429.code == .rateLimited)
        #expect(e429.retryAfterSeconds == 2.5)
    }

    @Test func nonStreamingJSONAndTruncatedStreams() async throws {
        let server = try FixtureServer()
        let json = await collect(OpenAIProvider(configuration: try server.config("json/")).stream(Self.request))
        #expect(json.events == [.textDelta("plain"), .end(.endTurn)])

        let cut = await collect(OpenAIProvider(configuration: try server.config("cut/")).stream(Self.request))
        #expect(cut.events == [.textDelta("par")])
        #expect((cut.error as? ProviderError)?.code == .streamTruncated)
    }

    @Test func connectionRefusedIsNetwork() async throws {
        // Port 1 on loopback has no listener.
        let config = HTTPProviderConfiguration(baseURL: try #require(URL(string: "http://127.0.0.1:1/v1")), apiKey: nil, model: "m")
        let result = await collect(OpenAIProvider(configuration: config).stream(Self.request))
        #expect((result.error as? ProviderError)?.code == .network)
    }

    @Test func cancellingTheConsumerStopsTheStream() async throws {
        let server = try FixtureServer()
        let stream = OpenAIProvider(configuration: try server.config("stall/")).stream(Self.request)
        let (firstSeen, signal) = AsyncStream<Void>.makeStream()
        let consumer = Task {
            var count = 0
            do {
                for try await _ in stream {
                    count += 1
                    signal.yield()
                }
            } catch {}
            return count
        }
        var it = firstSeen.makeAsyncIterator()
        _ = await it.next()
        consumer.cancel()
        // The server never finishes this response: only cancellation can end the loop.
        #expect(await consumer.value == 1)
    }
}
