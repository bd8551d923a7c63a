import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Streamable HTTP: every message is a POST to the server's endpoint through the
/// project's one HTTP seam (`HTTPTransports.current`); a request's answer comes
/// back as one JSON object or as an SSE stream, which may carry the server's own
/// requests and notifications before the answer. After `initialize`, a GET
/// stream carries what the server sends outside any request (`list_changed`,
/// `ping`). `Mcp-Session-Id` is echoed, `MCP-Protocol-Version` sent once
/// negotiated; a 404 on a session ends the connection (the runner
/// re-initializes); closing DELETEs the session. A modern server (2026-07-28)
/// has none of these: each request also names its method (and tool, prompt or
/// resource) in headers, and the client's `subscriptions/listen` request
/// carries what the GET stream would.
///
/// Every sink callback runs on the HTTP driver thread that all of the process's
/// requests share, so nothing here may block: messages go to the inbox with
/// `offer`, never `put`.
final class MCPHTTPTransport: MCPTransport {
    /// The longest silence on the GET stream before it is opened again (the
    /// python SDK's server sends a keep-alive comment every 15 s).
    static let eventStreamIdleSeconds: Double = 300
    /// The wait before the GET stream is opened again; it doubles after a stream
    /// that ended without delivering anything, up to `eventStreamMaxBackoffSeconds`.
    static let eventStreamBackoffSeconds: Double = 1
    static let eventStreamMaxBackoffSeconds: Double = 30
    /// A request's POST has no idle bound of its own: the client's deadline for
    /// the request (the tool timeout) abandons it, which cancels the POST.
    static let requestIdleSeconds: Double = 86_400

    private let url: URL
    private let headers: [String: String]
    private let inbox: MCPInbox
    private let logger: Logger
    private let serverName: String
    private struct State {
        var sessionID: String?
        var version: String?
        var closed = false
        /// Open POSTs, with the request each one carries (nil: a notification or an answer).
        var posts: [UUID: (handle: MCPHTTPHandleSlot, request: RequestID?)] = [:]
        /// Who waits for a notification's or answer's POST to end.
        var waiting: [UUID: @Sendable () -> Void] = [:]
        var eventStream: HTTPRequestHandle?
        var lastEventID: String?
        var eventStreamBackoff = MCPHTTPTransport.eventStreamBackoffSeconds
        /// Each tool's `x-mcp-header` arguments, by tool name.
        var paramHeaders: [String: [MCPParamHeader]] = [:]
    }
    private let state = Mutex(State())

