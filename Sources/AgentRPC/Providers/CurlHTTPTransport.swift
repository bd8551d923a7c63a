#if os(Linux)
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import Synchronization

/// HTTP and HTTPS on Linux: libcurl's multi interface, driven by one thread
/// for every request of the process.
///
/// That thread waits in `curl_multi_poll` (the kernel's `poll(2)`) until a
/// socket is ready, a deadline is due, or another thread hands it work
/// (`curl_multi_wakeup`), so a slow model costs no CPU. The multi handle's
/// connection cache is the one pool: HTTP/1.1 keep-alive and, over https,
/// HTTP/2 (with concurrent requests to one host multiplexed on one
/// connection); a reused connection the server had closed is replaced by
/// libcurl. Certificates are verified, `SSL_CERT_FILE` names the trusted
/// authorities when set, redirects are not followed, proxies come from the
/// environment for https only (plain http goes straight to local servers).
///
/// Why not URLSession: on Linux its libcurl glue never removes the
/// write-readiness source it registers while connecting, so a request that
/// opened a new connection wakes a thread continuously for its whole response.
final class CurlHTTPTransport: HTTPTransport {
    /// Loaded at the first request; a process that never makes one never loads libcurl.
    static let shared = CurlHTTPTransport { CurlLibrary.load() }

    /// How long a response nobody reads any more may take to end by itself
    /// (keeping its connection) before it is abandoned.
    static let lingerSeconds = 2.0
    /// Easy handles kept for the next requests (their TLS session caches with them).
    static let spareHandles = 16

    private let driver: Mutex<Result<CurlDriver, CurlLibrary.LoadError>?>
    private let load: @Sendable () -> Result<CurlLibrary, CurlLibrary.LoadError>

    /// The sockets libcurl has open now (what quick acknowledgement reaches).
    static var openSockets: Set<Int32> { curlSockets.withLock { $0.open } }

    init(load: @escaping @Sendable () -> Result<CurlLibrary, CurlLibrary.LoadError>) {
        self.load = load
        self.driver = Mutex(nil)
    }

    func start(_ request: HTTPRequest, sink: any HTTPResponseSink) -> HTTPRequestHandle {
        let driver = self.driver.withLock { driver -> Result<CurlDriver, HTTPTransportError> in
            if let driver { return driver.mapError { HTTPTransportError(kind: .unavailable, detail: $0.message) } }
            let library: CurlLibrary
            switch load() {
            case .success(let loaded): library = loaded
            case .failure(let error):
                driver = .failure(error)
                return .failure(HTTPTransportError(kind: .unavailable, detail: error.message))
            }
            guard let multi = library.multiInit() else {
                let error = CurlLibrary.LoadError(message: "curl_multi_init failed")
                driver = .failure(error)
                return .failure(HTTPTransportError(kind: .unavailable, detail: error.message))
            }
            do {
                let made = try CurlDriver(library: library, multi: multi)
                driver = .success(made)
                return .success(made)
            } catch {
                // Not kept: a thread limit is often passing, so the next request tries again.
                _ = library.multiCleanup(multi)
                return .failure(HTTPTransportError(kind: .threadRefused, detail: "\(error)"))
            }
        }
        switch driver {
        case .success(let driver):
            let control = CurlRequestControl()
            driver.submit(.add(request, sink, control))
            return HTTPRequestHandle(
                cancel: { if control.cancel() { driver.submit(.wake) } },
                linger: { driver.submit(.linger(control)) })
        case .failure(let error):
            sink.end(error)
            return HTTPRequestHandle {}
        }
    }
}

extension HTTPTransportError {
    /// CURLcode numbers from curl's `include/curl/curl.h`.
    static func kind(ofCurlCode code: Int32) -> Kind {
        switch code {
        case 5, 6: return .resolveFailed  // COULDNT_RESOLVE_PROXY, COULDNT_RESOLVE_HOST
        case 7: return .connectFailed  // COULDNT_CONNECT
        case 28: return .connectTimedOut  // OPERATION_TIMEDOUT: only the connect timeout is set
        case 35, 58, 59, 60, 77, 83, 90: return .tlsFailed  // SSL_CONNECT_ERROR … PEER_FAILED_VERIFICATION … PINNEDPUBKEYNOTMATCH
        case 1, 3, 8: return .badResponse  // UNSUPPORTED_PROTOCOL, URL_MALFORMAT, WEIRD_SERVER_REPLY
        default: return .connectionLost  // e.g. PARTIAL_FILE 18, GOT_NOTHING 52, SEND/RECV_ERROR 55/56, HTTP2 16/92
        }
    }
}

