import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

@Suite struct ProviderRequestBuilderTests {
    static let weatherTool = ModelToolDefinition(
        name: "get_weather", description: "Weather for a city",
        inputSchema: ["type": "object", "properties": ["city": ["type": "string"]], "required": ["city"]])

    static let conversation: [ModelMessage] = [
        .user(text: "What is this?", images: [.data(bytes: [0x89, 0x50, 0x4E, 0x47], mimeType: "image/png"), .url("https://example.com/a.jpg")]),
        .assistant(text: "", toolCalls: [
            ModelToolCall(id: "c1", name: "get_weather", argumentsJSON: #"{"city":"Paris"}"#),
            ModelToolCall(id: "c2", name: "get_weather", argumentsJSON: #"{"city":"Rome""#),
        ], reasoning: "hidden"),
        .toolResult(callId: "c1", name: "get_weather", content: "sunny", isError: false),
        .toolResult(callId: "c2", name: "get_weather", content: "invalid arguments", isError: true),
        .assistant(text: "Paris is sunny.", toolCalls: [], reasoning: nil),
        .user(text: "Thanks", images: []),
    ]

    func config(strict: Bool = false, maxCompletion: Bool = false) throws -> HTTPProviderConfiguration {
        HTTPProviderConfiguration(
            baseURL: try #require(URL(string: "http://127.0.0.1:1/v1")), apiKey: "sk-secret-never-in-body-123", model: "default-model",
            strictTools: strict, useMaxCompletionTokens: maxCompletion)
    }

    func expectJSON(_ value: JSONValue, _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let want = try JSONValue.parse(expected)
        #expect(value == want, "got \(value.serializedString())", sourceLocation: sourceLocation)
    }

    @Test func openAIGoldenBody() throws {
        let request = ModelRequest(
            model: "gpt-4o", instructions: "Be brief.", messages: Self.conversation, tools: [Self.weatherTool],
            toolChoice: .tool("get_weather"), options: GenerationOptions(temperature: 0.5, maxOutputTokens: 100))
        let built = OpenAIRequestBuilder.build(request, configuration: try config())
        #expect(built.warnings.isEmpty)
        try expectJSON(built.body, #"""
        {"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"temperature":0.5,"max_tokens":100,
         "messages":[
          {"role":"system","content":"Be brief."},
          {"role":"user","content":[{"type":"text","text":"What is this?"},
            {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw=="}},
            {"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]},
          {"role":"assistant","content":"","tool_calls":[
            {"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
            {"id":"c2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\""}}]},
          {"role":"tool","tool_call_id":"c1","content":"sunny"},
          {"role":"tool","tool_call_id":"c2","content":"invalid arguments"},
          {"role":"assistant","content":"Paris is sunny."},
          {"role":"user","content":"Thanks"}],
         "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather for a city",
           "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
         "tool_choice":{"type":"function","function":{"name":"get_weather"}}}
        """#)
        #expect(!built.body.serializedString().contains("sk-secret"))
    }

    @Test func openAIOptions() throws {
        let schema: JSONValue = ["type": "object", "properties": ["answer": ["type": "string"]], "required": ["answer"]]
        let request = ModelRequest(
            model: "", instructions: "", messages: [.user(text: "hi", images: [])], toolChoice: .required,
            options: GenerationOptions(maxOutputTokens: 50, reasoningLevel: "low", extra: ["seed": 7, "stream": false]),
            responseSchema: schema)
        var strictRequest = request
        strictRequest.responseSchemaStrict = true
        let built = OpenAIRequestBuilder.build(strictRequest, configuration: try config(strict: true, maxCompletion: true), stream: false)
        try expectJSON(built.body, #"""
        {"model":"default-model","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":50,
         "reasoning_effort":"low","seed":7,
         "response_format":{"type":"json_schema","json_schema":{"name":"response","strict":true,
           "schema":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}}}}
        """#)
        // tool_choice is only sent with tools; extras cannot switch streaming.
        #expect(built.body["tool_choice"] == nil)
        #expect(built.body["stream"] == nil)
        // `auto` is the default and is not sent; the others are.
        for (choice, json) in [(ModelToolChoice.auto, JSONValue?.none), (.none, "none"), (.required, "required")] {
            let r = ModelRequest(model: "m", instructions: "", messages: [], tools: [Self.weatherTool], toolChoice: choice)
            #expect(OpenAIRequestBuilder.build(r, configuration: try config()).body["tool_choice"] == json)
        }
        // A model configured without tool choice support never gets the field.
        var unsupported = try config()
        unsupported.capabilities.supportsToolChoice = false
        let none = ModelRequest(model: "m", instructions: "", messages: [], tools: [Self.weatherTool], toolChoice: .none)
        #expect(OpenAIRequestBuilder.build(none, configuration: unsupported).body["tool_choice"] == nil)
    }

    @Test func anthropicGoldenBody() throws {
        let other = ModelToolDefinition(name: "now", description: "Current time", inputSchema: [:])
        let request = ModelRequest(
            model: "claude-sonnet-4-5", instructions: "Be brief.", messages: Self.conversation, tools: [Self.weatherTool, other],
            toolChoice: .required, options: GenerationOptions(temperature: 0.2))
        let built = AnthropicRequestBuilder.build(request, configuration: try config())
        #expect(built.warnings == [SchemaWarning(tool: "now", path: "/type", message: "root schema has no type; set to \"object\"")])
        try expectJSON(built.body, #"""
        {"model":"claude-sonnet-4-5","stream":true,"max_tokens":4096,"temperature":0.2,
         "system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
         "messages":[
          {"role":"user","content":[
            {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},
            {"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}},
            {"type":"text","text":"What is this?"}]},
          {"role":"assistant","content":[
            {"type":"tool_use","id":"c1","name":"get_weather","input":{"city":"Paris"}},
            {"type":"tool_use","id":"c2","name":"get_weather","input":{}}]},
          {"role":"user","content":[
            {"type":"tool_result","tool_use_id":"c1","content":"sunny","is_error":false},
            {"type":"tool_result","tool_use_id":"c2","content":"invalid arguments","is_error":true}]},
          {"role":"assistant","content":[{"type":"text","text":"Paris is sunny."}]},
          {"role":"user","content":[{"type":"text","text":"Thanks"}]}],
         "tools":[
          {"name":"get_weather","description":"Weather for a city",
           "input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
          {"name":"now","description":"Current time","input_schema":{"type":"object","properties":{}},
           "cache_control":{"type":"ephemeral"}}],
         "tool_choice":{"type":"any"}}
        """#)
    }

    @Test func anthropicSignedThinkingGoesBackBeforeToolUse() throws {
        let messages: [ModelMessage] = [
            .user(text: "Time?", images: []),
            .assistant(
                text: "Checking.", toolCalls: [ModelToolCall(id: "t1", name: "now", argumentsJSON: "{}")],
                reasoning: "Need the clock.", reasoningSignature: "EqQBsig"),
            .toolResult(callId: "t1", name: "now", content: "noon", isError: false),
            // Unsigned reasoning is never sent as a thinking block.
            .assistant(text: "It is noon.", toolCalls: [], reasoning: "unsigned", reasoningSignature: nil),
        ]
        let request = ModelRequest(model: "m", instructions: "", messages: messages, options: GenerationOptions(maxOutputTokens: 100))
        try expectJSON(AnthropicRequestBuilder.build(request, configuration: try config()).body["messages"] ?? .null, #"""
        [{"role":"user","content":[{"type":"text","text":"Time?"}]},
         {"role":"assistant","content":[
           {"type":"thinking","thinking":"Need the clock.","signature":"EqQBsig"},
           {"type":"text","text":"Checking."},
           {"type":"tool_use","id":"t1","name":"now","input":{}}]},
         {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"noon","is_error":false}]},
         {"role":"assistant","content":[{"type":"text","text":"It is noon."}]}]
        """#)
        // OpenAI has no place for it.
        let openAI = OpenAIRequestBuilder.build(request, configuration: try config()).body.serializedString()
        #expect(!openAI.contains("EqQBsig") && !openAI.contains("Need the clock."))
    }

    @Test func historyAttachesSignedReasoningToTheNextAssistantMessage() {
        let entries = [
            TranscriptEntry(id: "p", .prompt(text: "Time?", images: nil)),
            TranscriptEntry(id: "r1", .reasoning(text: "Need the clock.", profile: "a", signature: "sig1")),
            TranscriptEntry(id: "c", .toolCalls(calls: [ToolCallRecord(callId: "t1", name: "now", arguments: [:])], profile: "a", text: nil)),
            TranscriptEntry(id: "o", .toolOutput(callId: "t1", name: "now", outcome: .ok, content: "noon", profile: "a")),
            TranscriptEntry(id: "r2", .reasoning(text: "unsigned", profile: "a")),
            TranscriptEntry(id: "s", .response(text: "It is noon.", profile: "a", incomplete: false)),
        ]
        #expect(ModelHistory.messages(from: entries) == [
            .user(text: "Time?", images: []),
            .assistant(text: "", toolCalls: [ModelToolCall(id: "t1", name: "now", argumentsJSON: "{}")], reasoning: "Need the clock.", reasoningSignature: "sig1"),
            .toolResult(callId: "t1", name: "now", content: "noon", isError: false),
            .assistant(text: "It is noon.", toolCalls: [], reasoning: nil, reasoningSignature: nil),
        ])
    }

    @Test func anthropicThinkingAndToolChoice() throws {
        let request = ModelRequest(
            model: "m", instructions: "", messages: [.user(text: "hi", images: [])], tools: [Self.weatherTool],
            toolChoice: .tool("get_weather"), options: GenerationOptions(temperature: 0.7, maxOutputTokens: 2000, reasoningLevel: "medium"))
        let body = AnthropicRequestBuilder.build(request, configuration: try config()).body
        #expect(body["thinking"] == ["type": "enabled", "budget_tokens": 4096])
        #expect(body["max_tokens"] == 5120)  // raised above the budget
        #expect(body["temperature"] == nil)
        #expect(body["system"] == nil)
        #expect(body["tool_choice"] == ["type": "tool", "name": "get_weather"])
        let off = ModelRequest(model: "m", instructions: "", messages: [], options: GenerationOptions(reasoningLevel: "off"))
        #expect(AnthropicRequestBuilder.build(off, configuration: try config()).body["thinking"] == nil)
    }

    @Test func providersExposeDumpableBodiesAndEndpoints() throws {
        let request = ModelRequest(model: "m", instructions: "x", messages: [.user(text: "hi", images: [])])
        let openAI = OpenAIProvider(configuration: try config())
        let anthropic = AnthropicProvider(configuration: try config())
        #expect(openAI.httpRequest(for: request).url.absoluteString == "http://127.0.0.1:1/v1/chat/completions")
        #expect(anthropic.httpRequest(for: request).url.absoluteString == "http://127.0.0.1:1/v1/messages")
        #expect(openAI.httpRequest(for: request).header("authorization") == "Bearer sk-secret-never-in-body-123")
        #expect(anthropic.httpRequest(for: request).header("X-Api-Key") == "sk-secret-never-in-body-123")
        #expect(!openAI.requestBody(for: request).body.serializedString().contains("sk-secret"))
        #expect(!anthropic.requestBody(for: request).body.serializedString().contains("sk-secret"))
        // streamTools: false sends tool requests without streaming.
        var c = try config()
        c.streamTools = false
        let withTools = ModelRequest(model: "m", instructions: "", messages: [], tools: [Self.weatherTool])
        #expect(OpenAIProvider(configuration: c).requestBody(for: withTools).body["stream"] == nil)
        #expect(OpenAIProvider(configuration: c).requestBody(for: request).body["stream"] == true)
    }

    /// Header names are case-insensitive: a configured header replaces the
    /// provider's own of the same name in another case instead of going out
    /// beside it; the request carries the configuration's two timeouts.
    @Test func configuredHeadersReplaceTheProvidersOwnInAnyCaseAndTimeoutsGoAlong() throws {
        var c = try config()
        c.headers = ["accept": "application/x-ndjson", "X-Extra": "1"]
        c.timeoutSeconds = 42
        c.connectTimeoutSeconds = 3
        let request = ModelRequest(model: "m", instructions: "", messages: [])
        let built = OpenAIProvider(configuration: c).httpRequest(for: request)
        #expect(built.headers.keys.filter { $0.lowercased() == "accept" } == ["accept"])
        #expect(built.header("Accept") == "application/x-ndjson")
        #expect(built.header("content-type") == "application/json")
        #expect(built.header("x-extra") == "1")
        #expect(built.method == "POST")
        #expect(built.idleTimeoutSeconds == 42 && built.connectTimeoutSeconds == 3)
    }
}

@Suite struct ProviderSchemaAdaptationTests {
    static let schema: JSONValue = [
        "type": "object",
        "properties": [
            "city": ["type": "string", "format": "hostname", "minLength": 1],
            "units": ["type": "string", "enum": ["c", "f"]],
            "when": ["$ref": "#/$defs/time"],
            "tags": ["type": "array", "items": ["type": "object", "properties": ["k": ["type": "string"]]], "maxItems": 3],
        ],
        "required": ["city"],
        "$defs": ["time": ["type": "string", "pattern": "^[0-9]+$"]],
    ]

    @Test func strictConversion() throws {
        let (tools, warnings) = adaptToolSchemas([ModelToolDefinition(name: "t", description: "", inputSchema: Self.schema)], strict: true)
        let want = try JSONValue.parse(#"""
        {"type":"object","additionalProperties":false,"required":["city","tags","units","when"],
         "properties":{
          "city":{"type":"string"},
          "units":{"type":["string","null"],"enum":["c","f",null]},
          "when":{"anyOf":[{"$ref":"#/$defs/time"},{"type":"null"}]},
          "tags":{"type":["array","null"],"items":{"type":"object","properties":{"k":{"type":["string","null"]}},
                  "required":["k"],"additionalProperties":false}}},
         "$defs":{"time":{"type":"string"}}}
        """#)
        #expect(tools.first?.inputSchema == want, "\(tools.first?.inputSchema.serializedString() ?? "")")
        let paths = warnings.map(\.path)
        #expect(paths.contains("/properties/city/format"))
        #expect(paths.contains("/properties/city/minLength"))
        #expect(paths.contains("/properties/units"))
        #expect(paths.contains("/properties/when"))
        #expect(paths.contains("/properties/tags/maxItems"))
        #expect(paths.contains("/properties/tags/items/additionalProperties"))
        #expect(paths.contains("/properties/tags/items/properties/k"))
        #expect(paths.contains("/$defs/time/pattern"))
        #expect(paths.contains("/additionalProperties"))
        #expect(warnings.allSatisfy { $0.tool == "t" })
    }

    @Test func nonStrictChangesNothingButTheRoot() {
        let (tools, warnings) = adaptToolSchemas([ModelToolDefinition(name: "t", description: "", inputSchema: Self.schema)], strict: false)
        #expect(tools.first?.inputSchema == Self.schema)
        #expect(warnings.isEmpty)
        let (fixed, w2) = adaptToolSchemas([ModelToolDefinition(name: "s", description: "", inputSchema: ["type": "string"])], strict: false)
        #expect(fixed.first?.inputSchema == ["type": "object", "properties": [:]])
        #expect(w2.count == 1)
    }

    @Test func oneOfBecomesAnyOf() {
        let schema: JSONValue = ["type": "object", "properties": ["v": ["oneOf": [["type": "string"], ["type": "integer"]]]], "required": ["v"]]
        let (tools, warnings) = adaptToolSchemas([ModelToolDefinition(name: "t", description: "", inputSchema: schema)], strict: true)
        #expect(tools.first?.inputSchema["properties"]?["v"] == ["anyOf": [["type": "string"], ["type": "integer"]]])
        #expect(warnings.contains(SchemaWarning(tool: "t", path: "/properties/v/oneOf",
                                                          message: "\"oneOf\" is not supported in strict mode; changed to \"anyOf\"")))
    }
}
