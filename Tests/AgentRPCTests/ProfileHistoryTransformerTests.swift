import AgentRPCProtocol
import Testing

@testable import AgentRPC

// MARK: Entry builders

private func prompt(_ id: String, _ turn: String?, _ text: String = "question") -> TranscriptEntry {
    TranscriptEntry(id: id, turnId: turn, .prompt(text: text, images: nil))
}

private func response(_ id: String, _ turn: String?, _ text: String = "answer", profile: String? = "p") -> TranscriptEntry {
    TranscriptEntry(id: id, turnId: turn, .response(text: text, profile: profile, incomplete: false))
}

private func reasoning(_ id: String, _ turn: String?, _ text: String = "thinking", profile: String? = "p") -> TranscriptEntry {
    TranscriptEntry(id: id, turnId: turn, .reasoning(text: text, profile: profile))
}

private func calls(
    _ id: String, _ turn: String?, _ callIds: [String], profile: String? = "p", text: String? = nil,
    arguments: JSONValue = [:]
) -> TranscriptEntry {
    TranscriptEntry(id: id, turnId: turn, .toolCalls(
        calls: callIds.map { ToolCallRecord(callId: $0, name: "tool_\($0)", arguments: arguments) }, profile: profile, text: text))
}

private func output(_ id: String, _ turn: String?, _ callId: String, content: JSONValue = "ok", profile: String? = "p") -> TranscriptEntry {
    TranscriptEntry(id: id, turnId: turn, .toolOutput(callId: callId, name: "tool_\(callId)", outcome: .ok, content: content, profile: profile))
}

private func ids(_ entries: [TranscriptEntry]) -> [String] { entries.map(\.id) }

/// Two finished turns with tool exchanges and a third in progress (its tools answered,
/// the model not yet).
private let threeTurns: [TranscriptEntry] = [
    prompt("p1", "t1"), reasoning("r1", "t1"), calls("c1", "t1", ["a", "b"], text: "Let me look."),
    output("o1a", "t1", "a"), output("o1b", "t1", "b"), response("s1", "t1"),
    prompt("p2", "t2"), calls("c2", "t2", ["c"]), output("o2", "t2", "c"), response("s2", "t2"),
    prompt("p3", "t3"), calls("c3", "t3", ["d", "e"]), output("o3d", "t3", "d"), output("o3e", "t3", "e"),
]

// MARK: Invariants, checked independently of the code under test

/// The `toolCalls` entry answered by the output at `index`: the nearest earlier one that made the call.
private func callsIndex(forOutputAt index: Int, in entries: [TranscriptEntry]) -> Int? {
    guard case .toolOutput(let callId, _, _, _, _, _, _) = entries[index].content else { return nil }
    return entries[..<index].lastIndex { entry in
        if case .toolCalls(let list, _, _) = entry.content { return list.contains { $0.callId == callId } }
        return false
    }
}

/// Every kept output keeps its call, and every kept call keeps all its outputs.
private func exchangesIntact(_ kept: [TranscriptEntry], of original: [TranscriptEntry]) -> Bool {
    let keptIDs = Set(kept.map(\.id))
    for index in original.indices where original[index].type == .toolOutput {
        guard let owner = callsIndex(forOutputAt: index, in: original) else { continue }
        if keptIDs.contains(original[index].id) != keptIDs.contains(original[owner].id) { return false }
    }
    return true
}

/// The result is the original with some entries left out, in order, unchanged.
private func isSubsequence(_ kept: [TranscriptEntry], of original: [TranscriptEntry]) -> Bool {
    var iterator = original.makeIterator()
    return kept.allSatisfy { entry in
        while let next = iterator.next() { if next == entry { return true } }
        return false
    }
}

