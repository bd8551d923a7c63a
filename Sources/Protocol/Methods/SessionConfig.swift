// The `session/create` params (docs/protocol.md §3 and §11). Plain structs decode with
// synthesized conformances so the schema generator can probe them; only the
// unions (`A | B` JSON shapes) have hand-written Codable and a stated schema.
// Semantic checks live in `SessionConfig.validate()`, never in `init(from:)`.

/// Everything a session is created with. All fields are optional; a turn needs a model.
public struct SessionConfig: Codable, Sendable, Hashable {
    public var model: ModelReference?
    public var role: Role?
    /// Shortcut for a one-profile session's instructions.
    public var instructions: String?
    public var tools: [ToolSpec]?
    public var guards: [Guard]?
    public var limits: Limits?
    public var toolChoice: ToolChoice?
    public var transcriptErrorPolicy: TranscriptErrorPolicy?
    public var egress: Egress?
    public var contextSources: [ContextSource]?
    /// Initial session properties, read by instructions, conditions and the profile selector.
    public var properties: [String: JSONValue]?
    public var profiles: Profiles?
    public var blocks: [String: Block]?
    public var router: Router?
    /// `false` keeps the session out of the store (default: stored).
    public var store: Bool?
    public var userId: String?
    public var title: String?
    /// Offers the built-in `ask_user` tool in every profile (docs/protocol.md §17).
    public var askUser: Bool?
    /// The engine's own tools offered in every profile, by name (`update_plan`).
    public var builtinTools: [BuiltinToolName]?
    /// MCP servers whose tools the session offers as `mcp__<server>__<tool>` (docs/protocol.md, "MCP tool servers").
    public var mcpServers: [MCPServerEntry]?
    /// Records or replays this session's model traffic (docs/testing.md); overrides the server's.
    public var modelCassette: ModelCassetteConfig?
    /// Token and cost limits over the session's whole life (docs/protocol.md, "Budgets").
    public var budget: Budget?
    /// How the conversation is compacted when it outgrows the model's window (docs/protocol.md, "Compaction").
    public var compaction: CompactionConfig?
    /// What becomes of a turn waiting on the client when the client goes away or
    /// the server dies (default `cancel`; docs/protocol.md, "Durable sessions").
    public var onDisconnect: OnDisconnect?

    public init(
        model: ModelReference? = nil, role: Role? = nil, instructions: String? = nil, tools: [ToolSpec]? = nil,
        guards: [Guard]? = nil, limits: Limits? = nil, toolChoice: ToolChoice? = nil,
        transcriptErrorPolicy: TranscriptErrorPolicy? = nil, egress: Egress? = nil,
        contextSources: [ContextSource]? = nil, properties: [String: JSONValue]? = nil, profiles: Profiles? = nil,
        blocks: [String: Block]? = nil, router: Router? = nil, store: Bool? = nil, userId: String? = nil,
        title: String? = nil, askUser: Bool? = nil, mcpServers: [MCPServerEntry]? = nil, builtinTools: [BuiltinToolName]? = nil
    ) {
        self.builtinTools = builtinTools
        self.mcpServers = mcpServers
        self.askUser = askUser
        self.model = model
        self.role = role
        self.instructions = instructions
        self.tools = tools
        self.guards = guards
        self.limits = limits
        self.toolChoice = toolChoice
        self.transcriptErrorPolicy = transcriptErrorPolicy
        self.egress = egress
        self.contextSources = contextSources
        self.properties = properties
        self.profiles = profiles
        self.blocks = blocks
        self.router = router
        self.store = store
        self.userId = userId
        self.title = title
    }
}

// MARK: - Model

/// A model: the name of one configured in `agentrpc.json`, or an inline configuration.
public enum ModelReference: Codable, Sendable, Hashable, JSONSchemaProviding, ExpressibleByStringLiteral {
    case named(String)
    case inline(ModelConfig)

    public init(stringLiteral value: String) { self = .named(value) }

    public init(from decoder: any Decoder) throws {
        if let name = try? decoder.singleValueContainer().decode(String.self) {
            self = .named(name)
        } else {
            self = .inline(try ModelConfig(from: decoder))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .named(let name):
            var c = encoder.singleValueContainer()
            try c.encode(name)
        case .inline(let config):
            try config.encode(to: encoder)
        }
    }

    public static var jsonSchema: JSONValue {
        WireSchema.anyOf([
            WireSchema.describe(WireSchema.string, "The name of a model configured in agentrpc.json."),
            WireSchema.ref(ModelConfig.self),
        ])
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [ModelConfig.self] }
}

extension ModelConfig: JSONSchemaBounded {
    public static let jsonSchemaBounds: [String: NumericBounds] = ["timeoutSeconds": DurationBounds.positiveSeconds]
}

/// Which provider implementation talks to the model.
public enum ProviderKind: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    /// OpenAI Chat Completions and compatible servers.
    case openai
    /// The OpenAI Responses API (`POST /v1/responses`).
    case openaiResponses = "openai-responses"
    case anthropic
    case scripted

    /// Only the scripted provider plays a `script` (checked when a config is validated).
    public var takesScript: Bool { self == .scripted }
}

/// An inline model configuration. API keys are never given here, only the
/// environment variable that holds one (`apiKeyEnv`).
public struct ModelConfig: Codable, Sendable, Hashable {
    public var provider: ProviderKind
    /// The provider's model id (e.g. `gpt-4.1-mini`); the scripted provider ignores it.
    public var model: String?
    public var baseURL: String?
    public var apiKeyEnv: String?
    public var headers: [String: String]?
    /// Idle timeout: the longest wait for the next bytes of a response (default 600).
    public var timeoutSeconds: Double?
    /// The longest wait for a connection to the provider to open (default 10).
    public var connectTimeoutSeconds: Double?
    /// Provider-specific request extras, passed through.
    public var options: [String: JSONValue]?
    /// The scripted provider's round trips (docs/protocol.md §15).
    public var script: [ScriptItem]?
    // Capability overrides, for compatible servers whose abilities differ from the default.
    public var supportsToolChoice: Bool?
    public var supportsImages: Bool?
    public var supportsReasoning: Bool?
    public var supportsParallelToolCalls: Bool?
    public var supportsStructuredOutput: Bool?
    /// The model's context window in tokens; overrides what the provider's definition knows of the model.
    public var contextWindowTokens: Int?
    /// What the model's tokens cost; without it no cost is reported (no price is built in).
    public var pricing: Pricing?

