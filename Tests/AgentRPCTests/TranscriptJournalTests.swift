import AgentRPCProtocol
import Foundation
import Synchronization
import Testing

@testable import AgentRPC

/// A journal that keeps records in memory, and can be told to refuse them.
private final class MemoryJournal: TranscriptJournal, @unchecked Sendable {
    private let lock = NSLock()
    private var _changes: [TranscriptChange] = []
    private var _rewrites = 0
    private var _refusing = false
    var changes: [TranscriptChange] { lock.withLock { _changes } }
    var rewrites: Int { lock.withLock { _rewrites } }
    var refusing: Bool {
        get { lock.withLock { _refusing } }
        set { lock.withLock { _refusing = newValue } }
    }

    func record(_ change: TranscriptChange, at date: Date) throws {
        try lock.withLock {
            if _refusing { throw RPCError(.storeUnavailable, "refused") }
            _changes.append(change)
        }
    }
    func sync(_ state: Transcript) throws {}
    func rewrite(_ state: Transcript) throws {
        try lock.withLock {
            if _refusing { throw RPCError(.storeUnavailable, "refused") }
            _rewrites += 1
        }
    }
}

private func prompt(_ text: String) -> TranscriptContent { .prompt(text: text, images: nil) }
private func response(_ text: String) -> TranscriptContent { .response(text: text, profile: "default", incomplete: false) }

@Suite struct TranscriptTests {
    /// Replaying what the journal received rebuilds exactly the live state.
    @Test func replayingTheJournalRebuildsTheState() throws {
        let journal = MemoryJournal()
        var live = Transcript(properties: ["a": 1])
        live.journal = journal
        let id = try live.beginTurn { "t-\($0)" }
        try live.append(prompt("one"), turn: id)
        try live.activateProfile("default")
        try live.recordUndo(UndoRecord(turnId: id, callId: "c1", name: "rm", undo: ["p": "x"]), turn: id)
        try live.append(response("ok"), turn: id)
        try live.endTurn(TurnEnd(turnId: id, status: .completed, stopReason: .completed, usage: Usage(inputTokens: 3, outputTokens: 4), undo: .committed))
        try live.keepUndoRecords([UndoRecord(turnId: id, callId: "c1", name: "rm", undo: ["p": "x"])])
        try live.mutate([.insert(after: nil, entries: [TranscriptEntry(id: "e3", turnId: nil, prompt("inserted"))])])
        try live.append(prompt("two"), turn: nil)  // skips e3, which a client took
        try live.setProperties(set: ["b": 2], remove: ["a", "missing"])

        var rebuilt = Transcript(properties: ["a": 1])
        for change in journal.changes { try rebuilt.replay(change, at: Date()) }
        #expect(rebuilt.entries == live.entries)
        #expect(rebuilt.entries.map(\.id) == ["e3", "e1", "e2", "e4"])
        #expect(rebuilt.revision == live.revision && rebuilt.revision == 4)
        #expect(rebuilt.nextEntryNumber == 5 && live.nextEntryNumber == 5)
        #expect(rebuilt.properties == ["b": 2])
        #expect(rebuilt.activeProfileName == "default")
        #expect(rebuilt.nextTurnNumber == 2 && rebuilt.openTurn == nil)
        #expect(rebuilt.usageTotals == Usage(inputTokens: 3, outputTokens: 4))
        #expect(rebuilt.committedUndo == live.committedUndo && rebuilt.committedUndo.count == 1)
    }

