/// Which side sends a method.
public enum MethodDirection: String, Sendable, Hashable {
    case clientToServer
    case serverToClient
}

/// When in the connection's life the server accepts a client's request or
/// notification (docs/protocol.md §2). Anything else is refused with
/// `notInitialized` before `initialize` and `invalidRequest` after `shutdown`.
public struct MethodLifecycle: Sendable, Hashable {
    /// Accepted before `initialize` was received.
    public var beforeInitialize: Bool
    /// Accepted once initialized (false for `initialize`, which comes once).
    public var whileRunning: Bool
    /// Accepted after `shutdown`: reads, `session/close`, `shutdown` again, `exit`.
    public var afterShutdown: Bool

    public init(beforeInitialize: Bool, whileRunning: Bool, afterShutdown: Bool) {
        self.beforeInitialize = beforeInitialize
        self.whileRunning = whileRunning
        self.afterShutdown = afterShutdown
    }

    /// Most methods: after `initialize`, until `shutdown`.
    public static let running = MethodLifecycle(beforeInitialize: false, whileRunning: true, afterShutdown: false)
    /// Reads and closing, which a client may still need while the server shuts down.
    public static let runningAndAfterShutdown = MethodLifecycle(beforeInitialize: false, whileRunning: true, afterShutdown: true)
    /// `initialize`: first, and once.
    public static let first = MethodLifecycle(beforeInitialize: true, whileRunning: false, afterShutdown: false)
    /// `exit`.
    public static let always = MethodLifecycle(beforeInitialize: true, whileRunning: true, afterShutdown: true)
}

/// A JSON-RPC request type: its wire name and its typed params and result.
/// One file per method family declares these; `MethodRegistry` lists them all,
/// and a test checks that the server has a handler for each client → server one.
public protocol RPCMethod: Sendable {
    associatedtype Params: Codable & Sendable
    associatedtype Result: Codable & Sendable
    static var name: String { get }
    static var direction: MethodDirection { get }
    /// When the server accepts it (client → server only); default `.running`.
    static var lifecycle: MethodLifecycle { get }
    /// The params read without the decoder (`DirectlyReadParams`), or nil to
    /// decode them. Picked where a method is declared, so no call asks the
    /// params type for the conformance (a dynamic cast scans every conformance
    /// record of every image the first time each type is asked).
    static func directlyRead(_ params: JSONValue) -> Params?
}

/// A JSON-RPC notification type.
public protocol RPCNotification: Sendable {
    associatedtype Params: Codable & Sendable
    static var name: String { get }
    static var direction: MethodDirection { get }
    /// When the server accepts it (client → server only); default `.running`.
    static var lifecycle: MethodLifecycle { get }
}

extension RPCMethod {
    public static var lifecycle: MethodLifecycle { .running }
    public static func directlyRead(_ params: JSONValue) -> Params? { nil }
}

extension RPCMethod where Params: DirectlyReadParams {
    public static func directlyRead(_ params: JSONValue) -> Params? { Params(directly: params) }
}

extension RPCNotification {
    public static var lifecycle: MethodLifecycle { .running }
}

/// Params or result that carry nothing: encodes as `{}` and accepts `{}`/absent.
public struct Empty: Codable, Sendable, Hashable {
    public init() {}
}

/// A result that is JSON `null` (e.g. `shutdown`).
public struct NullResult: Codable, Sendable, Hashable {
    public init() {}
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        guard c.decodeNil() else {
            throw DecodingError.typeMismatch(NullResult.self, .init(codingPath: decoder.codingPath, debugDescription: "expected null"))
        }
    }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encodeNil()
    }
}

/// A type whose JSON shape the schema generator cannot discover by probing its
/// `Decodable` conformance (a custom `init(from:)` that branches on the JSON,
/// an enum with associated values, free-form JSON). It states its schema here,
/// next to the decoding code, so the two are read and changed together.
public protocol JSONSchemaProviding {
    /// A JSON Schema (draft 2020-12) for this type's JSON form. It may use
    /// `{"$ref": "#/$defs/Name"}` for other types listed in `jsonSchemaDependencies`.
    static var jsonSchema: JSONValue { get }
    /// Types referenced from `jsonSchema` by `$ref`, so the generator emits them in `$defs`.
    static var jsonSchemaDependencies: [any Decodable.Type] { get }
}

extension JSONSchemaProviding {
    public static var jsonSchemaDependencies: [any Decodable.Type] { [] }
}

/// A string-valued enum; the schema generator emits `{"type":"string","enum":[...]}`.
public protocol JSONSchemaStringEnum: CaseIterable, RawRepresentable, Codable where RawValue == String {}
