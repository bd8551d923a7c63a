// JSON Schema generation by probing: the generator runs a type's own
// `init(from:)` against a recording Decoder and writes down which keys and
// types it asks for. The Swift types stay the single source of truth; types
// whose decoding branches on the JSON state their schema (`JSONSchemaProviding`).

/// Why a schema could not be generated; names the type at fault.
public struct JSONSchemaGenerationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `String(describing:)` of the type whose schema could not be discovered.
    public var typeName: String
    /// What went wrong and what to do about it.
    public var message: String

    /// An error about `typeName`.
    public init(typeName: String, message: String) {
        self.typeName = typeName
        self.message = message
    }

    /// The message, which already names the type.
    public var description: String { message }
}

/// Generates JSON Schema (draft 2020-12) documents from `Decodable` types.
///
/// Rules, in the order they are tried for a type `T`:
/// 1. `T: JSONSchemaProviding` → `T.jsonSchema`, inline; its `jsonSchemaDependencies`
///    go into `$defs` under their names.
/// 2. `T: JSONSchemaStringEnum` → `{"type":"string","enum":[raw values]}`, inline.
/// 3. `JSONValue` → `{}`; `String`/`Bool`/fixed-width integers/`Double`/`Float` →
///    `string`/`boolean`/`integer`/`number`.
/// 4. Anything else is probed through its `init(from:)`:
///    - keyed container: an object with `properties` (by coding key), `required`
///      (keys read with `decode` not preceded by `contains`, sorted, omitted when
///      empty) and `additionalProperties: false`. Such named types always live in
///      `$defs` under `String(describing: T.self)` and are used through
///      `{"$ref":"#/$defs/Name"}` — the root type too, so a document for a struct is
///      `{"$schema", "$ref", "$defs"}`. A name already taken by another type falls
///      back to the qualified name without the module (`Outer.Params`).
///    - keyed container whose `allKeys` is read: a dictionary,
///      `{"type":"object","additionalProperties": <value schema>}`, inline.
///    - unkeyed container: `{"type":"array","items": <element schema>}`, inline.
///    - single-value `decodeNil()`: the schema also allows null — `"null"` is added to
///      a plain `type`, anything else (a `$ref`, an `enum`) becomes
///      `{"anyOf":[<schema>,{"type":"null"}]}`.
///    - `decodeIfPresent` makes a property optional, not nullable: the schema
///      describes the canonical form, where absent optionals are omitted.
///    Recursion (a type reached again while it is being probed) becomes a `$ref`.
///    If the probe throws (an `init(from:)` that validates or branches), the
///    generator throws an error asking for a `JSONSchemaProviding` conformance.
public enum JSONSchemaGenerator {
    /// The `$schema` URI of every generated document.
    public static let dialect = "https://json-schema.org/draft/2020-12/schema"

    /// A standalone schema document for `type`: `{"$schema": ..., <root>, "$defs": {...}}`,
    /// `$defs` omitted when empty.
    public static func schema(for type: any Decodable.Type) throws(JSONSchemaGenerationError) -> JSONValue {
        let builder = SchemaBuilder()
        let root = try builder.topLevelSchema(for: type)
        var document = root.objectValue ?? [:]
        document["$schema"] = .string(dialect)
        if !builder.definitions.isEmpty { document["$defs"] = .object(builder.definitions) }
        return .object(document)
    }

