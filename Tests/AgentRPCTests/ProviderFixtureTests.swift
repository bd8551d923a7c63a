import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

// MARK: - Fixture support

/// Recorded streams live in `shared/fixtures` beside the package (CI checks the
/// repository out that way); `/work/shared/fixtures` is the fallback.
enum Fixtures {
    static let directory: URL = {
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let beside = packageRoot.deletingLastPathComponent().appendingPathComponent("shared/fixtures")
        if FileManager.default.fileExists(atPath: beside.path) { return beside }
        return URL(fileURLWithPath: "/work/shared/fixtures")
    }()

    static func bytes(_ relativePath: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(relativePath)))
    }

    static func names(in folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent(folder).path)
            .filter { $0.hasSuffix(".sse") }.sorted()
    }
}

/// Deterministic generator so a failing chunking can be reproduced from its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

enum Chunking {
    static func random(_ bytes: [UInt8], seed: UInt64) -> [[UInt8]] {
        var rng = SplitMix64(state: seed)
        var chunks: [[UInt8]] = []
        var i = 0
        while i < bytes.count {
            let n = Int.random(in: 1...64, using: &rng)
            chunks.append(Array(bytes[i..<min(bytes.count, i + n)]))
            i += n
        }
        return chunks
    }

    static func all(_ bytes: [UInt8]) -> [(label: String, chunks: [[UInt8]])] {
        var result: [(String, [[UInt8]])] = [("whole", [bytes]), ("byte-by-byte", bytes.map { [$0] })]
        for seed in 1...50 { result.append(("seed \(seed)", random(bytes, seed: UInt64(seed)))) }
        return result
    }
}

/// What a decode produced, comparable across chunkings, errors included.
enum DecodeOutcome: Equatable, CustomStringConvertible {
    case events([ProviderEvent])
    case providerError(ProviderErrorCode, String)
    case violation(String)
    case other(String)

    var description: String {
        switch self {
        case .events(let e): return "events(\(e.count))"
        case .providerError(let c, let m): return "providerError(\(c.rawValue): \(m))"
        case .violation(let m): return "violation(\(m))"
        case .other(let m): return "other(\(m))"
        }
    }

    var events: [ProviderEvent] {
        if case .events(let e) = self { return e }
        return []
    }
}

func decodeOutcome(_ decoder: some ProviderStreamDecoder, chunks: [[UInt8]]) -> DecodeOutcome {
    var d = decoder
    return decodeOutcome { try d.decodeAll(chunks: chunks) }
}

func decodeOutcome(_ decode: () throws -> [ProviderEvent]) -> DecodeOutcome {
    do {
        return .events(try decode())
    } catch let e as ProviderError {
        return .providerError(e.code, e.safeDescription)
    } catch let e as ProviderContractViolation {
        return .violation(e.message)
    } catch {
        return .other(String(describing: error))
    }
}

/// The assembled result of a round trip.
struct Assembled: Equatable {
    var text = ""
    var reasoning = ""
    var refusal = ""
    var signatures: [String] = []
    var toolCalls: [ModelToolCall] = []
    var usage: ModelUsage?
    var stop: ModelStopReason?

    init(_ events: [ProviderEvent]) {
        for event in events {
            switch event {
            case .textDelta(let t): text += t
            case .reasoningDelta(let t): reasoning += t
            case .reasoningSignature(let sig): signatures.append(sig)
            case .refusalDelta(let t): refusal += t
            case .toolCall(let c): toolCalls.append(c)
            case .usage(let u): usage = u
            case .end(let s): stop = s
            }
        }
    }
}

/// Decodes a fixture under every chunking, checks they agree, returns the outcome.
func decodeFixture(_ path: String, _ make: () -> some ProviderStreamDecoder) throws -> DecodeOutcome {
    let bytes = try Fixtures.bytes(path)
    let reference = decodeOutcome(make(), chunks: [bytes])
    for (label, chunks) in Chunking.all(bytes) {
        let outcome = decodeOutcome(make(), chunks: chunks)
        #expect(outcome == reference, "\(path) differs under chunking \(label)")
    }
    return reference
}

