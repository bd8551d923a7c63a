import AgentRPCProtocol
import Foundation
import Testing

@testable import AgentRPC

/// The incremental request building (`ModelHistoryCache`, `PrefixTracker` with a
/// stable prefix) must always give what converting the whole transcript gives.
@Suite struct ModelHistoryCacheTests {

    /// Checks the cache against a full conversion of `transcript`.
    private func expectFresh(
        _ cache: inout ModelHistoryCache, _ transcript: Transcript, _ step: String, sourceLocation: SourceLocation = #_sourceLocation
    ) -> ModelHistoryCache.Conversion {
        let converted = cache.messages(for: transcript.entries, appendRunStamp: transcript.appendRunStamp)
        let full = ModelHistory.messagesWithEntryIDs(from: transcript.entries)
        // One comparison each, so a stale cache fails with a short message.
        #expect(converted.messages == full.messages, "\(step): the messages differ", sourceLocation: sourceLocation)
        #expect(converted.entryIDs == full.entryIDs, "\(step): the entry ids differ", sourceLocation: sourceLocation)
        #expect(converted.stablePrefix.count <= full.messages.count, "\(step)", sourceLocation: sourceLocation)
        return converted
    }

    @Test func aToolExchangeGrowsAndEveryRewriteIsSeen() throws {
        var transcript = Transcript(properties: [:])
        var cache = ModelHistoryCache()
        try transcript.append(.prompt(text: "Look up two things", images: nil), turn: "t1")
        let first = expectFresh(&cache, transcript, "prompt")
        try transcript.append(.reasoning(text: "Both at once.", profile: nil, signature: "sig"), turn: "t1")
        try transcript.append(.toolCalls(calls: [
            ToolCallRecord(callId: "a", name: "look", arguments: ["q": "x"]),
            ToolCallRecord(callId: "b", name: "look", arguments: .string("{broken")),
        ], profile: nil, text: "Looking."), turn: "t1")
        // Neither call has run yet: both get synthetic results.
        var now = expectFresh(&cache, transcript, "calls without outputs")
        #expect(now.messages.count == 4)
        try transcript.append(.toolOutput(callId: "a", name: "look", outcome: .ok, content: "found x", profile: nil), turn: "t1")
        now = expectFresh(&cache, transcript, "one output")
        try transcript.append(.toolOutput(callId: "b", name: "look", outcome: .failed, content: ["why": "bad"], profile: nil), turn: "t1")
        now = expectFresh(&cache, transcript, "both outputs")
        #expect(now.stablePrefix.log === first.stablePrefix.log, "appends keep the log")
        #expect(now.stablePrefix.count == 1, "the open tool exchange is not stable yet")
        try transcript.append(.response(text: "Done.", profile: nil, incomplete: false), turn: "t1")
        now = expectFresh(&cache, transcript, "response")
        #expect(now.stablePrefix.count == 4)

        // A client's mutation keeps every id but changes an early message.
        let callsID = transcript.entries[2].id
        try transcript.mutate([.replace(id: transcript.entries[0].id, entry: TranscriptEntry(
            id: transcript.entries[0].id, turnId: "t1", .prompt(text: "Look up three things", images: nil)))])
        let rewritten = expectFresh(&cache, transcript, "replace")
        #expect(rewritten.stablePrefix.log !== now.stablePrefix.log, "a rewrite starts a new log")
        try transcript.mutate([.truncateAfter(id: callsID)])
        _ = expectFresh(&cache, transcript, "truncate into the exchange")
        try transcript.append(.prompt(text: "Again", images: nil), turn: "t2")
        _ = expectFresh(&cache, transcript, "append after truncate")
        try transcript.mutate([.remove(ids: [callsID])])
        _ = expectFresh(&cache, transcript, "remove the calls")
        try transcript.mutate([.set(entries: [])])
        #expect(expectFresh(&cache, transcript, "emptied").messages.isEmpty)
    }