/// What the caller's side of one request tells the driver thread.
final class CurlRequestControl: Sendable {
    private let cancelled = Mutex(false)

    /// True the first time.
    func cancel() -> Bool {
        cancelled.withLock { c in
            defer { c = true }
            return !c
        }
    }

    var isCancelled: Bool { cancelled.withLock { $0 } }
}

/// The thread that runs every transfer, and the work other threads hand it.
///
/// `@unchecked Sendable`: `multi`, `transfers` and `spare` are touched only by
/// the driver thread; other threads only append to `inbox` (a `Mutex`) and
/// call `curl_multi_wakeup`, which libcurl allows from any thread.
final class CurlDriver: @unchecked Sendable {
    enum Command: Sendable {
        case add(HTTPRequest, any HTTPResponseSink, CurlRequestControl)
        case linger(CurlRequestControl)
        /// A request was cancelled: its flag is set; the driver drops it.
        case wake
    }

    let library: CurlLibrary
    private let multi: OpaquePointer
    private let inbox = Mutex<[Command]>([])
    private var transfers: [OpaquePointer: CurlTransfer] = [:]
    private var spare: [OpaquePointer] = []

    init(library: CurlLibrary, multi: OpaquePointer) throws(OSThread.StartError) {
        self.library = library
        self.multi = multi
        // One thread for the life of the process: it owns the multi handle.
        try OSThread.start(name: "agentrpc-http") { [self] in run() }
    }

    /// Hands `command` to the driver thread and wakes it.
    func submit(_ command: Command) {
        inbox.withLock { $0.append(command) }
        _ = library.multiWakeup(multi)
    }

    private func run() {
        var running: Int32 = 0
        var ready: Int32 = 0
        while true {
            for command in inbox.withLock({ inbox in defer { inbox = [] }; return inbox }) { handle(command) }
            dropCancelled()
            _ = library.multiPerform(multi, &running)
            if curlSockets.withLock({ $0.received }) { acknowledgeAll() }
            collectFinished()
            let wait = expireDeadlines()
            _ = library.multiPoll(multi, nil, 0, wait, &ready)
        }
    }

    private func handle(_ command: Command) {
        switch command {
        case .add(let request, let sink, let control):
            guard !control.isCancelled else { return }
            guard let easy = spare.popLast() ?? library.easyInit() else {
                return sink.end(HTTPTransportError(kind: .connectFailed, detail: "curl_easy_init failed"))
            }
            let transfer = CurlTransfer(easy: easy, request: request, sink: sink, control: control, library: library)
            let caFile = getenv("SSL_CERT_FILE").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
            if let failure = transfer.configure(url: request.url.absoluteString, library: library, caFile: caFile) {
                recycle(transfer)
                return sink.end(HTTPTransportError(kind: .unavailable, detail: "\(CurlLibrary.fileName) refused \(failure)"))
            }
            let code = library.multiAdd(multi, easy)
            guard code == 0 else {
                recycle(transfer)
                return sink.end(HTTPTransportError(kind: .connectFailed, detail: "curl_multi_add_handle failed (CURLMcode \(code))"))
            }
            transfers[easy] = transfer
        case .linger(let control):
            for transfer in transfers.values where transfer.control === control && transfer.lingerDeadline == nil {
                transfer.lingerDeadline = .now + .milliseconds(Int64(CurlHTTPTransport.lingerSeconds * 1000))
            }
        case .wake:
            break
        }
    }

