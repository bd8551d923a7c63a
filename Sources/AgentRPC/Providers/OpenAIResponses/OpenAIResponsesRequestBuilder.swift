import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the Responses provider reads from a model's `options` besides what
/// every HTTP provider reads (docs/protocol.md, "The OpenAI Responses API").
package struct OpenAIResponsesSettings: Sendable, Hashable {
    /// `store`: whether OpenAI keeps the response. Off by default: agentrpc keeps
    /// the conversation itself and sends it whole, reasoning included.
    var store: Bool
    /// `reasoning.summary` (`auto`, `concise`, `detailed`); nil sends none.
    var reasoningSummary: String?

    init(store: Bool = false, reasoningSummary: String? = "auto") {
        self.store = store
        self.reasoningSummary = reasoningSummary
    }

    /// From a model's `options`: `store` (bool) and `reasoningSummary` (`off`/`none` for none).
    init(options: [String: JSONValue]) {
        store = options["store"]?.boolValue ?? false
        switch options["reasoningSummary"] {
        case .string(let s)? where ["off", "none", ""].contains(s.lowercased()): reasoningSummary = nil
        case .string(let s)?: reasoningSummary = s
        case .bool(false)?, .null?: reasoningSummary = nil
        default: reasoningSummary = "auto"
        }
    }
}

/// Builds OpenAI Responses request bodies (`POST {baseURL}/responses`).
///
/// The whole conversation is sent every time (`store: false` by default; no
/// `previous_response_id`). Messages become input items:
/// * user text → `{role: user, content: "…"}`; with images, `input_text` and
///   `input_image` parts (`data:` URLs for bytes);
/// * an assistant message → its reasoning items (when it carries an
///   `OpenAIResponsesReasoningCarrier`), `{role: assistant, content: "…"}`, then one
///   `function_call` item per call (`call_id`, `name`, `arguments`);
/// * a tool result → `{type: function_call_output, call_id, output}`; with
///   images (a model that takes them), `output` is `[input_text, input_image…]`.
/// Item ids are never sent: with `store: false` they name nothing on the server.
///
/// Tools are `{type: function, name, description, parameters, strict}`; `strict`
/// is always written because the Responses API defaults it to true.
/// `tool_choice` is sent only when it is not `auto` and the model supports it.
/// A response schema becomes `text.format` (`json_schema`). When the model
/// reasons (`supportsReasoning`), `reasoning` carries the effort and the summary
/// setting, and `include: ["reasoning.encrypted_content"]` asks for the items
/// that are sent back.
enum OpenAIResponsesRequestBuilder {
    /// Keys that request extras may not replace: the conversation and the streaming contract.
    static let protectedKeys: Set<String> = ["model", "input", "stream", "instructions", "tools", "include"]
    static let encryptedReasoning = "reasoning.encrypted_content"

    /// The JSON body for `POST {baseURL}/responses`.
    static func build(
        _ request: ModelRequest, configuration: HTTPProviderConfiguration, settings: OpenAIResponsesSettings = OpenAIResponsesSettings()
    ) -> BuiltRequestBody {
        var built = buildAllButInput(request, configuration: configuration, settings: settings)
        built.body[inputKey] = .array(input(request.messages, images: configuration.capabilities.supportsImages))
        return BuiltRequestBody(body: .object(built.body), warnings: built.warnings)
    }

    /// The member that holds the conversation.
    static let inputKey = "input"

    /// The body's bytes as `build(…).body.serialized()` gives them, with the
    /// items that `cache` holds from the previous request reused.
    static func encode(
        _ request: ModelRequest, configuration: HTTPProviderConfiguration, settings: OpenAIResponsesSettings, cache: SerializedMessageCache
    ) -> [UInt8] {
        let members = buildAllButInput(request, configuration: configuration, settings: settings).body
        let images = configuration.capabilities.supportsImages
        return cache.serializeObject(members, splicing: inputKey) { out in
            cache.withSerialized(request.messages, append: { message, serialized in
                var items: [JSONValue] = []
                appendItems(of: message, images: images, to: &items)
                serialized.append(elements: items)
            }) { $0.appendArray(into: &out) }
        }
    }

