#if os(Linux)
import Foundation
import Glibc
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// libcurl's easy interface, resolved at run time from `libcurl.so.4` (which
/// FoundationNetworking links, so it is present wherever agentrpc runs).
///
/// Why not URLSession for `https://`: on Linux its libcurl glue never removes
/// the write-readiness source it registers while connecting, so every request
/// that opens a new connection wakes a thread continuously for its whole
/// response — a busy core while a model thinks. `curl_easy_perform` on a thread
/// of its own waits in libcurl's `poll(2)` loop instead and costs nothing idle.
///
/// ABI: `curl_easy_setopt` and `curl_easy_getinfo` are C variadic functions.
/// They are called here through fixed-arity `@convention(c)` pointers, which
/// passes the extra argument exactly as a variadic call would on Linux x86-64
/// and aarch64 *for 64-bit integer and pointer arguments* (general registers;
/// x86-64's `%al` vector-register count only decides whether the callee's
/// prologue spills vector registers, which it may do harmlessly). Only `long`,
/// `curl_off_t` and pointer values are ever passed — never a `double` — and
/// this file is compiled on Linux only.
struct CurlLibrary: @unchecked Sendable {
    typealias EasyInit = @convention(c) () -> OpaquePointer?
    typealias EasyHandleFunction = @convention(c) (OpaquePointer?) -> Void
    typealias EasyPerform = @convention(c) (OpaquePointer?) -> Int32
    typealias SetoptInteger = @convention(c) (OpaquePointer?, Int32, Int) -> Int32
    typealias SetoptPointer = @convention(c) (OpaquePointer?, Int32, UnsafeRawPointer?) -> Int32
    typealias GetinfoInteger = @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<Int>?) -> Int32
    typealias Strerror = @convention(c) (Int32) -> UnsafePointer<CChar>?
    typealias SlistAppend = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> OpaquePointer?
    typealias SlistFreeAll = @convention(c) (OpaquePointer?) -> Void
    typealias GlobalInit = @convention(c) (Int) -> Int32

    /// `size_t (*)(char *, size_t, size_t, void *)`: CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION.
    typealias DataCallback = @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int
    /// `int (*)(void *, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)`.
    typealias XferInfoCallback = @convention(c) (UnsafeMutableRawPointer?, Int64, Int64, Int64, Int64) -> Int32

    /// Option numbers from curl's `include/curl/curl.h`: CURLOPTTYPE_LONG = 0,
    /// CURLOPTTYPE_OBJECTPOINT (and STRINGPOINT, SLISTPOINT, CBPOINT) = 10000,
    /// CURLOPTTYPE_FUNCTIONPOINT = 20000, CURLOPTTYPE_OFF_T = 30000.
    enum Option {
        static let writeData: Int32 = 10_000 + 1
        static let url: Int32 = 10_000 + 2
        static let errorBuffer: Int32 = 10_000 + 10
        static let writeFunction: Int32 = 20_000 + 11
        static let postFields: Int32 = 10_000 + 15
        static let httpHeader: Int32 = 10_000 + 23
        static let headerData: Int32 = 10_000 + 29
        static let customRequest: Int32 = 10_000 + 36
        static let noProgress: Int32 = 43
        static let post: Int32 = 47
        static let xferInfoData: Int32 = 10_000 + 57
        static let caInfo: Int32 = 10_000 + 65
        static let headerFunction: Int32 = 20_000 + 79
        static let noSignal: Int32 = 99
        static let postFieldSizeLarge: Int32 = 30_000 + 120
        static let connectTimeoutMS: Int32 = 156
        static let xferInfoFunction: Int32 = 20_000 + 219
    }
    /// CURLINFO_LONG (0x200000) + 2.
    static let infoResponseCode: Int32 = 0x200000 + 2
    /// CURL_GLOBAL_SSL | CURL_GLOBAL_WIN32.
    static let globalAll = 3
    /// CURL_ERROR_SIZE.
    static let errorBufferSize = 256

    let easyInit: EasyInit
    let easyCleanup: EasyHandleFunction
    let easyReset: EasyHandleFunction
    let easyPerform: EasyPerform
    let setoptInteger: SetoptInteger
    let setoptPointer: SetoptPointer
    let getinfoInteger: GetinfoInteger
    let strerror: Strerror
    let slistAppend: SlistAppend
    let slistFreeAll: SlistFreeAll

    /// The library, or why it could not be loaded (https then goes through
    /// URLSession). Loaded once per process, at the first https request, so a
    /// server that never talks to one does not pay for `curl_global_init`.
    static let loaded: Result<CurlLibrary, LoadError> = {
        let result = load()
        if case .failure(let reason) = result {
            ProcessLogger.current.withLock { $0 }?.debug("\(reason.message); https requests use URLSession")
        }
        return result
    }()

    static var shared: CurlLibrary? { try? loaded.get() }

    struct LoadError: Error { var message: String }

    static func load() -> Result<CurlLibrary, LoadError> {
        guard let handle = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL) else {
            return .failure(LoadError(message: "cannot load libcurl.so.4"))
        }
        func symbol<T>(_ name: String, as type: T.Type) throws(LoadError) -> T {
            guard let raw = dlsym(handle, name) else { throw LoadError(message: "libcurl.so.4 has no \(name)") }
            return unsafeBitCast(raw, to: type)
        }
        do {
            let library = CurlLibrary(
                easyInit: try symbol("curl_easy_init", as: EasyInit.self),
                easyCleanup: try symbol("curl_easy_cleanup", as: EasyHandleFunction.self),
                easyReset: try symbol("curl_easy_reset", as: EasyHandleFunction.self),
                easyPerform: try symbol("curl_easy_perform", as: EasyPerform.self),
                setoptInteger: try symbol("curl_easy_setopt", as: SetoptInteger.self),
                setoptPointer: try symbol("curl_easy_setopt", as: SetoptPointer.self),
                getinfoInteger: try symbol("curl_easy_getinfo", as: GetinfoInteger.self),
                strerror: try symbol("curl_easy_strerror", as: Strerror.self),
                slistAppend: try symbol("curl_slist_append", as: SlistAppend.self),
                slistFreeAll: try symbol("curl_slist_free_all", as: SlistFreeAll.self))
            // Reference-counted in libcurl and thread-safe since 7.84; FoundationNetworking calls it too.
            let globalInit = try symbol("curl_global_init", as: GlobalInit.self)
            guard globalInit(globalAll) == 0 else { return .failure(LoadError(message: "curl_global_init failed")) }
            return .success(library)
        } catch {
            return .failure(error)
        }
    }
}

