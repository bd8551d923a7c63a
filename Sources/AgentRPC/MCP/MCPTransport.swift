import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What a transport hands the MCP client, in order.
enum MCPIncoming: Sendable {
    case message(JSONValue)
    /// A frame that was not JSON (the server broke the protocol; the connection goes on).
    case badFrame(String)
    /// A message over `MCPBounds.maxMessageBytes`, skipped whole; `id` if it could be read.
    case oversized(bytes: Int, id: RequestID?)
    /// The server is gone (end of output, a crash, an HTTP session that cannot be renewed).
    case closed(reason: String)
    /// The request `id` never reached the server (it did not run), for `why`.
    case undelivered(id: RequestID, reason: String, why: MCPUndelivered)
}

/// Why a request never reached its server.
enum MCPUndelivered: Sendable {
    /// The server no longer knows the MCP session it was sent in (HTTP 404): a
    /// new session may carry it again; the connection goes on.
    case sessionExpired
    /// The server cannot be reached (connection refused, name not resolved): the
    /// connection is over, as with `closed`.
    case serverUnreachable
}

/// How the MCP client talks to one server: stdio (a child process) or streamable HTTP.
protocol MCPTransport: Sendable {
    /// Sends one JSON-RPC message; throws when the server cannot be reached.
    func send(_ message: JSONValue) async throws
    /// Stops the server (stdio) or ends the session (HTTP). Idempotent and bounded.
    func close() async
    /// The last lines of the server's stderr (empty for HTTP).
    var stderrTail: [String] { get }
    /// Called by the client once `initialize` was answered (HTTP sends the version on every request).
    func negotiated(protocolVersion: String)
    /// Called once `notifications/initialized` was sent (HTTP opens its GET stream).
    func initialized()
    /// The client no longer waits for the answer to `id` (HTTP stops reading its POST).
    func abandoned(_ id: RequestID)
    /// The server ended the MCP session: forget it, so the next `initialize` starts
    /// a new one (HTTP); also after a modern probe found a legacy server.
    func resetSession()
    /// Whether `abandoned` tells the server the request is cancelled (a modern
    /// HTTP request ends with its stream; no `notifications/cancelled` is sent).
    var cancelsByClosingStream: Bool { get }
    /// Whether a modern server's `x-mcp-header` arguments travel as headers (Streamable HTTP; stdio has none).
    var mirrorsParamHeaders: Bool { get }
    /// The `x-mcp-header` arguments of each tool, by tool name, as the last listing found them.
    func mirror(paramHeaders: [String: [MCPParamHeader]])
}

extension MCPTransport {
    func initialized() {}
    func abandoned(_ id: RequestID) {}
    func resetSession() {}
    var cancelsByClosingStream: Bool { false }
    var mirrorsParamHeaders: Bool { false }
    func mirror(paramHeaders: [String: [MCPParamHeader]]) {}
}

struct MCPTransportError: Error, CustomStringConvertible {
    var description: String
}

/// Hands incoming messages from a reader thread to the client's task, at most
/// `capacity` at a time: a server that floods us (a `list_changed` storm) is
/// slowed down to our pace instead of filling memory.
///
/// `@unchecked Sendable`: `room`, `overdraft` and `finished` are only touched under `condition`.
final class MCPInbox: @unchecked Sendable {
    private let stream: AsyncStream<MCPIncoming>
    private let continuation: AsyncStream<MCPIncoming>.Continuation
    // A condition, not a Mutex: a reader thread must block while the client is
    // `capacity` messages behind.
    private let condition = ConditionLock()
    /// Messages that may still be put before the client consumes one.
    private var room: Int
    private var finished = false
    /// Items `offer` let in beyond the capacity; consuming them frees no room.
    private var overdraft = 0
    static let defaultCapacity = 256

    init(capacity: Int = MCPInbox.defaultCapacity) {
        (stream, continuation) = AsyncStream.makeStream(of: MCPIncoming.self)
        room = capacity
    }

