import CLinkedICU
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// ICU could not be found: a typed error where a pattern is compiled or a search folded,
/// never a crash.
package struct ICUUnavailable: Error, CustomStringConvertible, Sendable, Equatable {
    package var message: String
    package var description: String { message }
}

/// The few functions of ICU's C API the server needs (regular expressions with a progress
/// callback, normalization, case folding), found at their first use: in the binary itself
/// (the static package build links the library in: CLinkedICU's weak references), or in
/// the toolchain's `lib_FoundationICU`, opened with `dlopen` (the dynamic build). A server
/// that never compiles a pattern never loads ICU (a 40 MB library and its data).
package struct ICU: Sendable {
    /// The library the dynamic build opens; its symbols carry the `swift_` prefix.
    package static let libraryName = "lib_FoundationICU.so"

    typealias ErrorCode = Int32
    typealias RegexOpen = @convention(c) (UnsafePointer<UInt16>?, Int32, UInt32, UnsafeMutableRawPointer?, UnsafeMutablePointer<ErrorCode>?) -> OpaquePointer?
    typealias RegexClone = @convention(c) (OpaquePointer?, UnsafeMutablePointer<ErrorCode>?) -> OpaquePointer?
    typealias RegexClose = @convention(c) (OpaquePointer?) -> Void
    typealias RegexSetText = @convention(c) (OpaquePointer?, UnsafePointer<UInt16>?, Int32, UnsafeMutablePointer<ErrorCode>?) -> Void
    typealias RegexFindNext = @convention(c) (OpaquePointer?, UnsafeMutablePointer<ErrorCode>?) -> Int8
    typealias RegexOffset = @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<ErrorCode>?) -> Int32
    typealias MatchCallback = @convention(c) (UnsafeRawPointer?, Int32) -> Int8
    typealias FindProgressCallback = @convention(c) (UnsafeRawPointer?, Int64) -> Int8
    typealias SetMatchCallback = @convention(c) (OpaquePointer?, MatchCallback?, UnsafeRawPointer?, UnsafeMutablePointer<ErrorCode>?) -> Void
    typealias SetFindProgressCallback = @convention(c) (OpaquePointer?, FindProgressCallback?, UnsafeRawPointer?, UnsafeMutablePointer<ErrorCode>?) -> Void
    typealias ErrorName = @convention(c) (ErrorCode) -> UnsafePointer<CChar>?
    typealias NormalizerInstance = @convention(c) (UnsafeMutablePointer<ErrorCode>?) -> OpaquePointer?
    typealias Normalize = @convention(c) (OpaquePointer?, UnsafePointer<UInt16>?, Int32, UnsafeMutablePointer<UInt16>?, Int32, UnsafeMutablePointer<ErrorCode>?) -> Int32
    typealias FoldCase = @convention(c) (UnsafeMutablePointer<UInt16>?, Int32, UnsafePointer<UInt16>?, Int32, UInt32, UnsafeMutablePointer<ErrorCode>?) -> Int32

    let regexOpen: RegexOpen
    let regexClone: RegexClone
    let regexClose: RegexClose
    let regexSetText: RegexSetText
    let regexFindNext: RegexFindNext
    let regexStart: RegexOffset
    let regexEnd: RegexOffset
    let regexSetMatchCallback: SetMatchCallback
    let regexSetFindProgressCallback: SetFindProgressCallback
    let errorName: ErrorName
    let nfdInstance: NormalizerInstance
    let normalize: Normalize
    let foldCase: FoldCase

    /// Every symbol the server uses, so the static build can keep and export exactly these
    /// (scripts/package) and a test can check the library has them.
    package static let symbols = [
        "uregex_open", "uregex_clone", "uregex_close", "uregex_setText", "uregex_findNext", "uregex_start", "uregex_end",
        "uregex_setMatchCallback", "uregex_setFindProgressCallback", "u_errorName", "unorm2_getNFDInstance",
        "unorm2_normalize", "u_strFoldCase",
    ].map { "swift_" + $0 }

    /// ICU, loaded at the first call; the same answer for the life of the process.
    package static var shared: Result<ICU, ICUUnavailable> { loaded }
    private static let loaded = load(libraryName)

    /// Finds the functions linked into the binary (the static build), else in the process
    /// (ICU already loaded), else in `fileName` opened with `dlopen`.
    static func load(_ fileName: String) -> Result<ICU, ICUUnavailable> {
        if agentrpc_linked_icu_function(symbols[0]) != nil {
            return bind { agentrpc_linked_icu_function($0).map { UnsafeMutableRawPointer(mutating: $0) } }
        }
        var handle: UnsafeMutableRawPointer?
        if dlsym(nil, symbols[0]) == nil {
            guard let opened = dlopen(fileName, RTLD_NOW | RTLD_LOCAL) else {
                let reason = dlerror().map { String(cString: $0) } ?? "not found"
                return .failure(ICUUnavailable(message: "regular expressions need ICU, which could not be loaded (\(reason))"))
            }
            handle = opened
        }
        return bind { dlsym(handle, $0) }
    }

    /// ICU with each function `find` gives for its name.
    private static func bind(_ find: (String) -> UnsafeMutableRawPointer?) -> Result<ICU, ICUUnavailable> {
        func symbol<T>(_ index: Int, as type: T.Type) throws(ICUUnavailable) -> T {
            guard let raw = find(symbols[index]) else {
                throw ICUUnavailable(message: "regular expressions need ICU, whose \(symbols[index]) was not found")
            }
            return unsafeBitCast(raw, to: type)
        }
        do throws(ICUUnavailable) {
            return .success(ICU(
                regexOpen: try symbol(0, as: RegexOpen.self), regexClone: try symbol(1, as: RegexClone.self),
                regexClose: try symbol(2, as: RegexClose.self), regexSetText: try symbol(3, as: RegexSetText.self),
                regexFindNext: try symbol(4, as: RegexFindNext.self), regexStart: try symbol(5, as: RegexOffset.self),
                regexEnd: try symbol(6, as: RegexOffset.self), regexSetMatchCallback: try symbol(7, as: SetMatchCallback.self),
                regexSetFindProgressCallback: try symbol(8, as: SetFindProgressCallback.self), errorName: try symbol(9, as: ErrorName.self),
                nfdInstance: try symbol(10, as: NormalizerInstance.self), normalize: try symbol(11, as: Normalize.self),
                foldCase: try symbol(12, as: FoldCase.self)))
        } catch {
            return .failure(error)
        }
    }

    /// ICU's name of an error code ("U_REGEX_MISSING_CLOSE_PAREN").
    func name(of code: ErrorCode) -> String {
        errorName(code).map { String(cString: $0) } ?? "ICU error \(code)"
    }

    /// `text` decomposed (NFD) and case-folded (full folding), in UTF-16; nil on an ICU error.
    func foldedDecomposition(_ text: [UInt16]) -> [UInt16]? {
        var status: ErrorCode = 0
        guard let nfd = nfdInstance(&status), status <= 0, text.count < Int32.max / 4 else { return nil }
        func grow(_ fill: (UnsafeMutablePointer<UInt16>?, Int32, inout ErrorCode) -> Int32) -> [UInt16]? {
            var capacity = max(16, text.count * 2)
            for _ in 0..<2 {
                var out = [UInt16](repeating: 0, count: capacity)
                var status: ErrorCode = 0
                let length = Int(out.withUnsafeMutableBufferPointer { fill($0.baseAddress, Int32($0.count), &status) })
                if status <= 0 && length <= capacity { return Array(out[..<length]) }
                guard status == 15 /* U_BUFFER_OVERFLOW_ERROR */ else { return nil }
                capacity = length
            }
            return nil
        }
        guard let decomposed = grow({ dest, capacity, status in normalize(nfd, text, Int32(text.count), dest, capacity, &status) }) else { return nil }
        return grow { dest, capacity, status in foldCase(dest, capacity, decomposed, Int32(decomposed.count), 0, &status) }
    }
}