    public init(
        provider: ProviderKind, model: String? = nil, baseURL: String? = nil, apiKeyEnv: String? = nil,
        headers: [String: String]? = nil, timeoutSeconds: Double? = nil, options: [String: JSONValue]? = nil,
        script: [ScriptItem]? = nil, supportsToolChoice: Bool? = nil, supportsImages: Bool? = nil,
        supportsReasoning: Bool? = nil, supportsParallelToolCalls: Bool? = nil,
        supportsStructuredOutput: Bool? = nil, contextWindowTokens: Int? = nil, connectTimeoutSeconds: Double? = nil,
        pricing: Pricing? = nil
    ) {
        self.provider = provider
        self.pricing = pricing
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.model = model
        self.baseURL = baseURL
        self.apiKeyEnv = apiKeyEnv
        self.headers = headers
        self.timeoutSeconds = timeoutSeconds
        self.options = options
        self.script = script
        self.supportsToolChoice = supportsToolChoice
        self.supportsImages = supportsImages
        self.supportsReasoning = supportsReasoning
        self.supportsParallelToolCalls = supportsParallelToolCalls
        self.supportsStructuredOutput = supportsStructuredOutput
        self.contextWindowTokens = contextWindowTokens
    }
}

/// A model's prices in US dollars per million tokens. Input read from or
/// written to the provider's prompt cache costs `cacheReadPerMTok` and
/// `cacheWritePerMTok` where given, else `inputPerMTok`.
public struct Pricing: Codable, Sendable, Hashable {
    public var inputPerMTok: Double
    public var outputPerMTok: Double
    public var cacheReadPerMTok: Double?
    public var cacheWritePerMTok: Double?

    public init(inputPerMTok: Double, outputPerMTok: Double, cacheReadPerMTok: Double? = nil, cacheWritePerMTok: Double? = nil) {
        self.inputPerMTok = inputPerMTok
        self.outputPerMTok = outputPerMTok
        self.cacheReadPerMTok = cacheReadPerMTok
        self.cacheWritePerMTok = cacheWritePerMTok
    }
}

extension Pricing: JSONSchemaBounded {
    /// Up to a million dollars per million tokens: far above any price, far below
    /// anything a cost could overflow on.
    public static let jsonSchemaBounds: [String: NumericBounds] = {
        let price = NumericBounds(lowerBound: 0, excludesLowerBound: false, upperBound: 1_000_000, unit: "US dollars per million tokens")
        return ["inputPerMTok": price, "outputPerMTok": price, "cacheReadPerMTok": price, "cacheWritePerMTok": price]
    }()
}

/// One round trip of the scripted provider (docs/protocol.md §15). Keys combine: text,
/// reasoning and tool calls stream in one response; `error` fails the round trip.
public struct ScriptItem: Codable, Sendable, Hashable {
    /// Text deltas, streamed in order.
    public var text: [String]?
    public var toolCalls: [ScriptToolCall]?
    /// Reasoning deltas, streamed before the text.
    public var reasoning: [String]?
    /// Refusal deltas (a model declining to answer).
    public var refusal: [String]?
    public var usage: ScriptUsage?
    public var error: ScriptError?
    /// Waits this long before the item starts.
    public var delayMs: Int?
    /// Streams the item's text, then never finishes (cancellation and timeout tests).
    public var stall: Bool?
    /// How the scripted reply ends when it did not end normally (`maxTokens`,
    /// `contentFilter`, `refusal`), as a real provider would report it.
    /// Absent: `refusal` when the item has refusal text and no text, else a normal end.
    public var stopReason: StopReason?

    public init(
        text: [String]? = nil, toolCalls: [ScriptToolCall]? = nil, reasoning: [String]? = nil,
        refusal: [String]? = nil, usage: ScriptUsage? = nil, error: ScriptError? = nil, delayMs: Int? = nil,
        stall: Bool? = nil, stopReason: StopReason? = nil
    ) {
        self.stopReason = stopReason
        self.text = text
        self.toolCalls = toolCalls
        self.reasoning = reasoning
        self.refusal = refusal
        self.usage = usage
        self.error = error
        self.delayMs = delayMs
        self.stall = stall
    }
}

extension ScriptItem: JSONSchemaBounded {
    public static let jsonSchemaBounds: [String: NumericBounds] = ["delayMs": DurationBounds.nonNegativeMilliseconds]
}

/// A tool call the scripted model makes.
public struct ScriptToolCall: Codable, Sendable, Hashable {
    public var name: String
    /// The arguments as JSON; absent means `{}`.
    public var arguments: JSONValue?
    /// The call id; generated when absent.
    public var id: String?
    /// Raw argument text sent instead of `arguments`, to script a model that writes invalid JSON.
    public var argumentsText: String?

    public init(name: String, arguments: JSONValue? = nil, id: String? = nil, argumentsText: String? = nil) {
        self.name = name
        self.arguments = arguments
        self.id = id
        self.argumentsText = argumentsText
    }
}

/// Usage the scripted provider reports for its round trip.
public struct ScriptUsage: Codable, Sendable, Hashable {
    public var inputTokens: Int?
    public var outputTokens: Int?
    public var cachedInputTokens: Int?
    public var reasoningTokens: Int?

    public init(inputTokens: Int? = nil, outputTokens: Int? = nil, cachedInputTokens: Int? = nil, reasoningTokens: Int? = nil) {
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
        self.cachedInputTokens = cachedInputTokens
        self.reasoningTokens = reasoningTokens
    }
}

/// A provider error the scripted provider raises, as if from a cloud API.
public struct ScriptError: Codable, Sendable, Hashable {
    /// A `data.provider.code` of docs/protocol.md §13 (`rateLimited`, `authExpired`, ...);
    /// any other word is rejected when the session is created.
    public var code: ProviderErrorCode
    /// The retry hint, as a `Retry-After` header would give it.
    public var afterSeconds: Double?
    public var httpStatus: Int?
    public var message: String?

