// Client → server `session/*` methods (docs/protocol.md §3) and the values they carry:
// turn input and result, transcript entries and operations, session state.

// MARK: - Methods

/// `session/create`: a new session from a `SessionConfig`.
public enum SessionCreateRequest: RPCMethod {
    public static let name = "session/create"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionConfig
    public typealias Result = SessionHandle
}

/// `session/send`: runs one turn; answered when the turn ends.
public enum SessionSendRequest: RPCMethod {
    public static let name = "session/send"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionSendParams
    public typealias Result = TurnResult
}

/// `session/continue`: goes on with the session's parked turn (its pending
/// requests are sent again) and answers as `session/send` would have.
public enum SessionContinueRequest: RPCMethod {
    public static let name = "session/continue"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionRef
    public typealias Result = TurnResult
}

/// `session/park`: the running turn parks at its next wait for the client (at
/// once when it waits already); answered once it parked or ended otherwise.
public enum SessionParkRequest: RPCMethod {
    public static let name = "session/park"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionRef
    public typealias Result = SessionParkResult
}

/// `session/generate`: a structured-output turn (no tools); the answer must match `schema`.
public enum SessionGenerateRequest: RPCMethod {
    public static let name = "session/generate"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionGenerateParams
    public typealias Result = SessionGenerateResult
}

/// `session/cancel` as a request: cooperative cancel, answered at once.
public enum SessionCancelRequest: RPCMethod {
    public static let name = "session/cancel"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionRef
    public typealias Result = SessionCancelResult
}

/// `session/cancel` as a notification (same name and params, no answer).
public enum SessionCancelNotification: RPCNotification {
    public static let name = "session/cancel"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionRef
}

/// `session/confirm`: answers a pending built-in confirmation.
public enum SessionConfirmRequest: RPCMethod {
    public static let name = "session/confirm"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionConfirmParams
    public typealias Result = SessionConfirmResult
}

/// `session/getState`: a snapshot of the observable session.
public enum SessionGetStateRequest: RPCMethod {
    public static let name = "session/getState"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionRef
    public typealias Result = SessionState
    public static let lifecycle = MethodLifecycle.runningAndAfterShutdown
}

/// `session/getTranscript`: the entries plus the instructions the active profile computes.
public enum SessionGetTranscriptRequest: RPCMethod {
    public static let name = "session/getTranscript"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionRef
    public typealias Result = SessionTranscript
    public static let lifecycle = MethodLifecycle.runningAndAfterShutdown
}

/// `session/getMedia`: an image or audio clip a tool result of the session
/// named (a `toolOutput` entry's `media`), whole, read from the store.
public enum SessionGetMediaRequest: RPCMethod {
    public static let name = "session/getMedia"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionGetMediaParams
    public typealias Result = MediaContent
    public static let lifecycle = MethodLifecycle.runningAndAfterShutdown
}

public struct SessionGetMediaParams: Codable, Sendable, Hashable {
    public var sessionId: String
    /// The `sha256` of one of the session's `MediaReference`s.
    public var sha256: String
    public init(sessionId: String, sha256: String) {
        self.sessionId = sessionId
        self.sha256 = sha256
    }
}

/// `session/mutateTranscript`: all-or-nothing edits of the history.
public enum SessionMutateTranscriptRequest: RPCMethod {
    public static let name = "session/mutateTranscript"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = MutateTranscriptParams
    public typealias Result = MutateTranscriptResult
}

/// `session/setProperties`: sets and removes session properties.
public enum SessionSetPropertiesRequest: RPCMethod {
    public static let name = "session/setProperties"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SetPropertiesParams
    public typealias Result = SetPropertiesResult
}

/// `session/list`: loaded and stored sessions, paged.
public enum SessionListRequest: RPCMethod {
    public static let name = "session/list"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionListParams
    public typealias Result = SessionListResult
    public static let lifecycle = MethodLifecycle.runningAndAfterShutdown
}

/// `session/close`: cancels a running turn, then unloads the session (it stays stored).
public enum SessionCloseRequest: RPCMethod {
    public static let name = "session/close"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionRef
    public typealias Result = Empty
    public static let lifecycle = MethodLifecycle.runningAndAfterShutdown
}

/// `session/resume`: loads a stored session (or answers the handle of a loaded one).
public enum SessionResumeRequest: RPCMethod {
    public static let name = "session/resume"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionResumeParams
    public typealias Result = SessionResumeResult
}

/// `session/fork`: a new session whose transcript is a copy of another's, up to an entry.
public enum SessionForkRequest: RPCMethod {
    public static let name = "session/fork"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionForkParams
    public typealias Result = SessionHandle
}

/// `session/delete`: removes a session from the store.
public enum SessionDeleteRequest: RPCMethod {
    public static let name = "session/delete"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionRef
    public typealias Result = Empty
}

// MARK: - Params and results

/// Params that name only a session.
public struct SessionRef: Codable, Sendable, Hashable {
    public var sessionId: String
    public init(sessionId: String) { self.sessionId = sessionId }
}

/// A session ready for turns (`session/create`, `session/resume`).
public struct SessionHandle: Codable, Sendable, Hashable {
    public var sessionId: String
    public var revision: Int
    public var activeProfile: String

    public init(sessionId: String, revision: Int, activeProfile: String) {
        self.sessionId = sessionId
        self.revision = revision
        self.activeProfile = activeProfile
    }
}

/// `session/send` params.
public struct SessionSendParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var input: TurnInput
    public var options: TurnOptions?
    /// While a turn runs, wait and run as the next turn instead of failing with `alreadyRunning`.
    public var queue: Bool?

    public init(sessionId: String, input: TurnInput, options: TurnOptions? = nil, queue: Bool? = nil) {
        self.sessionId = sessionId
        self.input = input
        self.options = options
        self.queue = queue
    }
}

/// Params the server reads without the `Codable` decoder when they have their
/// common shape (`decodeParams`): the decoder's containers and coding paths
/// were a good part of a short turn. Anything else gives nil and goes through
/// the decoder, so a malformed params fails with its words as before.
public protocol DirectlyReadParams {
    init?(directly value: JSONValue)
}

extension SessionSendParams: DirectlyReadParams {
    /// `{"sessionId": "…", "input": "…"}`, maybe with `"queue": true|false`,
    /// and nothing else: the `session/send` of every turn a client types.
    /// Other members (`options`, an input object, an unknown key) and other
    /// types go to the decoder.
    public init?(directly value: JSONValue) {
        guard case .object(let o) = value, case .string(let sessionId)? = o["sessionId"], case .string(let text)? = o["input"] else {
            return nil
        }
        var queue: Bool?
        switch o.count {
        case 2: break
        case 3:
            guard case .bool(let q)? = o["queue"] else { return nil }
            queue = q
        default: return nil
        }
        self.init(sessionId: sessionId, input: TurnInput(text: text), queue: queue)
    }
}

