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
            let slash = UInt8(ascii: "/")
            var at = copy(sessionId, into: buffer, at: 0)
            buffer[at] = slash
            at = copy(turnId, into: buffer, at: at + 1)
            buffer[at] = slash
            at = copy(number, into: buffer, at: at + 1)
            buffer[at] = slash
            return copy(callId, into: buffer, at: at + 1)
        }
    }

    /// Copies `part`'s bytes whole from its storage (made contiguous if it is
    /// not) to `buffer` at `offset`; returns the offset after them. A function
    /// of its own, not a closure over the offset: a captured variable costs a
    /// dynamic exclusivity check at every use (eight per call).
    private static func copy(_ part: String, into buffer: UnsafeMutableBufferPointer<UInt8>, at offset: Int) -> Int {
        var part = part
        return part.withUTF8 { bytes in
            guard let from = bytes.baseAddress, let to = buffer.baseAddress else { return offset }
            (to + offset).initialize(from: from, count: bytes.count)
            return offset + bytes.count
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

    /// Appends `json`'s text (members in sorted order) without building it:
    /// the params of every `tool/call` (a test pins both to one form).
    public func write(into out: inout [UInt8]) {
        JSONObjectWriter.write(into: &out) { o in
            o.value("arguments", arguments)
            o.int("attempt", attempt)
            o.string("callId", callId)
            o.string("idempotencyKey", idempotencyKey)
            o.value("inDoubt", inDoubt.map(JSONValue.bool))
            o.string("name", name)
            o.int("revision", revision)
            o.string("sessionId", sessionId)
            o.string("turnId", turnId)
        }
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
        if case .object(let o) = value {
            // The members are walked once, not looked up by hashing each name.
            var outcome: ToolOutcome?
            var content: JSONValue?
            var undo: JSONValue?
            for (key, member) in o {
                switch key {
                case "outcome": if case .string(let raw) = member { outcome = ToolOutcome(rawValue: raw) }
                case "content": content = member
                case "undo": undo = member
                default: break
                }
            }
            if let outcome, let content {
                self.init(outcome: outcome, content: content, undo: undo == .null ? nil : undo)
                return
            }
        }
        self = try value.decode(as: ToolCallResult.self)
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

// MARK: - Images and audio in tool results

/// What a media block holds.
public enum MediaKind: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case image
    case audio
}

/// An image or audio clip in a tool's result, in MCP's content block form
/// (`{type, mimeType, data}`, `data` base64). A client tool returns it as an
/// element of a `content` array; an MCP server's result carries it as a content
/// block; `toolCallFinished.media` hands it to the client. The transcript keeps
/// a `MediaReference` to it instead (docs/protocol.md, "Images in tool results").
public struct MediaContent: Codable, Sendable, Hashable {
    public var type: MediaKind
    public var mimeType: String
    /// Base64.
    public var data: String

    public init(type: MediaKind, mimeType: String, data: String) {
        self.type = type
        self.mimeType = mimeType
        self.data = data
    }

    /// The block when `block` is one: `type` image or audio, with string
    /// `mimeType` and `data`. Anything else (text, a resource, a malformed
    /// block) is not media and stays where it is.
    public init?(block: JSONValue) {
        guard case .object(let o) = block, case .string(let kind)? = o["type"], let type = MediaKind(rawValue: kind),
            case .string(let mimeType)? = o["mimeType"], case .string(let data)? = o["data"]
        else { return nil }
        self.init(type: type, mimeType: mimeType, data: data)
    }

    public var json: JSONValue { ["type": .string(type.rawValue), "mimeType": .string(mimeType), "data": .string(data)] }
}

/// A tool's image or audio clip as the transcript keeps it: the bytes are
/// stored once beside the session's journal, named by `sha256` (the
/// hexadecimal SHA-256 of the decoded bytes), and read when a request is built.
public struct MediaReference: Codable, Sendable, Hashable, JSONSchemaProviding {
    public var type: MediaKind
    public var mimeType: String
    public var sha256: String
    /// The decoded size in bytes.
    public var size: Int

    public init(type: MediaKind, mimeType: String, sha256: String, size: Int) {
        self.type = type
        self.mimeType = mimeType
        self.sha256 = sha256
        self.size = size
    }

    public var json: JSONValue {
        ["type": .string(type.rawValue), "mimeType": .string(mimeType), "sha256": .string(sha256), "size": .int(size)]
    }

    /// Reads `json`'s form; what is not one throws, naming the member.
    public init(json value: JSONValue) throws(JSONDecodingFailure) {
        guard case .object(let o) = value else { throw JSONDecodingFailure(path: "", message: "expected an object") }
        guard case .string(let kind)? = o["type"], let type = MediaKind(rawValue: kind) else {
            throw JSONDecodingFailure(path: "type", message: "expected \"image\" or \"audio\"")
        }
        guard case .string(let mimeType)? = o["mimeType"] else { throw JSONDecodingFailure(path: "mimeType", message: "expected a string") }
        guard case .string(let sha256)? = o["sha256"], MediaReference.isDigest(sha256) else {
            throw JSONDecodingFailure(path: "sha256", message: "expected 64 lowercase hexadecimal digits")
        }
        guard let size = o["size"]?.intValue, size >= 0 else { throw JSONDecodingFailure(path: "size", message: "expected a non-negative integer") }
        self.init(type: type, mimeType: mimeType, sha256: sha256, size: size)
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let sha256 = try c.decode(String.self, forKey: .sha256)
        guard MediaReference.isDigest(sha256) else {
            throw DecodingError.dataCorruptedError(forKey: .sha256, in: c, debugDescription: "expected 64 lowercase hexadecimal digits")
        }
        let size = try c.decode(Int.self, forKey: .size)
        guard size >= 0 else { throw DecodingError.dataCorruptedError(forKey: .size, in: c, debugDescription: "expected a non-negative integer") }
        self.init(type: try c.decode(MediaKind.self, forKey: .type), mimeType: try c.decode(String.self, forKey: .mimeType), sha256: sha256, size: size)
    }

    public static var jsonSchema: JSONValue {
        WireSchema.object(
            [
                "type": WireSchema.ref(MediaKind.self), "mimeType": WireSchema.string,
                "sha256": WireSchema.describe(["type": "string", "pattern": "^[0-9a-f]{64}$"], "The SHA-256 of the decoded bytes, in hexadecimal."),
                "size": WireSchema.describe(["type": "integer", "minimum": 0], "The decoded size in bytes."),
            ],
            required: ["type", "mimeType", "sha256", "size"])
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [MediaKind.self] }

    /// A digest names a file in the store: nothing but 64 lowercase hex digits may.
    public static func isDigest(_ s: String) -> Bool {
        s.utf8.count == 64 && s.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}
