import AgentRPCProtocol
import Dispatch
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Runs one HTTP request and turns the response into `ProviderEvent`s as bytes
/// arrive: HTTP client → `StreamingDataDelegate` (SSE parser → provider
/// decoder) → stream. The client is `PlainHTTPClient` for `http://`,
/// `CurlTransport` (libcurl's easy interface) for `https://` on Linux, and
/// URLSession otherwise or when libcurl cannot be loaded.
///
/// * 2xx `text/event-stream` (or anything when no whole-body decoder is given):
///   decoded incrementally.
/// * 2xx with another content type and a whole-body decoder (OpenAI with
///   `stream: false`, or a server that ignored `stream: true`): the body is
///   collected and decoded at the end.
/// * non-2xx: up to 64 KiB of the body is collected and mapped by `ProviderErrorMapper`.
/// * transport failures become `network` errors.
///
/// Each client keeps connections alive and reuses them (URLSession through one
/// shared session per idle timeout, see `HTTPSessionPool`). Cancelling the
/// consuming task (or dropping the stream) cancels the data task only. Retries
/// are not done here: the engine decides.
enum HTTPStreamTransport {
    typealias WholeBodyDecoder = @Sendable ([UInt8]) throws -> [ProviderEvent]

    static func stream(
        _ urlRequest: URLRequest, decoder: some ProviderStreamDecoder, wholeBodyDecoder: WholeBodyDecoder?,
        secrets: [String], timeoutSeconds: Double, connectTimeoutSeconds: Double = HTTPProviderConfiguration.defaultConnectTimeoutSeconds
    ) -> AsyncThrowingStream<ProviderEvent, any Error> {
        AsyncThrowingStream { continuation in
            let delegate = StreamingDataDelegate(
                decoder: decoder, wholeBodyDecoder: wholeBodyDecoder, secrets: secrets, continuation: continuation)
            let handle: TaskHandle
            if let url = urlRequest.url, let target = PlainHTTPClient.target(of: url) {
                // Plain http (local servers): our own client, which waits without a busy core.
                let task = PlainHTTPClient.start(
                    urlRequest, target: target, connectTimeout: connectTimeoutSeconds, idleTimeout: timeoutSeconds, sink: delegate)
                handle = TaskHandle(cancel: { task.cancel() }, linger: { task.linger() })
            } else if let curl = curlTask(urlRequest, connectTimeout: connectTimeoutSeconds, idleTimeout: timeoutSeconds, sink: delegate) {
                // https on Linux: libcurl's easy interface, which waits without a busy core.
                handle = curl
            } else {
                let pooled = HTTPSessionPool.shared.session(timeoutSeconds: timeoutSeconds)
                let task = pooled.session.dataTask(with: urlRequest)
                handle = TaskHandle { task.cancel() }
                pooled.router.register(delegate, for: task)
                task.resume()
            }
            delegate.attach(handle)
            continuation.onTermination = { @Sendable termination in
                if case .cancelled = termination { handle.cancel() }
            }
        }
    }

    #if os(Linux)
    /// Nil when libcurl could not be loaded (URLSession then serves the request).
    private static func curlTask(_ request: URLRequest, connectTimeout: Double, idleTimeout: Double, sink: StreamingDataDelegate) -> TaskHandle? {
        guard let task = CurlTransport.start(request, connectTimeout: connectTimeout, idleTimeout: idleTimeout, sink: sink) else { return nil }
        return TaskHandle(cancel: { task.cancel() }, linger: { task.linger() })
    }
    #else
    /// Elsewhere URLSession's own client does not busy-wait: it serves https.
    private static func curlTask(_ request: URLRequest, connectTimeout: Double, idleTimeout: Double, sink: StreamingDataDelegate) -> TaskHandle? {
        nil
    }
    #endif
}

/// One `URLSession` per idle timeout, shared by every request with that timeout:
/// libcurl then keeps connections alive and reuses them (and HTTP/2 where the
/// server offers it), instead of a new TCP (and TLS) connection per request.
/// The session's configuration carries no credentials (they are per request),
/// so sharing it across provider configurations leaks nothing.
final class HTTPSessionPool: Sendable {
    static let shared = HTTPSessionPool()
    /// Distinct timeouts are few (one per configured model at most); past this
    /// many, a request gets a session of its own that is dropped after it.
    static let maximumSessions = 32

    struct Pooled: Sendable {
        let session: URLSession
        let router: TaskRouter
    }