/// `session/generate` params.
public struct SessionGenerateParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var input: TurnInput
    /// The JSON Schema the answer must validate against.
    public var schema: JSONValue
    /// Ask the provider for strict schema adherence where it supports it.
    public var strict: Bool?
    public var options: TurnOptions?

    public init(sessionId: String, input: TurnInput, schema: JSONValue, strict: Bool? = nil, options: TurnOptions? = nil) {
        self.sessionId = sessionId
        self.input = input
        self.schema = schema
        self.strict = strict
        self.options = options
    }
}

/// `session/generate` result.
public struct SessionGenerateResult: Codable, Sendable, Hashable {
    public var value: JSONValue
    public var turnId: String
    public var usage: Usage

    public init(value: JSONValue, turnId: String, usage: Usage) {
        self.value = value
        self.turnId = turnId
        self.usage = usage
    }
}

/// `session/cancel` result.
public struct SessionCancelResult: Codable, Sendable, Hashable {
    /// Whether a turn was running (and is now asked to stop).
    public var wasRunning: Bool
    /// How many queued sends (`queue: true`) were dropped; absent when none.
    public var droppedQueued: Int?
    public init(wasRunning: Bool, droppedQueued: Int? = nil) {
        self.wasRunning = wasRunning
        self.droppedQueued = droppedQueued
    }
}

/// The answer to `session/park`.
public struct SessionParkResult: Codable, Sendable, Hashable {
    /// Whether a turn was running when the park was asked for.
    public var wasRunning: Bool
    /// The session's parked turn, as `session/getState` shows it; absent when
    /// the turn ended without waiting for the client (or none was running or parked).
    public var parked: ParkedTurn?
    public init(wasRunning: Bool, parked: ParkedTurn? = nil) {
        self.wasRunning = wasRunning
        self.parked = parked
    }
}

/// What the user decided about a tool call (docs/protocol.md §6 and §17).
public enum ConfirmationDecision: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    /// Run it (with `arguments`, the edited ones).
    case approve
    case deny
    /// Run it, and add a standing rule that approves later calls of the tool.
    case approveForSession
    /// Deny it and cancel the turn at once (`data.source: "confirmation"`).
    case denyAndStop
}

/// `session/confirm` params.
public struct SessionConfirmParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var callId: String
    public var decision: ConfirmationDecision
    /// Shown to the model when denying.
    public var reason: String?
    /// Approve decisions: run the call with these arguments instead of the model's
    /// (validated against the tool's input schema).
    public var arguments: JSONValue?
    /// `approveForSession`: which later calls the rule approves (default: every call of the tool).
    public var rule: ApprovalScope?

    public init(
        sessionId: String, callId: String, decision: ConfirmationDecision, reason: String? = nil,
        arguments: JSONValue? = nil, rule: ApprovalScope? = nil
    ) {
        self.sessionId = sessionId
        self.callId = callId
        self.decision = decision
        self.reason = reason
        self.arguments = arguments
        self.rule = rule
    }
}

/// `session/getTranscript` result.
public struct SessionTranscript: Codable, Sendable, Hashable {
    public var revision: Int
    /// The instructions the active profile renders now (not an entry).
    public var instructions: String
    public var entries: [TranscriptEntry]

    public init(revision: Int, instructions: String, entries: [TranscriptEntry]) {
        self.revision = revision
        self.instructions = instructions
        self.entries = entries
    }
}

/// `session/mutateTranscript` params.
public struct MutateTranscriptParams: Codable, Sendable, Hashable {
    public var sessionId: String
    /// When given, the mutation is refused (`revisionMismatch`) unless it is current.
    public var expectedRevision: Int?
    public var operations: [TranscriptOperation]

    public init(sessionId: String, expectedRevision: Int? = nil, operations: [TranscriptOperation]) {
        self.sessionId = sessionId
        self.expectedRevision = expectedRevision
        self.operations = operations
    }
}

/// `session/mutateTranscript` result.
public struct MutateTranscriptResult: Codable, Sendable, Hashable {
    public var revision: Int
    public var entryCount: Int

    public init(revision: Int, entryCount: Int) {
        self.revision = revision
        self.entryCount = entryCount
    }
}

/// `session/setProperties` params. `set` is applied before `remove`.
public struct SetPropertiesParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var set: [String: JSONValue]?
    public var remove: [String]?

    public init(sessionId: String, set: [String: JSONValue]? = nil, remove: [String]? = nil) {
        self.sessionId = sessionId
        self.set = set
        self.remove = remove
    }
}

/// `session/setProperties` result: the properties after the change and the profile they select.
public struct SetPropertiesResult: Codable, Sendable, Hashable {
    public var properties: [String: JSONValue]
    public var activeProfile: String

    public init(properties: [String: JSONValue], activeProfile: String) {
        self.properties = properties
        self.activeProfile = activeProfile
    }
}

/// `session/resume` params.
public struct SessionResumeParams: Codable, Sendable, Hashable {
    public var sessionId: String
    /// When the stored session's last turn was cut by a crash: send `tool/undo`
    /// for its `ok` results that carried `undo`, newest first, as a failed turn does.
    public var rollback: Bool?
    /// The MCP servers this load runs in place of those stored with the session
    /// (items as in `session/create`; `[]`: none). Not stored. Only when this
    /// call loads the session: on a loaded one it is `invalidParams`.
    public var mcpServers: [MCPServerEntry]?
    /// `false`: the session's MCP servers are not started yet, so a client can
    /// read the transcript before any server runs. They start at the next
    /// `session/resume` of the loaded session (without `false`), or at its
    /// first round trip, whichever comes first. Default `true`.
    public var startMCPServers: Bool?

    public init(sessionId: String, rollback: Bool? = nil, mcpServers: [MCPServerEntry]? = nil, startMCPServers: Bool? = nil) {
        self.sessionId = sessionId
        self.rollback = rollback
        self.mcpServers = mcpServers
        self.startMCPServers = startMCPServers
    }
}

/// `session/resume` result: the handle `session/create` answers, plus what
/// loading found.
public struct SessionResumeResult: Codable, Sendable, Hashable {
    public var sessionId: String
    public var revision: Int
    public var activeProfile: String
    /// The last turn, when the process that ran it died before it ended.
    public var interruptedTurn: InterruptedTurn?
    /// Parts of the journal that did not load (a corrupt line and what follows it).
    public var warnings: [ContextDiagnostic]?
    /// The session's parked turn (`onDisconnect: "park"`), waiting for `session/continue`.
    public var parkedTurn: ParkedTurn?

    public init(
        sessionId: String, revision: Int, activeProfile: String, interruptedTurn: InterruptedTurn? = nil, warnings: [ContextDiagnostic]? = nil,
        parkedTurn: ParkedTurn? = nil
    ) {
        self.parkedTurn = parkedTurn
        self.sessionId = sessionId
        self.revision = revision
        self.activeProfile = activeProfile
        self.interruptedTurn = interruptedTurn
        self.warnings = warnings
    }
}

