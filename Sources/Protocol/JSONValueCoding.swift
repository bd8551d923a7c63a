// A Decoder and an Encoder that work directly on `JSONValue`, so typed params
// and results never take a detour through bytes and Foundation's JSONDecoder,
// and so decoding errors can name the exact field (`model.script[2].text`).

// MARK: - Decoding

/// Why a `JSONValue` could not be decoded into a Swift type, and where.
///
/// Every error that `JSONValueDecoder` throws is one of these: errors from
/// custom `init(from:)` implementations (including `DecodingError`) are
/// converted, keeping the path where they were thrown.
public struct JSONDecodingFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where in the document the problem is, like `model.script[2].text`; empty for the root.
    public var path: String
    /// What is wrong, like `expected string, got integer`, `missing required field`, `unknown field`.
    public var message: String

    /// A failure at `path` (dotted keys, `[n]` for array elements).
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    /// `path: message`, or just the message at the root.
    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// Decodes `Decodable` types from a `JSONValue` with strict JSON types.
///
/// - `Bool` only from `true`/`false`; `String` only from a string.
/// - `Int` and the other fixed-width integers from an integer, or from a number
///   that is integral and in range (`2.0`); never from a string.
/// - `Double`/`Float` from any number.
/// - Optionals: an absent key or `null` is `nil`.
/// - A `JSONValue` field takes its JSON verbatim.
public struct JSONValueDecoder: Sendable {
    /// When set, an object key that the decoding type never asked about (through
    /// `decode`, `decodeIfPresent`, `contains`, `decodeNil` or a nested container)
    /// fails the whole decode with `unknown field` at that key's path. Objects read
    /// through `allKeys` (dictionaries) count as fully read, and nothing inside a
    /// `JSONValue` is checked. The failure names the first unknown path in sorted order.
    public var rejectUnknownKeys = false

    /// A lenient decoder; set `rejectUnknownKeys` to make it strict about fields.
    public init() {}

    /// Decodes `type` from `value`; every error thrown is a `JSONDecodingFailure`.
    public func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws(JSONDecodingFailure) -> T {
        let state = DecodingState(rejectUnknownKeys: rejectUnknownKeys)
        let result: T
        do {
            result = try state.unbox(type, from: value, path: [])
        } catch {
            throw DecodingState.failure(from: error, path: [])
        }
        if let unknown = state.firstUnknownKey() {
            throw JSONDecodingFailure(path: unknown, message: "unknown field")
        }
        return result
    }
}

/// The coding key of an array element; printed as `[n]` in paths.
struct ArrayIndexKey: CodingKey {
    let index: Int
    init(_ index: Int) { self.index = index }
    init?(stringValue: String) { return nil }
    init?(intValue: Int) { self.index = intValue }
    var stringValue: String { "Index \(index)" }
    var intValue: Int? { index }
}

/// A key with a fixed name, for `super` and for synthetic keys.
struct NamedKey: CodingKey {
    let stringValue: String
    init(_ name: String) { self.stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { self.stringValue = String(intValue) }
    var intValue: Int? { nil }
}

/// Renders a coding path the way error messages show it: `a.b[2].c`.
func renderPath(_ path: [any CodingKey]) -> String {
    var out = ""
    for key in path {
        if let index = key as? ArrayIndexKey {
            out += "[\(index.index)]"
        } else {
            if !out.isEmpty { out += "." }
            out += key.stringValue
        }
    }
    return out
}

/// State shared by every decoder and container of one `decode` call: the
/// bookkeeping of which object keys were asked about.
final class DecodingState {
    /// The keys of one JSON object and which of them the decoding code asked about.
    final class ObjectUse {
        let keys: [String]
        var consumed: Set<String> = []
        var allKeysRead = false
        init(keys: [String]) { self.keys = keys }
    }

    let rejectUnknownKeys: Bool
    /// Keyed by rendered path, so several containers over the same object (a custom
    /// `init(from:)` that looks twice, `superDecoder`) pool what they read.
    private var objects: [String: ObjectUse] = [:]

