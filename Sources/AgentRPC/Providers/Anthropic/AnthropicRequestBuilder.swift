import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Builds Anthropic Messages request bodies.
///
/// Prompt caching: `cache_control: {type: ephemeral}` goes on the last system
/// block and the last tool, the stable prefix of every round trip of a session.
///
/// Thinking: `reasoningLevel` `low`/`medium`/`high` (or a number of tokens) turns on
/// extended thinking with a 1024/4096/16384-token budget; `off`/`none` leaves it
/// off. The API needs `max_tokens` above the budget, so `max_tokens` is raised to
/// budget + 1024 when it is not, and `temperature` is left out (thinking accepts
/// only the default).
enum AnthropicRequestBuilder {
    /// The JSON body for `POST {baseURL}/messages`.
    static func build(_ request: ModelRequest, configuration: HTTPProviderConfiguration) -> BuiltRequestBody {
        var built = buildAllButMessages(request, configuration: configuration)
        built.body[messagesKey] = .array(messages(request.messages, images: configuration.capabilities.supportsImages))
        return BuiltRequestBody(body: .object(built.body), warnings: built.warnings)
    }

    /// The member that holds the conversation.
    static let messagesKey = "messages"

    /// The body's bytes as `build(…).body.serialized()` gives them, with the
    /// messages that `cache` holds from the previous request reused. The last
    /// message is kept open, since the next one may add its blocks to it.
    static func encode(_ request: ModelRequest, configuration: HTTPProviderConfiguration, cache: SerializedMessageCache) -> [UInt8] {
        let members = buildAllButMessages(request, configuration: configuration).body
        let images = configuration.capabilities.supportsImages
        return cache.serializeObject(members, splicing: messagesKey) { out in
            cache.withSerialized(request.messages, append: { appendMerged($0, images: images, to: &$1) }) { $0.appendArray(into: &out) }
        }
    }