// MARK: - OpenAI fixtures

@Suite struct ProviderOpenAIFixtureTests {
    func assembled(_ name: String) throws -> Assembled {
        let outcome = try decodeFixture("openai-chat/\(name)") { OpenAIChatStreamDecoder() }
        guard case .events(let events) = outcome else {
            Issue.record("\(name) failed: \(outcome)")
            return Assembled([])
        }
        // `.end` is always last and appears once.
        #expect(events.last.map { if case .end = $0 { true } else { false } } == true)
        return Assembled(events)
    }

    @Test func everyFixtureDecodesIdenticallyUnderAllChunkings() throws {
        let names = try Fixtures.names(in: "openai-chat")
        #expect(names.count == 6)
        for name in names {
            let outcome = try decodeFixture("openai-chat/\(name)") { OpenAIChatStreamDecoder() }
            #expect(!outcome.events.isEmpty, "\(name): \(outcome)")
        }
    }

    @Test func text() throws {
        let a = try assembled("text.sse")
        #expect(a.text == "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I recommend checking a reliable weather website or a weather app.")
        #expect(a.stop == .endTurn)
        #expect(a.usage == ModelUsage(inputTokens: 14, outputTokens: 30, reasoningTokens: 0))
        #expect(a.toolCalls.isEmpty)
    }

    @Test func parallelToolCalls() throws {
        let a = try assembled("parallel-tool-calls.sse")
        #expect(a.text == "")
        #expect(a.toolCalls == [
            ModelToolCall(id: "call_JMW1whyEaYG438VE1OIflxA2", name: "GetWeatherArgs",
                          argumentsJSON: #"{"city": "Edinburgh", "country": "GB", "units": "c"}"#),
            ModelToolCall(id: "call_DNYTawLBoN8fj3KN6qU9N1Ou", name: "get_stock_price",
                          argumentsJSON: #"{"ticker": "AAPL", "exchange": "NASDAQ"}"#),
        ])
        #expect(a.stop == .toolUse)
        #expect(a.usage?.inputTokens == 149)
        #expect(a.usage?.outputTokens == 60)
    }

    @Test func toolCall() throws {
        let a = try assembled("tool-call.sse")
        #expect(a.toolCalls == [ModelToolCall(id: "call_c91SqDXlYFuETYv8mUHzz6pp", name: "GetWeatherArgs",
                                              argumentsJSON: #"{"city":"Edinburgh","country":"UK","units":"c"}"#)])
        #expect(a.stop == .toolUse)
        #expect(a.usage?.inputTokens == 76)
        #expect(a.usage?.outputTokens == 24)
    }

    @Test func toolCallNonStrict() throws {
        let a = try assembled("tool-call-nonstrict.sse")
        #expect(a.toolCalls == [ModelToolCall(id: "call_4XzlGBLtUe9dy3GVNV4jhq7h", name: "get_weather",
                                              argumentsJSON: #"{"city":"New York City"}"#)])
        #expect(a.usage?.inputTokens == 44)
        #expect(a.usage?.outputTokens == 16)
    }

    @Test func finishLength() throws {
        let a = try assembled("finish-length.sse")
        #expect(a.text == #"{""#)
        #expect(a.stop == .maxTokens)
        #expect(a.usage?.inputTokens == 79)
        #expect(a.usage?.outputTokens == 1)
    }

    @Test func refusal() throws {
        let a = try assembled("refusal.sse")
        #expect(a.text == "")
        #expect(a.refusal == "I'm sorry, I can't assist with that request.")
        // Documented choice: `stop` with only refusal text is reported as a refusal.
        #expect(a.stop == .refusal)
        #expect(a.usage?.inputTokens == 79)
        #expect(a.usage?.outputTokens == 11)
    }

