import AgentRPCProtocol
import Synchronization

/// Reads inbound messages in arrival order and runs each handler's ordered part
/// before looking at the next message, so a request always sees the effects of
/// the requests before it (a `getState` after a `send` sees the turn running).
/// Long work (`Reply.later`) continues in its own task, tracked by request id
/// for `$/cancelRequest`.
final class Dispatcher: Sendable {
    let connection: Connection
    let logger: Logger
    private let table: Mutex<MethodTable?> = Mutex(nil)
    private let inFlight = Mutex<[RequestID: Task<Void, Never>]>([:])
    private let maxInFlight: Int
    /// Gatekeeper for lifecycle rules (initialize first, etc.); nil = allow.
    private let admit: @Sendable (String) -> RPCError?
    /// Set by `exit`: nothing read after it is run or answered.
    private let stopped = Mutex<Bool>(false)

    init(connection: Connection, logger: Logger, maxInFlight: Int = 4096, admit: @escaping @Sendable (String) -> RPCError?) {
        self.connection = connection
        self.logger = logger
        self.maxInFlight = maxInFlight
        self.admit = admit
    }

    func install(_ table: MethodTable) { self.table.withLock { $0 = table } }

    /// Notifications the dispatcher handles itself, before the table.
    static let builtInNotifications = [CancelRequestNotification.name]

    /// What is served: the table's requests, and its notifications with the built-in ones.
    var servedMethods: (requests: [String], notifications: [String]) {
        let table = self.table.withLock { $0 }
        return (table?.methodNames ?? [], (table?.notificationNames ?? []) + Self.builtInNotifications)
    }

    /// Methods the table was given two handlers for (`MethodTable.registeredTwice`).
    var methodsRegisteredTwice: [String] { table.withLock { $0 }?.registeredTwice ?? [] }

    /// Stops dispatching: messages after the current one are neither run nor
    /// answered (`exit`, docs/protocol.md §2). Returns at once.
    func stop() { stopped.withLock { $0 = true } }

    private var isStopped: Bool { stopped.withLock { $0 } }

    /// Runs until end of input or `stop()`.
    func run() async {
        for await item in connection.inbound {
            if isStopped { return }
            switch item {
            case .oversized(let count, let id):
                connection.send(.failure(id, RPCError(
                    code: .invalidRequest, kind: .messageTooLarge,
                    message: "message of \(count) bytes exceeds the limit of \(connection.maxMessageBytes) bytes",
                    data: ["limit": .int(connection.maxMessageBytes), "size": .int(count)])))
            case .malformedHeader(let why):
                connection.send(.failure(nil, RPCError(.parseError, "malformed header: \(why)")))
            case .desynchronized(let why, let id):
                // The frame was not run: its bytes cannot be trusted to be what was meant.
                connection.send(.failure(id, RPCError(.parseError, "\(why); the frame was not run")))
            case .frame(.emptyBatch):
                connection.send(.failure(nil, RPCError(.invalidRequest, "an empty batch is not a valid request")))
            case .frame(.single(let decoded)):
                if let answer = await dispatch(decoded, inBatch: false) {
                    switch answer {
                    case .immediate(let message): connection.send(message)
                    case .eventual: break
                    }
                }
            case .frame(.batch(let items)):
                await dispatchBatch(items)
            }
        }
    }

    /// Cancels every request still running (end of input, shutdown).
    func cancelAll() {
        let tasks = inFlight.withLock { Array($0.values) }
        for t in tasks { t.cancel() }
    }