    /// One document holding many schemas that share `$defs`:
    /// `{"$schema": ..., "$defs": {name: schema, ...}}`. Each listed type lands under
    /// its given name (a type whose own definition already has that name is not
    /// repeated; otherwise the entry is its schema, often a `$ref` alias). Two
    /// different schemas under one name throw.
    public static func schemaDocument(definitions: [(name: String, type: any Decodable.Type)]) throws(JSONSchemaGenerationError) -> JSONValue {
        let builder = SchemaBuilder()
        // The listed names belong to the listed types, so generated names avoid them.
        for entry in definitions { builder.reserve(entry.name, for: entry.type) }
        var named: [String: JSONValue] = [:]
        for entry in definitions {
            let schema = try builder.topLevelSchema(for: entry.type)
            if schema == SchemaBuilder.reference(entry.name) { continue }
            if let existing = named[entry.name], existing != schema {
                throw JSONSchemaGenerationError(typeName: String(describing: entry.type), message: "two different schemas are listed under the name '\(entry.name)'")
            }
            named[entry.name] = schema
        }
        var defs = builder.definitions
        for (name, schema) in named {
            if let existing = defs[name], existing != schema {
                throw JSONSchemaGenerationError(typeName: name, message: "the name '\(name)' is used for two different schemas")
            }
            defs[name] = schema
        }
        var document: [String: JSONValue] = ["$schema": .string(dialect)]
        if !defs.isEmpty { document["$defs"] = .object(defs) }
        return .object(document)
    }
}

/// A union of object types told apart by one string member (`tagKey`), such as
/// `session/event`'s `type`. Its schema is a `oneOf` with one closed object per
/// variant, in `variants` order: the variant's probed properties plus the tag
/// as a `const`, required `[tag] + the variant's required keys (sorted)`. The
/// variant objects are written inline, and their properties of a type that
/// states its schema or is a string enum are `$ref`s into `$defs`, so each
/// such type reads as one named definition.
public protocol JSONSchemaTaggedUnion: Decodable {
    /// The member that names the variant.
    static var tagKey: String { get }
    /// Each variant's tag and its type, in schema order.
    static var variants: [(tag: String, type: any Decodable.Type)] { get }
}

extension Empty: JSONSchemaProviding {
    /// `{}` and nothing else; its synthesized `init(from:)` reads nothing, so probing cannot tell.
    public static var jsonSchema: JSONValue { ["type": "object", "additionalProperties": false] }
}

extension NullResult: JSONSchemaProviding {
    /// Exactly `null`.
    public static var jsonSchema: JSONValue { ["type": "null"] }
}

// MARK: - Builder

/// Thrown inside a probe when a required value of a type that is still being
/// probed is needed; a collection or optional further out catches it and
/// retries with no elements / `nil`.
struct RecursionStop: Error {}

/// One generation run: the `$defs` collected so far, the types being probed,
/// and placeholder instances of types already probed.
final class SchemaBuilder {
    private(set) var definitions: [String: JSONValue] = [:]
    private var names: [ObjectIdentifier: String] = [:]
    private var nameOwners: [String: ObjectIdentifier] = [:]
    /// Probed named types whose definition exists.
    private var defined: Set<ObjectIdentifier> = []
    private var inlineSchemas: [ObjectIdentifier: JSONValue] = [:]
    /// While a tagged-union variant is probed: the stack depth of its direct
    /// properties, whose named leaf types become `$ref`s.
    private var variantDepth: Int?
    /// The types being probed, outermost first, with what they recorded so far.
    private var stack: [(id: ObjectIdentifier, node: ProbeNode)] = []
    /// Types that were reached again while being probed; they must become definitions.
    private var recursive: Set<ObjectIdentifier> = []
    private var dependenciesDone: Set<ObjectIdentifier> = []
    private var instances: [ObjectIdentifier: Any] = [:]

    static func reference(_ name: String) -> JSONValue { ["$ref": .string("#/$defs/\(name)")] }

    func reserve(_ name: String, for type: any Decodable.Type) {
        let id = ObjectIdentifier(type)
        guard names[id] == nil, nameOwners[name] == nil else { return }
        names[id] = name
        nameOwners[name] = id
    }

