// The human in the loop while a turn runs (docs/protocol.md §17): steering a
// running turn, standing approval rules, the model asking the user a question,
// and rewinding the transcript with undo.

// MARK: - Methods

/// `session/steer`: adds user input to the running turn at its next checkpoint.
public enum SessionSteerRequest: RPCMethod {
    public static let name = "session/steer"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionSteerParams
    public typealias Result = SessionSteerResult
}

/// `session/setApprovalRules`: adds and removes the session's standing approval rules.
public enum SessionSetApprovalRulesRequest: RPCMethod {
    public static let name = "session/setApprovalRules"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SetApprovalRulesParams
    public typealias Result = SetApprovalRulesResult
}

/// `session/rewind`: removes everything after a point of the transcript, undoing
/// the removed tool calls' side effects on request.
public enum SessionRewindRequest: RPCMethod {
    public static let name = "session/rewind"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionRewindParams
    public typealias Result = SessionRewindResult
}

/// `user/ask`: the model's `ask_user` tool asks the client's user a question.
public enum UserAskRequest: RPCMethod {
    public static let name = "user/ask"
    public static let direction = MethodDirection.serverToClient
    public typealias Params = UserAskParams
    public typealias Result = UserAskResult
}

/// `user/elicit`: an MCP server asks, during one of the session's calls, for
/// input its form describes (MCP's `elicitation/create`, form mode).
public enum UserElicitRequest: RPCMethod {
    public static let name = "user/elicit"
    public static let direction = MethodDirection.serverToClient
    public typealias Params = UserElicitParams
    public typealias Result = UserElicitResult
}

// MARK: - Steering

/// `session/steer` params.
public struct SessionSteerParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var input: TurnInput
    /// When given, the steer is refused (`turnMismatch`) unless this turn is the running one.
    public var expectedTurnId: String?

    public init(sessionId: String, input: TurnInput, expectedTurnId: String? = nil) {
        self.sessionId = sessionId
        self.input = input
        self.expectedTurnId = expectedTurnId
    }
}

/// `session/steer` result: the turn that will see the input.
public struct SessionSteerResult: Codable, Sendable, Hashable {
    public var turnId: String
    public init(turnId: String) { self.turnId = turnId }
}

// MARK: - Approval rules

/// A standing approval: calls of `tool` whose arguments match `arguments` run
/// without asking. Guards still apply first (a `deny` wins).
public struct ApprovalRule: Codable, Sendable, Hashable {
    public var id: String
    public var tool: String
    /// Per top-level argument: a string is a glob (`*`, `?`) over a string value,
    /// any other JSON value must be equal. Unlisted arguments are not checked.
    public var arguments: [String: JSONValue]?

    public init(id: String, tool: String, arguments: [String: JSONValue]? = nil) {
        self.id = id
        self.tool = tool
        self.arguments = arguments
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = ["id": .string(id), "tool": .string(tool)]
        if let arguments { o["arguments"] = .object(arguments) }
        return .object(o)
    }

    /// Bounds on a rule's patterns, so matching stays cheap (docs/protocol.md §17).
    public static let maxPatternCount = 16
    public static let maxPatternLength = 256
    /// A string argument longer than this never matches a glob.
    public static let maxMatchedValueLength = 4096
}

/// A rule to add: the tool and, optionally, argument patterns.
public struct ApprovalRuleSpec: Codable, Sendable, Hashable {
    public var tool: String
    public var arguments: [String: JSONValue]?

    public init(tool: String, arguments: [String: JSONValue]? = nil) {
        self.tool = tool
        self.arguments = arguments
    }
}

/// How far an `approveForSession` decision reaches: without `arguments`, every
/// call of the tool; with them, calls whose arguments match.
public struct ApprovalScope: Codable, Sendable, Hashable {
    public var arguments: [String: JSONValue]?
    public init(arguments: [String: JSONValue]? = nil) { self.arguments = arguments }
}

/// `session/setApprovalRules` params. `remove` is applied before `add`.
public struct SetApprovalRulesParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var add: [ApprovalRuleSpec]?
    /// Rule ids; an unknown id is `invalidParams` and nothing changes.
    public var remove: [String]?

    public init(sessionId: String, add: [ApprovalRuleSpec]? = nil, remove: [String]? = nil) {
        self.sessionId = sessionId
        self.add = add
        self.remove = remove
    }
}

/// `session/setApprovalRules` result: the rules now standing.
public struct SetApprovalRulesResult: Codable, Sendable, Hashable {
    public var rules: [ApprovalRule]
    public init(rules: [ApprovalRule]) { self.rules = rules }
}

