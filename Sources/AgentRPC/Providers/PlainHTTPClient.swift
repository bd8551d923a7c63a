import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A transport failure of `PlainHTTPClient` or `CurlTransport`; `description` names the host, never a path or query.
struct PlainHTTPError: Error, CustomStringConvertible, Sendable {
    enum Kind: String, Sendable {
        case resolveFailed = "cannot resolve host"
        case connectFailed = "cannot connect"
        case connectTimedOut = "connect timed out"
        case idleTimedOut = "timed out waiting for data"
        case connectionLost = "connection lost"
        case badResponse = "malformed HTTP response"
        /// https (libcurl): the TLS handshake failed or the server's certificate is not trusted.
        case tlsFailed = "TLS handshake or certificate check failed"
    }
    var kind: Kind
    var detail: String
    var description: String { "\(kind.rawValue): \(detail)" }
}

/// HTTP/1.1 over a plain TCP socket, for `http://` endpoints (local model
/// servers: llama.cpp, Ollama, vLLM, LM Studio).
///
/// Why not URLSession here: on Linux its libcurl glue never removes the write
/// readiness source it registers while connecting, so a socket that is always
/// writable wakes a thread continuously for as long as the response takes — a
/// busy core while a local model (on the same cores) thinks. This client waits
/// in `poll(2)` on one thread per request and costs nothing while idle.
/// `https://` goes through libcurl directly on Linux (`CurlTransport`), for the
/// same reason, and through URLSession elsewhere.
///
/// Connections are kept alive and reused per host and port. A request written
/// to a reused connection that the server had already closed (no response byte
/// came back) is sent again once on a fresh connection.
enum PlainHTTPClient {
    /// Idle connections kept per host and port.
    static let maximumIdlePerHost = 8
    /// The response head (status line and headers) must fit in this.
    static let maximumHeadBytes = 64 * 1024

    struct Target: Sendable, Hashable {
        var host: String
        var port: Int
        var key: String { "\(host):\(port)" }
    }

    static func target(of url: URL) -> Target? {
        guard url.scheme?.lowercased() == "http", let host = url.host, !host.isEmpty else { return nil }
        return Target(host: host, port: url.port ?? 80)
    }

    /// Starts `request` on a thread of its own; `sink` receives the head, the body
    /// bytes and the end. Returns a handle to cancel it.
    static func start(_ request: HTTPRequest, target: Target, sink: any HTTPResponseSink) -> PlainHTTPTask {
        let task = PlainHTTPTask()
        let bytes = requestBytes(request, target: target)
        let thread = Thread {
            task.run(bytes, target: target, connectTimeout: request.connectTimeoutSeconds, idleTimeout: request.idleTimeoutSeconds, sink: sink)
        }
        thread.name = "agentrpc-http"
        thread.start()
        return task
    }

    static func requestBytes(_ request: HTTPRequest, target: Target) -> [UInt8] {
        let url = request.url
        var path = url.path
        if path.isEmpty { path = "/" }
        if let query = url.query { path += "?" + query }
        let body = request.body
        var head = "\(request.method) \(path) HTTP/1.1\r\n"
        head += "Host: \(target.port == 80 ? target.host : target.key)\r\n"
        var sawLength = false
        for (name, value) in request.headers {
            // Header injection: a value with a line break would start a new header.
            if value.contains(where: { $0 == "\r" || $0 == "\n" }) || name.contains(where: { $0 == "\r" || $0 == "\n" || $0 == ":" }) {
                continue
            }
            let lower = name.lowercased()
            if lower == "host" || lower == "connection" || lower == "transfer-encoding" { continue }
            if lower == "content-length" { sawLength = true }
            head += "\(name): \(value)\r\n"
        }
        if !sawLength { head += "Content-Length: \(body.count)\r\n" }
        head += "Connection: keep-alive\r\n\r\n"
        // One copy of the body, at memcpy speed: it holds the whole conversation.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(head.utf8.count + body.count)
        bytes.append(contentsOf: head.utf8)
        body.withUnsafeBytes { bytes.append(contentsOf: $0.bindMemory(to: UInt8.self)) }
        return bytes
    }
}

