import AgentRPCProtocol

/// The seam between the turn loop and a model API. A provider turns one
/// `ModelRequest` into a stream of `ProviderEvent`s and knows nothing about
/// sessions, tools execution or the protocol; the loop knows nothing about HTTP.
protocol ModelProvider: Sendable {
    /// Provider name as reported in events (`"openai"`, `"anthropic"`, `"scripted"`).
    var name: String { get }
    /// What this provider/model can do; checked in pre-flight.
    var capabilities: ProviderCapabilities { get }
    /// Streams one round trip. The stream finishes after `.end`, or throws a
    /// `ProviderError` (or `ProviderContractViolation`). Cancelling the consuming
    /// task must stop the underlying work promptly.
    func stream(_ request: ModelRequest) -> ProviderEventStream
    /// Rewrites tool schemas this provider cannot take as they are, reporting
    /// each change (see the default in the extension below).
    func adaptTools(_ tools: [ModelToolDefinition]) -> (tools: [ModelToolDefinition], warnings: [SchemaWarning])
    /// The exact JSON body sent for `request`, for `--dump-requests` (default nil).
    func wireBody(for request: ModelRequest) -> JSONValue?
    /// The generation options `request` goes out with that were not sent as
    /// given (the model's and the request's; default none).
    func optionWarnings(for request: ModelRequest) -> [OptionWarning]
}

/// What a provider can take. Pre-flight uses this (`toolChoiceUnsupported`);
/// schema down-conversion uses `adaptToolSchemas`.
package struct ProviderCapabilities: Sendable, Hashable {
    var supportsToolChoice: Bool
    var supportsImages: Bool
    var supportsReasoning: Bool
    var supportsParallelToolCalls: Bool
    var supportsStructuredOutput: Bool
    var contextWindowTokens: Int?
    /// The API refuses tool calls and results in the history of a request that
    /// defines no tools (Anthropic): "no tools" must then be sent as the tools
    /// with tool choice `none`.
    var requiresToolsWithToolHistory: Bool = false
    /// The model configuration's prices; nil: no cost is reported.
    var pricing: Pricing?

    init(
        supportsToolChoice: Bool = true, supportsImages: Bool = true, supportsReasoning: Bool = true,
        supportsParallelToolCalls: Bool = true, supportsStructuredOutput: Bool = true, contextWindowTokens: Int? = nil
    ) {
        self.supportsToolChoice = supportsToolChoice
        self.supportsImages = supportsImages
        self.supportsReasoning = supportsReasoning
        self.supportsParallelToolCalls = supportsParallelToolCalls
        self.supportsStructuredOutput = supportsStructuredOutput
        self.contextWindowTokens = contextWindowTokens
    }
}

/// A tool as the model sees it.
package struct ModelToolDefinition: Sendable, Hashable {
    package var name: String
    package var description: String
    package var inputSchema: JSONValue
    package init(name: String, description: String, inputSchema: JSONValue) {
        self.name = name
        self.description = description
        self.inputSchema = inputSchema
    }
}

/// How the model is asked to use tools on this request.
package enum ModelToolChoice: Sendable, Hashable {
    case auto
    case none
    case required
    case tool(String)
}

/// An image attached to a user message, already read and checked at the send boundary.
package enum ModelImage: Sendable, Hashable {
    /// Raw bytes (from `path` or `data`) with their MIME type.
    case data(bytes: [UInt8], mimeType: String)
    case url(String)
}

/// One tool call as the model made it.
package struct ModelToolCall: Sendable, Hashable {
    package var id: String
    package var name: String
    /// The arguments as the model wrote them: JSON text, possibly invalid
    /// (the loop turns invalid text into a `failed` output for the model).
    package var argumentsJSON: String
    package init(id: String, name: String, argumentsJSON: String) {
        self.id = id
        self.name = name
        self.argumentsJSON = argumentsJSON
    }
}