    /// The definition name of `type`, stable within a run.
    func name(for type: any Decodable.Type) -> String {
        let id = ObjectIdentifier(type)
        if let name = names[id] { return name }
        var base = Self.sanitize(String(describing: type))
        if let owner = nameOwners[base], owner != id {
            let qualified = String(reflecting: type)
            let withoutModule = qualified.firstIndex(of: ".").map { String(qualified[qualified.index(after: $0)...]) } ?? qualified
            base = Self.sanitize(withoutModule)
        }
        var candidate = base
        var counter = 2
        while let owner = nameOwners[candidate], owner != id {
            candidate = "\(base)\(counter)"
            counter += 1
        }
        names[id] = candidate
        nameOwners[candidate] = id
        return candidate
    }

    /// Keeps names usable inside a `$ref` URI fragment.
    private static func sanitize(_ name: String) -> String {
        String(name.map { c -> Character in
            c.isASCII && (c.isLetter || c.isNumber || c == "_" || c == "." || c == "-") ? c : "_"
        })
    }

    /// `schema(for:)` with internal signals turned into public errors.
    func topLevelSchema(for type: any Decodable.Type) throws(JSONSchemaGenerationError) -> JSONValue {
        do {
            return try schema(for: type)
        } catch let error as JSONSchemaGenerationError {
            throw error
        } catch is RecursionStop {
            throw JSONSchemaGenerationError(
                typeName: String(describing: type),
                message: "cannot generate a schema for \(type): it requires a value of a type that contains itself with no optional or collection in between"
            )
        } catch {
            throw JSONSchemaGenerationError(typeName: String(describing: type), message: "cannot generate a schema for \(type): \(error)")
        }
    }

    /// The schema of `type` as used at one place: inline, or a `$ref` into `$defs`.
    func schema(for type: any Decodable.Type) throws -> JSONValue {
        let id = ObjectIdentifier(type)
        if let depth = variantDepth, stack.count == depth, type is any JSONSchemaProviding.Type || type is any JSONSchemaStringEnum.Type {
            variantDepth = nil
            defer { variantDepth = depth }
            // A type that states its schema as another's (`RPCError` is an `ErrorObject`) is that other.
            if let provider = type as? any JSONSchemaProviding.Type, case .object(let stated) = provider.jsonSchema, stated.count == 1, stated["$ref"] != nil {
                for dependency in provider.jsonSchemaDependencies { try define(dependency) }
                return provider.jsonSchema
            }
            try define(type)
            return Self.reference(name(for: type))
        }
        if let union = type as? any JSONSchemaTaggedUnion.Type {
            if let known = inlineSchemas[id] { return known }
            let schema = try taggedUnionSchema(union)
            inlineSchemas[id] = schema
            return schema
        }
        if let provider = type as? any JSONSchemaProviding.Type {
            if !dependenciesDone.contains(id) {
                dependenciesDone.insert(id)
                for dependency in provider.jsonSchemaDependencies { try define(dependency) }
            }
            return provider.jsonSchema
        }
        if let enumType = type as? any JSONSchemaStringEnum.Type { return Self.stringEnumSchema(enumType) }
        if let scalar = Self.scalarSchema(type) { return scalar }
        if defined.contains(id) { return Self.reference(name(for: type)) }
        if let inline = inlineSchemas[id] { return inline }
        if let index = stack.lastIndex(where: { $0.id == id }) {
            // Reached again while being probed. A named type becomes a `$ref`. An
            // anonymous one (an array of the named type) is probed afresh when a named
            // type lies in between, which ends the recursion; otherwise it must be named.
            let namedInBetween = stack[(index + 1)...].contains { $0.node.isNamed }
            if stack[index].node.isNamed || !namedInBetween {
                recursive.insert(id)
                return Self.reference(name(for: type))
            }
        }
        return try probe(type)
    }

    /// Puts `type` into `$defs` under its name (for `jsonSchemaDependencies`).
    private func define(_ type: any Decodable.Type) throws {
        let name = name(for: type)
        if definitions[name] != nil { return }
        let schema = try schema(for: type)
        if schema != Self.reference(name) { definitions[name] = schema }
    }

