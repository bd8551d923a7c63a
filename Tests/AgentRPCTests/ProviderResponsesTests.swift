import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// The OpenAI Responses fixtures live in the repository (Tests/Fixtures/openai-responses,
/// written from the documented event shapes; see its README).
enum ResponsesFixtures {
    static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/openai-responses")

    static func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(name)))
    }

    /// Decodes a fixture under every chunking (whole, byte by byte, 50 random),
    /// checks they agree, and returns the outcome.
    static func decode(_ name: String) throws -> DecodeOutcome {
        let bytes = try bytes(name)
        let reference = decodeOutcome(OpenAIResponsesStreamDecoder(), chunks: [bytes])
        for (label, chunks) in Chunking.all(bytes) {
            #expect(decodeOutcome(OpenAIResponsesStreamDecoder(), chunks: chunks) == reference, "\(name) differs under chunking \(label)")
        }
        return reference
    }

    static func assembled(_ name: String) throws -> Assembled {
        let outcome = try decode(name)
        guard case .events(let events) = outcome else {
            Issue.record("\(name) failed: \(outcome)")
            return Assembled([])
        }
        #expect(events.last.map { if case .end = $0 { true } else { false } } == true, "\(name): .end is not last")
        #expect(events.filter { if case .end = $0 { true } else { false } }.count == 1)
        return Assembled(events)
    }
}

@Suite struct ProviderResponsesFixtureTests {
    @Test func everyFixtureIsCoveredAndDecodesTheSameUnderAllChunkings() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: ResponsesFixtures.directory.path)
            .filter { $0.hasSuffix(".sse") }.sorted()
        #expect(names == [
            "error-event.sse", "failed.sse", "incomplete-content-filter.sse", "incomplete-max-output-tokens.sse",
            "incomplete-truncated-function-call.sse", "parallel-function-calls.sse", "reasoning-function-call.sse",
            "refusal.sse", "structured-output.sse", "text.sse",
        ])
        for name in names { _ = try ResponsesFixtures.decode(name) }
    }

    @Test func text() throws {
        let a = try ResponsesFixtures.assembled("text.sse")
        #expect(a.text == "The capital of France is Paris (Île-de-France) ✓.")
        #expect(a.stop == .endTurn)
        #expect(a.usage == ModelUsage(inputTokens: 21, outputTokens: 9, cachedInputTokens: 0, reasoningTokens: 0))
        #expect(a.toolCalls.isEmpty && a.reasoning.isEmpty && a.signatures.isEmpty)
    }

    @Test func reasoningSummaryAndFragmentedFunctionCall() throws {
        let a = try ResponsesFixtures.assembled("reasoning-function-call.sse")
        // Two summary parts, kept apart by a blank line.
        #expect(a.reasoning == "**Finding the weather**\n\nThe user asks about Paris.\n\nI should call get_weather.")
        // The call is named by its call_id (what function_call_output must name), not the fc_ item id.
        #expect(a.toolCalls == [ModelToolCall(id: "call_Q8x2Weather", name: "get_weather", argumentsJSON: #"{"city":"Paris","unit":"c"}"#)])
        #expect(a.stop == .toolUse)
        #expect(a.usage == ModelUsage(inputTokens: 312, outputTokens: 86, cachedInputTokens: 256, reasoningTokens: 64))
        // The encrypted reasoning comes back as one signature, to be sent in the next request.
        #expect(a.signatures.count == 1)
        let signature = try #require(a.signatures.first)
        let carrier = try #require(OpenAIResponsesReasoningCarrier(signature: signature))
        #expect(carrier.items == [.init(
            id: "rs_reason02", summary: ["**Finding the weather**\n\nThe user asks about Paris.", "I should call get_weather."],
            encryptedContent: "gAAAAABoEncryptedReasoningPayload02==")])
    }

    @Test func interleavedParallelCallsAreMatchedByItemId() throws {
        let a = try ResponsesFixtures.assembled("parallel-function-calls.sse")
        #expect(a.toolCalls == [
            ModelToolCall(id: "call_Paris03", name: "get_weather", argumentsJSON: #"{"city":"Paris"}"#),
            ModelToolCall(id: "call_Stock03", name: "get_stock_price", argumentsJSON: #"{"ticker":"AAPL"}"#),
        ])
        #expect(a.stop == .toolUse)
    }

    @Test func incompleteReasonsBecomeStopReasons() throws {
        let cut = try ResponsesFixtures.assembled("incomplete-max-output-tokens.sse")
        #expect(cut.text == #"{"title": "A"#)
        #expect(cut.stop == .maxTokens)
        #expect(cut.usage?.reasoningTokens == 12)
        let filtered = try ResponsesFixtures.assembled("incomplete-content-filter.sse")
        #expect(filtered.text == "Here is how")
        #expect(filtered.stop == .contentFilter)
    }

    @Test func functionCallCutByTheTokenLimitIsDropped() throws {
        let a = try ResponsesFixtures.assembled("incomplete-truncated-function-call.sse")
        #expect(a.toolCalls.isEmpty)
        #expect(a.stop == .maxTokens)
        #expect(a.usage?.outputTokens == 24)
    }

    @Test func refusal() throws {
        let a = try ResponsesFixtures.assembled("refusal.sse")
        #expect(a.text.isEmpty)
        #expect(a.refusal == "I'm sorry, I can't help with that.")
        #expect(a.stop == .refusal)
    }

    @Test func failedAndErrorEventsAreTypedProviderErrors() throws {
        #expect(try ResponsesFixtures.decode("failed.sse") == .providerError(.internalError, ProviderErrorMapper.safeDescription(.internalError, status: nil)))
        let outcome = try ResponsesFixtures.decode("error-event.sse")
        guard case .providerError(let code, _) = outcome else {
            Issue.record("expected a provider error, got \(outcome)")
            return
        }
        #expect(code == .rateLimited)
    }

    @Test func reasoningWithoutSummaryStillCarriesItsEncryptedContent() throws {
        let a = try ResponsesFixtures.assembled("structured-output.sse")
        #expect(a.reasoning.isEmpty)
        #expect(a.text == #"{"city": "Paris", "celsius": 18}"#)
        let signature = try #require(a.signatures.first)
        let carrier = try #require(OpenAIResponsesReasoningCarrier(signature: signature))
        #expect(carrier.items.map(\.encryptedContent) == ["gAAAAABoEncryptedNoSummary10=="])
        #expect(carrier.items.map(\.summary) == [[]])
    }

    @Test func streamWithoutTerminalEventIsTruncated() throws {
        let text = String(decoding: try ResponsesFixtures.bytes("text.sse"), as: UTF8.self)
        let cut = try #require(text.range(of: "event: response.completed"))
        let outcome = decodeOutcome(OpenAIResponsesStreamDecoder(), chunks: [Array(text[..<cut.lowerBound].utf8)])
        guard case .providerError(let code, _) = outcome else {
            Issue.record("expected streamTruncated, got \(outcome)")
            return
        }
        #expect(code == .streamTruncated)
    }
}