/// `session/confirm` result: the rule an `approveForSession` decision added.
public struct SessionConfirmResult: Codable, Sendable, Hashable {
    public var rule: ApprovalRule?
    public init(rule: ApprovalRule? = nil) { self.rule = rule }
}

// MARK: - Asking the user

/// `user/ask` params.
public struct UserAskParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var turnId: String
    public var callId: String
    public var question: String
    /// Choices the model offered; the user may still answer in free text.
    public var options: [String]?
    /// Which time this question is asked: 2 when a parked turn continued asks
    /// again, and so on; absent the first time.
    public var attempt: Int?

    public init(sessionId: String, turnId: String, callId: String, question: String, options: [String]? = nil) {
        self.sessionId = sessionId
        self.turnId = turnId
        self.callId = callId
        self.question = question
        self.options = options
    }
}

/// `user/ask` result: the user's answer, which becomes the tool's output.
public struct UserAskResult: Codable, Sendable, Hashable {
    public var answer: String
    public init(answer: String) { self.answer = answer }
}

/// `user/elicit` params: the server's message and the form it asks to be filled
/// (a flat JSON Schema object of strings, numbers, booleans and enums).
public struct UserElicitParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var turnId: String
    /// The call the server was running when it asked.
    public var callId: String
    /// The MCP server's name, as the session's `mcpServers` gives it.
    public var server: String
    public var message: String
    public var requestedSchema: JSONValue

    public init(sessionId: String, turnId: String, callId: String, server: String, message: String, requestedSchema: JSONValue) {
        self.sessionId = sessionId
        self.turnId = turnId
        self.callId = callId
        self.server = server
        self.message = message
        self.requestedSchema = requestedSchema
    }
}

/// What the user did with an elicitation's form.
public enum ElicitAction: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    /// Filled in and sent: `content` holds the values.
    case accept
    /// Refused explicitly.
    case decline
    /// Dismissed without a choice.
    case cancel
}

/// `user/elicit` result, which goes back to the server as it is.
public struct UserElicitResult: Codable, Sendable, Hashable {
    public var action: ElicitAction
    /// The values, by the form's property names (with `accept` only).
    public var content: [String: JSONValue]?

    public init(action: ElicitAction, content: [String: JSONValue]? = nil) {
        self.action = action
        self.content = content
    }
}

// MARK: - Rewind

/// `session/rewind` params: exactly one of `toEntryId` (keep up to and including
/// that entry) and `turnId` (remove that turn and everything after it).
public struct SessionRewindParams: Codable, Sendable, Hashable {
    public var sessionId: String
    /// Keep the transcript up to this entry (also one a compaction summarized: it is put back first).
    public var toEntryId: String?
    /// Remove this turn's entries and everything after them (also a turn a compaction summarized).
    public var turnId: String?
    /// A `summary` entry's id: its compaction is undone, the entries it replaced put back in its
    /// place, and nothing else changes.
    public var compaction: String?
    /// Send `tool/undo`, newest first, for every undo record of the removed tool calls.
    public var undo: Bool

    public init(sessionId: String, toEntryId: String? = nil, turnId: String? = nil, compaction: String? = nil, undo: Bool) {
        self.sessionId = sessionId
        self.toEntryId = toEntryId
        self.turnId = turnId
        self.compaction = compaction
        self.undo = undo
    }
}

/// How one `tool/undo` of a rewind went.
public enum RewindUndoStatus: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case undone
    case failed
}

/// One undo a rewind sent, in the order sent (newest first).
public struct RewindUndo: Codable, Sendable, Hashable {
    public var turnId: String
    public var callId: String
    public var name: String
    public var status: RewindUndoStatus
    /// Why it failed: the client's error message, or that no answer came in time.
    public var error: String?

    public init(turnId: String, callId: String, name: String, status: RewindUndoStatus, error: String? = nil) {
        self.turnId = turnId
        self.callId = callId
        self.name = name
        self.status = status
        self.error = error
    }
}

/// `session/rewind` result.
public struct SessionRewindResult: Codable, Sendable, Hashable {
    public var revision: Int
    public var entryCount: Int
    /// The ids of the entries removed, in transcript order.
    public var removedEntries: [String]
    /// The undos sent (empty with `undo: false`).
    public var undos: [RewindUndo]
    /// The ids of the entries a compaction had replaced and the rewind put back; absent when none.
    public var restoredEntries: [String]?

    public init(revision: Int, entryCount: Int, removedEntries: [String], undos: [RewindUndo], restoredEntries: [String]? = nil) {
        self.revision = revision
        self.entryCount = entryCount
        self.removedEntries = removedEntries
        self.undos = undos
        self.restoredEntries = restoredEntries
    }
}