/// A turn cut by a crash, found when its session was loaded again. The
/// transcript error policy has been applied to it as to a failed turn.
public struct InterruptedTurn: Codable, Sendable, Hashable {
    public var turnId: String
    /// The turn's `ok` tool results that carried `undo`, newest first.
    public var undo: [UndoRecordInfo]
    /// `rolledBack` when `rollback: true` sent `tool/undo` for each of them;
    /// `committed` when they were left as they are; `none` when there were none.
    public var undoOutcome: UndoOutcome

    /// The calls of the turn's last round trip and where each stood when the
    /// process died; absent when that round trip made no calls.
    public var calls: [RoundTripCall]?

    public init(turnId: String, undo: [UndoRecordInfo], undoOutcome: UndoOutcome, calls: [RoundTripCall]? = nil) {
        self.turnId = turnId
        self.undo = undo
        self.undoOutcome = undoOutcome
        self.calls = calls
    }
}

/// A turn that waits for `session/continue` (docs/protocol.md, "Durable sessions").
public struct ParkedTurn: Codable, Sendable, Hashable {
    public var turnId: String
    /// The calls of its latest round trip that continuing sends again (`notSent`,
    /// `inDoubt`), in call order; empty when it goes on with a model round trip.
    public var pendingRequests: [RoundTripCall]

    public init(turnId: String, pendingRequests: [RoundTripCall]) {
        self.turnId = turnId
        self.pendingRequests = pendingRequests
    }
}

/// One call of an interrupted or parked round trip and what is known of it
/// (docs/protocol.md, "Durable sessions").
public struct RoundTripCall: Codable, Sendable, Hashable {
    public var callId: String
    public var name: String
    public var state: CallState

    public init(callId: String, name: String, state: CallState) {
        self.callId = callId
        self.name = name
        self.state = state
    }
}

/// What is known of a call after its turn was cut: its result is recorded
/// (`completed`), it was never handed to its executor (`notSent`), or it was
/// handed over and no result was recorded, so it may or may not have run (`inDoubt`).
public enum CallState: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case completed, notSent, inDoubt
}

/// One tool result's `undo`, as `tool/undo` would receive it.
public struct UndoRecordInfo: Codable, Sendable, Hashable {
    public var callId: String
    public var name: String
    public var undo: JSONValue

    public init(callId: String, name: String, undo: JSONValue) {
        self.callId = callId
        self.name = name
        self.undo = undo
    }
}

/// `session/fork` params.
public struct SessionForkParams: Codable, Sendable, Hashable {
    public var sessionId: String
    /// The last entry the copy keeps (default: all of them).
    public var atEntryId: String?

    public init(sessionId: String, atEntryId: String? = nil) {
        self.sessionId = sessionId
        self.atEntryId = atEntryId
    }
}

/// `session/list` params (may be absent).
public struct SessionListParams: Codable, Sendable, Hashable {
    /// The `nextCursor` of the previous page (opaque). Pages run newest-updated
    /// first; a cursor marks a position in that order, so it stays valid when
    /// sessions are closed or deleted meanwhile. A malformed one is `invalidParams`.
    public var cursor: String?
    /// `true`: only sessions loaded in this process; `false`: only those that are not.
    public var loaded: Bool?
    /// Page size: at least 1 (else `invalidParams`), default 100, capped at 1000.
    public var limit: Int?
    /// Only sessions whose title contains this, ignoring case (at most 256 characters).
    public var query: String?
    /// Only sessions of this model (its configured name, or an inline model's id).
    public var model: String?
    /// Only sessions updated after this RFC 3339 time.
    public var updatedAfter: String?

    /// The page size when `limit` is absent.
    public static let defaultLimit = 100
    /// Larger `limit`s are served as this.
    public static let maxLimit = 1000

    /// The longest `query` accepted.
    public static let maxQueryLength = 256

    public init(cursor: String? = nil, limit: Int? = nil, loaded: Bool? = nil, query: String? = nil, model: String? = nil, updatedAfter: String? = nil) {
        self.cursor = cursor
        self.limit = limit
        self.loaded = loaded
        self.query = query
        self.model = model
        self.updatedAfter = updatedAfter
    }
}

/// `session/list` result.
public struct SessionListResult: Codable, Sendable, Hashable {
    public var data: [SessionSummary]
    /// Absent on the last page.
    public var nextCursor: String?

    public init(data: [SessionSummary], nextCursor: String? = nil) {
        self.data = data
        self.nextCursor = nextCursor
    }
}

/// One session in `session/list`.
public struct SessionSummary: Codable, Sendable, Hashable {
    public var sessionId: String
    /// The configured `title`, else the first prompt cut to 80 characters.
    public var title: String?
    public var userId: String?
    /// The session's model: its configured name, or an inline model's id.
    public var model: String?
    /// RFC 3339 timestamps (UTC).
    public var createdAt: String?
    public var updatedAt: String?
    public var revision: Int
    public var entryCount: Int
    public var isRunning: Bool
    /// Loaded in this server process (as opposed to only stored).
    public var loaded: Bool
    /// Loaded by another server process on the same store (`session/resume` would be `sessionLocked`).
    public var locked: Bool
    /// That process's id, when known.
    public var lockedBy: Int?

    public init(
        sessionId: String, title: String? = nil, userId: String? = nil, model: String? = nil, createdAt: String? = nil,
        updatedAt: String? = nil, revision: Int, entryCount: Int, isRunning: Bool, loaded: Bool, locked: Bool = false, lockedBy: Int? = nil
    ) {
        self.sessionId = sessionId
        self.title = title
        self.userId = userId
        self.model = model
        self.locked = locked
        self.lockedBy = lockedBy
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.revision = revision
        self.entryCount = entryCount
        self.isRunning = isRunning
        self.loaded = loaded
    }
}

// MARK: - Turn input, options, result

/// What the user says in a turn. On the wire a bare string is accepted as `{"text": ...}`.
public struct TurnInput: Codable, Sendable, Hashable, JSONSchemaProviding, JSONValueRepresentable, ExpressibleByStringLiteral {
    public var text: String
    public var images: [ImageAttachment]?

    public init(text: String, images: [ImageAttachment]? = nil) {
        self.text = text
        self.images = images
    }

    public init(stringLiteral value: String) { self.init(text: value) }

    private enum CodingKeys: String, CodingKey, CaseIterable { case text, images }