    public init(code: ProviderErrorCode, afterSeconds: Double? = nil, httpStatus: Int? = nil, message: String? = nil) {
        self.code = code
        self.afterSeconds = afterSeconds
        self.httpStatus = httpStatus
        self.message = message
    }
}

extension ScriptError: JSONSchemaBounded {
    public static let jsonSchemaBounds: [String: NumericBounds] = ["afterSeconds": DurationBounds.nonNegativeSeconds]
}

// MARK: - Role, tools, guards, limits

/// The persona and standing directives, placed before every profile's instructions.
public struct Role: Codable, Sendable, Hashable {
    public var persona: String?
    public var directives: [String]?

    public init(persona: String? = nil, directives: [String]? = nil) {
        self.persona = persona
        self.directives = directives
    }
}

/// A client-executed tool the model may call.
public struct ToolSpec: Codable, Sendable, Hashable {
    public var name: String
    public var description: String?
    /// JSON Schema of the arguments; absent means any object.
    public var inputSchema: JSONValue?
    /// Default `never`.
    public var confirmation: ConfirmationPolicy?
    public var annotations: ToolAnnotations?
    /// A final-answer tool: its arguments become `TurnResult.finalAnswer` and end the turn.
    public var final: Bool?
    /// Whether its calls may run beside other calls of the same round trip
    /// (default: `annotations.readOnly`); otherwise each runs alone.
    public var parallel: Bool?

    public init(
        name: String, description: String? = nil, inputSchema: JSONValue? = nil,
        confirmation: ConfirmationPolicy? = nil, annotations: ToolAnnotations? = nil, final: Bool? = nil, parallel: Bool? = nil
    ) {
        self.name = name
        self.description = description
        self.inputSchema = inputSchema
        self.confirmation = confirmation
        self.annotations = annotations
        self.final = final
        self.parallel = parallel
    }
}

/// A tool the engine runs itself, offered by naming it in `SessionConfig.builtinTools`.
public enum BuiltinToolName: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    /// The model keeps a plan of its work: `update_plan {entries: [PlanEntry]}` (docs/protocol.md, "Plans").
    case updatePlan = "update_plan"
}

/// One step of a session's plan (`update_plan`, `planUpdated`, `session/getState`).
public struct PlanEntry: Codable, Sendable, Hashable {
    /// What the step does, in a line.
    public var content: String
    public var priority: PlanEntryPriority
    public var status: PlanEntryStatus

    /// The most steps a plan holds (`update_plan` refuses more).
    public static let maxEntries = 100

    public init(content: String, priority: PlanEntryPriority, status: PlanEntryStatus) {
        self.content = content
        self.priority = priority
        self.status = status
    }
}

public enum PlanEntryPriority: String, Codable, Sendable, Hashable, CaseIterable, JSONSchemaStringEnum {
    case high, medium, low
}

public enum PlanEntryStatus: String, Codable, Sendable, Hashable, CaseIterable, JSONSchemaStringEnum {
    case pending
    case inProgress = "in_progress"
    case completed
}

/// Whether a tool always needs the user's confirmation.
public enum ConfirmationPolicy: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case never
    case always
}

/// Hints about a tool's effects, matched by guards.
public struct ToolAnnotations: Codable, Sendable, Hashable {
    public var readOnly: Bool?
    public var destructive: Bool?
    public var idempotent: Bool?

    public init(readOnly: Bool? = nil, destructive: Bool? = nil, idempotent: Bool? = nil) {
        self.readOnly = readOnly
        self.destructive = destructive
        self.idempotent = idempotent
    }

    /// The annotation names a guard may match on.
    public static let names: [String] = ["readOnly", "destructive", "idempotent"]

    /// Whether the annotation called `name` is set to true.
    public func isSet(_ name: String) -> Bool {
        switch name {
        case "readOnly": return readOnly == true
        case "destructive": return destructive == true
        case "idempotent": return idempotent == true
        default: return false
        }
    }
}

/// A policy rule for tool calls. Guards run in order: any `deny` wins, else the first `confirm`.
public struct Guard: Codable, Sendable, Hashable {
    public var match: GuardMatch
    public var verdict: GuardVerdict
    public var reason: String?

    public init(match: GuardMatch, verdict: GuardVerdict, reason: String? = nil) {
        self.match = match
        self.verdict = verdict
        self.reason = reason
    }
}

/// What a guard applies to; all given criteria must hold (an empty match hits every call).
public struct GuardMatch: Codable, Sendable, Hashable {
    /// A glob over the tool name (`*` and `?`).
    public var name: String?
    /// Annotation names (`readOnly`, `destructive`, `idempotent`) that must all be true.
    public var annotations: [String]?

    public init(name: String? = nil, annotations: [String]? = nil) {
        self.name = name
        self.annotations = annotations
    }
}

/// A guard's decision.
public enum GuardVerdict: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case allow
    case confirm
    case deny
}

/// Per-turn limits. Absent fields take the defaults below.
public struct Limits: Codable, Sendable, Hashable {
    public var maxToolCalls: Int?
    public var maxRoundTrips: Int?
    /// Includes tool and confirmation time.
    public var wallClockSeconds: Double?
    public var toolTimeoutSeconds: Double?
    public var confirmationTimeoutSeconds: Double?
    /// How long `ask_user` waits for the user's answer.
    public var askUserTimeoutSeconds: Double?
    /// Token and cost limits of one turn (docs/protocol.md, "Budgets"); none by default.
    public var maxInputTokens: Int?
    public var maxOutputTokens: Int?
    public var maxTotalTokens: Int?
    public var maxCostUSD: Double?
    /// How many calls of one round trip may run at once (those that may run in parallel).
    public var maxParallelToolCalls: Int?
    /// How long a parked turn (`onDisconnect: "park"`) waits for `session/continue`
    /// before it ends as cancelled; none by default (it waits for good).
    public var parkedTTLSeconds: Double?

    public static let defaultMaxToolCalls = 64
    public static let defaultMaxRoundTrips = 32
    public static let defaultWallClockSeconds: Double = 600
    public static let defaultToolTimeoutSeconds: Double = 300
    public static let defaultConfirmationTimeoutSeconds: Double = 600
    public static let defaultAskUserTimeoutSeconds: Double = 600
    public static let defaultMaxParallelToolCalls = 8

