import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// The decoders read their streams' common events (text deltas) straight from
/// the bytes and leave every other event to the full parse. Decoded both ways,
/// every recorded stream and every unusual chunk gives the same events and the
/// same errors.
extension ProviderStreamDecoder {
    /// `decodeAll` as it was before the parser lent its bytes: every event
    /// made an `SSEEvent` (its data a string, invalid UTF-8 repaired) first.
    func decodeAllAsStrings(chunks: [[UInt8]]) throws -> [ProviderEvent] {
        var decoder = self
        var parser = SSEParser()
        var events: [ProviderEvent] = []
        for chunk in chunks {
            for sse in try parser.feed(chunk) { events += try decoder.decode(sse) }
        }
        for sse in parser.finish() { events += try decoder.decode(sse) }
        events += try decoder.finish()
        return events
    }
}

@Suite struct ProviderDirectReadingTests {
    enum Provider: CaseIterable {
        case openAIChat, anthropic, responses

        func decoder(direct: Bool) -> any ProviderStreamDecoder {
            switch self {
            case .openAIChat: OpenAIChatStreamDecoder(secrets: ["sk-secret-1234567890"], readsCommonEventsFromBytes: direct)
            case .anthropic: AnthropicStreamDecoder(secrets: ["sk-secret-1234567890"], readsCommonEventsFromBytes: direct)
            case .responses: OpenAIResponsesStreamDecoder(secrets: ["sk-secret-1234567890"], readsCommonEventsFromBytes: direct)
            }
        }

        /// Whether the direct reader takes this event's data.
        func recognises(_ data: String) -> Bool {
            Array(data.utf8).withUnsafeBufferPointer { data in
                switch self {
                case .openAIChat: OpenAIChatStreamDecoder.readCommonChunk(data) != nil
                case .anthropic: AnthropicStreamDecoder.readTextDelta(data) != nil
                case .responses: OpenAIResponsesStreamDecoder.readTextDelta(data) != nil
                }
            }
        }

        var fixtures: [(name: String, bytes: [UInt8])] {
            get throws {
                switch self {
                case .openAIChat: try Fixtures.names(in: "openai-chat").map { ($0, try Fixtures.bytes("openai-chat/\($0)")) }
                case .anthropic: try Fixtures.names(in: "anthropic").map { ($0, try Fixtures.bytes("anthropic/\($0)")) }
                case .responses:
                    try FileManager.default.contentsOfDirectory(atPath: ResponsesFixtures.directory.path)
                        .filter { $0.hasSuffix(".sse") }.sorted().map { ($0, try ResponsesFixtures.bytes($0)) }
                }
            }
        }
    }

    /// Decodes `bytes` under every chunking, with and without direct reading,
    /// and checks all of them agree. The reference is the way every event was
    /// decoded before: the parser's events made strings (`SSEEvent`), each
    /// parsed whole; the others are the transport's, the parser's bytes lent
    /// to the decoder.
    func expectSameBothWays(_ provider: Provider, _ bytes: [UInt8], _ label: String) {
        let reference = decodeOutcome { try provider.decoder(direct: false).decodeAllAsStrings(chunks: [bytes]) }
        for (chunking, chunks) in Chunking.all(bytes) {
            let direct = decodeOutcome(provider.decoder(direct: true), chunks: chunks)
            #expect(direct == reference, "\(label): read directly under chunking \(chunking): \(direct), parsed: \(reference)")
            let parsed = decodeOutcome(provider.decoder(direct: false), chunks: chunks)
            #expect(parsed == reference, "\(label): parsed from the bytes under chunking \(chunking): \(parsed), as strings: \(reference)")
        }
    }

    /// The data of every SSE event in `bytes`.
    func eventData(_ bytes: [UInt8]) throws -> [String] {
        var parser = SSEParser()
        return (try parser.feed(bytes) + parser.finish()).map(\.data)
    }