    private func taggedUnionSchema(_ union: any JSONSchemaTaggedUnion.Type) throws -> JSONValue {
        let tag = union.tagKey
        var alternatives: [JSONValue] = []
        for variant in union.variants {
            let node = ProbeNode()
            let saved = variantDepth
            stack.append((ObjectIdentifier(variant.type), node))
            variantDepth = stack.count
            defer {
                stack.removeLast()
                variantDepth = saved
            }
            do {
                _ = try variant.type.init(from: ProbeDecoder(builder: self, node: node, codingPath: [], minimal: false))
            } catch let error as JSONSchemaGenerationError {
                throw error
            } catch {
                throw JSONSchemaGenerationError(
                    typeName: String(describing: variant.type),
                    message: "cannot discover the JSON schema of \(variant.type), the '\(variant.tag)' variant of \(union), by probing its init(from:), which threw: \(Self.describe(error))"
                )
            }
            guard let keyed = node.keyed, !keyed.readAllKeys, case .object(var object) = keyed.schema() else {
                throw JSONSchemaGenerationError(
                    typeName: String(describing: variant.type),
                    message: "\(variant.type), the '\(variant.tag)' variant of \(union), must decode as an object with named members")
            }
            var properties = object["properties"]?.objectValue ?? [:]
            properties[tag] = ["const": .string(variant.tag)]
            object["properties"] = .object(properties)
            object["required"] = .array([.string(tag)] + (object["required"]?.arrayValue ?? []))
            alternatives.append(.object(object))
        }
        return ["oneOf": .array(alternatives)]
    }

    private static func stringEnumSchema<E: JSONSchemaStringEnum>(_: E.Type) -> JSONValue {
        ["type": "string", "enum": .array(E.allCases.map { .string($0.rawValue) })]
    }

    private static func scalarSchema(_ type: any Decodable.Type) -> JSONValue? {
        if type == JSONValue.self { return [:] }
        if type == String.self { return ["type": "string"] }
        if type == Bool.self { return ["type": "boolean"] }
        if type == Double.self || type == Float.self { return ["type": "number"] }
        if type is any FixedWidthInteger.Type { return ["type": "integer"] }
        return nil
    }

    private func probe(_ type: any Decodable.Type) throws -> JSONValue {
        let id = ObjectIdentifier(type)
        let node = ProbeNode()
        stack.append((id, node))
        var instance: Any?
        var probeError: (any Error)?
        do {
            instance = try type.init(from: ProbeDecoder(builder: self, node: node, codingPath: [], minimal: false))
        } catch {
            probeError = error
        }
        stack.removeLast()

        switch probeError {
        case nil:
            break
        case let error as JSONSchemaGenerationError:
            throw error
        case is RecursionStop:
            // A required value of a type still being probed was needed; what was
            // recorded stands, and a minimal probe (no elements, nil) gives a placeholder.
            instance = try? type.init(from: ProbeDecoder(builder: self, node: ProbeNode(), codingPath: [], minimal: true))
        case let error?:
            throw JSONSchemaGenerationError(
                typeName: String(describing: type),
                message: "cannot discover the JSON schema of \(type) by probing its init(from:), which threw: \(Self.describe(error)). "
                    + "Make \(type) conform to JSONSchemaProviding to state its schema."
            )
        }
        if let instance { instances[id] = instance }

        var schema = node.schema()
        if let bounded = type as? any JSONSchemaBounded.Type {
            schema = Self.applying(bounded.jsonSchemaBounds, to: schema)
        }
        if node.isNamed || recursive.contains(id) {
            let name = name(for: type)
            definitions[name] = schema
            defined.insert(id)
            return Self.reference(name)
        }
        inlineSchemas[id] = schema
        return schema
    }