    init(spec: MCPServerSpec, environment: [String: String], inbox: MCPInbox, logger: Logger) throws {
        guard let url = URL(string: spec.url ?? ""), url.scheme == "http" || url.scheme == "https" else {
            throw MCPTransportError(description: "the url is not an http(s) URL")
        }
        self.url = url
        var expanded: [String: String] = [:]
        for (k, v) in spec.headers ?? [:] {
            let value = MCPSecrets.expand(v, environment: environment)
            // A variable's value is checked here, after expansion (the spec was checked at create).
            if value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) {
                throw MCPTransportError(description: "the value of header '\(k)' holds a line break after ${NAME} expansion")
            }
            expanded[k] = value
        }
        self.headers = expanded
        self.inbox = inbox
        self.logger = logger
        self.serverName = spec.name
    }

    func negotiated(protocolVersion: String) {
        state.withLock { $0.version = protocolVersion }
    }

    /// A modern request is cancelled by closing its response, which `abandoned` does.
    var cancelsByClosingStream: Bool { true }

    var mirrorsParamHeaders: Bool { true }

    func mirror(paramHeaders: [String: [MCPParamHeader]]) { state.withLock { $0.paramHeaders = paramHeaders } }

    /// The headers of a modern request: the routing ones, and for a `tools/call`
    /// the `Mcp-Param-*` its tool's `x-mcp-header` arguments give.
    private func modernHeaders(of message: JSONValue) throws -> [String: String] {
        var h = Self.routingHeaders(of: message)
        guard message["method"]?.stringValue == "tools/call", let tool = message["params"]?["name"]?.stringValue,
              let annotations = state.withLock({ $0.paramHeaders[tool] }) else { return h }
        h.merge(try MCPParamHeader.headers(annotations, arguments: message["params"]?["arguments"] ?? .null)) { current, _ in current }
        return h
    }

    /// The headers a modern request repeats from its body, so that what routes it
    /// needs not read it: `Mcp-Method`, and `Mcp-Name` for the methods that name
    /// a tool, prompt or resource.
    static func routingHeaders(of message: JSONValue) -> [String: String] {
        guard let method = message["method"]?.stringValue else { return [:] }
        var h = ["Mcp-Method": headerValue(method)]
        let name: JSONValue?
        switch method {
        case "tools/call", "prompts/get": name = message["params"]?["name"]
        case "resources/read": name = message["params"]?["uri"]
        default: name = nil
        }
        if let name = name?.stringValue { h["Mcp-Name"] = headerValue(name) }
        return h
    }

    /// `value` as a header value: as it is when it is visible ASCII and spaces
    /// inside, else (or when it looks like the encoded form) `=?base64?…?=`.
    static func headerValue(_ value: String) -> String {
        let plain = value.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value <= 0x7E }
            && value.first != " " && value.last != " "
            && !(value.hasPrefix("=?base64?") && value.hasSuffix("?="))
        return plain ? value : "=?base64?\(Data(value.utf8).base64EncodedString())?="
    }

    var stderrTail: [String] { [] }

    private func request(method: String, body: Data, idleSeconds: Double) -> HTTPRequest {
        var h = headers
        h["Accept"] = method == "GET" ? "text/event-stream" : "application/json, text/event-stream"
        if method == "POST" { h["Content-Type"] = "application/json" }
        let (session, version, lastEvent) = state.withLock { ($0.sessionID, $0.version, $0.lastEventID) }
        if let session { h["Mcp-Session-Id"] = session }
        if let version { h["MCP-Protocol-Version"] = version }
        if method == "GET", let lastEvent { h["Last-Event-ID"] = lastEvent }
        var request = HTTPRequest(
            url: url, method: method, headers: h, body: body,
            connectTimeoutSeconds: 10, idleTimeoutSeconds: idleSeconds)
        // A tools/call the server took must never run twice behind our back.
        request.sentAtMostOnce = method == "POST"
        return request
    }

    /// A request returns once its POST started (the answer comes through the
    /// inbox); a notification or an answer returns once the server accepted it,
    /// so `notifications/initialized` arrives before the requests that follow it.
    func send(_ message: JSONValue) async throws {
        if state.withLock({ $0.closed }) { throw MCPTransportError(description: "the connection is closed") }
        let id: RequestID? = message["method"] != nil ? message["id"].flatMap(RequestID.init(json:)) : nil
        let body = Data(message.serialized())
        if let id {
            let modern = state.withLock { $0.version == MCPClient.modernVersion }
            let extra = modern ? try modernHeaders(of: message) : [:]
            post(
                body, purpose: .request(id, MCPHTTPResponseSink.RequestKind(method: message["method"]?.stringValue)), idleSeconds: Self.requestIdleSeconds,
                extraHeaders: extra, then: nil)
            return
        }
        var key: UUID?
        let finished = await Self.waitBounded(MCPBounds.requestTimeoutSeconds) { done in
            key = post(body, purpose: .oneWay, idleSeconds: MCPBounds.requestTimeoutSeconds, then: done)
        }
        // A server that holds back its answer is not waited for any longer.
        if !finished, let key { dropPost(key) }
    }

    /// Runs `start`, then waits until the `done` it was given is called, or
    /// `seconds` passed (false). Each wait of a notification's or answer's POST,
    /// and of the DELETE at close, has this bound beside the idle timeout, which
    /// a server sending a byte now and then would renew forever.
    private static func waitBounded(_ seconds: Double, _ start: (@escaping @Sendable () -> Void) -> Void) async -> Bool {
        let wait = MCPHTTPBoundedWait()
        var timer: Task<Void, Never>?
        let outcome = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            wait.set(c)
            timer = Task {
                try? await Task.sleep(for: .clampedSeconds(seconds))
                wait.finish(false)
            }
            start { wait.finish(true) }
        }
        timer?.cancel()
        return outcome
    }

    /// Stops reading a POST and forgets it.
    private func dropPost(_ key: UUID) {
        let (handle, then) = state.withLock { s in (s.posts.removeValue(forKey: key)?.handle, s.waiting.removeValue(forKey: key)) }
        handle?.cancel()
        then?()
    }

    @discardableResult
    private func post(
        _ body: Data, purpose: MCPHTTPResponseSink.Purpose, idleSeconds: Double, extraHeaders: [String: String] = [:], then: (@Sendable () -> Void)?
    ) -> UUID {
        let key = UUID()
        let slot = MCPHTTPHandleSlot()
        // Registered before the request starts: its response may end before `start` returns.
        let open = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            if case .request(let id, _) = purpose { s.posts[key] = (slot, id) } else { s.posts[key] = (slot, nil) }
            if let then { s.waiting[key] = then }
            return true
        }
        guard open else {
            then?()
            return key
        }
        var post = request(method: "POST", body: body, idleSeconds: idleSeconds)
        post.headers.merge(extraHeaders) { _, extra in extra }
        // A 404 means "unknown session" only for a request that named one.
        let sink = MCPHTTPResponseSink(transport: self, purpose: purpose, key: key, sentInSession: post.headers["Mcp-Session-Id"] != nil)
        slot.fill(HTTPTransports.current.start(post, sink: sink))
        return key
    }

    /// Opens the GET stream once the session is initialized.
    func initialized() {
        openEventStream()
    }

    /// The client stopped waiting for `id` (cancelled, timed out): its POST is not read any more.
    func abandoned(_ id: RequestID) {
        let handle = state.withLock { s -> MCPHTTPHandleSlot? in
            guard let key = s.posts.first(where: { $0.value.request == id })?.key else { return nil }
            return s.posts.removeValue(forKey: key)?.handle
        }
        handle?.cancel()
    }

    private func openEventStream() {
        let key = UUID()
        let r = request(method: "GET", body: Data(), idleSeconds: Self.eventStreamIdleSeconds)
        let sink = MCPHTTPResponseSink(transport: self, purpose: .eventStream, key: key, sentInSession: r.headers["Mcp-Session-Id"] != nil)
        guard state.withLock({ !$0.closed }) else { return }
        let handle = HTTPTransports.current.start(r, sink: sink)
        let keep = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            s.eventStream = handle
            return true
        }
        if !keep { handle.cancel() }
    }

    /// The GET stream ended: opened again after a pause, unless the server
    /// offers none (any status but 2xx) or the connection is closing.
    fileprivate func eventStreamEnded(status: Int?, delivered: Bool) {
        let delay: Double? = state.withLock { s in
            s.eventStream = nil
            guard !s.closed else { return nil }
            if let status, !(200..<300).contains(status) { return nil }
            if delivered { s.eventStreamBackoff = Self.eventStreamBackoffSeconds }
            let now = s.eventStreamBackoff
            s.eventStreamBackoff = min(s.eventStreamBackoff * 2, Self.eventStreamMaxBackoffSeconds)
            return now
        }
        if let status, !(200..<300).contains(status) {
            logger.debug("mcp \(serverName): no GET stream (HTTP \(status)); messages arrive only with answers")
        }
        guard let delay else { return }
        Task { [weak self] in
            try? await Task.sleep(for: .clampedSeconds(delay))
            self?.openEventStream()
        }
    }

    fileprivate func sawEventID(_ id: String) {
        guard id.utf8.count <= 1024 else { return }
        state.withLock { $0.lastEventID = id }
    }

    fileprivate func finished(_ key: UUID) {
        let then = state.withLock { s -> (@Sendable () -> Void)? in
            s.posts.removeValue(forKey: key)
            return s.waiting.removeValue(forKey: key)
        }
        then?()
    }

    /// A notification's or answer's POST has its status: the server took the
    /// message (or refused it), so the next may go. Its body (normally none) is
    /// not waited for, and may not hold the connection long.
    fileprivate func accepted(_ key: UUID) {
        let (then, handle) = state.withLock { s in (s.waiting.removeValue(forKey: key), s.posts[key]?.handle) }
        then?()
        handle?.linger()
    }

    fileprivate func linger(_ key: UUID) {
        state.withLock { $0.posts[key]?.handle }?.linger()
    }

    /// True when the body is to be read.
    fileprivate func sawHead(_ head: ResponseHead, purpose: MCPHTTPResponseSink.Purpose, sentInSession: Bool) -> Bool {
        if case .request(_, .initialize) = purpose, let value = head.headers["mcp-session-id"], !value.isEmpty,
           value.utf8.count <= 1024, value.unicodeScalars.allSatisfy({ $0.value >= 0x21 && $0.value <= 0x7E }) {
            // Only initialize's answer hands out the session id; later ones repeat it
            // (and an answer from a dropped session must not bring its id back).
            state.withLock { $0.sessionID = value }
        }
        if head.status == 404 && sentInSession {
            // The server does not know the session the message went in: it was not
            // processed. The client starts a new session and sends the request again.
            switch purpose {
            case .request(let id, _):
                deliver(.undelivered(id: id, reason: "the server ended the MCP session (HTTP 404)", why: .sessionExpired), essential: true)
            case .oneWay:
                logger.debug("mcp \(serverName): a notification or answer was refused: the server ended the MCP session (HTTP 404)")
            case .eventStream:
                break
            }
            return false
        }
        guard (200..<300).contains(head.status) else {
            switch purpose {
            case .request:
                // The body may be the JSON-RPC error (a modern server answers 400 with
                // one the client acts on): the sink reads it and falls back to the status.
                return true
            case .oneWay:
                logger.debug("mcp \(serverName): a notification or answer was refused with HTTP \(head.status)")
            case .eventStream:
                break
            }
            return false
        }
        return true
    }

    /// The server dropped our MCP session: the next `initialize` goes without
    /// one and its answer's id is taken; the GET stream of the old one is closed.
    func resetSession() {
        let stream = state.withLock { s -> HTTPRequestHandle? in
            s.sessionID = nil
            s.version = nil
            s.lastEventID = nil
            s.eventStreamBackoff = Self.eventStreamBackoffSeconds
            defer { s.eventStream = nil }
            return s.eventStream
        }
        stream?.cancel()
    }

    /// Hands `item` to the client without blocking the HTTP thread. Answers and
    /// failures of our own requests always go through; under a flood, the
    /// server's own notifications and requests are dropped (with a note).
    fileprivate func deliver(_ item: MCPIncoming, essential: Bool) {
        if !inbox.offer(item, essential: essential) {
            logger.warning("mcp \(serverName): the client is \(MCPInbox.defaultCapacity) messages behind; a message of the server was dropped")
        }
    }

    func close() async {
        let (handles, waiting, session) = state.withLock { s -> ([MCPHTTPHandleSlot], [@Sendable () -> Void], String?) in
            // Idempotent: the session is deleted once.
            if s.closed { return ([], [], nil) }
            s.closed = true
            var h = s.posts.values.map(\.handle)
            if let e = s.eventStream {
                let slot = MCPHTTPHandleSlot()
                slot.fill(e)
                h.append(slot)
            }
            let w = Array(s.waiting.values)
            s.posts = [:]
            s.waiting = [:]
            s.eventStream = nil
            return (h, w, s.sessionID)
        }
        for h in handles { h.cancel() }
        for release in waiting { release() }
        inbox.put(.closed(reason: "the connection was closed"))
        guard session != nil else { return }
        // DELETE ends the session on the server; bounded, and its answer does not matter.
        var delete = request(method: "DELETE", body: Data(), idleSeconds: Self.deleteSeconds)
        delete.connectTimeoutSeconds = Self.deleteSeconds
        var handle: HTTPRequestHandle?
        let finished = await Self.waitBounded(Self.deleteSeconds) { done in
            handle = HTTPTransports.current.start(delete, sink: MCPHTTPDoneSink(done))
        }
        if !finished { handle?.cancel() }
    }

    /// The bound of the DELETE at close, from its start to its end.
    static let deleteSeconds: Double = 5
}

