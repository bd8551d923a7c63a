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
public struct SessionEventParams: Codable, Sendable, Hashable {
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

/// One event of a session (docs/protocol.md §4): `{"type": ..., fields}`.
public enum SessionEvent: Codable, Sendable, Hashable, JSONSchemaProviding {
    case turnStarted(input: TurnInput)
    case profileActivated(profile: String, previous: String?)
    case requestStarted(roundTrip: Int, profile: String, provider: String, model: String)
    case textDelta(String)
    case reasoningDelta(String)
    case toolCallStarted(callId: String, name: String, arguments: JSONValue)
    case confirmationRequested(callId: String, name: String, arguments: JSONValue, reason: String?)
    case confirmationResolved(callId: String, decision: ConfirmationDecision, source: ConfirmationSource)
    case toolCallFinished(callId: String, name: String, outcome: ToolOutcome, content: JSONValue)
    case entryAppended(TranscriptEntry)
    case propertiesChanged(set: [String: JSONValue], removed: [String])
    case hookFired(hook: HookName, profile: String)
    case usage(Usage)
    case schemaWarnings([SchemaWarning])
    case contextDiagnostics([ContextDiagnostic])
    /// `firstChangedEntry`: the id of the first transcript entry whose message changed, if any.
    case cacheInvalidated(reason: CacheInvalidationReason, firstChangedEntry: String?)
    case retrying(attempt: Int, afterSeconds: Double, error: RPCError)
    /// `stopReason`: set on a completed turn whose reply did not end normally
    /// (`maxTokens`, `contentFilter`, `refusal`), as in its result; absent otherwise.
    case turnEnded(status: TurnStatus, undo: UndoOutcome, error: RPCError?, stopReason: StopReason? = nil)
    /// `session/steer` input reached the transcript as the prompt entry `entryId`.
    case steeringApplied(entryId: String, input: TurnInput)
    /// The standing approval rules changed; `rules` is the whole new list.
    case approvalRulesChanged(rules: [ApprovalRule])

    /// The event's `type` member.
    public var type: String {
        switch self {
        case .turnStarted: return "turnStarted"
        case .profileActivated: return "profileActivated"
        case .requestStarted: return "requestStarted"
        case .textDelta: return "textDelta"
        case .reasoningDelta: return "reasoningDelta"
        case .toolCallStarted: return "toolCallStarted"
        case .confirmationRequested: return "confirmationRequested"
        case .confirmationResolved: return "confirmationResolved"
        case .toolCallFinished: return "toolCallFinished"
        case .entryAppended: return "entryAppended"
        case .propertiesChanged: return "propertiesChanged"
        case .hookFired: return "hookFired"
        case .usage: return "usage"
        case .schemaWarnings: return "schemaWarnings"
        case .contextDiagnostics: return "contextDiagnostics"
        case .cacheInvalidated: return "cacheInvalidated"
        case .retrying: return "retrying"
        case .turnEnded: return "turnEnded"
        case .steeringApplied: return "steeringApplied"
        case .approvalRulesChanged: return "approvalRulesChanged"
        }
    }