    /// Adds each bounded property's range keywords to its schema.
    private static func applying(_ bounds: [String: NumericBounds], to schema: JSONValue) -> JSONValue {
        guard case .object(var object) = schema, case .object(var properties)? = object["properties"] else { return schema }
        for (key, range) in bounds {
            guard case .object(var property)? = properties[key] else { continue }
            property.merge(range.schemaKeywords) { _, new in new }
            properties[key] = .object(property)
        }
        object["properties"] = .object(properties)
        return .object(object)
    }

    private static func describe(_ error: any Error) -> String {
        if let decodingError = error as? DecodingError {
            switch decodingError {
            case .typeMismatch(_, let c), .valueNotFound(_, let c), .dataCorrupted(let c):
                return c.debugDescription
            case .keyNotFound(let key, _):
                return "key '\(key.stringValue)' not found"
            @unknown default:
                return String(describing: error)
            }
        }
        return String(describing: error)
    }

    /// A value of `type` to hand back to the `init(from:)` being probed.
    func placeholder<T: Decodable>(of type: T.Type) throws -> T {
        let value = try placeholderValue(of: type)
        guard let typed = value as? T else {
            throw JSONSchemaGenerationError(typeName: String(describing: type), message: "internal error: placeholder of the wrong type for \(type)")
        }
        return typed
    }

    private func placeholderValue(of type: any Decodable.Type) throws -> Any {
        let id = ObjectIdentifier(type)
        if let scalar = Self.scalarPlaceholder(type) { return scalar }
        if let known = instances[id] { return known }
        if stack.contains(where: { $0.id == id }) { throw RecursionStop() }
        if let enumType = type as? any JSONSchemaStringEnum.Type, let first = Self.firstCase(enumType) {
            instances[id] = first
            return first
        }
        if type is any JSONSchemaProviding.Type || type is any JSONSchemaTaggedUnion.Type {
            // Build a JSON sample from the stated schema and decode it for real.
            let sample = sampleValue(for: try schema(for: type), depth: 0)
            if let value = try? Self.decodeSample(type, from: sample) {
                instances[id] = value
                return value
            }
            for minimal in [true, false] {
                if let value = try? type.init(from: ProbeDecoder(builder: self, node: ProbeNode(), codingPath: [], minimal: minimal)) {
                    instances[id] = value
                    return value
                }
            }
            throw JSONSchemaGenerationError(
                typeName: String(describing: type),
                message: "cannot build a placeholder \(type) to continue probing: its init(from:) rejects \(sample), a sample of its jsonSchema"
            )
        }
        _ = try schema(for: type)
        if let known = instances[id] { return known }
        // Only a type whose probe hit recursion and whose minimal probe failed gets here.
        throw RecursionStop()
    }

    private static func decodeSample<T: Decodable>(_ type: T.Type, from sample: JSONValue) throws -> Any {
        try JSONValueDecoder().decode(type, from: sample)
    }

    private static func firstCase<E: JSONSchemaStringEnum>(_: E.Type) -> Any? { E.allCases.first }

    private static func zero<I: FixedWidthInteger>(_: I.Type) -> Any { I.zero }

    private static func scalarPlaceholder(_ type: any Decodable.Type) -> Any? {
        if type == JSONValue.self { return JSONValue.null }
        if type == String.self { return "" }
        if type == Bool.self { return false }
        if type == Double.self { return 0.0 }
        if type == Float.self { return Float(0) }
        if let integerType = type as? any FixedWidthInteger.Type { return zero(integerType) }
        return nil
    }

