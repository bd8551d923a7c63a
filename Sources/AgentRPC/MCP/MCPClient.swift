import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Why an MCP request did not get a result.
enum MCPRequestError: Error, CustomStringConvertible {
    /// The server answered with a JSON-RPC error (`data`: its object, if any).
    case rpc(code: Int, message: String, data: [String: JSONValue])
    case timedOut(method: String, seconds: Double)
    /// The server went away before answering: the request may or may not have run.
    case gone(String)
    /// The request never reached the server: it did not run.
    case notDelivered(String)
    /// The server no longer knows the MCP session the request went in (HTTP 404):
    /// it did not run, and a new session may carry it again.
    case sessionExpired(String)
    /// The answer was larger than `MCPBounds.maxMessageBytes` and was skipped.
    case tooLarge(bytes: Int)
    case malformed(String)

    var description: String {
        switch self {
        case .rpc(let code, let message, _): return "the server answered error \(code): \(message)"
        case .timedOut(let method, let seconds): return "no answer to \(method) within \(seconds) seconds"
        case .gone(let why), .notDelivered(let why), .sessionExpired(let why): return why
        case .tooLarge(let bytes): return "the answer of \(bytes) bytes exceeds the limit of \(MCPBounds.maxMessageBytes) bytes and was dropped"
        case .malformed(let why): return why
        }
    }
}

/// One tool as the server listed it.
struct MCPTool: Sendable, Hashable {
    var name: String
    var title: String?
    var description: String?
    var inputSchema: JSONValue
    var readOnlyHint: Bool?
    var destructiveHint: Bool?
    var idempotentHint: Bool?
    /// Why our validator cannot use `inputSchema` (a `schemaWarnings` entry), checked once when listed.
    var schemaProblem: JSONSchemaError?
}