    public init(from decoder: any Decoder) throws {
        if let s = try? decoder.singleValueContainer().decode(String.self) {
            self.init(text: s)
            return
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(text: try c.decode(String.self, forKey: .text), images: try c.decodeIfPresent([ImageAttachment].self, forKey: .images))
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }

    /// The object form, always (a bare string is only an input convenience).
    public var json: JSONValue {
        var o: [String: JSONValue] = ["text": .string(text)]
        if let images { o["images"] = .array(images.map(\.json)) }
        return .object(o)
    }

    /// `json`'s text, written without building it (every turn's `turnStarted`).
    package func writeJSON(into out: inout [UInt8]) {
        JSONObjectWriter.write(into: &out) { o in
            o.value("images", images.map { .array($0.map(\.json)) })
            o.string("text", text)
        }
    }

    public static var jsonSchema: JSONValue {
        WireSchema.anyOf([
            WireSchema.describe(WireSchema.string, "Shorthand for {\"text\": ...}."),
            WireSchema.object(["text": WireSchema.string, "images": WireSchema.array(WireSchema.ref(ImageAttachment.self))], required: ["text"]),
        ])
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [ImageAttachment.self] }
}

/// An image attached to a prompt: a local file, a URL, or inline base64 data.
public enum ImageAttachment: Codable, Sendable, Hashable, JSONSchemaProviding, JSONValueRepresentable {
    case path(String)
    case url(String)
    case data(base64: String, mimeType: String)

    private enum CodingKeys: String, CodingKey, CaseIterable { case path, url, data, mimeType }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let present = [CodingKeys.path, .url, .data].filter { c.contains($0) }
        guard present.count == 1, let key = present.first else {
            throw unionMismatch(ImageAttachment.self, decoder, "exactly one of {path}, {url}, {data, mimeType}")
        }
        switch key {
        case .path: self = .path(try c.decode(String.self, forKey: .path))
        case .url: self = .url(try c.decode(String.self, forKey: .url))
        default:
            self = .data(base64: try c.decode(String.self, forKey: .data), mimeType: try c.decode(String.self, forKey: .mimeType))
        }
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }

    public var json: JSONValue {
        switch self {
        case .path(let p): return ["path": .string(p)]
        case .url(let u): return ["url": .string(u)]
        case .data(let d, let m): return ["data": .string(d), "mimeType": .string(m)]
        }
    }

    public static var jsonSchema: JSONValue {
        WireSchema.oneOf([
            WireSchema.object(["path": WireSchema.string], required: ["path"]),
            WireSchema.object(["url": WireSchema.string], required: ["url"]),
            WireSchema.object(
                ["data": WireSchema.describe(WireSchema.string, "base64"), "mimeType": WireSchema.string],
                required: ["data", "mimeType"]),
        ])
    }
}

/// Per-call overrides for one turn; they win over the profile's options and the config's limits.
public struct TurnOptions: Codable, Sendable, Hashable {
    public var temperature: Double?
    public var maxOutputTokens: Int?
    public var reasoningLevel: String?
    public var toolChoice: ToolChoice?
    public var toolCallingMode: ToolCallingMode?
    public var limits: Limits?
    public var model: ModelReference?
    /// `true`: the model is offered only the tools that only read (annotated
    /// `readOnly`, an MCP tool's `readOnlyHint`) and the engine's own tools; a
    /// call of another tool is answered as a call of a tool that does not exist.
    public var readOnly: Bool?

    public init(
        temperature: Double? = nil, maxOutputTokens: Int? = nil, reasoningLevel: String? = nil,
        toolChoice: ToolChoice? = nil, toolCallingMode: ToolCallingMode? = nil, limits: Limits? = nil,
        model: ModelReference? = nil, readOnly: Bool? = nil
    ) {
        self.readOnly = readOnly
        self.temperature = temperature
        self.maxOutputTokens = maxOutputTokens
        self.reasoningLevel = reasoningLevel
        self.toolChoice = toolChoice
        self.toolCallingMode = toolCallingMode
        self.limits = limits
        self.model = model
    }
}

/// Token counts. In `TurnResult` and `session/generate` these are the turn's totals.
/// A count the provider did not report is absent, never 0: a local server that
/// reports no usage gives `usage: {}`.
///
/// `contextTokens` is a reading, not a count: what the model had in context at
/// a round trip (its input, cached reads and writes included, plus its output).
/// In a sum (a turn's, the session's) it is the reading of the last round trip.
/// `costUSD` is what the tokens cost at the model's configured `pricing`, absent
/// without one; sums add it.
public struct Usage: Codable, Sendable, Hashable {
    public var inputTokens: Int?
    public var outputTokens: Int?
    public var cachedInputTokens: Int?
    public var reasoningTokens: Int?
    public var contextTokens: Int?
    public var costUSD: Double?

    public init(
        inputTokens: Int? = nil, outputTokens: Int? = nil, cachedInputTokens: Int? = nil, reasoningTokens: Int? = nil,
        contextTokens: Int? = nil, costUSD: Double? = nil
    ) {
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
        self.cachedInputTokens = cachedInputTokens
        self.reasoningTokens = reasoningTokens
        self.contextTokens = contextTokens
        self.costUSD = costUSD
    }

    /// The object's members, shared with the `usage` event, which carries them inline.
    var jsonMembers: [String: JSONValue] {
        var o: [String: JSONValue] = [:]
        if let inputTokens { o["inputTokens"] = .int(inputTokens) }
        if let outputTokens { o["outputTokens"] = .int(outputTokens) }
        if let cachedInputTokens { o["cachedInputTokens"] = .int(cachedInputTokens) }
        if let reasoningTokens { o["reasoningTokens"] = .int(reasoningTokens) }
        if let contextTokens { o["contextTokens"] = .int(contextTokens) }
        if let costUSD { o["costUSD"] = .double(costUSD) }
        return o
    }

    public var json: JSONValue { .object(jsonMembers) }

    /// `json`'s text, written without building it (in every turn's end and its journal lines).
    package func writeJSON(into out: inout [UInt8]) {
        JSONObjectWriter.write(into: &out) { writeMembers(into: &$0) }
    }

    /// `jsonMembers` in sorted key order, for the objects that carry them.
    package func writeMembers(into o: inout JSONObjectWriter) {
        o.int("cachedInputTokens", cachedInputTokens)
        o.int("contextTokens", contextTokens)
        o.value("costUSD", costUSD.map { .double($0) })
        o.int("inputTokens", inputTokens)
        o.int("outputTokens", outputTokens)
        o.int("reasoningTokens", reasoningTokens)
    }

    /// Reads `json`'s form directly (see `TranscriptEntry.init(json:)`); an absent
    /// or `null` count stays nil.
    public init(json value: JSONValue) throws {
        guard case .object(let o) = value else { throw JSONDecodingFailure(path: "", message: "expected an object") }
        func count(_ key: String) throws -> Int? {
            guard let v = o[key], v != .null else { return nil }
            guard let i = v.intValue else { throw JSONDecodingFailure(path: key, message: "expected an integer") }
            return i
        }
        var cost: Double?
        if let v = o["costUSD"], v != .null {
            guard let d = v.numberValue, d.isFinite else { throw JSONDecodingFailure(path: "costUSD", message: "expected a number") }
            cost = d
        }
        self.init(
            inputTokens: try count("inputTokens"), outputTokens: try count("outputTokens"),
            cachedInputTokens: try count("cachedInputTokens"), reasoningTokens: try count("reasoningTokens"),
            contextTokens: try count("contextTokens"), costUSD: cost)
    }