    public init(
        maxToolCalls: Int? = nil, maxRoundTrips: Int? = nil, wallClockSeconds: Double? = nil,
        toolTimeoutSeconds: Double? = nil, confirmationTimeoutSeconds: Double? = nil, askUserTimeoutSeconds: Double? = nil,
        maxInputTokens: Int? = nil, maxOutputTokens: Int? = nil, maxTotalTokens: Int? = nil, maxCostUSD: Double? = nil,
        maxParallelToolCalls: Int? = nil, parkedTTLSeconds: Double? = nil
    ) {
        self.parkedTTLSeconds = parkedTTLSeconds
        self.maxInputTokens = maxInputTokens
        self.maxOutputTokens = maxOutputTokens
        self.maxTotalTokens = maxTotalTokens
        self.maxCostUSD = maxCostUSD
        self.askUserTimeoutSeconds = askUserTimeoutSeconds
        self.maxParallelToolCalls = maxParallelToolCalls
        self.maxToolCalls = maxToolCalls
        self.maxRoundTrips = maxRoundTrips
        self.wallClockSeconds = wallClockSeconds
        self.toolTimeoutSeconds = toolTimeoutSeconds
        self.confirmationTimeoutSeconds = confirmationTimeoutSeconds
    }

    /// `overrides`' fields win over this value's; used for call-site limits.
    public func merged(with overrides: Limits?) -> Limits {
        guard let o = overrides else { return self }
        return Limits(
            maxToolCalls: o.maxToolCalls ?? maxToolCalls, maxRoundTrips: o.maxRoundTrips ?? maxRoundTrips,
            wallClockSeconds: o.wallClockSeconds ?? wallClockSeconds,
            toolTimeoutSeconds: o.toolTimeoutSeconds ?? toolTimeoutSeconds,
            confirmationTimeoutSeconds: o.confirmationTimeoutSeconds ?? confirmationTimeoutSeconds,
            askUserTimeoutSeconds: o.askUserTimeoutSeconds ?? askUserTimeoutSeconds,
            maxInputTokens: o.maxInputTokens ?? maxInputTokens, maxOutputTokens: o.maxOutputTokens ?? maxOutputTokens,
            maxTotalTokens: o.maxTotalTokens ?? maxTotalTokens, maxCostUSD: o.maxCostUSD ?? maxCostUSD,
            maxParallelToolCalls: o.maxParallelToolCalls ?? maxParallelToolCalls, parkedTTLSeconds: o.parkedTTLSeconds ?? parkedTTLSeconds)
    }

    /// The token and cost limits, as a session's `budget` gives them.
    public var budget: Budget {
        Budget(maxInputTokens: maxInputTokens, maxOutputTokens: maxOutputTokens, maxTotalTokens: maxTotalTokens, maxCostUSD: maxCostUSD)
    }

    public var effectiveMaxToolCalls: Int { maxToolCalls ?? Self.defaultMaxToolCalls }
    public var effectiveMaxRoundTrips: Int { maxRoundTrips ?? Self.defaultMaxRoundTrips }
    public var effectiveWallClockSeconds: Double { wallClockSeconds ?? Self.defaultWallClockSeconds }
    public var effectiveToolTimeoutSeconds: Double { toolTimeoutSeconds ?? Self.defaultToolTimeoutSeconds }
    public var effectiveConfirmationTimeoutSeconds: Double {
        confirmationTimeoutSeconds ?? Self.defaultConfirmationTimeoutSeconds
    }
}

extension Limits: JSONSchemaBounded {
    public static let jsonSchemaBounds: [String: NumericBounds] = [
        "wallClockSeconds": DurationBounds.positiveSeconds,
        "toolTimeoutSeconds": DurationBounds.positiveSeconds,
        "confirmationTimeoutSeconds": DurationBounds.positiveSeconds,
        "askUserTimeoutSeconds": DurationBounds.positiveSeconds,
        "parkedTTLSeconds": DurationBounds.positiveSeconds,
    ].merging(Budget.jsonSchemaBounds) { a, _ in a }
}

/// Token and cost limits: per turn in `limits`, over the session's life in
/// `budget`. Input and output are counted as the provider reports them
/// (`inputTokens`, `outputTokens`); the total is their sum; the cost needs the
/// model's `pricing`.
public struct Budget: Codable, Sendable, Hashable {
    public var maxInputTokens: Int?
    public var maxOutputTokens: Int?
    public var maxTotalTokens: Int?
    public var maxCostUSD: Double?

    public init(maxInputTokens: Int? = nil, maxOutputTokens: Int? = nil, maxTotalTokens: Int? = nil, maxCostUSD: Double? = nil) {
        self.maxInputTokens = maxInputTokens
        self.maxOutputTokens = maxOutputTokens
        self.maxTotalTokens = maxTotalTokens
        self.maxCostUSD = maxCostUSD
    }

    /// Whether any limit is set.
    public var isEmpty: Bool { maxInputTokens == nil && maxOutputTokens == nil && maxTotalTokens == nil && maxCostUSD == nil }
}

extension Budget: JSONSchemaBounded {
    public static let jsonSchemaBounds: [String: NumericBounds] = [
        "maxInputTokens": BudgetBounds.tokens, "maxOutputTokens": BudgetBounds.tokens, "maxTotalTokens": BudgetBounds.tokens,
        "maxCostUSD": BudgetBounds.costUSD,
    ]
}

/// How a session's conversation is compacted (docs/protocol.md, "Compaction").
public struct CompactionConfig: Codable, Sendable, Hashable {
    /// Compact before a round trip whose context would pass `threshold` of a
    /// known window, and once when the provider says the context is too long.
    /// Default `true`.
    public var auto: Bool?
    /// The share of the window that triggers a compaction (default 0.8).
    public var threshold: Double?
    /// Entries kept verbatim after the summary (default 6).
    public var keepLast: Int?
    /// The model that writes the summary (default: the one the conversation uses).
    public var model: ModelReference?
    /// Replaces the default instructions of the summary request.
    public var instructions: String?

    public static let defaultThreshold = 0.8
    public static let defaultKeepLast = 6