    @Test func aFinishedStreamWithoutDoneIsCompleteAnUnfinishedOneTruncated() throws {
        let text = String(decoding: try Fixtures.bytes("openai-chat/text.sse"), as: UTF8.self)
        guard let done = text.range(of: "data: [DONE]"), let finish = text.range(of: #""finish_reason":"stop""#) else {
            Issue.record("fixture has no [DONE] or finish_reason")
            return
        }
        // finish_reason came, [DONE] did not: the answer is whole.
        let finished = Assembled(decodeOutcome(OpenAIChatStreamDecoder(), chunks: [Array(text[..<done.lowerBound].utf8)]).events)
        #expect(finished.stop == .endTurn)
        #expect(!finished.text.isEmpty)
        // Cut before the chunk that says it finished: truncated.
        let lineStart = text[..<finish.lowerBound].range(of: "data:", options: .backwards)?.lowerBound ?? finish.lowerBound
        let outcome = decodeOutcome(OpenAIChatStreamDecoder(), chunks: [Array(text[..<lineStart].utf8)])
        guard case .providerError(let code, _) = outcome else {
            Issue.record("expected streamTruncated, got \(outcome)")
            return
        }
        #expect(code == .streamTruncated)
    }
}

// MARK: - Anthropic fixtures

@Suite struct ProviderAnthropicFixtureTests {
    func outcome(_ name: String) throws -> DecodeOutcome {
        try decodeFixture("anthropic/\(name)") { AnthropicStreamDecoder() }
    }

    func assembled(_ name: String) throws -> Assembled {
        let o = try outcome(name)
        guard case .events(let events) = o else {
            Issue.record("\(name) failed: \(o)")
            return Assembled([])
        }
        return Assembled(events)
    }

    static let errorFixtures: Set<String> = ["tool-use-invalid-json.sse", "out-of-order-block-index.sse"]

    @Test func everyFixtureDecodesIdenticallyUnderAllChunkings() throws {
        let names = try Fixtures.names(in: "anthropic")
        #expect(names.count == 27)
        for name in names {
            let o = try outcome(name)
            if Self.errorFixtures.contains(name) {
                if case .violation = o {} else { Issue.record("\(name): expected a contract violation, got \(o)") }
            } else {
                // Each ends with message_stop thanks to the EOF flush, so `.end` arrives.
                let a = Assembled(o.events)
                #expect(a.stop != nil, "\(name): \(o)")
            }
        }
    }

    @Test func text() throws {
        let a = try assembled("text.sse")
        #expect(a.text == "Hello there!")
        #expect(a.stop == .endTurn)
        #expect(a.usage == ModelUsage(inputTokens: 11, outputTokens: 6, cacheCountedApart: true))
    }

    @Test func toolUse() throws {
        let a = try assembled("tool-use.sse")
        #expect(a.text == "I'll check the current weather in Paris for you.")
        #expect(a.toolCalls == [ModelToolCall(id: "toolu_01NRLabsLyVHZPKxbKvkfSMn", name: "get_weather",
                                              argumentsJSON: #"{"location": "Paris"}"#)])
        #expect(a.stop == .toolUse)
        #expect(a.usage == ModelUsage(inputTokens: 377, outputTokens: 65, cachedInputTokens: 0, cacheCreationInputTokens: 0, cacheCountedApart: true))
    }

    @Test func toolJSONCutByMaxTokensIsNoCallButAMaxTokensEnd() throws {
        let a = try assembled("truncated-tool-json.sse")
        #expect(a.toolCalls.isEmpty)
        #expect(a.stop == .maxTokens)
    }

    @Test func invalidToolJSONIsAContractViolation() throws {
        let o = try outcome("tool-use-invalid-json.sse")
        guard case .violation(let message) = o else {
            Issue.record("expected violation, got \(o)")
            return
        }
        #expect(message.contains("get_weather"))
        #expect(message.contains("not valid JSON"))
    }