/// One response: a POST's answer (JSON or SSE) or the GET stream; each message
/// handed to the inbox, bounded in size.
private final class MCPHTTPResponseSink: HTTPResponseSink {
    enum Purpose {
        /// A request of ours: its answer must come, else the client is told why not.
        case request(RequestID, RequestKind)
        /// A notification or an answer to the server: 202 and no body, normally.
        case oneWay
        /// The GET stream: the server's messages outside any request.
        case eventStream
    }
    private struct State {
        var status: Int?
        var read = false
        var sse = false
        var parser = SSEParser(maximumBufferedBytes: MCPBounds.maxMessageBytes, maximumStreamBytes: Int.max)
        var body: [UInt8] = []
        var tooLarge = false
        var answered = false
        var delivered = false
        var lingering = false
    }
    enum RequestKind {
        case ordinary
        /// Its answer hands out the MCP session id.
        case initialize
        /// `subscriptions/listen`: a stream that lasts; when it breaks, only the
        /// subscription ends (the client opens it again), not the connection.
        case subscription
        /// `server/discover`: a legacy server may answer the unknown method by
        /// dropping the connection (a handler that crashed); that answers the
        /// probe with an error, and `initialize` decides whether the server is there.
        case probe

        init(method: String?) {
            switch method {
            case "initialize": self = .initialize
            case "subscriptions/listen": self = .subscription
            case "server/discover": self = .probe
            default: self = .ordinary
            }
        }
    }
    private let transport: MCPHTTPTransport
    private let purpose: Purpose
    private let key: UUID
    /// The message went with an `Mcp-Session-Id`.
    private let sentInSession: Bool
    private let state = Mutex(State())

