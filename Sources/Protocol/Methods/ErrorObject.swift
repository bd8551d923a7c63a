// The typed, schema-bearing form of a JSON-RPC error object (docs/protocol.md §13).
// The engine throws `RPCError`; this mirror exists so the schema and clients
// can name the fields of `data`, and converts both ways.

/// A JSON-RPC error object: `{code, message, data: {kind, ...}}`.
public struct ErrorObject: Codable, Sendable, Hashable, JSONSchemaProviding {
    public var code: Int
    public var message: String
    public var data: ErrorData

    public init(code: Int, message: String, data: ErrorData) {
        self.code = code
        self.message = message
        self.data = data
    }

    public init(_ error: RPCError) {
        var members = error.data
        members["kind"] = nil
        self.init(code: error.code.rawValue, message: error.message, data: ErrorData(kind: error.kind, members: members))
    }

    public var rpcError: RPCError {
        RPCError(code: ErrorCode(code), kind: data.kind, message: message, data: data.members)
    }

    public static var jsonSchema: JSONValue {
        WireSchema.object(
            ["code": WireSchema.integer, "message": WireSchema.string, "data": WireSchema.ref(ErrorData.self)],
            required: ["code", "message", "data"])
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [ErrorData.self] }
}

/// An error's `data`: the stable `kind` plus kind-specific members (`turnId`,
/// `partialText`, `limit`, `provider`, `rule`, `index`, `reason`, `path`, `field`).
public struct ErrorData: Codable, Sendable, Hashable, JSONSchemaProviding {
    public var kind: ErrorKind
    /// Every member except `kind`.
    public var members: [String: JSONValue]

    public init(kind: ErrorKind, members: [String: JSONValue] = [:]) {
        self.kind = kind
        self.members = members
    }

    public init(from decoder: any Decoder) throws {
        var all = try [String: JSONValue](from: decoder)
        guard let kind = all.removeValue(forKey: "kind")?.stringValue else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "error data needs a string 'kind'"))
        }
        self.init(kind: ErrorKind(rawValue: kind), members: all)
    }

    public func encode(to encoder: any Encoder) throws {
        var all = members
        all["kind"] = .string(kind.rawValue)
        try JSONValue.object(all).encode(to: encoder)
    }

    /// `data.provider`, when this is a provider error.
    public var provider: JSONValue? { members["provider"] }

    public static var jsonSchema: JSONValue {
        let s = WireSchema.string
        var o = WireSchema.object(
            [
                "kind": WireSchema.stringEnum(ErrorKind.all.map(\.kind.rawValue)),
                "turnId": s,
                "partialText": s,
                "limit": WireSchema.describe(WireSchema.number, "The limit exceeded (a count, or seconds for wallClockTimeoutExceeded)."),
                "provider": WireSchema.ref(ProviderErrorInfo.self),
                "rule": WireSchema.describe(s, "The egress rule that refused the request."),
                "index": WireSchema.describe(WireSchema.integer, "The index of the unreadable image."),
                "reason": WireSchema.describe(s, "structuredOutput: unsupported, invalidJSON or schemaViolation."),
                "path": WireSchema.describe(s, "JSON Pointer of a schema violation."),
                "field": WireSchema.describe(s, "The offending params or configuration field."),
            ],
            required: ["kind"], additional: true)
        if case .object(var members) = o {
            members["description"] = "The stable kind (clients switch on it, never on the message) plus kind-specific members."
            o = .object(members)
        }
        return o
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [ProviderErrorInfo.self] }
}

/// `data.provider` of a `providerError`: what a cloud API said, with retry guidance.
public struct ProviderErrorInfo: Codable, Sendable, Hashable {
    public var code: ProviderErrorCode
    public var httpStatus: Int?
    public var retryGuidance: RetryGuidance
    public var isRetryable: Bool
    public var requiresUserAction: Bool
    /// Safe to show a user; never contains secrets.
    public var safeDescription: String
    /// The provider's own text; log it, never parse it.
    public var unsafeMessage: String
    /// `cassetteMiss` only: why the model cassette had no answer.
    public var cassette: CassetteMiss?

