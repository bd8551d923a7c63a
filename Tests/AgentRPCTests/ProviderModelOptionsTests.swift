import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// A model's `options` in the request bodies of the three HTTP providers
/// (docs/protocol.md, "Model options").
@Suite struct ProviderModelOptionsTests {
    static let common: [String: JSONValue] = [
        "maxOutputTokens": 512, "temperature": 0.2, "topP": 0.9, "stop": ["END"], "seed": 7, "reasoningLevel": "low",
        "top_k": 40, "streamTools": true, "strictTools": false, "useMaxCompletionTokens": false,
    ]

    func config(_ options: [String: JSONValue], provider: ProviderKind, maxCompletion: Bool = false) throws -> HTTPProviderConfiguration {
        var c = HTTPProviderConfiguration(
            baseURL: try #require(URL(string: "http://127.0.0.1:1/v1")), apiKey: nil, model: "m", useMaxCompletionTokens: maxCompletion)
        let protected = provider == .openaiResponses ? OpenAIResponsesRequestBuilder.protectedKeys : protectedBodyKeys
        c.modelOptions = ModelOptions(options, provider: provider, protectedKeys: protected)
        return c
    }

    static let hi = ModelRequest(model: "", instructions: "", messages: [.user(text: "hi", images: [])])

    func generation(_ body: JSONValue, dropping: Set<String>) -> JSONValue {
        guard case .object(var o) = body else { return body }
        for key in dropping { o[key] = nil }
        return .object(o)
    }

    @Test func openAIChatMapsTheCommonOptionsAndPassesTheRestThrough() throws {
        let c = try config(Self.common, provider: .openai)
        let body = OpenAIRequestBuilder.build(Self.hi, configuration: c).body
        #expect(generation(body, dropping: ["model", "messages", "stream", "stream_options"]) == [
            "max_tokens": 512, "temperature": 0.2, "top_p": 0.9, "stop": ["END"], "seed": 7, "reasoning_effort": "low", "top_k": 40,
        ])
        #expect(OpenAIProvider(configuration: c).optionWarnings(for: Self.hi).isEmpty)
        let completion = try config(["maxOutputTokens": 64, "stop": "END"], provider: .openai, maxCompletion: true)
        let b2 = OpenAIRequestBuilder.build(Self.hi, configuration: completion).body
        #expect(b2["max_completion_tokens"] == 64 && b2["max_tokens"] == nil && b2["stop"] == "END")
    }

    @Test func anthropicMapsTheCommonOptions() throws {
        var options = Self.common
        options["reasoningLevel"] = nil
        let c = try config(options, provider: .anthropic)
        let body = AnthropicRequestBuilder.build(Self.hi, configuration: c).body
        #expect(generation(body, dropping: ["model", "messages", "stream"]) == [
            "max_tokens": 512, "temperature": 0.2, "top_p": 0.9, "stop_sequences": ["END"], "top_k": 40,
        ])
        // seed is OpenAI's; the settings belong to the OpenAI providers.
        #expect(AnthropicProvider(configuration: c).optionWarnings(for: Self.hi).map(\.key) == [
            "streamTools", "strictTools", "useMaxCompletionTokens", "seed",
        ])
        // A lone stop string becomes a one-element list; a passed-through max_tokens beats the default.
        let b2 = AnthropicRequestBuilder.build(Self.hi, configuration: try config(["stop": "END", "max_tokens": 99], provider: .anthropic)).body
        #expect(b2["stop_sequences"] == ["END"] && b2["max_tokens"] == 99)
    }

    @Test func responsesMapsTheCommonOptions() throws {
        let c = try config(Self.common, provider: .openaiResponses)
        let body = OpenAIResponsesRequestBuilder.build(Self.hi, configuration: c).body
        #expect(generation(body, dropping: ["model", "input", "stream", "store", "include"]) == [
            "max_output_tokens": 512, "temperature": 0.2, "top_p": 0.9, "reasoning": ["effort": "low", "summary": "auto"], "top_k": 40,
        ])
        #expect(OpenAIResponsesProvider(configuration: c).optionWarnings(for: Self.hi).map(\.key) == [
            "streamTools", "useMaxCompletionTokens", "stop", "seed",
        ])
        var noReasoning = c
        noReasoning.capabilities.supportsReasoning = false
        #expect(OpenAIResponsesRequestBuilder.build(Self.hi, configuration: noReasoning).body["reasoning"] == nil)
        #expect(noReasoning.optionWarnings(Self.hi.options, provider: .openaiResponses).contains { $0.key == "reasoningLevel" })
    }

    @Test func theRequestsOptionsOverrideTheModels() throws {
        var request = Self.hi
        request.options = GenerationOptions(temperature: 0.7, maxOutputTokens: 100, reasoningLevel: "high")
        let chat = OpenAIRequestBuilder.build(request, configuration: try config(Self.common, provider: .openai)).body
        #expect(chat["temperature"] == 0.7 && chat["max_tokens"] == 100 && chat["reasoning_effort"] == "high" && chat["top_p"] == 0.9)
        let responses = OpenAIResponsesRequestBuilder.build(request, configuration: try config(Self.common, provider: .openaiResponses)).body
        #expect(responses["max_output_tokens"] == 100 && responses["reasoning"]?["effort"] == "high")
        // A mapped option wins over the same key passed through in the provider's spelling.
        let both = OpenAIRequestBuilder.build(request, configuration: try config(["max_tokens": 5, "top_p": 0.5], provider: .openai)).body
        #expect(both["max_tokens"] == 100 && both["top_p"] == 0.5)
    }

    @Test func protectedKeysAndSettingsAreNeverSent() throws {
        let options: [String: JSONValue] = [
            "model": "other", "messages": [], "stream": false, "stream_options": [:], "tools": [], "system": "x",
            "streamTools": false, "strictTools": true, "useMaxCompletionTokens": true,
        ]
        let c = try config(options, provider: .openai)
        let body = OpenAIRequestBuilder.build(Self.hi, configuration: c).body
        #expect(body["model"] == "m" && body["stream"] == true && body["system"] == nil && body["tools"] == nil)
        #expect(body["streamTools"] == nil && body["strictTools"] == nil && body["useMaxCompletionTokens"] == nil)
        #expect(c.modelOptions.warnings.map(\.key) == ["messages", "model", "stream", "stream_options", "system", "tools"])
        let r = try config(["input": [], "include": [], "instructions": "x", "store": true, "reasoningSummary": "off"], provider: .openaiResponses)
        let rb = OpenAIResponsesRequestBuilder.build(Self.hi, configuration: r).body
        #expect(rb["input"] != [] && rb["instructions"] == nil && rb["reasoningSummary"] == nil)
        #expect(r.modelOptions.warnings.map(\.key) == ["include", "input", "instructions"])
        #expect(r.modelOptions.settings == ["store": true, "reasoningSummary": "off"])
    }

    @Test func valuesAProviderCannotTakeAreWarningsNotSent() throws {
        let bad: [String: JSONValue] = [
            "temperature": "hot", "maxOutputTokens": 1e300, "topP": 3, "stop": [1, 2], "seed": 1.5, "reasoningLevel": 4,
            "streamTools": "yes",
        ]
        for provider in [ProviderKind.openai, .anthropic, .openaiResponses] {
            let c = try config(bad, provider: provider)
            let request = Self.hi
            let body: JSONValue
            switch provider {
            case .openai: body = OpenAIRequestBuilder.build(request, configuration: c).body
            case .anthropic: body = AnthropicRequestBuilder.build(request, configuration: c).body
            default: body = OpenAIResponsesRequestBuilder.build(request, configuration: c).body
            }
            for key in ["temperature", "max_tokens", "max_output_tokens", "top_p", "stop", "stop_sequences", "seed", "reasoning_effort", "thinking"] {
                if provider == .anthropic && key == "max_tokens" { continue }
                #expect(body[key] == nil, "\(provider) sent \(key)")
            }
            if provider == .anthropic { #expect(body["max_tokens"] == 4096) }
            let keys = Set(c.optionWarnings(request.options, provider: provider).map(\.key))
            #expect(keys.isSuperset(of: ["temperature", "maxOutputTokens", "topP", "stop", "seed", "reasoningLevel"]), "\(provider): \(keys)")
        }
        // Out of range for the provider: a negative count, Anthropic's narrower temperature range, a huge thinking budget.
        var request = Self.hi
        request.options = GenerationOptions(temperature: 1.5, maxOutputTokens: -5, reasoningLevel: "99999999999")
        let c = try config([:], provider: .anthropic)
        let body = AnthropicRequestBuilder.build(request, configuration: c).body
        #expect(body["temperature"] == nil && body["max_tokens"] == 4096 && body["thinking"] == nil)
        #expect(c.optionWarnings(request.options, provider: .anthropic).map(\.key) == ["maxOutputTokens", "temperature", "reasoningLevel"])
        request.options = GenerationOptions(temperature: 1.5, maxOutputTokens: Int.max)
        let chat = try config([:], provider: .openai)
        #expect(OpenAIRequestBuilder.build(request, configuration: chat).body["temperature"] == 1.5)
        #expect(chat.optionWarnings(request.options, provider: .openai).map(\.key) == ["maxOutputTokens"])
    }

    @Test func thinkingDropsTemperatureWithAWarning() throws {
        var request = Self.hi
        request.options = GenerationOptions(reasoningLevel: String(ModelOptions.maximumOutputTokens))
        let c = try config(["temperature": 0.5, "maxOutputTokens": 100], provider: .anthropic)
        let body = AnthropicRequestBuilder.build(request, configuration: c).body
        // The largest budget there is, raised past without overflow.
        #expect(body["thinking"]?["budget_tokens"] == .int(ModelOptions.maximumOutputTokens))
        #expect(body["max_tokens"] == .int(ModelOptions.maximumOutputTokens + 1024) && body["temperature"] == nil)
        #expect(c.optionWarnings(request.options, provider: .anthropic).map(\.key) == ["temperature"])
    }
}
