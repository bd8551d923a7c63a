import AgentRPCProtocol

/// Span names of a turn. The tree of one `session/send` or `session/generate`:
///
///     chat.turn                      internal, root; session.id, turn.id, turn.status
///     ├─ router.classify             internal; agentrpc.router.kind, agentrpc.profile (the choice)
///     └─ agent.<profile>             internal; agentrpc.profile (one per agent that ran, handoffs included)
///        ├─ llm.completion           client; gen_ai.system, gen_ai.request.model, gen_ai.usage.*
///        └─ tool.<name>              client; tool.name, tool.call_id, tool.outcome
///
/// The `llm` router's own model call is an `llm.completion` under `router.classify`.
enum SpanName {
    static let turn = "chat.turn"
    static let routerClassify = "router.classify"
    static let llmCompletion = "llm.completion"
    /// A `session/compact` outside any turn.
    static let compaction = "session.compact"

    /// `agent.<profile>`.
    static func agent(_ profile: String) -> String { "agent.\(profile)" }

    /// `tool.<name>`.
    static func tool(_ name: String) -> String { "tool.\(name)" }
}

/// Attribute keys. Model-call keys follow the OpenTelemetry GenAI semantic
/// conventions (`gen_ai.*`) so generic trace viewers recognise them.
enum SpanAttributeKey {
    /// The session id (`chat.turn`).
    static let sessionID = "session.id"
    /// The turn id (`chat.turn`).
    static let turnID = "turn.id"
    /// How the turn ended (`chat.turn`): `completed`, `finalAnswer`, `cancelled`, `failed`.
    static let turnStatus = "turn.status"
    /// The agent profile (`agent.<profile>`; on `router.classify`, the profile chosen).
    static let profile = "agentrpc.profile"
    /// The router kind, `llm` or `rules` (`router.classify`).
    static let routerKind = "agentrpc.router.kind"
    /// The provider, e.g. `openai`, `anthropic`, `scripted` (`llm.completion`).
    static let system = "gen_ai.system"
    /// The model id sent to the provider (`llm.completion`).
    static let requestModel = "gen_ai.request.model"
    /// Prompt tokens (`llm.completion`; the turn total on `chat.turn`).
    static let inputTokens = "gen_ai.usage.input_tokens"
    /// Completion tokens (`llm.completion`; the turn total on `chat.turn`).
    static let outputTokens = "gen_ai.usage.output_tokens"
    /// Prompt tokens served from the provider's cache, when it reports them.
    static let cachedInputTokens = "gen_ai.usage.cached_input_tokens"
    /// Reasoning tokens, when the provider reports them.
    static let reasoningTokens = "gen_ai.usage.reasoning_tokens"
    /// The tool's name (`tool.<name>`).
    static let toolName = "tool.name"
    /// The model's call id (`tool.<name>`).
    static let toolCallID = "tool.call_id"
    /// `ok`, `failed`, `denied` or `conflict` (`tool.<name>`), as in the transcript.
    static let toolOutcome = "tool.outcome"

    // Payloads: user and model content. Dropped unless the tracer includes payloads.

    /// The input text of the turn or the request sent to the model.
    static let prompt = "gen_ai.prompt"
    /// The model's response text.
    static let completion = "gen_ai.completion"
    /// The tool call's arguments as JSON text.
    static let toolArguments = "tool.arguments"
    /// The tool's output.
    static let toolOutput = "tool.output"

    /// Keys whose values are content rather than metadata; see `Tracer.includesPayloads`.
    static let payloadKeys: Set<String> = [prompt, completion, toolArguments, toolOutput]
}

extension Tracer {
    /// The root span of a turn.
    func startTurnSpan(sessionID: String, turnID: String) -> ActiveSpan {
        startSpan(
            name: SpanName.turn, parent: nil, kind: .internal,
            attributes: [SpanAttributeKey.sessionID: .string(sessionID), SpanAttributeKey.turnID: .string(turnID)])
    }

    /// The root span of a `session/compact`: its summary request hangs under it.
    func startCompactionSpan(sessionID: String) -> ActiveSpan {
        startSpan(name: SpanName.compaction, parent: nil, kind: .internal, attributes: [SpanAttributeKey.sessionID: .string(sessionID)])
    }

    /// The router's decision; set `agentrpc.profile` on it once the choice is made.
    func startRouterSpan(parent: SpanContext, routerKind: String) -> ActiveSpan {
        startSpan(
            name: SpanName.routerClassify, parent: parent, kind: .internal,
            attributes: [SpanAttributeKey.routerKind: .string(routerKind)])
    }

    /// One agent's share of a turn; a handoff ends it and starts the next agent's.
    func startAgentSpan(profile: String, parent: SpanContext) -> ActiveSpan {
        startSpan(
            name: SpanName.agent(profile), parent: parent, kind: .internal,
            attributes: [SpanAttributeKey.profile: .string(profile)])
    }

    /// One model round trip (retries included).
    func startCompletionSpan(provider: String, model: String, parent: SpanContext) -> ActiveSpan {
        startSpan(
            name: SpanName.llmCompletion, parent: parent, kind: .client,
            attributes: [SpanAttributeKey.system: .string(provider), SpanAttributeKey.requestModel: .string(model)])
    }

    /// One tool call, from the model's request to its outcome.
    func startToolSpan(name: String, callID: String, parent: SpanContext) -> ActiveSpan {
        startSpan(
            name: SpanName.tool(name), parent: parent, kind: .client,
            attributes: [SpanAttributeKey.toolName: .string(name), SpanAttributeKey.toolCallID: .string(callID)])
    }
}

extension ActiveSpan {
    /// Sets the `gen_ai.usage.*` attributes the provider reported (none for a count it did not).
    func recordUsage(_ usage: Usage) {
        var attributes: [String: SpanValue] = [:]
        if let input = usage.inputTokens { attributes[SpanAttributeKey.inputTokens] = .int(input) }
        if let output = usage.outputTokens { attributes[SpanAttributeKey.outputTokens] = .int(output) }
        if let cached = usage.cachedInputTokens { attributes[SpanAttributeKey.cachedInputTokens] = .int(cached) }
        if let reasoning = usage.reasoningTokens { attributes[SpanAttributeKey.reasoningTokens] = .int(reasoning) }
        if !attributes.isEmpty { setAttributes(attributes) }
    }

    /// Sets `tool.outcome`; `failed` and `conflict` also mark the span as an error.
    /// A denial is the user's decision, not a fault, so it leaves the status ok.
    func recordToolOutcome(_ outcome: ToolOutcome) {
        setAttribute(SpanAttributeKey.toolOutcome, .string(outcome.rawValue))
        switch outcome {
        case .ok, .denied: break
        case .failed, .conflict: recordError("tool outcome: \(outcome.rawValue)")
        }
    }
}
