import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// What the reader delivers to the dispatcher, in arrival order.
package enum InboundItem: Sendable {
    case frame(IncomingFrame)
    /// A frame over the size limit was skipped; answer `messageTooLarge`.
    case oversized(byteCount: Int, id: RequestID?)
    /// An LSP header block that could not be read; answer `parseError`.
    case malformedHeader(String)
    /// A frame whose `Content-Length` did not match its body; answer `parseError`.
    case desynchronized(reason: String, id: RequestID?)
}

/// Why a request the server sent to the client did not produce a result.
package enum OutgoingRequestError: Error, Sendable, Equatable {
    /// The client answered with a JSON-RPC error.
    case rpc(RPCError)
    /// No answer within the timeout (the request was withdrawn).
    case timedOut(seconds: Double)
    /// The connection is gone.
    case disconnected
}

/// One JSON-RPC connection over a pair of file descriptors (stdin/stdout).
///
/// A reader thread blocks in `read(2)` — no polling — and feeds the incremental
/// `FrameParser`; a writer thread batches frames so callers never block on a
/// slow peer. Answers to the server's own requests are matched by id on the
/// reader thread, so they are never stuck behind other work.
package final class Connection: Sendable {
    package let maxMessageBytes: Int
    let logger: Logger
    private let inputFD: Int32
    /// The reader thread closes `inputFD` when it ends, and the writer thread the
    /// output (`ownsDescriptors`).
    private let closesInput: Bool
    private let writer: ByteSinkThread
    private let framing: Mutex<Framing?>
    /// `framing` is `.contentLength`: kept beside it for the question every
    /// streamed delta asks (`writesNotificationFrames`), without the lock.
    private let framedWithHeaders: Atomic<Bool>
    private let pending = Mutex<[RequestID: PendingRequest]>([:])
    private let nextOutgoingID = Mutex<Int>(1)
    /// Once stdin is closed no answer can arrive, so new requests fail at once.
    private let inputClosed = Mutex<Bool>(false)
    private let recorder: (any ConnectionRecorder)?
    /// `recorder != nil`, asked at every event without opening the existential.
    private let records: Bool
    /// The notification that withdraws a request of ours (`$/cancelRequest`;
    /// the Agent Client Protocol spells it `$/cancel_request`).
    private let cancelRequestMethod: String
    /// Timeouts of outstanding server→client requests.
    private let deadlines: RequestDeadlines
    /// Inbound items in arrival order; finishes at end of input.
    package let inbound: AsyncStream<InboundItem>
    private let inboundContinuation: AsyncStream<InboundItem>.Continuation
    /// Called on the reader thread the moment input ends, before anything else
    /// is done about it: the exit watchdog starts there, on a thread no task or
    /// lock of the exit path can hold up.
    private let endOfInput: (@Sendable () -> Void)?
    /// Notifications handled on the reader thread, in order with the answers to
    /// our requests (which are settled there too): a report the client sent
    /// before its answer must be seen before the answer.
    private let inOrderNotifications = Mutex<[String: @Sendable (JSONValue?) -> Void]>([:])

    private struct PendingRequest: Sendable {
        var continuation: CheckedContinuation<JSONValue, any Error>
        var method: String
    }

    package init(
        inputFD: Int32 = 0, outputFD: Int32 = 1, maxMessageBytes: Int, logger: Logger, framing: Framing? = nil,
        recorder: (any ConnectionRecorder)? = nil, outputQueueBytes: Int = Connection.defaultOutputQueueBytes,
        cancelRequestMethod: String = "$/cancelRequest", endOfInput: (@Sendable () -> Void)? = nil, killSwitch: TestKillSwitch? = nil,
        ownsDescriptors: Bool = false
    ) throws(OSThread.StartError) {
        self.inputFD = inputFD
        self.closesInput = ownsDescriptors
        self.endOfInput = endOfInput
        self.cancelRequestMethod = cancelRequestMethod
        self.maxMessageBytes = maxMessageBytes
        self.logger = logger
        self.framing = Mutex(framing)
        self.framedWithHeaders = Atomic(framing == .contentLength)
        self.recorder = recorder
        self.records = recorder != nil
        // The watcher of the requests' deadlines starts with the connection, like
        // the writer: a request must never go out without its bound.
        let deadlines = RequestDeadlines()
        try deadlines.start()
        self.deadlines = deadlines
        do {
            self.writer = try ByteSinkThread(
                fileDescriptor: outputFD, name: "agentrpc.stdout", maxQueuedBytes: nil, backPressureBytes: outputQueueBytes, killSwitch: killSwitch,
                closesDescriptor: ownsDescriptors)
        } catch {
            deadlines.stop()
            throw error
        }
        (inbound, inboundContinuation) = AsyncStream.makeStream(of: InboundItem.self, bufferingPolicy: .unbounded)
    }

    deinit { deadlines.stop() }

    /// Handles `method` on the reader thread instead of the dispatcher, in order
    /// with the answers to our own requests. `body` must not block: it runs
    /// before the next frame is read.
    package func handleInOrder(_ method: String, _ body: @escaping @Sendable (JSONValue?) -> Void) {
        inOrderNotifications.withLock { $0[method] = body }
    }

    /// Starts the reader thread. Call once. Throws when the system refuses it: a
    /// connection that cannot read must not be served at all.
    package func start() throws(OSThread.StartError) {
        try OSThread.start(name: "agentrpc.stdin", stackSize: Self.readerStackBytes) { [self] in self.readLoop() }
    }

    /// The reader runs a turn's continuation after an answer (`TurnExecutor`):
    /// it gets the stack a pool thread has (8 MiB, reserved, not resident).
    static let readerStackBytes = 8 << 20

    // MARK: Reading

    private func readLoop() {
        var parser = FrameParser(maxMessageBytes: maxMessageBytes, framing: framing.withLock { $0 })
        // Not zeroed first: each of its 16 pages is made resident by the first read
        // that fills it, not all at start (a page fault each, on the first answer's path).
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 64 * 1024)
        defer { buffer.deallocate() }
        while true {
            let n = read(inputFD, buffer.baseAddress, buffer.count)
            if n < 0 {
                if errno == EINTR { continue }
                logger.warning("stdin read failed: errno \(errno)")
                break
            }
            if n == 0 { break }
            parser.append(UnsafeBufferPointer(rebasing: buffer[0..<n]))
            while let event = parser.next() { handle(event, parser: parser) }
        }
        endOfInput?()
        while let event = parser.finish() { handle(event, parser: parser) }
        logger.debug("stdin closed")
        inputClosed.withLock { $0 = true }
        recorder?.inputClosed()
        // Settle our own requests before the dispatcher learns of the end, so the
        // shutdown that follows finds nothing to withdraw: the output is the same
        // on every run (no `$/cancelRequest` racing the end of input).
        failAllPending(.disconnected)
        inboundContinuation.finish()
        // Only now: closed by its owner while this thread is between two reads,
        // the number could name another pipe by the next one, whose bytes this
        // reader would take (seen in tests: an answer read by a finished
        // connection, the request it answered timing out).
        if closesInput { closeDescriptor(inputFD) }
    }

    private func handle(_ event: FrameEvent, parser: FrameParser) {
        if let detected = parser.framing {
            let isNew = framing.withLock { current -> Bool in
                if current == nil {
                    current = detected
                    framedWithHeaders.store(detected == .contentLength, ordering: .releasing)
                    return true
                }
                return false
            }
            if isNew { recorder?.framingDetected(detected) }
        }
        switch event {
        case .frame(let bytes):
            logger.trace("<- \(String(decoding: bytes.prefix(2000), as: UTF8.self))")
            let frame = Message.decodeFrame(bytes)
            recorder?.clientSent(frame: frame, raw: bytes)
            // Answers to our own requests are settled here, off the dispatch queue.
            switch frame {
            case .single(.message(.response(let id, let result))):
                settle(id: id, result: result)
            case .single(.message(.notification(let method, let params))):
                if let body = inOrderNotifications.withLock({ $0[method] }) { body(params) } else { inboundContinuation.yield(.frame(frame)) }
            case .batch(let items):
                var rest: [DecodedMessage] = []
                for item in items {
                    if case .message(.response(let id, let result)) = item {
                        settle(id: id, result: result)
                    } else if case .message(.notification(let method, let params)) = item,
                              let body = inOrderNotifications.withLock({ $0[method] }) {
                        body(params)
                    } else {
                        rest.append(item)
                    }
                }
                if !rest.isEmpty { inboundContinuation.yield(.frame(.batch(rest))) }
            default:
                inboundContinuation.yield(.frame(frame))
            }
        case .oversized(let count, let id):
            logger.warning("skipped a frame of \(count) bytes (limit \(maxMessageBytes))")
            inboundContinuation.yield(.oversized(byteCount: count, id: id))
        case .malformedHeader(let why):
            logger.warning("malformed input: \(why)")
            inboundContinuation.yield(.malformedHeader(why))
        case .desynchronized(let why, let id):
            logger.warning("framing out of step: \(why)")
            inboundContinuation.yield(.desynchronized(reason: why, id: id))
        }
    }

    private func settle(id: RequestID?, result: Result<JSONValue, RPCError>) {
        guard let id else {
            logger.warning("client sent an error with id null: \(result)")
            return
        }
        guard let entry = pending.withLock({ $0.removeValue(forKey: id) }) else {
            logger.debug("answer for unknown or withdrawn request \(id)")
            return
        }
        deadlines.remove(id)
        // A turn's continuation runs right here (`TurnExecutor`), no thread woken for it.
        Self.resumingHere {
            switch result {
            case .success(let value): entry.continuation.resume(returning: value)
            case .failure(let error): entry.continuation.resume(throwing: OutgoingRequestError.rpc(error))
            }
        }
    }

    private static func resumingHere(_ resume: () -> Void) {
        if #available(macOS 15.0, *) { TurnExecutor.runningAnswers(resume) } else { resume() }
    }

    private func failAllPending(_ error: OutgoingRequestError) {
        let all = pending.withLock { p -> [PendingRequest] in
            let values = Array(p.values)
            p.removeAll()
            return values
        }
        deadlines.removeAll()
        for entry in all { entry.continuation.resume(throwing: error) }
    }

    // MARK: Writing

    /// The framing answers go out in: the client's, once known.
    var outputFraming: Framing { framing.withLock { $0 } ?? .newline }

    /// Queues one message. Never blocks on the peer.
    package func send(_ message: Message) {
        // A successful answer (every request's) has its envelope written directly,
        // in the sorted-key order `Message.json` serializes to, without its dictionary.
        guard case .response(let id?, .success(let result)) = message else {
            return sendSerialized(message.json.serialized(), message: message)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        bytes.append(contentsOf: #"{"id":"#.utf8)
        id.json.serialize(into: &bytes)
        bytes.append(contentsOf: #","jsonrpc":"2.0","result":"#.utf8)
        result.serialize(into: &bytes)
        bytes.append(UInt8(ascii: "}"))
        sendSerialized(bytes, message: message)
    }

    /// Queues several messages as one write (a batch answer is a JSON array).
    func sendBatch(_ messages: [Message]) {
        let array = JSONValue.array(messages.map(\.json))
        let bytes = array.serialized()
        recorder?.serverSent(array)
        logger.trace("-> \(String(decoding: bytes.prefix(2000), as: UTF8.self))")
        enqueueFramed(bytes)
    }

    private func sendSerialized(_ bytes: [UInt8], message: Message) {
        recorder?.serverSent(message.json)
        if logger.level >= .trace { logger.trace("-> \(String(decoding: bytes.prefix(2000), as: UTF8.self))") }
        enqueueFramed(bytes)
    }

    private func enqueueFramed(_ body: [UInt8]) {
        let framing = outputFraming
        writer.enqueue(byteCount: body.count + 1) { framing.frame(body, into: &$0) }
    }

    /// Sends a notification whose params are already built (the event hot path).
    package func notify(_ method: String, _ params: JSONValue) {
        // The envelope is written directly, in the sorted-key order `Message.json`
        // serializes to, sparing a dictionary and a sort per event.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(192)
        Self.appendNotificationHead(method, into: &bytes)
        params.serialize(into: &bytes)
        bytes.append(UInt8(ascii: "}"))
        sendSerialized(bytes, message: .notification(method: method, params: params))
    }

    /// Sends a notification whose params `write` appends as JSON text (the
    /// delta hot path): with newline framing, written straight into the output
    /// queue under its lock, no `JSONValue` and no intermediate buffer. `params`
    /// is the same params as a value, used instead when a recorder or the
    /// trace log must see the message, or a header must count its bytes first.
    package func notify(_ method: String, writingParams write: (inout [UInt8]) -> Void, params: () -> JSONValue) {
        guard writesNotificationFrames else { return notify(method, params()) }
        // The stdout queue has no byte limit (`maxQueuedBytes` nil), so the size need not be known up front.
        writer.enqueue(byteCount: 0) { Self.frameNotification(method, writingParams: write, into: &$0) }
    }

    /// A newline-framed notification whose params `write` appends.
    private static func frameNotification(_ method: String, writingParams write: (inout [UInt8]) -> Void, into queue: inout [UInt8]) {
        appendNotificationHead(method, into: &queue)
        write(&queue)
        queue.append(contentsOf: notificationFrameEnd)
    }

    /// What closes a notification's envelope after its params and ends its line.
    private static let notificationFrameEnd: [UInt8] = [UInt8(ascii: "}"), 0x0A]

    /// Whether notifications are written as bytes (`notify(_:writingParams:params:)`,
    /// whole frames): no recorder and no trace log must see them as values,
    /// and the client's framing is newline-delimited JSON (the framing, once
    /// detected, never changes).
    package var writesNotificationFrames: Bool { !records && logger.level < .trace && !framedWithHeaders.load(ordering: .acquiring) }

    /// A newline-framed notification of `method` around its params, for a
    /// caller that writes whole frames (`enqueueNotificationFrameUnlessBehind`).
    package static func notificationFrame(_ method: String) -> (head: [UInt8], end: [UInt8]) {
        var head: [UInt8] = []
        appendNotificationHead(method, into: &head)
        return (head, notificationFrameEnd)
    }

    /// Queues one whole notification frame, made with `notificationFrame`,
    /// unless the client is behind (`isBehind`): then nothing is queued and
    /// this returns false. Only while `writesNotificationFrames`.
    package func enqueueNotificationFrameUnlessBehind(_ frame: UnsafeBufferPointer<UInt8>) -> Bool {
        writer.enqueueUnlessBehind { $0.append(contentsOf: frame) }
    }

    /// Queues one whole notification frame, made with `notificationFrame`.
    /// Only while `writesNotificationFrames`.
    package func enqueueNotificationFrame(_ frame: UnsafeBufferPointer<UInt8>) {
        writer.enqueue(byteCount: frame.count) { $0.append(contentsOf: frame) }
    }

    /// `notify(_:writingParams:params:)` unless the client is behind
    /// (`isBehind`): then nothing is sent and this returns false. A streamed
    /// delta asks and is queued under one lock.
    package func notifyUnlessBehind(_ method: String, writingParams write: (inout [UInt8]) -> Void, params: () -> JSONValue) -> Bool {
        guard writesNotificationFrames else {
            if isBehind { return false }
            notify(method, params())
            return true
        }
        return writer.enqueueUnlessBehind { Self.frameNotification(method, writingParams: write, into: &$0) }
    }

    /// Queues a request of ours (one per tool call), its envelope written
    /// directly in the sorted-key order `Message.json` serializes to.
    private func sendRequest(id: RequestID, method: String, params: JSONValue) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        Self.appendRequestHead(id: id, method: method, into: &bytes)
        params.serialize(into: &bytes)
        bytes.append(UInt8(ascii: "}"))
        sendSerialized(bytes, message: .request(id: id, method: method, params: params))
    }

    /// `{"id":ID,"jsonrpc":"2.0","method":METHOD,"params":` — a request's
    /// envelope up to its params, in the sorted-key order `Message.json` serializes to.
    private static func appendRequestHead(id: RequestID, method: String, into bytes: inout [UInt8]) {
        bytes.append(contentsOf: #"{"id":"#.utf8)
        id.json.serialize(into: &bytes)
        bytes.append(contentsOf: #","jsonrpc":"2.0","method":"#.utf8)
        JSONValue.string(method).serialize(into: &bytes)
        bytes.append(contentsOf: #","params":"#.utf8)
    }

    /// `{"jsonrpc":"2.0","method":METHOD,"params":` — the envelope up to its
    /// params, in the sorted-key order `Message.json` serializes to.
    private static func appendNotificationHead(_ method: String, into bytes: inout [UInt8]) {
        // Nearly every notification is an event: its head is made once.
        if method == SessionEventNotification.name { return bytes.append(contentsOf: sessionEventHead) }
        writeNotificationHead(method, into: &bytes)
    }

    private static let sessionEventHead: [UInt8] = {
        var bytes: [UInt8] = []
        writeNotificationHead(SessionEventNotification.name, into: &bytes)
        return bytes
    }()

    private static func writeNotificationHead(_ method: String, into bytes: inout [UInt8]) {
        bytes.append(contentsOf: #"{"jsonrpc":"2.0","method":"#.utf8)
        JSONValue.string(method).serialize(into: &bytes)
        bytes.append(contentsOf: #","params":"#.utf8)
    }

    /// Sends a request to the client and waits for its answer, at most `timeout`
    /// seconds. Cancelling the calling task withdraws the request with
    /// `$/cancelRequest` and throws `CancellationError`.
    package func request(_ method: String, _ params: JSONValue, timeout: Double) async throws -> JSONValue {
        try await request(method, timeout: timeout) { id in self.sendRequest(id: id, method: method, params: params) }
    }

    /// `request` with params that `write` appends as JSON text (a `tool/call`
    /// per tool call): with no recorder and no trace log, the envelope is
    /// written around them, and no `JSONValue` of them is made. `params`
    /// is the same params as a value, for a recorder or the trace log.
    nonisolated(nonsending) package func request(
        _ method: String, writingParams write: (inout [UInt8]) -> Void, params: () -> JSONValue, timeout: Double
    ) async throws -> JSONValue {
        try await request(method, timeout: timeout) { id in
            guard self.recorder == nil, self.logger.level < .trace else { return self.sendRequest(id: id, method: method, params: params()) }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(256)
            Self.appendRequestHead(id: id, method: method, into: &bytes)
            write(&bytes)
            bytes.append(UInt8(ascii: "}"))
            self.enqueueFramed(bytes)
        }
    }

    /// Registers a request and has `send` queue it, under the request's id.
    nonisolated(nonsending) private func request(_ method: String, timeout: Double, send: (RequestID) -> Void) async throws -> JSONValue {
        let id = RequestID.int(nextOutgoingID.withLock { id in
            defer { id &+= 1 }
            return id
        })
        if writer.isBroken || inputClosed.withLock({ $0 }) { throw OutgoingRequestError.disconnected }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSONValue, any Error>) in
                let inserted = pending.withLock { p -> Bool in
                    // The task may already be cancelled, or input closed meanwhile; then don't send at all.
                    if Task.isCancelled || inputClosed.withLock({ $0 }) { return false }
                    p[id] = PendingRequest(continuation: continuation, method: method)
                    return true
                }
                guard inserted else {
                    continuation.resume(throwing: Task.isCancelled ? CancellationError() as any Error : OutgoingRequestError.disconnected)
                    return
                }
                // Queued before its deadline is armed: a deadline that fires at
                // once (a zero timeout on a busy machine) withdraws a request
                // that is out, never one still to be written (its `$/cancelRequest`
                // went out first). Armed after the insert, so it finds the entry;
                // an answer that came first leaves it nothing to do.
                send(id)
                // The expiry handler is made at the first request, not at init: its
                // weak reference gives the connection a side table, and every retain
                // and release of it then takes the runtime's slow path (~10 % of a
                // stream of deltas, which never asks the client anything).
                deadlines.add(id, after: timeout) { { [weak self] id, timeout in self?.expire(id, timeout: timeout) } }
            }
        } onCancel: {
            if let entry = pending.withLock({ $0.removeValue(forKey: id) }) {
                deadlines.remove(id)
                withdraw(id)
                entry.continuation.resume(throwing: CancellationError())
            }
        }
    }

    private func expire(_ id: RequestID, timeout: Double) {
        if let entry = pending.withLock({ $0.removeValue(forKey: id) }) {
            withdraw(id)
            entry.continuation.resume(throwing: OutgoingRequestError.timedOut(seconds: timeout))
        }
    }

    private func withdraw(_ id: RequestID) {
        let params: JSONValue = cancelRequestMethod == "$/cancelRequest" ? ["id": id.json] : ["requestId": id.json]
        send(.notification(method: cancelRequestMethod, params: params))
    }

    /// Outstanding server→client requests (for diagnostics and tests).
    var pendingRequestCount: Int { pending.withLock { $0.count } }

    /// Waits (bounded) until everything queued has been written.
    package func flush(timeoutSeconds: Double) { writer.flush(timeoutSeconds: timeoutSeconds) }

    // MARK: Back-pressure

    /// Output waiting for a slow reader beyond which a turn holds its deltas
    /// back and then waits (docs/protocol.md, "Every limit and its default").
    static let defaultOutputQueueBytes = 1 << 20

    /// The bound a producer should keep the output queue under.
    package var outputQueueBytes: Int { writer.backPressureBytes ?? .max }

    /// Whether the client reads slower than the server writes (the queue is over its bound).
    package var isBehind: Bool { writer.isBehind }

    /// Suspends until the queue has drained to half its bound, the client is
    /// gone, or the calling task is cancelled.
    package func waitUntilWritable() async { await writer.waitForRoom() }

    /// The most output ever queued at once, in bytes (logged at exit).
    var peakOutputQueueBytes: Int { writer.peakPending }
}

/// Deadlines of the server's outstanding requests, watched by one thread.
///
/// A sleeping task per request meant a task, a timer registration and a
/// cancellation for every tool call. Here arming a deadline is a dictionary
/// insert under a lock, and the watcher is only woken when a new deadline is
/// earlier than the one it sleeps towards (rare: timeouts are mostly equal).
final class RequestDeadlines: @unchecked Sendable {
    // @unchecked: all mutable state is guarded by `condition`.
    // A condition, not a Mutex: the watcher thread must block until the earliest
    // deadline, and be woken early when an earlier one is added.
    private let condition = ConditionLock()
    /// Each request's deadline and its timeout (what the expiry reports). No
    /// closure per request: one was made and freed per `tool/call`.
    private var entries: [RequestID: (deadline: ContinuousClock.Instant, seconds: Double)] = [:]
    /// Called on the watcher thread for each request whose deadline passed
    /// (made by the first `add`).
    private var expire: (@Sendable (RequestID, Double) -> Void)?
    /// When the watcher will next look; nil while it waits for a first entry.
    private var wakeAt: ContinuousClock.Instant?
    private var stopped = false

    /// Starts the watcher thread (with the connection, before any request can be
    /// sent: started lazily, a refused thread would leave a request unbounded).
    func start() throws(OSThread.StartError) {
        try OSThread.start(name: "agentrpc.deadlines", stackSize: 256 * 1024) { [self] in self.watch() }
    }

    /// Calls the expiry handler (on the watcher thread) once `seconds` have
    /// passed (at once when they are not positive, or NaN), unless removed
    /// first; it is handed the id and `seconds` as given. `expiry` makes the
    /// handler, called only by the first `add`.
    func add(_ id: RequestID, after seconds: Double, expiry: () -> @Sendable (RequestID, Double) -> Void) {
        let deadline = ContinuousClock.now.advanced(by: .clampedSeconds(seconds))
        condition.lock()
        defer { condition.unlock() }
        if stopped { return }
        if expire == nil { expire = expiry() }
        entries[id] = (deadline, seconds)
        if wakeAt.map({ deadline < $0 }) ?? true { condition.signal() }
    }

    func remove(_ id: RequestID) {
        condition.lock()
        entries.removeValue(forKey: id)
        condition.unlock()
    }

    func removeAll() {
        condition.lock()
        entries.removeAll()
        condition.unlock()
    }

    /// Ends the watcher thread.
    func stop() {
        condition.lock()
        stopped = true
        entries.removeAll()
        condition.signal()
        condition.unlock()
    }

    private func watch() {
        condition.lock()
        while !stopped {
            let now = ContinuousClock.now
            var due: [(id: RequestID, seconds: Double)] = []
            var earliest: ContinuousClock.Instant?
            for (id, entry) in entries {
                if entry.deadline <= now {
                    due.append((id, entry.seconds))
                    entries.removeValue(forKey: id)
                } else if earliest.map({ entry.deadline < $0 }) ?? true {
                    earliest = entry.deadline
                }
            }
            if !due.isEmpty {
                let expire = self.expire
                condition.unlock()
                for (id, seconds) in due { expire?(id, seconds) }
                condition.lock()
                continue
            }
            wakeAt = earliest
            if let earliest {
                let remaining = now.duration(to: earliest)
                _ = condition.wait(until: Date(timeIntervalSinceNow: remaining.secondsValue))
            } else {
                condition.wait()
            }
        }
        condition.unlock()
    }
}

/// Observes every frame read and written, for `--record` (the recording tools'
/// `TranscriptRecorder`, handed in through `ServerOptions.recorder`).
package protocol ConnectionRecorder: Sendable {
    func framingDetected(_ framing: Framing)
    func clientSent(frame: IncomingFrame, raw: [UInt8])
    func serverSent(_ message: JSONValue)
    func inputClosed()
    /// The server is about to exit with `code`.
    func serverExiting(code: Int32)
}