/// One message of the conversation as a provider receives it. Providers map
/// these into their own shapes (OpenAI messages, Anthropic content blocks).
package enum ModelMessage: Sendable, Hashable {
    case user(text: String, images: [ModelImage])
    /// `reasoning` carries the model's earlier thinking, `reasoningSignature` the
    /// provider's seal on it (Anthropic), where a provider needs it back; providers
    /// that cannot take it ignore both.
    case assistant(text: String, toolCalls: [ModelToolCall], reasoning: String?, reasoningSignature: String? = nil)
    /// `images`: what the tool returned besides its text, sent where the API
    /// takes images in a tool result (Anthropic, OpenAI Responses).
    case toolResult(callId: String, name: String, content: String, isError: Bool, images: [ModelImage] = [])
    /// The images of the tool results just before it, in call order, for an API
    /// whose tool results take text only (OpenAI Chat Completions: a user message
    /// after the tool messages). The providers that take them in the tool
    /// result skip it.
    case toolResultImages([ModelImage])
}

/// Generation options after precedence is applied (call site > profile case > defaults).
package struct GenerationOptions: Sendable, Hashable {
    var temperature: Double?
    var maxOutputTokens: Int?
    var reasoningLevel: String?
    /// Provider-specific extras passed through untouched.
    var extra: [String: JSONValue]
    init(temperature: Double? = nil, maxOutputTokens: Int? = nil, reasoningLevel: String? = nil, extra: [String: JSONValue] = [:]) {
        self.temperature = temperature
        self.maxOutputTokens = maxOutputTokens
        self.reasoningLevel = reasoningLevel
        self.extra = extra
    }
}

/// Everything one provider round trip needs. No secrets: API keys live in the
/// provider instance, so a request can be dumped (`--dump-requests`) safely.
package struct ModelRequest: Sendable, Hashable {
    package var model: String
    package var instructions: String
    package var messages: [ModelMessage]
    package var tools: [ModelToolDefinition]
    var toolChoice: ModelToolChoice
    package var options: GenerationOptions
    /// For structured output (`session/generate`): the JSON Schema the answer must match.
    var responseSchema: JSONValue?
    /// Whether the provider should enforce `responseSchema` while decoding (OpenAI strict mode).
    /// The engine validates the answer against the schema either way.
    var responseSchemaStrict: Bool = false

    package init(
        model: String, instructions: String, messages: [ModelMessage], tools: [ModelToolDefinition] = [],
        toolChoice: ModelToolChoice = .auto, options: GenerationOptions = GenerationOptions(), responseSchema: JSONValue? = nil
    ) {
        self.model = model
        self.instructions = instructions
        self.messages = messages
        self.tools = tools
        self.toolChoice = toolChoice
        self.options = options
        self.responseSchema = responseSchema
    }
}

/// Token counts for one round trip, cumulative within it (a later `.usage`
/// event replaces an earlier one).
package struct ModelUsage: Sendable, Hashable {
    var inputTokens: Int
    var outputTokens: Int
    /// Input read from the provider's prompt cache.
    var cachedInputTokens: Int?
    /// Input written to the provider's prompt cache.
    var cacheCreationInputTokens: Int?
    var reasoningTokens: Int?
    /// Whether `inputTokens` leaves out the cached reads and writes (Anthropic
    /// counts them apart) instead of including them (OpenAI).
    var cacheCountedApart = false
    init(
        inputTokens: Int = 0, outputTokens: Int = 0, cachedInputTokens: Int? = nil, cacheCreationInputTokens: Int? = nil,
        reasoningTokens: Int? = nil, cacheCountedApart: Bool = false
    ) {
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
        self.cachedInputTokens = cachedInputTokens
        self.cacheCreationInputTokens = cacheCreationInputTokens
        self.reasoningTokens = reasoningTokens
        self.cacheCountedApart = cacheCountedApart
    }

    /// Every input token the model read, cached reads and writes included.
    var allInputTokens: Int {
        guard cacheCountedApart else { return inputTokens }
        return Self.saturatingSum(inputTokens, cachedInputTokens ?? 0, cacheCreationInputTokens ?? 0)
    }

    /// Input that was neither read from nor written to the cache (what the
    /// plain input price applies to).
    var uncachedInputTokens: Int {
        if cacheCountedApart { return inputTokens }
        return max(0, inputTokens - (cachedInputTokens ?? 0) - (cacheCreationInputTokens ?? 0))
    }

    /// What the model had in context at this round trip: all of its input and its output.
    var contextTokens: Int { Self.saturatingSum(allInputTokens, outputTokens) }

    /// What these tokens cost at `pricing`, in US dollars. Reasoning is part
    /// of the output as every provider reports it.
    func costUSD(_ pricing: Pricing) -> Double {
        let read = Double(cachedInputTokens ?? 0) * (pricing.cacheReadPerMTok ?? pricing.inputPerMTok)
        let write = Double(cacheCreationInputTokens ?? 0) * (pricing.cacheWritePerMTok ?? pricing.inputPerMTok)
        let plain = Double(uncachedInputTokens) * pricing.inputPerMTok + Double(outputTokens) * pricing.outputPerMTok
        return (plain + read + write) / 1_000_000
    }

    /// Counts are at most `largestBelievableTokenCount` once sanitized; this
    /// keeps a sum of any counts from trapping all the same.
    static func saturatingSum(_ values: Int...) -> Int {
        var total = 0
        for v in values {
            let (s, overflow) = total.addingReportingOverflow(v)
            total = overflow ? Int.max : s
        }
        return total
    }
}