    public init(auto: Bool? = nil, threshold: Double? = nil, keepLast: Int? = nil, model: ModelReference? = nil, instructions: String? = nil) {
        self.auto = auto
        self.threshold = threshold
        self.keepLast = keepLast
        self.model = model
        self.instructions = instructions
    }
}

extension CompactionConfig: JSONSchemaBounded {
    public static let jsonSchemaBounds: [String: NumericBounds] = [
        "threshold": NumericBounds(lowerBound: 0, excludesLowerBound: true, upperBound: 1),
        "keepLast": BudgetBounds.keepLast,
    ]
}

/// How the model is asked to use tools: `"auto"`, `"none"`, `"required"` or `{"tool": name}`.
public enum ToolChoice: Codable, Sendable, Hashable, JSONSchemaProviding {
    case auto
    case none
    case required
    case tool(String)

    private enum CodingKeys: String, CodingKey, CaseIterable { case tool }

    public init(from decoder: any Decoder) throws {
        if let word = try? decoder.singleValueContainer().decode(String.self) {
            switch word {
            case "auto": self = .auto
            case "none": self = .none
            case "required": self = .required
            default: throw unionMismatch(ToolChoice.self, decoder, "\"auto\", \"none\", \"required\" or {\"tool\": name}, got \"\(word)\"")
            }
            return
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self = .tool(try c.decode(String.self, forKey: .tool))
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .auto, .none, .required:
            var c = encoder.singleValueContainer()
            try c.encode(self == .auto ? "auto" : self == .none ? "none" : "required")
        case .tool(let name):
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(name, forKey: .tool)
        }
    }

    public static var jsonSchema: JSONValue {
        WireSchema.oneOf([
            WireSchema.stringEnum(["auto", "none", "required"]),
            WireSchema.object(["tool": WireSchema.string], required: ["tool"]),
        ])
    }
}

/// What becomes of a turn waiting on the client when the client goes away or
/// the server dies: `cancel` ends it as a cancel does (rolled back); `park`
/// leaves it open in the journal, to be continued with `session/continue`.
public enum OnDisconnect: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case cancel
    case park
}

/// What a failed turn leaves in the transcript (docs/turns.md).
public enum TranscriptErrorPolicy: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case keepCompleted
    case revert
    case preserve
}

/// Outbound filter applied to each request before it is sent.
public struct Egress: Codable, Sendable, Hashable {
    /// Regexes; a request matching any is refused with `egressRefused`.
    public var refuse: [String]?
    public var redact: [Redaction]?

    public init(refuse: [String]? = nil, redact: [Redaction]? = nil) {
        self.refuse = refuse
        self.redact = redact
    }
}

/// A regex replacement (egress filter, `redact` history transform).
public struct Redaction: Codable, Sendable, Hashable {
    public var pattern: String
    public var replacement: String

    public init(pattern: String, replacement: String) {
        self.pattern = pattern
        self.replacement = replacement
    }
}

/// A client-supplied context value, fetched with `context/refresh` at turn start.
public struct ContextSource: Codable, Sendable, Hashable {
    public var name: String
    public var description: String?

    public init(name: String, description: String? = nil) {
        self.name = name
        self.description = description
    }
}

// MARK: - Profiles (docs/protocol.md §11)

/// The session's profiles: a selector property picks one of `cases`.
public struct Profiles: Codable, Sendable, Hashable {
    /// The session property whose value names the active case.
    public var selector: String?
    /// Shared settings; a case's own options win, hooks accumulate.
    public var defaults: ProfileCase?
    public var cases: [String: ProfileCase]

    public init(selector: String? = nil, defaults: ProfileCase? = nil, cases: [String: ProfileCase]) {
        self.selector = selector
        self.defaults = defaults
        self.cases = cases
    }
}

/// One profile: instructions, tools, model, options, history view and hooks.
public struct ProfileCase: Codable, Sendable, Hashable {
    /// What this agent does; the router shows it to the classifier.
    public var description: String?
    public var instructions: [InstructionItem]?
    public var tools: [ProfileTool]?
    public var model: ModelReference?
    public var options: ProfileOptions?
    public var history: [HistoryTransform]?
    public var hooks: Hooks?
    public var transcriptErrorPolicy: TranscriptErrorPolicy?
    public var egress: Egress?
    /// The MCP servers whose tools this profile offers, by name (the session's, or
    /// agentrpc.json's, which then start with the session); absent: the case's
    /// defaults', else every server of the session.
    public var mcpServers: [String]?

    public init(
        description: String? = nil, instructions: [InstructionItem]? = nil, tools: [ProfileTool]? = nil,
        model: ModelReference? = nil, options: ProfileOptions? = nil, history: [HistoryTransform]? = nil,
        hooks: Hooks? = nil, transcriptErrorPolicy: TranscriptErrorPolicy? = nil, egress: Egress? = nil,
        mcpServers: [String]? = nil
    ) {
        self.mcpServers = mcpServers
        self.description = description
        self.instructions = instructions
        self.tools = tools
        self.model = model
        self.options = options
        self.history = history
        self.hooks = hooks
        self.transcriptErrorPolicy = transcriptErrorPolicy
        self.egress = egress
    }
}

/// Generation options of a profile (call-site options win, then the case, then defaults).
public struct ProfileOptions: Codable, Sendable, Hashable {
    public var temperature: Double?
    /// Free-form effort name (`"low"`, `"deep"`, ...) mapped per provider.
    public var reasoningLevel: String?
    public var maxOutputTokens: Int?
    public var toolCallingMode: ToolCallingMode?
    public var toolChoice: ToolChoice?

    public init(
        temperature: Double? = nil, reasoningLevel: String? = nil, maxOutputTokens: Int? = nil,
        toolCallingMode: ToolCallingMode? = nil, toolChoice: ToolChoice? = nil
    ) {
        self.temperature = temperature
        self.reasoningLevel = reasoningLevel
        self.maxOutputTokens = maxOutputTokens
        self.toolCallingMode = toolCallingMode
        self.toolChoice = toolChoice
    }
}

/// Whether the model may, may not, or must call tools.
public enum ToolCallingMode: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case allowed
    case disallowed
    case required
}