    /// Entry ids stay unique whichever way they are kept: only the highest
    /// generated number while ids are `e<N>` in rising order, the set of all of
    /// them after any other id; a fresh id skips a taken one either way, and a
    /// replayed entry whose id is taken is refused either way.
    @Test func entryIDsAreUniqueWhileGeneratedAndAfterOtherIDs() throws {
        func appended(_ id: String, next: Int) -> TranscriptChange {
            .entryAppended(TranscriptEntry(id: id, turnId: nil, prompt(id)), nextEntryNumber: next)
        }
        var t = Transcript(properties: [:])
        try t.append(prompt("one"), turn: nil)
        try t.append(prompt("two"), turn: nil)
        // A client's entry with the next generated id, at the end: the ids still rise.
        try t.mutate([.insert(after: "e2", entries: [TranscriptEntry(id: "e3", turnId: nil, prompt("client"))])])
        #expect(try t.append(prompt("four"), turn: nil).id == "e4")
        for taken in ["e4", "e2", "e1"] {
            #expect(throws: ReplayMismatch.self) { try t.replay(appended(taken, next: 9), at: Date()) }
        }
        // "e05" and "e" are not generated ids (no leading zero, a number): other ids, kept in the set.
        try t.replay(appended("e05", next: 5), at: Date())
        try t.replay(appended("e", next: 5), at: Date())
        try t.replay(appended("note", next: 5), at: Date())
        for taken in ["note", "e05", "e", "e4", "e1"] {
            #expect(throws: ReplayMismatch.self) { try t.replay(appended(taken, next: 9), at: Date()) }
        }
        #expect(try t.append(prompt("five"), turn: nil).id == "e5")
        // Rewritten to generated ids only, out of order: the set again; in order: the highest number.
        func entries(_ ids: String...) -> [TranscriptEntry] { ids.map { TranscriptEntry(id: $0, turnId: nil, prompt($0)) } }
        try t.mutate([.set(entries: entries("e7", "e1", "e2"))])
        #expect(throws: ReplayMismatch.self) { try t.replay(appended("e7", next: 9), at: Date()) }
        #expect(throws: ReplayMismatch.self) { try t.replay(appended("e2", next: 9), at: Date()) }
        try t.mutate([.set(entries: entries("e1", "e7"))])
        #expect(throws: ReplayMismatch.self) { try t.replay(appended("e7", next: 9), at: Date()) }
        try t.mutate([.set(entries: entries("e1", "e5", "e7"))])
        #expect(throws: ReplayMismatch.self) { try t.replay(appended("e1", next: 9), at: Date()) }
        try t.mutate([.set(entries: entries("e1", "e2", "e7"))])
        #expect(t.nextEntryNumber == 6)
        #expect(try t.append(prompt("six"), turn: nil).id == "e6")
        #expect(try t.append(prompt("eight"), turn: nil).id == "e8")
        #expect(t.entries.map(\.id) == ["e1", "e2", "e7", "e6", "e8"])
        // Read back from a snapshot: the same rules.
        var s = Transcript(snapshot: TranscriptSnapshot(
            entries: [TranscriptEntry(id: "e1", turnId: nil, prompt("a")), TranscriptEntry(id: "e3", turnId: nil, prompt("b"))],
            revision: 2, nextEntryNumber: 3, properties: [:], activeProfile: nil, nextTurnNumber: 1, usage: Usage(), committedUndo: [],
            updatedAt: Date()))
        #expect(try s.append(prompt("c"), turn: nil).id == "e4")
        #expect(throws: ReplayMismatch.self) { try s.replay(appended("e3", next: 9), at: Date()) }
    }

    /// A refused change is not made, and the error reaches the caller.
    /// An appended entry's id is written digit by digit: the text an
    /// interpolation makes, for every number of digits and the extremes.
    @Test func generatedEntryIDsAreTheirNumbersText() {
        var numbers = [0, 1, 9, 10, 99, 100, 12_345, Int.max, Int.min, -1, -10]
        var power = 1
        for _ in 0..<18 {
            power *= 10
            numbers += [power - 1, power, power + 1]
        }
        for number in numbers { #expect(Transcript.generatedID(number) == "e\(number)") }
    }

    @Test func aRefusedChangeLeavesTheStateAsItWas() throws {
        let journal = MemoryJournal()
        var t = Transcript(properties: [:])
        t.journal = journal
        try t.append(prompt("kept"), turn: nil)
        journal.refusing = true
        #expect(throws: RPCError.self) { try t.append(prompt("lost"), turn: nil) }
        #expect(throws: RPCError.self) { try t.setProperties(set: ["k": 1], remove: []) }
        #expect(throws: RPCError.self) { try t.mutate([.truncateAfter(id: nil)]) }
        #expect(t.entries.map(\.id) == ["e1"] && t.revision == 1 && t.properties.isEmpty)
    }

    /// A failed turn's cleanup happens even when the store refuses it; the next
    /// change the store takes rewrites the journal whole first.
    @Test func cleanupThatTheStoreRefusedIsRewrittenLater() throws {
        let journal = MemoryJournal()
        var t = Transcript(properties: [:])
        t.journal = journal
        try t.append(prompt("one"), turn: nil)
        try t.append(response("two"), turn: nil)
        journal.refusing = true
        t.mutateEvenIfUnjournaled([.truncateAfter(id: "e1")])
        #expect(t.entries.map(\.id) == ["e1"] && t.journalBehind)
        journal.refusing = false
        try t.append(prompt("three"), turn: nil)
        #expect(journal.rewrites == 1 && !t.journalBehind)
    }
}

@Suite struct JournalStoreTests {
    private func makeStore() throws -> (JournalStore, String) {
        let dir = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-journal-\(UUID().uuidString)/store")
        return (JournalStore(directory: dir, logger: Logger(level: .off)), dir)
    }