/// Why the model stopped.
package enum ModelStopReason: Sendable, Hashable {
    case endTurn
    case toolUse
    case maxTokens
    case refusal
    case contentFilter
    case other(String)
}

/// One event of a streamed round trip.
package enum ProviderEvent: Sendable, Hashable {
    case textDelta(String)
    case reasoningDelta(String)
    /// The signature closing a thinking block (Anthropic): it seals the reasoning
    /// streamed before it, which must be sent back with it unchanged.
    case reasoningSignature(String)
    /// A refusal streamed separately from content (OpenAI `delta.refusal`).
    case refusalDelta(String)
    /// A complete tool call (fragments are assembled inside the provider).
    case toolCall(ModelToolCall)
    case usage(ModelUsage)
    /// The round trip finished normally; always the last event.
    case end(ModelStopReason)
}

/// A typed provider failure. `safeDescription` is ours and never contains
/// server prose; `unsafeMessage` is the server's text, for logs a user opts into.
struct ProviderError: Error, Sendable, Hashable {
    var code: ProviderErrorCode
    var httpStatus: Int?
    /// The provider's retry hint (Retry-After and friends), if it gave one.
    var retryAfterSeconds: Double?
    /// The provider's `x-should-retry` header, when it sent one.
    var shouldRetry: Bool?
    var safeDescription: String
    var unsafeMessage: String
    /// `cassetteMiss`: why the model cassette had no answer.
    var cassette: CassetteMiss?

    init(code: ProviderErrorCode, httpStatus: Int? = nil, retryAfterSeconds: Double? = nil, safeDescription: String, unsafeMessage: String = "") {
        self.code = code
        self.httpStatus = httpStatus
        self.retryAfterSeconds = retryAfterSeconds
        self.safeDescription = safeDescription
        self.unsafeMessage = unsafeMessage
    }

    /// The protocol's view of this error: code, guidance and flags per docs/protocol.md §13.
    var info: ProviderErrorInfo {
        ProviderErrorInfo(
            code: code, httpStatus: httpStatus, retryAfter: retryAfterSeconds, shouldRetry: shouldRetry,
            safeDescription: safeDescription, unsafeMessage: unsafeMessage, cassette: cassette)
    }
    var retryGuidance: RetryGuidance { info.retryGuidance }
    var isRetryable: Bool { info.isRetryable }
    var requiresUserAction: Bool { info.requiresUserAction }

    /// The `data.provider` object of docs/protocol.md §13.
    var json: JSONValue { (try? JSONValue(encoding: info)) ?? .null }
}

/// The provider sent something that breaks its own protocol (e.g. a tool call
/// with unparseable JSON cut off by `max_tokens`, an out-of-order block).
struct ProviderContractViolation: Error, Sendable, Hashable {
    var message: String
    init(_ message: String) { self.message = message }
}

extension ModelProvider {
    /// The exact JSON body this provider would send for `request`, for
    /// `--dump-requests`; nil for providers that send none (scripted).
    func wireBody(for request: ModelRequest) -> JSONValue? { nil }

    func optionWarnings(for request: ModelRequest) -> [OptionWarning] { [] }

    /// Rewrites tool schemas this provider cannot take as they are; each change
    /// is reported as a warning. The default takes every schema unchanged.
    func adaptTools(_ tools: [ModelToolDefinition]) -> (tools: [ModelToolDefinition], warnings: [SchemaWarning]) {
        (tools, [])
    }
}