/// Where a rolling window should start, by brute force: the longest suffix within the
/// bound that starts at a clean boundary; if none, the shortest clean non-empty suffix.
private func expectedWindowStart(_ window: RollingWindow, _ entries: [TranscriptEntry]) -> Int {
    let cost: (TranscriptEntry) -> Int
    let bound: Int
    if let n = window.entries {
        (cost, bound) = ({ _ in 1 }, n)
    } else if let n = window.messages {
        (cost, bound) = ({ $0.type == .reasoning ? 0 : 1 }, n)
    } else {
        (cost, bound) = (HistoryTransformer.estimatedTokens(of:), window.tokens ?? 0)
    }
    let pairs = window.evenPairs == true && entries.contains { $0.type == .prompt }
    func clean(_ start: Int) -> Bool {
        if start == 0 { return true }
        if entries[start].type == .toolOutput { return false }
        let splits = entries.indices.contains { index in
            index >= start && (callsIndex(forOutputAt: index, in: entries).map { $0 < start } ?? false)
        }
        return !splits && (!pairs || entries[start].type == .prompt)
    }
    let fitting = entries.indices.filter { clean($0) && entries[$0...].map(cost).reduce(0, +) <= bound }
    return fitting.min() ?? entries.indices.filter(clean).max() ?? 0
}

@Suite struct ProfileHistoryTransformerTests {
    // MARK: rollingWindow by entries

    @Test func entryWindowKeepsTheNewestEntries() {
        func window(_ n: Int, evenPairs: Bool? = nil) -> [String] {
            ids(HistoryTransformer.rollingWindow(RollingWindow(entries: n, evenPairs: evenPairs), threeTurns))
        }
        #expect(window(100) == ids(threeTurns))
        #expect(window(14) == ids(threeTurns))
        #expect(window(3) == ["c3", "o3d", "o3e"])
        #expect(window(4) == ["p3", "c3", "o3d", "o3e"])
        #expect(window(5) == ["s2", "p3", "c3", "o3d", "o3e"])
    }

    @Test func entryWindowNeverStartsInsideAnExchange() {
        func window(_ n: Int) -> [String] { ids(HistoryTransformer.rollingWindow(RollingWindow(entries: n), threeTurns)) }
        // The 6th newest entry is o2, whose call c2 would be cut off: the cut moves past it.
        #expect(window(6) == ["s2", "p3", "c3", "o3d", "o3e"])
        // 7 would start at c2 with its output: fine.
        #expect(window(7) == ["c2", "o2", "s2", "p3", "c3", "o3d", "o3e"])
        // Starting at o1b or o1a (outputs of c1) both move to s1.
        #expect(window(10) == ["s1", "p2", "c2", "o2", "s2", "p3", "c3", "o3d", "o3e"])
        #expect(window(11) == window(10))
        #expect(window(12) == ids(Array(threeTurns[2...])))
    }

    @Test func windowSmallerThanTheNewestExchangeKeepsThatExchangeWhole() {
        // Two entries would be o3d, o3e without their call; nothing would be worse.
        #expect(ids(HistoryTransformer.rollingWindow(RollingWindow(entries: 2), threeTurns)) == ["c3", "o3d", "o3e"])
        #expect(ids(HistoryTransformer.rollingWindow(RollingWindow(entries: 1), threeTurns)) == ["c3", "o3d", "o3e"])
        let finished = threeTurns + [response("s3", "t3")]
        #expect(ids(HistoryTransformer.rollingWindow(RollingWindow(entries: 1), finished)) == ["s3"])
    }

    @Test func evenPairsStartsAtAPrompt() {
        func window(_ n: Int) -> [String] {
            ids(HistoryTransformer.rollingWindow(RollingWindow(entries: n, evenPairs: true), threeTurns))
        }
        #expect(window(5) == ["p3", "c3", "o3d", "o3e"])
        #expect(window(8) == ["p2", "c2", "o2", "s2", "p3", "c3", "o3d", "o3e"])
        #expect(window(13) == ids(Array(threeTurns[6...])))
        #expect(window(14) == ids(threeTurns))
        // Less than the current turn: the current turn, whole, from its prompt.
        #expect(window(3) == ["p3", "c3", "o3d", "o3e"])
        #expect(window(1) == ["p3", "c3", "o3d", "o3e"])
    }

