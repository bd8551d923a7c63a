#if os(Linux)
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc

/// libcurl, resolved at run time from `libcurl.so.4`. Nothing in agentrpc links
/// it (the engine does not import FoundationNetworking on Linux, and
/// `scripts/package` fails when the release binary lists libcurl as needed), so
/// a system without it starts agentrpc and every request of an http or https
/// model provider ends with `HTTPTransportError.Kind.unavailable`.
///
/// ABI: `curl_easy_setopt` and `curl_easy_getinfo` are C variadic functions.
/// They are called here through fixed-arity `@convention(c)` pointers, which
/// passes the extra argument exactly as a variadic call would on Linux x86-64
/// and aarch64 *for 64-bit integer and pointer arguments* (general registers;
/// x86-64's `%al` vector-register count only decides whether the callee's
/// prologue spills vector registers, which it may do harmlessly). Only `long`,
/// `curl_off_t` and pointer values are ever passed — never a `double` — and
/// this file is compiled on Linux only.
///
/// `@unchecked Sendable`: immutable C function pointers; libcurl allows its
/// functions to be called from any thread as long as one handle is used by
/// one thread at a time, which `CurlHTTPTransport` ensures.
struct CurlLibrary: @unchecked Sendable {
    typealias EasyInit = @convention(c) () -> OpaquePointer?
    typealias HandleFunction = @convention(c) (OpaquePointer?) -> Void
    typealias SetoptInteger = @convention(c) (OpaquePointer?, Int32, Int) -> Int32
    typealias SetoptPointer = @convention(c) (OpaquePointer?, Int32, UnsafeRawPointer?) -> Int32
    typealias GetinfoInteger = @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<Int>?) -> Int32
    typealias Strerror = @convention(c) (Int32) -> UnsafePointer<CChar>?
    typealias SlistAppend = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> OpaquePointer?
    typealias GlobalInit = @convention(c) (Int) -> Int32
    typealias Version = @convention(c) () -> UnsafePointer<CChar>?
    typealias MultiInit = @convention(c) () -> OpaquePointer?
    typealias MultiCleanup = @convention(c) (OpaquePointer?) -> Int32
    typealias MultiHandle = @convention(c) (OpaquePointer?, OpaquePointer?) -> Int32
    typealias MultiPerform = @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?) -> Int32
    typealias MultiPoll = @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, UInt32, Int32, UnsafeMutablePointer<Int32>?) -> Int32
    typealias MultiWakeup = @convention(c) (OpaquePointer?) -> Int32
    typealias MultiInfoRead = @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?) -> UnsafeRawPointer?

    /// `size_t (*)(char *, size_t, size_t, void *)`: CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION.
    typealias DataCallback = @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int
    /// `int (*)(void *, curl_socket_t, curlsocktype)`: CURLOPT_SOCKOPTFUNCTION.
    typealias SockoptCallback = @convention(c) (UnsafeMutableRawPointer?, Int32, Int32) -> Int32
    /// `int (*)(void *, char *, char *, int, int)`: CURLOPT_PREREQFUNCTION.
    typealias PrereqCallback = @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<CChar>?, Int32, Int32) -> Int32
    /// `int (*)(void *, curl_socket_t)`: CURLOPT_CLOSESOCKETFUNCTION.
    typealias CloseSocketCallback = @convention(c) (UnsafeMutableRawPointer?, Int32) -> Int32

    /// The library's file name; errors name it.
    static let fileName = "libcurl.so.4"

    /// CURLINFO_LONG (0x200000) + 2; CURLINFO_SOCKET (0x500000) + 44; CURLINFO_OFF_T (0x600000) + 7.
    static let infoResponseCode: Int32 = 0x200000 + 2
    static let infoActiveSocket: Int32 = 0x500000 + 44
    static let infoSizeUploadT: Int32 = 0x600000 + 7
    /// CURL_GLOBAL_SSL | CURL_GLOBAL_WIN32.
    static let globalAll = 3
    /// CURL_ERROR_SIZE.
    static let errorBufferSize = 256
    /// CURLMSG_DONE.
    static let messageDone: Int32 = 1

    let version: String
    let easyInit: EasyInit
    let easyCleanup: HandleFunction
    let easyReset: HandleFunction
    var setoptInteger: SetoptInteger
    var setoptPointer: SetoptPointer
    let getinfoInteger: GetinfoInteger
    let strerror: Strerror
    let slistAppend: SlistAppend
    let slistFreeAll: HandleFunction
    let multiInit: MultiInit
    let multiAdd: MultiHandle
    let multiRemove: MultiHandle
    let multiPerform: MultiPerform
    let multiPoll: MultiPoll
    let multiWakeup: MultiWakeup
    let multiCleanup: MultiCleanup
    let multiInfoRead: MultiInfoRead

    /// Why libcurl cannot serve requests: it is not installed, too old, or
    /// lacks an option agentrpc sets.
    struct LoadError: Error, CustomStringConvertible, Sendable {
        var message: String
        var description: String { message }
    }

    /// Loads the library and checks every option agentrpc sets (`checkOptions`).
    static func load(_ fileName: String = fileName) -> Result<CurlLibrary, LoadError> {
        guard let handle = dlopen(fileName, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(LoadError(message: "cannot load \(fileName) (\(reason)); http and https model providers need libcurl installed"))
        }
        func symbol<T>(_ name: String, as type: T.Type) throws(LoadError) -> T {
            guard let raw = dlsym(handle, name) else {
                throw LoadError(message: "\(fileName) has no \(name); agentrpc needs libcurl 7.68 or newer")
            }
            return unsafeBitCast(raw, to: type)
        }
        do {
            let version = try symbol("curl_version", as: Version.self)
            let library = CurlLibrary(
                version: version().map { String(cString: $0) } ?? "libcurl",
                easyInit: try symbol("curl_easy_init", as: EasyInit.self),
                easyCleanup: try symbol("curl_easy_cleanup", as: HandleFunction.self),
                easyReset: try symbol("curl_easy_reset", as: HandleFunction.self),
                setoptInteger: try symbol("curl_easy_setopt", as: SetoptInteger.self),
                setoptPointer: try symbol("curl_easy_setopt", as: SetoptPointer.self),
                getinfoInteger: try symbol("curl_easy_getinfo", as: GetinfoInteger.self),
                strerror: try symbol("curl_easy_strerror", as: Strerror.self),
                slistAppend: try symbol("curl_slist_append", as: SlistAppend.self),
                slistFreeAll: try symbol("curl_slist_free_all", as: HandleFunction.self),
                multiInit: try symbol("curl_multi_init", as: MultiInit.self),
                multiAdd: try symbol("curl_multi_add_handle", as: MultiHandle.self),
                multiRemove: try symbol("curl_multi_remove_handle", as: MultiHandle.self),
                multiPerform: try symbol("curl_multi_perform", as: MultiPerform.self),
                multiPoll: try symbol("curl_multi_poll", as: MultiPoll.self),
                multiWakeup: try symbol("curl_multi_wakeup", as: MultiWakeup.self),
                multiCleanup: try symbol("curl_multi_cleanup", as: MultiCleanup.self),
                multiInfoRead: try symbol("curl_multi_info_read", as: MultiInfoRead.self))
            // Reference-counted in libcurl and thread-safe since 7.84 (a test process's FoundationNetworking may call it too).
            let globalInit = try symbol("curl_global_init", as: GlobalInit.self)
            guard globalInit(globalAll) == 0 else { return .failure(LoadError(message: "curl_global_init of \(fileName) failed")) }
            try library.checkOptions()
            return .success(library)
        } catch {
            return .failure(error)
        }
    }

    /// Sets every option a request can use, on a handle that is never
    /// performed: an option this libcurl lacks (or was built without) fails
    /// here once, naming it, instead of silently dropping a timeout or a check.
    func checkOptions() throws(LoadError) {
        guard let easy = easyInit() else { throw LoadError(message: "curl_easy_init of \(Self.fileName) failed") }
        defer { easyCleanup(easy) }
        // A PUT with a body, over http, with a CA file: every branch of `configure` runs.
        let probe = HTTPRequest(
            url: URL(string: "http://localhost/") ?? URL(fileURLWithPath: "/"), method: "PUT", headers: ["Accept": "*/*"], body: Data([0x7B]),
            connectTimeoutSeconds: 1, idleTimeoutSeconds: 1)
        let transfer = CurlTransfer(easy: easy, request: probe, sink: nil, control: CurlRequestControl(), library: self)
        defer { transfer.release(library: self) }
        if let failure = transfer.configure(url: probe.url.absoluteString, library: self, caFile: "/dev/null") {
            throw LoadError(message: "\(Self.fileName) (\(version)) does not support \(failure); agentrpc needs it for its http and https model providers")
        }
    }
}

