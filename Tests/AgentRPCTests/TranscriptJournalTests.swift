import AgentRPCProtocol
import Foundation
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

    /// A refused change is not made, and the error reaches the caller.
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

    /// While a session is loaded its summary cache is written at the first sync
    /// and then at most once per `summaryInterval`, and always at close; a stale
    /// cache is never shown (the listing reads the journal instead).
    @Test func theSummaryCacheIsWrittenSparinglyAndNeverShownStale() throws {
        let dir = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-journal-\(UUID().uuidString)/store")
        defer { try? FileManager.default.removeItem(atPath: (dir as NSString).deletingLastPathComponent) }
        let store = JournalStore(directory: dir, logger: Logger(level: .off), summaryInterval: UInt64.max)
        func cachedEntryCount() throws -> Int? {
            try JSONValue.parse(Array(try Data(contentsOf: URL(fileURLWithPath: dir + "/s-sum.summary"))))["entryCount"]?.intValue
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