    /// A closed group (one that what was appended after it cannot join) keeps its
    /// messages: each round trip of a tool loop converts only its own entries.
    @Test func closedGroupsAreKeptAndOpenOnesConvertedAgain() throws {
        var transcript = Transcript(properties: [:])
        var cache = ModelHistoryCache()
        try transcript.append(.prompt(text: "go", images: nil), turn: "t1")
        _ = expectFresh(&cache, transcript, "prompt")
        for i in 0..<5 {
            try transcript.append(.toolCalls(calls: [ToolCallRecord(callId: "c\(i)", name: "echo", arguments: ["i": .int(i)])], profile: nil, text: nil), turn: "t1")
            try transcript.append(.toolOutput(callId: "c\(i)", name: "echo", outcome: .ok, content: "ok", profile: nil), turn: "t1")
            _ = expectFresh(&cache, transcript, "round trip \(i)")
            #expect(cache.entriesConvertedLast == 2, "round trip \(i) converted \(cache.entriesConvertedLast) entries")
        }
        // An exchange left without its output gets a synthetic result; it is still
        // open (the output may come), so the next conversion redoes it.
        try transcript.append(.toolCalls(calls: [
            ToolCallRecord(callId: "x", name: "echo", arguments: [:]), ToolCallRecord(callId: "y", name: "echo", arguments: [:]),
        ], profile: nil, text: "two"), turn: "t1")
        _ = expectFresh(&cache, transcript, "calls without outputs")
        try transcript.append(.toolOutput(callId: "x", name: "echo", outcome: .ok, content: "x", profile: nil), turn: "t1")
        _ = expectFresh(&cache, transcript, "one output")
        #expect(cache.entriesConvertedLast == 2, "the open exchange is converted again with its output")
        // A prompt closes it with one call unanswered: the synthetic result stays.
        try transcript.append(.prompt(text: "next", images: nil), turn: "t2")
        _ = expectFresh(&cache, transcript, "closed by a prompt")
        #expect(cache.entriesConvertedLast == 1)
        // Signed reasoning belongs on the message after it, converted with it.
        try transcript.append(.reasoning(text: "hmm", profile: nil, signature: "sig"), turn: "t2")
        _ = expectFresh(&cache, transcript, "reasoning alone")
        try transcript.append(.response(text: "done", profile: nil, incomplete: false), turn: "t2")
        _ = expectFresh(&cache, transcript, "reasoning then response")
        // A tool output with no calls before it (a stray one) is a group of its own.
        try transcript.append(.toolOutput(callId: "stray", name: "echo", outcome: .failed, content: "late", profile: nil), turn: "t2")
        _ = expectFresh(&cache, transcript, "stray output")
        try transcript.append(.toolOutput(callId: "stray2", name: "echo", outcome: .ok, content: "later", profile: nil), turn: "t2")
        _ = expectFresh(&cache, transcript, "second stray output")
        // Nothing appended: the last group is converted again, the same.
        _ = expectFresh(&cache, transcript, "unchanged")
    }

    /// Calls without an output get a synthetic failure after the outputs there
    /// are, whatever their order (the outputs in the calls' order need no set).
    @Test func unansweredCallsGetASyntheticFailureWhateverTheOrderOfOutputs() {
        let didNotRun = "The call did not run: the turn ended before it was executed."
        func exchange(_ calls: [String], _ outputs: [String]) -> [ModelMessage] {
            var entries = [TranscriptEntry(id: "e0", turnId: "t", .toolCalls(
                calls: calls.map { ToolCallRecord(callId: $0, name: "f", arguments: [:]) }, profile: nil, text: nil))]
            for (i, id) in outputs.enumerated() {
                entries.append(TranscriptEntry(id: "o\(i)", turnId: "t", .toolOutput(callId: id, name: "f", outcome: .ok, content: .string(id), profile: nil)))
            }
            return ModelHistory.messages(from: entries)
        }
        func output(_ id: String) -> ModelMessage { .toolResult(callId: id, name: "f", content: id, isError: false) }
        func missing(_ id: String) -> ModelMessage { .toolResult(callId: id, name: "f", content: didNotRun, isError: true) }
        let cases: [(calls: [String], outputs: [String], results: [ModelMessage])] = [
            (["a", "b", "c"], ["a", "b", "c"], [output("a"), output("b"), output("c")]),
            (["a", "b", "c"], ["c", "a"], [output("c"), output("a"), missing("b")]),
            (["a", "b", "c"], ["a", "b"], [output("a"), output("b"), missing("c")]),
            (["a", "b"], ["b", "a"], [output("b"), output("a")]),
            (["a", "b"], ["a", "a"], [output("a"), output("a"), missing("b")]),
            (["a", "a"], ["a"], [output("a")]),
            (["a"], [], [missing("a")]),
            (["a"], ["x"], [output("x"), missing("a")]),
        ]
        for c in cases {
            let messages = exchange(c.calls, c.outputs)
            #expect(Array(messages.dropFirst()) == c.results, "calls \(c.calls), outputs \(c.outputs)")
        }
    }

    @Test func pathImagesAreReadAgainForEveryRequest() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("history-cache-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("photo.png")
        try Data([1, 2, 3]).write(to: file)

        var transcript = Transcript(properties: [:])
        var cache = ModelHistoryCache()
        try transcript.append(.prompt(text: "before", images: nil), turn: "t1")
        try transcript.append(.response(text: "ok", profile: nil, incomplete: false), turn: "t1")
        try transcript.append(.prompt(text: "What is it?", images: [.path(file.path)]), turn: "t2")
        try transcript.append(.response(text: "Three bytes.", profile: nil, incomplete: false), turn: "t2")
        let before = expectFresh(&cache, transcript, "first read")
        #expect(before.messages[2] == .user(text: "What is it?", images: [.data(bytes: [1, 2, 3], mimeType: "image/png")]))

        try Data([4, 5]).write(to: file)
        try transcript.append(.prompt(text: "And now?", images: nil), turn: "t3")
        let after = expectFresh(&cache, transcript, "the file changed")
        #expect(after.messages[2] == .user(text: "What is it?", images: [.data(bytes: [4, 5], mimeType: "image/png")]))
        #expect(after.stablePrefix.count == 2, "a message read from a file is never taken as unchanged")
    }