    /// A small JSON value that satisfies `schema`, for placeholders of types that
    /// state their schema: first alternatives, required properties only, empty arrays.
    private func sampleValue(for schema: JSONValue, depth: Int) -> JSONValue {
        guard depth < 32, case .object(let s) = schema else { return .null }
        if case .string(let ref)? = s["$ref"], ref.hasPrefix("#/$defs/") {
            let name = String(ref.dropFirst("#/$defs/".count))
            return sampleValue(for: definitions[name] ?? [:], depth: depth + 1)
        }
        if let constant = s["const"] { return constant }
        if case .array(let values)? = s["enum"], let first = values.first { return first }
        for combinator in ["anyOf", "oneOf", "allOf"] {
            if case .array(let branches)? = s[combinator], let first = branches.first {
                return sampleValue(for: first, depth: depth + 1)
            }
        }
        var typeName = s["type"]?.stringValue
        if case .array(let types)? = s["type"] { typeName = types.first?.stringValue }
        if typeName == nil, s["properties"] != nil { typeName = "object" }
        switch typeName {
        case "string":
            return .string(String(repeating: "a", count: s["minLength"]?.intValue ?? 0))
        case "boolean": return false
        case "integer", "number": return .int(s["minimum"]?.intValue ?? 0)
        case "array":
            let count = s["minItems"]?.intValue ?? 0
            let item = sampleValue(for: s["items"] ?? [:], depth: depth + 1)
            return .array(Array(repeating: item, count: max(0, min(count, 8))))
        case "object":
            var object: [String: JSONValue] = [:]
            for key in s["required"]?.arrayValue ?? [] {
                guard let key = key.stringValue else { continue }
                object[key] = sampleValue(for: s["properties"]?[key] ?? [:], depth: depth + 1)
            }
            return .object(object)
        default:
            return .null
        }
    }
}

// MARK: - Recording

/// What one probed value turned out to be.
final class ProbeNode {
    /// A schema known up front (a property or element of a known type).
    var fixed: JSONValue?
    var keyed: KeyedProbe?
    var sawUnkeyed = false
    var items: ProbeNode?
    var singles: [JSONValue] = []
    var nullable = false

    init(fixed: JSONValue? = nil) { self.fixed = fixed }

    /// Read through a keyed container that is not a dictionary: a struct or class,
    /// which gets a definition of its own.
    var isNamed: Bool { keyed.map { !$0.readAllKeys } ?? false }

    func schema() -> JSONValue {
        var result: JSONValue
        if let fixed {
            result = fixed
        } else {
            var alternatives: [JSONValue] = []
            if let keyed { alternatives.append(keyed.schema()) }
            if sawUnkeyed { alternatives.append(["type": "array", "items": items?.schema() ?? [:]]) }
            for single in singles where !alternatives.contains(single) { alternatives.append(single) }
            switch alternatives.count {
            case 0: result = nullable ? ["type": "null"] : [:]
            case 1: result = alternatives[0]
            default: result = ["anyOf": .array(alternatives)]
            }
        }
        return nullable ? Self.allowingNull(result) : result
    }

    /// `schema` widened to accept null, see `JSONSchemaGenerator`.
    static func allowingNull(_ schema: JSONValue) -> JSONValue {
        guard case .object(var s) = schema, !s.isEmpty else { return schema }
        let null: JSONValue = ["type": "null"]
        if s["enum"] == nil, s["const"] == nil {
            switch s["type"] {
            case .string(let type)?:
                if type == "null" { return schema }
                s["type"] = [.string(type), "null"]
                return .object(s)
            case .array(let types)?:
                if types.contains("null") { return schema }
                s["type"] = .array(types + ["null"])
                return .object(s)
            default:
                break
            }
        }
        if case .array(let branches)? = s["anyOf"], s.count == 1 {
            return branches.contains(null) ? schema : ["anyOf": .array(branches + [null])]
        }
        return ["anyOf": [schema, null]]
    }
}

/// What was read through keyed containers over one value.
final class KeyedProbe {
    struct Property {
        let key: String
        let node: ProbeNode
        var required: Bool
    }

    /// The key reported by `allKeys`; "0" so that `Int`-keyed dictionaries accept it too.
    static let syntheticKey = "0"

