import Foundation
import Testing

@testable import AgentRPC

/// essB's replacements of Foundation calls in the providers, cassettes and MCP client,
/// each compared with the Foundation call it replaces (tests may keep Foundation).
@Suite struct FoundationParityTests {
    /// The HTTP-date parser gives the `DateFormatter` it replaced (en_US_POSIX, GMT, the
    /// three formats tried in turn) on well-formed dates of each form and on near misses.
    @Test func httpDatesParseAsDateFormatterParsedThem() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        func old(_ text: String) -> Date? {
            for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
                formatter.dateFormat = format
                if let date = formatter.date(from: text) { return date }
            }
            return nil
        }
        var inputs = [
            "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun Nov 6 08:49:37 1994",
            "Sun, 6 Nov 1994 08:49:37 GMT", "sun, 06 nov 1994 08:49:37 GMT", "SUN, 06 NOV 1994 08:49:37 GMT",
            "Mon, 06 Nov 1994 08:49:37 GMT", "Thu, 29 Feb 2024 23:59:59 GMT", "Sat, 01 Jan 2000 00:00:00 GMT",
            "Friday, 31-Dec-99 23:59:59 GMT", "Tuesday, 01-Jan-30 00:00:00 GMT", "Wednesday, 15-Jul-45 12:00:00 GMT",
            "Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Thu, 01 Jan 1970 00:00:00 GMT",
            "", "soon", "12", "Sun, 06 Nov 1994", "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Xyz 1994 08:49:37 GMT",
            "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT", "Sun, 06 Nov 1994 08:60:37 GMT",
            "Sun, 30 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT x", "Sun 06 Nov 1994 08:49:37 GMT",
            "Sun,06 Nov 1994 08:49:37 GMT", "Sunday 06-Nov-94 08:49:37 GMT", "Sunday,06-Nov-94 08:49:37 GMT", "Sun,  06 Nov 1994 08:49:37 GMT",
        ]
        for year in [1969, 1999, 2000, 2026, 2038, 2100] {
            for month in ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"] {
                inputs.append("Mon, 28 \(month) \(year) 13:07:09 GMT")
                inputs.append("Mon \(month) 9 13:07:09 \(year)")
            }
        }
        for yy in stride(from: 0, to: 100, by: 7) {
            inputs.append("Monday, 11-Mar-\(yy < 10 ? "0" : "")\(yy) 01:02:03 GMT")
        }
        for text in inputs {
            #expect(ProviderErrorMapper.parseHTTPDate(text) == old(text), "\(text)")
        }
    }

    @Test func headerNamesMatchAsCaseInsensitiveCompareMatchedThem() {
        let names = ["Content-Type", "content-type", "CONTENT-TYPE", "Content-Typ", "X-Api-Key", "x-api-key", "Straße", "STRASSE",
                     "strasse", "K", "\u{212A}", "k", "Ωmega", "ωMEGA", "ǅ", "ǆ", "", "a\u{301}", "\u{E1}", "İ", "i"]
        for a in names {
            for b in names {
                #expect(HTTPRequest.sameName(a, b) == (a.caseInsensitiveCompare(b) == .orderedSame), "\(a) \(b)")
            }
        }
    }

    /// The cassette registry's key: corelibs' `standardizingPath`, which resolves
    /// symbolic links, on absolute paths through links, dots and doubled slashes.
    @Test func pathsResolveAsStandardizingPathResolvedThem() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parity-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/real/sub", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/link", withDestinationPath: "real")
        try FileManager.default.createSymbolicLink(atPath: root + "/abs", withDestinationPath: root + "/real/sub")
        try FileManager.default.createSymbolicLink(atPath: root + "/up", withDestinationPath: "real/sub/..")
        try FileManager.default.createSymbolicLink(atPath: root + "/loop", withDestinationPath: "loop")
        try FileManager.default.createSymbolicLink(atPath: root + "/dangling", withDestinationPath: root + "/nowhere")
        try FileManager.default.createSymbolicLink(atPath: root + "/tmp", withDestinationPath: "/tmp")
        let inputs = [
            "/", "//", "/a/b/", "/a//b/./c", "/a/b/../c", "/../x", "/a/..", "/./.", root, root + "/link", root + "/link/sub/x.jsonl",
            root + "/link/../x", root + "/./real//sub/../sub/x.jsonl", root + "/abs/x", root + "/abs/../y", root + "/up/z",
            root + "/nonexistent/../real/x", root + "/real/sub/./", root + "/link/", root + "/loop/x",
            root + "/dangling/x", root + "/tmp/x", root + "/tmp/../y",
        ]
        for path in inputs {
            #expect(path.resolvingPathLikeFoundation == (path as NSString).standardizingPath, "\(path)")
        }
    }

    @Test func fileBytesReadWhatFileHandleRead() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("parity-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let content = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try Data(content).write(to: URL(fileURLWithPath: path))
        #expect(FileBytes.read(path, upTo: 1_000_000) == content)
        #expect(FileBytes.read(path, upTo: 70_000) == Array(content.prefix(70_000)))
        #expect(FileBytes.read(path, upTo: 0) == [])
        #expect(FileBytes.read(path + ".missing", upTo: 10) == nil)
        #expect(FileBytes.byte(path, at: 199_999) == content[199_999])
        #expect(FileBytes.byte(path, at: 0) == content[0])
        #expect(FileBytes.byte(path, at: 200_000) == nil)
        #expect(FileBytes.byte(path, at: -1) == nil)
    }
}