    /// Adds another report: a count stays absent until some report has it;
    /// sums saturate instead of overflowing. `contextTokens` is a reading: the
    /// later report's wins when it has one.
    public mutating func add(_ other: Usage) {
        func sum(_ a: Int?, _ b: Int?) -> Int? {
            guard let b else { return a }
            guard let a else { return b }
            let (s, overflow) = a.addingReportingOverflow(b)
            return overflow ? Int.max : s
        }
        inputTokens = sum(inputTokens, other.inputTokens)
        outputTokens = sum(outputTokens, other.outputTokens)
        cachedInputTokens = sum(cachedInputTokens, other.cachedInputTokens)
        reasoningTokens = sum(reasoningTokens, other.reasoningTokens)
        contextTokens = other.contextTokens ?? contextTokens
        if let b = other.costUSD { costUSD = (costUSD ?? 0) + b }
    }
}

/// Why a turn ended successfully (docs/protocol.md, "How a reply ended").
public enum StopReason: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    /// The model answered without tool calls.
    case completed
    /// A `final` tool was called; its arguments are `finalAnswer`.
    case finalAnswer
    /// The model hit the output token limit: the answer is cut off.
    case maxTokens
    /// The provider's content filter stopped the answer: it is cut off.
    case contentFilter
    /// The model declined to answer; the text is its refusal.
    case refusal

    /// The answer was cut off before the model finished it: the response entry
    /// is marked `incomplete`, and no tool call of that round trip is run.
    public var cutsAnswer: Bool { self == .maxTokens || self == .contentFilter }
}

/// The `session/send` result, sent when the turn ends.
public struct TurnResult: Codable, Sendable, Hashable {
    public var turnId: String
    public var message: TurnMessage
    public var stopReason: StopReason
    public var finalAnswer: JSONValue?
    public var usage: Usage
    public var roundTrips: Int
    public var toolCalls: Int
    public var revision: Int

    public init(
        turnId: String, message: TurnMessage, stopReason: StopReason = .completed, finalAnswer: JSONValue? = nil,
        usage: Usage, roundTrips: Int, toolCalls: Int, revision: Int
    ) {
        self.turnId = turnId
        self.message = message
        self.stopReason = stopReason
        self.finalAnswer = finalAnswer
        self.usage = usage
        self.roundTrips = roundTrips
        self.toolCalls = toolCalls
        self.revision = revision
    }
}

extension TurnResult: JSONValueRepresentable {
    /// Built directly, not through the `Codable` encoder: every turn's answer
    /// (WireTypesTests checks it against the `Codable` form).
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "turnId": .string(turnId), "message": ["entryId": .string(message.entryId), "text": .string(message.text)],
            "stopReason": .string(stopReason.rawValue), "usage": usage.json, "roundTrips": .int(roundTrips),
            "toolCalls": .int(toolCalls), "revision": .int(revision),
        ]
        if let finalAnswer { o["finalAnswer"] = finalAnswer }
        return .object(o)
    }
}

/// The response a turn appended.
public struct TurnMessage: Codable, Sendable, Hashable {
    public var entryId: String
    public var text: String

    public init(entryId: String, text: String) {
        self.entryId = entryId
        self.text = text
    }
}

// MARK: - Transcript

/// How a tool call ended. Every outcome is fed back to the model; only a JSON-RPC
/// error answer to `tool/call` ends the turn.
public enum ToolOutcome: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case ok
    case failed
    case denied
    case conflict
}

/// A tool call as the model made it (transcript `toolCalls` entries, `activeToolCalls`).
public struct ToolCallRecord: Codable, Sendable, Hashable {
    public var callId: String
    public var name: String
    public var arguments: JSONValue

    public init(callId: String, name: String, arguments: JSONValue) {
        self.callId = callId
        self.name = name
        self.arguments = arguments
    }

    public var json: JSONValue {
        ["callId": .string(callId), "name": .string(name), "arguments": arguments]
    }

    /// Appends `json`'s text (members in sorted order) without building it.
    public func serialize(into out: inout [UInt8]) {
        JSONStage.write(into: &out) { serialize(into: &$0) }
    }

    package func serialize(into stage: inout JSONStage) {
        JSONObjectWriter.write(into: &stage) { o in
            o.value("arguments", arguments)
            o.string("callId", callId)
            o.string("name", name)
        }
    }
}

/// The `type` of a transcript entry.
public enum TranscriptEntryType: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case prompt
    case response
    case reasoning
    case toolCalls
    case toolOutput
    /// What a compaction left in place of the entries it summarized.
    case summary
}

/// One transcript entry: a stable `id`, the turn that produced it, and its content.
/// On the wire it is one flat object: `{"id":..., "type":"prompt", "text":...}`.
public struct TranscriptEntry: Codable, Sendable, Hashable, JSONSchemaProviding, JSONValueRepresentable {
    public var id: String
    public var turnId: String?
    public var content: TranscriptContent

    // Inlinable: a journal's reader makes one per entry in another module,
    // and as a call the entry was built in a temporary and copied out.
    @inlinable
    public init(id: String, turnId: String? = nil, _ content: TranscriptContent) {
        self.id = id
        self.turnId = turnId
        self.content = content
    }