    var properties: [Property] = []
    var readAllKeys = false
    /// Keys checked with `contains`/`decodeNil` before being decoded: decoded conditionally.
    var checked: Set<String> = []

    /// Records a property (first reading wins) and returns its node.
    func record(_ key: String, required: Bool, node: ProbeNode) -> ProbeNode {
        if let index = properties.firstIndex(where: { $0.key == key }) {
            if required && !checked.contains(key) { properties[index].required = true }
            return properties[index].node
        }
        properties.append(Property(key: key, node: node, required: required && !checked.contains(key)))
        return node
    }

    func schema() -> JSONValue {
        var named = properties
        var additional: JSONValue = false
        if readAllKeys {
            if let index = named.firstIndex(where: { $0.key == Self.syntheticKey }) {
                additional = named.remove(at: index).node.schema()
            } else {
                additional = [:]
            }
        }
        var object: [String: JSONValue] = ["type": "object", "additionalProperties": additional]
        if !named.isEmpty {
            var props: [String: JSONValue] = [:]
            for p in named { props[p.key] = p.node.schema() }
            object["properties"] = .object(props)
        }
        let required = named.filter(\.required).map(\.key).sorted()
        if !required.isEmpty { object["required"] = .array(required.map { .string($0) }) }
        return .object(object)
    }
}

/// The recording `Decoder`. In normal mode it reports one element per
/// collection, one synthetic dictionary key and non-null values, so that every
/// type inside gets seen; in minimal mode it reports empty collections and
/// nulls, to build placeholders for recursive types.
final class ProbeDecoder: Decoder {
    let builder: SchemaBuilder
    let node: ProbeNode
    let codingPath: [any CodingKey]
    let minimal: Bool

    init(builder: SchemaBuilder, node: ProbeNode, codingPath: [any CodingKey], minimal: Bool) {
        self.builder = builder
        self.node = node
        self.codingPath = codingPath
        self.minimal = minimal
    }

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        let keyed = node.keyed ?? KeyedProbe()
        node.keyed = keyed
        return KeyedDecodingContainer(ProbeKeyedContainer<Key>(decoder: self, keyed: keyed))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        node.sawUnkeyed = true
        return ProbeUnkeyedContainer(decoder: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        ProbeSingleContainer(decoder: self)
    }

    func child(_ node: ProbeNode, _ key: any CodingKey) -> ProbeDecoder {
        ProbeDecoder(builder: builder, node: node, codingPath: codingPath + [key], minimal: minimal)
    }
}