extension FoundationParityTests {
    /// `PathKind` answers as `fileExists(atPath:isDirectory:)` did (links followed), and
    /// `entries(under:)` lists what `enumerator(atPath:)` listed (links to directories
    /// not descended into).
    @Test func pathKindsAndEntriesAreFileManagers() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parity-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/a/b/c", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/.hidden", withIntermediateDirectories: true)
        for file in ["x.jsonl", "a/y.jsonl", "a/b/c/z.jsonl", ".hidden/h.jsonl", "a/b/other.txt"] {
            try Data("{}\n".utf8).write(to: URL(fileURLWithPath: root + "/" + file))
        }
        try FileManager.default.createSymbolicLink(atPath: root + "/dirlink", withDestinationPath: root + "/a")
        try FileManager.default.createSymbolicLink(atPath: root + "/filelink.jsonl", withDestinationPath: root + "/x.jsonl")
        try FileManager.default.createSymbolicLink(atPath: root + "/dangling", withDestinationPath: root + "/nowhere")
        for path in [root, root + "/a", root + "/x.jsonl", root + "/dirlink", root + "/filelink.jsonl", root + "/dangling", root + "/missing", "/dev/null"] {
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            #expect(PathKind.of(path) == (exists ? (isDirectory.boolValue ? .directory : .other) : nil), "\(path)")
        }
        var listed: [String] = []
        let enumerator = try #require(FileManager.default.enumerator(atPath: root))
        while let relative = enumerator.nextObject() as? String { listed.append(relative) }
        #expect(PathKind.entries(under: root).sorted() == listed.sorted())
        #expect(PathKind.entries(under: root + "/missing").isEmpty)
        #expect(PathKind.entries(under: root, limit: 3).count == 3)
    }

    @Test func theTemporaryDirectoryIsNSTemporaryDirectorys() {
        #expect(systemTemporaryDirectory == NSTemporaryDirectory())
    }

    @Test func trimmingScalarsIsTrimmingCharacters() {
        for text in ["", "\r", "\r\r", "a\r", "\ra", "\r\na\r", "a\r\n", "\r\u{301}x\r", "x\u{301}\r", "\ra\rb\r"] {
            #expect(text.trimmingScalars { $0 == "\r" } == text.trimmingCharacters(in: CharacterSet(charactersIn: "\r")), "\(text.debugDescription)")
        }
    }
}

/// Errors of each kind `localizedDescriptionLikeFoundation` tells apart.
private enum PayloadError: Error { case plain, carrying(Int) }
private struct PlainError: Error {}
private struct DescribedError: Error, CustomStringConvertible { var description: String { "described" } }
private struct NamedError: LocalizedError { var errorDescription: String? { "named" } }
private struct UnnamedError: LocalizedError {}
private enum ParityKey: CodingKey { case key }

extension FoundationParityTests {
    @Test func errorTextIsLocalizedDescription() throws {
        var errors: [any Error] = [PayloadError.plain, PayloadError.carrying(3), PlainError(), DescribedError(), NamedError(), UnnamedError()]
        errors += (0...5000).map { CocoaError(CocoaError.Code(rawValue: $0)) }
        errors += [CocoaError(.fileReadNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "given"]),
                   CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedFailureReasonErrorKey: "because"]),
                   CocoaError(.fileReadUnknown, userInfo: [NSUnderlyingErrorKey: POSIXError(.EIO), NSFilePathErrorKey: "/x"])]
        errors += (1...133).compactMap { POSIXErrorCode(rawValue: $0).map { POSIXError($0) } }
        let context = DecodingError.Context(codingPath: [], debugDescription: "x")
        errors += [DecodingError.keyNotFound(ParityKey.key, context), DecodingError.valueNotFound(Int.self, context),
                   DecodingError.typeMismatch(Int.self, context), DecodingError.dataCorrupted(context),
                   EncodingError.invalidValue(1, EncodingError.Context(codingPath: [], debugDescription: "x"))]
        // What the file system really throws.
        let missing = "/nonexistent-\(UUID().uuidString)/x"
        for attempt in [
            { try Data([1]).write(to: URL(fileURLWithPath: missing)) },
            { _ = try Data(contentsOf: URL(fileURLWithPath: missing)) },
            { _ = try String(contentsOfFile: missing, encoding: .utf8) },
            { try FileManager.default.removeItem(atPath: missing) },
            { try FileManager.default.createDirectory(atPath: "/proc/parity/x", withIntermediateDirectories: true) },
            { _ = try FileManager.default.contentsOfDirectory(atPath: missing) },
        ] as [() throws -> Void] {
            do { try attempt() } catch { errors.append(error) }
        }
        for error in errors {
            #expect(error.localizedDescriptionLikeFoundation == error.localizedDescription, "\(error)")
        }
    }
}