    /// The wire form, built directly without an encoder (hot path: text deltas).
    public var json: JSONValue {
        switch self {
        case .textDelta(let d):
            return .object(["type": "textDelta", "delta": .string(d)])
        case .reasoningDelta(let d):
            return .object(["type": "reasoningDelta", "delta": .string(d)])
        case .turnStarted(let input):
            return .object(["type": "turnStarted", "input": input.json])
        case .profileActivated(let profile, let previous):
            var o: [String: JSONValue] = ["type": "profileActivated", "profile": .string(profile)]
            if let previous { o["previous"] = .string(previous) }
            return .object(o)
        case .requestStarted(let roundTrip, let profile, let provider, let model):
            return .object([
                "type": "requestStarted", "roundTrip": .int(roundTrip), "profile": .string(profile),
                "provider": .string(provider), "model": .string(model),
            ])
        case .toolCallStarted(let callId, let name, let arguments):
            return .object(["type": "toolCallStarted", "callId": .string(callId), "name": .string(name), "arguments": arguments])
        case .confirmationRequested(let callId, let name, let arguments, let reason):
            var o: [String: JSONValue] = [
                "type": "confirmationRequested", "callId": .string(callId), "name": .string(name), "arguments": arguments,
            ]
            if let reason { o["reason"] = .string(reason) }
            return .object(o)
        case .confirmationResolved(let callId, let decision, let source):
            return .object([
                "type": "confirmationResolved", "callId": .string(callId), "decision": .string(decision.rawValue),
                "source": .string(source.rawValue),
            ])
        case .toolCallFinished(let callId, let name, let outcome, let content):
            return .object([
                "type": "toolCallFinished", "callId": .string(callId), "name": .string(name),
                "outcome": .string(outcome.rawValue), "content": content,
            ])
        case .entryAppended(let entry):
            return .object(["type": "entryAppended", "entry": entry.json])
        case .propertiesChanged(let set, let removed):
            return .object(["type": "propertiesChanged", "set": .object(set), "removed": .array(removed.map { .string($0) })])
        case .hookFired(let hook, let profile):
            return .object(["type": "hookFired", "hook": .string(hook.rawValue), "profile": .string(profile)])
        case .usage(let usage):
            var o = usage.jsonMembers
            o["type"] = "usage"
            return .object(o)
        case .schemaWarnings(let warnings):
            return .object(["type": "schemaWarnings", "warnings": .array(warnings.map(\.json))])
        case .contextDiagnostics(let diagnostics):
            return .object(["type": "contextDiagnostics", "diagnostics": .array(diagnostics.map(\.json))])
        case .cacheInvalidated(let reason, let first):
            var o: [String: JSONValue] = ["type": "cacheInvalidated", "reason": .string(reason.rawValue)]
            if let first { o["firstChangedEntry"] = .string(first) }
            return .object(o)
        case .retrying(let attempt, let afterSeconds, let error):
            return .object(["type": "retrying", "attempt": .int(attempt), "afterSeconds": .double(afterSeconds), "error": error.json])
        case .turnEnded(let status, let undo, let error, let stopReason):
            var o: [String: JSONValue] = ["type": "turnEnded", "status": .string(status.rawValue), "undo": .string(undo.rawValue)]
            if let error { o["error"] = error.json }
            if let stopReason { o["stopReason"] = .string(stopReason.rawValue) }
            return .object(o)
        case .steeringApplied(let entryId, let input):
            return .object(["type": "steeringApplied", "entryId": .string(entryId), "input": input.json])
        case .approvalRulesChanged(let rules):
            return .object(["type": "approvalRulesChanged", "rules": .array(rules.map(\.json))])
        }
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case type, input, profile, previous, roundTrip, provider, model, delta, callId, name, arguments, reason
        case decision, source, outcome, content, entry, set, removed, hook
        case inputTokens, outputTokens, cachedInputTokens, reasoningTokens
        case warnings, diagnostics, firstChangedEntry, attempt, afterSeconds, error, status, undo, stopReason
        case entryId, rules
    }

    /// Clients and tests read events back; the server never decodes them.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func str(_ k: CodingKeys) throws -> String { try c.decode(String.self, forKey: k) }
        func optStr(_ k: CodingKeys) throws -> String? { try c.decodeIfPresent(String.self, forKey: k) }
        func value(_ k: CodingKeys) throws -> JSONValue { try c.decodeNil(forKey: k) ? .null : c.decode(JSONValue.self, forKey: k) }
        let type = try str(.type)
        switch type {
        case "turnStarted": self = .turnStarted(input: try c.decode(TurnInput.self, forKey: .input))
        case "profileActivated": self = .profileActivated(profile: try str(.profile), previous: try optStr(.previous))
        case "requestStarted":
            self = .requestStarted(
                roundTrip: try c.decode(Int.self, forKey: .roundTrip), profile: try str(.profile),
                provider: try str(.provider), model: try str(.model))
        case "textDelta": self = .textDelta(try str(.delta))
        case "reasoningDelta": self = .reasoningDelta(try str(.delta))
        case "toolCallStarted": self = .toolCallStarted(callId: try str(.callId), name: try str(.name), arguments: try value(.arguments))
        case "confirmationRequested":
            self = .confirmationRequested(callId: try str(.callId), name: try str(.name), arguments: try value(.arguments), reason: try optStr(.reason))
        case "confirmationResolved":
            self = .confirmationResolved(
                callId: try str(.callId), decision: try c.decode(ConfirmationDecision.self, forKey: .decision),
                source: try c.decode(ConfirmationSource.self, forKey: .source))
        case "toolCallFinished":
            self = .toolCallFinished(
                callId: try str(.callId), name: try str(.name), outcome: try c.decode(ToolOutcome.self, forKey: .outcome),
                content: try value(.content))
        case "entryAppended": self = .entryAppended(try c.decode(TranscriptEntry.self, forKey: .entry))
        case "propertiesChanged":
            self = .propertiesChanged(set: try c.decode([String: JSONValue].self, forKey: .set), removed: try c.decode([String].self, forKey: .removed))
        case "hookFired": self = .hookFired(hook: try c.decode(HookName.self, forKey: .hook), profile: try str(.profile))
        case "usage":
            self = .usage(Usage(
                inputTokens: try c.decodeIfPresent(Int.self, forKey: .inputTokens),
                outputTokens: try c.decodeIfPresent(Int.self, forKey: .outputTokens),
                cachedInputTokens: try c.decodeIfPresent(Int.self, forKey: .cachedInputTokens),
                reasoningTokens: try c.decodeIfPresent(Int.self, forKey: .reasoningTokens)))
        case "schemaWarnings": self = .schemaWarnings(try c.decode([SchemaWarning].self, forKey: .warnings))
        case "contextDiagnostics": self = .contextDiagnostics(try c.decode([ContextDiagnostic].self, forKey: .diagnostics))
        case "cacheInvalidated":
            self = .cacheInvalidated(
                reason: try c.decode(CacheInvalidationReason.self, forKey: .reason), firstChangedEntry: try optStr(.firstChangedEntry))
        case "retrying":
            self = .retrying(
                attempt: try c.decode(Int.self, forKey: .attempt), afterSeconds: try c.decode(Double.self, forKey: .afterSeconds),
                error: try c.decode(ErrorObject.self, forKey: .error).rpcError)
        case "turnEnded":
            self = .turnEnded(
                status: try c.decode(TurnStatus.self, forKey: .status), undo: try c.decode(UndoOutcome.self, forKey: .undo),
                error: try c.decodeIfPresent(ErrorObject.self, forKey: .error)?.rpcError,
                stopReason: try c.decodeIfPresent(StopReason.self, forKey: .stopReason))
        case "steeringApplied":
            self = .steeringApplied(entryId: try str(.entryId), input: try c.decode(TurnInput.self, forKey: .input))
        case "approvalRulesChanged": self = .approvalRulesChanged(rules: try c.decode([ApprovalRule].self, forKey: .rules))
        default:
            throw DecodingError.dataCorruptedError(forKey: .type, in: c, debugDescription: "unknown event type '\(type)'")
        }
    }