    init(rejectUnknownKeys: Bool) { self.rejectUnknownKeys = rejectUnknownKeys }

    /// The bookkeeping record for the object at `path`, or nil when not checking keys.
    func use(of object: [String: JSONValue], at path: [any CodingKey]) -> ObjectUse? {
        guard rejectUnknownKeys else { return nil }
        let rendered = renderPath(path)
        if let existing = objects[rendered] { return existing }
        let use = ObjectUse(keys: Array(object.keys))
        objects[rendered] = use
        return use
    }

    /// The sorted-first path of a key nobody asked about.
    func firstUnknownKey() -> String? {
        var unknown: [String] = []
        for (path, use) in objects where !use.allKeysRead {
            for key in use.keys where !use.consumed.contains(key) {
                unknown.append(path.isEmpty ? key : "\(path).\(key)")
            }
        }
        return unknown.min()
    }

    /// Decodes any `Decodable` from `value`: scalars directly, everything else
    /// through its `init(from:)` over a fresh decoder at `path`.
    func unbox<T: Decodable>(_ type: T.Type, from value: JSONValue, path: [any CodingKey]) throws -> T {
        if let scalar = try unboxScalar(type, from: value, path: path) { return scalar }
        let decoder = ValueDecoder(value: value, codingPath: path, state: self)
        let result: T
        do {
            result = try T(from: decoder)
        } catch let failure as JSONDecodingFailure {
            throw failure
        } catch {
            throw Self.failure(from: error, path: path)
        }
        // A type that never looked at its JSON (like `Empty`) asked about none of its keys.
        if rejectUnknownKeys, !decoder.touched, case .object(let object) = value, !object.isEmpty {
            _ = use(of: object, at: path)
        }
        return result
    }

    /// Strict conversions for the JSON scalar types; nil when `T` is not one of them.
    private func unboxScalar<T>(_ type: T.Type, from value: JSONValue, path: [any CodingKey]) throws -> T? {
        if T.self == String.self {
            guard case .string(let s) = value else { throw mismatch("string", value, path) }
            return s as? T
        }
        if T.self == Bool.self {
            guard case .bool(let b) = value else { throw mismatch("boolean", value, path) }
            return b as? T
        }
        if T.self == Double.self {
            return try number(value, path) as? T
        }
        if T.self == Float.self {
            let d = try number(value, path)
            let f = Float(d)
            if f.isInfinite && d.isFinite {
                throw JSONDecodingFailure(path: renderPath(path), message: "number \(d) out of range for Float")
            }
            return f as? T
        }
        if let integerType = standardIntegerType(T.self) {
            return try integer(integerType, from: value, path: path) as? T
        }
        // Only a string can be a string enum's value; anything else fails in the
        // type's own `init(from:)` with the same mismatch. Asked only then because
        // the cast scans every conformance in the process the first time a type
        // is asked (see `standardIntegerType`), and most types are objects.
        if case .string = value, let enumType = T.self as? any JSONSchemaStringEnum.Type {
            return try stringEnum(enumType, from: value, path: path) as? T
        }
        return nil
    }

    private func number(_ value: JSONValue, _ path: [any CodingKey]) throws -> Double {
        switch value {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: throw mismatch("number", value, path)
        }
    }

    private func integer<I: FixedWidthInteger>(_: I.Type, from value: JSONValue, path: [any CodingKey]) throws -> I {
        switch value {
        case .int(let i):
            guard let result = I(exactly: i) else {
                throw JSONDecodingFailure(path: renderPath(path), message: "integer \(i) out of range for \(I.self)")
            }
            return result
        case .double(let d):
            guard d.isFinite, d.rounded(.towardZero) == d else {
                throw JSONDecodingFailure(path: renderPath(path), message: "expected integer, got number \(d)")
            }
            guard let result = I(exactly: d) else {
                throw JSONDecodingFailure(path: renderPath(path), message: "integer \(d) out of range for \(I.self)")
            }
            return result
        default:
            throw mismatch("integer", value, path)
        }
    }