    init(transport: MCPHTTPTransport, purpose: Purpose, key: UUID, sentInSession: Bool) {
        self.transport = transport
        self.purpose = purpose
        self.key = key
        self.sentInSession = sentInSession
    }

    private var requestID: RequestID? {
        if case .request(let id, _) = purpose { return id }
        return nil
    }

    func head(_ head: ResponseHead) {
        let read = transport.sawHead(head, purpose: purpose, sentInSession: sentInSession)
        let type = head.headers["content-type"]?.lowercased() ?? ""
        state.withLock {
            $0.status = head.status
            $0.read = read
            // A refused request's body is read whole, as its error.
            $0.sse = type.hasPrefix("text/event-stream") && (200..<300).contains(head.status)
        }
        if case .oneWay = purpose { transport.accepted(key) }
    }

    func body(_ bytes: Data) {
        var out: [MCPIncoming] = []
        var eventID: String?
        state.withLock { s in
            guard s.read else { return }
            if s.sse {
                do {
                    for event in try s.parser.feed(bytes) {
                        eventID = event.id ?? eventID
                        // The SDK's priming events carry an id and no data.
                        if !event.data.isEmpty { out.append(parse(Array(event.data.utf8), &s)) }
                    }
                } catch {
                    // A line over the bound: the rest of the stream cannot be read.
                    s.read = false
                    if let id = requestID {
                        s.answered = true
                        out.append(.oversized(bytes: MCPBounds.maxMessageBytes + 1, id: id))
                    } else {
                        out.append(.badFrame("an SSE stream the client cannot read: \(error)"))
                    }
                }
            } else if s.body.count + bytes.count > MCPBounds.maxMessageBytes {
                s.tooLarge = true
                s.read = false
                s.body = []
            } else {
                s.body.append(contentsOf: bytes)
            }
        }
        if case .eventStream = purpose, let eventID { transport.sawEventID(eventID) }
        for item in out { transport.deliver(item, essential: isEssential(item)) }
        // The answer is in: the server should end the stream now, and may not hold it long.
        let linger = state.withLock { s -> Bool in
            guard s.answered, !s.lingering else { return false }
            s.lingering = true
            return true
        }
        if linger { transport.linger(key) }
    }

