import AgentRPCProtocol
import Foundation
import Testing

@testable import AgentRPC

private func entry(_ id: String, _ content: TranscriptContent, turn: String? = nil) -> TranscriptEntry {
    TranscriptEntry(id: id, turnId: turn, content)
}
private func prompt(_ id: String, turn: String? = nil) -> TranscriptEntry { entry(id, .prompt(text: id, images: nil), turn: turn) }
private func answer(_ id: String, turn: String? = nil) -> TranscriptEntry {
    entry(id, .response(text: id, profile: "p", incomplete: false), turn: turn)
}
private func calls(_ id: String, _ callIDs: [String], turn: String? = nil) -> TranscriptEntry {
    entry(id, .toolCalls(calls: callIDs.map { ToolCallRecord(callId: $0, name: "read", arguments: [:]) }, profile: "p", text: nil), turn: turn)
}
private func output(_ id: String, _ callID: String, _ content: JSONValue = "result", turn: String? = nil) -> TranscriptEntry {
    entry(id, .toolOutput(callId: callID, name: "read", outcome: .ok, content: content, profile: "p"), turn: turn)
}

@Suite struct CompactionCutTests {
    /// keepLast 2 lands between a call and its outputs: the cut moves back to
    /// the call, so the whole exchange is kept.
    @Test func aToolCallIsNeverPartedFromItsOutputs() {
        let entries = [prompt("e1"), answer("e2"), prompt("e3"), calls("e4", ["c1", "c2"]), output("e5", "c1"), output("e6", "c2")]
        #expect(CompactionCut.index(in: entries, keepLast: 2, protectFrom: nil, toPrompt: false) == 3)
        #expect(CompactionCut.index(in: entries, keepLast: 1, protectFrom: nil, toPrompt: false) == 3)
        #expect(CompactionCut.index(in: entries, keepLast: 3, protectFrom: nil, toPrompt: false) == 3)
        #expect(CompactionCut.index(in: entries, keepLast: 4, protectFrom: nil, toPrompt: false) == 2)
    }

    /// Reasoning goes back to the model with the reply after it: they stay together.
    @Test func reasoningStaysWithItsReply() {
        let entries = [prompt("e1"), answer("e2"), prompt("e3"), entry("e4", .reasoning(text: "r", profile: "p", signature: "s")), answer("e5")]
        #expect(CompactionCut.index(in: entries, keepLast: 1, protectFrom: nil, toPrompt: false) == 3)
    }

    /// Nothing of the running turn is summarized, however small keepLast is;
    /// the hook's cut goes back to a prompt; a lone summary is not summarized again.
    @Test func theRunningTurnAPromptBoundaryAndALoneSummary() {
        let entries = [prompt("e1", turn: "t1"), answer("e2", turn: "t1"), prompt("e3", turn: "t2"), calls("e4", ["c1"], turn: "t2"), output("e5", "c1", turn: "t2")]
        #expect(CompactionCut.index(in: entries, keepLast: 0, protectFrom: 2, toPrompt: false) == 2)
        #expect(CompactionCut.index(in: entries, keepLast: 0, protectFrom: 0, toPrompt: false) == nil)
        #expect(CompactionCut.index(in: entries, keepLast: 1, protectFrom: nil, toPrompt: true) == 2)
        let summarized = [entry("e9", .summary(text: "s")), prompt("e3"), answer("e4")]
        #expect(CompactionCut.index(in: summarized, keepLast: 2, protectFrom: nil, toPrompt: false) == nil)
        #expect(CompactionCut.index(in: summarized, keepLast: 1, protectFrom: nil, toPrompt: false) == 2)
        #expect(CompactionCut.index(in: [], keepLast: 0, protectFrom: nil, toPrompt: false) == nil)
    }

    /// The oldest outputs of the running turn are elided, never the latest
    /// call's, never one already elided, never one shorter than the note.
    @Test func elisionsTakeTheOldestOutputsOfTheTurnOnce() throws {
        let long = JSONValue.string(String(repeating: "x", count: 400))
        var entries = [
            prompt("e1", turn: "t"), calls("e2", ["c1"], turn: "t"), output("e3", "c1", long, turn: "t"), calls("e4", ["c2"], turn: "t"),
            output("e5", "c2", "short", turn: "t"), calls("e6", ["c3"], turn: "t"), output("e7", "c3", long, turn: "t"),
        ]
        let (operations, saved, count) = TurnRunner.elisions(in: entries, from: 0, toSave: 1_000)
        #expect(count == 1 && saved > 50)
        guard case .replace(let id, let elided)? = operations.first else {
            Issue.record("expected one replacement")
            return
        }
        #expect(id == "e3")
        if case .toolOutput(_, _, _, let content, _, _, _) = elided.content {
            #expect(content == .string(TurnRunner.elisionNote(characters: 400)))
        }
        entries = try TranscriptOperations.apply(operations, to: entries)
        #expect(TurnRunner.elisions(in: entries, from: 0, toSave: 1_000).count == 0)
    }
}