/// One easy handle, owned by one thread at a time (libcurl's rule).
struct CurlEasyHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Easy handles kept after their request, by scheme, host and port. An easy
/// handle keeps its connections alive after `curl_easy_perform` (and after
/// `curl_easy_reset`), so the next request to the same host on that handle
/// reuses the connection (HTTP/1.1 keep-alive or HTTP/2) and its TLS session;
/// a connection the server closed meanwhile is replaced by libcurl itself.
final class CurlHandlePool: Sendable {
    static let shared = CurlHandlePool()
    /// Idle handles kept per host; more concurrent requests than this open
    /// connections that are closed after them.
    static let maximumIdlePerHost = 8
    private let idle = Mutex<[String: [CurlEasyHandle]]>([:])

    func take(_ key: String, library: CurlLibrary) -> CurlEasyHandle? {
        if let kept = idle.withLock({ $0[key]?.popLast() }) { return kept }
        return library.easyInit().map(CurlEasyHandle.init)
    }

    func give(_ handle: CurlEasyHandle, key: String, library: CurlLibrary) {
        let kept = idle.withLock { pool -> Bool in
            guard (pool[key]?.count ?? 0) < Self.maximumIdlePerHost else { return false }
            pool[key, default: []].append(handle)
            return true
        }
        if !kept { library.easyCleanup(handle.pointer) }
    }
}

enum CurlTransport {
    /// Key of the handle pool: requests to one origin share connections.
    static func poolKey(_ url: URL) -> String {
        "\(url.scheme?.lowercased() ?? "")://\(url.host ?? ""):\(url.port ?? -1)"
    }

    /// Starts `request` on a thread of its own; `sink` receives the head, the
    /// body bytes and the end. Nil when libcurl is not available.
    static func start(_ request: HTTPRequest, sink: any HTTPResponseSink) -> CurlTask? {
        guard let library = CurlLibrary.shared else { return nil }
        let task = CurlTask()
        let thread = Thread {
            let transfer = CurlTransfer(library: library, task: task, sink: sink, idleTimeout: request.idleTimeoutSeconds)
            transfer.run(request, url: request.url, connectTimeout: request.connectTimeoutSeconds)
        }
        thread.name = "agentrpc-https"
        thread.start()
        return task
    }
}

/// Flags another thread sets on a running request; libcurl's progress callback
/// (about once a second while idle, more often while bytes flow) and the write
/// callback read them and abort the transfer.
final class CurlTask: Sendable {
    private struct State {
        var cancelled = false
        var lingerSince: ContinuousClock.Instant?
    }
    private let state = Mutex(State())