/// Idle keep-alive connections, by host and port.
final class PlainHTTPConnectionPool: Sendable {
    static let shared = PlainHTTPConnectionPool()
    private let idle = Mutex<[String: [Int32]]>([:])

    func take(_ key: String) -> Int32? {
        idle.withLock { pool in pool[key]?.popLast() }
    }

    func give(_ fd: Int32, key: String) {
        let kept = idle.withLock { pool -> Bool in
            guard (pool[key]?.count ?? 0) < PlainHTTPClient.maximumIdlePerHost else { return false }
            pool[key, default: []].append(fd)
            return true
        }
        if !kept { close(fd) }
    }
}

/// One running request: `cancel()` from any thread unblocks its wait at once.
final class PlainHTTPTask: Sendable {
    private struct State {
        var fd: Int32 = -1
        var cancelled = false
        var lingering = false
    }
    /// How long a response nobody reads any more may take to end by itself.
    static let lingerSeconds = 2.0
    private let state = Mutex(State())

    func cancel() {
        state.withLock { s in
            s.cancelled = true
            // Wakes the thread out of poll/read; it closes the socket itself.
            if s.fd >= 0 { _ = shutdown(s.fd, Int32(SHUT_RDWR)) }
        }
    }

    /// The answer is complete: read the response's end (for keep-alive) briefly, then give up.
    func linger() { state.withLock { $0.lingering = true } }

    private var isCancelled: Bool { state.withLock { $0.cancelled } }
    private var isLingering: Bool { state.withLock { $0.lingering } }

    /// Adopts `fd` as this task's socket; false (and the socket closed) when cancelled meanwhile.
    private func adopt(_ fd: Int32) -> Bool {
        let ok = state.withLock { s -> Bool in
            if s.cancelled { return false }
            s.fd = fd
            return true
        }
        if !ok { close(fd) }
        return ok
    }

    /// Gives up the socket: back to the pool when reusable, else closed.
    private func release(reusable: Bool, key: String) {
        let fd = state.withLock { s -> Int32 in
            defer { s.fd = -1 }
            return s.cancelled ? -1 - s.fd : s.fd
        }
        if fd >= 0 {
            if reusable { PlainHTTPConnectionPool.shared.give(fd, key: key) } else { close(fd) }
        } else if fd < -1 {
            close(-1 - fd)
        }
    }

    fileprivate func run(_ request: [UInt8], target: PlainHTTPClient.Target, connectTimeout: Double, idleTimeout: Double, sink: any HTTPResponseSink) {
        var attempt = 0
        while true {
            attempt += 1
            let pooled = attempt == 1 ? PlainHTTPConnectionPool.shared.take(target.key) : nil
            let fd: Int32
            if let pooled {
                fd = pooled
            } else {
                switch Self.connect(target, timeout: connectTimeout) {
                case .success(let made): fd = made
                case .failure(let error):
                    if !isCancelled { sink.end(error) }
                    return
                }
            }
            guard adopt(fd) else { return }
            var reader = ResponseReader()
            let outcome = exchange(fd, request: request, idleTimeout: idleTimeout, reader: &reader, sink: sink)
            switch outcome {
            case .done(let reusable):
                release(reusable: reusable, key: target.key)
                if !isCancelled { sink.end(nil) }
                return
            case .staleConnection where pooled != nil:
                // The server closed the idle connection before our request: try a fresh one.
                release(reusable: false, key: target.key)
                continue
            case .staleConnection:
                release(reusable: false, key: target.key)
                if !isCancelled { sink.end(PlainHTTPError(kind: .connectionLost, detail: target.key)) }
                return
            case .failed(let error):
                release(reusable: false, key: target.key)
                if !isCancelled { sink.end(error) }
                return
            }
        }
    }

    private enum Outcome {
        case done(reusable: Bool)
        /// Nothing came back at all: the connection was dead before we used it.
        case staleConnection
        case failed(PlainHTTPError)
    }