    public var type: TranscriptEntryType { content.type }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case id, turnId, type, text, images, profile, incomplete, stopReason, calls, callId, name, outcome, content, signature
        case approvedArguments, media
    }

    /// An unknown `type` throws a `DecodingError`, which the server reports as `invalidTranscript`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        turnId = try c.decodeIfPresent(String.self, forKey: .turnId)
        let typeName = try c.decode(String.self, forKey: .type)
        guard let type = TranscriptEntryType(rawValue: typeName) else {
            throw DecodingError.dataCorruptedError(
                forKey: .type, in: c,
                debugDescription: "unknown entry type '\(typeName)' (expected prompt, response, reasoning, toolCalls, toolOutput or summary)")
        }
        switch type {
        case .prompt:
            content = .prompt(text: try c.decode(String.self, forKey: .text), images: try c.decodeIfPresent([ImageAttachment].self, forKey: .images))
        case .response:
            content = .response(
                text: try c.decode(String.self, forKey: .text), profile: try c.decodeIfPresent(String.self, forKey: .profile),
                incomplete: try c.decodeIfPresent(Bool.self, forKey: .incomplete) ?? false,
                stopReason: try c.decodeIfPresent(StopReason.self, forKey: .stopReason))
        case .reasoning:
            content = .reasoning(
                text: try c.decode(String.self, forKey: .text), profile: try c.decodeIfPresent(String.self, forKey: .profile),
                signature: try c.decodeIfPresent(String.self, forKey: .signature))
        case .toolCalls:
            content = .toolCalls(
                calls: try c.decode([ToolCallRecord].self, forKey: .calls), profile: try c.decodeIfPresent(String.self, forKey: .profile),
                text: try c.decodeIfPresent(String.self, forKey: .text))
        case .toolOutput:
            content = .toolOutput(
                callId: try c.decode(String.self, forKey: .callId), name: try c.decode(String.self, forKey: .name),
                outcome: try c.decode(ToolOutcome.self, forKey: .outcome),
                content: try c.decodeNil(forKey: .content) ? .null : c.decode(JSONValue.self, forKey: .content),
                profile: try c.decodeIfPresent(String.self, forKey: .profile),
                approvedArguments: try c.decodeIfPresent(JSONValue.self, forKey: .approvedArguments),
                media: try c.decodeIfPresent([MediaReference].self, forKey: .media))
        case .summary:
            content = .summary(text: try c.decode(String.self, forKey: .text))
        }
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }

    /// The wire form, built directly (entries go out in every `entryAppended` event).
    public var json: JSONValue { wireMembers.object }

    /// Appends the wire form's JSON text, as `json.serialize(into:)` writes it,
    /// without building its dictionary or a list of its members: every entry
    /// goes out in an event and into the journal. Each case writes the members
    /// `wireMembers` lists, in sorted key order (a test pins that both agree
    /// for every case).
    public func serialize(into out: inout [UInt8]) {
        JSONStage.write(into: &out) { serialize(into: &$0) }
    }

    package func serialize(into stage: inout JSONStage) {
        JSONObjectWriter.write(into: &stage) { o in
            switch content {
            case .prompt(let text, let images):
                o.string("id", id)
                o.value("images", images.map { .array($0.map(\.json)) })
                o.string("text", text)
            case .response(let text, let profile, let incomplete, let stopReason):
                o.string("id", id)
                if incomplete { o.value("incomplete", true) }
                o.string("profile", profile)
                o.string("stopReason", stopReason?.rawValue)
                o.string("text", text)
            case .reasoning(let text, let profile, let signature):
                o.string("id", id)
                o.string("profile", profile)
                o.string("signature", signature)
                o.string("text", text)
            case .toolCalls(let calls, let profile, let text):
                o.staged("calls") { stage in
                    stage.byte(UInt8(ascii: "["))
                    for (i, call) in calls.enumerated() {
                        if i > 0 { stage.byte(UInt8(ascii: ",")) }
                        call.serialize(into: &stage)
                    }
                    stage.byte(UInt8(ascii: "]"))
                }
                o.string("id", id)
                o.string("profile", profile)
                o.string("text", text)
            case .toolOutput(let callId, let name, let outcome, let content, let profile, let approved, let media):
                o.value("approvedArguments", approved)
                o.string("callId", callId)
                o.value("content", content)
                o.string("id", id)
                o.value("media", media.map { .array($0.map(\.json)) })
                o.string("name", name)
                o.string("outcome", outcome.rawValue)
                o.string("profile", profile)
            case .summary(let text):
                o.string("id", id)
                o.string("text", text)
            }
            o.string("turnId", turnId)
            o.string("type", content.type.rawValue)
        }
    }

    /// The members of the wire form, listed once for `json` and `serialize`.
    private var wireMembers: JSONMembers {
        var o: [(key: String, value: JSONValue)] = [("id", .string(id)), ("type", .string(content.type.rawValue))]
        o.reserveCapacity(8)
        if let turnId { o.append(("turnId", .string(turnId))) }
        func profile(_ p: String?) { if let p { o.append(("profile", .string(p))) } }
        switch content {
        case .prompt(let text, let images):
            o.append(("text", .string(text)))
            if let images { o.append(("images", .array(images.map(\.json)))) }
        case .response(let text, let p, let incomplete, let stopReason):
            o.append(("text", .string(text)))
            profile(p)
            if incomplete { o.append(("incomplete", true)) }
            if let stopReason { o.append(("stopReason", .string(stopReason.rawValue))) }
        case .reasoning(let text, let p, let signature):
            o.append(("text", .string(text)))
            profile(p)
            if let signature { o.append(("signature", .string(signature))) }
        case .toolCalls(let calls, let p, let text):
            o.append(("calls", .array(calls.map(\.json))))
            profile(p)
            if let text { o.append(("text", .string(text))) }
        case .toolOutput(let callId, let name, let outcome, let value, let p, let approved, let media):
            o.append(("callId", .string(callId)))
            o.append(("name", .string(name)))
            o.append(("outcome", .string(outcome.rawValue)))
            o.append(("content", value))
            profile(p)
            if let approved { o.append(("approvedArguments", approved)) }
            if let media { o.append(("media", .array(media.map(\.json)))) }
        case .summary(let text):
            o.append(("text", .string(text)))
        }
        return JSONMembers(o)
    }

    /// Reads the wire form straight from a `JSONValue`, without the Codable
    /// machinery: a stored journal replays thousands of entries when a session is
    /// loaded. Accepts what `init(from:)` accepts (unknown members are ignored,
    /// `null` counts as absent for optional members); tests pin that both agree.
    public init(json value: JSONValue) throws {
        guard case .object(let o) = value else { throw JSONDecodingFailure(path: "", message: "expected an object") }
        func failure(_ key: CodingKeys, _ expected: String) -> JSONDecodingFailure {
            JSONDecodingFailure(path: key.rawValue, message: o[key.rawValue] == nil ? "missing required field" : "expected \(expected)")
        }
        func string(_ key: CodingKeys) throws -> String {
            guard case .string(let s)? = o[key.rawValue] else { throw failure(key, "string") }
            return s
        }
        func optionalString(_ key: CodingKeys) throws -> String? {
            switch o[key.rawValue] {
            case nil, .null?: return nil
            case .string(let s)?: return s
            default: throw failure(key, "string")
            }
        }
        func optional<T: RawRepresentable>(_ key: CodingKeys, _: T.Type) throws -> T? where T.RawValue == String {
            guard let raw = try optionalString(key) else { return nil }
            guard let v = T(rawValue: raw) else { throw JSONDecodingFailure(path: key.rawValue, message: "unknown value '\(raw)'") }
            return v
        }
        func optionalJSON(_ key: CodingKeys) -> JSONValue? {
            switch o[key.rawValue] {
            case nil, .null?: return nil
            case let v?: return v
            }
        }
        id = try string(.id)
        turnId = try optionalString(.turnId)
        let typeName = try string(.type)
        guard let type = TranscriptEntryType(rawValue: typeName) else {
            throw JSONDecodingFailure(
                path: "type", message: "unknown entry type '\(typeName)' (expected prompt, response, reasoning, toolCalls, toolOutput or summary)")
        }
        switch type {
        case .prompt:
            content = .prompt(text: try string(.text), images: try optionalJSON(.images)?.decode(as: [ImageAttachment].self))
        case .response:
            let incomplete: Bool
            switch o[CodingKeys.incomplete.rawValue] {
            case nil, .null?: incomplete = false
            case .bool(let b)?: incomplete = b
            default: throw failure(.incomplete, "boolean")
            }
            content = .response(
                text: try string(.text), profile: try optionalString(.profile), incomplete: incomplete,
                stopReason: try optional(.stopReason, StopReason.self))
        case .reasoning:
            content = .reasoning(text: try string(.text), profile: try optionalString(.profile), signature: try optionalString(.signature))
        case .toolCalls:
            guard case .array(let items)? = o[CodingKeys.calls.rawValue] else { throw failure(.calls, "array") }
            var calls: [ToolCallRecord] = []
            calls.reserveCapacity(items.count)
            for (i, item) in items.enumerated() {
                guard case .string(let callId)? = item["callId"], case .string(let name)? = item["name"], let arguments = item["arguments"] else {
                    throw JSONDecodingFailure(path: "calls[\(i)]", message: "expected an object with callId, name and arguments")
                }
                calls.append(ToolCallRecord(callId: callId, name: name, arguments: arguments))
            }
            content = .toolCalls(calls: calls, profile: try optionalString(.profile), text: try optionalString(.text))
        case .toolOutput:
            guard let outcome = try optional(.outcome, ToolOutcome.self) else { throw failure(.outcome, "string") }
            guard let output = o[CodingKeys.content.rawValue] else { throw failure(.content, "value") }
            var media: [MediaReference]?
            if let items = optionalJSON(.media) {
                guard case .array(let items) = items else { throw failure(.media, "array") }
                var references: [MediaReference] = []
                for (i, item) in items.enumerated() {
                    do {
                        references.append(try MediaReference(json: item))
                    } catch {
                        throw JSONDecodingFailure(path: "media[\(i)]" + (error.path.isEmpty ? "" : "." + error.path), message: error.message)
                    }
                }
                media = references
            }
            content = .toolOutput(
                callId: try string(.callId), name: try string(.name), outcome: outcome, content: output,
                profile: try optionalString(.profile), approvedArguments: optionalJSON(.approvedArguments), media: media)
        case .summary:
            content = .summary(text: try string(.text))
        }
    }

    public static var jsonSchema: JSONValue {
        let s = WireSchema.string
        func variant(_ type: String, _ props: [String: JSONValue], _ required: [String]) -> JSONValue {
            var all = props
            all["id"] = s
            all["turnId"] = s
            all["type"] = WireSchema.const(type)
            return WireSchema.object(all, required: ["id", "type"] + required)
        }
        return WireSchema.oneOf([
            variant("prompt", ["text": s, "images": WireSchema.array(WireSchema.ref(ImageAttachment.self))], ["text"]),
            variant(
                "response", ["text": s, "profile": s, "incomplete": WireSchema.boolean, "stopReason": WireSchema.ref(StopReason.self)],
                ["text"]),
            variant("reasoning", ["text": s, "profile": s, "signature": s], ["text"]),
            variant("toolCalls", ["calls": WireSchema.array(WireSchema.ref(ToolCallRecord.self)), "profile": s, "text": s], ["calls"]),
            variant(
                "toolOutput",
                [
                    "callId": s, "name": s, "outcome": WireSchema.ref(ToolOutcome.self), "content": WireSchema.any, "profile": s,
                    "approvedArguments": WireSchema.any, "media": WireSchema.array(WireSchema.ref(MediaReference.self)),
                ],
                ["callId", "name", "outcome", "content"]),
            variant("summary", ["text": s], ["text"]),
        ])
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] {
        [ImageAttachment.self, ToolCallRecord.self, ToolOutcome.self, StopReason.self, MediaReference.self]
    }
}

