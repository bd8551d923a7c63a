import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// The bytes an HTTP provider sends reuse the previous request's serialized
/// messages; they must stay exactly `requestBody(for:).body.serialized()`, the
/// body `--dump-requests` shows.
@Suite struct ProviderIncrementalBodyTests {
    /// The tests' SplitMix64 (ProviderFixtureTests), so a failure can be replayed from its seed.
    struct Random {
        var generator: SplitMix64
        init(state: UInt64) { generator = SplitMix64(state: state) }
        mutating func below(_ n: Int) -> Int { Int(generator.next() % UInt64(n)) }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
        mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }
    }

    static let texts = ["", "ok", "Paris is \"sunny\"\n\tand warm", "naïve 😀 \u{1}\u{1F}", "done", String(repeating: "x", count: 40)]
    static let arguments = [#"{"n":1}"#, #"{"city":"Rome""#, #"{"x":0.1,"y":[1e-7,true,null],"z":{"b":1,"a":"\n"}}"#, "[1]", "", #"{}"#]

    static func message(_ random: inout Random, id: inout Int) -> ModelMessage {
        switch random.below(10) {
        case 0, 1:
            var images: [ModelImage] = []
            if random.chance(30) { images.append(.data(bytes: [0x89, 0x50, UInt8(random.below(256))], mimeType: "image/png")) }
            if random.chance(20) { images.append(.url("https://example.com/\(random.below(9)).jpg")) }
            return .user(text: random.pick(texts), images: images)
        case 2, 3, 4:
            var calls: [ModelToolCall] = []
            for _ in 0..<random.pick([0, 1, 1, 2, 3]) {
                id += 1
                calls.append(ModelToolCall(id: "call_\(id)", name: random.pick(["count", "get_weather"]), argumentsJSON: random.pick(arguments)))
            }
            let carrier = OpenAIResponsesReasoningCarrier(items: [.init(id: "rs_\(id)", summary: ["thought", "more"], encryptedContent: "enc\(id)")])
            let signature: String? = random.pick([nil, "c2lnbmF0dXJl", carrier.signature])
            return .assistant(text: random.pick(texts), toolCalls: calls, reasoning: random.chance(50) ? "because" : nil, reasoningSignature: signature)
        case 5 where random.chance(30):
            return .toolResultImages([.data(bytes: [0x89, UInt8(random.below(256))], mimeType: "image/png")])
        default:
            id += 1
            let images: [ModelImage] = random.chance(20) ? [.data(bytes: [0xFF, 0xD8, UInt8(random.below(256))], mimeType: "image/jpeg")] : []
            return .toolResult(callId: "call_\(id)", name: "count", content: random.pick(texts), isError: random.chance(20), images: images)
        }
    }

    /// The next request's messages: mostly the previous ones plus a round trip's
    /// worth, sometimes rewritten (a redaction, a rewind, a mutation) or new.
    static func evolve(_ messages: [ModelMessage], _ random: inout Random, id: inout Int) -> [ModelMessage] {
        var out = messages
        switch random.below(10) {
        case 0 where !out.isEmpty:
            // Rewrite one message in place, as egress redaction does.
            let i = random.below(out.count)
            out[i] = message(&random, id: &id)
        case 1:
            out.removeLast(min(out.count, random.below(4)))
        case 2:
            out = []
        default:
            break
        }
        for _ in 0..<random.below(4) { out.append(message(&random, id: &id)) }
        return out
    }

    static func request(_ messages: [ModelMessage], _ random: inout Random) -> ModelRequest {
        let tool = ModelToolDefinition(name: "count", description: "Counts.", inputSchema: ["type": "object", "properties": ["n": ["type": "integer"]]])
        var request = ModelRequest(
            model: random.pick(["", "m2"]), instructions: random.pick(["", "Be brief.", "Say \"hi\""]), messages: messages,
            tools: random.chance(70) ? [tool] : [], toolChoice: random.pick([.auto, .required, .none, .tool("count")]),
            options: GenerationOptions(temperature: random.pick([nil, 0.2]), maxOutputTokens: random.pick([nil, 512])))
        if random.chance(30) {
            request.options.extra = ["messages": "not these", "input": "nor these", "zz_extra": ["a": 1], "aa_extra": true]
        }
        if random.chance(10) { request.responseSchema = ["type": "object"] }
        return request
    }

    /// Seed 3 runs a model without images (tool results' images left out).
    func configuration(passThrough: Bool, provider: ProviderKind, images: Bool = true) throws -> HTTPProviderConfiguration {
        var c = HTTPProviderConfiguration(
            baseURL: try #require(URL(string: "http://127.0.0.1:1/v1")), apiKey: "sk-secret-never-in-body-123", model: "m",
            capabilities: ProviderCapabilities(supportsImages: images, supportsReasoning: true))
        if passThrough {
            let protected = provider == .openaiResponses ? OpenAIResponsesRequestBuilder.protectedKeys : protectedBodyKeys
            c.modelOptions = ModelOptions(["top_k": 40, "messages": "passed through", "input": "passed through"], provider: provider, protectedKeys: protected)
        }
        return c
    }

    /// Runs `rounds` requests of randomized evolving histories through `encoded`
    /// and `whole`, which must agree byte for byte.
    func expectSameBytes(seed: UInt64, rounds: Int, _ encoded: (ModelRequest) -> [UInt8], _ whole: (ModelRequest) -> JSONValue) {
        var random = Random(state: seed)
        var id = 0
        var messages: [ModelMessage] = []
        for round in 0..<rounds {
            messages = Self.evolve(messages, &random, id: &id)
            let request = Self.request(messages, &random)
            let got = encoded(request)
            let want = whole(request).serialized()
            #expect(got == want, "seed \(seed), round \(round): got \(String(decoding: got, as: UTF8.self)), want \(String(decoding: want, as: UTF8.self))")
            if got != want { return }
        }
    }

    @Test(arguments: [1, 2, 3] as [UInt64]) func openAIChatBytesAreTheWholeBodysBytes(seed: UInt64) throws {
        let provider = OpenAIProvider(configuration: try configuration(passThrough: seed == 2, provider: .openai, images: seed != 3))
        expectSameBytes(seed: seed, rounds: 300, provider.bodyBytes(for:)) { provider.requestBody(for: $0).body }
    }

    @Test(arguments: [1, 2, 3] as [UInt64]) func anthropicBytesAreTheWholeBodysBytes(seed: UInt64) throws {
        let provider = AnthropicProvider(configuration: try configuration(passThrough: seed == 2, provider: .anthropic, images: seed != 3))
        expectSameBytes(seed: seed, rounds: 300, provider.bodyBytes(for:)) { provider.requestBody(for: $0).body }
    }

    @Test(arguments: [1, 2, 3] as [UInt64]) func responsesBytesAreTheWholeBodysBytes(seed: UInt64) throws {
        let provider = OpenAIResponsesProvider(configuration: try configuration(passThrough: seed == 2, provider: .openaiResponses, images: seed != 3))
        expectSameBytes(seed: seed, rounds: 300, provider.bodyBytes(for:)) { provider.requestBody(for: $0).body }
    }

    /// Anthropic merges consecutive same-role messages: a message appended after
    /// tool results joins the user message they made, and one that adds no block
    /// (an empty assistant message) lets its neighbours merge across it.
    @Test func anthropicMergesAcrossTheCachedPrefix() throws {
        let provider = AnthropicProvider(configuration: try configuration(passThrough: false, provider: .anthropic))
        let call = ModelToolCall(id: "c1", name: "count", argumentsJSON: #"{"n":1}"#)
        var messages: [ModelMessage] = [
            .user(text: "go", images: []),
            .assistant(text: "", toolCalls: [call], reasoning: nil),
            .toolResult(callId: "c1", name: "count", content: "one", isError: false),
        ]
        var request = ModelRequest(model: "", instructions: "", messages: messages)
        #expect(provider.bodyBytes(for: request) == provider.requestBody(for: request).body.serialized())
        messages += [.toolResult(callId: "c2", name: "count", content: "two", isError: true), .assistant(text: "", toolCalls: [], reasoning: nil), .user(text: "more", images: [])]
        request.messages = messages
        let bytes = provider.bodyBytes(for: request)
        #expect(bytes == provider.requestBody(for: request).body.serialized())
        #expect(provider.serializedMessages.lastConvertedCount == 3)
        let body = try JSONValue.parse(bytes)
        let last = try #require(body["messages"]?.arrayValue?.last)
        #expect(last["role"] == "user")
        #expect(last["content"]?.arrayValue?.count == 3)
    }

    /// A round trip converts only what is new; a rewritten message (egress
    /// redaction) and everything after it is converted again.
    @Test(arguments: [ProviderKind.openai, .anthropic, .openaiResponses])
    func onlyTheMessagesAfterTheUnchangedPrefixAreConverted(kind: ProviderKind) throws {
        let configuration = try configuration(passThrough: false, provider: kind)
        let (encode, cache, whole): ((ModelRequest) -> [UInt8], SerializedMessageCache, (ModelRequest) -> JSONValue) = switch kind {
        case .anthropic:
            { let p = AnthropicProvider(configuration: configuration); return (p.bodyBytes(for:), p.serializedMessages, { p.requestBody(for: $0).body }) }()
        case .openaiResponses:
            { let p = OpenAIResponsesProvider(configuration: configuration); return (p.bodyBytes(for:), p.serializedMessages, { p.requestBody(for: $0).body }) }()
        default:
            { let p = OpenAIProvider(configuration: configuration); return (p.bodyBytes(for:), p.serializedMessages, { p.requestBody(for: $0).body }) }()
        }
        var messages: [ModelMessage] = [.user(text: "Call the tool, then say done.", images: [])]
        for n in 1...50 {
            messages.append(.assistant(text: "", toolCalls: [ModelToolCall(id: "c\(n)", name: "count", argumentsJSON: #"{"n":\#(n)}"#)], reasoning: nil))
            messages.append(.toolResult(callId: "c\(n)", name: "count", content: "secret-\(n)", isError: false))
        }
        func converted(_ messages: [ModelMessage]) -> Int {
            let request = ModelRequest(model: "", instructions: "You count.", messages: messages)
            #expect(encode(request) == whole(request).serialized())
            return cache.lastConvertedCount
        }
        #expect(converted(messages) == 101)
        messages.append(.assistant(text: "", toolCalls: [ModelToolCall(id: "c51", name: "count", argumentsJSON: #"{"n":51}"#)], reasoning: nil))
        messages.append(.toolResult(callId: "c51", name: "count", content: "secret-51", isError: false))
        #expect(converted(messages) == 2)
        #expect(converted(messages) == 0)
        messages[10] = .toolResult(callId: "c5", name: "count", content: "[REDACTED]", isError: false)
        #expect(converted(messages) == 93)
        #expect(converted(Array(messages.prefix(20))) == 0)
    }

    /// What goes over the wire is these bytes.
    @Test func theHTTPRequestCarriesTheEncodedBody() throws {
        let provider = AnthropicProvider(configuration: try configuration(passThrough: false, provider: .anthropic))
        let request = ModelRequest(model: "", instructions: "Hi.", messages: [.user(text: "hello", images: [])])
        #expect(provider.httpRequest(for: request).body == Data(provider.requestBody(for: request).body.serialized()))
        let openAI = OpenAIProvider(configuration: try configuration(passThrough: false, provider: .openai))
        #expect(openAI.httpRequest(for: request).body == Data(openAI.requestBody(for: request).body.serialized()))
        let responses = OpenAIResponsesProvider(configuration: try configuration(passThrough: false, provider: .openaiResponses))
        #expect(responses.httpRequest(for: request).body == Data(responses.requestBody(for: request).body.serialized()))
    }
}
