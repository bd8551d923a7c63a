/// A JSON-RPC error code. Open (a struct, not an enum) so a peer's unknown codes
/// still round-trip; the named constants are every code of docs/protocol.md §13.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public init(_ rawValue: Int) { self.rawValue = rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(Int.self)
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
    public var description: String { String(rawValue) }

    public static let parseError = ErrorCode(-32700)
    public static let invalidRequest = ErrorCode(-32600)
    public static let methodNotFound = ErrorCode(-32601)
    public static let invalidParams = ErrorCode(-32602)
    public static let internalError = ErrorCode(-32603)
    public static let notInitialized = ErrorCode(-32002)
    public static let overloaded = ErrorCode(-32001)
    public static let cancelled = ErrorCode(-32800)
    public static let sessionNotFound = ErrorCode(-32010)
    public static let alreadyRunning = ErrorCode(-32011)
    public static let sessionBusy = ErrorCode(-32012)
    public static let revisionMismatch = ErrorCode(-32013)
    public static let noPendingConfirmation = ErrorCode(-32014)
    public static let noRunningTurn = ErrorCode(-32015)
    public static let turnMismatch = ErrorCode(-32016)
    public static let sessionLocked = ErrorCode(-32017)
    public static let maxToolCallsExceeded = ErrorCode(-32020)
    public static let maxRoundTripsExceeded = ErrorCode(-32021)
    public static let wallClockTimeoutExceeded = ErrorCode(-32022)
    public static let budgetExceeded = ErrorCode(-32023)
    public static let toolChoiceUnsupported = ErrorCode(-32030)
    public static let toolChoiceNotHonored = ErrorCode(-32031)
    public static let egressRefused = ErrorCode(-32040)
    public static let unreadableImageAttachment = ErrorCode(-32041)
    public static let regexBudgetExceeded = ErrorCode(-32042)
    public static let providerError = ErrorCode(-32050)
    public static let providerContractViolation = ErrorCode(-32051)
    public static let toolExecutorError = ErrorCode(-32060)
    public static let hookError = ErrorCode(-32061)
    public static let structuredOutput = ErrorCode(-32070)
    public static let storeUnavailable = ErrorCode(-32080)
    public static let journalUnreadable = ErrorCode(-32081)
}

/// The stable, machine-readable name of an error (`data.kind`). Clients switch on
/// this, never on the message.
public struct ErrorKind: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
    public var description: String { rawValue }

    public static let parseError: ErrorKind = "parseError"
    public static let invalidRequest: ErrorKind = "invalidRequest"
    public static let messageTooLarge: ErrorKind = "messageTooLarge"
    public static let methodNotFound: ErrorKind = "methodNotFound"
    public static let invalidParams: ErrorKind = "invalidParams"
    public static let invalidTranscript: ErrorKind = "invalidTranscript"
    public static let invalidConfiguration: ErrorKind = "invalidConfiguration"
    public static let internalError: ErrorKind = "internalError"
    public static let notInitialized: ErrorKind = "notInitialized"
    public static let cancelled: ErrorKind = "cancelled"
    public static let sessionNotFound: ErrorKind = "sessionNotFound"
    public static let alreadyRunning: ErrorKind = "alreadyRunning"
    public static let sessionBusy: ErrorKind = "sessionBusy"
    public static let revisionMismatch: ErrorKind = "revisionMismatch"
    public static let noPendingConfirmation: ErrorKind = "noPendingConfirmation"
    public static let noRunningTurn: ErrorKind = "noRunningTurn"
    public static let turnMismatch: ErrorKind = "turnMismatch"
    public static let maxToolCallsExceeded: ErrorKind = "maxToolCallsExceeded"
    public static let maxRoundTripsExceeded: ErrorKind = "maxRoundTripsExceeded"
    public static let wallClockTimeoutExceeded: ErrorKind = "wallClockTimeoutExceeded"
    /// A token or cost limit of the turn (`limits`) or of the session (`budget`) was passed.
    public static let budgetExceeded: ErrorKind = "budgetExceeded"
    public static let toolChoiceUnsupported: ErrorKind = "toolChoiceUnsupported"
    public static let toolChoiceNotHonored: ErrorKind = "toolChoiceNotHonored"
    public static let egressRefused: ErrorKind = "egressRefused"
    public static let unreadableImageAttachment: ErrorKind = "unreadableImageAttachment"
    public static let regexBudgetExceeded: ErrorKind = "regexBudgetExceeded"
    public static let providerError: ErrorKind = "providerError"
    public static let providerContractViolation: ErrorKind = "providerContractViolation"
    public static let toolExecutorError: ErrorKind = "toolExecutorError"
    public static let hookError: ErrorKind = "hookError"
    public static let structuredOutput: ErrorKind = "structuredOutput"
    public static let overloaded: ErrorKind = "overloaded"
    /// Another server process has the session loaded (`data.pid`).
    public static let sessionLocked: ErrorKind = "sessionLocked"
    /// The store could not be written or read (full disk, read-only, permissions).
    public static let storeUnavailable: ErrorKind = "storeUnavailable"
    /// A session's journal cannot be loaded (a newer format version, no valid first line).
    public static let journalUnreadable: ErrorKind = "journalUnreadable"

    /// Every kind of docs/protocol.md §13 with its code, in table order. The schema and
    /// the docs are generated from this list.
    public static let all: [(kind: ErrorKind, code: ErrorCode)] = [
        (.parseError, .parseError),
        (.invalidRequest, .invalidRequest),
        (.messageTooLarge, .invalidRequest),
        (.methodNotFound, .methodNotFound),
        (.invalidParams, .invalidParams),
        (.invalidTranscript, .invalidParams),
        (.invalidConfiguration, .invalidParams),
        (.internalError, .internalError),
        (.notInitialized, .notInitialized),
        (.cancelled, .cancelled),
        (.sessionNotFound, .sessionNotFound),
        (.alreadyRunning, .alreadyRunning),
        (.sessionBusy, .sessionBusy),
        (.revisionMismatch, .revisionMismatch),
        (.noPendingConfirmation, .noPendingConfirmation),
        (.noRunningTurn, .noRunningTurn),
        (.turnMismatch, .turnMismatch),
        (.maxToolCallsExceeded, .maxToolCallsExceeded),
        (.maxRoundTripsExceeded, .maxRoundTripsExceeded),
        (.wallClockTimeoutExceeded, .wallClockTimeoutExceeded),
        (.budgetExceeded, .budgetExceeded),
        (.toolChoiceUnsupported, .toolChoiceUnsupported),
        (.toolChoiceNotHonored, .toolChoiceNotHonored),
        (.egressRefused, .egressRefused),
        (.unreadableImageAttachment, .unreadableImageAttachment),
        (.regexBudgetExceeded, .regexBudgetExceeded),
        (.providerError, .providerError),
        (.providerContractViolation, .providerContractViolation),
        (.toolExecutorError, .toolExecutorError),
        (.hookError, .hookError),
        (.structuredOutput, .structuredOutput),
        (.overloaded, .overloaded),
        (.sessionLocked, .sessionLocked),
        (.storeUnavailable, .storeUnavailable),
        (.journalUnreadable, .journalUnreadable),
    ]
}

