/// Which side sends a method.
public enum MethodDirection: String, Sendable, Hashable {
    case clientToServer
    case serverToClient
}

/// A JSON-RPC request type: its wire name and its typed params and result.
/// One file per method family declares these; `MethodRegistry` lists them all.
public protocol RPCMethod: Sendable {
    associatedtype Params: Codable & Sendable
    associatedtype Result: Codable & Sendable
    static var name: String { get }
    static var direction: MethodDirection { get }
}

/// A JSON-RPC notification type.
public protocol RPCNotification: Sendable {
    associatedtype Params: Codable & Sendable
    static var name: String { get }
    static var direction: MethodDirection { get }
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