    @Test func evenPairsNeverSplitsAUserAssistantPair() {
        let chat = (1...5).flatMap { i in [prompt("p\(i)", "t\(i)"), response("s\(i)", "t\(i)")] }
        for n in 1...10 {
            let kept = HistoryTransformer.rollingWindow(RollingWindow(entries: n, evenPairs: true), chat)
            #expect(kept.count == max(2, n - n % 2), "window \(n)")
            #expect(kept.first?.type == .prompt, "window \(n)")
            // Without evenPairs an odd window starts with an orphaned answer.
            let plain = HistoryTransformer.rollingWindow(RollingWindow(entries: n), chat)
            #expect(plain.count == n)
        }
    }

    @Test func evenPairsWithoutPromptsFallsBackToThePlainWindow() {
        let noPrompts = [response("s1", nil), calls("c1", nil, ["a"]), output("o1", nil, "a"), response("s2", nil)]
        #expect(ids(HistoryTransformer.rollingWindow(RollingWindow(entries: 3, evenPairs: true), noPrompts)) == ["c1", "o1", "s2"])
    }

    @Test func outputsSeparatedFromTheirCallStillMoveTheCut() {
        // A manual edit put a response between a call and its output.
        let odd = [prompt("p", "t"), calls("c", "t", ["a"]), response("s", "t"), output("o", "t", "a")]
        #expect(ids(HistoryTransformer.rollingWindow(RollingWindow(entries: 2), odd)) == ["c", "s", "o"])
        #expect(ids(HistoryTransformer.rollingWindow(RollingWindow(entries: 3), odd)) == ["c", "s", "o"])
    }

    @Test func strayOutputsAndUnansweredCalls() {
        let stray = [prompt("p1", "t1"), output("ox", "t1", "zz"), response("s1", "t1"), prompt("p2", "t2"), response("s2", "t2")]
        #expect(ids(HistoryTransformer.rollingWindow(RollingWindow(entries: 4), stray)) == ["s1", "p2", "s2"])
        // A call kept without outputs (an interrupted turn under `preserve`) may start the window.
        let unanswered = [prompt("p1", "t1"), calls("c1", "t1", ["a"]), prompt("p2", "t2"), response("s2", "t2")]
        #expect(ids(HistoryTransformer.rollingWindow(RollingWindow(entries: 3), unanswered)) == ["c1", "p2", "s2"])
        // A parallel call with one output missing: the exchange ends at the last present output.
        let partial = [prompt("p1", "t1"), calls("c1", "t1", ["a", "b"]), output("o1a", "t1", "a"), response("s1", "t1")]
        #expect(ids(HistoryTransformer.rollingWindow(RollingWindow(entries: 2), partial)) == ["s1"])
    }

    // MARK: rollingWindow by messages and tokens

    @Test func messageWindowCountsProviderMessages() {
        func window(_ n: Int, evenPairs: Bool? = nil) -> [String] {
            ids(HistoryTransformer.rollingWindow(RollingWindow(messages: n, evenPairs: evenPairs), threeTurns))
        }
        #expect(threeTurns.map(HistoryTransformer.messageCount(of:)).reduce(0, +) == 13)
        #expect(window(4) == ["p3", "c3", "o3d", "o3e"])
        // 12 messages reach back to c1; the free reasoning entry before it comes along.
        #expect(window(12) == ids(Array(threeTurns[1...])))
        #expect(window(12, evenPairs: true) == ids(Array(threeTurns[6...])))
        #expect(window(13) == ids(threeTurns))
    }

