import AgentRPCProtocol
import Foundation
import Testing

@testable import AgentRPC

@Suite struct ApprovalRuleMatcherTests {
    let rule = ApprovalRule(id: "r1", tool: "write", arguments: ["path": "src/*", "force": false])

    @Test func matchesTheToolAndEveryListedArgument() {
        #expect(ApprovalRuleMatcher.matches(rule, tool: "write", arguments: ["path": "src/a.swift", "force": false, "extra": 1]))
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "move", arguments: ["path": "src/a.swift", "force": false]))
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "write", arguments: ["path": "Package.swift", "force": false]))
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "write", arguments: ["path": "src/a.swift", "force": true]))
        // A listed argument that is missing, or not a string under a glob, never matches.
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "write", arguments: ["path": "src/a.swift"]))
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "write", arguments: ["path": 5, "force": false]))
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "write", arguments: "src/a.swift"))
    }

    @Test func aRuleWithoutPatternsApprovesEveryCallOfItsTool() {
        let any = ApprovalRule(id: "r2", tool: "read")
        #expect(ApprovalRuleMatcher.matches(any, tool: "read", arguments: ["anything": [1, 2]]))
        #expect(ApprovalRuleMatcher.matches(any, tool: "read", arguments: .null))
        #expect(!ApprovalRuleMatcher.matches(any, tool: "reader", arguments: [:]))
    }

    @Test func overlongValuesNeverMatchAGlob() {
        let star = ApprovalRule(id: "r3", tool: "t", arguments: ["s": "*"])
        let long = String(repeating: "a", count: ApprovalRule.maxMatchedValueLength + 1)
        #expect(ApprovalRuleMatcher.matches(star, tool: "t", arguments: ["s": .string(String(long.dropLast()))]))
        #expect(!ApprovalRuleMatcher.matches(star, tool: "t", arguments: ["s": .string(long)]))
    }

    @Test func patternBoundsAreChecked() {
        #expect(ApprovalRuleMatcher.problem(in: nil) == nil)
        #expect(ApprovalRuleMatcher.problem(in: ["a": "x*"]) == nil)
        let long = String(repeating: "*", count: ApprovalRule.maxPatternLength + 1)
        #expect(ApprovalRuleMatcher.problem(in: ["a": .string(long)])?.path == ".a")
        var many: [String: JSONValue] = [:]
        for i in 0...ApprovalRule.maxPatternCount { many["k\(i)"] = "v" }
        #expect(ApprovalRuleMatcher.problem(in: many)?.path == "")
    }
}

@Suite struct BoundedGlobTests {
    @Test func globsMatchAsShellGlobs() {
        #expect(BoundedGlob.matches("src/*.swift", "src/a.swift", budget: 1000) == true)
        #expect(BoundedGlob.matches("a?c", "abc", budget: 1000) == true)
        #expect(BoundedGlob.matches("a?c", "ac", budget: 1000) == false)
        #expect(BoundedGlob.matches("*", "", budget: 1000) == true)
        #expect(BoundedGlob.matches("", "x", budget: 1000) == false)
    }

    @Test func aPathologicalPatternRunsOutOfBudgetInsteadOfMatching() {
        // After the star, each retry rescans the literal: |pattern|·|text| steps,
        // which the budget cuts short.
        let pattern = "*" + String(repeating: "a", count: 200) + "b"
        let text = String(repeating: "a", count: 4000)
        #expect(BoundedGlob.matches(pattern, text, budget: 10_000) == nil)
        #expect(BoundedGlob.matches("*b", "aaab", budget: 10_000) == true)
    }
}

/// Records what a transcript journals, so tests can see undo and compaction records reach the journal.
final class RecordingJournal: TranscriptJournal, @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [TranscriptChange] = []
    var changes: [TranscriptChange] { lock.withLock { recorded } }
    func record(_ change: TranscriptChange, at date: Date) throws { lock.withLock { recorded.append(change) } }
    func sync(_ state: Transcript) throws {}
    func rewrite(_ state: Transcript) throws {}
}

@Suite struct TranscriptUndoRecordTests {
    func record(_ turn: String, _ call: String) -> UndoRecord {
        UndoRecord(turnId: turn, callId: call, name: "write", undo: .string("\(turn)/\(call)"))
    }

    @Test func committedUndoRecordsAreJournaledKeptAndTaken() throws {
        let journal = RecordingJournal()
        var transcript = Transcript(properties: [:])
        transcript.journal = journal
        try transcript.keepUndoRecords([record("t1", "c1"), record("t2", "c1")])
        try transcript.keepUndoRecords([])
        #expect(transcript.committedUndo == [record("t1", "c1"), record("t2", "c1")])
        // Call ids repeat across turns: a rewind of t2 takes t2's record only.
        let taken = try transcript.takeUndoRecords { $0.turnId == "t2" }
        #expect(taken == [record("t2", "c1")])
        #expect(transcript.committedUndo == [record("t1", "c1")])
        #expect(journal.changes == [.undoRecordsKept([record("t1", "c1"), record("t2", "c1")]), .undoRecordsTaken([record("t2", "c1")])])

        // What the journal recorded rebuilds the same records.
        var replayed = Transcript(properties: [:])
        for change in journal.changes { try replayed.replay(change, at: Date()) }
        #expect(replayed.committedUndo == transcript.committedUndo)
    }

    @Test func onlyTheNewestRecordsAreKept() throws {
        var transcript = Transcript(properties: [:])
        let many = (0..<(Transcript.maxCommittedUndoRecords + 5)).map { record("t\($0)", "c") }
        try transcript.keepUndoRecords(many)
        #expect(transcript.committedUndo.count == Transcript.maxCommittedUndoRecords)
        #expect(transcript.committedUndo.first == record("t5", "c"))
    }
}