@Suite struct ProviderResponsesDecoderTests {
    func decode(_ events: [JSONValue], named: Bool = true) -> DecodeOutcome {
        let body = events.map { e in
            (named ? "event: \(e["type"]?.stringValue ?? "")\n" : "") + "data: \(e.serializedString())\n\n"
        }.joined()
        return decodeOutcome(OpenAIResponsesStreamDecoder(), chunks: [Array(body.utf8)])
    }

    static let completed: JSONValue = ["type": "response.completed", "response": ["status": "completed", "usage": .null]]

    @Test func usageThatWasNotReportedIsAbsent() {
        let outcome = decode([["type": "response.output_text.delta", "item_id": "m", "delta": "hi"], Self.completed])
        #expect(outcome == .events([.textDelta("hi"), .end(.endTurn)]))
    }

    @Test func wholeItemsWithoutDeltasAreStillDelivered() {
        // A server that sends only the finished items (no deltas, no `added`).
        let outcome = decode([
            ["type": "response.output_item.done", "output_index": 0,
             "item": ["type": "reasoning", "id": "rs_1", "summary": [["type": "summary_text", "text": "Think."]]]],
            ["type": "response.output_item.done", "output_index": 1,
             "item": ["type": "message", "id": "m_1", "content": [["type": "output_text", "text": "Done."]]]],
            ["type": "response.output_item.done", "output_index": 2,
             "item": ["type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "ls", "arguments": ""]],
            Self.completed,
        ], named: false)
        #expect(outcome == .events([
            .reasoningDelta("Think."), .textDelta("Done."),
            .toolCall(ModelToolCall(id: "call_1", name: "ls", argumentsJSON: "{}")), .end(.toolUse),
        ]))
    }

    @Test func terminalEventAloneCarriesTheReply() {
        let outcome = decode([[
            "type": "response.completed",
            "response": ["status": "completed", "output": [
                ["type": "message", "id": "m_1", "content": [["type": "output_text", "text": "Whole."]]],
                ["type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "ls", "arguments": "{\"a\":1}"],
            ], "usage": ["input_tokens": 1, "output_tokens": 2]],
        ]])
        #expect(outcome == .events([
            .textDelta("Whole."), .toolCall(ModelToolCall(id: "call_1", name: "ls", argumentsJSON: "{\"a\":1}")),
            .usage(ModelUsage(inputTokens: 1, outputTokens: 2)), .end(.toolUse),
        ]))
    }

    @Test func deltasWithoutItemIdsAreNotRepeatedByTheFinishedItem() {
        let outcome = decode([
            ["type": "response.output_text.delta", "delta": "Hi"],
            ["type": "response.output_item.done", "output_index": 0,
             "item": ["type": "message", "id": "m_1", "content": [["type": "output_text", "text": "Hi"]]]],
            Self.completed,
        ])
        #expect(outcome == .events([.textDelta("Hi"), .end(.endTurn)]))
    }

    @Test func argumentDeltasWithoutAnAddedItemNeedTheNameFromDone() {
        let outcome = decode([
            ["type": "response.function_call_arguments.delta", "item_id": "fc_9", "output_index": 0, "delta": "{\"a\":"],
            ["type": "response.function_call_arguments.delta", "item_id": "fc_9", "output_index": 0, "delta": "1}"],
            Self.completed,
        ])
        guard case .violation(let message) = outcome else {
            Issue.record("expected a contract violation, got \(outcome)")
            return
        }
        #expect(message.contains("fc_9") && message.contains("no name"))
    }

    @Test func doneArgumentsReplaceTheFragments() {
        let outcome = decode([
            ["type": "response.output_item.added", "output_index": 0,
             "item": ["type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""]],
            ["type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": "{\"a\":1"],
            ["type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": "{\"a\":1}"],
            Self.completed,
        ])
        #expect(outcome == .events([.toolCall(ModelToolCall(id: "call_1", name: "f", argumentsJSON: "{\"a\":1}")), .end(.toolUse)]))
    }

    @Test func unknownEventsAndDoneSentinelAreIgnored() {
        let outcome = decode([
            ["type": "response.web_search_call.searching", "item_id": "ws_1"],
            ["type": "response.output_text.annotation.added", "item_id": "m"],
            ["type": "response.output_text.delta", "item_id": "m", "delta": "ok"],
            Self.completed,
        ])
        #expect(outcome == .events([.textDelta("ok"), .end(.endTurn)]))
        var decoder = OpenAIResponsesStreamDecoder()
        #expect((try? decoder.decode(SSEEvent(data: "[DONE]"))) == [])
        #expect(!decoder.isComplete)
    }

    @Test func errorCodesSpecificToResponsesAreRefined() {
        for (code, expected) in [("invalid_image_url", ProviderErrorCode.badRequest), ("bio_policy", .contentFiltered),
                                 ("invalid_prompt", .badRequest), ("server_error", .internalError),
                                 ("rate_limit_exceeded", .rateLimited), ("something_new", .providerError)] {
            let outcome = decode([["type": "response.failed", "response": ["status": "failed", "error": ["code": .string(code), "message": "x"]]]])
            guard case .providerError(let got, _) = outcome else {
                Issue.record("\(code): \(outcome)")
                continue
            }
            #expect(got == expected, "\(code)")
        }
    }

    @Test func errorMessagesAreScrubbedOfTheKey() {
        let body = "event: error\ndata: {\"type\":\"error\",\"code\":\"invalid_api_key\",\"message\":\"bad key sk-live-0123456789abcdef\"}\n\n"
        var decoder = OpenAIResponsesStreamDecoder(secrets: ["sk-live-0123456789abcdef"])
        do {
            _ = try decoder.decodeAll(chunks: [Array(body.utf8)])
            Issue.record("expected an error")
        } catch let error as ProviderError {
            #expect(error.code == .authUserInvalid)
            #expect(!error.unsafeMessage.contains("0123456789abcdef"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func wholeResponseObjectDecodesLikeItsStream() throws {
        let body: JSONValue = [
            "id": "resp_1", "object": "response", "status": "incomplete", "error": .null,
            "incomplete_details": ["reason": "max_output_tokens"],
            "output": [
                ["type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"],
                ["type": "message", "id": "m_1", "status": "incomplete", "content": [["type": "output_text", "text": "Hal"]]],
            ],
            "usage": ["input_tokens": 5, "output_tokens": 7, "output_tokens_details": ["reasoning_tokens": 4]],
        ]
        let events = try OpenAIResponsesStreamDecoder.decodeResponse(Array(body.serializedString().utf8))
        let a = Assembled(events)
        #expect(a.text == "Hal" && a.stop == .maxTokens)
        #expect(a.usage == ModelUsage(inputTokens: 5, outputTokens: 7, reasoningTokens: 4))
        #expect(a.signatures.count == 1)
        #expect(throws: ProviderError.self) {
            try OpenAIResponsesStreamDecoder.decodeResponse(Array(#"{"error":{"code":"rate_limit_exceeded","message":"slow"}}"#.utf8))
        }
    }

    @Test func carrierIsNotMistakenForAnthropicThinking() {
        let carrier = OpenAIResponsesReasoningCarrier(items: [.init(id: "rs_1", summary: ["s"], encryptedContent: "enc")])
        #expect(OpenAIResponsesReasoningCarrier(signature: carrier.signature) == carrier)
        #expect(OpenAIResponsesReasoningCarrier(signature: "EqQBCkYIBx==") == nil)
        #expect(OpenAIResponsesReasoningCarrier(signature: "{\"other\":1}") == nil)
    }
}
