#if !os(Linux)
import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// HTTP and HTTPS outside Linux (there `CurlHTTPTransport` serves both): Foundation's `URLSession`, one shared session per idle timeout
/// (see `HTTPSessionPool`).
struct URLSessionTransport: HTTPTransport {
    func start(_ request: HTTPRequest, sink: any HTTPResponseSink) -> HTTPRequestHandle {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        if !request.body.isEmpty || request.method == "POST" { urlRequest.httpBody = request.body }
        urlRequest.timeoutInterval = request.idleTimeoutSeconds
        let pooled = HTTPSessionPool.shared.session(timeoutSeconds: request.idleTimeoutSeconds)
        let task = pooled.session.dataTask(with: urlRequest)
        pooled.router.register(sink, for: task)
        task.resume()
        return HTTPRequestHandle { task.cancel() }
    }
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
        return Pooled(session: session, router: router)
    }
}

/// The shared session's delegate: hands each task's callbacks to that task's
/// sink (the head once, before its first bytes), and forgets it when the task completes.
final class TaskRouter: NSObject, URLSessionDataDelegate, Sendable {
    private struct Entry {
        var sink: any HTTPResponseSink
        var headSent = false
    }
    private let entries = Mutex<[Int: Entry]>([:])
    /// A session made past the pool's limit serves one task and is then invalidated.
    private let oneShot: Bool

    init(oneShot: Bool) { self.oneShot = oneShot }

    func register(_ sink: any HTTPResponseSink, for task: URLSessionTask) {
        entries.withLock { $0[task.taskIdentifier] = Entry(sink: sink) }
    }

    /// The task's sink, and its response head if it has not been delivered yet.
    private func sink(for task: URLSessionTask, remove: Bool) -> (any HTTPResponseSink, ResponseHead?)? {
        entries.withLock { entries -> (any HTTPResponseSink, ResponseHead?)? in
            guard var entry = entries[task.taskIdentifier] else { return nil }
            var head: ResponseHead?
            if !entry.headSent, let made = Self.head(task.response) {
                head = made
                entry.headSent = true
            }
            if remove { entries[task.taskIdentifier] = nil } else { entries[task.taskIdentifier] = entry }
            return (entry.sink, head)
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let (sink, head) = sink(for: dataTask, remove: false) else { return }
        if let head { sink.head(head) }
        sink.body(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        if let (sink, head) = sink(for: task, remove: true) {
            if let head, error == nil { sink.head(head) }
            // A cancelled task reports nothing: the caller is gone.
            if (error as? URLError)?.code != .cancelled { sink.end(error) }
        }
        if oneShot { session.finishTasksAndInvalidate() }
    }

    static func head(_ response: URLResponse?) -> ResponseHead? {
        guard let http = response as? HTTPURLResponse else { return nil }
        var headers: [String: String] = [:]
        for (key, value) in http.allHeaderFields {
            if let k = key as? String, let v = value as? String { headers[k.lowercased()] = v }
        }
        return ResponseHead(status: http.statusCode, headers: headers)
    }
}
#endif
