// Server → client notifications: `session/event`, `trace/span`, and the
// `$/cancelRequest` notification that both sides send.

/// `session/event`: one observable step of a session, numbered by `seq`.
public enum SessionEventNotification: RPCNotification {
    public static let name = "session/event"
    public static let direction = MethodDirection.serverToClient
    public typealias Params = SessionEventParams
}

/// `trace/span`: one finished span as OTLP/JSON, for clients that declared `traces`.
public enum TraceSpanNotification: RPCNotification {
    public static let name = "trace/span"
    public static let direction = MethodDirection.serverToClient
    public typealias Params = TraceSpanParams
}

/// `$/cancelRequest`: withdraws a request. Sent by the client (a `session/send`
/// answers `-32800`) and by the server (its own `tool/call`, `confirmation/request`).
public enum CancelRequestNotification: RPCNotification {
    public static let name = "$/cancelRequest"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = CancelRequestParams
    /// Handled by the dispatcher itself, before any lifecycle check, when it is a notification.
    public static let lifecycle = MethodLifecycle.runningAndAfterShutdown
}

/// `trace/span` params.
public struct TraceSpanParams: Codable, Sendable, Hashable {
    /// An OTLP/JSON span object.
    public var span: JSONValue
    public init(span: JSONValue) { self.span = span }
}

/// `$/cancelRequest` params.
public struct CancelRequestParams: Codable, Sendable, Hashable {
    public var id: RequestID
    public init(id: RequestID) { self.id = id }
}

extension RequestID: Codable, JSONSchemaProviding {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let i = try? c.decode(Int.self) {
            self = .int(i)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "a request id is an integer or a string")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .int(let i): try c.encode(i)
        case .string(let s): try c.encode(s)
        }
    }

    public static var jsonSchema: JSONValue { ["type": ["integer", "string"]] }
}

/// `session/event` params. `seq` rises by one per session, so gaps are detectable.
public struct SessionEventParams: Codable, Sendable, Hashable, JSONValueRepresentable {
    public var sessionId: String
    public var turnId: String?
    public var seq: Int
    public var event: SessionEvent

    public init(sessionId: String, turnId: String? = nil, seq: Int, event: SessionEvent) {
        self.sessionId = sessionId
        self.turnId = turnId
        self.seq = seq
        self.event = event
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }

    /// Built directly: the engine sends these at text-delta rate.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["sessionId": .string(sessionId), "seq": .int(seq), "event": event.json]
        if let turnId { o["turnId"] = .string(turnId) }
        return .object(o)
    }
}

