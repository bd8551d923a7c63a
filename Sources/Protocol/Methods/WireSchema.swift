/// Small builders for the hand-written schemas of union types, so each
/// `jsonSchema` reads like the JSON it describes.
enum WireSchema {
    /// `{"$ref": "#/$defs/Name"}`; the generator names defs `String(describing: T.self)`.
    static func ref(_ type: Any.Type) -> JSONValue {
        ["$ref": .string("#/$defs/" + String(describing: type))]
    }

    static let string: JSONValue = ["type": "string"]
    static let integer: JSONValue = ["type": "integer"]
    static let number: JSONValue = ["type": "number"]
    static let boolean: JSONValue = ["type": "boolean"]
    static let trueConst: JSONValue = ["const": true]
    /// Any JSON value (free-form fields such as tool arguments).
    static let any: JSONValue = [:]
    static let nullableString: JSONValue = ["type": ["string", "null"]]
    static let freeObject: JSONValue = ["type": "object"]

    static func array(_ items: JSONValue) -> JSONValue {
        ["type": "array", "items": items]
    }

    static func map(_ values: JSONValue) -> JSONValue {
        ["type": "object", "additionalProperties": values]
    }

    static func const(_ value: String) -> JSONValue {
        ["const": .string(value)]
    }

    static func stringEnum(_ values: [String]) -> JSONValue {
        ["type": "string", "enum": .array(values.map { .string($0) })]
    }

    /// A closed object: unknown members are refused, as the decoder refuses them.
    static func object(_ properties: [String: JSONValue], required: [String] = [], additional: Bool = false) -> JSONValue {
        var o: [String: JSONValue] = ["type": "object", "properties": .object(properties)]
        if !required.isEmpty { o["required"] = .array(required.map { .string($0) }) }
        o["additionalProperties"] = .bool(additional)
        return .object(o)
    }

    static func oneOf(_ alternatives: [JSONValue]) -> JSONValue {
        ["oneOf": .array(alternatives)]
    }

    static func anyOf(_ alternatives: [JSONValue]) -> JSONValue {
        ["anyOf": .array(alternatives)]
    }

    static func describe(_ schema: JSONValue, _ text: String) -> JSONValue {
        guard case .object(var o) = schema else { return schema }
        o["description"] = .string(text)
        return .object(o)
    }
}

/// Thrown by the hand-written `init(from:)` of unions when none of the known
/// shapes fits; a plain `DecodingError` so the server maps it like any other.
func unionMismatch<T>(_ type: T.Type, _ decoder: any Decoder, _ expected: String) -> DecodingError {
    DecodingError.dataCorrupted(.init(
        codingPath: decoder.codingPath,
        debugDescription: "\(String(describing: type)): expected \(expected)"))
}