    /// From a reader thread: blocks while the client is `capacity` messages behind.
    func put(_ item: MCPIncoming) {
        condition.lock()
        if finished {
            condition.unlock()
            return
        }
        if case .closed = item {
            condition.unlock()
            continuation.yield(item)
            return
        }
        while room == 0 && !finished { condition.wait() }
        let open = !finished
        if open { room -= 1 }
        condition.unlock()
        // After `finish` the stream takes nothing any more.
        if open { continuation.yield(item) }
    }

    /// From a thread that must not block (the HTTP driver): false when there was
    /// no room and `item` was dropped. An `essential` item (an answer to one of
    /// our requests, whose number our own requests bound) is let in regardless.
    func offer(_ item: MCPIncoming, essential: Bool) -> Bool {
        condition.lock()
        if finished {
            condition.unlock()
            return true
        }
        let admitted: Bool
        switch item {
        case .closed:
            // The end always goes through, as with `put`.
            admitted = true
        case .message, .badFrame, .oversized, .undelivered:
            if room > 0 {
                room -= 1
                admitted = true
            } else if essential {
                overdraft += 1
                admitted = true
            } else {
                admitted = false
            }
        }
        condition.unlock()
        if admitted { continuation.yield(item) }
        return admitted
    }

    /// Frees the place of one consumed message.
    func consumed() {
        condition.lock()
        if overdraft > 0 {
            overdraft -= 1
        } else {
            room += 1
            condition.signal()
        }
        condition.unlock()
    }

    /// Ends the stream; a blocked reader is released.
    func finish() {
        condition.lock()
        if finished {
            condition.unlock()
            return
        }
        finished = true
        condition.unlock()
        continuation.finish()
        // Wake a reader blocked on room; it sees `finished` and stops putting.
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    var items: AsyncStream<MCPIncoming> { stream }
}

/// Keeps the last lines of a server's stderr, each cut to a bound.
final class LineTail: Sendable {
    private let lines = Mutex<[String]>([])
    private let keep: Int

    init(keep: Int) { self.keep = keep }

    func add(_ line: String) {
        lines.withLock {
            $0.append(line)
            if $0.count > keep { $0.removeFirst($0.count - keep) }
        }
    }

    var all: [String] { lines.withLock { $0 } }
}

/// stdio: a child process, newline-delimited JSON-RPC on stdin/stdout; stderr
/// lines go to our log at debug level, prefixed with the server's name.
final class MCPStdioTransport: MCPTransport {
    private let child: ChildProcess
    private let tail = LineTail(keep: MCPBounds.stderrLinesKept)
    private let serverName: String
    private let logger: Logger
    /// The one stop of the child; every `close` waits for it.
    private let stopping = Mutex<Task<Void, Never>?>(nil)

    private init(child: ChildProcess, serverName: String, logger: Logger) {
        self.child = child
        self.serverName = serverName
        self.logger = logger
    }

    /// Starts the child and its two reader threads, which feed `inbox`.
    static func start(spec: MCPServerSpec, environment: [String: String], inbox: MCPInbox, logger: Logger) async throws -> MCPStdioTransport {
        var env = environment
        for (key, value) in spec.env ?? [:] { env[key] = MCPSecrets.expand(value, environment: environment) }
        let child = try await ChildProcess.spawn(command: spec.command ?? "", arguments: spec.args ?? [], environment: env, directory: spec.cwd)
        let transport = MCPStdioTransport(child: child, serverName: spec.name, logger: logger)
        do {
            try transport.startReaders(inbox: inbox)
        } catch {
            // Unread, the child would block on a full pipe: it is stopped, not left running.
            await transport.close()
            throw MCPTransportError(description: "\(error)")
        }
        return transport
    }

    var pid: Int32 { child.pid }