    /// Random appends and rewrites: the cache equals a full conversion at every
    /// step, and a tracker fed the cache's stable prefixes says exactly what a
    /// tracker comparing whole requests says.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func randomHistoriesMatchAFullConversion(seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        var transcript = Transcript(properties: [:])
        var cache = ModelHistoryCache()
        var incremental = PrefixTracker()
        var whole = PrefixTracker()
        var openCalls: [String] = []
        var callNumber = 0

        func randomContent() -> TranscriptContent {
            switch Int.random(in: 0..<7, using: &random) {
            case 0: return .prompt(text: "p\(Int.random(in: 0..<3, using: &random))", images: nil)
            case 1: return .response(text: "r\(Int.random(in: 0..<3, using: &random))", profile: nil, incomplete: false)
            case 2: return .reasoning(text: "think", profile: nil, signature: Bool.random(using: &random) ? "sig" : nil)
            case 3, 4:
                let calls = (0..<Int.random(in: 1...3, using: &random)).map { _ -> ToolCallRecord in
                    callNumber += 1
                    return ToolCallRecord(callId: "c\(callNumber)", name: "t", arguments: ["n": .int(callNumber)])
                }
                openCalls = calls.map(\.callId)
                return .toolCalls(calls: calls, profile: nil, text: Bool.random(using: &random) ? "text" : nil)
            default:
                let callId = openCalls.isEmpty ? "stray" : openCalls.removeFirst()
                return .toolOutput(callId: callId, name: "t", outcome: .ok, content: .string("out \(callId)"), profile: nil)
            }
        }

        for step in 0..<400 {
            let ids = transcript.entries.map(\.id)
            if ids.isEmpty || Int.random(in: 0..<10, using: &random) < 8 {
                try transcript.append(randomContent(), turn: "t")
            } else {
                let target = ids.randomElement(using: &random) ?? ""
                switch Int.random(in: 0..<4, using: &random) {
                case 0: try transcript.mutate([.replace(id: target, entry: TranscriptEntry(id: target, turnId: "t", randomContent()))])
                case 1: try transcript.mutate([.remove(ids: [target])])
                case 2: try transcript.mutate([.truncateAfter(id: target)])
                default: try transcript.mutate([.insert(after: target, entries: [TranscriptEntry(id: "x\(step)", turnId: "t", randomContent())])])
                }
            }
            let converted = expectFresh(&cache, transcript, "seed \(seed), step \(step)")
            // The first difference is enough (the next steps would repeat it).
            guard converted.messages == ModelHistory.messages(from: transcript.entries) else { return }
            let model = Int.random(in: 0..<8, using: &random) == 0 ? "other" : "main"
            let withPrefix = incremental.observe(
                model: model, instructions: "I", tools: [], messages: converted.messages, entryIDs: converted.entryIDs,
                stablePrefix: converted.stablePrefix)
            let compared = whole.observe(model: model, instructions: "I", tools: [], messages: converted.messages, entryIDs: converted.entryIDs)
            #expect(withPrefix?.reason == compared?.reason, "seed \(seed), step \(step)")
            #expect(withPrefix?.firstChangedEntry == compared?.firstChangedEntry, "seed \(seed), step \(step)")
        }
    }

    @Test func aTrackerComparesWholeRequestsAcrossLogsAndWithoutAPrefix() {
        func user(_ text: String) -> ModelMessage { .user(text: text, images: []) }
        var tracker = PrefixTracker()
        let log = MessageLog()
        let sent = [user("a"), user("b"), user("c")]
        log.update { $0.messages = sent; $0.entryIDs = ["e1", "e2", "e3"] }
        #expect(tracker.observe(
            model: "m", instructions: "I", tools: [], messages: sent, entryIDs: ["e1", "e2", "e3"],
            stablePrefix: .init(log: log, count: 2)) == nil)
        // A request built without the log (e.g. with history transforms) is compared
        // message by message with what was sent, the log's part included.
        let changed = tracker.observe(model: "m", instructions: "I", tools: [], messages: [user("a"), user("B"), user("c")], entryIDs: ["e1", "e2", "e3"])
        #expect(changed?.reason == .historyRewritten)
        #expect(changed?.firstChangedEntry == "e2")
        // Shorter than what was sent, from another log: the first message gone is named.
        let other = MessageLog()
        other.update { $0.messages = [user("a")]; $0.entryIDs = ["e1"] }
        let shorter = tracker.observe(model: "m", instructions: "I", tools: [], messages: [user("a")], entryIDs: ["e1"], stablePrefix: .init(log: other, count: 1))
        #expect(shorter?.reason == .historyRewritten)
        #expect(shorter?.firstChangedEntry == "e2")
    }
}