/// What a transcript entry holds. `profile` names the profile that produced it.
///
/// The two largest cases are `indirect` (boxed): an entry is as large as its
/// largest case, and without them an entry took 136 bytes instead of 80, in
/// every transcript array, copy and journal load (a 10,000-entry transcript is
/// 1.3 MB of entries, each page of it a page fault when first written).
public enum TranscriptContent: Sendable, Hashable {
    case prompt(text: String, images: [ImageAttachment]?)
    /// `incomplete`: a partial response, kept by the `preserve` error policy or cut
    /// off by the provider. `stopReason` is set when the reply did not end
    /// normally (`maxTokens`, `contentFilter`, `refusal`).
    case response(text: String, profile: String?, incomplete: Bool, stopReason: StopReason? = nil)
    /// `signature`: the provider's opaque seal on the thinking (Anthropic), kept so the
    /// thinking can be sent back unchanged; only valid with exactly this `text`.
    indirect case reasoning(text: String, profile: String?, signature: String? = nil)
    /// `text` is what the model said alongside the calls, if anything.
    case toolCalls(calls: [ToolCallRecord], profile: String?, text: String?)
    /// `approvedArguments`: what the call ran with when the user edited the model's
    /// arguments while approving it (the model's stay in the `toolCalls` entry).
    /// `media`: the images and audio clips the tool returned, kept beside the
    /// journal (their place in `content` holds a note).
    indirect case toolOutput(
        callId: String, name: String, outcome: ToolOutcome, content: JSONValue, profile: String?, approvedArguments: JSONValue? = nil,
        media: [MediaReference]? = nil)
    /// A compaction's summary of the entries it replaced (docs/protocol.md, "Compaction").
    case summary(text: String)

    public var type: TranscriptEntryType {
        switch self {
        case .prompt: return .prompt
        case .response: return .response
        case .reasoning: return .reasoning
        case .toolCalls: return .toolCalls
        case .toolOutput: return .toolOutput
        case .summary: return .summary
        }
    }

    /// The producing profile (prompts have none).
    public var profile: String? {
        switch self {
        case .prompt, .summary: return nil
        case .response(_, let p, _, _), .reasoning(_, let p, _), .toolCalls(_, let p, _), .toolOutput(_, _, _, _, let p, _, _): return p
        }
    }
}

/// One edit of `session/mutateTranscript`. `id: null` / `after: null` are meaningful
/// (empty the transcript / insert at the start), so they must be present, not omitted.
public enum TranscriptOperation: Codable, Sendable, Hashable, JSONSchemaProviding {
    case remove(ids: [String])
    /// Keeps entries up to and including `id`; `nil` empties the transcript.
    case truncateAfter(id: String?)
    case replace(id: String, entry: TranscriptEntry)
    /// Inserts after `after`; `nil` inserts at the start.
    case insert(after: String?, entries: [TranscriptEntry])
    case set(entries: [TranscriptEntry])