    public init(
        code: ProviderErrorCode, httpStatus: Int? = nil, retryGuidance: RetryGuidance, isRetryable: Bool,
        requiresUserAction: Bool, safeDescription: String, unsafeMessage: String, cassette: CassetteMiss? = nil
    ) {
        self.cassette = cassette
        self.code = code
        self.httpStatus = httpStatus
        self.retryGuidance = retryGuidance
        self.isRetryable = isRetryable
        self.requiresUserAction = requiresUserAction
        self.safeDescription = safeDescription
        self.unsafeMessage = unsafeMessage
    }

    /// The guidance and flags docs/protocol.md §13 prescribes for `code`.
    /// `retryAfter` is the provider's hint in seconds; without one `afterSeconds`
    /// is absent (the client picks its backoff). `shouldRetry: false` is the
    /// provider's `x-should-retry: false`: no retry, whatever the code.
    public init(
        code: ProviderErrorCode, httpStatus: Int? = nil, retryAfter: Double? = nil, shouldRetry: Bool? = nil,
        safeDescription: String, unsafeMessage: String, cassette: CassetteMiss? = nil
    ) {
        let kind = shouldRetry == false ? .none : code.retryGuidanceKind
        self.init(
            code: code, httpStatus: httpStatus,
            retryGuidance: RetryGuidance(kind: kind, afterSeconds: kind == .retryWithBackoff ? retryAfter : nil),
            isRetryable: kind != .none, requiresUserAction: code.requiresUserAction,
            safeDescription: safeDescription, unsafeMessage: unsafeMessage, cassette: cassette)
    }
}

/// A provider error's stable code.
public enum ProviderErrorCode: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case authExpired
    case authUserInvalid
    case entitlementRequired
    case quotaExceeded
    case rateLimited
    case modelUnavailable
    case providerError
    case providerUnavailable
    case serviceUnavailable
    case internalError
    case streamTruncated
    case badRequest
    case contextLengthExceeded
    case contentFiltered
    case network
    /// A model cassette in replay had no recorded answer for the request (`data.provider.cassette` says why).
    case cassetteMiss

    /// `retryWithBackoff` for the transient codes (`quotaExceeded` through
    /// `streamTruncated`, and `network`), `refreshAuthThenRetry` for `authExpired`.
    public var retryGuidanceKind: RetryGuidanceKind {
        switch self {
        case .authExpired: return .refreshAuthThenRetry
        case .rateLimited, .modelUnavailable, .providerError, .providerUnavailable,
            .serviceUnavailable, .internalError, .streamTruncated, .network:
            return .retryWithBackoff
        case .quotaExceeded, .authUserInvalid, .entitlementRequired, .badRequest, .contextLengthExceeded, .contentFiltered, .cassetteMiss:
            // quotaExceeded (insufficient_quota, billing): waiting does not refill an account.
            return .none
        }
    }

    public var requiresUserAction: Bool { self == .authUserInvalid || self == .entitlementRequired || self == .quotaExceeded }
}

/// What a client may do about a provider error.
public struct RetryGuidance: Codable, Sendable, Hashable {
    public var kind: RetryGuidanceKind
    public var afterSeconds: Double?

    public init(kind: RetryGuidanceKind, afterSeconds: Double? = nil) {
        self.kind = kind
        self.afterSeconds = afterSeconds
    }
}

/// The kind of retry guidance.
public enum RetryGuidanceKind: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case refreshAuthThenRetry
    case retryWithBackoff
    case none
}

/// An `RPCError` inside a wire type (the `retrying` and `turnEnded` events)
/// travels as its error object, so its schema is `ErrorObject`'s.
extension RPCError: Codable, JSONSchemaProviding, JSONValueRepresentable {
    public init(from decoder: any Decoder) throws { self = try ErrorObject(from: decoder).rpcError }
    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }
    public static var jsonSchema: JSONValue { WireSchema.ref(ErrorObject.self) }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [ErrorObject.self] }
}