/// The JSON-RPC side of one connection to an MCP server: requests with bounded
/// waits, answers to the server's own requests (`ping`; form elicitation when
/// the client answers `user/elicit`; sampling, roots and anything else are
/// refused with -32601), and notifications. Owns its transport.
///
/// Two eras of the protocol: a server that answers `server/discover` naming
/// `modernVersion` is spoken to without a handshake, every request carrying
/// the version and our capabilities in `_meta`; any other is initialized with
/// `initialize` at `offeredVersion`, the newest version of that era.
actor MCPClient {
    /// The newest protocol version offered: no `initialize`, no MCP session.
    static let modernVersion = "2026-07-28"
    /// The version `initialize` offers to a server that does not speak `modernVersion`.
    static let offeredVersion = "2025-11-25"
    /// The versions an `initialize` answer may name.
    static let acceptedVersions: Set<String> = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
    /// The `_meta` keys every request carries in the modern era.
    static let versionKey = "io.modelcontextprotocol/protocolVersion"
    static let capabilitiesKey = "io.modelcontextprotocol/clientCapabilities"
    static let clientInfoKey = "io.modelcontextprotocol/clientInfo"
    /// The modern error that names the versions a server supports (`data.supported`).
    static let unsupportedVersionCode = -32022
    /// The most rounds of one request a server may ask more input for (`input_required`).
    static let maxInputRounds = 8

    let serverName: String
    let transport: any MCPTransport
    private let logger: Logger
    private var nextID = 1
    private var pending: [Int: CheckedContinuation<JSONValue, any Error>] = [:]
    private var closedReason: String?
    /// Called (on this actor) for `notifications/tools/list_changed` and `notifications/prompts/list_changed`.
    private var onListChanged: (@Sendable () -> Void)?
    /// Called once when the connection ends.
    private var onClosed: (@Sendable (String) -> Void)?
    private var problemLog: [String] = []
    private(set) var protocolVersion: String?
    /// Whether the server is spoken to in the modern era (`modernVersion`).
    private(set) var modern = false
    /// Whether the server's `initialize` answer declared `resources`.
    private(set) var offersResources = false
    /// Whether it declared `prompts`.
    private(set) var offersPrompts = false
    /// Bumped each time a new MCP session replaced one the server dropped.
    private var sessionGeneration = 0
    /// The renewal under way, which requests that learn of the same 404 wait for.
    private var renewing: Task<Void, any Error>?
    /// How many MCP sessions replaced dropped ones on this connection.
    private(set) var sessionsRenewed = 0
    /// Told of a request's `notifications/progress`: progress, total, message.
    typealias ProgressHandler = @Sendable (Double, Double?, String?) -> Void
    /// The handlers of the requests waiting now, by progress token.
    private var progressHandlers: [String: ProgressHandler] = [:]
    private var nextProgressToken = 1
    /// Asks the user to fill in a server's form (`elicitation/create`): the
    /// message and the requested schema in, `{action, content?}` out.
    typealias ElicitationHandler = @Sendable (_ message: String, _ requestedSchema: JSONValue) async throws -> JSONValue
    /// Whether servers are told this client can answer form elicitations.
    let elicits: Bool
    /// The elicitation handlers of the requests waiting now, in the order they were sent.
    private var elicitationHandlers: [(key: Int, handler: ElicitationHandler)] = []
    /// The elicitations under way for a request (by its handler's key), ended with it.
    private var elicitationTasks: [Int: [Task<Void, Never>]] = [:]
    private var nextElicitationKey = 1

    init(serverName: String, transport: any MCPTransport, logger: Logger, elicits: Bool = false) {
        self.serverName = serverName
        self.transport = transport
        self.logger = logger
        self.elicits = elicits
    }

    /// What this client declares: form elicitation when its own client answers `user/elicit`.
    private var capabilities: JSONValue {
        elicits ? ["elicitation": ["form": .object([:])]] : .object([:])
    }

    func setHandlers(listChanged: @escaping @Sendable () -> Void, closed: @escaping @Sendable (String) -> Void) {
        onListChanged = listChanged
        onClosed = closed
        if let closedReason { closed(closedReason) }
    }

    /// Reads `inbox` until it ends; run as the connection's task.
    func pump(_ inbox: MCPInbox) async {
        for await item in inbox.items {
            handle(item)
            inbox.consumed()
            if closedReason != nil { break }
        }
        if closedReason == nil { connectionEnded("the server's output ended") }
        inbox.finish()
    }

    /// The recent problems (bad frames, stray answers), newest last.
    var problems: [String] { problemLog }

    private func problem(_ text: String) {
        logger.warning("mcp \(serverName): \(text)")
        problemLog.append(text)
        if problemLog.count > MCPBounds.problemsKept { problemLog.removeFirst(problemLog.count - MCPBounds.problemsKept) }
    }

    private func handle(_ item: MCPIncoming) {
        switch item {
        case .message(let value):
            switch Message.decode(value) {
            case .message(let message): handle(message)
            case .invalid(_, let error): problem("an invalid JSON-RPC message: \(error.message)")
            }
        case .badFrame(let why):
            problem("a message that is not JSON: \(why)")
        case .oversized(let bytes, let id):
            if case .int(let n)? = id, let waiter = pending.removeValue(forKey: n) {
                waiter.resume(throwing: MCPRequestError.tooLarge(bytes: bytes))
            } else {
                problem("skipped a message of \(bytes) bytes (limit \(MCPBounds.maxMessageBytes))")
            }
        case .closed(let reason):
            connectionEnded(reason)
        case .undelivered(let id, let reason, let why):
            let waiter: CheckedContinuation<JSONValue, any Error>?
            if case .int(let n) = id { waiter = pending.removeValue(forKey: n) } else { waiter = nil }
            switch why {
            case .sessionExpired:
                waiter?.resume(throwing: MCPRequestError.sessionExpired(reason))
            case .serverUnreachable:
                // Ended before the caller hears of its request, so that it finds the
                // connection over (`endedReason`) and the round trip after the call
                // waits for the restart instead of racing its announcement.
                connectionEnded(reason)
                waiter?.resume(throwing: MCPRequestError.notDelivered(reason))
            }
        }
    }

    private func handle(_ message: Message) {
        switch message {
        case .response(let id, let result):
            guard case .int(let n)? = id, let waiter = pending.removeValue(forKey: n) else {
                problem("an answer to a request it was not sent (id \(id.map(\.description) ?? "null"))")
                return
            }
            switch result {
            case .success(let value): waiter.resume(returning: value)
            case .failure(let error):
                waiter.resume(throwing: MCPRequestError.rpc(code: error.code.rawValue, message: error.message, data: error.data))
            }
        case .request(let id, let method, let params):
            // A server may ask things of its client: ping, and a form for the user
            // when our client answers them; sampling and roots are not offered.
            let answer: Message
            if method == "ping" {
                answer = .success(id, .object([:]))
            } else if method == "elicitation/create", elicits {
                elicit(id, params ?? .object([:]))
                return
            } else {
                answer = .failure(id, RPCError(.methodNotFound, "agentrpc does not offer \(method) to MCP servers"))
            }
            let transport = self.transport
            Task { try? await transport.send(answer.json) }
        case .notification(let method, let params):
            switch method {
            case "notifications/tools/list_changed", "notifications/prompts/list_changed":
                // A listing covers both: the prompts are listed with the tools.
                onListChanged?()
            case "notifications/subscriptions/acknowledged":
                if relistOnAcknowledgement {
                    relistOnAcknowledgement = false
                    onListChanged?()
                }
            case "notifications/message":
                logger.debug("mcp \(serverName): log message")
            case "notifications/progress":
                guard let token = params?["progressToken"]?.stringValue, let handler = progressHandlers[token],
                      let progress = params?["progress"]?.numberValue else { return }
                handler(progress, params?["total"]?.numberValue, params?["message"]?.stringValue)
            default:
                break
            }
        }
    }

    /// A server's `elicitation/create` (handshake era): asked of the user through
    /// the handler of the call in flight (the latest sent, when several are: the
    /// request does not say which call it belongs to), answered when the user
    /// has; the call's end (done, timed out, cancelled with the turn) withdraws it.
    private func elicit(_ id: RequestID, _ params: JSONValue) {
        let transport = self.transport
        func answer(_ message: Message) { Task { try? await transport.send(message.json) } }
        if let mode = params["mode"]?.stringValue, mode != "form" {
            answer(.failure(id, RPCError(.invalidParams, "agentrpc answers form elicitations only, not '\(mode.prefix(32))'")))
            return
        }
        guard let message = params["message"]?.stringValue, let schema = params["requestedSchema"], schema.objectValue != nil else {
            answer(.failure(id, RPCError(.invalidParams, "an elicitation needs a message and a requestedSchema object")))
            return
        }
        guard let (key, handler) = elicitationHandlers.last else {
            answer(.failure(id, RPCError(.invalidRequest, "agentrpc asks its user only while one of the server's tool calls runs")))
            return
        }
        let task = Task {
            let result = await Self.elicitationAnswer(handler, message: message, schema: schema)
            answer(.success(id, result))
        }
        elicitationTasks[key, default: []].append(task)
    }

    /// The user's answer, or `cancel` when none came (the call ended, the wait
    /// ran out, the client failed): the server always hears back.
    private static func elicitationAnswer(_ handler: ElicitationHandler, message: String, schema: JSONValue) async -> JSONValue {
        do {
            return try await handler(message, schema)
        } catch {
            return ["action": "cancel"]
        }
    }

    private func connectionEnded(_ reason: String) {
        guard closedReason == nil else { return }
        closedReason = reason
        let waiters = pending
        pending = [:]
        for (_, w) in waiters { w.resume(throwing: MCPRequestError.gone(reason)) }
        onClosed?(reason)
    }

    /// Why the connection ended, once it has.
    var endedReason: String? { closedReason }

    /// Sends a request and waits up to `timeout` for its answer. Cancelling the
    /// calling task sends `notifications/cancelled` and ends the wait at once.
    /// A request the server refused because it no longer knows our MCP session
    /// (HTTP 404: it did not run) is sent again, once, in a new session.
    func request(
        _ method: String, _ params: JSONValue, timeout: Double, progress: ProgressHandler? = nil, elicitation: ElicitationHandler? = nil
    ) async throws -> JSONValue {
        var object = params.objectValue ?? [:]
        var elicitationKey: Int?
        if let elicitation, elicits {
            let key = nextElicitationKey
            nextElicitationKey += 1
            elicitationHandlers.append((key, elicitation))
            elicitationKey = key
        }
        defer {
            if let key = elicitationKey {
                elicitationHandlers.removeAll { $0.key == key }
                for task in elicitationTasks.removeValue(forKey: key) ?? [] { task.cancel() }
            }
        }
        var meta = object["_meta"]?.objectValue ?? [:]
        var token: String?
        if let progress {
            // Every call carries a progress token; the server's notifications/progress name it.
            let issued = "agentrpc-\(nextProgressToken)"
            nextProgressToken += 1
            meta["progressToken"] = .string(issued)
            progressHandlers[issued] = progress
            token = issued
        }
        defer { if let token { progressHandlers[token] = nil } }
        if modern { meta.merge(modernMeta) { _, ours in ours } }
        if !meta.isEmpty { object["_meta"] = .object(meta) }
        let started = ContinuousClock.now
        var result = try await renewingExchange(method, .object(object), timeout: timeout)
        // A modern server may answer "input required": the request is sent again,
        // as a new request, with the answers and the state it asked to get back.
        var round = 1
        while modern, result["resultType"]?.stringValue == "input_required" {
            guard round < Self.maxInputRounds else {
                throw MCPRequestError.malformed("the server asked for more input \(Self.maxInputRounds) times for one \(method); the request was given up")
            }
            round += 1
            var retry = object
            retry["inputResponses"] = nil
            retry["requestState"] = nil
            if let requests = result["inputRequests"]?.objectValue, !requests.isEmpty {
                retry["inputResponses"] = .object(try await answerInputRequests(requests, elicitation: elicits ? elicitation : nil))
            }
            if let state = result["requestState"] {
                guard case .string = state else { throw MCPRequestError.malformed("the requestState of an input_required answer to \(method) is not a string") }
                retry["requestState"] = state
            }
            let left = timeout - (ContinuousClock.now - started).secondsValue
            guard left > 0 else { throw MCPRequestError.timedOut(method: method, seconds: timeout) }
            result = try await renewingExchange(method, .object(retry), timeout: left)
        }
        if let kind = result["resultType"]?.stringValue, kind != "complete" {
            throw MCPRequestError.malformed("the answer to \(method) has resultType '\(kind.prefix(64))'")
        }
        return result
    }

    /// The answers to a modern server's `inputRequests`, by key: form
    /// elicitations go to the user (one after another) when our client answers
    /// them; anything else was not declared, and ends the request.
    private func answerInputRequests(_ requests: [String: JSONValue], elicitation: ElicitationHandler?) async throws -> [String: JSONValue] {
        var answers: [String: JSONValue] = [:]
        for key in requests.keys.sorted() {
            let request = requests[key] ?? .null
            let params = request["params"] ?? .object([:])
            guard request["method"]?.stringValue == "elicitation/create", let elicitation, (params["mode"]?.stringValue ?? "form") == "form",
                  let message = params["message"]?.stringValue, let schema = params["requestedSchema"], schema.objectValue != nil else {
                let methods = requests.values.map { $0["method"]?.stringValue ?? "?" }
                throw MCPRequestError.malformed(
                    "the server asked for input agentrpc did not declare it can give (\(Set(methods).sorted().joined(separator: ", ").prefix(200)))")
            }
            answers[key] = await Self.elicitationAnswer(elicitation, message: message, schema: schema)
            try Task.checkCancellation()
        }
        return answers
    }

    /// The `_meta` every modern request carries: the version, our capabilities, who we are.
    private var modernMeta: [String: JSONValue] {
        [Self.versionKey: .string(Self.modernVersion), Self.capabilitiesKey: capabilities,
         Self.clientInfoKey: ["name": "agentrpc", "version": .string(Server.version)]]
    }

    /// One request; one that the server refused because it no longer knows our
    /// MCP session (HTTP 404: it did not run) is sent again, once, in a new session.
    private func renewingExchange(_ method: String, _ params: JSONValue, timeout: Double) async throws -> JSONValue {
        let generation = sessionGeneration
        let started = ContinuousClock.now
        do {
            return try await exchange(method, params, timeout: timeout)
        } catch MCPRequestError.sessionExpired(let why) {
            guard method != "initialize" else { throw MCPRequestError.notDelivered(why) }
            do {
                try await renewSession(after: generation, because: why)
            } catch {
                throw MCPRequestError.notDelivered("\(why); a new MCP session could not be started: \(error)")
            }
            let left = timeout - (ContinuousClock.now - started).secondsValue
            guard left > 0 else { throw MCPRequestError.timedOut(method: method, seconds: timeout) }
            do {
                return try await exchange(method, params, timeout: left)
            } catch MCPRequestError.sessionExpired(let again) {
                throw MCPRequestError.notDelivered("\(again), in the new MCP session too")
            }
        }
    }

    /// Starts a new MCP session after the server dropped ours: one renewal for
    /// every request that learned of it (`generation` is the session it was sent in).
    private func renewSession(after generation: Int, because why: String) async throws {
        guard generation == sessionGeneration else { return }
        if let renewing {
            try await renewing.value
            return
        }
        let renewal = Task { try await self.reinitialize(because: why) }
        renewing = renewal
        defer { renewing = nil }
        try await renewal.value
    }

    private func reinitialize(because why: String) async throws {
        transport.resetSession()
        do {
            _ = try await exchangeInitialize()
        } catch {
            // Without a session nothing more can be sent: the runner starts over.
            connectionEnded("\(why); a new MCP session could not be started: \(error)")
            throw error
        }
        sessionGeneration += 1
        sessionsRenewed += 1
        problem("\(why); a new MCP session was started")
        // The new session may list other tools.
        onListChanged?()
    }

    /// One request, one answer (or error); no renewal. No `timeout`: waits as
    /// long as the connection lasts (`subscriptions/listen`).
    private func exchange(_ method: String, _ params: JSONValue, timeout: Double?, notifiesOnTimeout: Bool = true) async throws -> JSONValue {
        if let closedReason { throw MCPRequestError.notDelivered(closedReason) }
        let id = nextID
        nextID += 1
        let message = Message.request(id: .int(id), method: method, params: params).json
        let timeoutTask = timeout.map { timeout in
            Task { [weak self] in
                try? await Task.sleep(for: .clampedSeconds(timeout))
                if Task.isCancelled { return }
                await self?.abandon(
                    id, error: MCPRequestError.timedOut(method: method, seconds: timeout),
                    notifying: notifiesOnTimeout ? "the client stopped waiting after \(timeout) seconds" : nil)
            }
        }
        defer { timeoutTask?.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSONValue, any Error>) in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                pending[id] = continuation
                let transport = self.transport
                Task {
                    do { try await transport.send(message) } catch {
                        await self.abandonLater(id, error: MCPRequestError.notDelivered("cannot send to the server: \(error)"))
                    }
                }
            }
        } onCancel: {
            Task { await self.abandon(id, error: CancellationError(), notifying: Self.cancelledReason) }
        }
    }

    private func abandonLater(_ id: Int, error: any Error) async {
        abandon(id, error: error, notifying: nil)
    }

    /// The reason `notifications/cancelled` gives when the turn's task was cancelled.
    static let cancelledReason = "the turn was cancelled by the client"

    /// Ends the wait for `id` with `error`; with a reason, tells the server why
    /// in a sentence a person can read (it may never answer).
    private func abandon(_ id: Int, error: any Error, notifying reason: String?) {
        guard let waiter = pending.removeValue(forKey: id) else { return }
        waiter.resume(throwing: error)
        transport.abandoned(.int(id))
        // A modern HTTP request is cancelled by closing its stream, which `abandoned` did.
        if let reason, closedReason == nil, !(modern && transport.cancelsByClosingStream) {
            let note = Message.notification(method: "notifications/cancelled", params: ["requestId": .int(id), "reason": .string(reason)]).json
            let transport = self.transport
            Task { try? await transport.send(note) }
        }
    }

    func notify(_ method: String, _ params: JSONValue? = nil) async {
        try? await transport.send(Message.notification(method: method, params: params).json)
    }

    /// Learns which era the server speaks and gets ready to call it: a
    /// `server/discover` naming `modernVersion` first (the specification's probe);
    /// a server that does not answer it as a modern server would (any other
    /// error, or no answer within `probeTimeout`, which includes the time the
    /// server takes to start reading) gets `initialize` and
    /// `notifications/initialized`. Throws when the server speaks no version we do.
    func initialize(probeTimeout: Double) async throws -> String {
        switch try await discover(timeout: probeTimeout) {
        case .modern(let capabilities):
            modern = true
            protocolVersion = Self.modernVersion
            take(capabilities: capabilities)
            listen()
            return Self.modernVersion
        case .legacy:
            return try await exchangeInitialize()
        }
    }

    private enum Era {
        case modern(capabilities: JSONValue)
        case legacy
    }

    /// The probe: its answer says the era. The transport sends it as a modern
    /// request (HTTP: with the version header) and forgets that if the server is legacy.
    private func discover(timeout: Double) async throws -> Era {
        transport.negotiated(protocolVersion: Self.modernVersion)
        let answer: JSONValue
        do {
            answer = try await exchange(
                "server/discover", ["_meta": .object(modernMeta)], timeout: timeout, notifiesOnTimeout: false)
        } catch MCPRequestError.rpc(let code, let message, let data) where code == Self.unsupportedVersionCode {
            // A modern server that does not speak our modern version: initialize is
            // used only if it names one of the older versions we accept.
            let supported = data["supported"]?.arrayValue?.compactMap(\.stringValue) ?? []
            guard supported.contains(where: Self.acceptedVersions.contains) else {
                throw MCPRequestError.malformed(
                    "the server supports protocol versions \(supported.prefix(8).map { "'\($0.prefix(32))'" }.joined(separator: ", ")) (\(message.prefix(200))); agentrpc speaks \(([Self.modernVersion] + Self.acceptedVersions.sorted(by: >)).joined(separator: ", "))")
            }
            transport.resetSession()
            return .legacy
        } catch MCPRequestError.rpc, MCPRequestError.timedOut, MCPRequestError.malformed, MCPRequestError.tooLarge {
            // A legacy server: it refused the unknown method before initialize, or said nothing.
            transport.resetSession()
            return .legacy
        }
        let versions = answer["supportedVersions"]?.arrayValue?.compactMap(\.stringValue)
        guard let versions, versions.contains(Self.modernVersion), let capabilities = answer["capabilities"], capabilities.objectValue != nil else {
            // Not a discovery answer naming our version (a server that answers anything
            // with an empty result, or names only older versions): the handshake decides.
            transport.resetSession()
            return .legacy
        }
        return .modern(capabilities: capabilities)
    }

    private func take(capabilities: JSONValue) {
        offersResources = capabilities["resources"]?.objectValue != nil
        offersPrompts = capabilities["prompts"]?.objectValue != nil
    }

    /// A modern server sends `notifications/tools/list_changed` only on a
    /// `subscriptions/listen` stream: opened once the era is known, held as long
    /// as the connection (a request with no deadline; closing the connection
    /// ends it). Asked of every modern server: `listChanged` in its discovery
    /// answer is not always set by servers that send the notification.
    private func listen() {
        Task {
            let params: JSONValue = ["_meta": .object(self.modernMeta), "notifications": ["toolsListChanged": true, "promptsListChanged": true]]
            var backoff = Self.listenBackoffSeconds
            while self.closedReason == nil {
                do {
                    _ = try await self.exchange("subscriptions/listen", params, timeout: nil, notifiesOnTimeout: false)
                    // The server ended it gracefully (it is shutting down): not asked again.
                    self.problem("the server closed its subscriptions/listen stream; tool list changes are not heard any more")
                    return
                } catch MCPRequestError.rpc(let code, _, _) where code == ErrorCode.methodNotFound.rawValue {
                    // A server with no subscriptions (fastmcp): its list never changes under us.
                    self.logger.debug("mcp \(self.serverName): no subscriptions/listen; tool list changes are not heard")
                    return
                } catch MCPRequestError.gone, MCPRequestError.notDelivered {
                    return
                } catch {
                    // The stream broke (HTTP: the server restarted): opened again after a
                    // pause; once acknowledged, the tools are listed again (a change may have
                    // been missed meanwhile).
                    self.logger.debug("mcp \(self.serverName): subscriptions/listen ended (\(error)); opened again in \(backoff) s")
                    self.relistOnAcknowledgement = true
                }
                try? await Task.sleep(for: .clampedSeconds(backoff))
                backoff = min(backoff * 2, Self.maxListenBackoffSeconds)
            }
        }
    }

    /// A `subscriptions/listen` broke and is opened again: its acknowledgement re-lists.
    private var relistOnAcknowledgement = false

    /// The pause before a broken `subscriptions/listen` is opened again; it doubles up to the max.
    static let listenBackoffSeconds: Double = 0.5
    static let maxListenBackoffSeconds: Double = 30

    private func exchangeInitialize() async throws -> String {
        let result = try await exchange("initialize", [
            "protocolVersion": .string(Self.offeredVersion),
            "capabilities": capabilities,
            "clientInfo": ["name": "agentrpc", "version": .string(Server.version)],
        ], timeout: MCPBounds.requestTimeoutSeconds)
        guard let version = result["protocolVersion"]?.stringValue else {
            throw MCPRequestError.malformed("the answer to initialize has no protocolVersion")
        }
        guard Self.acceptedVersions.contains(version) else {
            throw MCPRequestError.malformed(
                "the server answered protocol version '\(version.prefix(64))'; agentrpc offered \(Self.offeredVersion) and accepts \(Self.acceptedVersions.sorted().joined(separator: ", "))")
        }
        protocolVersion = version
        take(capabilities: result["capabilities"] ?? .object([:]))
        transport.negotiated(protocolVersion: version)
        await notify("notifications/initialized")
        transport.initialized()
        return version
    }

    /// Whether the server has something to read: it declared `resources` and the
    /// first page of `resources/list`, else of `resources/templates/list`, is not
    /// empty (many servers declare the capability and have none).
    func hasResources() async -> Bool {
        guard offersResources else { return false }
        for (method, key) in [("resources/list", "resources"), ("resources/templates/list", "resourceTemplates")] {
            let page = try? await request(method, .object([:]), timeout: MCPBounds.requestTimeoutSeconds)
            if let list = page?[key]?.arrayValue, !list.isEmpty { return true }
        }
        return false
    }

    /// The pages of `prompts/list` (bounded as `tools/list` is); none when the
    /// server declared no `prompts` or the listing failed (a note says why).
    func listPrompts() async -> (prompts: [MCPPromptInfo], notes: [String]) {
        guard offersPrompts else { return ([], []) }
        var prompts: [MCPPromptInfo] = []
        var cursor: String?
        var seenCursors: Set<String> = []
        for _ in 0..<MCPBounds.maxToolPages {
            let params: JSONValue = cursor.map { ["cursor": .string($0)] } ?? .object([:])
            let page: JSONValue
            do {
                page = try await request("prompts/list", params, timeout: MCPBounds.requestTimeoutSeconds)
            } catch {
                return (prompts, ["prompts/list failed: \(error)"])
            }
            for item in page["prompts"]?.arrayValue ?? [] {
                guard prompts.count < MCPBounds.maxToolsPerServer, let name = item["name"]?.stringValue, !name.isEmpty else { continue }
                let arguments = item["arguments"]?.arrayValue?.compactMap { a -> MCPPromptArgument? in
                    guard let n = a["name"]?.stringValue else { return nil }
                    return MCPPromptArgument(name: n, description: a["description"]?.stringValue, required: a["required"]?.boolValue)
                }
                prompts.append(MCPPromptInfo(
                    name: name, title: item["title"]?.stringValue, description: item["description"]?.stringValue,
                    arguments: arguments?.isEmpty == false ? arguments : nil))
            }
            cursor = page["nextCursor"]?.stringValue
            guard let c = cursor, seenCursors.insert(c).inserted else { break }
        }
        return (prompts, [])
    }

    /// Every page of `tools/list`, bounded in pages and tools; `notes` says what was left out.
    func listTools() async throws -> (tools: [MCPTool], notes: [String]) {
        var tools: [MCPTool] = []
        var notes: [String] = []
        var cursor: String? = nil
        var seenCursors: Set<String> = []
        var names: Set<String> = []
        var pages = 0
        // Streamable HTTP at 2026-07-28: arguments a tool marks `x-mcp-header` go in headers too.
        let mirrors = modern && transport.mirrorsParamHeaders
        var paramHeaders: [String: [MCPParamHeader]] = [:]
        repeat {
            if pages == MCPBounds.maxToolPages {
                notes.append("tools/list had more than \(MCPBounds.maxToolPages) pages; the rest were not read")
                break
            }
            pages += 1
            let params: JSONValue = cursor.map { ["cursor": .string($0)] } ?? .object([:])
            let page = try await request("tools/list", params, timeout: MCPBounds.requestTimeoutSeconds)
            guard let list = page["tools"]?.arrayValue else { throw MCPRequestError.malformed("the answer to tools/list has no tools array") }
            for item in list {
                guard tools.count < MCPBounds.maxToolsPerServer else { break }
                guard let name = item["name"]?.stringValue, !name.isEmpty else {
                    notes.append("a tool without a name was left out")
                    continue
                }
                guard names.insert(name).inserted else { continue }
                let annotations = item["annotations"]
                let schema = item["inputSchema"] ?? ["type": "object"]
                if mirrors {
                    do throws(MCPParamHeader.Invalid) {
                        let headers = try MCPParamHeader.annotations(of: schema)
                        if !headers.isEmpty { paramHeaders[name] = headers }
                    } catch {
                        // The specification's rule: such a tool is not offered, the others are.
                        notes.append("the tool '\(name.prefix(128))' was left out: \(error)")
                        continue
                    }
                }
                var problem: JSONSchemaError?
                do { _ = try JSONSchemaValidator(schema: schema) } catch { problem = error }
                tools.append(MCPTool(
                    name: name, title: item["title"]?.stringValue, description: item["description"]?.stringValue,
                    inputSchema: schema,
                    readOnlyHint: annotations?["readOnlyHint"]?.boolValue, destructiveHint: annotations?["destructiveHint"]?.boolValue,
                    idempotentHint: annotations?["idempotentHint"]?.boolValue, schemaProblem: problem))
            }
            if tools.count >= MCPBounds.maxToolsPerServer {
                notes.append("the server lists more than \(MCPBounds.maxToolsPerServer) tools; the first \(MCPBounds.maxToolsPerServer) are used")
                break
            }
            cursor = page["nextCursor"]?.stringValue
            if let c = cursor, !seenCursors.insert(c).inserted {
                notes.append("tools/list repeated a cursor; listing stopped there")
                break
            }
        } while cursor != nil
        if mirrors { transport.mirror(paramHeaders: paramHeaders) }
        return (tools, notes)
    }

    /// Ends the connection: the transport stops the server.
    func close(reason: String) async {
        connectionEnded(reason)
        await transport.close()
    }
}
