// Server → client hooks (`{"client": true}` hook actions, docs/protocol.md §11).

/// `hook/call`: a profile hook asks the client; the answer may set properties,
/// edit history, or veto (a veto from `onToolCall` ends the turn with `hookError`).
public enum HookCallRequest: RPCMethod {
    public static let name = "hook/call"
    public static let direction = MethodDirection.serverToClient
    public typealias Params = HookCallParams
    public typealias Result = HookCallResult
}

/// `hook/call` params.
public struct HookCallParams: Codable, Sendable, Hashable {
    public var sessionId: String
    /// The turn the hook runs in. Hooks run only inside turns today; the field is
    /// optional so a hook point outside a turn can be added without a protocol change.
    public var turnId: String?
    public var hook: HookName
    public var profile: String
    /// Hook-specific data: the tool call, the tool output, the response, the prompt.
    public var payload: JSONValue

    public init(sessionId: String, turnId: String? = nil, hook: HookName, profile: String, payload: JSONValue) {
        self.sessionId = sessionId
        self.turnId = turnId
        self.hook = hook
        self.profile = profile
        self.payload = payload
    }
}

/// `hook/call` result. Everything optional: `{}` means "go on unchanged".
public struct HookCallResult: Codable, Sendable, Hashable {
    public var set: [String: JSONValue]?
    public var remove: [String]?
    public var veto: Bool?
    /// Why the hook vetoed; goes into the `hookError` message.
    public var reason: String?
    /// Transcript edits, applied like `session/mutateTranscript`.
    public var history: [TranscriptOperation]?

    public init(set: [String: JSONValue]? = nil, remove: [String]? = nil, veto: Bool? = nil, reason: String? = nil, history: [TranscriptOperation]? = nil) {
        self.set = set
        self.remove = remove
        self.veto = veto
        self.reason = reason
        self.history = history
    }
}
