import AgentRPCProtocol
import Testing
@testable import AgentRPC

/// Builds an SSE body from `data:` payloads (and optional event names).
func sseBody(_ payloads: [String], events: [String?]? = nil) -> [UInt8] {
    var text = ""
    for (i, p) in payloads.enumerated() {
        if let name = events?[i] { text += "event: \(name)\n" }
        text += "data: \(p)\n\n"
    }
    return Array(text.utf8)
}

func openAIChunk(_ delta: String, finish: String? = nil) -> String {
    let f = finish.map { "\"\($0)\"" } ?? "null"
    return #"{"choices":[{"index":0,"delta":\#(delta),"finish_reason":\#(f)}]}"#
}

@Suite struct ProviderOpenAIDecoderTests {
    func run(_ body: [UInt8]) -> DecodeOutcome {
        let reference = decodeOutcome(OpenAIChatStreamDecoder(), chunks: [body])
        #expect(decodeOutcome(OpenAIChatStreamDecoder(), chunks: body.map { [$0] }) == reference)
        return reference
    }

    @Test func llamaCppRepeatsIdTypeAndNameInEveryChunk() {
        let header = #""index":0,"id":"call_1","type":"function""#
        let body = sseBody([
            openAIChunk(#"{"role":"assistant","content":null}"#),
            openAIChunk(#"{"tool_calls":[{\#(header),"function":{"name":"get_weather","arguments":"{\"ci"}}]}"#),
            openAIChunk(#"{"tool_calls":[{\#(header),"function":{"name":"get_weather","arguments":"ty\":\"Paris\"}"}}]}"#),
            openAIChunk("{}", finish: "tool_calls"),
            "[DONE]",
        ])
        let a = Assembled(run(body).events)
        #expect(a.toolCalls == [ModelToolCall(id: "call_1", name: "get_weather", argumentsJSON: #"{"city":"Paris"}"#)])
        #expect(a.stop == .toolUse)
        #expect(a.usage == nil)  // no usage chunk: tolerated
    }

    @Test func wholeCallsInOneChunkAndParallelCallsWithoutIndex() {
        let body = sseBody([
            openAIChunk(#"{"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},{"id":"b","type":"function","function":{"name":"g","arguments":""}}]}"#),
            openAIChunk("{}", finish: "tool_calls"),
            "[DONE]",
        ])
        let a = Assembled(run(body).events)
        #expect(a.toolCalls == [
            ModelToolCall(id: "a", name: "f", argumentsJSON: #"{"x":1}"#),
            ModelToolCall(id: "b", name: "g", argumentsJSON: "{}"),
        ])
    }

    @Test func sameIndexWithDifferentIdsIsTwoCalls() {
        let body = sseBody([
            openAIChunk(#"{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}"#),
            openAIChunk(#"{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{}"}}]}"#),
            "[DONE]",
        ])
        let a = Assembled(run(body).events)
        #expect(a.toolCalls.map(\.id) == ["a", "b"])
        // No finish_reason at all: calls were made, so toolUse.
        #expect(a.stop == .toolUse)
    }

    @Test func reasoningContentAndReasoningAreReasoningDeltas() {
        let body = sseBody([
            openAIChunk(#"{"reasoning_content":"think "}"#),
            openAIChunk(#"{"reasoning":"more"}"#),
            openAIChunk(#"{"content":"answer"}"#, finish: "stop"),
            #"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":4}}}"#,
            "[DONE]",
        ])
        let events = run(body).events
        #expect(events == [
            .reasoningDelta("think "), .reasoningDelta("more"), .textDelta("answer"),
            .usage(ModelUsage(inputTokens: 5, outputTokens: 7, cachedInputTokens: 3, reasoningTokens: 4)),
            .end(.endTurn),
        ])
    }

    @Test func finishReasonMapping() {
        for (reason, stop) in [("stop", ModelStopReason.endTurn), ("length", .maxTokens), ("content_filter", .contentFilter),
                               ("tool_calls", .toolUse), ("weird", .other("weird"))] {
            let body = sseBody([openAIChunk(#"{"content":"x"}"#, finish: reason), "[DONE]"])
            #expect(Assembled(run(body).events).stop == stop)
        }
    }

    @Test func emptyBodyIsStreamTruncated() {
        guard case .providerError(let code, _) = run([]) else {
            Issue.record("expected a provider error")
            return
        }
        #expect(code == .streamTruncated)
    }

    @Test func inStreamErrorIsClassified() {
        let body = sseBody([
            openAIChunk(#"{"content":"par"}"#),
            #"{"error":{"message":"The server had an error","type":"server_error","code":null}}"#,
        ])
        guard case .providerError(let code, _) = run(body) else {
            Issue.record("expected a provider error")
            return
        }
        #expect(code == .internalError)
    }

    @Test func invalidChunkJSONIsAContractViolation() {
        guard case .violation(let message) = run(sseBody(["{not json"])) else {
            Issue.record("expected a violation")
            return
        }
        #expect(message.contains("not valid JSON"))
    }

    @Test func toolCallWithoutNameIsAContractViolation() {
        let body = sseBody([openAIChunk(#"{"tool_calls":[{"index":0,"id":"a","function":{"arguments":"{}"}}]}"#), "[DONE]"])
        guard case .violation = run(body) else {
            Issue.record("expected a violation")
            return
        }
    }

    @Test func nonStreamingResponse() throws {
        let body = #"""
        {"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,
         "tool_calls":[{"id":"call_9","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"a\"}"}}]},
         "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}
        """#
        let events = try OpenAIChatStreamDecoder.decodeResponse(Array(body.utf8))
        #expect(events == [
            .toolCall(ModelToolCall(id: "call_9", name: "lookup", argumentsJSON: #"{"q":"a"}"#)),
            .usage(ModelUsage(inputTokens: 10, outputTokens: 2)),
            .end(.toolUse),
        ])
        let text = #"{"choices":[{"message":{"role":"assistant","content":"hi","reasoning_content":"hm"},"finish_reason":"stop"}]}"#
        #expect(try OpenAIChatStreamDecoder.decodeResponse(Array(text.utf8)) == [.reasoningDelta("hm"), .textDelta("hi"), .end(.endTurn)])
        #expect(throws: ProviderError.self) {
            _ = try OpenAIChatStreamDecoder.decodeResponse(Array(#"{"error":{"message":"x","type":"invalid_request_error"}}"#.utf8))
        }
    }
}

@Suite struct ProviderAnthropicDecoderTests {
    func run(_ payloads: [String]) -> DecodeOutcome {
        // Event names come from the payload's `type`, as the API sends them.
        let names: [String?] = payloads.map { (try? JSONValue.parse($0))?["type"]?.stringValue }
        let body = sseBody(payloads, events: names)
        let reference = decodeOutcome(AnthropicStreamDecoder(), chunks: [body])
        #expect(decodeOutcome(AnthropicStreamDecoder(), chunks: body.map { [$0] }) == reference)
        return reference
    }

    static let start = #"{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}"#
    static let stop = #"{"type":"message_stop"}"#
    static func delta(_ reason: String) -> String {
        #"{"type":"message_delta","delta":{"stop_reason":"\#(reason)"},"usage":{"output_tokens":9}}"#
    }

    @Test func thinkingSignatureAndRedactedThinking() {
        let payloads = [
            Self.start,
            #"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            #"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think"}}"#,
            #"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig=="}}"#,
            #"{"type":"content_block_stop","index":0}"#,
            #"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"opaque"}}"#,
            #"{"type":"content_block_stop","index":1}"#,
            #"{"type":"ping"}"#,
            #"{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}"#,
            #"{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Done"}}"#,
            #"{"type":"content_block_stop","index":2}"#,
            Self.delta("end_turn"),
            #"{"type":"some_future_event"}"#,
            Self.stop,
        ]
        // The signature comes out once its block stops; the redacted block is dropped.
        #expect(run(payloads).events == [
            .reasoningDelta("Let me think"), .reasoningSignature("sig=="), .textDelta("Done"),
            .usage(ModelUsage(inputTokens: 3, outputTokens: 9, cacheCountedApart: true)), .end(.endTurn),
        ])
    }

    @Test func thinkingSignatureInPiecesBeforeToolUse() {
        let events = run([
            Self.start,
            #"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
            #"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Need the time."}}"#,
            #"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
            #"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"Rk9P"}}"#,
            #"{"type":"content_block_stop","index":0}"#,
            #"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"now","input":{}}}"#,
            #"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
            #"{"type":"content_block_stop","index":1}"#,
            Self.delta("tool_use"),
            Self.stop,
        ]).events
        #expect(events == [
            .reasoningDelta("Need the time."), .reasoningSignature("EqQBRk9P"),
            .toolCall(ModelToolCall(id: "t1", name: "now", argumentsJSON: "{}")),
            .usage(ModelUsage(inputTokens: 3, outputTokens: 9, cacheCountedApart: true)), .end(.toolUse),
        ])
    }

    @Test func emptyToolInputIsEmptyObject() {
        let events = run([
            Self.start,
            #"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"now","input":{}}}"#,
            #"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            #"{"type":"content_block_stop","index":0}"#,
            Self.delta("tool_use"),
            Self.stop,
        ]).events
        #expect(Assembled(events).toolCalls == [ModelToolCall(id: "t1", name: "now", argumentsJSON: "{}")])
        #expect(Assembled(events).stop == .toolUse)
    }

    @Test func invalidToolJSONUnderMaxTokensIsDroppedAndEndsMaxTokens() {
        let outcome = run([
            Self.start,
            #"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}"#,
            #"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\": \"b"}}"#,
            #"{"type":"content_block_stop","index":0}"#,
            Self.delta("max_tokens"),
            Self.stop,
        ])
        #expect(Assembled(outcome.events).toolCalls.isEmpty)
        #expect(Assembled(outcome.events).stop == .maxTokens)
    }

    @Test func errorEventsAreClassifiedByType() {
        let table: [(String, ProviderErrorCode)] = [
            ("overloaded_error", .serviceUnavailable), ("rate_limit_error", .rateLimited), ("api_error", .internalError),
            ("authentication_error", .authUserInvalid), ("permission_error", .entitlementRequired),
            ("not_found_error", .modelUnavailable), ("invalid_request_error", .badRequest),
            ("request_too_large", .badRequest), ("brand_new_error", .providerError),
        ]
        for (type, code) in table {
            let outcome = run([
                Self.start,
                #"{"type":"error","error":{"type":"\#(type)","message":"Overloaded"}}"#,
            ])
            guard case .providerError(let got, _) = outcome else {
                Issue.record("\(type): expected provider error, got \(outcome)")
                continue
            }
            #expect(got == code, "\(type)")
        }
    }

    @Test func deltaForUnknownBlockIsAContractViolation() {
        let outcome = run([Self.start, #"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}"#])
        guard case .violation(let m) = outcome else {
            Issue.record("expected violation, got \(outcome)")
            return
        }
        #expect(m.contains("never started"))
    }

    @Test func emptyBodyIsStreamTruncated() {
        guard case .providerError(let code, _) = decodeOutcome(AnthropicStreamDecoder(), chunks: []) else {
            Issue.record("expected a provider error")
            return
        }
        #expect(code == .streamTruncated)
    }
}