/// One instruction line: plain text, conditional text, or an included block.
/// Text may hold `{{property}}` templates.
public enum InstructionItem: Codable, Sendable, Hashable, JSONSchemaProviding {
    /// A bare JSON string.
    case plain(String)
    /// `{"text": ..., "when": ...}`.
    case text(String, when: Condition?)
    /// `{"block": name, "when": ...}`.
    case block(String, when: Condition?)

    private enum CodingKeys: String, CodingKey, CaseIterable { case text, block, when }

    public init(from decoder: any Decoder) throws {
        if let s = try? decoder.singleValueContainer().decode(String.self) {
            self = .plain(s)
            return
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let when = try c.decodeIfPresent(Condition.self, forKey: .when)
        switch (c.contains(.text), c.contains(.block)) {
        case (true, false): self = .text(try c.decode(String.self, forKey: .text), when: when)
        case (false, true): self = .block(try c.decode(String.self, forKey: .block), when: when)
        default: throw unionMismatch(InstructionItem.self, decoder, "a string, {text, when?} or {block, when?}")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .plain(let s):
            var c = encoder.singleValueContainer()
            try c.encode(s)
        case .text(let s, let when):
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(s, forKey: .text)
            try c.encodeIfPresent(when, forKey: .when)
        case .block(let name, let when):
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(name, forKey: .block)
            try c.encodeIfPresent(when, forKey: .when)
        }
    }

    /// The condition, if any, under which this line applies.
    public var condition: Condition? {
        switch self {
        case .plain: return nil
        case .text(_, let when), .block(_, let when): return when
        }
    }

    public static var jsonSchema: JSONValue {
        let cond = WireSchema.ref(Condition.self)
        return WireSchema.oneOf([
            WireSchema.string,
            WireSchema.object(["text": WireSchema.string, "when": cond], required: ["text"]),
            WireSchema.object(["block": WireSchema.string, "when": cond], required: ["block"]),
        ])
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [Condition.self] }
}

/// A tool entry of a profile: a declared tool by name, or a built-in orchestration tool.
public enum ProfileTool: Codable, Sendable, Hashable, JSONSchemaProviding {
    /// A tool of `SessionConfig.tools`, by name.
    case named(String)
    /// Baton-pass: the model gets a tool that switches the selector to `profile`.
    case handoff(DelegationTool)
    /// Phone-a-friend: the model gets a tool that asks a child session running `profile`.
    case consult(DelegationTool)
    /// The model gets `activate_skill` over these skills.
    case skills([Skill])
    /// The model gets `ask_user`, which asks the client's user a question (`{"askUser": true}`).
    case askUser

    private enum CodingKeys: String, CodingKey, CaseIterable { case handoff, consult, skills, askUser, name, description }

    public init(from decoder: any Decoder) throws {
        if let s = try? decoder.singleValueContainer().decode(String.self) {
            self = .named(s)
            return
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let present = [CodingKeys.handoff, .consult, .skills, .askUser].filter { c.contains($0) }
        guard present.count == 1, let key = present.first else {
            throw unionMismatch(ProfileTool.self, decoder, "a tool name or exactly one of handoff, consult, skills, askUser")
        }
        switch key {
        case .skills:
            self = .skills(try c.decode([Skill].self, forKey: .skills))
        case .askUser:
            guard try c.decode(Bool.self, forKey: .askUser) else {
                throw DecodingError.dataCorruptedError(forKey: .askUser, in: c, debugDescription: "must be true; omit the entry to offer no ask_user")
            }
            self = .askUser
        default:
            let tool = DelegationTool(
                profile: try c.decode(String.self, forKey: key),
                name: try c.decodeIfPresent(String.self, forKey: .name),
                description: try c.decodeIfPresent(String.self, forKey: .description))
            self = key == .handoff ? .handoff(tool) : .consult(tool)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .named(let s):
            var c = encoder.singleValueContainer()
            try c.encode(s)
        case .handoff(let t), .consult(let t):
            var c = encoder.container(keyedBy: CodingKeys.self)
            if case .handoff = self {
                try c.encode(t.profile, forKey: .handoff)
            } else {
                try c.encode(t.profile, forKey: .consult)
            }
            try c.encodeIfPresent(t.name, forKey: .name)
            try c.encodeIfPresent(t.description, forKey: .description)
        case .skills(let skills):
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(skills, forKey: .skills)
        case .askUser:
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(true, forKey: .askUser)
        }
    }

    public static var jsonSchema: JSONValue {
        func delegation(_ key: String) -> JSONValue {
            WireSchema.object(
                [key: WireSchema.string, "name": WireSchema.string, "description": WireSchema.string],
                required: [key])
        }
        return WireSchema.oneOf([
            WireSchema.describe(WireSchema.string, "The name of a tool declared in SessionConfig.tools."),
            delegation("handoff"),
            delegation("consult"),
            WireSchema.object(["skills": WireSchema.array(WireSchema.ref(Skill.self))], required: ["skills"]),
            WireSchema.object(["askUser": WireSchema.trueConst], required: ["askUser"]),
        ])
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [Skill.self] }
}

/// A handoff or consult tool: the target profile and how the tool is shown to the model.
public struct DelegationTool: Sendable, Hashable {
    public var profile: String
    /// The tool name the model sees; the engine picks one when absent.
    public var name: String?
    public var description: String?

    public init(profile: String, name: String? = nil, description: String? = nil) {
        self.profile = profile
        self.name = name
        self.description = description
    }
}

/// A skill offered through `activate_skill`: a `prompt` is returned as tool output,
/// `instructions` join the instructions while the skill is active.
public struct Skill: Codable, Sendable, Hashable {
    public var name: String
    public var description: String?
    public var prompt: String?
    public var instructions: String?

