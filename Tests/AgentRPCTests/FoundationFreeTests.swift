import Foundation
import CLinkedICU
import Testing

@testable import AgentRPC

/// What replaced Foundation in the engine's own directories, compared with what
/// Foundation gave (the tests may keep Foundation; the binary must not load it).
@Suite struct FoundationFreeTests {
    // MARK: patterns (ICU through its C API)

    static let patterns = ["a+", "(a+)+$", "^x", "b$", "\\d{3}", "[[:alpha:]]+", "\\p{L}+", "(?i)ABC", "\\bword\\b", "é", "\\r\\n|\\n", "(?<n>x)\\k<n>"]
    static let texts = ["", "aaa", "xa\nb", "123 4567", "Café crème", "abc ABC", "a word, words", "e\u{301}é", "l1\r\nl2\nl3", "😀 x😀x"]

    @Test func matchesAreNSRegularExpressions() throws {
        for pattern in Self.patterns {
            for options in [BoundedRegex.Options(), [.anchorsMatchLines], [.caseInsensitive, .anchorsMatchLines]] {
                var nsOptions: NSRegularExpression.Options = []
                if options.contains(.caseInsensitive) { nsOptions.insert(.caseInsensitive) }
                if options.contains(.anchorsMatchLines) { nsOptions.insert(.anchorsMatchLines) }
                let ours = try BoundedRegex(pattern, options: options)
                let theirs = try NSRegularExpression(pattern: pattern, options: nsOptions)
                for text in Self.texts {
                    let expected = theirs.matches(in: text, range: NSRange(location: 0, length: text.utf16.count)).map(\.range.location)
                    #expect(try ours.matchOffsets(in: text, limit: 1000) == expected, "\(pattern) on \(text.debugDescription)")
                    #expect(try ours.firstMatch(in: text) == !expected.isEmpty)
                    var replaced = ""
                    var rest = text.startIndex
                    for match in theirs.matches(in: text, range: NSRange(location: 0, length: text.utf16.count)) {
                        guard let r = Range(match.range, in: text) else { continue }
                        replaced += text[rest..<r.lowerBound] + "<>"
                        rest = r.upperBound
                    }
                    replaced += text[rest...]
                    #expect(try ours.replacingMatches(in: text, withLiteral: "<>") == replaced, "\(pattern) on \(text.debugDescription)")
                }
            }
        }
    }

    @Test func anInvalidPatternIsATypedErrorAndTheChecksSayWhich() {
        for pattern in ["", "(", "a{2,1}", "[z-a]", "\\", "*"] {
            #expect((try? NSRegularExpression(pattern: pattern)) == nil)
            #expect(throws: RegexCompileError.self) { try BoundedRegex(pattern) }
            #expect(BoundedRegex.problem(with: pattern) == "'\(pattern)' is not a valid regular expression")
        }
        #expect(BoundedRegex.problem(with: "a(b)c") == nil)
    }