struct ProbeKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: ProbeDecoder
    let keyed: KeyedProbe

    var codingPath: [any CodingKey] { decoder.codingPath }

    var allKeys: [Key] {
        keyed.readAllKeys = true
        if decoder.minimal { return [] }
        return Key(stringValue: KeyedProbe.syntheticKey).map { [$0] } ?? []
    }

    func contains(_ key: Key) -> Bool {
        keyed.checked.insert(key.stringValue)
        return !decoder.minimal
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        keyed.checked.insert(key.stringValue)
        return decoder.minimal
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        _ = keyed.record(key.stringValue, required: true, node: ProbeNode(fixed: try decoder.builder.schema(for: type)))
        return try decoder.builder.placeholder(of: type)
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        // Recorded, and answered with nil: no placeholder is needed, which is
        // also what keeps optional recursive fields finite.
        _ = keyed.record(key.stringValue, required: false, node: ProbeNode(fixed: try decoder.builder.schema(for: type)))
        return nil
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

    private func decodeScalar<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T { try decode(type, forKey: key) }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try decodeIfPresent(type as Bool.Type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try decodeIfPresent(type as String.Type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try decodeIfPresent(type as Double.Type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try decodeIfPresent(type as Float.Type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try decodeIfPresent(type as Int.Type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try decodeIfPresent(type as Int8.Type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try decodeIfPresent(type as Int16.Type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try decodeIfPresent(type as Int32.Type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try decodeIfPresent(type as Int64.Type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try decodeIfPresent(type as UInt.Type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try decodeIfPresent(type as UInt8.Type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try decodeIfPresent(type as UInt16.Type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try decodeIfPresent(type as UInt32.Type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try decodeIfPresent(type as UInt64.Type, key) }

    /// The generic optional path for the scalar overloads (their default
    /// implementations would go through `contains`, which records differently).
    private func decodeIfPresent<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        _ = keyed.record(key.stringValue, required: false, node: ProbeNode(fixed: try decoder.builder.schema(for: type)))
        return nil
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        let node = keyed.record(key.stringValue, required: true, node: ProbeNode())
        return try decoder.child(node, key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let node = keyed.record(key.stringValue, required: true, node: ProbeNode())
        return try decoder.child(node, key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        let key = NamedKey("super")
        return decoder.child(keyed.record(key.stringValue, required: false, node: ProbeNode()), key)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        decoder.child(keyed.record(key.stringValue, required: false, node: ProbeNode()), key)
    }
}

struct ProbeUnkeyedContainer: UnkeyedDecodingContainer {
    let decoder: ProbeDecoder
    private(set) var currentIndex = 0

    init(decoder: ProbeDecoder) { self.decoder = decoder }

    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { decoder.minimal ? 0 : 1 }
    var isAtEnd: Bool { decoder.minimal || currentIndex >= 1 }

    /// The node of the elements (only the first reading of an element is recorded).
    private func items() -> ProbeNode {
        let items = decoder.node.items ?? ProbeNode()
        decoder.node.items = items
        return items
    }

    mutating func decodeNil() throws -> Bool {
        items().nullable = true
        return decoder.minimal
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let items = items()
        if items.fixed == nil && items.keyed == nil && !items.sawUnkeyed { items.fixed = try decoder.builder.schema(for: type) }
        let value = try decoder.builder.placeholder(of: type)
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

    private mutating func decodeScalar<T: Decodable>(_ type: T.Type) throws -> T { try decode(type) }

    private var elementKey: ArrayIndexKey { ArrayIndexKey(currentIndex) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let container = try decoder.child(items(), elementKey).container(keyedBy: type)
        currentIndex += 1
        return container
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let container = try decoder.child(items(), elementKey).unkeyedContainer()
        currentIndex += 1
        return container
    }

    mutating func superDecoder() throws -> any Decoder {
        let child = decoder.child(items(), elementKey)
        currentIndex += 1
        return child
    }
}

struct ProbeSingleContainer: SingleValueDecodingContainer {
    let decoder: ProbeDecoder

    var codingPath: [any CodingKey] { decoder.codingPath }

    func decodeNil() -> Bool {
        decoder.node.nullable = true
        return decoder.minimal
    }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let schema = try decoder.builder.schema(for: type)
        if !decoder.node.singles.contains(schema) { decoder.node.singles.append(schema) }
        return try decoder.builder.placeholder(of: type)
    }

    func decode(_ type: Bool.Type) throws -> Bool { try decodeScalar(type) }
    func decode(_ type: String.Type) throws -> String { try decodeScalar(type) }
    func decode(_ type: Double.Type) throws -> Double { try decodeScalar(type) }
    func decode(_ type: Float.Type) throws -> Float { try decodeScalar(type) }
    func decode(_ type: Int.Type) throws -> Int { try decodeScalar(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decodeScalar(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decodeScalar(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decodeScalar(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decodeScalar(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try decodeScalar(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decodeScalar(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decodeScalar(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decodeScalar(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decodeScalar(type) }

    private func decodeScalar<T: Decodable>(_ type: T.Type) throws -> T {
        let schema = try decoder.builder.schema(for: type)
        if !decoder.node.singles.contains(schema) { decoder.node.singles.append(schema) }
        return try decoder.builder.placeholder(of: type)
    }
}