    public init(name: String, description: String? = nil, prompt: String? = nil, instructions: String? = nil) {
        self.name = name
        self.description = description
        self.prompt = prompt
        self.instructions = instructions
    }
}

/// A test over session properties (or, in a hook's `when`, the current tool).
public indirect enum Condition: Codable, Sendable, Hashable, JSONSchemaProviding {
    case property(PropertyCondition)
    case not(Condition)
    case all([Condition])
    case any([Condition])
    /// Hook-only: the hook fired for a call of this tool.
    case tool(String)

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case property, equals, contains, exists, not, all, any, tool
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let present = [CodingKeys.property, .not, .all, .any, .tool].filter { c.contains($0) }
        guard present.count == 1, let key = present.first else {
            throw unionMismatch(Condition.self, decoder, "exactly one of property, not, all, any, tool")
        }
        switch key {
        case .not: self = .not(try c.decode(Condition.self, forKey: .not))
        case .all: self = .all(try c.decode([Condition].self, forKey: .all))
        case .any: self = .any(try c.decode([Condition].self, forKey: .any))
        case .tool: self = .tool(try c.decode(String.self, forKey: .tool))
        default:
            // `equals: null` is a real test (the property is null), so presence is
            // read separately from the value.
            func value(_ k: CodingKeys) throws -> JSONValue? {
                guard c.contains(k) else { return nil }
                return try c.decodeNil(forKey: k) ? .null : c.decode(JSONValue.self, forKey: k)
            }
            self = .property(PropertyCondition(
                property: try c.decode(String.self, forKey: .property),
                equals: try value(.equals), contains: try value(.contains),
                exists: try c.decodeIfPresent(Bool.self, forKey: .exists)))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .property(let p):
            try c.encode(p.property, forKey: .property)
            try c.encodeIfPresent(p.equals, forKey: .equals)
            try c.encodeIfPresent(p.contains, forKey: .contains)
            try c.encodeIfPresent(p.exists, forKey: .exists)
        case .not(let inner): try c.encode(inner, forKey: .not)
        case .all(let list): try c.encode(list, forKey: .all)
        case .any(let list): try c.encode(list, forKey: .any)
        case .tool(let name): try c.encode(name, forKey: .tool)
        }
    }

    public static var jsonSchema: JSONValue {
        let me = WireSchema.ref(Condition.self)
        return WireSchema.oneOf([
            WireSchema.object(
                ["property": WireSchema.string, "equals": WireSchema.any, "contains": WireSchema.any,
                 "exists": WireSchema.boolean],
                required: ["property"]),
            WireSchema.object(["not": me], required: ["not"]),
            WireSchema.object(["all": WireSchema.array(me)], required: ["all"]),
            WireSchema.object(["any": WireSchema.array(me)], required: ["any"]),
            WireSchema.object(["tool": WireSchema.string], required: ["tool"]),
        ])
    }
    /// Itself: the schema refers to `#/$defs/Condition` for nesting.
    public static var jsonSchemaDependencies: [any Decodable.Type] { [Condition.self] }
}

/// A test of one session property. All given tests must hold; none given means "is set and not null".
public struct PropertyCondition: Sendable, Hashable {
    public var property: String
    /// `.null` tests for a null value; nil means "not tested".
    public var equals: JSONValue?
    /// Array membership or substring.
    public var contains: JSONValue?
    public var exists: Bool?

    public init(property: String, equals: JSONValue? = nil, contains: JSONValue? = nil, exists: Bool? = nil) {
        self.property = property
        self.equals = equals
        self.contains = contains
        self.exists = exists
    }
}

/// A lossless per-profile view of the history, applied to a copy before each request.
public enum HistoryTransform: Codable, Sendable, Hashable, JSONSchemaProviding {
    case rollingWindow(RollingWindow)
    case dropCompletedToolCalls
    /// Tool exchanges plus the latest exchange.
    case keepToolRecords
    case redact(Redaction)
    /// Entries this profile produced, plus their prompts.
    case ownTurnsOnly

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case rollingWindow, dropCompletedToolCalls, keepToolRecords, redact, ownTurnsOnly
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let present = CodingKeys.allCases.filter { c.contains($0) }
        guard present.count == 1, let key = present.first else {
            throw unionMismatch(HistoryTransform.self, decoder, "an object with exactly one of \(CodingKeys.allCases.map(\.rawValue))")
        }
        switch key {
        case .rollingWindow: self = .rollingWindow(try c.decode(RollingWindow.self, forKey: key))
        case .redact: self = .redact(try c.decode(Redaction.self, forKey: key))
        case .dropCompletedToolCalls, .keepToolRecords, .ownTurnsOnly:
            // The flag form is `{"name": true}`; `false` would read as "off", which a
            // list of transforms expresses by leaving it out.
            guard try c.decode(Bool.self, forKey: key) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "must be true; omit the transform to disable it")
            }
            self = key == .dropCompletedToolCalls ? .dropCompletedToolCalls
                : key == .keepToolRecords ? .keepToolRecords : .ownTurnsOnly
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .rollingWindow(let w): try c.encode(w, forKey: .rollingWindow)
        case .dropCompletedToolCalls: try c.encode(true, forKey: .dropCompletedToolCalls)
        case .keepToolRecords: try c.encode(true, forKey: .keepToolRecords)
        case .redact(let r): try c.encode(r, forKey: .redact)
        case .ownTurnsOnly: try c.encode(true, forKey: .ownTurnsOnly)
        }
    }

    public static var jsonSchema: JSONValue {
        WireSchema.oneOf([
            WireSchema.object(["rollingWindow": WireSchema.ref(RollingWindow.self)], required: ["rollingWindow"]),
            WireSchema.object(["dropCompletedToolCalls": WireSchema.trueConst], required: ["dropCompletedToolCalls"]),
            WireSchema.object(["keepToolRecords": WireSchema.trueConst], required: ["keepToolRecords"]),
            WireSchema.object(["redact": WireSchema.ref(Redaction.self)], required: ["redact"]),
            WireSchema.object(["ownTurnsOnly": WireSchema.trueConst], required: ["ownTurnsOnly"]),
        ])
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [RollingWindow.self, Redaction.self] }
}

/// Keeps the newest part of the history: by entries, by messages, or by estimated tokens.
public struct RollingWindow: Codable, Sendable, Hashable {
    public var entries: Int?
    public var messages: Int?
    public var tokens: Int?
    /// Never split a user/assistant pair.
    public var evenPairs: Bool?

    public init(entries: Int? = nil, messages: Int? = nil, tokens: Int? = nil, evenPairs: Bool? = nil) {
        self.entries = entries
        self.messages = messages
        self.tokens = tokens
        self.evenPairs = evenPairs
    }
}

