import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

@Suite struct ProviderResponsesRequestTests {
    static let carrier = OpenAIResponsesReasoningCarrier(items: [
        .init(id: "rs_1", summary: ["Look it up."], encryptedContent: "gAAAenc1"),
    ])

    static let conversation: [ModelMessage] = [
        .user(text: "What is this?", images: [.data(bytes: [0x89, 0x50, 0x4E, 0x47], mimeType: "image/png"), .url("https://example.com/a.jpg")]),
        .assistant(text: "Let me check.", toolCalls: [
            ModelToolCall(id: "call_1", name: "get_weather", argumentsJSON: #"{"city":"Paris"}"#),
            ModelToolCall(id: "call_2", name: "get_weather", argumentsJSON: #"{"city":"Rome""#),
        ], reasoning: "Look it up.", reasoningSignature: carrier.signature),
        .toolResult(callId: "call_1", name: "get_weather", content: "sunny", isError: false),
        .toolResult(callId: "call_2", name: "get_weather", content: "invalid arguments", isError: true),
        // Anthropic-signed thinking (a session that switched model) and unsigned reasoning are not sent.
        .assistant(text: "Paris is sunny.", toolCalls: [], reasoning: "thought", reasoningSignature: "EqQBCkYIBx=="),
        .user(text: "Thanks", images: []),
    ]

    func config(strict: Bool = false, capabilities: ProviderCapabilities = ProviderCapabilities()) throws -> HTTPProviderConfiguration {
        HTTPProviderConfiguration(
            baseURL: try #require(URL(string: "http://127.0.0.1:1/v1")), apiKey: "sk-secret-never-in-body-123", model: "default-model",
            strictTools: strict, capabilities: capabilities)
    }

    func expectJSON(_ value: JSONValue, _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(value == (try JSONValue.parse(expected)), "got \(value.serializedString())", sourceLocation: sourceLocation)
    }

    @Test func goldenBody() throws {
        let request = ModelRequest(
            model: "gpt-5-mini", instructions: "Be brief.", messages: Self.conversation, tools: [ProviderRequestBuilderTests.weatherTool],
            toolChoice: .tool("get_weather"), options: GenerationOptions(temperature: 0.5, maxOutputTokens: 100, reasoningLevel: "low"))
        let built = OpenAIResponsesRequestBuilder.build(request, configuration: try config())
        #expect(built.warnings.isEmpty)
        try expectJSON(built.body, #"""
        {"model":"gpt-5-mini","stream":true,"store":false,"instructions":"Be brief.","temperature":0.5,"max_output_tokens":100,
         "reasoning":{"effort":"low","summary":"auto"},"include":["reasoning.encrypted_content"],
         "input":[
          {"role":"user","content":[{"type":"input_text","text":"What is this?"},
            {"type":"input_image","image_url":"data:image/png;base64,iVBORw==","detail":"auto"},
            {"type":"input_image","image_url":"https://example.com/a.jpg","detail":"auto"}]},
          {"type":"reasoning","summary":[{"type":"summary_text","text":"Look it up."}],"encrypted_content":"gAAAenc1"},
          {"role":"assistant","content":"Let me check."},
          {"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
          {"type":"function_call","call_id":"call_2","name":"get_weather","arguments":"{\"city\":\"Rome\""},
          {"type":"function_call_output","call_id":"call_1","output":"sunny"},
          {"type":"function_call_output","call_id":"call_2","output":"invalid arguments"},
          {"role":"assistant","content":"Paris is sunny."},
          {"role":"user","content":"Thanks"}],
         "tools":[{"type":"function","name":"get_weather","description":"Weather for a city","strict":false,
           "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
         "tool_choice":{"type":"function","name":"get_weather"}}
        """#)
    }

    @Test func toolChoiceOnlyWhenNotDefaultAndSupported() throws {
        let tools = [ProviderRequestBuilderTests.weatherTool]
        let messages: [ModelMessage] = [.user(text: "hi", images: [])]
        let auto = OpenAIResponsesRequestBuilder.build(ModelRequest(model: "m", instructions: "", messages: messages, tools: tools), configuration: try config())
        #expect(auto.body["tool_choice"] == nil)
        #expect(auto.body["instructions"] == nil)
        #expect(auto.body["parallel_tool_calls"] == nil)
        let required = ModelRequest(model: "m", instructions: "", messages: messages, tools: tools, toolChoice: .required)
        #expect(OpenAIResponsesRequestBuilder.build(required, configuration: try config()).body["tool_choice"] == "required")
        var limited = ProviderCapabilities()
        limited.supportsToolChoice = false
        limited.supportsParallelToolCalls = false
        let body = OpenAIResponsesRequestBuilder.build(required, configuration: try config(capabilities: limited)).body
        #expect(body["tool_choice"] == nil)
        #expect(body["parallel_tool_calls"] == false)
    }

    @Test func modelsThatDoNotReasonGetNoReasoningParameters() throws {
        var caps = ProviderCapabilities()
        caps.supportsReasoning = false
        let request = ModelRequest(model: "gpt-4.1", instructions: "", messages: [.user(text: "hi", images: [])],
                                   options: GenerationOptions(reasoningLevel: "high"))
        let body = OpenAIResponsesRequestBuilder.build(request, configuration: try config(capabilities: caps)).body
        #expect(body["reasoning"] == nil && body["include"] == nil)
        // Settings: store kept, summary off; `off` is effort `none`.
        let off = ModelRequest(model: "m", instructions: "", messages: [], options: GenerationOptions(reasoningLevel: "off"))
        let settings = OpenAIResponsesSettings(options: ["store": true, "reasoningSummary": "off"])
        let built = OpenAIResponsesRequestBuilder.build(off, configuration: try config(), settings: settings).body
        #expect(built["store"] == true)
        #expect(built["reasoning"] == ["effort": "none"])
        #expect(built["include"] == ["reasoning.encrypted_content"])
    }

    @Test func structuredOutputIsTextFormat() throws {
        let schema: JSONValue = ["type": "object", "properties": ["city": ["type": "string"]], "required": ["city"]]
        var request = ModelRequest(model: "m", instructions: "", messages: [.user(text: "hi", images: [])], responseSchema: schema)
        request.responseSchemaStrict = true
        let body = OpenAIResponsesRequestBuilder.build(request, configuration: try config()).body
        #expect(body["text"]?["format"]?["type"] == "json_schema")
        #expect(body["text"]?["format"]?["name"] == "response")
        #expect(body["text"]?["format"]?["strict"] == true)
        // Strict mode wants every property required and no additional ones.
        #expect(body["text"]?["format"]?["schema"]?["additionalProperties"] == false)
    }

    @Test func extrasCannotReplaceTheConversation() throws {
        let request = ModelRequest(model: "m", instructions: "", messages: [.user(text: "hi", images: [])],
                                   options: GenerationOptions(extra: ["input": "hijack", "stream": false, "service_tier": "flex"]))
        let body = OpenAIResponsesRequestBuilder.build(request, configuration: try config()).body
        #expect(body["input"]?.arrayValue?.count == 1)
        #expect(body["stream"] == true)
        #expect(body["service_tier"] == "flex")
    }

    @Test func anthropicNeverReceivesResponsesReasoning() throws {
        let messages: [ModelMessage] = [
            .user(text: "hi", images: []),
            .assistant(text: "ok", toolCalls: [], reasoning: "Look it up.", reasoningSignature: Self.carrier.signature),
        ]
        let body = AnthropicRequestBuilder.build(ModelRequest(model: "c", instructions: "", messages: messages), configuration: try config()).body
        #expect(body["messages"]?.arrayValue?.last?["content"] == [["type": "text", "text": "ok"]])
    }

    @Test func httpRequestPostsToResponsesWithBearerKeyOutsideTheBody() throws {
        let provider = OpenAIResponsesProvider(configuration: try config())
        let r = provider.httpRequest(for: ModelRequest(model: "", instructions: "", messages: [.user(text: "hi", images: [])]))
        #expect(r.url.absoluteString == "http://127.0.0.1:1/v1/responses")
        #expect(r.header("Authorization") == "Bearer sk-secret-never-in-body-123")
        #expect(r.header("Accept") == "text/event-stream")
        let body = String(decoding: r.body, as: UTF8.self)
        #expect(!body.contains("sk-secret") && body.contains("\"default-model\""))
    }

    @Test func factoryBuildsTheProviderFromConfig() throws {
        let config = ModelConfig(provider: .openaiResponses, model: "gpt-5", baseURL: "http://127.0.0.1:9/v1",
                                 options: ["store": true], supportsReasoning: false)
        let provider = try #require(try ProviderFactory.make(config, environment: [:]) as? OpenAIResponsesProvider)
        #expect(provider.name == "openai-responses")
        #expect(provider.settings.store)
        #expect(!provider.capabilities.supportsReasoning)
        // The official endpoint needs a key.
        #expect(throws: RPCError.self) { try ProviderFactory.make(ModelConfig(provider: .openaiResponses, model: "gpt-5"), environment: [:]) }
        #expect(Engine.providerNames.contains("openai-responses"))
    }
}