    func cancel() { state.withLock { $0.cancelled = true } }

    /// The answer is complete: let the response end by itself (keeping the
    /// connection) for at most `PlainHTTPTask.lingerSeconds`, then abort.
    func linger() { state.withLock { s in if s.lingerSince == nil { s.lingerSince = .now } } }

    var isCancelled: Bool { state.withLock { $0.cancelled } }
    var lingerSince: ContinuousClock.Instant? { state.withLock { $0.lingerSince } }
}

/// One request's state on its transfer thread; libcurl's callbacks get it as
/// their user pointer. Only touched by that thread.
final class CurlTransfer {
    let library: CurlLibrary
    let task: CurlTask
    let sink: any HTTPResponseSink
    let idleTimeout: Double
    private var easy: OpaquePointer?
    private var headers: [String: String] = [:]
    private var head: ResponseHead?
    private var headSent = false
    private var lastActivity = ContinuousClock.now
    private var lastUploaded: Int64 = 0
    private var idleExpired = false

    init(library: CurlLibrary, task: CurlTask, sink: any HTTPResponseSink, idleTimeout: Double) {
        self.library = library
        self.task = task
        self.sink = sink
        self.idleTimeout = idleTimeout
    }

    func run(_ request: HTTPRequest, url: URL, connectTimeout: Double) {
        let key = CurlTransport.poolKey(url)
        guard let handle = CurlHandlePool.shared.take(key, library: library) else {
            sink.end(PlainHTTPError(kind: .connectFailed, detail: "curl_easy_init failed"))
            return
        }
        let easy = handle.pointer
        self.easy = easy
        library.easyReset(easy)

        let body = [UInt8](request.body)
        let bodyBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(body.count, 1), alignment: 1)
        bodyBuffer.copyBytes(from: body)
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: CurlLibrary.errorBufferSize)
        errorBuffer.initialize(repeating: 0, count: CurlLibrary.errorBufferSize)
        var headerList: OpaquePointer?
        defer {
            library.slistFreeAll(headerList)
            bodyBuffer.deallocate()
            errorBuffer.deallocate()
        }
        for (name, value) in request.headers {
            // Header injection: a value with a line break would start a new header.
            if value.contains(where: { $0 == "\r" || $0 == "\n" }) || name.contains(where: { $0 == "\r" || $0 == "\n" || $0 == ":" }) {
                continue
            }
            let lower = name.lowercased()
            if lower == "host" || lower == "content-length" || lower == "transfer-encoding" || lower == "connection" { continue }
            headerList = library.slistAppend(headerList, "\(name): \(value)")
        }
        // No `Expect: 100-continue` round trip before a large body.
        headerList = library.slistAppend(headerList, "Expect:")

        let me = Unmanaged.passUnretained(self).toOpaque()
        let I = library.setoptInteger, P = library.setoptPointer
        typealias O = CurlLibrary.Option
        // libcurl copies string options; the header list, body and error buffer live until after perform.
        _ = url.absoluteString.withCString { P(easy, O.url, $0) }
        _ = I(easy, O.noSignal, 1)
        _ = P(easy, O.errorBuffer, errorBuffer)
        _ = P(easy, O.httpHeader, headerList.map { UnsafeRawPointer($0) })
        let method = request.method
        if method == "POST" || !body.isEmpty {
            _ = I(easy, O.post, 1)
            _ = I(easy, O.postFieldSizeLarge, body.count)
            _ = P(easy, O.postFields, UnsafeRawPointer(bodyBuffer.baseAddress))
        }
        if method != "POST" && method != "GET" {
            _ = method.withCString { P(easy, O.customRequest, $0) }
        }
        if let caFile = ProcessInfo.processInfo.environment["SSL_CERT_FILE"], !caFile.isEmpty {
            _ = caFile.withCString { P(easy, O.caInfo, $0) }
        }
        let bounded = connectTimeout.isFinite ? max(0.001, min(connectTimeout, 86_400)) : 86_400
        _ = I(easy, O.connectTimeoutMS, Int(bounded * 1000))
        _ = P(easy, O.writeFunction, unsafeBitCast(curlWrite, to: UnsafeRawPointer.self))
        _ = P(easy, O.writeData, me)
        _ = P(easy, O.headerFunction, unsafeBitCast(curlHeader, to: UnsafeRawPointer.self))
        _ = P(easy, O.headerData, me)
        _ = P(easy, O.xferInfoFunction, unsafeBitCast(curlXferInfo, to: UnsafeRawPointer.self))
        _ = P(easy, O.xferInfoData, me)
        _ = I(easy, O.noProgress, 0)

        lastActivity = .now
        let code = withExtendedLifetime(self) { library.easyPerform(easy) }
        let detail = errorBuffer[0] != 0 ? String(cString: errorBuffer) : library.strerror(code).map { String(cString: $0) } ?? "curl error \(code)"
        library.easyReset(easy)
        self.easy = nil
        CurlHandlePool.shared.give(handle, key: key, library: library)

        if task.isCancelled { return }
        if code == 0 {
            sendHead()
            sink.end(nil)
        } else if idleExpired {
            sink.end(PlainHTTPError(kind: .idleTimedOut, detail: "no data for \(idleTimeout) s"))
        } else {
            // After a linger abort the sink has already finished; this is then ignored.
            sink.end(PlainHTTPError(kind: Self.kind(ofCurlCode: code), detail: "\(detail) (\(url.host ?? ""))"))
        }
    }

    /// CURLcode numbers from curl's `include/curl/curl.h`.
    static func kind(ofCurlCode code: Int32) -> PlainHTTPError.Kind {
        switch code {
        case 5, 6: return .resolveFailed  // COULDNT_RESOLVE_PROXY, COULDNT_RESOLVE_HOST
        case 7: return .connectFailed  // COULDNT_CONNECT
        case 28: return .connectTimedOut  // OPERATION_TIMEDOUT: only the connect timeout is set
        case 35, 58, 59, 60, 77, 83, 90: return .tlsFailed  // SSL_CONNECT_ERROR … PEER_FAILED_VERIFICATION … PINNEDPUBKEYNOTMATCH
        case 1, 3, 8: return .badResponse  // UNSUPPORTED_PROTOCOL, URL_MALFORMAT, WEIRD_SERVER_REPLY
        default: return .connectionLost  // e.g. PARTIAL_FILE 18, GOT_NOTHING 52, SEND/RECV_ERROR 55/56, HTTP2 16/92
        }
    }

    /// Hands the head to the sink once, before the first body bytes.
    private func sendHead() {
        guard !headSent, let head = responseHead() else { return }
        headSent = true
        sink.head(head)
    }

    /// The head, built once when the body starts: status from libcurl, headers as received.
    fileprivate func responseHead() -> ResponseHead? {
        if let head { return head }
        var status = 0
        guard let easy, library.getinfoInteger(easy, CurlLibrary.infoResponseCode, &status) == 0, status > 0 else { return nil }
        head = ResponseHead(status: status, headers: headers)
        return head
    }

    fileprivate func receiveHeader(_ line: String) {
        lastActivity = .now
        let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("HTTP/") {
            // A new response head (after an interim 1xx): start over.
            headers = [:]
            head = nil
            return
        }
        guard head == nil, let colon = trimmed.firstIndex(of: ":") else { return }
        let name = trimmed[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
        let value = trimmed[trimmed.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        headers[name] = headers[name].map { "\($0), \(value)" } ?? value
    }

    /// False aborts the transfer.
    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if task.isCancelled { return false }
        lastActivity = .now
        sendHead()
        sink.body(Data(bytes))
        return true
    }

    /// Non-zero aborts the transfer: cancelled, lingered too long, or idle past the timeout.
    fileprivate func progress(uploaded: Int64) -> Int32 {
        if task.isCancelled { return 1 }
        let now = ContinuousClock.now
        if uploaded != lastUploaded {
            lastUploaded = uploaded
            lastActivity = now
        }
        if let since = task.lingerSince, since.duration(to: now) > .milliseconds(Int64(PlainHTTPTask.lingerSeconds * 1000)) { return 1 }
        let idle = lastActivity.duration(to: now)
        let limit = idleTimeout.isFinite ? max(0, min(idleTimeout, 86_400)) : 86_400
        if idle > .milliseconds(Int64(limit * 1000)) {
            idleExpired = true
            return 1
        }
        return 0
    }
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

private let curlHeader: CurlLibrary.DataCallback = { data, size, count, user in
    let (total, overflow) = size.multipliedReportingOverflow(by: count)
    guard !overflow, let transfer = transfer(user) else { return 0 }
    guard let data, total > 0 else { return total }
    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: total), as: UTF8.self)
    transfer.receiveHeader(line)
    return total
}

private let curlXferInfo: CurlLibrary.XferInfoCallback = { user, _, _, _, uploaded in
    transfer(user)?.progress(uploaded: uploaded) ?? 1
}
#endif