    /// Waits until no request task is running, at most `timeoutSeconds`.
    func waitForIdle(timeoutSeconds: Double) async {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .clampedSeconds(timeoutSeconds))
        while clock.now < deadline {
            let tasks = inFlight.withLock { Array($0.values) }
            if tasks.isEmpty { return }
            // Wait on the tasks themselves rather than polling a flag.
            await withTaskGroup(of: Void.self) { group in
                group.addTask { for t in tasks { await t.value } }
                group.addTask { try? await Task.sleep(until: deadline) }
                await group.next()
                group.cancelAll()
            }
        }
    }

    private enum Answer {
        case immediate(Message)
        /// A task was started; it sends the answer itself (or fills the batch slot).
        case eventual(Task<Message?, Never>)
    }

    private func dispatchBatch(_ items: [DecodedMessage]) async {
        var answers: [Answer] = []
        for item in items {
            // An `exit` inside a batch ends it: later members are not run.
            if isStopped { break }
            if let a = await dispatch(item, inBatch: true) { answers.append(a) }
        }
        guard !answers.isEmpty else { return }
        var hasEventual = false
        for a in answers { if case .eventual = a { hasEventual = true } }
        if !hasEventual {
            connection.sendBatch(answers.compactMap { if case .immediate(let m) = $0 { return m } else { return nil } })
            return
        }
        // Deferred members: answer the batch once all have finished.
        let conn = connection
        let collected = answers.map { a -> Task<Message?, Never> in
            switch a {
            case .immediate(let m): return Task { m }
            case .eventual(let t): return t
            }
        }
        Task {
            var messages: [Message] = []
            for t in collected { if let m = await t.value { messages.append(m) } }
            if !messages.isEmpty { conn.sendBatch(messages) }
        }
    }

    /// Handles one decoded message; returns what to answer, or nil for none.
    private func dispatch(_ decoded: DecodedMessage, inBatch: Bool) async -> Answer? {
        switch decoded {
        case .invalid(let id, let error):
            return .immediate(.failure(id, error))
        case .message(.response(let id, _)):
            // Answers to our requests are settled by the reader; one that reaches
            // here arrived inside a batch with requests and was already settled.
            logger.debug("unexpected response \(String(describing: id))")
            return nil
        case .message(.notification(let method, let params)):
            await handleNotification(method, params)
            return nil
        case .message(.request(let id, let method, let params)):
            return await handleRequest(id: id, method: method, params: params, inBatch: inBatch)
        }
    }

    private func handleNotification(_ method: String, _ params: JSONValue?) async {
        if method == CancelRequestNotification.name {
            guard let raw = params?["id"], let id = RequestID(json: raw) else { return }
            let task = inFlight.withLock { $0[id] }
            if let task {
                logger.debug("cancelling request \(id) at the client's request")
                task.cancel()
            }
            return
        }
        if admit(method) != nil { return }
        guard let handler = table.withLock({ $0 })?.notificationHandler(for: method) else {
            logger.debug("ignoring unknown notification \(method)")
            return
        }
        await handler(params)
    }

    private func handleRequest(id: RequestID, method: String, params: JSONValue?, inBatch: Bool) async -> Answer {
        if let refusal = admit(method) { return .immediate(.failure(id, refusal)) }
        guard let handler = table.withLock({ $0 })?.handler(for: method) else {
            return .immediate(.failure(id, .methodNotFound(method)))
        }
        if inFlight.withLock({ $0[id] != nil }) {
            return .immediate(.failure(id, RPCError(.invalidRequest, "request id \(id) is already in use by a running request")))
        }
        // Refuse before the handler runs: a refused request must have started nothing.
        if inFlight.withLock({ $0.count }) >= maxInFlight {
            return .immediate(.failure(id, RPCError(.overloaded, "too many requests in flight; retry later")))
        }
        let context = RequestContext(requestID: id, method: method)
        let reply: Reply<JSONValue>
        do {
            reply = try await handler(params, context)
        } catch {
            return .immediate(.failure(id, Self.rpcError(from: error, method: method, logger: logger)))
        }
        switch reply {
        case .now(let value):
            return .immediate(.success(id, value))
        case .later(let work):
            let logger = self.logger
            let task = Task<Message?, Never> {
                do {
                    return .success(id, try await work())
                } catch {
                    return .failure(id, Self.rpcError(from: error, method: method, logger: logger))
                }
            }
            inFlight.withLock { $0[id] = CancelForwarder.make(task) }
            // Removal is ordered after the insert above, so no entry can leak.
            let conn = connection
            Task { [weak self] in
                let message = await task.value
                // Queue the answer and retire the id in one step: `waitForIdle` (before
                // the final flush at exit) must never see the request gone while its
                // answer is not yet queued, or the answer could be lost.
                guard let self else {
                    if !inBatch, let message { conn.send(message) }
                    return
                }
                self.inFlight.withLock { map in
                    map.removeValue(forKey: id)
                    if !inBatch, let message { conn.send(message) }
                }
                self.logger.debug("answered \(method) \(id)")
            }
            return .eventual(task)
        }
    }

    static func rpcError(from error: any Error, method: String, logger: Logger) -> RPCError {
        if let rpc = error as? RPCError { return rpc }
        if error is CancellationError { return .cancelled() }
        logger.error("\(method) failed unexpectedly: \(error)")
        return .internalError("\(method) failed: \(error)")
    }
}

/// Wraps a result-producing task in a `Task<Void, Never>` whose cancellation
/// reaches the original, so the in-flight map can hold tasks of any result type.
enum CancelForwarder {
    static func make<T: Sendable>(_ task: Task<T, Never>) -> Task<Void, Never> {
        Task {
            await withTaskCancellationHandler {
                _ = await task.value
            } onCancel: {
                task.cancel()
            }
        }
    }
}