    /// String enums get a message that lists the accepted values.
    private func stringEnum<E: JSONSchemaStringEnum>(_: E.Type, from value: JSONValue, path: [any CodingKey]) throws -> E {
        guard case .string(let s) = value else { throw mismatch("string", value, path) }
        guard let result = E(rawValue: s) else {
            let accepted = E.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw JSONDecodingFailure(path: renderPath(path), message: "expected one of \(accepted), got \"\(s)\"")
        }
        return result
    }

    func mismatch(_ expected: String, _ value: JSONValue, _ path: [any CodingKey]) -> JSONDecodingFailure {
        JSONDecodingFailure(path: renderPath(path), message: "expected \(expected), got \(value.typeName)")
    }

    /// Converts whatever a decoding step threw into a failure with a path.
    static func failure(from error: any Error, path: [any CodingKey]) -> JSONDecodingFailure {
        if let failure = error as? JSONDecodingFailure { return failure }
        if let decodingError = error as? DecodingError {
            switch decodingError {
            case .keyNotFound(let key, let context):
                return JSONDecodingFailure(path: renderPath(context.codingPath + [key]), message: "missing required field")
            case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
                let message = context.debugDescription.isEmpty ? "invalid value" : context.debugDescription
                return JSONDecodingFailure(path: renderPath(context.codingPath), message: message)
            @unknown default:
                return JSONDecodingFailure(path: renderPath(path), message: String(describing: error))
            }
        }
        return JSONDecodingFailure(path: renderPath(path), message: String(describing: error))
    }
}

/// The `Decoder` handed to `init(from:)`: one JSON value at one path.
final class ValueDecoder: Decoder, JSONValueDecoderMarker {
    let value: JSONValue
    let codingPath: [any CodingKey]
    let state: DecodingState
    /// Whether the decoding code looked at the value at all (see `unbox`).
    private(set) var touched = false

    init(value: JSONValue, codingPath: [any CodingKey], state: DecodingState) {
        self.value = value
        self.codingPath = codingPath
        self.state = state
    }

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    var currentValue: JSONValue {
        touched = true
        return value
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        touched = true
        guard case .object(let object) = value else { throw state.mismatch("object", value, codingPath) }
        return KeyedDecodingContainer(
            KeyedValueContainer<Key>(object: object, codingPath: codingPath, state: state, use: state.use(of: object, at: codingPath))
        )
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        touched = true
        guard case .array(let array) = value else { throw state.mismatch("array", value, codingPath) }
        return UnkeyedValueContainer(array: array, codingPath: codingPath, state: state)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        touched = true
        return SingleValueContainer(value: value, codingPath: codingPath, state: state)
    }
}

struct KeyedValueContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: [String: JSONValue]
    let codingPath: [any CodingKey]
    let state: DecodingState
    let use: DecodingState.ObjectUse?

    var allKeys: [Key] {
        use?.allKeysRead = true
        // Sorted so that dictionaries decode, and fail, in a stable order.
        return object.keys.sorted().compactMap { Key(stringValue: $0) }
    }

    private func consume(_ key: Key) { use?.consumed.insert(key.stringValue) }

    private func required(_ key: Key) throws -> JSONValue {
        consume(key)
        guard let value = object[key.stringValue] else {
            throw JSONDecodingFailure(path: renderPath(codingPath + [key]), message: "missing required field")
        }
        return value
    }

