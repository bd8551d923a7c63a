#if os(Linux)
import AgentRPCProtocol
import Foundation
import Synchronization
import Testing
@testable import AgentRPC

/// A Python HTTP/1.1 server on 127.0.0.1 that counts the connections it
/// accepted and can hold a response open; started per test, it exits when the
/// test closes its stdin.
final class CountingServer {
    static let script = #"""
    import http.server, sys, os, time, signal, threading
    signal.pthread_sigmask(signal.SIG_UNBLOCK, range(1, signal.NSIG))
    def watch_stdin():
        sys.stdin.buffer.read()
        os._exit(0)
    threading.Thread(target=watch_stdin, daemon=True).start()
    lock = threading.Condition()
    state = {"connections": 0, "stalls_ended": 0}
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def log_message(self, *a): pass
        def setup(self):
            super().setup()
            with lock: state["connections"] += 1
        def do_GET(self):
            p = self.path
            if p == "/count":
                return self.send_text(str(state["connections"]).encode())
            if p == "/stall-ended":
                # Waits (bounded) until a held response's connection is gone.
                with lock:
                    lock.wait_for(lambda: state["stalls_ended"] > 0, timeout=10)
                    return self.send_text(str(state["stalls_ended"]).encode())
            if p.startswith("/slow/"):
                # A chunk, a pause (while every other stream is open too), the end.
                self.start_sse()
                self.chunk(b"data: one\n\n")
                time.sleep(0.5)
                self.chunk(b"data: two\n\n")
                return self.chunk(b"")
            if p == "/silent":
                self.start_sse()
                self.chunk(b"data: one\n\n")
                time.sleep(5)
                return
            if p == "/stall":
                self.start_sse()
                self.chunk(b"data: first\n\n")
                try:
                    for _ in range(400):
                        time.sleep(0.05)
                        self.chunk(b": keep-alive\n\n")
                except Exception:
                    with lock:
                        state["stalls_ended"] += 1
                        lock.notify_all()
                return
            if p == "/close":
                # An answer that closes its connection: the client must close its end.
                self.close_connection = True
                self.send_response(200)
                self.send_header("Content-Length", "3")
                self.send_header("Connection", "close")
                self.end_headers()
                return self.wfile.write(b"bye")
            if p == "/drop":
                # Read, then the connection closes without an answer (a server that died).
                with lock: state["drops"] = state.get("drops", 0) + 1
                self.close_connection = True
                return
            if p == "/drops":
                return self.send_text(str(state.get("drops", 0)).encode())
            if p == "/redirect":
                self.send_response(302)
                self.send_header("Location", "/")
                self.send_header("Content-Length", "0")
                return self.end_headers()
            self.send_text(b"hello")
        def send_text(self, body):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def start_sse(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
        def chunk(self, b):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b)); self.wfile.flush()
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    s.daemon_threads = True
    print(s.server_address[1], flush=True)
    s.serve_forever()
    """#

    let process = Process()
    let input = Pipe()
    let port: Int

    init() throws {
        let out = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script]
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
            throw ProviderContractViolation("counting server did not start")
        }
        port = p
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }

    func request(_ path: String, idleTimeout: Double = 20) throws -> HTTPRequest {
        HTTPRequest(
            url: try #require(URL(string: "http://127.0.0.1:\(port)\(path)")), method: "GET", headers: ["Accept": "*/*"], body: Data(),
            connectTimeoutSeconds: 10, idleTimeoutSeconds: idleTimeout)
    }
}

/// What one request delivered to its sink, as a stream of events a test awaits.
final class RecordingSink: HTTPResponseSink {
    enum Event: Sendable, Equatable {
        case head(Int)
        case body(String)
        case end(String?)
    }
    let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    /// Everything delivered so far.
    let log = Mutex<[Event]>([])

    init() {
        (events, continuation) = AsyncStream.makeStream()
    }

    private func record(_ event: Event) {
        log.withLock { $0.append(event) }
        continuation.yield(event)
    }

    func head(_ head: ResponseHead) { record(.head(head.status)) }
    func body(_ bytes: Data) { record(.body(String(decoding: bytes, as: UTF8.self))) }
    func end(_ error: (any Error)?) {
        record(.end(error.map { "\($0)" }))
        continuation.finish()
    }

    /// The whole response once it ended; the body chunks joined.
    func collected() async -> (status: Int?, body: String, error: String??) {
        var status: Int?
        var body = ""
        var error: String??
        for await event in events {
            switch event {
            case .head(let s): status = s
            case .body(let b): body += b
            case .end(let e): error = .some(e)
            }
        }
        return (status, body, error)
    }
}

/// The next event of one request (the suite's time limit bounds the wait).
func nextEvent(_ iterator: inout AsyncStream<RecordingSink.Event>.Iterator) async -> RecordingSink.Event? {
    await iterator.next()
}

/// The peer's TCP port of a connected IPv4 socket, if it is one.
func peerPort(of fd: Int32) -> Int? {
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let status = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
    }
    guard status == 0, address.sin_family == sa_family_t(AF_INET) else { return nil }
    return Int(UInt16(bigEndian: address.sin_port))
}

func threadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.map { (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)) ?? "?" }
}

func httpThreadCount() -> Int {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.filter { task in
        (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) == "agentrpc-http"
    }.count
}

@Suite(.serialized, .enabled(if: FixtureServer.pythonAvailable), .timeLimit(.minutes(1))) struct HTTPTransportTests {
    @Test func optionCheckNamesTheOptionTheInstalledLibcurlLacks() throws {
        var library = try CurlLibrary.load().get()
        // As a libcurl without CURLOPT_CONNECTTIMEOUT_MS answers: CURLE_UNKNOWN_OPTION.
        library.setoptInteger = { _, option, _ in option == 156 ? 48 : 0 }
        library.setoptPointer = { _, _, _ in 0 }
        #expect(throws: CurlLibrary.LoadError.self) { try library.checkOptions() }
        do {
            try library.checkOptions()
        } catch {
            #expect(error.message.contains("libcurl.so.4"))
            #expect(error.message.contains("does not support CURLOPT_CONNECTTIMEOUT_MS (CURLcode 48"))
        }
        // A string option refused (CURLE_NOT_BUILT_IN) is named the same way.
        library.setoptInteger = { _, _, _ in 0 }
        library.setoptPointer = { _, option, _ in option == 10_065 ? 4 : 0 }
        do {
            try library.checkOptions()
            Issue.record("a refused CURLOPT_CAINFO passed the check")
        } catch {
            #expect(error.message.contains("CURLOPT_CAINFO (CURLcode 4"))
        }
        // The installed libcurl has every option.
        try CurlLibrary.load().get().checkOptions()
    }

    @Test func aMissingLibcurlFailsTheRequestWithATypedError() async throws {
        let missing = CurlLibrary.load("libcurl-agentrpc-missing.so.4")
        guard case .failure(let reason) = missing else {
            Issue.record("a library that does not exist was loaded")
            return
        }
        #expect(reason.message.contains("cannot load libcurl-agentrpc-missing.so.4"))
        let transport = CurlHTTPTransport { missing }
        let sink = RecordingSink()
        _ = transport.start(try CountingServer.unusedRequest(), sink: sink)
        let result = await sink.collected()
        #expect(result.status == nil)
        let error = try #require(result.error ?? nil)
        #expect(error.contains("the HTTP library libcurl is not usable: cannot load libcurl-agentrpc-missing.so.4"))
        // The provider turns it into a `network` error that names the library.
        let mapped = ProviderErrorMapper.map(transportError: HTTPTransportError(kind: .unavailable, detail: reason.message))
        #expect(mapped.code == .network)
        #expect(mapped.safeDescription.contains("libcurl"))
    }

    @Test func keptAliveConnectionsAreReused() async throws {
        let server = try CountingServer()
        for _ in 0..<5 {
            let sink = RecordingSink()
            _ = CurlHTTPTransport.shared.start(try server.request("/"), sink: sink)
            let result = await sink.collected()
            #expect(result.status == 200 && result.body == "hello")
        }
        let sink = RecordingSink()
        _ = CurlHTTPTransport.shared.start(try server.request("/count"), sink: sink)
        // Five requests and the count itself on one connection.
        #expect(await sink.collected().body == "1")
    }

    /// libcurl sends a request again on a new connection when the reused one
    /// it went out on closes before any answer; a request the server may have
    /// taken (an MCP tools/call) must not run twice: `sentAtMostOnce` ends it
    /// as a lost connection after the first send.
    @Test(arguments: [false, true]) func aRequestOnAReusedConnectionThatDiesIsSentAgainOnlyWhenAllowed(atMostOnce: Bool) async throws {
        let server = try CountingServer()
        let first = RecordingSink()
        _ = CurlHTTPTransport.shared.start(try server.request("/"), sink: first)
        #expect(await first.collected().body == "hello")  // the connection is now kept alive
        var dropped = try server.request("/drop")
        dropped.sentAtMostOnce = atMostOnce
        let sink = RecordingSink()
        _ = CurlHTTPTransport.shared.start(dropped, sink: sink)
        let error = try #require(await sink.collected().error ?? nil)
        #expect(error.contains(HTTPTransportError.Kind.connectionLost.rawValue))
        let count = RecordingSink()
        _ = CurlHTTPTransport.shared.start(try server.request("/drops"), sink: count)
        #expect(await count.collected().body == (atMostOnce ? "1" : "2"))
    }

    /// Quick acknowledgement reaches every socket libcurl opened (a kept-alive
    /// connection included), and the close-socket callback that keeps that set
    /// really closes them: twenty closed connections leave no descriptor behind.
    @Test func socketsLibcurlOpensAreKnownAndClosedByTheirCallback() async throws {
        let server = try CountingServer()
        let keptAlive = RecordingSink()
        _ = CurlHTTPTransport.shared.start(try server.request("/"), sink: keptAlive)
        #expect(await keptAlive.collected().body == "hello")
        let toServer = CurlHTTPTransport.openSockets.filter { peerPort(of: $0) == server.port }
        #expect(toServer.count == 1)

        func descriptors() -> Int { ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).count }
        let before = descriptors()
        for _ in 0..<20 {
            let sink = RecordingSink()
            _ = CurlHTTPTransport.shared.start(try server.request("/close"), sink: sink)
            #expect(await sink.collected().body == "bye")
        }
        #expect(descriptors() < before + 5, "closed connections left descriptors open")
        #expect(CurlHTTPTransport.openSockets.allSatisfy { fcntl($0, F_GETFD) != -1 })
    }

    @Test func manyConcurrentStreamsRunOnTheOneThread() async throws {
        let server = try CountingServer()
        let count = 24
        let sinks = (0..<count).map { _ in RecordingSink() }
        var handles: [HTTPRequestHandle] = []
        for (i, sink) in sinks.enumerated() {
            handles.append(CurlHTTPTransport.shared.start(try server.request("/slow/\(i)"), sink: sink))
        }
        // Every stream has its first chunk while all of them are still open
        // (each holds its response for 0.5 s after it).
        var iterators = sinks.map { $0.events.makeAsyncIterator() }
        for i in iterators.indices {
            #expect(await nextEvent(&iterators[i]) == .head(200))
            #expect(await nextEvent(&iterators[i]) == .body("data: one\n\n"))
        }
        #expect(httpThreadCount() == 1, "\(threadNames())")
        for i in iterators.indices {
            var rest: [RecordingSink.Event] = []
            while let event = await nextEvent(&iterators[i]) { rest.append(event) }
            #expect(rest == [.body("data: two\n\n"), .end(nil)])
        }
        withExtendedLifetime(handles) {}
    }

    @Test func cancelEndsTheRequestAtOnce() async throws {
        let server = try CountingServer()
        let sink = RecordingSink()
        let handle = CurlHTTPTransport.shared.start(try server.request("/stall"), sink: sink)
        var iterator = sink.events.makeAsyncIterator()
        #expect(await nextEvent(&iterator) == .head(200))
        #expect(await nextEvent(&iterator) == .body("data: first\n\n"))
        handle.cancel()
        // The server's next keep-alive write (every 50 ms) finds the connection closed.
        let ended = RecordingSink()
        _ = CurlHTTPTransport.shared.start(try server.request("/stall-ended"), sink: ended)
        #expect(await ended.collected().body == "1")
        // The driver dropped the cancelled transfer before it started the one
        // that just answered: its sink never heard of an end.
        #expect(!sink.log.withLock { $0 }.contains { if case .end = $0 { true } else { false } })
    }

    @Test func redirectsAreNotFollowed() async throws {
        let server = try CountingServer()
        let sink = RecordingSink()
        _ = CurlHTTPTransport.shared.start(try server.request("/redirect"), sink: sink)
        let result = await sink.collected()
        // The 3xx itself is the answer: a redirect would carry the key elsewhere.
        #expect(result.status == 302)
        #expect(result.body.isEmpty)
        #expect(result.error == .some(nil))
    }

    @Test func idleTimeoutEndsASilentResponse() async throws {
        let server = try CountingServer()
        let sink = RecordingSink()
        let started = ContinuousClock.now
        _ = CurlHTTPTransport.shared.start(try server.request("/silent", idleTimeout: 0.3), sink: sink)
        let result = await sink.collected()
        #expect(result.body == "data: one\n\n")
        #expect((result.error ?? nil)?.contains("timed out waiting for data: no data for 0.3 s") == true)
        // Well before the server's 5 s pause is over.
        #expect(started.duration(to: .now) < .seconds(4))
    }

    @Test func aDecoratorOnTheSeamSeesEveryRequestOfAProvider() async throws {
        let server = try CountingServer()
        let recorder = RecordingTransport(inner: HTTPTransports.current, port: server.port)
        let previous = HTTPTransports.current
        HTTPTransports.current = recorder
        defer { HTTPTransports.current = previous }
        let config = HTTPProviderConfiguration(
            baseURL: try #require(URL(string: "http://127.0.0.1:\(server.port)/v1")), apiKey: "sk-decorated", model: "m", timeoutSeconds: 20)
        _ = await collect(OpenAIProvider(configuration: config).stream(ModelRequest(model: "", instructions: "hi", messages: [.user(text: "hi", images: [])])))
        let seen = recorder.seen.withLock { $0 }
        #expect(seen.count == 1)
        #expect(seen.first?.url.path == "/v1/chat/completions")
        #expect(seen.first?.headers["Authorization"] == "Bearer sk-decorated")
    }
}

/// A pass-through decorator that keeps the requests to one port.
final class RecordingTransport: HTTPTransport {
    let inner: any HTTPTransport
    let port: Int
    let seen = Mutex<[HTTPRequest]>([])

    init(inner: any HTTPTransport, port: Int) {
        self.inner = inner
        self.port = port
    }

    func start(_ request: HTTPRequest, sink: any HTTPResponseSink) -> HTTPRequestHandle {
        if request.url.port == port { seen.withLock { $0.append(request) } }
        return inner.start(request, sink: sink)
    }
}

extension CountingServer {
    /// A request that a transport without libcurl must refuse before any connection.
    static func unusedRequest() throws -> HTTPRequest {
        HTTPRequest(
            url: try #require(URL(string: "https://127.0.0.1:1/")), method: "POST", headers: [:], body: Data("{}".utf8),
            connectTimeoutSeconds: 1, idleTimeoutSeconds: 1)
    }
}
#endif