    @Test func tokenEstimates() {
        #expect(HistoryTransformer.estimatedTokens(of: prompt("p", nil, "12345678")) == 2)
        #expect(HistoryTransformer.estimatedTokens(of: prompt("p", nil, "123456789")) == 3)
        #expect(HistoryTransformer.estimatedTokens(of: response("s", nil, "")) == 0)
        #expect(HistoryTransformer.estimatedTokens(of: response("s", nil, "héllo")) == 2)
        #expect(HistoryTransformer.estimatedTokens(of: reasoning("r", nil, String(repeating: "x", count: 400))) == 0)
        // Tool entries: name + arguments as JSON ("tool_a" + {"x":1} = 6 + 7 chars), plus the text.
        #expect(HistoryTransformer.estimatedTokens(of: calls("c", nil, ["a"], arguments: ["x": 1])) == 4)
        #expect(HistoryTransformer.estimatedTokens(of: calls("c", nil, ["a"], text: "abc", arguments: ["x": 1])) == 4)
        #expect(HistoryTransformer.estimatedTokens(of: calls("c", nil, ["a"], text: "abcd", arguments: ["x": 1])) == 5)
        // String outputs count raw, others as JSON: "tool_a" + "ok" = 8; "tool_a" + {"k":"v"} = 15.
        #expect(HistoryTransformer.estimatedTokens(of: output("o", nil, "a")) == 2)
        #expect(HistoryTransformer.estimatedTokens(of: output("o", nil, "a", content: ["k": "v"])) == 4)
    }

    @Test func tokenWindow() {
        let entries = [
            prompt("p1", "t1", String(repeating: "a", count: 40)),  // 10
            response("s1", "t1", String(repeating: "b", count: 40)),  // 10
            prompt("p2", "t2", String(repeating: "c", count: 20)),  // 5
            calls("c2", "t2", ["a"], arguments: ["x": 1]),  // 4
            output("o2", "t2", "a", content: .string(String(repeating: "d", count: 34))),  // 10
        ]
        func window(_ n: Int, evenPairs: Bool? = nil) -> [String] {
            ids(HistoryTransformer.rollingWindow(RollingWindow(tokens: n, evenPairs: evenPairs), entries))
        }
        #expect(window(39) == ["p1", "s1", "p2", "c2", "o2"])
        #expect(window(38) == ["s1", "p2", "c2", "o2"])
        #expect(window(29) == ["s1", "p2", "c2", "o2"])
        #expect(window(28) == ["p2", "c2", "o2"])
        #expect(window(19) == ["p2", "c2", "o2"])
        #expect(window(14) == ["c2", "o2"])
        // The output alone (10) would fit, but not without its call.
        #expect(window(13) == ["c2", "o2"])
        #expect(window(38, evenPairs: true) == ["p2", "c2", "o2"])
    }