    private let sessions = Mutex<[Double: Pooled]>([:])

    func session(timeoutSeconds: Double) -> Pooled {
        sessions.withLock { pool in
            if let existing = pool[timeoutSeconds] { return existing }
            let made = Self.make(timeoutSeconds: timeoutSeconds, oneShot: pool.count >= Self.maximumSessions)
            if pool.count < Self.maximumSessions { pool[timeoutSeconds] = made }
            return made
        }
    }

    private static func make(timeoutSeconds: Double, oneShot: Bool) -> Pooled {
        let router = TaskRouter(oneShot: oneShot)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeoutSeconds
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let queue = OperationQueue()
        // Callbacks must arrive in order for each task's parser; one at a time.
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: configuration, delegate: router, delegateQueue: queue)
        router.session.withLock { $0 = session }
        return Pooled(session: session, router: router)
    }
}

/// The shared session's delegate: hands each task's callbacks to that task's
/// `StreamingDataDelegate`, and forgets it when the task completes.
final class TaskRouter: NSObject, URLSessionDataDelegate, Sendable {
    private let delegates = Mutex<[Int: StreamingDataDelegate]>([:])
    /// A session made past the pool's limit serves one task and is then invalidated.
    private let oneShot: Bool
    fileprivate let session = Mutex<URLSession?>(nil)

    init(oneShot: Bool) { self.oneShot = oneShot }

    func register(_ delegate: StreamingDataDelegate, for task: URLSessionTask) {
        delegates.withLock { $0[task.taskIdentifier] = delegate }
    }

    func delegate(for task: URLSessionTask) -> StreamingDataDelegate? {
        delegates.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        delegate(for: dataTask)?.received(data, head: ResponseHead(dataTask.response))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let delegate = delegates.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        delegate?.completed(head: ResponseHead(task.response), error: error)
        if oneShot { session.finishTasksAndInvalidate() }
    }
}

/// The status and headers of a response (header names lowercased), whichever
/// client received it.
struct ResponseHead: Sendable {
    var status: Int
    var headers: [String: String]

    init(status: Int, headers: [String: String]) {
        self.status = status
        self.headers = headers
    }

    init?(_ response: URLResponse?) {
        guard let http = response as? HTTPURLResponse else { return nil }
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let k = key as? String, let v = value as? String { headers[k.lowercased()] = v }
        }
        self.init(status: http.statusCode, headers: headers)
    }
}

/// Lets the stream's termination handler cancel the HTTP work.
final class TaskHandle: Sendable {
    private let action: Mutex<(@Sendable () -> Void)?>
    private let lingerAction: (@Sendable () -> Void)?

    init(cancel: @escaping @Sendable () -> Void, linger: (@Sendable () -> Void)? = nil) {
        self.action = Mutex(cancel)
        self.lingerAction = linger
    }

    /// Nobody reads the rest of the response any more: it may finish on its own
    /// (keeping the connection) but must not hold on to it for long.
    func linger() { lingerAction?() }

    /// Cancels the request (once); shared sessions and idle connections stay.
    func cancel() {
        let a = action.withLock { a in
            defer { a = nil }
            return a
        }
        a?()
    }
}

/// One request's decoding state: fed by the session's `TaskRouter`.
final class StreamingDataDelegate: Sendable {
    static let maximumErrorBodyBytes = 64 * 1024
    static let maximumWholeBodyBytes = 32 * 1024 * 1024

    enum Mode: Sendable {
        case undecided, streaming, wholeBody, errorBody
    }

    struct State: Sendable {
        var decoder: any ProviderStreamDecoder
        var parser = SSEParser()
        var mode = Mode.undecided
        var body: [UInt8] = []
        var status = 0
        var headers: [String: String] = [:]
        var done = false
        var handle: TaskHandle?
    }

    /// What to do once the lock is released: yielding or finishing can run the
    /// termination handler synchronously, which must not happen under the lock.
    enum Action {
        case yield([ProviderEvent], finish: Bool)
        case fail(any Error, after: [ProviderEvent] = [])
        case nothing
    }

    private let state: Mutex<State>
    private let wholeBodyDecoder: HTTPStreamTransport.WholeBodyDecoder?
    private let secrets: [String]
    private let continuation: AsyncThrowingStream<ProviderEvent, any Error>.Continuation