    private enum CodingKeys: String, CodingKey, CaseIterable { case op, ids, id, entry, after, entries }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let op = try c.decode(String.self, forKey: .op)
        // Absent and null differ here: absent is an error, null is "the start".
        func nullableID(_ key: CodingKeys) throws -> String? {
            guard c.contains(key) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: c.codingPath, debugDescription: "'\(key.rawValue)' is required (use null for the start)"))
            }
            return try c.decodeNil(forKey: key) ? nil : c.decode(String.self, forKey: key)
        }
        switch op {
        case "remove": self = .remove(ids: try c.decode([String].self, forKey: .ids))
        case "truncateAfter": self = .truncateAfter(id: try nullableID(.id))
        case "replace": self = .replace(id: try c.decode(String.self, forKey: .id), entry: try c.decode(TranscriptEntry.self, forKey: .entry))
        case "insert": self = .insert(after: try nullableID(.after), entries: try c.decode([TranscriptEntry].self, forKey: .entries))
        case "set": self = .set(entries: try c.decode([TranscriptEntry].self, forKey: .entries))
        default:
            throw DecodingError.dataCorruptedError(
                forKey: .op, in: c, debugDescription: "unknown op '\(op)' (expected remove, truncateAfter, replace, insert or set)")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .remove(let ids):
            try c.encode("remove", forKey: .op)
            try c.encode(ids, forKey: .ids)
        case .truncateAfter(let id):
            try c.encode("truncateAfter", forKey: .op)
            if let id { try c.encode(id, forKey: .id) } else { try c.encodeNil(forKey: .id) }
        case .replace(let id, let entry):
            try c.encode("replace", forKey: .op)
            try c.encode(id, forKey: .id)
            try c.encode(entry, forKey: .entry)
        case .insert(let after, let entries):
            try c.encode("insert", forKey: .op)
            if let after { try c.encode(after, forKey: .after) } else { try c.encodeNil(forKey: .after) }
            try c.encode(entries, forKey: .entries)
        case .set(let entries):
            try c.encode("set", forKey: .op)
            try c.encode(entries, forKey: .entries)
        }
    }

    public static var jsonSchema: JSONValue {
        let entry = WireSchema.ref(TranscriptEntry.self)
        return WireSchema.oneOf([
            WireSchema.object(["op": WireSchema.const("remove"), "ids": WireSchema.array(WireSchema.string)], required: ["op", "ids"]),
            WireSchema.object(["op": WireSchema.const("truncateAfter"), "id": WireSchema.nullableString], required: ["op", "id"]),
            WireSchema.object(["op": WireSchema.const("replace"), "id": WireSchema.string, "entry": entry], required: ["op", "id", "entry"]),
            WireSchema.object(
                ["op": WireSchema.const("insert"), "after": WireSchema.nullableString, "entries": WireSchema.array(entry)],
                required: ["op", "after", "entries"]),
            WireSchema.object(["op": WireSchema.const("set"), "entries": WireSchema.array(entry)], required: ["op", "entries"]),
        ])
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [TranscriptEntry.self] }
}

// MARK: - Session state (docs/protocol.md §3)

/// A snapshot of an observable session (`session/getState`). When each field
/// changes is in docs/turns.md.
public struct SessionState: Codable, Sendable, Hashable {
    public var sessionId: String
    public var isRunning: Bool
    /// The running turn, or the last one.
    public var turnId: String?
    /// Text of the current (or last) turn, streamed so far.
    public var currentText: String
    public var activeToolCalls: [ToolCallRecord]
    public var pendingConfirmation: PendingConfirmation?
    public var lastUsageReport: Usage?
    /// The usage of every turn of the session that ended, summed (kept in the
    /// store with the session); absent until some turn reported usage.
    public var usageTotals: Usage?
    public var lastSchemaWarnings: [SchemaWarning]
    public var lastContextDiagnostics: [ContextDiagnostic]
    public var activeProfile: String
    public var properties: [String: JSONValue]
    public var revision: Int
    public var entryCount: Int
    /// Sends waiting to run (`queue: true`); absent when none.
    public var queuedSends: Int?
    /// Standing approval rules; absent when none.
    public var approvalRules: [ApprovalRule]?
    /// The session's MCP servers, their status and tools; absent when it names none.
    public var mcpServers: [MCPServerState]?
    /// The context meter: what the model had in context at the session's last
    /// round trip (`usage.contextTokens`); absent until known.
    public var contextTokens: Int?
    /// The window of the model the next round trip goes to, when it is known.
    public var contextWindowTokens: Int?
    /// The plan the model keeps with `update_plan`, as its last call left it; absent before any.
    public var plan: [PlanEntry]?
    /// The session's parked turn, waiting for `session/continue`; absent when none.
    public var parked: ParkedTurn?

    public init(
        sessionId: String, isRunning: Bool = false, turnId: String? = nil, currentText: String = "",
        activeToolCalls: [ToolCallRecord] = [], pendingConfirmation: PendingConfirmation? = nil,
        lastUsageReport: Usage? = nil, lastSchemaWarnings: [SchemaWarning] = [],
        lastContextDiagnostics: [ContextDiagnostic] = [], activeProfile: String,
        properties: [String: JSONValue] = [:], revision: Int, entryCount: Int,
        queuedSends: Int? = nil, approvalRules: [ApprovalRule]? = nil, usageTotals: Usage? = nil,
        mcpServers: [MCPServerState]? = nil, contextTokens: Int? = nil, contextWindowTokens: Int? = nil, plan: [PlanEntry]? = nil,
        parked: ParkedTurn? = nil
    ) {
        self.parked = parked
        self.plan = plan
        self.contextTokens = contextTokens
        self.contextWindowTokens = contextWindowTokens
        self.mcpServers = mcpServers
        self.usageTotals = usageTotals
        self.queuedSends = queuedSends
        self.approvalRules = approvalRules
        self.sessionId = sessionId
        self.isRunning = isRunning
        self.turnId = turnId
        self.currentText = currentText
        self.activeToolCalls = activeToolCalls
        self.pendingConfirmation = pendingConfirmation
        self.lastUsageReport = lastUsageReport
        self.lastSchemaWarnings = lastSchemaWarnings
        self.lastContextDiagnostics = lastContextDiagnostics
        self.activeProfile = activeProfile
        self.properties = properties
        self.revision = revision
        self.entryCount = entryCount
    }
}

/// A tool call waiting for the user's decision.
public struct PendingConfirmation: Codable, Sendable, Hashable {
    public var callId: String
    public var name: String
    public var arguments: JSONValue
    public var reason: String?

    public init(callId: String, name: String, arguments: JSONValue, reason: String? = nil) {
        self.callId = callId
        self.name = name
        self.arguments = arguments
        self.reason = reason
    }
}

/// A part of a tool's input schema the provider could not take as is and that was down-converted.
public struct SchemaWarning: Codable, Sendable, Hashable {
    public var tool: String
    /// JSON Pointer into the tool's `inputSchema`.
    public var path: String
    public var message: String

    public init(tool: String, path: String, message: String) {
        self.tool = tool
        self.path = path
        self.message = message
    }

    public var json: JSONValue { ["tool": .string(tool), "path": .string(path), "message": .string(message)] }
}

/// Something the turn went on without: a context source that failed or timed out
/// (its last good value is used), the router (`source: "router"`), a generation
/// option the provider could not take (`source: "modelOptions"`), or on resume a
/// journal line that did not load (`source: "journal"`).
public struct ContextDiagnostic: Codable, Sendable, Hashable {
    public var source: String
    public var message: String

    public init(source: String, message: String) {
        self.source = source
        self.message = message
    }

    public var json: JSONValue { ["source": .string(source), "message": .string(message)] }
}