/// A profile's lifecycle hooks; defaults' and the case's both run.
public struct Hooks: Codable, Sendable, Hashable {
    public var onActivate: [HookAction]?
    public var onDeactivate: [HookAction]?
    public var onPrompt: [HookAction]?
    public var onToolCall: [HookAction]?
    public var onToolOutput: [HookAction]?
    public var onResponse: [HookAction]?

    public init(
        onActivate: [HookAction]? = nil, onDeactivate: [HookAction]? = nil, onPrompt: [HookAction]? = nil,
        onToolCall: [HookAction]? = nil, onToolOutput: [HookAction]? = nil, onResponse: [HookAction]? = nil
    ) {
        self.onActivate = onActivate
        self.onDeactivate = onDeactivate
        self.onPrompt = onPrompt
        self.onToolCall = onToolCall
        self.onToolOutput = onToolOutput
        self.onResponse = onResponse
    }

    /// The actions of one hook point.
    public subscript(hook: HookName) -> [HookAction]? {
        switch hook {
        case .onActivate: return onActivate
        case .onDeactivate: return onDeactivate
        case .onPrompt: return onPrompt
        case .onToolCall: return onToolCall
        case .onToolOutput: return onToolOutput
        case .onResponse: return onResponse
        }
    }
}

/// A hook point.
public enum HookName: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case onActivate
    case onDeactivate
    case onPrompt
    case onToolCall
    case onToolOutput
    case onResponse
}

/// One hook action: an optional `when` beside exactly one action key, e.g.
/// `{"when": {"tool": "save"}, "set": {"dirty": true}}`.
public struct HookAction: Codable, Sendable, Hashable, JSONSchemaProviding {
    public var when: Condition?
    public var action: HookActionKind

    public init(when: Condition? = nil, _ action: HookActionKind) {
        self.when = when
        self.action = action
    }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case when, set, remove, summarizeHistory, client, then
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        when = try c.decodeIfPresent(Condition.self, forKey: .when)
        let present = [CodingKeys.set, .remove, .summarizeHistory, .client, .then].filter { c.contains($0) }
        guard present.count == 1, let key = present.first else {
            throw unionMismatch(HookAction.self, decoder, "exactly one of set, remove, summarizeHistory, client, then (beside an optional when)")
        }
        switch key {
        case .set: action = .set(try c.decode([String: JSONValue].self, forKey: key))
        case .remove: action = .remove(try c.decode([String].self, forKey: key))
        case .summarizeHistory: action = .summarizeHistory(try c.decode(SummarizeHistory.self, forKey: key))
        case .then: action = .then(try c.decode([HookAction].self, forKey: key))
        default:
            guard try c.decode(Bool.self, forKey: .client) else {
                throw DecodingError.dataCorruptedError(forKey: .client, in: c, debugDescription: "must be true")
            }
            action = .client
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(when, forKey: .when)
        switch action {
        case .set(let values): try c.encode(values, forKey: .set)
        case .remove(let names): try c.encode(names, forKey: .remove)
        case .summarizeHistory(let s): try c.encode(s, forKey: .summarizeHistory)
        case .client: try c.encode(true, forKey: .client)
        case .then(let actions): try c.encode(actions, forKey: .then)
        }
    }

    public static var jsonSchema: JSONValue {
        let when = WireSchema.ref(Condition.self)
        func with(_ key: String, _ schema: JSONValue) -> JSONValue {
            WireSchema.object(["when": when, key: schema], required: [key])
        }
        return WireSchema.oneOf([
            with("set", WireSchema.map(WireSchema.any)),
            with("remove", WireSchema.array(WireSchema.string)),
            with("summarizeHistory", WireSchema.ref(SummarizeHistory.self)),
            with("client", WireSchema.trueConst),
            with("then", WireSchema.array(WireSchema.ref(HookAction.self))),
        ])
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [Condition.self, SummarizeHistory.self, HookAction.self] }
}

/// What a hook action does.
public indirect enum HookActionKind: Sendable, Hashable {
    /// Sets session properties.
    case set([String: JSONValue])
    /// Removes session properties.
    case remove([String])
    /// Lossy and global: summarizes old entries into a property and removes them.
    case summarizeHistory(SummarizeHistory)
    /// Sends `hook/call` to the client.
    case client
    /// Runs nested actions (useful under a `when`).
    case then([HookAction])
}

/// Parameters of the `summarizeHistory` hook action.
public struct SummarizeHistory: Codable, Sendable, Hashable {
    /// Summarize once the transcript holds more than this many entries.
    public var threshold: Int?
    /// Entries kept verbatim after the summary.
    public var keepLast: Int?
    public var model: ModelReference?
    /// The property that receives the summary.
    public var into: String?

    public init(threshold: Int? = nil, keepLast: Int? = nil, model: ModelReference? = nil, into: String? = nil) {
        self.threshold = threshold
        self.keepLast = keepLast
        self.model = model
        self.into = into
    }
}

/// A reusable group of instructions and tools; nested blocks concatenate and union.
public struct Block: Codable, Sendable, Hashable {
    public var instructions: [InstructionItem]?
    public var tools: [ProfileTool]?
    public var blocks: [String]?

    public init(instructions: [InstructionItem]? = nil, tools: [ProfileTool]? = nil, blocks: [String]? = nil) {
        self.instructions = instructions
        self.tools = tools
        self.blocks = blocks
    }
}

// MARK: - Router (docs/protocol.md §11)

/// Picks the agent (profile case) at the start of each turn.
public struct Router: Codable, Sendable, Hashable {
    public var kind: RouterKind
    /// The classifier model (`llm` routers).
    public var model: ModelReference?
    public var instructions: String?
    /// Tried in order; the first whose regex matches the input wins (`rules` routers).
    public var rules: [RouterRule]?

    public init(kind: RouterKind, model: ModelReference? = nil, instructions: String? = nil, rules: [RouterRule]? = nil) {
        self.kind = kind
        self.model = model
        self.instructions = instructions
        self.rules = rules
    }
}

/// How a router decides.
public enum RouterKind: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case llm
    case rules
}

/// A routing rule: input matching `pattern` goes to `profile`.
public struct RouterRule: Codable, Sendable, Hashable {
    public var pattern: String
    public var profile: String

    public init(pattern: String, profile: String) {
        self.pattern = pattern
        self.profile = profile
    }
}