    func contains(_ key: Key) -> Bool {
        consume(key)
        return object[key.stringValue] != nil
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        try required(key) == .null
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try state.unbox(type, from: try required(key), path: codingPath + [key])
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        consume(key)
        guard let value = object[key.stringValue], value != .null else { return nil }
        return try state.unbox(type, from: value, path: codingPath + [key])
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decodeScalar(type, key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try decodeScalar(type, key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decodeScalar(type, key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decodeScalar(type, key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decodeScalar(type, key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decodeScalar(type, key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decodeScalar(type, key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decodeScalar(type, key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decodeScalar(type, key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decodeScalar(type, key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decodeScalar(type, key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decodeScalar(type, key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decodeScalar(type, key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decodeScalar(type, key) }

    private func decodeScalar<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T {
        try state.unbox(type, from: try required(key), path: codingPath + [key])
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try ValueDecoder(value: try required(key), codingPath: codingPath + [key], state: state).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try ValueDecoder(value: try required(key), codingPath: codingPath + [key], state: state).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        use?.consumed.insert("super")
        return ValueDecoder(value: object["super"] ?? .null, codingPath: codingPath + [NamedKey("super")], state: state)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        consume(key)
        return ValueDecoder(value: object[key.stringValue] ?? .null, codingPath: codingPath + [key], state: state)
    }
}

struct UnkeyedValueContainer: UnkeyedDecodingContainer {
    let array: [JSONValue]
    let codingPath: [any CodingKey]
    let state: DecodingState
    private(set) var currentIndex = 0

    init(array: [JSONValue], codingPath: [any CodingKey], state: DecodingState) {
        self.array = array
        self.codingPath = codingPath
        self.state = state
    }

    var count: Int? { array.count }
    var isAtEnd: Bool { currentIndex >= array.count }

    private var elementPath: [any CodingKey] { codingPath + [ArrayIndexKey(currentIndex)] }

    /// The current element, without advancing.
    private func current() throws -> JSONValue {
        guard currentIndex < array.count else {
            throw JSONDecodingFailure(path: renderPath(elementPath), message: "missing array element")
        }
        return array[currentIndex]
    }

    mutating func decodeNil() throws -> Bool {
        guard try current() == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let value = try state.unbox(type, from: try current(), path: elementPath)
        currentIndex += 1
        return value
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try decodeScalar(type) }
    mutating func decode(_ type: String.Type) throws -> String { try decodeScalar(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try decodeScalar(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try decodeScalar(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try decodeScalar(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try decodeScalar(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try decodeScalar(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try decodeScalar(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try decodeScalar(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try decodeScalar(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try decodeScalar(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try decodeScalar(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try decodeScalar(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try decodeScalar(type) }

    private mutating func decodeScalar<T: Decodable>(_ type: T.Type) throws -> T {
        let value = try state.unbox(type, from: try current(), path: elementPath)
        currentIndex += 1
        return value
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let container = try ValueDecoder(value: try current(), codingPath: elementPath, state: state).container(keyedBy: type)
        currentIndex += 1
        return container
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let container = try ValueDecoder(value: try current(), codingPath: elementPath, state: state).unkeyedContainer()
        currentIndex += 1
        return container
    }

    mutating func superDecoder() throws -> any Decoder {
        let decoder = ValueDecoder(value: try current(), codingPath: elementPath, state: state)
        currentIndex += 1
        return decoder
    }
}

struct SingleValueContainer: SingleValueDecodingContainer {
    let value: JSONValue
    let codingPath: [any CodingKey]
    let state: DecodingState

    func decodeNil() -> Bool { value == .null }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try state.unbox(type, from: value, path: codingPath) }

    func decode(_ type: Bool.Type) throws -> Bool { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: String.Type) throws -> String { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try state.unbox(type, from: value, path: codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try state.unbox(type, from: value, path: codingPath) }
}

// MARK: - Encoding

/// Encodes `Encodable` values to `JSONValue`.
///
/// Integers become `.int`, `Double`/`Float` become `.double` (also when
/// integral, so `1.0` stays `1.0` on the wire), a `JSONValue` is stored as-is,
/// and nil optionals are omitted from objects (the default `encodeIfPresent`).
/// Non-finite numbers and integers beyond `Int` throw `EncodingError.invalidValue`.
public struct JSONValueEncoder: Sendable {
    /// An encoder with the rules above; it has no options.
    public init() {}

    /// Encodes `value`; a value that encodes nothing at all becomes `{}`.
    public func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let slot = EncodingSlot()
        try encodeValue(value, into: slot, path: [])
        return slot.resolve()
    }
}

/// Where one encoded JSON value ends up. Containers hand out child slots and
/// the tree is turned into a `JSONValue` once encoding is done, so nested
/// containers can keep writing after their parent returned them.
final class EncodingSlot {
    private var value: JSONValue?
    private(set) var members: [String: EncodingSlot]?
    private(set) var elements: [EncodingSlot]?

    func set(_ newValue: JSONValue) {
        value = newValue
        members = nil
        elements = nil
    }

    func makeObject() {
        guard members == nil else { return }
        members = [:]
        elements = nil
        value = nil
    }

    func makeArray() {
        guard elements == nil else { return }
        elements = []
        members = nil
        value = nil
    }

    func member(_ key: String) -> EncodingSlot {
        makeObject()
        let child = EncodingSlot()
        members?[key] = child
        return child
    }

    func appendElement() -> EncodingSlot {
        makeArray()
        let child = EncodingSlot()
        elements?.append(child)
        return child
    }

    func resolve() -> JSONValue {
        if let members { return .object(members.mapValues { $0.resolve() }) }
        if let elements { return .array(elements.map { $0.resolve() }) }
        return value ?? .object([:])
    }
}

/// Stores scalars directly and runs `encode(to:)` for everything else.
func encodeValue<T: Encodable>(_ value: T, into slot: EncodingSlot, path makePath: @autoclosure () -> [any CodingKey]) throws {
    // The path is built only where it is used (an error, a nested encoder): an
    // array of existentials per member was a good part of encoding an event.
    var path: [any CodingKey] { makePath() }
    if let json = value as? JSONValue {
        slot.set(json)
    } else if let s = value as? String {
        slot.set(.string(s))
    } else if let b = value as? Bool {
        slot.set(.bool(b))
    } else if let d = value as? Double {
        slot.set(.double(try finite(d, value, path)))
    } else if let f = value as? Float {
        // Through the shortest decimal text so 0.1 as Float stays 0.1, not 0.10000000149011612.
        let d = Double(String(describing: f)) ?? Double(f)
        slot.set(.double(try finite(d, value, path)))
    } else if let i = standardInteger(value) {
        guard let exact = Int(exactly: i) else {
            throw EncodingError.invalidValue(value, .init(codingPath: path, debugDescription: "integer \(i) does not fit in Int"))
        }
        slot.set(.int(exact))
    } else if let direct = value as? any JSONValueRepresentable {
        slot.set(direct.json)
    } else {
        try value.encode(to: ValueEncoder(slot: slot, codingPath: path))
    }
}

/// `type` when it is one of the standard library's fixed-width integers.
///
/// Compared by identity rather than cast to `any FixedWidthInteger.Type`: the
/// first cast of each type to a protocol scans every conformance record of
/// every loaded image (about 7,500, 0.3 M instructions), so asking it of every
/// struct a request decodes or a result encodes was a quarter of a cold start
/// (Benchmarks/README.md, "Start-up"). These are the integer types of the
/// standard library that `Codable` knows; the wire types use no other.
func standardIntegerType<T>(_ type: T.Type) -> (any FixedWidthInteger.Type)? {
    switch ObjectIdentifier(type) {
    case ObjectIdentifier(Int.self): Int.self
    case ObjectIdentifier(Int8.self): Int8.self
    case ObjectIdentifier(Int16.self): Int16.self
    case ObjectIdentifier(Int32.self): Int32.self
    case ObjectIdentifier(Int64.self): Int64.self
    case ObjectIdentifier(UInt.self): UInt.self
    case ObjectIdentifier(UInt8.self): UInt8.self
    case ObjectIdentifier(UInt16.self): UInt16.self
    case ObjectIdentifier(UInt32.self): UInt32.self
    case ObjectIdentifier(UInt64.self): UInt64.self
    default: nil
    }
}

/// `value` as an integer when its type is one of `standardIntegerType`'s (cast to
/// each concrete type: no conformance lookup).
private func standardInteger<T>(_ value: T) -> (any FixedWidthInteger)? {
    guard standardIntegerType(T.self) != nil else { return nil }
    switch value {
    case let i as Int: return i
    case let i as Int8: return i
    case let i as Int16: return i
    case let i as Int32: return i
    case let i as Int64: return i
    case let i as UInt: return i
    case let i as UInt8: return i
    case let i as UInt16: return i
    case let i as UInt32: return i
    case let i as UInt64: return i
    default: return nil
    }
}

/// A type whose `encode(to:)` encodes its `json`, a wire form it builds
/// directly. `JSONValueEncoder` takes that value as it is: encoding it again
/// through `Encoder` containers, member by member, cost a tool round trip more
/// than the rest of its events (a transcript entry goes out in each
/// `entryAppended`).
public protocol JSONValueRepresentable {
    /// The wire form; what `encode(to:)` writes.
    var json: JSONValue { get }
}

private func finite(_ d: Double, _ value: Any, _ path: [any CodingKey]) throws -> Double {
    guard d.isFinite else {
        throw EncodingError.invalidValue(value, .init(codingPath: path, debugDescription: "\(d) is not representable in JSON"))
    }
    return d
}

/// The `Encoder` handed to `encode(to:)`: writes into one slot.
final class ValueEncoder: Encoder, JSONValueEncoderMarker {
    let slot: EncodingSlot
    let codingPath: [any CodingKey]

    init(slot: EncodingSlot, codingPath: [any CodingKey]) {
        self.slot = slot
        self.codingPath = codingPath
    }

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func store(_ value: JSONValue) { slot.set(value) }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        slot.makeObject()
        return KeyedEncodingContainer(KeyedSlotContainer<Key>(slot: slot, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        slot.makeArray()
        return UnkeyedSlotContainer(slot: slot, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleSlotContainer(slot: slot, codingPath: codingPath)
    }
}

struct KeyedSlotContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let slot: EncodingSlot
    let codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws { slot.member(key.stringValue).set(.null) }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try encodeValue(value, into: slot.member(key.stringValue), path: codingPath + [key])
    }

    // The members most payloads are made of, stored without the generic path's casts.
    mutating func encode(_ value: String, forKey key: Key) throws { slot.member(key.stringValue).set(.string(value)) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { slot.member(key.stringValue).set(.bool(value)) }
    mutating func encode(_ value: Int, forKey key: Key) throws { slot.member(key.stringValue).set(.int(value)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        ValueEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        ValueEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        ValueEncoder(slot: slot.member("super"), codingPath: codingPath + [NamedKey("super")])
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        ValueEncoder(slot: slot.member(key.stringValue), codingPath: codingPath + [key])
    }
}

struct UnkeyedSlotContainer: UnkeyedEncodingContainer {
    let slot: EncodingSlot
    let codingPath: [any CodingKey]

    var count: Int { slot.elements?.count ?? 0 }

    private var nextPath: [any CodingKey] { codingPath + [ArrayIndexKey(count)] }

    mutating func encodeNil() throws { slot.appendElement().set(.null) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        let path = nextPath
        try encodeValue(value, into: slot.appendElement(), path: path)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = nextPath
        return ValueEncoder(slot: slot.appendElement(), codingPath: path).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = nextPath
        return ValueEncoder(slot: slot.appendElement(), codingPath: path).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let path = nextPath
        return ValueEncoder(slot: slot.appendElement(), codingPath: path)
    }
}

struct SingleSlotContainer: SingleValueEncodingContainer {
    let slot: EncodingSlot
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { slot.set(.null) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try encodeValue(value, into: slot, path: codingPath)
    }
}

// MARK: - Conveniences

extension JSONValue {
    /// Decodes this value as `type` with `JSONValueDecoder`; throws `JSONDecodingFailure`.
    public func decode<T: Decodable>(as type: T.Type, rejectUnknownKeys: Bool = false) throws(JSONDecodingFailure) -> T {
        var decoder = JSONValueDecoder()
        decoder.rejectUnknownKeys = rejectUnknownKeys
        return try decoder.decode(type, from: self)
    }

    /// The JSON form of `value`, as `JSONValueEncoder` produces it.
    public init<T: Encodable>(encoding value: T) throws {
        self = try JSONValueEncoder().encode(value)
    }
}