extension SessionEventParams {
    /// The params of any event, appended to `out` byte for byte as
    /// `json.serialize(into:)` writes them (members in sorted order), without
    /// building their object: `writeEvent` appends the event's own object,
    /// `tail` is `tail(sessionId:turnId:)`, the same for every event of a turn.
    public static func write(seq: Int, tail: [UInt8], into out: inout [UInt8], event writeEvent: (inout JSONStage) -> Void) {
        JSONStage.write(into: &out) { stage in
            stage.literal(#"{"event":"#)
            writeEvent(&stage)
            stage.literal(#","seq":"#)
            stage.int(seq)
            stage.bytes(tail)
        }
    }

    /// The params of a `textDelta` (or `reasoningDelta`) event, as `write`
    /// does it: the engine sends one per streamed token.
    /// The literals around the delta's text are written whole (five appends a
    /// delta, where `write` with a closure made twelve).
    public static func writeDelta(_ delta: String, reasoning: Bool, seq: Int, tail: [UInt8], into out: inout [UInt8]) {
        JSONTextWriter.appendLiteral(deltaOpening, into: &out)
        JSONTextWriter.writeStringContents(delta, into: &out)
        JSONTextWriter.appendLiteral(deltaClosing(reasoning: reasoning), into: &out)
        JSONTextWriter.writeInt(seq, into: &out)
        out.append(contentsOf: tail)
    }

    /// A delta event's params up to its text, and from its text to `seq`'s
    /// value: what `writeDelta` and `DeltaFrameWriter` write around the text.
    static let deltaOpening: StaticString = #"{"event":{"delta":""#
    static func deltaClosing(reasoning: Bool) -> StaticString {
        reasoning ? #"","type":"reasoningDelta"},"seq":"# : #"","type":"textDelta"},"seq":"#
    }

    /// What follows `seq` in an event's params: `sessionId`, `turnId`, the closing brace.
    public static func tail(sessionId: String, turnId: String?) -> [UInt8] {
        var out: [UInt8] = []
        JSONTextWriter.appendLiteral(#","sessionId":"#, into: &out)
        JSONTextWriter.writeString(sessionId, into: &out)
        if let turnId {
            JSONTextWriter.appendLiteral(#","turnId":"#, into: &out)
            JSONTextWriter.writeString(turnId, into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}

/// How a turn ended.
public enum TurnStatus: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case completed
    case failed
    case cancelled
}

/// What happened to the turn's undo transaction.
public enum UndoOutcome: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case committed
    case rolledBack
    /// Nothing was recorded.
    case none
}

/// Who resolved a confirmation.
public enum ConfirmationSource: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case client
    case timeout
    case cancel
    /// A guard decided without asking.
    case policy
    /// A standing approval rule (`approveForSession`) approved without asking.
    case rule
}

/// Why a request's cacheable prefix differs from the previous one.
public enum CacheInvalidationReason: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case instructionsChanged
    case toolsChanged
    case historyRewritten
    case modelChanged
}


// MARK: - Session events

extension SessionEvent {
    /// Every kind of event, once, in the order of the schema's `oneOf` and the
    /// docs table. Adding an event: its payload type below, a line here, and the
    /// code that emits it.
    public static let registry: [any SessionEventPayload.Type] = [
        TurnStarted.self,
        ProfileActivated.self,
        RequestStarted.self,
        TextDelta.self,
        ReasoningDelta.self,
        ToolCallStarted.self,
        ToolProgress.self,
        ConfirmationRequested.self,
        ConfirmationResolved.self,
        ToolCallFinished.self,
        EntryAppended.self,
        PropertiesChanged.self,
        HookFired.self,
        Usage.self,
        SchemaWarnings.self,
        ContextDiagnostics.self,
        CacheInvalidated.self,
        Retrying.self,
        TurnEnded.self,
        SteeringApplied.self,
        ApprovalRulesChanged.self,
        MCPServerStatusChanged.self,
        PlanUpdated.self,
        ContextCompacted.self,
    ]

    /// A turn began.
    public struct TurnStarted: SessionEventPayload {
        public static let type = "turnStarted"
        public var input: TurnInput
        public init(input: TurnInput) { self.input = input }
        /// Built directly: sent in every turn.
        public var eventJSON: JSONValue { ["input": input.json, "type": .string(Self.type)] }
        public func writeEventJSON(into stage: inout JSONStage) {
            JSONObjectWriter.write(into: &stage) { o in
                o.member("input") { input.writeJSON(into: &$0) }
                o.string("type", Self.type)
            }
        }
    }

    /// The active profile changed; `previous` is absent at the session's first request.
    public struct ProfileActivated: SessionEventPayload {
        public static let type = "profileActivated"
        public var profile: String
        public var previous: String?
        public init(profile: String, previous: String?) {
            self.profile = profile
            self.previous = previous
        }
    }

    /// A model request is sent.
    public struct RequestStarted: SessionEventPayload {
        public static let type = "requestStarted"
        public var roundTrip: Int
        public var profile: String
        public var provider: String
        public var model: String
        /// The model's context window in tokens, when it is known (the model
        /// configuration's `contextWindowTokens`).
        public var contextWindowTokens: Int?
        public init(roundTrip: Int, profile: String, provider: String, model: String, contextWindowTokens: Int? = nil) {
            self.roundTrip = roundTrip
            self.profile = profile
            self.provider = provider
            self.model = model
            self.contextWindowTokens = contextWindowTokens
        }
        /// Built directly: sent in every round trip.
        public var eventJSON: JSONValue { members.object }
        /// `members` written in sorted key order, without building them.
        public func writeEventJSON(into stage: inout JSONStage) {
            JSONObjectWriter.write(into: &stage) { o in
                o.int("contextWindowTokens", contextWindowTokens)
                o.string("model", model)
                o.string("profile", profile)
                o.string("provider", provider)
                o.int("roundTrip", roundTrip)
                o.string("type", Self.type)
            }
        }
        private var members: JSONMembers {
            var o: [(key: String, value: JSONValue)] = [
                ("type", "requestStarted"), ("roundTrip", .int(roundTrip)), ("profile", .string(profile)),
                ("provider", .string(provider)), ("model", .string(model)),
            ]
            if let contextWindowTokens { o.append(("contextWindowTokens", .int(contextWindowTokens))) }
            return JSONMembers(o)
        }
    }

    /// Reply text streamed.
    public struct TextDelta: SessionEventPayload {
        public static let type = "textDelta"
        public var delta: String
        public init(delta: String) { self.delta = delta }
        /// Built directly: sent once per streamed token.
        public var eventJSON: JSONValue { .object(["type": "textDelta", "delta": .string(delta)]) }
    }

    /// Reasoning streamed.
    public struct ReasoningDelta: SessionEventPayload {
        public static let type = "reasoningDelta"
        public var delta: String
        public init(delta: String) { self.delta = delta }
        /// Built directly: sent once per streamed token.
        public var eventJSON: JSONValue { .object(["type": "reasoningDelta", "delta": .string(delta)]) }
    }

    /// A tool call is about to be handled.
    public struct ToolCallStarted: SessionEventPayload {
        public static let type = "toolCallStarted"
        public var callId: String
        public var name: String
        public var arguments: JSONValue
        /// Which executor runs the call: absent for the client's `tool/call`, `{mcp: server}` for an MCP tool.
        public var source: ToolSource?
        public init(callId: String, name: String, arguments: JSONValue, source: ToolSource? = nil) {
            self.callId = callId
            self.name = name
            self.arguments = arguments
            self.source = source
        }
        /// Built directly: sent in every tool round trip.
        public var eventJSON: JSONValue { members.object }
        /// `members` written in sorted key order, without building them.
        public func writeEventJSON(into stage: inout JSONStage) {
            JSONObjectWriter.write(into: &stage) { o in
                o.value("arguments", arguments)
                o.string("callId", callId)
                o.string("name", name)
                o.value("source", source?.json)
                o.string("type", Self.type)
            }
        }
        private var members: JSONMembers {
            var o: [(key: String, value: JSONValue)] = [("type", "toolCallStarted"), ("callId", .string(callId)), ("name", .string(name)), ("arguments", arguments)]
            if let source { o.append(("source", source.json)) }
            return JSONMembers(o)
        }
    }

    /// Built-in flow: a call waits for `session/confirm`.
    public struct ConfirmationRequested: SessionEventPayload {
        public static let type = "confirmationRequested"
        public var callId: String
        public var name: String
        public var arguments: JSONValue
        public var reason: String?
        /// Which time this call's confirmation is asked (a parked turn
        /// continued asks again: 2, and so on); absent the first time.
        public var attempt: Int?
        public init(callId: String, name: String, arguments: JSONValue, reason: String?, attempt: Int? = nil) {
            self.callId = callId
            self.name = name
            self.arguments = arguments
            self.reason = reason
            self.attempt = attempt
        }
    }

    /// A confirmation was settled.
    public struct ConfirmationResolved: SessionEventPayload {
        public static let type = "confirmationResolved"
        public var callId: String
        public var decision: ConfirmationDecision
        public var source: ConfirmationSource
        public init(callId: String, decision: ConfirmationDecision, source: ConfirmationSource) {
            self.callId = callId
            self.decision = decision
            self.source = source
        }
    }

    /// A running call reported progress: an MCP server's `notifications/progress`
    /// or the client's `tool/progress`. At most ~10 a second per call (a faster
    /// stream is coalesced: the latest value goes out), never after `toolCallFinished`.
    public struct ToolProgress: SessionEventPayload {
        public static let type = "toolProgress"
        public var callId: String
        public var progress: Double
        public var total: Double?
        public var message: String?
        public init(callId: String, progress: Double, total: Double? = nil, message: String? = nil) {
            self.callId = callId
            self.progress = progress
            self.total = total
            self.message = message
        }
    }

    /// A call's output was recorded.
    public struct ToolCallFinished: SessionEventPayload {
        public static let type = "toolCallFinished"
        public var callId: String
        public var name: String
        public var outcome: ToolOutcome
        public var content: JSONValue
        /// As on `toolCallStarted`.
        public var source: ToolSource?
        /// The images and audio the tool returned, taken out of `content`
        /// (where a note stands for each); the `toolOutput` entry names them.
        public var media: [MediaContent]?
        public init(callId: String, name: String, outcome: ToolOutcome, content: JSONValue, source: ToolSource? = nil, media: [MediaContent]? = nil) {
            self.callId = callId
            self.name = name
            self.outcome = outcome
            self.content = content
            self.source = source
            self.media = media
        }
        /// Built directly: sent in every tool round trip.
        public var eventJSON: JSONValue { members.object }
        /// `members` written in sorted key order, without building them.
        public func writeEventJSON(into stage: inout JSONStage) {
            JSONObjectWriter.write(into: &stage) { o in
                o.string("callId", callId)
                o.value("content", content)
                o.value("media", media.map { .array($0.map(\.json)) })
                o.string("name", name)
                o.string("outcome", outcome.rawValue)
                o.value("source", source?.json)
                o.string("type", Self.type)
            }
        }
        private var members: JSONMembers {
            var o: [(key: String, value: JSONValue)] = [
                ("type", "toolCallFinished"), ("callId", .string(callId)), ("name", .string(name)),
                ("outcome", .string(outcome.rawValue)), ("content", content),
            ]
            if let source { o.append(("source", source.json)) }
            if let media { o.append(("media", .array(media.map(\.json)))) }
            return JSONMembers(o)
        }
    }

    /// An entry was added to the transcript.
    public struct EntryAppended: SessionEventPayload {
        public static let type = "entryAppended"
        public var entry: TranscriptEntry
        public init(entry: TranscriptEntry) { self.entry = entry }
        /// Built directly: sent for every entry.
        public var eventJSON: JSONValue { .object(["type": "entryAppended", "entry": entry.json]) }
        public func writeEventJSON(into stage: inout JSONStage) {
            Self.write(into: &stage) { entry.serialize(into: &$0) }
        }
        /// The event's object around the entry's JSON text, which `writeEntry`
        /// writes (the engine passes the text its journal line already holds).
        package static func write(into stage: inout JSONStage, writeEntry: (inout JSONStage) -> Void) {
            stage.literal(#"{"entry":"#)
            writeEntry(&stage)
            stage.literal(#","type":"entryAppended"}"#)
        }
    }

    /// Session properties changed.
    public struct PropertiesChanged: SessionEventPayload {
        public static let type = "propertiesChanged"
        public var set: [String: JSONValue]
        public var removed: [String]
        public init(set: [String: JSONValue], removed: [String]) {
            self.set = set
            self.removed = removed
        }
    }

    /// A hook's actions ran.
    public struct HookFired: SessionEventPayload {
        public static let type = "hookFired"
        public var hook: HookName
        public var profile: String
        public init(hook: HookName, profile: String) {
            self.hook = hook
            self.profile = profile
        }
    }

    /// Tool schemas the provider could not take as they are.
    public struct SchemaWarnings: SessionEventPayload {
        public static let type = "schemaWarnings"
        public var warnings: [SchemaWarning]
        public init(warnings: [SchemaWarning]) { self.warnings = warnings }
    }

    /// Something the turn went on without (a failed context source, the router, a model option).
    public struct ContextDiagnostics: SessionEventPayload {
        public static let type = "contextDiagnostics"
        public var diagnostics: [ContextDiagnostic]
        public init(diagnostics: [ContextDiagnostic]) { self.diagnostics = diagnostics }
    }

    /// The request's cacheable prefix differs from the previous one's.
    public struct CacheInvalidated: SessionEventPayload {
        public static let type = "cacheInvalidated"
        public var reason: CacheInvalidationReason
        /// The id of the first transcript entry whose message changed, if any.
        public var firstChangedEntry: String?
        public init(reason: CacheInvalidationReason, firstChangedEntry: String?) {
            self.reason = reason
            self.firstChangedEntry = firstChangedEntry
        }
    }

    /// A transient provider error will be retried.
    public struct Retrying: SessionEventPayload {
        public static let type = "retrying"
        public var attempt: Int
        public var afterSeconds: Double
        public var error: RPCError
        public init(attempt: Int, afterSeconds: Double, error: RPCError) {
            self.attempt = attempt
            self.afterSeconds = afterSeconds
            self.error = error
        }
    }

    /// The turn ended.
    public struct TurnEnded: SessionEventPayload {
        public static let type = "turnEnded"
        public var status: TurnStatus
        public var undo: UndoOutcome
        public var error: RPCError?
        /// Set on a completed turn whose reply did not end normally (`maxTokens`,
        /// `contentFilter`, `refusal`), as in its result; absent otherwise.
        public var stopReason: StopReason?
        public init(status: TurnStatus, undo: UndoOutcome, error: RPCError?, stopReason: StopReason? = nil) {
            self.status = status
            self.undo = undo
            self.error = error
            self.stopReason = stopReason
        }
        /// Built directly: sent in every turn.
        public var eventJSON: JSONValue {
            var o: [String: JSONValue] = ["type": .string(Self.type), "status": .string(status.rawValue), "undo": .string(undo.rawValue)]
            if let error { o["error"] = error.json }
            if let stopReason { o["stopReason"] = .string(stopReason.rawValue) }
            return .object(o)
        }
        public func writeEventJSON(into stage: inout JSONStage) {
            JSONObjectWriter.write(into: &stage) { o in
                o.value("error", error?.json)
                o.string("status", status.rawValue)
                o.string("stopReason", stopReason?.rawValue)
                o.string("type", Self.type)
                o.string("undo", undo.rawValue)
            }
        }
    }

    /// `session/steer` input reached the transcript as the prompt entry `entryId`.
    public struct SteeringApplied: SessionEventPayload {
        public static let type = "steeringApplied"
        public var entryId: String
        public var input: TurnInput
        public init(entryId: String, input: TurnInput) {
            self.entryId = entryId
            self.input = input
        }
    }

    /// The standing approval rules changed; `rules` is the whole new list.
    public struct ApprovalRulesChanged: SessionEventPayload {
        public static let type = "approvalRulesChanged"
        public var rules: [ApprovalRule]
        public init(rules: [ApprovalRule]) { self.rules = rules }
    }

    /// The model changed the session's plan (`update_plan`): the whole plan as it is now.
    public struct PlanUpdated: SessionEventPayload {
        public static let type = "planUpdated"
        public var entries: [PlanEntry]
        public init(entries: [PlanEntry]) { self.entries = entries }
    }

    /// An MCP server is starting, ready (with the names the model sees), failed or restarting.
    public struct MCPServerStatusChanged: SessionEventPayload {
        public static let type = "mcpServerStatus"
        public var server: String
        public var status: MCPServerStatus
        /// Why it failed or is restarting.
        public var reason: String?
        /// Its last stderr lines, when it failed or is restarting.
        public var stderr: [String]?
        /// With `ready`: its tools as the model sees them.
        public var tools: [String]?
        /// With `ready`: the prompts it lists (`session/getPrompt` fetches one), when it has any.
        public var prompts: [MCPPromptInfo]?
        public init(
            server: String, status: MCPServerStatus, reason: String? = nil, stderr: [String]? = nil, tools: [String]? = nil, prompts: [MCPPromptInfo]? = nil
        ) {
            self.server = server
            self.status = status
            self.reason = reason
            self.stderr = stderr
            self.tools = tools
            self.prompts = prompts
        }
    }
}

extension SessionEvent {
    /// The conversation was compacted: entries before the kept tail replaced by
    /// a `summary` entry (`entryId`), and within a long turn, its oldest tool
    /// outputs elided (`outputsElided`).
    public struct ContextCompacted: SessionEventPayload {
        public static let type = "contextCompacted"
        public var entriesRemoved: Int
        public var tokensBefore: Int
        public var tokensAfter: Int
        public var trigger: CompactionTrigger
        /// The `summary` entry, when entries were summarized.
        public var entryId: String?
        /// Tool outputs of the running turn whose text was replaced by a note.
        public var outputsElided: Int?
        public init(entriesRemoved: Int, tokensBefore: Int, tokensAfter: Int, trigger: CompactionTrigger, entryId: String? = nil, outputsElided: Int? = nil) {
            self.entriesRemoved = entriesRemoved
            self.tokensBefore = tokensBefore
            self.tokensAfter = tokensAfter
            self.trigger = trigger
            self.entryId = entryId
            self.outputsElided = outputsElided
        }
    }
}

/// `usage`: the provider's token counts for a round trip or a side request, inline.
extension Usage: SessionEventPayload {
    public static let type = "usage"
    public var eventJSON: JSONValue {
        var o = jsonMembers
        o["type"] = "usage"
        return .object(o)
    }
    /// Sent in every round trip that reports usage.
    public func writeEventJSON(into stage: inout JSONStage) {
        JSONObjectWriter.write(into: &stage) { o in
            writeMembers(into: &o)
            o.string("type", Self.type)
        }
    }
}

// The engine's spelling of each event, kept from when events were enum cases.
// A new event needs none of these: `emit(SessionEvent(Payload(...)))` works.
extension SessionEvent {
    public static func turnStarted(input: TurnInput) -> SessionEvent { SessionEvent(TurnStarted(input: input)) }
    public static func profileActivated(profile: String, previous: String?) -> SessionEvent {
        SessionEvent(ProfileActivated(profile: profile, previous: previous))
    }
    public static func requestStarted(roundTrip: Int, profile: String, provider: String, model: String, contextWindowTokens: Int? = nil) -> SessionEvent {
        SessionEvent(RequestStarted(roundTrip: roundTrip, profile: profile, provider: provider, model: model, contextWindowTokens: contextWindowTokens))
    }
    public static func textDelta(_ delta: String) -> SessionEvent { SessionEvent(TextDelta(delta: delta)) }
    public static func reasoningDelta(_ delta: String) -> SessionEvent { SessionEvent(ReasoningDelta(delta: delta)) }
    public static func toolCallStarted(callId: String, name: String, arguments: JSONValue, source: ToolSource? = nil) -> SessionEvent {
        SessionEvent(ToolCallStarted(callId: callId, name: name, arguments: arguments, source: source))
    }
    public static func confirmationRequested(callId: String, name: String, arguments: JSONValue, reason: String?, attempt: Int? = nil) -> SessionEvent {
        SessionEvent(ConfirmationRequested(callId: callId, name: name, arguments: arguments, reason: reason, attempt: attempt))
    }
    public static func confirmationResolved(callId: String, decision: ConfirmationDecision, source: ConfirmationSource) -> SessionEvent {
        SessionEvent(ConfirmationResolved(callId: callId, decision: decision, source: source))
    }
    public static func toolCallFinished(
        callId: String, name: String, outcome: ToolOutcome, content: JSONValue, source: ToolSource? = nil, media: [MediaContent]? = nil
    ) -> SessionEvent {
        SessionEvent(ToolCallFinished(callId: callId, name: name, outcome: outcome, content: content, source: source, media: media))
    }
    public static func entryAppended(_ entry: TranscriptEntry) -> SessionEvent { SessionEvent(EntryAppended(entry: entry)) }
    public static func propertiesChanged(set: [String: JSONValue], removed: [String]) -> SessionEvent {
        SessionEvent(PropertiesChanged(set: set, removed: removed))
    }
    public static func hookFired(hook: HookName, profile: String) -> SessionEvent { SessionEvent(HookFired(hook: hook, profile: profile)) }
    public static func usage(_ usage: Usage) -> SessionEvent { SessionEvent(usage) }
    public static func schemaWarnings(_ warnings: [SchemaWarning]) -> SessionEvent { SessionEvent(SchemaWarnings(warnings: warnings)) }
    public static func contextDiagnostics(_ diagnostics: [ContextDiagnostic]) -> SessionEvent {
        SessionEvent(ContextDiagnostics(diagnostics: diagnostics))
    }
    public static func cacheInvalidated(reason: CacheInvalidationReason, firstChangedEntry: String?) -> SessionEvent {
        SessionEvent(CacheInvalidated(reason: reason, firstChangedEntry: firstChangedEntry))
    }
    public static func retrying(attempt: Int, afterSeconds: Double, error: RPCError) -> SessionEvent {
        SessionEvent(Retrying(attempt: attempt, afterSeconds: afterSeconds, error: error))
    }
    public static func turnEnded(status: TurnStatus, undo: UndoOutcome, error: RPCError?, stopReason: StopReason? = nil) -> SessionEvent {
        SessionEvent(TurnEnded(status: status, undo: undo, error: error, stopReason: stopReason))
    }
    public static func steeringApplied(entryId: String, input: TurnInput) -> SessionEvent {
        SessionEvent(SteeringApplied(entryId: entryId, input: input))
    }
    public static func approvalRulesChanged(rules: [ApprovalRule]) -> SessionEvent { SessionEvent(ApprovalRulesChanged(rules: rules)) }
}