    /// Acknowledges what arrived at once: a server that writes its headers and
    /// body (or two events) separately, without TCP_NODELAY, would otherwise
    /// wait out our delayed ACK (~40 ms) on a kept-alive connection. Linux
    /// clears quick-ACK mode, so it is set again after every read. libcurl does
    /// not say which socket a transfer reads, so every open one gets it.
    private func acknowledgeAll() {
        let sockets = curlSockets.withLock { state in
            state.received = false
            return state.open
        }
        var one: Int32 = 1
        for fd in sockets {
            _ = setsockopt(fd, Int32(IPPROTO_TCP), Int32(TCP_QUICKACK), &one, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// Cancelled requests end at once, without a word to their sinks.
    private func dropCancelled() {
        for (easy, transfer) in transfers where transfer.control.isCancelled {
            transfers[easy] = nil
            _ = library.multiRemove(multi, easy)
            recycle(transfer)
        }
    }

    private func collectFinished() {
        var left: Int32 = 0
        while let message = library.multiInfoRead(multi, &left) {
            // CURLMsg: CURLMSG msg (an int, padded to 8), CURL *easy_handle, then a union whose CURLcode is first.
            guard message.load(as: Int32.self) == CurlLibrary.messageDone,
                  let easy = message.load(fromByteOffset: 8, as: OpaquePointer?.self) else { continue }
            let code = message.load(fromByteOffset: 16, as: Int32.self)
            guard let transfer = transfers.removeValue(forKey: easy) else { continue }
            _ = library.multiRemove(multi, easy)
            let error: HTTPTransportError?
            if code == 0 {
                transfer.sendHead()
                error = nil
            } else {
                error = transfer.failure(code: code)
            }
            let sink = transfer.control.isCancelled ? nil : transfer.sink
            recycle(transfer)
            sink?.end(error)
        }
    }

    /// Ends requests idle past their timeout, or lingering past theirs; returns
    /// how long the thread may sleep (milliseconds) before the next deadline.
    private func expireDeadlines() -> Int32 {
        let now = ContinuousClock.now
        var next = Duration.seconds(3600)
        var expired: [(OpaquePointer, HTTPTransportError)] = []
        for (easy, transfer) in transfers {
            if let linger = transfer.lingerDeadline {
                if now >= linger {
                    expired.append((easy, HTTPTransportError(kind: .connectionLost, detail: "response abandoned after its answer was complete")))
                    continue
                }
                next = min(next, now.duration(to: linger))
            }
            noteUpload(of: transfer, now: now)
            let deadline = transfer.lastActivity + transfer.idleTimeout
            if now >= deadline {
                expired.append((easy, HTTPTransportError(kind: .idleTimedOut, detail: "no data for \(transfer.request.idleTimeoutSeconds) s")))
                continue
            }
            next = min(next, now.duration(to: deadline))
        }
        for (easy, error) in expired {
            guard let transfer = transfers.removeValue(forKey: easy) else { continue }
            _ = library.multiRemove(multi, easy)
            let sink = transfer.control.isCancelled ? nil : transfer.sink
            recycle(transfer)
            sink?.end(error)
        }
        let (seconds, attoseconds) = next.components
        // Rounded up, so a deadline is never polled for just before it is due.
        return Int32(clamping: max(0, seconds) * 1000 + max(0, attoseconds) / 1_000_000_000_000_000 + 1)
    }

    /// A body still going out is activity too, dated when the pass that sent
    /// it ends. Asked on every pass until the whole body is out, never later:
    /// asked only at the deadline, the upload finished long before looked new
    /// there and moved every idle timeout to twice its setting.
    private func noteUpload(of transfer: CurlTransfer, now: ContinuousClock.Instant) {
        guard transfer.uploadPending else { return }
        var uploaded = 0
        guard library.getinfoInteger(transfer.easy, CurlLibrary.infoSizeUploadT, &uploaded) == 0 else { return }
        if uploaded != transfer.lastUploaded {
            transfer.lastUploaded = uploaded
            transfer.lastActivity = now
        }
        if uploaded >= transfer.request.body.count { transfer.uploadPending = false }
    }

    /// Frees what the transfer allocated and keeps its easy handle for the next request.
    private func recycle(_ transfer: CurlTransfer) {
        library.easyReset(transfer.easy)
        transfer.release(library: library)
        if spare.count < CurlHTTPTransport.spareHandles {
            spare.append(transfer.easy)
        } else {
            library.easyCleanup(transfer.easy)
        }
    }
}

/// One request on the driver thread; libcurl's callbacks get it as their user
/// pointer. Only touched by the thread that owns the easy handle.
final class CurlTransfer {
    let easy: OpaquePointer
    let request: HTTPRequest
    /// Nil only for the start-up option check, which never runs a transfer.
    let sink: (any HTTPResponseSink)?
    let control: CurlRequestControl
    let library: CurlLibrary
    let idleTimeout: Duration
    var lastActivity = ContinuousClock.now
    var lastUploaded = 0
    /// Until the whole body is out, the driver follows how much has been sent.
    var uploadPending: Bool
    var lingerDeadline: ContinuousClock.Instant?
    /// How often libcurl started sending the request (see `beforeSend`).
    private var sends = 0
    private let body: UnsafeMutableRawBufferPointer
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var headerList: OpaquePointer?
    private var headers: [String: String] = [:]
    private var head: ResponseHead?
    private var headSent = false

    init(easy: OpaquePointer, request: HTTPRequest, sink: (any HTTPResponseSink)?, control: CurlRequestControl, library: CurlLibrary) {
        self.easy = easy
        self.request = request
        self.sink = sink
        self.control = control
        self.library = library
        let limit = request.idleTimeoutSeconds.isFinite ? max(0, min(request.idleTimeoutSeconds, 86_400)) : 86_400
        self.idleTimeout = .milliseconds(Int64(limit * 1000))
        self.uploadPending = !request.body.isEmpty
        // One copy of the body, at memcpy speed: it holds the whole conversation.
        body = .allocate(byteCount: max(request.body.count, 1), alignment: 1)
        body.copyBytes(from: request.body)
        errorBuffer = .allocate(capacity: CurlLibrary.errorBufferSize)
        errorBuffer.initialize(repeating: 0, count: CurlLibrary.errorBufferSize)
    }

    /// Call after `curl_easy_reset`, so libcurl no longer points into these.
    func release(library: CurlLibrary) {
        library.slistFreeAll(headerList)
        headerList = nil
        body.deallocate()
        errorBuffer.deallocate()
    }

    /// Sets every option of this request; the first one libcurl refused, if any.
    func configure(url: String, library: CurlLibrary, caFile: String?) -> String? {
        for (name, value) in HTTPHeaderPolicy.outgoing(request.headers) {
            headerList = library.slistAppend(headerList, "\(name): \(value)")
        }
        // No `Expect: 100-continue` round trip before a large body.
        headerList = library.slistAppend(headerList, "Expect:")
        let me = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        var o = CurlOptionSetter(library: library, easy: easy)
        o.set(.url, string: url)
        o.set(.noSignal, 1)
        o.set(.errorBuffer, pointer: errorBuffer)
        o.set(.httpHeader, pointer: headerList.map { UnsafeRawPointer($0) })
        // Certificates are always checked; a redirect would carry the key to another host.
        o.set(.sslVerifyPeer, 1)
        o.set(.sslVerifyHost, 2)
        o.set(.followLocation, 0)
        // Plain http goes to local servers directly; https honours the proxy variables.
        o.set(.proxy, string: url.lowercased().hasPrefix("http:") ? "" : nil)
        if request.method == "POST" || !request.body.isEmpty {
            o.set(.post, 1)
            o.set(.postFieldSizeLarge, request.body.count)
            o.set(.postFields, pointer: UnsafeRawPointer(body.baseAddress))
        }
        if request.method != "POST" && request.method != "GET" {
            o.set(.customRequest, string: request.method)
        }
        if let caFile { o.set(.caInfo, string: caFile) }
        let connect = request.connectTimeoutSeconds.isFinite ? max(0.001, min(request.connectTimeoutSeconds, 86_400)) : 86_400
        o.set(.connectTimeoutMS, Int(connect * 1000))
        o.set(.writeFunction, pointer: unsafeBitCast(curlWrite, to: UnsafeRawPointer.self))
        o.set(.writeData, pointer: me)
        o.set(.headerFunction, pointer: unsafeBitCast(curlHeader, to: UnsafeRawPointer.self))
        o.set(.headerData, pointer: me)
        o.set(.sockoptFunction, pointer: unsafeBitCast(curlSocketOpened, to: UnsafeRawPointer.self))
        o.set(.closeSocketFunction, pointer: unsafeBitCast(curlSocketClosed, to: UnsafeRawPointer.self))
        if o.setIfSupported(.prereqFunction, pointer: unsafeBitCast(curlBeforeSend, to: UnsafeRawPointer.self)) {
            o.setIfSupported(.prereqData, pointer: me)
        }
        return o.failure
    }

    /// libcurl calls this just before the request goes out on a connection,
    /// again when it sends it anew after the reused connection died. False
    /// aborts the transfer.
    fileprivate func beforeSend() -> Bool {
        sends += 1
        return sends == 1 || !request.sentAtMostOnce
    }

    /// The typed error of a transfer that ended with `code`. A connection that
    /// failed to open after the request had already gone out on another (libcurl
    /// sending it anew) is a lost connection: the request may have been taken.
    func failure(code: Int32) -> HTTPTransportError {
        var kind = HTTPTransportError.kind(ofCurlCode: code)
        var detail = errorText(code: code, library: library)
        if sends > 0, kind == .connectFailed || kind == .resolveFailed || kind == .connectTimedOut {
            kind = .connectionLost
            detail = "the connection the request went out on closed before an answer, and a new one failed: \(detail)"
        } else if sends > 1, request.sentAtMostOnce, code == 42 {  // ABORTED_BY_CALLBACK: by beforeSend
            detail = "the connection the request went out on closed before an answer; not sent again"
        }
        return HTTPTransportError(kind: kind, detail: "\(detail) (\(request.url.host ?? ""))")
    }

    func errorText(code: Int32, library: CurlLibrary) -> String {
        if errorBuffer[0] != 0 { return String(cString: errorBuffer) }
        return library.strerror(code).map { String(cString: $0) } ?? "curl error \(code)"
    }

    /// Hands the head to the sink once, before the first body bytes: status
    /// from libcurl, headers as received.
    func sendHead() {
        guard !headSent else { return }
        var status = 0
        guard library.getinfoInteger(easy, CurlLibrary.infoResponseCode, &status) == 0, status > 0 else { return }
        headSent = true
        sink?.head(ResponseHead(status: status, headers: headers))
    }

    fileprivate func receiveHeader(_ bytes: UnsafeRawBufferPointer) {
        lastActivity = .now
        let line = String(decoding: bytes, as: UTF8.self).trimmingWhitespaceAndNewlines()
        curlSockets.withLock { $0.received = true }
        if line.hasPrefix("HTTP/") {
            // A new response head (after an interim 1xx): start over.
            headers = [:]
        } else if !headSent, let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].trimmingWhitespace().lowercased()
            let value = line[line.index(after: colon)...].trimmingWhitespace()
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
    }

    /// False aborts the transfer.
    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if control.isCancelled { return false }
        lastActivity = .now
        curlSockets.withLock { $0.received = true }
        sendHead()
        sink?.body(Data(bytes))
        return true
    }
}

/// Which request headers are sent: the transport frames the message itself
/// (`Host`, `Content-Length`, `Transfer-Encoding`, `Connection`), and a name
/// or value with a line break would start a header of its own (injection).
enum HTTPHeaderPolicy {
    static func outgoing(_ headers: [String: String]) -> [(name: String, value: String)] {
        headers.compactMap { name, value in
            if value.contains(where: { $0 == "\r" || $0 == "\n" }) || name.isEmpty
                || name.contains(where: { $0 == "\r" || $0 == "\n" || $0 == ":" }) {
                return nil
            }
            switch name.lowercased() {
            case "host", "content-length", "transfer-encoding", "connection": return nil
            default: return (name, value)
            }
        }
    }
}

/// The sockets libcurl has open for agentrpc, and whether any of them
/// delivered bytes since they were last acknowledged. Touched by the driver
/// thread (libcurl's callbacks run on it); the lock only makes that checkable.
private let curlSockets = Mutex<(open: Set<Int32>, received: Bool)>(([], false))

private let curlSocketOpened: CurlLibrary.SockoptCallback = { _, fd, _ in
    curlSockets.withLock { _ = $0.open.insert(fd) }
    return 0  // CURL_SOCKOPT_OK
}

private let curlSocketClosed: CurlLibrary.CloseSocketCallback = { _, fd in
    curlSockets.withLock { _ = $0.open.remove(fd) }
    return close(fd)
}

private func transfer(_ user: UnsafeMutableRawPointer?) -> CurlTransfer? {
    user.map { Unmanaged<CurlTransfer>.fromOpaque($0).takeUnretainedValue() }
}

private let curlWrite: CurlLibrary.DataCallback = { data, size, count, user in
    let (total, overflow) = size.multipliedReportingOverflow(by: count)
    guard !overflow, let transfer = transfer(user) else { return 0 }
    guard let data, total > 0 else { return total }
    return transfer.receiveBody(UnsafeRawBufferPointer(start: data, count: total)) ? total : 0
}

private let curlBeforeSend: CurlLibrary.PrereqCallback = { user, _, _, _, _ in
    guard let transfer = transfer(user) else { return 1 }  // CURL_PREREQFUNC_ABORT
    return transfer.beforeSend() ? 0 : 1  // CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT
}

private let curlHeader: CurlLibrary.DataCallback = { data, size, count, user in
    let (total, overflow) = size.multipliedReportingOverflow(by: count)
    guard !overflow, let transfer = transfer(user) else { return 0 }
    guard let data, total > 0 else { return total }
    transfer.receiveHeader(UnsafeRawBufferPointer(start: data, count: total))
    return total
}
#endif