    /// Throws when the system refuses a reader thread; the descriptors no thread
    /// owns are closed then.
    private func startReaders(inbox: MCPInbox) throws(OSThread.StartError) {
        let child = self.child
        let name = serverName
        let logger = self.logger
        let tail = self.tail
        @Sendable func readStdout() {
            var parser = FrameParser(maxMessageBytes: MCPBounds.maxMessageBytes, framing: .newline)
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            func drain() {
                while let event = parser.next() {
                    switch event {
                    case .frame(let bytes):
                        // Blank lines between messages are tolerated.
                        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
                        do {
                            inbox.put(.message(try JSONValue.parse(bytes)))
                        } catch {
                            inbox.put(.badFrame("\(error) in \(bytes.count) bytes: \(String(decoding: bytes.prefix(120), as: UTF8.self))"))
                        }
                    case .oversized(let count, let id):
                        inbox.put(.oversized(bytes: count, id: id))
                    case .malformedHeader(let why), .desynchronized(let why, _):
                        inbox.put(.badFrame(why))
                    }
                }
            }
            var reason = "the server closed its output"
            while true {
                if child.waitForOutput(on: child.stdoutFD) == .serverEnded {
                    // The stop that follows kills what still holds the pipe.
                    reason = "the server ended, and a process it started still holds its output"
                    break
                }
                let n = buffer.withUnsafeMutableBytes { read(child.stdoutFD, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                parser.append(buffer[0..<n])
                drain()
            }
            if let last = parser.finish() {
                if case .frame(let bytes) = last, let value = try? JSONValue.parse(bytes) { inbox.put(.message(value)) }
            }
            Glibc.close(child.stdoutFD)
            inbox.put(.closed(reason: reason))
        }
        @Sendable func readStderr() {
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            func emit(_ bytes: ArraySlice<UInt8>) {
                let line = String(decoding: bytes.prefix(MCPBounds.stderrLineBytes), as: UTF8.self)
                tail.add(line)
                logger.debug("mcp \(name): \(line)")
            }
            while true {
                let n = buffer.withUnsafeMutableBytes { read(child.stderrFD, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                for byte in buffer[0..<n] {
                    if byte == 0x0A {
                        emit(pending[...])
                        pending.removeAll(keepingCapacity: true)
                    } else if pending.count < MCPBounds.stderrLineBytes {
                        pending.append(byte)
                    }
                }
            }
            if !pending.isEmpty { emit(pending[...]) }
            Glibc.close(child.stderrFD)
        }
        do {
            try OSThread.start(name: "mcp-\(name)-stdout", readStdout)
        } catch {
            Glibc.close(child.stdoutFD)
            Glibc.close(child.stderrFD)
            throw error
        }
        do {
            try OSThread.start(name: "mcp-\(name)-stderr", readStderr)
        } catch {
            Glibc.close(child.stderrFD)
            throw error
        }
    }

    func send(_ message: JSONValue) async throws {
        var bytes = message.serialized()
        bytes.append(0x0A)
        do {
            try child.write(bytes)
        } catch .closed {
            throw MCPTransportError(description: "the server's input is closed")
        } catch .notReading {
            throw MCPTransportError(description: "the server is not reading its input (over \(MCPBounds.maxUnreadInputBytes) bytes wait for it)")
        }
    }

    /// Stops the child once. A second caller (the session closing while the
    /// connection's own end closes it too) waits for that stop instead of
    /// returning while the child may still run.
    func close() async {
        let child = self.child
        let stop = stopping.withLock { task in
            if let task { return task }
            let started = Task { await child.stop(grace: MCPBounds.stopGraceSeconds) }
            task = started
            return started
        }
        await stop.value
    }

    var stderrTail: [String] { tail.all }

    func negotiated(protocolVersion: String) {}

    /// How the process ended, for a status reason.
    var exitDescription: String { child.exitDescription }
}

/// `${NAME}` in `env` and `headers` values names one of agentrpc's environment
/// variables; such values are kept when a session is stored, literal ones are not.
enum MCPSecrets {
    static func expand(_ value: String, environment: [String: String]) -> String {
        var out = ""
        var rest = value[...]
        while let open = rest.scalarRange(of: "${") {
            out += rest[..<open.lowerBound]
            guard let close = rest[open.upperBound...].firstIndex(of: "}") else {
                out += rest[open.lowerBound...]
                return out
            }
            let name = String(rest[open.upperBound..<close])
            out += environment[name] ?? ""
            rest = rest[rest.index(after: close)...]
        }
        out += rest
        return out
    }

    /// True when `value` is only `${NAME}` references and text around them that
    /// is not itself a secret by our rule: it holds at least one reference.
    static func isReference(_ value: String) -> Bool {
        value.containsScalars("${") && value.containsScalars("}")
    }
}
