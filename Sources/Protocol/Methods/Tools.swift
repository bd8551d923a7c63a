// Server → client tool execution (docs/protocol.md §5).

/// `tool/call`: the client runs a tool. An error answer is a thrown executor
/// error and ends the turn; outcomes other than `ok` are fed back to the model.
public enum ToolCallRequest: RPCMethod {
    public static let name = "tool/call"
    public static let direction = MethodDirection.serverToClient
    public typealias Params = ToolCallParams
    public typealias Result = ToolCallResult
}

/// `tool/undo`: rolls back an `ok` call whose result carried `undo`, newest first.
public enum ToolUndoRequest: RPCMethod {
    public static let name = "tool/undo"
    public static let direction = MethodDirection.serverToClient
    public typealias Params = ToolUndoParams
    public typealias Result = Empty
}

/// `tool/progress`: the client reports how far a `tool/call` it is running has
/// come; the server sends it on as a `toolProgress` event (at most ~10 a second
/// per call). A notification about a call that is not running is ignored.
public enum ToolProgressNotification: RPCNotification {
    public static let name = "tool/progress"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = ToolProgressParams
}

/// `tool/progress` params: the call (`callId` of its `tool/call`) and how far it is.
public struct ToolProgressParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var callId: String
    /// Rises as the work goes on; its unit is the tool's.
    public var progress: Double
    /// What `progress` counts up to, when known.
    public var total: Double?
    /// A sentence about the current step.
    public var message: String?

    public init(sessionId: String, callId: String, progress: Double, total: Double? = nil, message: String? = nil) {
        self.sessionId = sessionId
        self.callId = callId
        self.progress = progress
        self.total = total
        self.message = message
    }
}

/// `tool/call` params.
public struct ToolCallParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var turnId: String
    public var callId: String
    public var name: String
    public var arguments: JSONValue
    /// The transcript revision when the call was made.
    public var revision: Int
    /// Names this call for good: the same for every send of it, in this process
    /// or another, and no other call's. A host that keeps what it ran by this key
    /// can tell a call it already ran (docs/protocol.md, "Durable sessions").
    public var idempotencyKey: String
    /// Which send of this call it is, from the second on (a parked or crashed
    /// turn's call sent again by `session/continue`); absent on the first.
    public var attempt: Int?
    /// True when the call was sent before and no result was recorded: it may
    /// have run. Look `idempotencyKey` up before running it again.
    public var inDoubt: Bool?

    public init(
        sessionId: String, turnId: String, callId: String, name: String, arguments: JSONValue, revision: Int, idempotencyKey: String,
        attempt: Int? = nil, inDoubt: Bool? = nil
    ) {
        self.sessionId = sessionId
        self.turnId = turnId
        self.callId = callId
        self.name = name
        self.arguments = arguments
        self.revision = revision
        self.idempotencyKey = idempotencyKey
        self.attempt = attempt
        self.inDoubt = inDoubt
    }

    /// A call's key: its session, its turn, the turn's round trip that made it
    /// (a model may reuse a call id in the next one) and its call id.
    public static func idempotencyKey(sessionId: String, turnId: String, roundTrip: Int, callId: String) -> String {
        // One is made per call: its bytes are copied into one string of the
        // right size (`+` made a string per step, `append` is not much cheaper).
        let number = String(roundTrip)
        let size = sessionId.utf8.count + turnId.utf8.count + number.utf8.count + callId.utf8.count + 3
        return String(unsafeUninitializedCapacity: size) { buffer in
            var at = 0
            func put(_ part: String, slash: Bool) {
                for byte in part.utf8 {
                    buffer[at] = byte
                    at += 1
                }
                if slash {
                    buffer[at] = UInt8(ascii: "/")
                    at += 1
                }
            }
            put(sessionId, slash: true)
            put(turnId, slash: true)
            put(number, slash: true)
            put(callId, slash: false)
            return at
        }
    }

    /// The wire form, built directly: one is sent per tool call, so it skips the
    /// Codable encoder (a test pins it to the Codable form).
    public var json: JSONValue {
        var members: [String: JSONValue] = [
            "sessionId": .string(sessionId), "turnId": .string(turnId), "callId": .string(callId),
            "name": .string(name), "arguments": arguments, "revision": .int(revision), "idempotencyKey": .string(idempotencyKey),
        ]
        if let attempt { members["attempt"] = .int(attempt) }
        if let inDoubt { members["inDoubt"] = .bool(inDoubt) }
        return .object(members)
    }
}

/// `tool/call` result.
public struct ToolCallResult: Codable, Sendable, Hashable {
    public var outcome: ToolOutcome
    /// What the model sees: a string or any JSON.
    public var content: JSONValue
    /// Opaque data handed back in `tool/undo` if the turn rolls back.
    public var undo: JSONValue?

    public init(outcome: ToolOutcome, content: JSONValue, undo: JSONValue? = nil) {
        self.outcome = outcome
        self.content = content
        self.undo = undo
    }

    /// Reads the answer to a `tool/call` (one per tool call) directly: the
    /// Codable decoder makes its containers and coding paths per answer.
    /// Whatever this does not accept at once goes through that decoder, so a
    /// malformed answer fails with its words (a test pins both to agree).
    public init(json value: JSONValue) throws(JSONDecodingFailure) {
        if case .object(let o) = value, case .string(let raw)? = o["outcome"], let outcome = ToolOutcome(rawValue: raw),
            let content = o["content"]
        {
            let undo = o["undo"]
            self.init(outcome: outcome, content: content, undo: undo == .null ? nil : undo)
        } else {
            self = try value.decode(as: ToolCallResult.self)
        }
    }
}

/// `tool/undo` params.
public struct ToolUndoParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var turnId: String
    public var callId: String
    public var name: String
    /// The `undo` value the call returned.
    public var undo: JSONValue

    public init(sessionId: String, turnId: String, callId: String, name: String, undo: JSONValue) {
        self.sessionId = sessionId
        self.turnId = turnId
        self.callId = callId
        self.name = name
        self.undo = undo
    }
}