    func end(_ error: (any Error)?) {
        var out: [MCPIncoming] = []
        let (status, delivered) = state.withLock { s -> (Int?, Bool) in
            if let id = requestID, let status = s.status, !(200..<300).contains(status) {
                // A refused request: its JSON-RPC error if the body is one for it, else the status.
                let value = s.tooLarge ? nil : try? JSONValue.parse(s.body)
                if let value, value["error"] != nil, value["id"].flatMap(RequestID.init(json:)) == id {
                    out.append(.message(value))
                } else {
                    out.append(.message(Message.failure(id, RPCError(.internalError, "the server answered HTTP \(status)")).json))
                }
                s.answered = true
                s.read = false
            }
            if s.sse, s.read {
                for event in s.parser.finish() where !event.data.isEmpty { out.append(parse(Array(event.data.utf8), &s)) }
            } else if s.tooLarge {
                out.append(.oversized(bytes: MCPBounds.maxMessageBytes + 1, id: requestID))
                s.answered = true
            } else if s.read, !s.body.isEmpty {
                out.append(parse(s.body, &s))
            }
            if let id = requestID, s.read || s.status == nil, !s.answered {
                if case .request(_, .subscription) = purpose {
                    let why = error.map { "the stream broke: \($0)" } ?? "the server ended the stream without a response"
                    out.append(.message(Message.failure(id, RPCError(.internalError, why)).json))
                } else if case .request(_, .probe) = purpose, let (_, unsent) = Self.serverGone(error), !unsent || s.status != nil {
                    out.append(.message(Message.failure(id, RPCError(.internalError, "the server dropped the connection instead of answering: \(error.map { "\($0)" } ?? "no response")")).json))
                } else if let (lost, unsent) = Self.serverGone(error) {
                    // The server crashed or is down: the connection ends, every call in
                    // flight with it. A request whose connection was never made did not run
                    // (and its item ends the connection too).
                    out.append(unsent && s.status == nil ? .undelivered(id: id, reason: lost, why: .serverUnreachable) : .closed(reason: lost))
                } else {
                    let why = error.map { "the HTTP request failed: \($0)" } ?? "the server ended its answer without a response"
                    out.append(.message(Message.failure(id, RPCError(.internalError, why)).json))
                }
            }
            return (s.status, s.delivered)
        }
        for item in out { transport.deliver(item, essential: isEssential(item)) }
        switch purpose {
        case .eventStream: transport.eventStreamEnded(status: status, delivered: delivered)
        case .request, .oneWay: transport.finished(key)
        }
    }