    @Test func aCatastrophicPatternStopsAtItsBudget() throws {
        let regex = try BoundedRegex("(a+)+$")
        let start = ContinuousClock.now
        #expect(throws: RegexBudgetExceeded(pattern: "(a+)+$")) { try regex.firstMatch(in: String(repeating: "a", count: 40) + "!") }
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    @Test func aLibraryThatIsNotThereIsATypedError() {
        guard case .failure(let problem) = ICU.load("lib_NoSuchICU.so") else {
            // The symbols are already in the process (a static build, or ICU loaded by Foundation here).
            return
        }
        #expect(problem.message.contains("could not be loaded"))
    }

    @Test func theToolchainsICUHasEverySymbol() throws {
        let handle = try #require(dlopen(ICU.libraryName, RTLD_NOW | RTLD_LOCAL))
        for symbol in ICU.symbols { #expect(dlsym(handle, symbol) != nil, "\(symbol)") }
    }

    // MARK: session/list's query

    static let titles = [
        "Café au lait", "CAFE", "naïve résumé", "Straße", "STRASSE", "İstanbul", "istanbul", "Ελληνικά", "ΕΛΛΗΝΙΚΆ", "Ångström", "ﬁle", "Crème Brûlée",
        "日本語のテキスト", "emoji 😀 party", "Zoë", "coöperate", "Łódź", "Dvořák", "ǅemal", "e\u{301}te\u{301}",
    ]
    static let queries = ["cafe", "CAFÉ", "naive", "RESUME", "strasse", "straße", "istanbul", "ελληνικα", "angstrom", "file", "creme brulee", "テキスト", "😀", "zoe", "cooperate", "lodz", "dvorak", "dzemal", "été", "x"]

    @Test func theTitleSearchIsFoundationsOnTheseTitles() {
        var differences: [String] = []
        for title in Self.titles {
            for query in Self.queries {
                let expected = title.range(of: query, options: [.caseInsensitive, .diacriticInsensitive]) != nil
                if TitleSearch.contains(title, query) != expected { differences.append("\(title) / \(query): Foundation \(expected)") }
            }
        }
        // The known differences (docs/protocol.md): Foundation does not fold "ß" to "ss"
        // nor strip the stroke of "Ł"; full case folding and NFD do.
        #expect(differences.sorted() == Self.knownDifferences, "\(differences.sorted())")
    }

    static let knownDifferences: [String] = []

    // MARK: updatedAfter

    @Test(arguments: [
        "2026-01-31T12:00:00Z", "2026-01-31T12:00:00.123Z", "2026-01-31T12:00:00.123456789Z", "2026-01-31T12:00:00+02:00",
        "2026-01-31T12:00:00-05:30", "2026-01-31t12:00:00z", "2026-01-31 12:00:00Z", "2026-01-31T12:00Z", "2026-01-31", "2026-01-31T12:00:00",
        "2026-01-31T24:00:00Z", "2026-01-31T12:00:60Z", "garbage", "", " 2026-01-31T12:00:00Z", "2026-01-31T12:00:00.5+01:00", "2026-01-31T12:00:00.1234Z",
    ])
    func timesParseAsISO8601DateFormatterParsedThem(text: String) {
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        let expected = fractional.date(from: text) ?? plain.date(from: text)
        // Compared in whole milliseconds: a parsed time is the middle of its millisecond.
        #expect(StoredSessionFilter.parseTime(text).map(JournalCodec.millis) == expected.map(JournalCodec.millis))
    }

    /// A time shown, kept in a journal, read back and parsed from its text is the same
    /// millisecond every way. A `Date` keeps seconds since 2001, so a whole millisecond
    /// since 1970 came back a hair below its boundary for about one in eight thousand
    /// (1764329057.037 among them): shown and filtered 1 ms early after a reload, so a
    /// session could pass an `updatedAfter` taken from its own listing.
    @Test func aMillisecondSurvivesTheJournalTheTextAndTheFilter() {
        let start = 1_764_329_057_000
        for ms in start..<(start + 20_000) {
            let read = JournalCodec.date(millis: ms)
            #expect(JournalCodec.millis(read) == ms)
            let text = Timestamp.iso8601(read)
            #expect(text.hasSuffix(threeDigits(ms % 1000) + "Z"), "\(ms) shown as \(text)")
            #expect(StoredSessionFilter.parseTime(text).map(JournalCodec.millis) == ms)
            #expect(StoredSessionFilter.wholeMillis(read) == Int64(ms))
            if JournalCodec.millis(read) != ms { break }
        }
        // Times taken from the clock: what is shown is what the journal keeps.
        for step in 0..<20_000 {
            let live = Date(timeIntervalSince1970: 1_764_329_057 + Double(step) * 0.000_004_9)
            let text = Timestamp.iso8601(live)
            #expect(text.hasSuffix(threeDigits(JournalCodec.millis(live) % 1000) + "Z"), "\(live.timeIntervalSince1970) shown as \(text)")
        }
    }

    // MARK: child processes

    @Test func aChildsOutputAndStatusAreCollected() throws {
        let run = try SpawnedProcess.output("/bin/sh", arguments: ["-c", "echo hi; exit 3"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(run.status == 3)
        #expect(String(decoding: run.output, as: UTF8.self) == "hi\n")
        let child = try SpawnedProcess.run("/bin/sh", arguments: ["-c", "exec sleep 30"], environment: [:], standardInput: .null, standardOutput: .null)
        #expect(child.isRunning)
        child.signal(SIGTERM)
        #expect(child.waitUntilExit() == SIGTERM)
        #expect(throws: SpawnedProcess.SpawnError.self) { try SpawnedProcess.run("/no/such/program", arguments: [], environment: [:]) }
    }
}

extension FoundationFreeTests {
    /// scripts/package links in the ICU functions `ICU` uses, and CLinkedICU refers to
    /// each: the three lists are one.
    @Test func theStaticBuildLinksEveryICUFunctionTheEngineUses() throws {
        let root = #filePath.deletingLastPathComponent.deletingLastPathComponent.deletingLastPathComponent
        let script = try String(contentsOfFile: root + "/scripts/package", encoding: .utf8)
        let line = try #require(script.split(separator: "\n").first { $0.hasPrefix("icu_symbols=") })
        let listed = line.dropFirst("icu_symbols=\"".count).dropLast().split(separator: " ").map { "swift_" + $0 }
        #expect(listed == ICU.symbols)
        let shim = try String(contentsOfFile: root + "/Sources/CLinkedICU/LinkedICU.c", encoding: .utf8)
        let referred = shim.split(separator: "X(").dropFirst().compactMap { $0.split(separator: ")").first.map(String.init) }
            .filter { $0.hasPrefix("swift_") }
        #expect(referred == ICU.symbols)
        // The dynamic build has none linked in (it opens the library at the first pattern).
        for symbol in ICU.symbols { #expect(agentrpc_linked_icu_function(symbol) == nil || dlsym(nil, symbol) != nil) }
    }
}

/// Three digits, zero-padded (a millisecond in RFC 3339 text).
private func threeDigits(_ value: Int) -> String {
    let digits = String(value)
    return String(repeating: "0", count: max(0, 3 - digits.count)) + digits
}