@Suite struct CompactionTranscriptTests {
    private func conversation() throws -> (Transcript, RecordingJournal) {
        let journal = RecordingJournal()
        var t = Transcript(properties: [:])
        t.journal = journal
        for i in 0..<3 {
            try t.append(.prompt(text: "q\(i)", images: nil), turn: "t\(i)")
            try t.append(.response(text: "a\(i)", profile: "p", incomplete: false), turn: "t\(i)")
        }
        return (t, journal)
    }

    /// A compaction is one revision that keeps what it removed; undoing it puts
    /// back exactly those entries; the journal's lines replay both, and a
    /// snapshot carries what is undoable.
    @Test func aCompactionIsUndoneExactlyAndReplays() throws {
        var (t, journal) = try conversation()
        let before = t.entries
        let summary = try t.compact(removing: ["e1", "e2", "e3", "e4"], summary: "they talked")
        #expect(t.entries.map(\.id) == [summary.id, "e5", "e6"] && summary.id == "e7")
        #expect(t.revision == 7 && t.compactions.count == 1)
        #expect(t.summaryHolding { $0.id == "e2" } == summary.id && t.summaryHolding { $0.id == "e6" } == nil)
        try t.recordUsage(Usage(inputTokens: 5, outputTokens: 2, contextTokens: 9))

        // The lines, written and read back, rebuild the compacted state.
        var replayed = Transcript(properties: [:])
        for change in journal.changes {
            let line = try JournalCodec.line(for: change, at: Date())
            guard case .change(let read, let at) = try JournalCodec.decodeRecord(Array(line.dropLast())) else {
                Issue.record("not a change")
                return
            }
            try replayed.replay(read, at: at)
        }
        #expect(replayed.entries == t.entries && replayed.compactions == t.compactions && replayed.revision == t.revision)
        #expect(replayed.usageTotals == Usage(inputTokens: 5, outputTokens: 2, contextTokens: 9))

        // A snapshot keeps the compaction undoable.
        let snapshotLine = try JournalCodec.snapshotLine(t, at: Date())
        guard case .snapshot(var loaded) = try JournalCodec.decodeRecord(Array(snapshotLine.dropLast())) else {
            Issue.record("not a snapshot")
            return
        }
        #expect(loaded.compactions == t.compactions)
        try loaded.undoCompaction(summary.id)
        try t.undoCompaction(summary.id)
        #expect(t.entries == before && loaded.entries == before)
        #expect(t.compactions.isEmpty && t.revision == 8)
        #expect(throws: (any Error).self) { try t.undoCompaction(summary.id) }
    }

    /// A summary of a summary: the older one is found under the newer one.
    @Test func summariesNest() throws {
        var (t, _) = try conversation()
        let first = try t.compact(removing: ["e1", "e2"], summary: "one")
        let second = try t.compact(removing: [first.id, "e3", "e4"], summary: "two")
        #expect(t.entries.map(\.id) == [second.id, "e5", "e6"])
        #expect(t.summaryHolding { $0.id == "e1" } == second.id)
        try t.undoCompaction(second.id)
        #expect(t.entries.map(\.id) == [first.id, "e3", "e4", "e5", "e6"])
        try t.undoCompaction(first.id)
        #expect(t.entries.map(\.id) == ["e1", "e2", "e3", "e4", "e5", "e6"])
    }

    /// The model reads a summary as the user's note of what came before.
    @Test func aSummaryReachesTheModelAsAUserMessage() {
        let messages = ModelHistory.messages(from: [entry("s", .summary(text: "they talked")), prompt("e3")])
        #expect(messages == [
            .user(text: ModelHistory.summaryText("they talked"), images: []),
            .user(text: "e3", images: []),
        ])
        #expect(ModelHistory.summaryText("x").hasSuffix("\n\nx"))
    }
}