    @Test func everyWindowKeepsExchangesIntact() {
        let transcripts: [[TranscriptEntry]] = [
            threeTurns,
            threeTurns + [response("s3", "t3")],
            [prompt("p", "t"), calls("c", "t", ["a"]), response("s", "t"), output("o", "t", "a")],
            [output("ox", "t0", "zz"), prompt("p1", "t1"), calls("c1", "t1", ["a", "b"]), output("o1a", "t1", "a"),
             reasoning("r", "t1"), calls("c2", "t1", ["c"]), output("o2", "t1", "c"), output("o1b", "t1", "b")],
        ]
        for entries in transcripts {
            for size in 1...(entries.count + 2) {
                for even in [false, true] {
                    for window in [RollingWindow(entries: size, evenPairs: even), RollingWindow(messages: size, evenPairs: even), RollingWindow(tokens: size * 2, evenPairs: even)] {
                        let kept = HistoryTransformer.rollingWindow(window, entries)
                        let label = "\(window) over \(ids(entries))"
                        #expect(!kept.isEmpty, "\(label)")
                        #expect(Array(entries.suffix(kept.count)) == kept, "not a suffix: \(label)")
                        #expect(exchangesIntact(kept, of: entries), "split exchange: \(label) kept \(ids(kept))")
                        if kept.count < entries.count {
                            #expect(kept.first?.type != .toolOutput, "\(label)")
                            if even, entries.contains(where: { $0.type == .prompt }) { #expect(kept.first?.type == .prompt, "\(label)") }
                        }
                        #expect(entries.count - kept.count == expectedWindowStart(window, entries), "\(label) kept \(ids(kept))")
                    }
                }
            }
        }
    }

    @Test func windowWithoutASizeKeepsEverything() {
        #expect(HistoryTransformer.rollingWindow(RollingWindow(evenPairs: true), threeTurns) == threeTurns)
        #expect(HistoryTransformer.rollingWindow(RollingWindow(entries: 3), []).isEmpty)
    }

    // MARK: dropCompletedToolCalls

    @Test func dropCompletedToolCallsKeepsTheCurrentTurnsExchanges() {
        let kept = HistoryTransformer.dropCompletedToolCalls(threeTurns)
        #expect(ids(kept) == ["p1", "r1", "s1", "p2", "s2", "p3", "c3", "o3d", "o3e"])
        #expect(isSubsequence(kept, of: threeTurns))
        // c1's text goes with it.
        #expect(!kept.contains { $0.id == "c1" })

        let finished = threeTurns + [response("s3", "t3")]
        #expect(ids(HistoryTransformer.dropCompletedToolCalls(finished)).suffix(5) == ["p3", "c3", "o3d", "o3e", "s3"])
        // The next prompt makes turn 3's exchange completed.
        let next = finished + [prompt("p4", "t4")]
        #expect(ids(HistoryTransformer.dropCompletedToolCalls(next)) == ["p1", "r1", "s1", "p2", "s2", "p3", "s3", "p4"])
    }

    @Test func dropCompletedToolCallsEdgeCases() {
        let noPrompt = [calls("c", nil, ["a"]), output("o", nil, "a"), response("s", nil)]
        #expect(HistoryTransformer.dropCompletedToolCalls(noPrompt) == noPrompt)
        // A stray output before the latest prompt goes; one whose call is before the
        // prompt goes even when it sits after it (an edited transcript).
        let odd = [prompt("p1", "t1"), output("ox", "t1", "zz"), calls("c1", "t1", ["a"]), prompt("p2", "t2"), output("o1", "t1", "a"),
                   calls("c2", "t2", ["b"]), output("o2", "t2", "b")]
        let kept = HistoryTransformer.dropCompletedToolCalls(odd)
        #expect(ids(kept) == ["p1", "p2", "c2", "o2"])
        #expect(exchangesIntact(kept, of: odd))
    }

    // MARK: keepToolRecords

    @Test func keepToolRecordsKeepsExchangesAndTheLatestPrompt() {
        let kept = HistoryTransformer.keepToolRecords(threeTurns)
        #expect(ids(kept) == ["c1", "o1a", "o1b", "c2", "o2", "p3", "c3", "o3d", "o3e"])
        #expect(exchangesIntact(kept, of: threeTurns))
        let finished = threeTurns + [reasoning("r3", "t3"), response("s3", "t3")]
        #expect(ids(HistoryTransformer.keepToolRecords(finished)).suffix(6) == ["p3", "c3", "o3d", "o3e", "r3", "s3"])
        let noPrompt = [response("s0", nil), calls("c", nil, ["a"]), output("o", nil, "a"), response("s", nil)]
        #expect(ids(HistoryTransformer.keepToolRecords(noPrompt)) == ["c", "o"])
        #expect(HistoryTransformer.keepToolRecords([]).isEmpty)
    }

    // MARK: redact

    @Test func redactRewritesTextsAndStringLeaves() throws {
        let secret = "4111-1111"
        let entries = [
            prompt("p", "t", "my card is \(secret), ok"),
            reasoning("r", "t", "the card \(secret)"),
            calls("c", "t", ["a"], text: "checking \(secret)", arguments: ["card": .string(secret), "n": 41111111, "list": [.string(secret), true], secret: "key stays"]),
            output("o1", "t", "a", content: .string("found \(secret)")),
            output("o2", "t", "a", content: ["nested": ["deep": .string(secret)], "count": 2]),
            response("s", "t", "\(secret) and \(secret)"),
        ]
        let redacted = try HistoryTransformer.redact(Redaction(pattern: #"\d{4}-\d{4}"#, replacement: "[card $0]"), entries)
        #expect(ids(redacted) == ids(entries))
        #expect(redacted[0].content == .prompt(text: "my card is [card $0], ok", images: nil))
        #expect(redacted[1].content == .reasoning(text: "the card [card $0]", profile: "p"))
        #expect(redacted[2].content == .toolCalls(
            calls: [ToolCallRecord(callId: "a", name: "tool_a", arguments: ["card": "[card $0]", "n": 41111111, "list": ["[card $0]", true], secret: "key stays"])],
            profile: "p", text: "checking [card $0]"))
        #expect(redacted[3].content == .toolOutput(callId: "a", name: "tool_a", outcome: .ok, content: "found [card $0]", profile: "p"))
        #expect(redacted[4].content == .toolOutput(callId: "a", name: "tool_a", outcome: .ok, content: ["nested": ["deep": "[card $0]"], "count": 2], profile: "p"))
        #expect(redacted[5].content == .response(text: "[card $0] and [card $0]", profile: "p", incomplete: false))
        // The transform works on a copy.
        #expect(entries[0].content == .prompt(text: "my card is \(secret), ok", images: nil))
    }

    @Test func redactDropsTheSignatureOfRewrittenReasoningOnly() throws {
        let entries = [
            TranscriptEntry(id: "r1", turnId: "t", .reasoning(text: "card 4111-1111", profile: "p", signature: "s1")),
            TranscriptEntry(id: "r2", turnId: "t", .reasoning(text: "nothing secret", profile: "p", signature: "s2")),
        ]
        let redacted = try HistoryTransformer.redact(Redaction(pattern: #"\d{4}-\d{4}"#, replacement: "x"), entries)
        // A signature seals its exact text: a rewritten one would be rejected by the provider.
        #expect(redacted[0].content == .reasoning(text: "card x", profile: "p", signature: nil))
        #expect(redacted[1].content == .reasoning(text: "nothing secret", profile: "p", signature: "s2"))
    }

    @Test func redactKeepsImagesAndInvalidPatternsChangeNothing() throws {
        let withImage = [TranscriptEntry(id: "p", turnId: "t", .prompt(text: "secret", images: [.url("https://x/secret.png")]))]
        #expect(try HistoryTransformer.redact(Redaction(pattern: "secret", replacement: "x"), withImage)[0].content
            == .prompt(text: "x", images: [.url("https://x/secret.png")]))
        #expect(try HistoryTransformer.redact(Redaction(pattern: "(", replacement: "x"), threeTurns) == threeTurns)
    }

    @Test func patternProblemsNameTheBadPattern() throws {
        let c = try JSONValue.parse(#"""
            {"profiles": {"defaults": {"history": [{"redact": {"pattern": "[a-", "replacement": ""}}]},
             "cases": {"b": {"history": [{"ownTurnsOnly": true}, {"redact": {"pattern": "ok+", "replacement": ""}}]},
                       "a": {"history": [{"keepToolRecords": true}, {"redact": {"pattern": "(x", "replacement": ""}}]}}}}
            """#).decode(as: SessionConfig.self)
        #expect(HistoryTransformer.patternProblems(in: c).map(\.path) == ["profiles.defaults.history[0].redact.pattern", "profiles.cases.a.history[1].redact.pattern"])
        #expect(HistoryTransformer.patternProblems(in: SessionConfig()).isEmpty)
    }

    // MARK: ownTurnsOnly

    /// Agent A answers turn 1; B uses a tool in turn 2; in turn 3 A hands off to B
    /// (the output is labelled B, the profile active when it was appended), B answers;
    /// turn 4 has just started.
    private let agents: [TranscriptEntry] = [
        prompt("p1", "t1"), response("s1", "t1", profile: "A"),
        prompt("p2", "t2"), calls("c2", "t2", ["x"], profile: "B"), output("o2", "t2", "x", profile: "B"), response("s2", "t2", profile: "B"),
        prompt("p3", "t3"), reasoning("r3", "t3", profile: "A"), calls("c3", "t3", ["h"], profile: "A"), output("o3", "t3", "h", profile: "B"),
        response("s3", "t3", profile: "B"),
        prompt("p4", "t4"),
    ]

    @Test func ownTurnsOnlyKeepsAProfilesEntriesAndTheirPrompts() {
        #expect(ids(HistoryTransformer.ownTurnsOnly(agents, profile: "A")) == ["p1", "s1", "p3", "r3", "c3", "o3", "p4"])
        #expect(ids(HistoryTransformer.ownTurnsOnly(agents, profile: "B")) == ["p2", "c2", "o2", "s2", "p3", "s3", "p4"])
        #expect(ids(HistoryTransformer.ownTurnsOnly(agents, profile: "C")) == ["p4"])
        for profile in ["A", "B", "C"] {
            #expect(exchangesIntact(HistoryTransformer.ownTurnsOnly(agents, profile: profile), of: agents))
        }
        // A prompt without a turn id only stays as the latest prompt.
        let loose = [prompt("p1", nil), response("s1", nil, profile: "A"), prompt("p2", nil)]
        #expect(ids(HistoryTransformer.ownTurnsOnly(loose, profile: "A")) == ["s1", "p2"])
    }

    // MARK: Composition

    @Test func transformsApplyInOrder() throws {
        let windowThenTools = try HistoryTransformer.apply(
            [.rollingWindow(RollingWindow(entries: 4)), .keepToolRecords], to: threeTurns, profile: "p")
        #expect(ids(windowThenTools) == ["p3", "c3", "o3d", "o3e"])
        let toolsThenWindow = try HistoryTransformer.apply(
            [.keepToolRecords, .rollingWindow(RollingWindow(entries: 6))], to: threeTurns, profile: "p")
        #expect(ids(toolsThenWindow) == ["c2", "o2", "p3", "c3", "o3d", "o3e"])
        #expect(try HistoryTransformer.apply([], to: threeTurns, profile: "p") == threeTurns)
    }

    @Test func classicMultiAgentChatStore() throws {
        // docs/protocol.md §11: own turns, then a message window that never splits a pair.
        let transforms: [HistoryTransform] = [.ownTurnsOnly, .rollingWindow(RollingWindow(messages: 4, evenPairs: true))]
        #expect(ids(try HistoryTransformer.apply(transforms, to: agents, profile: "B")) == ["p3", "s3", "p4"])
        #expect(ids(try HistoryTransformer.apply(transforms, to: agents, profile: "A")) == ["p3", "r3", "c3", "o3", "p4"])
    }

    @Test func nonRedactingTransformsReturnEntriesUnchanged() throws {
        let transforms: [HistoryTransform] = [
            .rollingWindow(RollingWindow(entries: 7)), .rollingWindow(RollingWindow(messages: 5, evenPairs: true)),
            .rollingWindow(RollingWindow(tokens: 9)), .dropCompletedToolCalls, .keepToolRecords, .ownTurnsOnly,
        ]
        for source in [threeTurns, agents] {
            for transform in transforms {
                let kept = try HistoryTransformer.apply(transform, to: source, profile: "B")
                #expect(isSubsequence(kept, of: source), "\(transform)")
                #expect(exchangesIntact(kept, of: source), "\(transform)")
            }
        }
    }
}