    /// Why the server counts as gone after a request failed with `error`, and
    /// whether the request never left (no connection was made), or nil.
    private static func serverGone(_ error: (any Error)?) -> (String, unsent: Bool)? {
        guard let error = error as? HTTPTransportError else { return nil }
        switch error.kind {
        case .connectFailed, .resolveFailed:
            return ("the server cannot be reached (\(error))", true)
        case .connectionLost:
            return ("the server cannot be reached (\(error))", false)
        case .connectTimedOut, .idleTimedOut, .badResponse, .tlsFailed, .unavailable, .threadRefused:
            return nil
        }
    }

    private func isEssential(_ item: MCPIncoming) -> Bool {
        switch item {
        case .message(let value): return value["method"] == nil
        case .oversized, .badFrame, .closed, .undelivered: return true
        }
    }

    private func parse(_ bytes: [UInt8], _ s: inout State) -> MCPIncoming {
        s.delivered = true
        do {
            let value = try JSONValue.parse(bytes)
            if let id = requestID, value["method"] == nil, value["id"].flatMap(RequestID.init(json:)) == id { s.answered = true }
            return .message(value)
        } catch {
            return .badFrame("\(error) in \(bytes.count) bytes")
        }
    }
}

/// A POST's handle, registered before the request starts; a cancel that comes
/// before the handle does cancels it as soon as it is there.
private final class MCPHTTPHandleSlot: Sendable {
    private let state = Mutex<(handle: HTTPRequestHandle?, cancelled: Bool)>((nil, false))

    func fill(_ handle: HTTPRequestHandle) {
        let cancel = state.withLock { s -> Bool in
            s.handle = handle
            return s.cancelled
        }
        if cancel { handle.cancel() }
    }

    func cancel() {
        state.withLock { s -> HTTPRequestHandle? in
            s.cancelled = true
            return s.handle
        }?.cancel()
    }

    func linger() { state.withLock { $0.handle }?.linger() }
}

/// One wait of `waitBounded`: ended once, by the work or by the timer.
private final class MCPHTTPBoundedWait: Sendable {
    private let waiter = Mutex<CheckedContinuation<Bool, Never>?>(nil)
    func set(_ continuation: CheckedContinuation<Bool, Never>) { waiter.withLock { $0 = continuation } }
    func finish(_ value: Bool) { waiter.withLock { $0.take() }?.resume(returning: value) }
}

/// Calls `done` when the response ends, whatever it was.
private final class MCPHTTPDoneSink: HTTPResponseSink {
    private let done: @Sendable () -> Void
    init(_ done: @escaping @Sendable () -> Void) { self.done = done }
    func head(_ head: ResponseHead) {}
    func body(_ bytes: Data) {}
    func end(_ error: (any Error)?) { done() }
}