/// One libcurl option agentrpc sets: its number (curl's `include/curl/curl.h`:
/// CURLOPTTYPE_LONG = 0, OBJECTPOINT/STRINGPOINT/SLISTPOINT = 10000,
/// FUNCTIONPOINT = 20000, OFF_T = 30000) and its name for error messages.
struct CurlOption: Sendable {
    let name: String
    let number: Int32

    static let writeData = CurlOption(name: "CURLOPT_WRITEDATA", number: 10_000 + 1)
    static let url = CurlOption(name: "CURLOPT_URL", number: 10_000 + 2)
    static let proxy = CurlOption(name: "CURLOPT_PROXY", number: 10_000 + 4)
    static let errorBuffer = CurlOption(name: "CURLOPT_ERRORBUFFER", number: 10_000 + 10)
    static let writeFunction = CurlOption(name: "CURLOPT_WRITEFUNCTION", number: 20_000 + 11)
    static let postFields = CurlOption(name: "CURLOPT_POSTFIELDS", number: 10_000 + 15)
    static let httpHeader = CurlOption(name: "CURLOPT_HTTPHEADER", number: 10_000 + 23)
    static let headerData = CurlOption(name: "CURLOPT_HEADERDATA", number: 10_000 + 29)
    static let customRequest = CurlOption(name: "CURLOPT_CUSTOMREQUEST", number: 10_000 + 36)
    static let post = CurlOption(name: "CURLOPT_POST", number: 47)
    static let followLocation = CurlOption(name: "CURLOPT_FOLLOWLOCATION", number: 52)
    static let sslVerifyPeer = CurlOption(name: "CURLOPT_SSL_VERIFYPEER", number: 64)
    static let caInfo = CurlOption(name: "CURLOPT_CAINFO", number: 10_000 + 65)
    static let headerFunction = CurlOption(name: "CURLOPT_HEADERFUNCTION", number: 20_000 + 79)
    static let sslVerifyHost = CurlOption(name: "CURLOPT_SSL_VERIFYHOST", number: 81)
    static let noSignal = CurlOption(name: "CURLOPT_NOSIGNAL", number: 99)
    static let postFieldSizeLarge = CurlOption(name: "CURLOPT_POSTFIELDSIZE_LARGE", number: 30_000 + 120)
    static let connectTimeoutMS = CurlOption(name: "CURLOPT_CONNECTTIMEOUT_MS", number: 156)
    static let sockoptFunction = CurlOption(name: "CURLOPT_SOCKOPTFUNCTION", number: 20_000 + 148)
    static let closeSocketFunction = CurlOption(name: "CURLOPT_CLOSESOCKETFUNCTION", number: 20_000 + 208)
    /// Since libcurl 7.80: set where available, never required (`setIfSupported`).
    static let prereqFunction = CurlOption(name: "CURLOPT_PREREQFUNCTION", number: 20_000 + 312)
    static let prereqData = CurlOption(name: "CURLOPT_PREREQDATA", number: 10_000 + 313)
}