    private func exchange(_ fd: Int32, request: [UInt8], idleTimeout: Double, reader: inout ResponseReader, sink: any HTTPResponseSink) -> Outcome {
        // Send.
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { sent += n; continue }
            if n < 0 && (errno == EINTR) { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                if !Self.wait(fd, events: Int16(POLLOUT), timeout: idleTimeout) { return .failed(PlainHTTPError(kind: .idleTimedOut, detail: "sending")) }
                continue
            }
            return .staleConnection
        }
        // Receive.
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var receivedAny = false
        while true {
            if isCancelled { return .failed(PlainHTTPError(kind: .connectionLost, detail: "cancelled")) }
            if !Self.wait(fd, events: Int16(POLLIN), timeout: isLingering ? min(idleTimeout, Self.lingerSeconds) : idleTimeout) {
                return .failed(PlainHTTPError(kind: .idleTimedOut, detail: "no data for \(idleTimeout) s"))
            }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            // Acknowledge at once: a server that writes its headers and body
            // separately would otherwise wait out our delayed ACK (~40 ms) on a
            // kept-alive connection. Linux clears quick-ACK mode, so it is set per read.
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), Int32(TCP_QUICKACK), &one, socklen_t(MemoryLayout<Int32>.size))
            if n < 0 {
                if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
                return receivedAny ? .failed(PlainHTTPError(kind: .connectionLost, detail: String(cString: strerror(errno)))) : .staleConnection
            }
            if n == 0 {
                if !receivedAny { return .staleConnection }
                return reader.finishAtEOF(sink: sink) ? .done(reusable: false)
                    : .failed(PlainHTTPError(kind: .connectionLost, detail: "the server closed the connection mid-response"))
            }
            receivedAny = true
            do {
                if try reader.feed(buffer[0..<n], sink: sink) { return .done(reusable: reader.keepAlive) }
            } catch {
                return .failed(error)
            }
        }
    }

    /// Waits until `fd` is ready for `events`; false on timeout. Errors and hang-ups count as ready
    /// (the following read or write reports them).
    static func wait(_ fd: Int32, events: Int16, timeout: Double) -> Bool {
        let bounded = timeout.isFinite ? max(0, min(timeout, 86_400)) : 86_400
        let deadline = ContinuousClock.now + .milliseconds(Int64(bounded * 1000))
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            let ms = max(0, Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000))
            var p = pollfd(fd: fd, events: events, revents: 0)
            let r = poll(&p, 1, ms)
            if r > 0 { return true }
            if r == 0 { return false }
            if errno != EINTR { return true }
        }
    }

    static func connect(_ target: PlainHTTPClient.Target, timeout: Double) -> Result<Int32, PlainHTTPError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(target.host, String(target.port), &hints, &list) == 0, let first = list else {
            return .failure(PlainHTTPError(kind: .resolveFailed, detail: target.host))
        }
        defer { freeaddrinfo(list) }
        var lastError = PlainHTTPError(kind: .connectFailed, detail: target.key)
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let a = entry {
            entry = a.pointee.ai_next
            let fd = socket(a.pointee.ai_family, a.pointee.ai_socktype | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), a.pointee.ai_protocol)
            if fd < 0 { continue }
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let r = Glibc.connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen)
            if r == 0 { return .success(fd) }
            guard errno == EINPROGRESS else {
                lastError = PlainHTTPError(kind: .connectFailed, detail: "\(target.key): \(String(cString: strerror(errno)))")
                close(fd)
                continue
            }
            if !wait(fd, events: Int16(POLLOUT), timeout: timeout) {
                close(fd)
                lastError = PlainHTTPError(kind: .connectTimedOut, detail: "\(target.key) after \(timeout) s")
                continue
            }
            var soError: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
            if soError == 0 { return .success(fd) }
            lastError = PlainHTTPError(kind: .connectFailed, detail: "\(target.key): \(String(cString: strerror(soError)))")
            close(fd)
        }
        return .failure(lastError)
    }
}

/// Parses one HTTP/1.1 response as bytes arrive: head, then a body framed by
/// `Content-Length`, chunked encoding, or the end of the connection.
struct ResponseReader {
    enum Framing { case length(Int), chunked, untilClose, none }
    enum ChunkState { case size, data(Int), dataEnd, trailer }

    private(set) var head: ResponseHead?
    private var headBytes: [UInt8] = []
    private var framing = Framing.none
    private var chunkState = ChunkState.size
    private var lineBuffer: [UInt8] = []
    private(set) var keepAlive = true

