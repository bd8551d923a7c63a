#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// One HTTP request as it goes to the network: everything a transport needs,
/// and everything a recorder sees of it.
struct HTTPRequest: Sendable {
    var url: URL
    var method: String
    /// Sent as given, after `HTTPHeaderPolicy` drops what the transport frames itself.
    var headers: [String: String]
    var body: Data
    /// The longest wait for a connection to open (with the TLS handshake over https).
    var connectTimeoutSeconds: Double
    /// The longest wait for the next bytes of the response.
    var idleTimeoutSeconds: Double
    /// Never sent a second time by the transport itself. libcurl sends a
    /// request again on a new connection when the reused one it went out on
    /// died before any answer, which runs a non-idempotent request twice if
    /// the server had taken it; with this set such a transfer fails as a lost
    /// connection instead, and the caller decides.
    var sentAtMostOnce = false

    init(url: URL, method: String, headers: [String: String], body: Data, connectTimeoutSeconds: Double, idleTimeoutSeconds: Double) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.idleTimeoutSeconds = idleTimeoutSeconds
    }

    /// Sets header `name`, replacing any of that name in another case (header
    /// names are case-insensitive, and two spellings would both be sent).
    mutating func setHeader(_ name: String, _ value: String) {
        for key in headers.keys where Self.sameName(key, name) { headers[key] = nil }
        headers[name] = value
    }

    /// Whether two header names are the same in any case, as Foundation's
    /// `caseInsensitiveCompare` tells them: ASCII names (every real one) byte by byte,
    /// others by their case folding (upper-cased, then lower-cased: "ß" is "SS").
    static func sameName(_ a: String, _ b: String) -> Bool {
        if a.utf8.allSatisfy({ $0 < 0x80 }) && b.utf8.allSatisfy({ $0 < 0x80 }) {
            return a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { x, y in
                (x >= 0x41 && x <= 0x5A ? x | 0x20 : x) == (y >= 0x41 && y <= 0x5A ? y | 0x20 : y)
            }
        }
        return a.uppercased().lowercased() == b.uppercased().lowercased()
    }

    /// The value of header `name`, in any case.
    func header(_ name: String) -> String? {
        headers.first { Self.sameName($0.key, name) }?.value
    }
}

/// The status and headers of a final response (never a 1xx); header names
/// lowercased, repeated headers joined with ", ".
struct ResponseHead: Sendable, Equatable {
    var status: Int
    var headers: [String: String]
}

/// Receives one response, in this order: `head` at most once, then `body` any
/// number of times (the body's bytes after de-chunking, as they arrive), then
/// `end` exactly once — nil when the response is complete, else why it is not
/// (a failure may come without a head). Nothing is called after `end`, nor
/// after the request was cancelled.
protocol HTTPResponseSink: Sendable {
    func head(_ head: ResponseHead)
    func body(_ bytes: Data)
    func end(_ error: (any Error)?)
}

/// The one way an HTTP request of agentrpc reaches the network: every
/// provider request goes through `HTTPTransports.current.start`. A decorator
/// (recording, replaying) wraps the installed transport and sees the request
/// and everything that comes back.
protocol HTTPTransport: Sendable {
    /// Starts `request`; `sink` receives the response. The handle cancels it.
    func start(_ request: HTTPRequest, sink: any HTTPResponseSink) -> HTTPRequestHandle
}

/// Which transport requests go through: the platform's client unless something
/// (a recorder) installed a decorator around it.
enum HTTPTransports {
    private static let installed = Mutex<any HTTPTransport>(platformDefault)

    /// The transport every request starts on.
    static var current: any HTTPTransport {
        get { installed.withLock { $0 } }
        set { installed.withLock { $0 = newValue } }
    }

    /// The platform's client, whatever `current` is.
    static var platformDefault: any HTTPTransport {
        #if os(Linux)
        CurlHTTPTransport.shared
        #else
        URLSessionTransport()
        #endif
    }
}

/// A running request, from the caller's side.
final class HTTPRequestHandle: Sendable {
    private let action: Mutex<(@Sendable () -> Void)?>
    private let lingerAction: (@Sendable () -> Void)?

    init(cancel: @escaping @Sendable () -> Void, linger: (@Sendable () -> Void)? = nil) {
        self.action = Mutex(cancel)
        self.lingerAction = linger
    }

    /// Nobody reads the rest of the response any more: it may finish on its own
    /// (keeping the connection reusable) but must not hold on to it for long.
    func linger() { lingerAction?() }

    /// Ends the request at once (once); nothing more reaches the sink.
    func cancel() {
        let a = action.withLock { a in
            defer { a = nil }
            return a
        }
        a?()
    }
}

/// A transport failure; `description` names the host, never a path or query.
struct HTTPTransportError: Error, CustomStringConvertible, Sendable {
    enum Kind: String, Sendable {
        case resolveFailed = "cannot resolve host"
        case connectFailed = "cannot connect"
        case connectTimedOut = "connect timed out"
        case idleTimedOut = "timed out waiting for data"
        case connectionLost = "connection lost"
        case badResponse = "malformed HTTP response"
        /// https: the TLS handshake failed or the server's certificate is not trusted.
        case tlsFailed = "TLS handshake or certificate check failed"
        /// libcurl is not installed, too old, or lacks an option agentrpc needs.
        case unavailable = "the HTTP library libcurl is not usable"
        /// The system refused the thread that runs every request (the process or
        /// user is at its thread limit); the next request tries again.
        case threadRefused = "the system refused the HTTP thread"
    }
    var kind: Kind
    var detail: String
    var description: String { "\(kind.rawValue): \(detail)" }
}