    static let openingBytes = Array(#"{"content":["#.utf8)

    /// Appends a message's blocks as `messages(_:)` merges them: to the open
    /// message when it has the same role, else as a new message, left open
    /// (`{"content":[blocks…`; `],"role":…}` closes it, keys in sorted order).
    static func appendMerged(_ message: ModelMessage, images: Bool, to serialized: inout SerializedMessages) {
        let (role, blocks) = Self.blocks(message, images: images)
        guard !blocks.isEmpty else { return }
        if role == serialized.openRole {
            serialized.bytes.append(UInt8(ascii: ","))
        } else {
            if let open = serialized.openRole {
                serialized.bytes.append(contentsOf: open.closingBytes)
                serialized.bytes.append(UInt8(ascii: ","))
            }
            serialized.bytes.append(contentsOf: openingBytes)
            serialized.openRole = role
        }
        for (i, block) in blocks.enumerated() {
            if i > 0 { serialized.bytes.append(UInt8(ascii: ",")) }
            block.serialize(into: &serialized.bytes)
        }
    }

    /// Every member of the body but the messages, which the caller adds.
    static func buildAllButMessages(
        _ request: ModelRequest, configuration: HTTPProviderConfiguration
    ) -> (body: [String: JSONValue], warnings: [SchemaWarning]) {
        var warnings: [SchemaWarning] = []
        let options = configuration.generationOptions(request.options, provider: .anthropic)
        // The API requires max_tokens: a passed-through `max_tokens` counts before the default.
        var maxTokens = options.maxOutputTokens ?? configuration.modelOptions.passThrough["max_tokens"]?.intValue
            ?? configuration.defaultMaxOutputTokens
        var body: [String: JSONValue] = [
            "model": .string(request.model.isEmpty ? configuration.model : request.model),
            "stream": true,
        ]
        if !request.instructions.isEmpty {
            body["system"] = [["type": "text", "text": .string(request.instructions), "cache_control": ["type": "ephemeral"]]]
        }
        if !request.tools.isEmpty {
            let adapted = adaptToolSchemas(request.tools, strict: false)
            warnings += adapted.warnings
            var tools: [JSONValue] = adapted.tools.map { tool in
                ["name": .string(tool.name), "description": .string(tool.description), "input_schema": tool.inputSchema]
            }
            if case .object(var last)? = tools.last {
                last["cache_control"] = ["type": "ephemeral"]
                tools[tools.count - 1] = .object(last)
            }
            body["tools"] = .array(tools)
            switch request.toolChoice {
            case .auto: break  // the API's default
            case .none: body["tool_choice"] = ["type": "none"]
            case .required: body["tool_choice"] = ["type": "any"]
            case .tool(let name): body["tool_choice"] = ["type": "tool", "name": .string(name)]
            }
        }
        if let budget = thinkingBudget(options.reasoningLevel) {
            // Both are at most 2^31 − 1 (ModelOptions.maximumOutputTokens): no overflow.
            if maxTokens <= budget { maxTokens = budget + 1024 }
            body["thinking"] = ["type": "enabled", "budget_tokens": .int(budget)]
        }
        // With thinking on, `options` holds no temperature (the API takes only the default).
        if let t = options.temperature { body["temperature"] = .double(t) }
        if let p = options.topP { body["top_p"] = .double(p) }
        if let stop = options.stop {
            body["stop_sequences"] = stop.arrayValue.map(JSONValue.array) ?? .array([stop])
        }
        body["max_tokens"] = .int(maxTokens)
        mergePassThrough(configuration.modelOptions, into: &body)
        mergeExtras(request.options.extra, into: &body)
        return (body, warnings)
    }

    /// The API's smallest thinking budget.
    static let minimumThinkingBudget = 1024

    static func thinkingBudget(_ level: String?) -> Int? {
        guard let level = level?.lowercased(), !level.isEmpty else { return nil }
        switch level {
        case "off", "none", "disabled": return nil
        case "minimal", "low": return minimumThinkingBudget
        case "medium": return 4096
        case "high", "max": return 16384
        default:
            if let n = Int(level) { return (minimumThinkingBudget...ModelOptions.maximumOutputTokens).contains(n) ? n : nil }
            return 4096
        }
    }

    /// Maps messages to content blocks. Consecutive messages with the same role
    /// are merged (tool results that follow one another become one user message
    /// of `tool_result` blocks), since the API wants roles to alternate.
    /// `images`: the model takes images (`supportsImages`); without, a tool
    /// result's images are left out (its text's notes say what they were).
    static func messages(_ messages: [ModelMessage], images: Bool = true) -> [JSONValue] {
        var out: [(role: AnthropicRole, blocks: [JSONValue])] = []
        func append(_ role: AnthropicRole, _ blocks: [JSONValue]) {
            guard !blocks.isEmpty else { return }
            if let last = out.last, last.role == role {
                out[out.count - 1].blocks += blocks
            } else {
                out.append((role, blocks))
            }
        }
        for message in messages {
            let converted = blocks(message, images: images)
            append(converted.role, converted.blocks)
        }
        return out.map { ["role": .string($0.role.rawValue), "content": .array($0.blocks)] }
    }

    /// One message's role and content blocks, which depend on nothing around it.
    static func blocks(_ message: ModelMessage, images acceptsImages: Bool = true) -> (role: AnthropicRole, blocks: [JSONValue]) {
        switch message {
        case .user(let text, let images):
            var blocks: [JSONValue] = images.map(imageBlock)
            if !text.isEmpty { blocks.append(["type": "text", "text": .string(text)]) }
            return (.user, blocks)
        case .assistant(let text, let toolCalls, let reasoning, let signature):
            // Signed thinking goes back unchanged and first, as the API requires before
            // tool_use; unsigned thinking cannot be sent at all (the API rejects it), nor
            // reasoning an OpenAI Responses model sealed (after a switch of model).
            var blocks: [JSONValue] = []
            if let reasoning, let signature, !OpenAIResponsesReasoningCarrier.isCarrier(signature) {
                blocks.append(["type": "thinking", "thinking": .string(reasoning), "signature": .string(signature)])
            }
            if !text.isEmpty { blocks.append(["type": "text", "text": .string(text)]) }
            for call in toolCalls {
                blocks.append(["type": "tool_use", "id": .string(call.id), "name": .string(call.name),
                               "input": toolInput(call.argumentsJSON)])
            }
            return (.assistant, blocks)
        case .toolResult(let callId, _, let content, let isError, let images):
            guard acceptsImages, !images.isEmpty else {
                return (.user, [["type": "tool_result", "tool_use_id": .string(callId), "content": .string(content),
                                  "is_error": .bool(isError)]])
            }
            // With images, the result's content is blocks: the text, then each image.
            let blocks: [JSONValue] = [["type": "text", "text": .string(content)]] + images.map(imageBlock)
            return (.user, [["type": "tool_result", "tool_use_id": .string(callId), "content": .array(blocks), "is_error": .bool(isError)]])
        case .toolResultImages:
            // They went in their tool_result blocks.
            return (.user, [])
        }
    }

    static func imageBlock(_ image: ModelImage) -> JSONValue {
        switch image {
        case .data(let bytes, let mimeType):
            return ["type": "image", "source": ["type": "base64", "media_type": .string(mimeType), "data": .string(base64(bytes))]]
        case .url(let url):
            return ["type": "image", "source": ["type": "url", "url": .string(url)]]
        }
    }

    /// `tool_use.input` must be an object. Arguments that were not a JSON object
    /// (a model that wrote invalid JSON, answered as a failed call) are sent as `{}`.
    static func toolInput(_ argumentsJSON: String) -> JSONValue {
        if let value = try? JSONValue.parse(argumentsJSON), value.objectValue != nil { return value }
        return [:]
    }
}