    /// Feeds received bytes; true once the response is complete.
    mutating func feed(_ bytes: ArraySlice<UInt8>, sink: any HTTPResponseSink) throws(PlainHTTPError) -> Bool {
        var rest = bytes
        if head == nil {
            headBytes += rest
            guard let end = Self.headEnd(headBytes) else {
                if headBytes.count > PlainHTTPClient.maximumHeadBytes { throw PlainHTTPError(kind: .badResponse, detail: "head too large") }
                return false
            }
            let body = headBytes[end...]
            try parseHead(Array(headBytes[..<end]))
            headBytes = []
            // An interim response (100 Continue) is followed by the real one.
            if let status = head?.status, (100..<200).contains(status) {
                head = nil
                return try feed(body, sink: sink)
            }
            rest = body
            if let head { sink.head(head) }
            if case .length(0) = framing { return true }
            if case .none = framing { return true }
        }
        return try body(rest, sink: sink)
    }

    /// End of connection: complete only if the body ran until close.
    mutating func finishAtEOF(sink: any HTTPResponseSink) -> Bool {
        if head == nil { return false }
        if case .untilClose = framing { return true }
        return false
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i + 4
        }
        return nil
    }

    private mutating func parseHead(_ bytes: [UInt8]) throws(PlainHTTPError) {
        let text = String(decoding: bytes, as: UTF8.self)
        var lines = text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        guard !lines.isEmpty else { throw PlainHTTPError(kind: .badResponse, detail: "empty head") }
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]), (100..<600).contains(status) else {
            throw PlainHTTPError(kind: .badResponse, detail: "status line")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        head = ResponseHead(status: status, headers: headers)
        let connection = headers["connection"]?.lowercased() ?? ""
        keepAlive = parts[0] == "HTTP/1.1" ? !connection.contains("close") : connection.contains("keep-alive")
        if status == 204 || status == 304 {
            framing = .none
        } else if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            framing = .chunked
        } else if let length = headers["content-length"].flatMap({ Int($0) }), length >= 0 {
            framing = .length(length)
        } else {
            framing = .untilClose
            keepAlive = false
        }
    }

    private mutating func body(_ bytes: ArraySlice<UInt8>, sink: any HTTPResponseSink) throws(PlainHTTPError) -> Bool {
        switch framing {
        case .none:
            return true
        case .untilClose:
            if !bytes.isEmpty { sink.body(Data(bytes)) }
            return false
        case .length(let remaining):
            let take = bytes.prefix(remaining)
            if !take.isEmpty { sink.body(Data(take)) }
            framing = .length(remaining - take.count)
            return remaining - take.count == 0
        case .chunked:
            return try chunked(bytes, sink: sink)
        }
    }

    private mutating func chunked(_ bytes: ArraySlice<UInt8>, sink: any HTTPResponseSink) throws(PlainHTTPError) -> Bool {
        var i = bytes.startIndex
        var out: [UInt8] = []
        defer { if !out.isEmpty { sink.body(Data(out)) } }
        while i < bytes.endIndex {
            switch chunkState {
            case .size, .dataEnd, .trailer:
                let byte = bytes[i]
                i += 1
                if byte != 10 {
                    if byte != 13 { lineBuffer.append(byte) }
                    if lineBuffer.count > 4096 { throw PlainHTTPError(kind: .badResponse, detail: "chunk line too long") }
                    continue
                }
                let line = String(decoding: lineBuffer, as: UTF8.self)
                lineBuffer = []
                switch chunkState {
                case .size:
                    let hex = line.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
                    guard let size = Int(hex, radix: 16), size >= 0 else { throw PlainHTTPError(kind: .badResponse, detail: "chunk size") }
                    chunkState = size == 0 ? .trailer : .data(size)
                case .dataEnd:
                    chunkState = .size
                case .trailer:
                    if line.isEmpty { return true }
                case .data:
                    break
                }
            case .data(let remaining):
                let take = min(remaining, bytes.endIndex - i)
                out += bytes[i..<(i + take)]
                i += take
                chunkState = remaining - take == 0 ? .dataEnd : .data(remaining - take)
            }
        }
        return false
    }
}
