import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Builds OpenAI Chat Completions request bodies.
enum OpenAIRequestBuilder {
    /// The JSON body for `POST {baseURL}/chat/completions`.
    static func build(_ request: ModelRequest, configuration: HTTPProviderConfiguration, stream: Bool = true) -> BuiltRequestBody {
        var built = buildAllButMessages(request, configuration: configuration, stream: stream)
        built.body[messagesKey] = .array(messages(request, images: configuration.capabilities.supportsImages))
        return BuiltRequestBody(body: .object(built.body), warnings: built.warnings)
    }

    /// The member that holds the conversation.
    static let messagesKey = "messages"

    /// The body's bytes as `build(…).body.serialized()` gives them, with the
    /// messages that `cache` holds from the previous request reused.
    static func encode(_ request: ModelRequest, configuration: HTTPProviderConfiguration, stream: Bool, cache: SerializedMessageCache) -> [UInt8] {
        let members = buildAllButMessages(request, configuration: configuration, stream: stream).body
        return cache.serializeObject(members, splicing: messagesKey) { out in
            let images = configuration.capabilities.supportsImages
            cache.withSerialized(request.messages, append: { $1.append(elements: elements(of: $0, images: images)) }) {
                $0.appendArray(leading: systemMessage(request), into: &out)
            }
        }
    }

    /// Every member of the body but the messages, which the caller adds (a
    /// pass-through `messages` is replaced by them, as extras cannot set it).
    static func buildAllButMessages(
        _ request: ModelRequest, configuration: HTTPProviderConfiguration, stream: Bool
    ) -> (body: [String: JSONValue], warnings: [SchemaWarning]) {
        var warnings: [SchemaWarning] = []
        var body: [String: JSONValue] = [
            "model": .string(request.model.isEmpty ? configuration.model : request.model),
        ]
        if stream {
            body["stream"] = true
            body["stream_options"] = ["include_usage": true]
        }
        if !request.tools.isEmpty {
            let adapted = adaptToolSchemas(request.tools, strict: configuration.strictTools)
            warnings += adapted.warnings
            body["tools"] = .array(adapted.tools.map { tool in
                var function: [String: JSONValue] = [
                    "name": .string(tool.name),
                    "description": .string(tool.description),
                    "parameters": tool.inputSchema,
                ]
                if configuration.strictTools { function["strict"] = true }
                return ["type": "function", "function": .object(function)]
            })
            // `auto` is the API's default and is left out: some compatible servers
            // (llama.cpp) answer an empty message when they get it. A model configured
            // with `supportsToolChoice: false` never gets the field at all.
            if configuration.capabilities.supportsToolChoice {
                switch request.toolChoice {
                case .auto: break
                case .none: body["tool_choice"] = "none"
                case .required: body["tool_choice"] = "required"
                case .tool(let name): body["tool_choice"] = ["type": "function", "function": ["name": .string(name)]]
                }
            }
        }
        let options = configuration.generationOptions(request.options, provider: .openai)
        if let t = options.temperature { body["temperature"] = .double(t) }
        if let max = options.maxOutputTokens {
            body[configuration.useMaxCompletionTokens ? "max_completion_tokens" : "max_tokens"] = .int(max)
        }
        if let p = options.topP { body["top_p"] = .double(p) }
        if let stop = options.stop { body["stop"] = stop }
        if let seed = options.seed { body["seed"] = .int(seed) }
        if let level = options.reasoningLevel {
            body["reasoning_effort"] = .string(OpenAIResponsesRequestBuilder.effort(level))
        }
        if let schema = request.responseSchema {
            // `session/generate`'s `strict` asks the provider to enforce the schema while decoding.
            let strict = request.responseSchemaStrict
            let adapted = adaptSchema(schema, name: "response", strict: strict)
            warnings += adapted.warnings
            body["response_format"] = [
                "type": "json_schema",
                "json_schema": ["name": "response", "schema": adapted.schema, "strict": .bool(strict)],
            ]
        }
        mergePassThrough(configuration.modelOptions, into: &body)
        mergeExtras(request.options.extra, into: &body)
        return (body, warnings)
    }

    /// `images`: the model takes images (`supportsImages`); without, a tool
    /// result's images are left out (its text's notes say what they were).
    static func messages(_ request: ModelRequest, images: Bool = true) -> [JSONValue] {
        var out: [JSONValue] = []
        out.reserveCapacity(request.messages.count + 1)
        if let system = systemMessage(request) { out.append(system) }
        for m in request.messages { out += elements(of: m, images: images) }
        return out
    }

    /// The messages one message becomes: none (tool results' images the model
    /// cannot take) or one.
    static func elements(of m: ModelMessage, images: Bool) -> [JSONValue] {
        if case .toolResultImages(let list) = m {
            // A tool message takes text only: the images go in a user message
            // after the tool messages of the round trip.
            guard images else { return [] }
            var parts: [JSONValue] = [["type": "text", "text": .string(toolImagesText(count: list.count))]]
            for image in list { parts.append(["type": "image_url", "image_url": ["url": .string(image.urlString)]]) }
            return [["role": "user", "content": .array(parts)]]
        }
        return [message(m)]
    }

    /// What the user message that carries tool results' images says.
    static func toolImagesText(count: Int) -> String {
        count == 1 ? "The image the tool returned:" : "The \(count) images the tools returned, in call order:"
    }

    static func systemMessage(_ request: ModelRequest) -> JSONValue? {
        request.instructions.isEmpty ? nil : ["role": "system", "content": .string(request.instructions)]
    }

    /// One message, which depends on nothing around it.
    static func message(_ message: ModelMessage) -> JSONValue {
        switch message {
        case .user(let text, let images):
            if images.isEmpty { return ["role": "user", "content": .string(text)] }
            var parts: [JSONValue] = []
            if !text.isEmpty { parts.append(["type": "text", "text": .string(text)]) }
            for image in images {
                let url = image.urlString
                parts.append(["type": "image_url", "image_url": ["url": .string(url)]])
            }
            return ["role": "user", "content": .array(parts)]
        case .assistant(let text, let toolCalls, _, _):
            // `content` is "" rather than null: several compatible servers reject null.
            var m: [String: JSONValue] = ["role": "assistant", "content": .string(text)]
            if !toolCalls.isEmpty {
                m["tool_calls"] = .array(toolCalls.map { call in
                    ["id": .string(call.id), "type": "function",
                     "function": ["name": .string(call.name), "arguments": .string(call.argumentsJSON)]]
                })
            }
            return .object(m)
        case .toolResult(let callId, _, let content, _, _):
            // Chat Completions has no error flag; the content says what went wrong.
            return ["role": "tool", "tool_call_id": .string(callId), "content": .string(content)]
        case .toolResultImages:
            // Never reached: `elements(of:images:)` writes it.
            return ["role": "user", "content": ""]
        }
    }
}