    public static var jsonSchema: JSONValue {
        let s = WireSchema.string
        let int = WireSchema.integer
        let any = WireSchema.any
        let error = WireSchema.ref(ErrorObject.self)
        func event(_ type: String, _ props: [String: JSONValue], optional: [String: JSONValue] = [:]) -> JSONValue {
            var all = props.merging(optional) { a, _ in a }
            all["type"] = WireSchema.const(type)
            return WireSchema.object(all, required: ["type"] + props.keys.sorted())
        }
        return WireSchema.oneOf([
            event("turnStarted", ["input": WireSchema.ref(TurnInput.self)]),
            event("profileActivated", ["profile": s], optional: ["previous": s]),
            event("requestStarted", ["roundTrip": int, "profile": s, "provider": s, "model": s]),
            event("textDelta", ["delta": s]),
            event("reasoningDelta", ["delta": s]),
            event("toolCallStarted", ["callId": s, "name": s, "arguments": any]),
            event("confirmationRequested", ["callId": s, "name": s, "arguments": any], optional: ["reason": s]),
            event(
                "confirmationResolved",
                ["callId": s, "decision": WireSchema.ref(ConfirmationDecision.self), "source": WireSchema.ref(ConfirmationSource.self)]),
            event("toolCallFinished", ["callId": s, "name": s, "outcome": WireSchema.ref(ToolOutcome.self), "content": any]),
            event("entryAppended", ["entry": WireSchema.ref(TranscriptEntry.self)]),
            event("propertiesChanged", ["set": WireSchema.map(any), "removed": WireSchema.array(s)]),
            event("hookFired", ["hook": WireSchema.ref(HookName.self), "profile": s]),
            event("usage", [:], optional: ["inputTokens": int, "outputTokens": int, "cachedInputTokens": int, "reasoningTokens": int]),
            event("schemaWarnings", ["warnings": WireSchema.array(WireSchema.ref(SchemaWarning.self))]),
            event("contextDiagnostics", ["diagnostics": WireSchema.array(WireSchema.ref(ContextDiagnostic.self))]),
            event("cacheInvalidated", ["reason": WireSchema.ref(CacheInvalidationReason.self)], optional: ["firstChangedEntry": s]),
            event("retrying", ["attempt": int, "afterSeconds": WireSchema.number, "error": error]),
            event(
                "turnEnded", ["status": WireSchema.ref(TurnStatus.self), "undo": WireSchema.ref(UndoOutcome.self)],
                optional: ["error": error, "stopReason": WireSchema.ref(StopReason.self)]),
            event("steeringApplied", ["entryId": s, "input": WireSchema.ref(TurnInput.self)]),
            event("approvalRulesChanged", ["rules": WireSchema.array(WireSchema.ref(ApprovalRule.self))]),
        ])
    }

    public static var jsonSchemaDependencies: [any Decodable.Type] {
        [
            TurnInput.self, ConfirmationDecision.self, ConfirmationSource.self, ToolOutcome.self, TranscriptEntry.self,
            HookName.self, SchemaWarning.self, ContextDiagnostic.self, CacheInvalidationReason.self, ErrorObject.self,
            TurnStatus.self, UndoOutcome.self, StopReason.self, ApprovalRule.self,
        ]
    }
}
