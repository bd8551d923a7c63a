import AgentRPCProtocol
import Testing

@testable import AgentRPC

private let toolA = ModelToolDefinition(name: "a", description: "A", inputSchema: ["type": "object"])
private let toolB = ModelToolDefinition(name: "b", description: "B", inputSchema: ["type": "object"])

private func user(_ text: String) -> ModelMessage { .user(text: text, images: []) }
private func assistant(_ text: String) -> ModelMessage { .assistant(text: text, toolCalls: [], reasoning: nil) }

/// A tracker fed the same shapes the turn loop will send.
private struct Requests {
    var tracker = PrefixTracker()

    mutating func send(
        model: String = "m", instructions: String = "I", tools: [ModelToolDefinition] = [toolA],
        _ messages: [ModelMessage], ids: [String]? = nil
    ) -> (reason: CacheInvalidationReason, firstChangedEntry: String?)? {
        tracker.observe(
            model: model, instructions: instructions, tools: tools, messages: messages,
            entryIDs: ids ?? messages.indices.map { "e\($0)" })
    }
}

@Suite struct ProfilePrefixTrackerTests {
    @Test func growingHistoryKeepsThePrefix() {
        var r = Requests()
        #expect(r.send([user("hi")]) == nil, "the first request has nothing to invalidate")
        #expect(r.send([user("hi")]) == nil)
        #expect(r.send([user("hi"), assistant("hello"), user("more")]) == nil)
    }

    @Test func eachReason() {
        var r = Requests()
        _ = r.send([user("hi")])
        #expect(r.send(instructions: "I2", [user("hi")])?.reason == .instructionsChanged)
        #expect(r.send(instructions: "I2", tools: [toolA, toolB], [user("hi")])?.reason == .toolsChanged)
        #expect(r.send(instructions: "I2", tools: [toolB, toolA], [user("hi")])?.reason == .toolsChanged, "tool order counts")
        let changed = r.send(instructions: "I2", tools: [toolB, toolA], [user("HI")])
        #expect(changed?.reason == .historyRewritten)
        #expect(changed?.firstChangedEntry == "e0")
        #expect(r.send(instructions: "I2", tools: [toolB, toolA], [user("HI"), assistant("x")]) == nil)
    }

    @Test func reasonsHavePriority() {
        var r = Requests()
        _ = r.send([user("a"), assistant("b")])
        // Everything changes: the model wins.
        let everything = r.send(model: "other", instructions: "X", tools: [], [user("z")])
        #expect(everything?.reason == .modelChanged)
        #expect(everything != nil && everything?.firstChangedEntry == nil)
        // Back on "other": instructions, tools and history change; instructions win.
        _ = r.send(model: "other", [user("a")])
        #expect(r.send(model: "other", instructions: "Y", tools: [toolB], [user("q")])?.reason == .instructionsChanged)
        #expect(r.send(model: "other", instructions: "Y", tools: [toolA], [user("r")])?.reason == .toolsChanged)
    }

    @Test func modelChangesAreReportedEachWay() {
        var r = Requests()
        _ = r.send(model: "a", [user("1")])
        #expect(r.send(model: "b", [user("1")])?.reason == .modelChanged)
        #expect(r.send(model: "b", [user("1"), assistant("2")]) == nil)
        // a's own last request is still a prefix, but the last request went to b.
        #expect(r.send(model: "a", [user("1"), assistant("2")])?.reason == .modelChanged)
        #expect(r.send(model: "a", [user("1"), assistant("2"), user("3")]) == nil)
    }

    @Test func rewrittenHistoryNamesTheFirstChangedEntry() {
        var r = Requests()
        _ = r.send([user("1"), assistant("2"), user("3"), assistant("4")], ids: ["p1", "s1", "p2", "s2"])
        // A middle entry removed: the new request differs from index 1 on, where p2 now sits.
        let removed = r.send([user("1"), user("3"), assistant("4")], ids: ["p1", "p2", "s2"])
        #expect(removed?.reason == .historyRewritten)
        #expect(removed?.firstChangedEntry == "p2")
        // The tail cut off: the first entry that is gone.
        let truncated = r.send([user("1")], ids: ["p1"])
        #expect(truncated?.reason == .historyRewritten)
        #expect(truncated?.firstChangedEntry == "p2")
        // Ids shorter than the messages: no entry to name.
        _ = r.send([user("1"), user("2")], ids: ["p1", "x"])
        let unnamed = r.send([user("1"), user("changed")], ids: ["p1"])
        #expect(unnamed?.reason == .historyRewritten)
        #expect(unnamed != nil && unnamed?.firstChangedEntry == nil)
    }

    @Test func resetForgetsEverything() {
        var r = Requests()
        _ = r.send(model: "a", [user("1")])
        r.tracker.reset()
        #expect(r.send(model: "b", instructions: "new", [user("z")]) == nil)
    }

    // MARK: With real transcripts

    private let transcript: [TranscriptEntry] = [
        TranscriptEntry(id: "p1", turnId: "t1", .prompt(text: "card 1234-5678?", images: nil)),
        TranscriptEntry(id: "r1", turnId: "t1", .reasoning(text: "hmm", profile: "a")),
        TranscriptEntry(id: "c1", turnId: "t1", .toolCalls(
            calls: [ToolCallRecord(callId: "x", name: "look", arguments: ["q": "1234-5678"]), ToolCallRecord(callId: "y", name: "look", arguments: [:])],
            profile: "a", text: nil)),
        TranscriptEntry(id: "o1", turnId: "t1", .toolOutput(callId: "x", name: "look", outcome: .ok, content: "found", profile: "a")),
        TranscriptEntry(id: "s1", turnId: "t1", .response(text: "done", profile: "a", incomplete: false)),
    ]

    @Test func messageEntryIDsRunParallelToMessages() {
        let built = ModelHistory.messagesWithEntryIDs(from: transcript)
        #expect(built.messages == ModelHistory.messages(from: transcript))
        // No message for the reasoning; the unanswered call y gets a synthetic result under c1's id.
        #expect(built.entryIDs == ["p1", "c1", "o1", "c1", "s1"])
        #expect(built.messages.count == built.entryIDs.count)
    }

    @Test func aRollingWindowAndARedactionRewriteHistory() throws {
        var tracker = PrefixTracker()
        func send(_ entries: [TranscriptEntry]) -> (reason: CacheInvalidationReason, firstChangedEntry: String?)? {
            let built = ModelHistory.messagesWithEntryIDs(from: entries)
            return tracker.observe(model: "m", instructions: "I", tools: [], messages: built.messages, entryIDs: built.entryIDs)
        }
        #expect(send(Array(transcript.prefix(4))) == nil)
        #expect(send(transcript) == nil)

        let redacted = try HistoryTransformer.redact(Redaction(pattern: #"\d{4}-\d{4}"#, replacement: "#"), transcript)
        let rewritten = send(redacted)
        #expect(rewritten?.reason == .historyRewritten)
        #expect(rewritten?.firstChangedEntry == "p1")

        let longer = redacted + [TranscriptEntry(id: "p2", turnId: "t2", .prompt(text: "next", images: nil))]
        #expect(send(longer) == nil)
        // The window slides past the first turn: the first message now comes from s1.
        let slid = send(HistoryTransformer.rollingWindow(RollingWindow(entries: 2), longer))
        #expect(slid?.reason == .historyRewritten)
        #expect(slid?.firstChangedEntry == "s1")
    }
}
