import AgentRPCProtocol

/// The seam between the turn loop and a model API. A provider turns one
/// `ModelRequest` into a stream of `ProviderEvent`s and knows nothing about
/// sessions, tools execution or the protocol; the loop knows nothing about HTTP.
public protocol ModelProvider: Sendable {
    /// Provider name as reported in events (`"openai"`, `"anthropic"`, `"scripted"`).
    var name: String { get }
    /// What this provider/model can do; checked in pre-flight.
    var capabilities: ProviderCapabilities { get }
    /// Streams one round trip. The stream finishes after `.end`, or throws a
    /// `ProviderError` (or `ProviderContractViolation`). Cancelling the consuming
    /// task must stop the underlying work promptly.
    func stream(_ request: ModelRequest) -> AsyncThrowingStream<ProviderEvent, any Error>
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
public struct ProviderCapabilities: Sendable, Hashable {
    public var supportsToolChoice: Bool
    public var supportsImages: Bool
    public var supportsReasoning: Bool
    public var supportsParallelToolCalls: Bool
    public var supportsStructuredOutput: Bool
    public var contextWindowTokens: Int?
    /// The API refuses tool calls and results in the history of a request that
    /// defines no tools (Anthropic): "no tools" must then be sent as the tools
    /// with tool choice `none`.
    public var requiresToolsWithToolHistory: Bool = false