    @Test func outOfOrderBlockIndexIsAContractViolation() throws {
        #expect(try outcome("out-of-order-block-index.sse")
            == .violation("Anthropic stream: unexpected content block index 1 (expected 0)"))
    }

    @Test func usageIsOverwrittenFieldByField() throws {
        let extra = try assembled("message-delta-extra-fields.sse")
        #expect(extra.usage == ModelUsage(inputTokens: 40, outputTokens: 8, cachedInputTokens: 7, cacheCreationInputTokens: 12, reasoningTokens: 3, cacheCountedApart: true))
        let omitted = try assembled("message-delta-omitted-usage.sse")
        #expect(omitted.usage == ModelUsage(inputTokens: 25, outputTokens: 8, cachedInputTokens: 5, cacheCreationInputTokens: 10, cacheCountedApart: true))
        let missingStart = try assembled("missing-start-usage.sse")
        #expect(missingStart.text == "hi")
        #expect(missingStart.usage == ModelUsage(inputTokens: 11, outputTokens: 1, cachedInputTokens: 5, cacheCreationInputTokens: 3, cacheCountedApart: true))
        let noInput = try assembled("beta-usage-omitted-input-tokens.sse")
        #expect(noInput.usage == ModelUsage(inputTokens: 0, outputTokens: 6, cacheCountedApart: true))
        let usageOmitted = try assembled("usage-omitted.sse")
        #expect(usageOmitted.usage == ModelUsage(inputTokens: 12, outputTokens: 6, cacheCountedApart: true))
    }

    @Test func unknownBlocksAndFieldsAreIgnored() throws {
        #expect(try assembled("extra-unknown-fields.sse").text == "Hello!")
        let compaction = try assembled("compaction-multi-delta.sse")
        #expect(compaction.text == "Hello there!")
        #expect(compaction.usage == ModelUsage(inputTokens: 30, outputTokens: 8, cacheCountedApart: true))
        #expect(try assembled("fallback-model-block.sse").text == "Hello there!")
        #expect(try assembled("container.sse").text == "Running your code now.")
    }

    @Test func serverToolsAreNotClientCalls() throws {
        let results = try assembled("server-tool-results.sse")
        #expect(results.toolCalls == [ModelToolCall(id: "tu_client_001", name: "ask_internal_tool", argumentsJSON: #"{"query":"test"}"#)])
        #expect(results.stop == .toolUse)
        let use = try assembled("server-tool-use.sse")
        #expect(use.text == "Let me search for that.")
        #expect(use.toolCalls.isEmpty)
        #expect(use.stop == .endTurn)
    }

    @Test func refusalStopReason() throws {
        let a = try assembled("refusal-stop-details.sse")
        #expect(a.text == "")
        #expect(a.stop == .refusal)
        #expect(a.usage == ModelUsage(inputTokens: 20, outputTokens: 120, reasoningTokens: 67, cacheCountedApart: true))
    }

    @Test func missingMessageStopAfterTheStopReasonIsCompleteBeforeItTruncated() throws {
        let text = String(decoding: try Fixtures.bytes("anthropic/text.sse"), as: UTF8.self)
        guard let stop = text.range(of: "event: message_stop"), let delta = text.range(of: "event: message_delta") else {
            Issue.record("fixture has no message_stop or message_delta")
            return
        }
        let finished = Assembled(decodeOutcome(AnthropicStreamDecoder(), chunks: [Array(text[..<stop.lowerBound].utf8)]).events)
        #expect(finished.stop == .endTurn)
        #expect(finished.text == "Hello there!")
        let outcome = decodeOutcome(AnthropicStreamDecoder(), chunks: [Array(text[..<delta.lowerBound].utf8)])
        guard case .providerError(let code, _) = outcome else {
            Issue.record("expected streamTruncated, got \(outcome)")
            return
        }
        #expect(code == .streamTruncated)
    }
}