    private func header(_ id: String, _ config: SessionConfig = SessionConfig()) throws -> JournalHeader {
        JournalHeader(sessionID: id, createdAt: Date(), config: try config.forStorage().config)
    }

    @Test func aJournalOnDiskLoadsBackAndKeepsNoSecrets() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let config = SessionConfig(model: .inline(ModelConfig(provider: .openai, model: "m", apiKeyEnv: "KEY_VAR", headers: ["Authorization": "Bearer secret"])))
        let journal = try store.create(try header("s-a", config), config: config, initial: nil)
        var t = Transcript(properties: [:])
        t.journal = journal
        try t.append(prompt("hello"), turn: nil)
        try t.sync()
        journal.close()
        let text = try String(contentsOfFile: dir + "/s-a.jsonl", encoding: .utf8)
        #expect(!text.contains("secret") && text.contains("KEY_VAR"))
        let (reopened, contents) = try store.open("s-a")
        defer { reopened.close() }
        #expect(contents.transcript.entries == t.entries && contents.warnings.isEmpty)
        #expect(try store.summary("s-a")?.title == "hello")
    }

    /// The entries a record appended are handed back as their JSON text, sliced
    /// from the line written (their `entryAppended` events carry it: each entry
    /// is serialized once): for one record and for several in one write; the
    /// next record forgets them.
    @Test func aJournalHandsBackTheTextOfTheEntriesItsLastRecordAppended() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let journal = try store.create(try header("s-text"), config: SessionConfig(), initial: nil)
        defer { journal.close() }
        func text(_ entry: TranscriptEntry) -> [UInt8] {
            var bytes: [UInt8] = []
            entry.serialize(into: &bytes)
            return bytes
        }
        let first = TranscriptEntry(id: "e1", turnId: "t-1", prompt("hi \"you\" é"))
        let second = TranscriptEntry(id: "e2", turnId: "t-1", .response(text: "yo", profile: "p", incomplete: false))
        let third = TranscriptEntry(id: "e3", turnId: "t-1", .toolCalls(calls: [ToolCallRecord(callId: "c1", name: "n", arguments: ["a": [1, 2.5]])], profile: nil, text: nil))
        try journal.record(.entryAppended(first, nextEntryNumber: 2), at: Date())
        #expect(journal.writtenEntryText("e1").map(Array.init) == text(first))
        try journal.record([.turnStarted(turnId: "t-2", number: 2), .entryAppended(second, nextEntryNumber: 3), .entryAppended(third, nextEntryNumber: 4)], at: Date())
        #expect(journal.writtenEntryText("e1") == nil)
        #expect(journal.writtenEntryText("e2").map(Array.init) == text(second))
        #expect(journal.writtenEntryText("e3").map(Array.init) == text(third))
        try journal.record(.turnStarted(turnId: "t-3", number: 3), at: Date())
        #expect(journal.writtenEntryText("e3") == nil)
    }

    @Test func aSecondOpenIsLockedWithThePID() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let journal = try store.create(try header("s-b"), config: SessionConfig(), initial: nil)
        do {
            _ = try store.open("s-b")
            Issue.record("a second open must be refused")
        } catch let error as RPCError {
            #expect(error.kind == .sessionLocked && error.data["pid"] == .int(Int(getpid())))
        }
        #expect(try store.summary("s-b")?.locked == true)
        journal.close()
        let (again, _) = try store.open("s-b")
        again.close()
    }

    @Test func compactionKeepsTheState() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let journal = try store.create(try header("s-c"), config: SessionConfig(), initial: nil)
        var t = Transcript(properties: [:])
        t.journal = journal
        try t.append(prompt("keep"), turn: nil)
        let big = String(repeating: "x", count: 10_000)
        for i in 0..<20 {
            try t.mutate([.insert(after: nil, entries: [TranscriptEntry(id: "b\(i)", turnId: nil, prompt(big))])])
            try t.mutate([.remove(ids: ["b\(i)"])])
            try t.sync()
        }
        let lines = try String(contentsOfFile: dir + "/s-c.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(lines.count < 40, "compaction rewrote the journal as a snapshot")
        #expect(lines.contains { $0.contains(#""type":"snapshot""#) })
        journal.close()
        let (reopened, contents) = try store.open("s-c")
        reopened.close()
        #expect(contents.transcript.entries == t.entries && contents.transcript.revision == t.revision)
    }

    /// A session unloaded with more than `snapshotAtCloseRecords` records since
    /// its last snapshot is rewritten as one line; a shorter journal stays as it is.
    @Test func aLongJournalIsRewrittenAsASnapshotAtClose() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        func fill(_ id: String, turns: Int) throws -> Transcript {
            let journal = try store.create(try header(id), config: SessionConfig(), initial: nil)
            var t = Transcript(properties: [:])
            t.journal = journal
            for i in 0..<turns {
                let turn = try t.beginTurn { "t-\($0)" }
                try t.append(prompt("question \(i)"), turn: turn)
                try t.append(response("answer \(i)"), turn: turn)
                try t.endTurn(TurnEnd(turnId: turn, status: .completed, stopReason: .completed, usage: Usage(inputTokens: 2, outputTokens: 1), undo: .none))
            }
            try t.sync()
            journal.close(final: t)
            return t
        }
        let records = FileJournal.snapshotAtCloseRecords
        let long = try fill("s-long", turns: records / 4 + 1)
        let lines = try String(contentsOfFile: dir + "/s-long.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2 && lines[1].contains(#""type":"snapshot""#))
        let (reopened, contents) = try store.open("s-long")
        #expect(contents.transcript.entries == long.entries && contents.transcript.revision == long.revision)
        #expect(contents.transcript.usageTotals == long.usageTotals && contents.transcript.nextTurnNumber == long.nextTurnNumber)
        #expect(contents.recordsSinceSnapshot == 0)
        // Closed again without a new record: nothing to rewrite, the file stays.
        reopened.close(final: contents.transcript)
        #expect(try String(contentsOfFile: dir + "/s-long.jsonl", encoding: .utf8).split(separator: "\n").count == 2)
        #expect(try store.summary("s-long")?.entryCount == long.count)

        _ = try fill("s-short", turns: records / 4 - 1)
        let short = try String(contentsOfFile: dir + "/s-short.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(short.count == 1 + (records / 4 - 1) * 4)
    }

    /// While a session is loaded its summary in the index is written at create,
    /// at the first sync and then at most once per `summaryInterval`, and always
    /// at close; a stale one is never shown (the listing reads the journal instead).
    @Test func theSummaryIsWrittenSparinglyAndNeverShownStale() throws {
        let dir = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-journal-\(UUID().uuidString)/store")
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let store = JournalStore(directory: dir, logger: Logger(level: .off), summaryInterval: UInt64.max)
        /// The entry count of the index file's last line for the session.
        func cachedEntryCount() throws -> Int? {
            let text = try String(contentsOfFile: dir + "/" + SessionIndex.fileName, encoding: .utf8)
            let lines = try text.split(separator: "\n").map { try JSONValue.parse(String($0)) }
            return lines.last { $0["id"]?.stringValue == "s-sum" }?["entryCount"]?.intValue
        }
        let journal = try store.create(try header("s-sum"), config: SessionConfig(), initial: nil)
        var t = Transcript(properties: [:])
        t.journal = journal
        try t.append(prompt("first"), turn: nil)
        try t.sync()
        #expect(try cachedEntryCount() == 1)
        try t.append(response("second"), turn: nil)
        try t.sync()
        #expect(try cachedEntryCount() == 1, "not rewritten within the interval")
        journal.close(final: t)
        #expect(try cachedEntryCount() == 2, "rewritten at close")

        let (reopened, contents) = try store.open("s-sum")
        var again = contents.transcript
        try again.append(prompt("third"), turn: nil)
        try again.sync()
        try again.append(response("fourth"), turn: nil)
        try again.sync()
        #expect(try cachedEntryCount() == 3)
        #expect(try store.summary("s-sum")?.entryCount == 4, "a stale cache is not shown")
        #expect(try store.summary("s-sum")?.title == "first")
        reopened.close()
    }

    /// A long journal loads exactly as it was written, and a bad line deep
    /// inside still stops the load there.
    @Test func aLongJournalLoadsInOrderAndStopsAtABadLine() throws {
        let turns = 3000
        var bytes = JournalCodec.headerLine(JournalHeader(sessionID: "s-long", createdAt: Date(), config: ["title": "long"]))
        var lineStarts: [Int] = []
        var live = Transcript(properties: [:])
        let recorder = MemoryJournal()
        live.journal = recorder
        for i in 0..<turns {
            let turn = try live.beginTurn { "t-\($0)" }
            try live.append(prompt("question \(i)"), turn: turn)
            try live.append(response("answer \(i) é"), turn: turn)
            try live.endTurn(TurnEnd(turnId: turn, status: .completed, stopReason: .completed, usage: Usage(inputTokens: 1), undo: .none))
        }
        for change in recorder.changes {
            lineStarts.append(bytes.count)
            bytes += try JournalCodec.line(for: change, at: Date(timeIntervalSince1970: 1))
        }
        let loaded = try JournalCodec.load(bytes)
        #expect(loaded.warnings.isEmpty && loaded.tornBytes == 0)
        #expect(loaded.transcript.entries == live.entries && loaded.transcript.revision == live.revision)
        #expect(loaded.transcript.usageTotals == Usage(inputTokens: turns) && loaded.transcript.nextTurnNumber == turns + 1)
        #expect(loaded.recordsSinceSnapshot == turns * 4)

        // Line 3 * turns + 2 (1-based; the header is line 1) is made unreadable.
        let bad = 3 * turns
        var broken = bytes
        broken[lineStarts[bad]] = UInt8(ascii: "x")
        let cut = try JournalCodec.load(broken)
        #expect(cut.warnings.map(\.line) == [bad + 2])
        #expect(cut.transcript.entries == Array(live.entries.prefix(bad / 2)))
        #expect(cut.validLength == lineStarts[bad])
    }

    @Test func tornLastLineAndNewerFormat() throws {
        let lines: [String] = [
            #"{"type":"session","format":1,"sessionId":"s-d","createdAt":1,"config":{}}"#,
            #"{"type":"entryAppended","at":2,"nextEntry":2,"entry":{"id":"e1","type":"prompt","text":"hi"}}"#,
        ]
        let torn = Array((lines.joined(separator: "\n") + "\n" + #"{"type":"entryAppe"#).utf8)
        let loaded = try JournalCodec.load(torn)
        #expect(loaded.transcript.entries.map(\.id) == ["e1"] && loaded.warnings.isEmpty)
        #expect(loaded.tornBytes > 0 && loaded.validLength == torn.count - loaded.tornBytes)

        let newer = Array((lines[0].replacingOccurrences(of: #""format":1"#, with: #""format":7"#) + "\n").utf8)
        do {
            _ = try JournalCodec.load(newer)
            Issue.record("a newer format must be refused")
        } catch let error as RPCError {
            #expect(error.kind == .journalUnreadable && error.data["formatVersion"] == 7 && error.data["supportedVersion"] == 1)
            #expect(error.message.contains("7") && error.message.contains("1"))
        }
    }

    @Test func sessionIDsThatAreNotPlainAreRefused() {
        for bad in ["../x", "/abs", String(repeating: "a", count: 10_000), "-x", "a b", "", "a/b", "é"] {
            #expect(!SessionIDRule.isPlain(bad), "\(bad.prefix(20))")
        }
        #expect(SessionIDRule.isPlain("s-0123abcd-ef0"))
    }
}

/// The index `session/list` pages through (`SessionIndex`): rebuilt from the
/// journals whenever it is missing, cut short or older than a journal, and
/// never shown over a journal.
@Suite struct SessionIndexTests {
    private static let sessions = 2000

    /// Appends (sessions' syncs) and the rewrite a refresh starts once the file
    /// has grown: each takes the appender and the file's `flock`, and a rewrite
    /// that took them in the other order than an append waited for it forever.
    @Test func appendsAndRewritesNeverWaitForEachOther() throws {
        let dir = try makeStore(count: 0)
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let index = SessionIndex(directory: dir, logger: Logger(level: .off), readJournal: { _ in nil })
        index.refresh()
        let appending = Mutex(true)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            for i in 0..<20_000 { index.remove("gone-\(i)") }
            appending.withLock { $0 = false }
            finished.signal()
        }.start()
        Thread {
            // Every refresh past 1,000 appended lines rewrites the file.
            while appending.withLock({ $0 }) { index.refresh() }
            finished.signal()
        }.start()
        #expect(finished.wait(timeout: .now() + 60) == .success)
        #expect(finished.wait(timeout: .now() + 60) == .success)
    }

    /// A store of `count` one-turn journals written directly in the
    /// documented format, session i updated at i seconds past a base time.
    private func makeStore(count: Int = Self.sessions) throws -> String {
        let dir = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-index-\(UUID().uuidString)/store")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let base = 1_700_000_000_000
        for i in 0..<count {
            let id = String(format: "s-gen%05d", i)
            try Self.journal(id: id, at: base + i * 1000, prompt: "conversation \(i)", model: i % 3 == 0 ? "alpha" : "beta")
                .write(toFile: dir + "/\(id).jsonl", atomically: false, encoding: .utf8)
        }
        return dir
    }

    private static func journal(id: String, at: Int, prompt: String, model: String, turns: Int = 1) -> String {
        var lines = [JSONValue.object(["type": "session", "format": 1, "sessionId": .string(id), "createdAt": .int(at), "config": ["model": .string(model)]])]
        for t in 0..<turns {
            let turn = JSONValue.string("t-\(t + 1)")
            lines += [
                ["type": "turnStarted", "at": .int(at), "turnId": turn, "number": .int(t + 1)],
                ["type": "entryAppended", "at": .int(at), "nextEntry": .int(2 * t + 2), "entry": ["id": .string("e\(2 * t + 1)"), "turnId": turn, "type": "prompt", "text": .string(prompt)]],
                ["type": "entryAppended", "at": .int(at), "nextEntry": .int(2 * t + 3), "entry": ["id": .string("e\(2 * t + 2)"), "turnId": turn, "type": "response", "profile": "default", "text": "ok"]],
                ["type": "turnEnded", "at": .int(at + t), "turnId": turn, "status": "completed", "stopReason": "completed", "undo": "none", "usage": ["inputTokens": 1]],
            ]
        }
        return lines.map { String(decoding: $0.serialized(), as: UTF8.self) + "\n" }.joined()
    }

    /// Every page of `size`, as ids, through the cursors.
    private func pages(_ store: JournalStore, size: Int = 100, filter: StoredSessionFilter = StoredSessionFilter()) -> [[String]] {
        var out: [[String]] = []
        var after: ListPosition?
        while true {
            let page = store.page(after: after, count: size, filter: filter) { _ in false }
            if page.isEmpty { break }
            out.append(page.map(\.sessionID))
            guard let last = page.last else { break }
            after = ListPosition(updatedAt: last.updatedAt, sessionID: last.sessionID)
        }
        return out
    }

    @Test func aDeletedTruncatedOrStaleIndexIsRebuiltAndAnswersTheSamePages() throws {
        let dir = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let logger = Logger(level: .off)
        let expected = (0..<Self.sessions).reversed().map { String(format: "s-gen%05d", $0) }
        let first = pages(JournalStore(directory: dir, logger: logger))
        #expect(first.flatMap { $0 } == expected && first.count == Self.sessions / 100)
        let indexPath = dir + "/" + SessionIndex.fileName
        #expect(FileManager.default.fileExists(atPath: indexPath), "the first listing wrote the index")

        // Deleted: rebuilt from the journals.
        try FileManager.default.removeItem(atPath: indexPath)
        #expect(pages(JournalStore(directory: dir, logger: logger)) == first)
        #expect(FileManager.default.fileExists(atPath: indexPath), "rebuilt")
        // Cut short, mid-line: the missing sessions are read from their journals.
        let full = try Data(contentsOf: URL(fileURLWithPath: indexPath))
        try full.prefix(full.count / 2 + 7).write(to: URL(fileURLWithPath: indexPath))
        #expect(pages(JournalStore(directory: dir, logger: logger)) == first)
        // Emptied while a store that already read it is running.
        let running = JournalStore(directory: dir, logger: logger)
        #expect(pages(running) == first)
        try Data().write(to: URL(fileURLWithPath: indexPath))
        #expect(pages(running) == first)

        // Older than a journal: session 7 got a newer turn the index never heard of.
        try Self.journal(id: "s-gen00007", at: 1_700_000_000_000 + 7 * 1000, prompt: "renamed", model: "alpha", turns: 2)
            .write(toFile: dir + "/s-gen00007.jsonl", atomically: false, encoding: .utf8)
        for store in [JournalStore(directory: dir, logger: logger), running] {
            let summary = try #require(try store.summary("s-gen00007"))
            #expect(summary.entryCount == 4, "the journal wins over the index")
            #expect(pages(store).flatMap { $0 } == expected, "its last change is still the 7th oldest")
        }
    }

    @Test func filtersNarrowThePageAndStopAtTheTime() throws {
        let dir = try makeStore(count: 300)
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let store = JournalStore(directory: dir, logger: Logger(level: .off))
        let alpha = pages(store, filter: StoredSessionFilter(model: "alpha")).flatMap { $0 }
        #expect(alpha.count == 100 && alpha.first == "s-gen00297")
        let query = pages(store, filter: StoredSessionFilter(query: "CONVERSATION 12")).flatMap { $0 }
        #expect(query == ["s-gen00129", "s-gen00128", "s-gen00127", "s-gen00126", "s-gen00125", "s-gen00124", "s-gen00123", "s-gen00122", "s-gen00121", "s-gen00120", "s-gen00012"])
        let after = Date(timeIntervalSince1970: Double(1_700_000_000_000 + 289 * 1000) / 1000)
        let recent = pages(store, filter: StoredSessionFilter(model: "beta", updatedAfter: after)).flatMap { $0 }
        #expect(recent == ["s-gen00299", "s-gen00298", "s-gen00296", "s-gen00295", "s-gen00293", "s-gen00292", "s-gen00290"])
    }

    /// A session created, synced or deleted in one store is seen by another
    /// that already read the index (what it appends is read back).
    @Test func anotherStoreOnTheSameDirectorySeesChanges() throws {
        let dir = try makeStore(count: 300)
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let reader = JournalStore(directory: dir, logger: Logger(level: .off))
        #expect(pages(reader).first?.first == "s-gen00299")
        let writer = JournalStore(directory: dir, logger: Logger(level: .off))
        let journal = try writer.create(JournalHeader(sessionID: "s-new", createdAt: Date(), config: ["title": "fresh"]), config: SessionConfig(title: "fresh"), initial: nil)
        var t = Transcript(properties: [:])
        t.journal = journal
        try t.append(.prompt(text: "hi", images: nil), turn: nil)
        try t.sync()
        let top = try #require(reader.page(after: nil, count: 1, filter: StoredSessionFilter()) { _ in false }.first)
        #expect(top.sessionID == "s-new" && top.title == "fresh" && top.entryCount == 1 && top.locked)
        journal.close(final: t)
        #expect(try writer.delete("s-gen00299"))
        let next = pages(reader).flatMap { $0 }
        #expect(next.first == "s-new" && !next.contains("s-gen00299") && next.count == 300)
    }

    /// An idle journal holds no descriptor: the one a record opens is closed by the sync.
    @Test func anIdleJournalHoldsNoDescriptor() throws {
        let dir = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-index-\(UUID().uuidString)/store")
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let store = JournalStore(directory: dir, logger: Logger(level: .off))
        let journal = try store.create(JournalHeader(sessionID: "s-fd", createdAt: Date(), config: [:]), config: SessionConfig(), initial: nil)
        let file = try #require(journal as? FileJournal)
        #expect(!file.holdsDescriptor)
        var t = Transcript(properties: [:])
        t.journal = journal
        try t.append(.prompt(text: "hi", images: nil), turn: nil)
        #expect(file.holdsDescriptor)
        try t.sync()
        #expect(!file.holdsDescriptor)
        journal.close(final: t)
    }
}