    public init(
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
public struct ModelToolDefinition: Sendable, Hashable {
    public var name: String
    public var description: String
    public var inputSchema: JSONValue
    public init(name: String, description: String, inputSchema: JSONValue) {
        self.name = name
        self.description = description
        self.inputSchema = inputSchema
    }
}

/// How the model is asked to use tools on this request.
public enum ModelToolChoice: Sendable, Hashable {
    case auto
    case none
    case required
    case tool(String)
}

/// An image attached to a user message, already read and checked at the send boundary.
public enum ModelImage: Sendable, Hashable {
    /// Raw bytes (from `path` or `data`) with their MIME type.
    case data(bytes: [UInt8], mimeType: String)
    case url(String)
}

/// One tool call as the model made it.
public struct ModelToolCall: Sendable, Hashable {
    public var id: String
    public var name: String
    /// The arguments as the model wrote them: JSON text, possibly invalid
    /// (the loop turns invalid text into a `failed` output for the model).
    public var argumentsJSON: String
    public init(id: String, name: String, argumentsJSON: String) {
        self.id = id
        self.name = name
        self.argumentsJSON = argumentsJSON
    }
}

/// One message of the conversation as a provider receives it. Providers map
/// these into their own shapes (OpenAI messages, Anthropic content blocks).
public enum ModelMessage: Sendable, Hashable {
    case user(text: String, images: [ModelImage])
    /// `reasoning` carries the model's earlier thinking, `reasoningSignature` the
    /// provider's seal on it (Anthropic), where a provider needs it back; providers
    /// that cannot take it ignore both.
    case assistant(text: String, toolCalls: [ModelToolCall], reasoning: String?, reasoningSignature: String? = nil)
    case toolResult(callId: String, name: String, content: String, isError: Bool)
}

/// Generation options after precedence is applied (call site > profile case > defaults).
public struct GenerationOptions: Sendable, Hashable {
    public var temperature: Double?
    public var maxOutputTokens: Int?
    public var reasoningLevel: String?
    /// Provider-specific extras passed through untouched.
    public var extra: [String: JSONValue]
    public init(temperature: Double? = nil, maxOutputTokens: Int? = nil, reasoningLevel: String? = nil, extra: [String: JSONValue] = [:]) {
        self.temperature = temperature
        self.maxOutputTokens = maxOutputTokens
        self.reasoningLevel = reasoningLevel
        self.extra = extra
    }
}

/// Everything one provider round trip needs. No secrets: API keys live in the
/// provider instance, so a request can be dumped (`--dump-requests`) safely.
public struct ModelRequest: Sendable, Hashable {
    public var model: String
    public var instructions: String
    public var messages: [ModelMessage]
    public var tools: [ModelToolDefinition]
    public var toolChoice: ModelToolChoice
    public var options: GenerationOptions
    /// For structured output (`session/generate`): the JSON Schema the answer must match.
    public var responseSchema: JSONValue?
    /// Whether the provider should enforce `responseSchema` while decoding (OpenAI strict mode).
    /// The engine validates the answer against the schema either way.
    public var responseSchemaStrict: Bool = false

    public init(
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
public struct ModelUsage: Sendable, Hashable {
    public var inputTokens: Int
    public var outputTokens: Int
    public var cachedInputTokens: Int?
    public var cacheCreationInputTokens: Int?
    public var reasoningTokens: Int?
    public init(inputTokens: Int = 0, outputTokens: Int = 0, cachedInputTokens: Int? = nil, cacheCreationInputTokens: Int? = nil, reasoningTokens: Int? = nil) {
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
        self.cachedInputTokens = cachedInputTokens
        self.cacheCreationInputTokens = cacheCreationInputTokens
        self.reasoningTokens = reasoningTokens
    }
}

/// Why the model stopped.
public enum ModelStopReason: Sendable, Hashable {
    case endTurn
    case toolUse
    case maxTokens
    case refusal
    case contentFilter
    case other(String)
}

/// One event of a streamed round trip.
public enum ProviderEvent: Sendable, Hashable {
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
public struct ProviderError: Error, Sendable, Hashable {
    public var code: ProviderErrorCode
    public var httpStatus: Int?
    /// The provider's retry hint (Retry-After and friends), if it gave one.
    public var retryAfterSeconds: Double?
    /// The provider's `x-should-retry` header, when it sent one.
    public var shouldRetry: Bool?
    public var safeDescription: String
    public var unsafeMessage: String
    /// `cassetteMiss`: why the model cassette had no answer.
    public var cassette: CassetteMiss?

    public init(code: ProviderErrorCode, httpStatus: Int? = nil, retryAfterSeconds: Double? = nil, safeDescription: String, unsafeMessage: String = "") {
        self.code = code
        self.httpStatus = httpStatus
        self.retryAfterSeconds = retryAfterSeconds
        self.safeDescription = safeDescription
        self.unsafeMessage = unsafeMessage
    }

    /// The protocol's view of this error: code, guidance and flags per docs/protocol.md §13.
    public var info: ProviderErrorInfo {
        ProviderErrorInfo(
            code: code, httpStatus: httpStatus, retryAfter: retryAfterSeconds, shouldRetry: shouldRetry,
            safeDescription: safeDescription, unsafeMessage: unsafeMessage, cassette: cassette)
    }
    public var retryGuidance: RetryGuidance { info.retryGuidance }
    public var isRetryable: Bool { info.isRetryable }
    public var requiresUserAction: Bool { info.requiresUserAction }

    /// The `data.provider` object of docs/protocol.md §13.
    public var json: JSONValue { (try? JSONValue(encoding: info)) ?? .null }
}

/// The provider sent something that breaks its own protocol (e.g. a tool call
/// with unparseable JSON cut off by `max_tokens`, an out-of-order block).
public struct ProviderContractViolation: Error, Sendable, Hashable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

extension ModelProvider {
    /// The exact JSON body this provider would send for `request`, for
    /// `--dump-requests`; nil for providers that send none (scripted).
    public func wireBody(for request: ModelRequest) -> JSONValue? { nil }

    public func optionWarnings(for request: ModelRequest) -> [OptionWarning] { [] }

    /// Rewrites tool schemas this provider cannot take as they are; each change
    /// is reported as a warning. The default takes every schema unchanged.
    public func adaptTools(_ tools: [ModelToolDefinition]) -> (tools: [ModelToolDefinition], warnings: [SchemaWarning]) {
        (tools, [])
    }
}