/// Sets options on one easy handle and keeps the first failure.
struct CurlOptionSetter {
    let library: CurlLibrary
    let easy: OpaquePointer
    private(set) var failure: String?

    init(library: CurlLibrary, easy: OpaquePointer) {
        self.library = library
        self.easy = easy
    }

    mutating func set(_ option: CurlOption, _ value: Int) {
        check(option, library.setoptInteger(easy, option.number, value))
    }

    mutating func set(_ option: CurlOption, pointer: UnsafeRawPointer?) {
        check(option, library.setoptPointer(easy, option.number, pointer))
    }

    /// An option an older libcurl may not know: its refusal is not a failure.
    /// False when it was refused.
    @discardableResult
    func setIfSupported(_ option: CurlOption, pointer: UnsafeRawPointer?) -> Bool {
        library.setoptPointer(easy, option.number, pointer) == 0
    }

    /// libcurl copies string options.
    mutating func set(_ option: CurlOption, string: String?) {
        guard let string else { return set(option, pointer: nil) }
        let library = library, easy = easy
        check(option, string.withCString { library.setoptPointer(easy, option.number, $0) })
    }

    private mutating func check(_ option: CurlOption, _ code: Int32) {
        guard code != 0, failure == nil else { return }
        let reason = library.strerror(code).map { String(cString: $0) } ?? "error"
        failure = "\(option.name) (CURLcode \(code): \(reason))"
    }
}
#endif