/// A JSON-RPC error object: `{code, message, data: {kind, ...}}`. Thrown by
/// handlers and the engine; becomes the `error` member of a response.
public struct RPCError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String
    /// Always an object carrying at least `kind`.
    public var data: [String: JSONValue]

    public init(code: ErrorCode, kind: ErrorKind, message: String, data: [String: JSONValue] = [:]) {
        self.code = code
        self.message = Self.cut(message)
        var d: [String: JSONValue] = [:]
        for (key, value) in data {
            // The turn's text so far is the answer itself, not an echo of the input.
            d[Self.cut(key)] = key == "partialText" ? value : Self.cut(value)
        }
        d["kind"] = .string(kind.rawValue)
        self.data = d
    }

    /// The longest string an error carries (in `message` and in each string of
    /// `data` but `partialText`), in UTF-8 bytes: an error echoes what it is
    /// about (a session id, a method name, a client's own error), and a
    /// 10 MB value must not come back as an answer larger than the request.
    /// Longer strings are cut on a character boundary and end in "…".
    public static let maxEchoedStringBytes = 1024

    static func cut(_ text: String) -> String {
        guard text.utf8.count > maxEchoedStringBytes else { return text }
        var kept = 0
        var end = text.startIndex
        // Keep room for the 3 bytes of "…".
        for index in text.indices {
            let size = text[index].utf8.count
            if kept + size > maxEchoedStringBytes - 3 { break }
            kept += size
            end = text.index(after: index)
        }
        return String(text[..<end]) + "…"
    }

    static func cut(_ value: JSONValue) -> JSONValue {
        switch value {
        case .string(let s): return .string(cut(s))
        case .array(let items): return .array(items.map { cut($0) })
        case .object(let members):
            var out: [String: JSONValue] = [:]
            for (k, v) in members { out[cut(k)] = cut(v) }
            return .object(out)
        default: return value
        }
    }

    /// An error whose code is the standard one for `kind`.
    public init(_ kind: ErrorKind, _ message: String, data: [String: JSONValue] = [:]) {
        let code = ErrorKind.all.first { $0.kind == kind }?.code ?? .internalError
        self.init(code: code, kind: kind, message: message, data: data)
    }

    public var kind: ErrorKind { ErrorKind(rawValue: data["kind"]?.stringValue ?? "") }
    public var description: String { "\(code.rawValue) \(kind): \(message)" }

    public var json: JSONValue {
        .object(["code": .int(code.rawValue), "message": .string(message), "data": .object(data)])
    }

    /// Reads an error object from the wire. A peer's error without `data.kind`
    /// keeps its code and message; its kind is then empty.
    public init?(json: JSONValue) {
        guard case .object(let o) = json, let code = o["code"]?.intValue else { return nil }
        self.code = ErrorCode(code)
        self.message = o["message"]?.stringValue ?? ""
        self.data = o["data"]?.objectValue ?? [:]
    }

    // Common constructors, so call sites read as the table in docs/protocol.md §13.
    public static func invalidParams(_ message: String, field: String? = nil) -> RPCError {
        var data: [String: JSONValue] = [:]
        if let field { data["field"] = .string(field) }
        return RPCError(.invalidParams, message, data: data)
    }
    public static func invalidConfiguration(_ message: String, field: String? = nil) -> RPCError {
        var data: [String: JSONValue] = [:]
        if let field { data["field"] = .string(field) }
        return RPCError(.invalidConfiguration, message, data: data)
    }
    public static func internalError(_ message: String) -> RPCError { RPCError(.internalError, message) }
    public static func methodNotFound(_ method: String) -> RPCError {
        RPCError(.methodNotFound, "unknown method '\(method)'", data: ["method": .string(method)])
    }
    public static func cancelled(_ message: String = "request cancelled", data: [String: JSONValue] = [:]) -> RPCError {
        RPCError(.cancelled, message, data: data)
    }
    public static func sessionNotFound(_ id: String) -> RPCError {
        RPCError(.sessionNotFound, "no session '\(id)'", data: ["sessionId": .string(id)])
    }
}