    /// Every member of the body but the input items, which the caller adds.
    static func buildAllButInput(
        _ request: ModelRequest, configuration: HTTPProviderConfiguration, settings: OpenAIResponsesSettings
    ) -> (body: [String: JSONValue], warnings: [SchemaWarning]) {
        var warnings: [SchemaWarning] = []
        let capabilities = configuration.capabilities
        var body: [String: JSONValue] = [
            "model": .string(request.model.isEmpty ? configuration.model : request.model),
            "stream": true,
            "store": .bool(settings.store),
        ]
        if !request.instructions.isEmpty { body["instructions"] = .string(request.instructions) }
        if !request.tools.isEmpty {
            let adapted = adaptToolSchemas(request.tools, strict: configuration.strictTools)
            warnings += adapted.warnings
            body["tools"] = .array(adapted.tools.map { tool in
                ["type": "function", "name": .string(tool.name), "description": .string(tool.description),
                 "parameters": tool.inputSchema, "strict": .bool(configuration.strictTools)]
            })
            if capabilities.supportsToolChoice {
                switch request.toolChoice {
                case .auto: break
                case .none: body["tool_choice"] = "none"
                case .required: body["tool_choice"] = "required"
                case .tool(let name): body["tool_choice"] = ["type": "function", "name": .string(name)]
                }
            }
            if !capabilities.supportsParallelToolCalls { body["parallel_tool_calls"] = false }
        }
        let options = configuration.generationOptions(request.options, provider: .openaiResponses)
        if let t = options.temperature { body["temperature"] = .double(t) }
        if let max = options.maxOutputTokens { body["max_output_tokens"] = .int(max) }
        if let p = options.topP { body["top_p"] = .double(p) }
        if capabilities.supportsReasoning {
            var reasoning: [String: JSONValue] = [:]
            if let level = options.reasoningLevel { reasoning["effort"] = .string(effort(level)) }
            if let summary = settings.reasoningSummary { reasoning["summary"] = .string(summary) }
            if !reasoning.isEmpty { body["reasoning"] = .object(reasoning) }
            body["include"] = [.string(encryptedReasoning)]
        }
        if let schema = request.responseSchema {
            let strict = request.responseSchemaStrict
            let adapted = adaptSchema(schema, name: "response", strict: strict)
            warnings += adapted.warnings
            body["text"] = ["format": ["type": "json_schema", "name": "response", "schema": adapted.schema, "strict": .bool(strict)]]
        }
        mergePassThrough(configuration.modelOptions, into: &body)
        for (key, value) in request.options.extra where !protectedKeys.contains(key) {
            body[key] = value
        }
        return (body, warnings)
    }

    /// `reasoningLevel` as an OpenAI effort (`reasoning.effort` here, `reasoning_effort`
    /// in Chat Completions); `off` and `disabled` mean `none`.
    static func effort(_ level: String) -> String {
        switch level.lowercased() {
        case "off", "disabled": return "none"
        default: return level
        }
    }

    /// `images`: the model takes images (`supportsImages`); without, a tool
    /// result's images are left out (its text's notes say what they were).
    static func input(_ messages: [ModelMessage], images: Bool = true) -> [JSONValue] {
        var out: [JSONValue] = []
        out.reserveCapacity(messages.count)
        for message in messages { appendItems(of: message, images: images, to: &out) }
        return out
    }

    /// One message's input items (none, one or several), which depend on nothing around it.
    static func appendItems(of message: ModelMessage, images acceptsImages: Bool = true, to out: inout [JSONValue]) {
        switch message {
        case .user(let text, let images):
            if images.isEmpty {
                out.append(["role": "user", "content": .string(text)])
            } else {
                var parts: [JSONValue] = []
                if !text.isEmpty { parts.append(["type": "input_text", "text": .string(text)]) }
                for image in images {
                    let url = image.urlString
                    parts.append(["type": "input_image", "image_url": .string(url), "detail": "auto"])
                }
                out.append(["role": "user", "content": .array(parts)])
            }
        case .assistant(let text, let toolCalls, _, let signature):
            // Reasoning goes back only as the items the API gave us: summaries
            // alone, or another provider's thinking, mean nothing to it.
            if let signature, let carrier = OpenAIResponsesReasoningCarrier(signature: signature) {
                for item in carrier.items {
                    out.append([
                        "type": "reasoning",
                        "summary": .array(item.summary.map { ["type": "summary_text", "text": .string($0)] }),
                        "encrypted_content": .string(item.encryptedContent),
                    ])
                }
            }
            if !text.isEmpty { out.append(["role": "assistant", "content": .string(text)]) }
            for call in toolCalls {
                out.append(["type": "function_call", "call_id": .string(call.id), "name": .string(call.name),
                            "arguments": .string(call.argumentsJSON)])
            }
        case .toolResult(let callId, _, let content, _, let images):
            // No error flag in this API either; the content says what went wrong.
            guard acceptsImages, !images.isEmpty else {
                out.append(["type": "function_call_output", "call_id": .string(callId), "output": .string(content)])
                return
            }
            // With images, the output is a list of input parts: the text, then each image.
            var parts: [JSONValue] = [["type": "input_text", "text": .string(content)]]
            for image in images { parts.append(["type": "input_image", "image_url": .string(image.urlString), "detail": "auto"]) }
            out.append(["type": "function_call_output", "call_id": .string(callId), "output": .array(parts)])
        case .toolResultImages:
            // They went in their function_call_output items.
            return
        }
    }
}