    @Test(arguments: Provider.allCases)
    func everyRecordedStreamDecodesTheSameBothWays(_ provider: Provider) throws {
        let fixtures = try provider.fixtures
        #expect(fixtures.count >= 6)
        var recognised = 0
        for (name, bytes) in fixtures {
            expectSameBothWays(provider, bytes, name)
            recognised += try eventData(bytes).filter(provider.recognises).count
        }
        // Not vacuous: the recorded streams' text deltas do take the direct path.
        #expect(recognised >= 10, "\(provider): \(recognised) events read directly")
    }

    @Test(arguments: Provider.allCases)
    func theTextStreamsDeltasAreReadDirectly(_ provider: Provider) throws {
        let text = try #require(try provider.fixtures.first { $0.name == "text.sse" })
        let data = try eventData(text.bytes)
        let deltas = data.filter { $0.contains("\"content\":\"") || $0.contains("text_delta") || $0.contains("output_text.delta") }
        #expect(!deltas.isEmpty)
        for chunk in deltas where !chunk.contains("\"content\":\"\"") {
            #expect(provider.recognises(chunk), "\(provider) does not read directly: \(chunk)")
        }
    }

    // MARK: - Unusual chunks

    static let openAIStart = #"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#
    static let openAIEnd = #"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#

    /// Chunks around a text delta, each in a stream of its own; `true` when the
    /// direct reader takes it.
    static let openAIVariants: [(chunk: String, direct: Bool)] = [
        (#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#, true),
        (#" { "choices" : [ { "delta" : { "content" : "hi" } , "index" : 0 } ] } "#, true),
        (#"{"choices":[{"delta":{"content":"hi"}}]}"#, true),
        (#"{"choices":[{"index":0.0,"delta":{"content":"hi"}}]}"#, true),
        (#"{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"think"}}]}"#, true),
        (#"{"choices":[{"index":0,"delta":{"reasoning_content":null,"reasoning":"think"}}]}"#, true),
        (#"{"choices":[{"index":0,"delta":{"reasoning_content":"","reasoning":"think"}}]}"#, true),
        (#"{"choices":[{"index":0,"delta":{"refusal":"no"}}]}"#, true),
        (#"{"choices":[{"index":0,"delta":{"content":"\u00e9\n\"\\\/ \ud83d\ude00"}}]}"#, true),
        (#"{"choices":[{"index":0,"delta":{"content":"half \ud83d"}}]}"#, true),
        (#"{"choices":[{"index":0,"delta":{"content":"\ude00 other half"}}]}"#, true),
        (#"{"choices":[{"index":0,"delta":{"content":"naïve ☃"}}]}"#, true),
        (#"{"x":{"a":[1,-2.5e3,true,false,null,{"b":"\t"}],"c":{}},"choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null}],"usage":null,"error":null}"#, true),
        (#"{"choices":[]}"#, true),
        (#"{}"#, true),
        (#"{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"length"}]}"#, true),
        (#"{"choices":[{"index":0,"delta":{"content":"hi","tool_calls":null}}]}"#, true),
        (#"{"choices":[{"index":0,"delta":"hi"}]}"#, false),
        (#"{"choices":[{"index":0,"delta":{"content":5}}]}"#, false),
        (#"{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}"#, false),
        (#"{"choices":[{"index":0,"delta":{"content":"a"},"delta":{"refusal":"b"}}]}"#, false),
        (#"{"choices":[{"index":0,"delta":{"cont\u0065nt":"a","content":"b"}}]}"#, false),
        (#"{"choices":[{"index":1,"delta":{"content":"a"}}]}"#, false),
        (#"{"choices":[{"index":1,"delta":{"content":"a"}},{"index":0,"delta":{"content":"b"}}]}"#, false),
        // Not a number, so no index: the first choice, as the full parse reads it.
        (#"{"choices":[{"index":"0","delta":{"content":"a"}}]}"#, true),
        (#"{"choices":[1]}"#, false),
        (#"{"choices":{"index":0}}"#, false),
        (#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{}"}}]}}]}"#, false),
        (#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#, false),
        (#"{"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":3}}"#, false),
        (#"{"error":{"message":"boom sk-secret-1234567890","type":"server_error","code":"server_error"}}"#, false),
        (#"{"choices":[{"index":0,"delta":{"content":"a"}}]} x"#, false),
        (#"{"choices":[{"index":0,"delta":{"content":"a"}}]"#, false),
        ("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\ttab\"}}]}", false),  // a raw tab in a string
        (#"{"choices":[{"index":0,"delta":{"content":"\x"}}]}"#, false),
        (#"{"choices":[{"index":0,"delta":{"content":"a"},"x":01}]}"#, false),
        (#"{"choices":[{"index":0,"delta":{"content":"a"},"x":[1,]}]}"#, false),
        (#"{"choices":[{"index":0,"delta":{"content":"a"},"x":nul}]}"#, false),
        (#"["choices"]"#, false),
        (#""text""#, false),
        (#"{"choices":[{"index":0,"delta":{"content":"a"}}],"choices":[]}"#, false),
        // Separators and empty members, walked by the reader's loops.
        (#"{"choices":[{}]}"#, true),
        (#"{ "choices" : [ ] , "id" : "x" }"#, true),
        (#"{"choices":[{"index":0,"delta":{}}],"x":[[],{},[{}]]}"#, true),
        (#"{"choices":[{"index":0,"delta":{"content":"a"}},]}"#, false),
        (#"{"choices":[,]}"#, false),
        (#"{,"choices":[]}"#, false),
        (#"{"choices":[{"index":0,"delta":{"content":"a",}}]}"#, false),
        (#"{"choices":[{"index":0 "delta":{"content":"a"}}]}"#, false),
        (#"{"choices":[{"index":0,"delta":{"content":"a"}}"#, false),
        // A chunk as OpenAI sends it: the members the reader passes over are
        // scanned eight bytes at a time, down to the byte when one is not plain.
        (#"{"id":"chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012","object":"chat.completion.chunk","created":1731000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":" t3"},"logprobs":null,"finish_reason":null}]}"#, true),
        (#"{"id":"chatcmpl-é0123456789","choices":[{"index":0,"delta":{"content":"hi"}}]}"#, true),
        (#"{"id":"abcdefgh\"ijklmnopq","choices":[{"index":0,"delta":{"content":"hi"}}]}"#, true),
        (#"{"id":"abcdefghijklmnop\u00e9","choices":[{"index":0,"delta":{"content":"hi"}}]}"#, true),
        ("{\"id\":\"abcdefghij\tkl\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}", false),  // a raw tab in a skipped string
        (#"{"id":"abcdefghijklmnopqrstuvwxyz"#, false),
        (#"{"abcdefghijklmnopq":1,"choices":[{"index":0,"delta":{"content":"hi"}}]}"#, true),
        (#"{"abcdefghijklmn\u0070q":1,"choices":[{"index":0,"delta":{"content":"hi"}}]}"#, false),
        // The index as an integer read from its bytes, or as the full parse reads any other number.
        (#"{"choices":[{"index":0 ,"delta":{"content":"hi"}}]}"#, true),
        (#"{"choices":[{"index":-0,"delta":{"content":"hi"}}]}"#, true),
        (#"{"choices":[{"index":0e0,"delta":{"content":"hi"}}]}"#, true),
        (#"{"choices":[{"index":1e0,"delta":{"content":"hi"}}]}"#, false),
        (#"{"choices":[{"index":00,"delta":{"content":"hi"}}]}"#, false),
        (#"{"choices":[{"index":10,"delta":{"content":"hi"}}]}"#, false),
        (#"{"choices":[{"index":123456789012,"delta":{"content":"hi"}}]}"#, false),
        // Numbers that are no `intValue`: no index, so the first choice, as the full parse reads them.
        (#"{"choices":[{"index":1000000000000000000000,"delta":{"content":"hi"}}]}"#, true),
        (#"{"choices":[{"index":0.5,"delta":{"content":"hi"}}]}"#, true),
        (#"{"choices":[{"index":true,"delta":{"content":"hi"}}]}"#, true),
        (#"{"choices":[{"index":0,"index":0,"delta":{"content":"hi"}}]}"#, false),
    ]

    @Test(arguments: openAIVariants.indices)
    func anOpenAIChunkDecodesTheSameBothWays(_ n: Int) {
        let (chunk, direct) = Self.openAIVariants[n]
        #expect(Provider.openAIChat.recognises(chunk) == direct, "\(chunk)")
        let stream = [Self.openAIStart, chunk, Self.openAIEnd].map { "data: \($0)\n\n" }.joined() + "data: [DONE]\n\n"
        expectSameBothWays(.openAIChat, Array(stream.utf8), chunk)
    }

    /// The SSE parser repairs invalid UTF-8 in a line before any decoder sees it.
    @Test func invalidUTF8InAnOpenAIChunkIsRepairedTheSameBothWays() {
        var bytes = Array("data: \(Self.openAIStart)\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a".utf8)
        bytes += [0xC3, 0x28]
        bytes += Array("\"}}]}\n\ndata: \(Self.openAIEnd)\n\ndata: [DONE]\n\n".utf8)
        expectSameBothWays(.openAIChat, bytes, "invalid UTF-8")
        #expect(Assembled(decodeOutcome(Provider.openAIChat.decoder(direct: true), chunks: [bytes]).events).text == "a\u{FFFD}(")
    }

    static let anthropicHead = [
        #"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":3,"output_tokens":1}}}"#,
        #"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    ]
    static let anthropicTail = [
        #"{"type":"content_block_stop","index":0}"#,
        #"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}"#,
        #"{"type":"message_stop"}"#,
    ]

    static let anthropicVariants: [(chunk: String, direct: Bool)] = [
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#, true),
        (#"{"delta":{"text":"hi","type":"text_delta"},"index":0,"type":"content_block_delta"}"#, true),
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#, true),
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}"#, true),
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":null}}"#, true),
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}}"#, true),
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\ud83d"}}"#, true),
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","citations":[{"x":1}]},"extra":{}}"#, true),
        // The index names no started block: the full parse reports it.
        (#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}"#, true),
        (#"{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"hi"}}"#, true),
        (#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"hi"}}"#, false),
        (#"{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"hi"}}"#, false),
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s"}}"#, false),
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#, false),
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":7}}"#, false),
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}"#, false),
        (#"{"type":"content_block_delta","type":"ping","index":0,"delta":{"type":"text_delta","text":"a"}}"#, false),
        (#"{"index":0,"delta":{"type":"text_delta","text":"hi"}}"#, false),
        (#"{"type":"ping"}"#, false),
        (#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded sk-secret-1234567890"}}"#, false),
        (#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}"#, false),
        // The type compared as bytes when plain, as a string when escaped: equal exactly when the full parse says so.
        (#"{"type":"content_block\u005fdelta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#, true),
        (#"{"type":"content_block_deltä","index":0,"delta":{"type":"text_delta","text":"hi"}}"#, false),
        (#"{"type":"content_block_delt","index":0,"delta":{"type":"text_delta","text":"hi"}}"#, false),
        (#"{"type":null,"index":0,"delta":{"type":"text_delta","text":"hi"}}"#, false),
        (#"{"type":"content_block_delta","type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#, false),
        // The index as an integer read from its bytes, or as the full parse reads any other number.
        (#"{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":"hi"}}"#, true),
        (#"{"type":"content_block_delta","index":1.0,"delta":{"type":"text_delta","text":"hi"}}"#, true),
        (#"{"type":"content_block_delta","index":0E0,"delta":{"type":"text_delta","text":"hi"}}"#, true),
        (#"{"type":"content_block_delta","index":0.25,"delta":{"type":"text_delta","text":"hi"}}"#, false),
        (#"{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"hi"}}"#, false),
        (#"{"type":"content_block_delta","index":123456789,"delta":{"type":"text_delta","text":"hi"}}"#, true),
        (#"{"type":"content_block_delta","index":1234567890,"delta":{"type":"text_delta","text":"hi"}}"#, true),
        (#"{"type":"content_block_delta","index":99999999999999999999,"delta":{"type":"text_delta","text":"hi"}}"#, false),
        (#"{"type":"content_block_delta","index":null,"delta":{"type":"text_delta","text":"hi"}}"#, false),
        (#"{"type":"content_block_delta","index":0,"index":0,"delta":{"type":"text_delta","text":"hi"}}"#, false),
    ]

    @Test(arguments: anthropicVariants.indices)
    func anAnthropicEventDecodesTheSameBothWays(_ n: Int) {
        let (chunk, direct) = Self.anthropicVariants[n]
        #expect(Provider.anthropic.recognises(chunk) == direct, "\(chunk)")
        let stream = (Self.anthropicHead + [chunk] + Self.anthropicTail).map { "data: \($0)\n\n" }.joined()
        expectSameBothWays(.anthropic, Array(stream.utf8), chunk)
        // With the `event:` field too (the decoder falls back on it for a missing type).
        let named = (Self.anthropicHead + [chunk] + Self.anthropicTail).map { "event: content_block_delta\ndata: \($0)\n\n" }.joined()
        expectSameBothWays(.anthropic, Array(named.utf8), "named \(chunk)")
    }

    static let responsesHead = [
        #"{"type":"response.created","response":{"id":"r","status":"in_progress","output":[]}}"#,
        #"{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}"#,
    ]
    static let responsesTail = [
        #"{"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi"}]}}"#,
        #"{"type":"response.completed","response":{"id":"r","status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":2}}}"#,
    ]

    static let responsesVariants: [(chunk: String, direct: Bool)] = [
        (#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"hi","logprobs":[]}"#, true),
        (#"{"type":"response.output_text.delta","item_id":"msg_2","delta":"hi"}"#, true),
        (#"{"type":"response.output_text.delta","delta":"hi"}"#, true),
        (#"{"type":"response.output_text.delta","item_id":null,"delta":"hi"}"#, true),
        (#"{"type":"response.output_text.delta","item_id":"msg_1","delta":""}"#, true),
        (#"{"type":"response.output_text.delta","item_id":"msg_1"}"#, true),
        (#"{"type":"response.output_text.delta","item_id":"msg_1","delta":"\ud83d"}"#, true),
        (#"{"type":"response.output_text.delta","item_id":"msg_1","delta":3}"#, false),
        (#"{"type":"response.output_text.delta","item_id":7,"delta":"hi"}"#, false),
        (#"{"type":"response.output_text.delta","item_id":"msg_1","delta":"a","delta":"b"}"#, false),
        (#"{"type":"response.refusal.delta","item_id":"msg_1","delta":"no"}"#, false),
        (#"{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","summary_index":0,"delta":"t"}"#, false),
        (#"{"item_id":"msg_1","delta":"hi"}"#, false),
        (#"{"type":"error","code":"server_error","message":"boom sk-secret-1234567890"}"#, false),
        (#"{"type":"response.output_text.delta","item_id":"msg_1","delta":"hi"}}"#, false),
        (#"{"type":"response.output_text\u002edelta","item_id":"msg_1","delta":"hi"}"#, true),
        (#"{"type":"response.output_text.deltas","item_id":"msg_1","delta":"hi"}"#, false),
        (#"{"type":7,"item_id":"msg_1","delta":"hi"}"#, false),
        (#"{"type":"response.output_text.delta","sequence_number":12,"item_id":"msg_0123456789abcdef0123456789abcdef","output_index":0,"content_index":0,"delta":" t3","logprobs":[]}"#, true),
        (#"{"type":"response.output_text.delta","item_id":"msg_0123456789abcdefé","delta":"hi"}"#, true),
    ]

    @Test(arguments: responsesVariants.indices)
    func aResponsesEventDecodesTheSameBothWays(_ n: Int) {
        let (chunk, direct) = Self.responsesVariants[n]
        #expect(Provider.responses.recognises(chunk) == direct, "\(chunk)")
        let stream = (Self.responsesHead + [chunk] + Self.responsesTail).map { "data: \($0)\n\n" }.joined()
        expectSameBothWays(.responses, Array(stream.utf8), chunk)
        let named = (Self.responsesHead + [chunk] + Self.responsesTail).map { "event: response.output_text.delta\ndata: \($0)\n\n" }.joined()
        expectSameBothWays(.responses, Array(named.utf8), "named \(chunk)")
    }
}