    init(
        decoder: any ProviderStreamDecoder, wholeBodyDecoder: HTTPStreamTransport.WholeBodyDecoder?, secrets: [String],
        continuation: AsyncThrowingStream<ProviderEvent, any Error>.Continuation
    ) {
        self.state = Mutex(State(decoder: decoder))
        self.wholeBodyDecoder = wholeBodyDecoder
        self.secrets = secrets
        self.continuation = continuation
    }

    func attach(_ handle: TaskHandle) {
        state.withLock { $0.handle = handle }
    }

    func received(_ data: Data, head response: ResponseHead?) {
        let action = state.withLock { s -> Action in
            if s.done { return .nothing }
            if s.mode == .undecided { decideMode(&s, response: response) }
            switch s.mode {
            case .streaming:
                var events: [ProviderEvent] = []
                do {
                    for sse in try s.parser.feed(data) { events += try s.decoder.decode(sse) }
                    if s.decoder.isComplete { s.done = true }
                    return .yield(events, finish: s.done)
                } catch {
                    s.done = true
                    // What arrived before the failure in the same read is delivered:
                    // whether output was streamed decides if the engine may retry.
                    return failStreaming(s, classify(error), after: events)
                }
            case .wholeBody, .errorBody:
                let limit = s.mode == .errorBody ? Self.maximumErrorBodyBytes : Self.maximumWholeBodyBytes
                if s.body.count < limit { s.body += data.prefix(limit - s.body.count) }
                if s.mode == .wholeBody && s.body.count >= limit {
                    s.done = true
                    return .fail(ProviderContractViolation("provider response body exceeds \(limit) bytes"))
                }
                return .nothing
            case .undecided:
                return .nothing
            }
        }
        perform(action)
    }

    func completed(head response: ResponseHead?, error: (any Error)?) {
        let action = state.withLock { s -> Action in
            if s.done { return .nothing }
            s.done = true
            if let error {
                let mapped = ProviderErrorMapper.map(transportError: error, secrets: secrets)
                return s.mode == .streaming ? failStreaming(s, mapped, after: []) : .fail(mapped)
            }
            if s.mode == .undecided { decideMode(&s, response: response) }
            switch s.mode {
            case .errorBody:
                return .fail(ProviderErrorMapper.map(status: s.status, headers: s.headers, body: s.body, secrets: secrets))
            case .wholeBody:
                do {
                    return .yield(try wholeBodyDecoder?(s.body) ?? [], finish: true)
                } catch {
                    return .fail(classify(error))
                }
            case .streaming, .undecided:
                var events: [ProviderEvent] = []
                do {
                    for sse in s.parser.finish() { events += try s.decoder.decode(sse) }
                    events += try s.decoder.finish()
                    return .yield(events, finish: true)
                } catch {
                    return failStreaming(s, classify(error), after: events)
                }
            }
        }
        perform(action)
    }

    /// A stream that breaks off after the model reported usage was still paid
    /// for: the usage goes out before the failure, and the turn counts it.
    private func failStreaming(_ s: State, _ error: any Error, after events: [ProviderEvent]) -> Action {
        guard let usage = s.decoder.unreportedUsage else { return .fail(error, after: events) }
        return .fail(error, after: events + [.usage(usage)])
    }

    private func decideMode(_ s: inout State, response: ResponseHead?) {
        s.status = response?.status ?? 0
        s.headers = response?.headers ?? [:]
        if !(200..<300).contains(s.status) {
            s.mode = .errorBody
        } else if wholeBodyDecoder != nil, !(s.headers["content-type"] ?? "").lowercased().contains("text/event-stream") {
            s.mode = .wholeBody
        } else {
            s.mode = .streaming
        }
    }

    private func classify(_ error: any Error) -> any Error {
        if error is ProviderError || error is ProviderContractViolation { return error }
        if let e = error as? SSEParserError { return ProviderContractViolation("provider stream: \(e.message)") }
        return ProviderContractViolation("provider stream could not be decoded: \(error)")
    }

    private func perform(_ action: Action) {
        switch action {
        case .yield(let events, let finish):
            for event in events { continuation.yield(event) }
            if finish {
                continuation.finish()
                // The answer is whole: let the response end by itself, so its
                // connection stays reusable, rather than cancel it.
                state.withLock { $0.handle }?.linger()
            }
        case .fail(let error, let events):
            for event in events { continuation.yield(event) }
            continuation.finish(throwing: error)
            state.withLock { $0.handle }?.cancel()
        case .nothing:
            break
        }
    }
}
