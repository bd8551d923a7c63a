import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The seven JSON Schema type names.
enum JSONSchemaType: String, Sendable, Hashable {
    case null, boolean, object, array, number, string, integer

    /// Whether `value` is of this type. "integer" takes integral doubles too
    /// (`2.0`), because JSON Schema defines it by value, not by spelling.
    func admits(_ value: JSONValue) -> Bool {
        switch (self, value) {
        case (.null, .null), (.boolean, .bool), (.object, .object), (.array, .array), (.string, .string):
            return true
        case (.number, .int), (.number, .double), (.integer, .int):
            return true
        case (.integer, .double(let d)):
            return d.isFinite && d.rounded(.towardZero) == d
        default:
            return false
        }
    }
}

/// A `pattern` or `patternProperties` regex, compiled once at schema load.
/// Schemas come from clients and the text from models, so every match is
/// bounded in time (`BoundedRegex`).
final class CompiledPattern: Sendable {
    let source: String
    private let regex: BoundedRegex

    init(_ source: String) throws(RegexCompileError) {
        self.source = source
        self.regex = try BoundedRegex(source)
    }

    /// Unanchored search, as JSON Schema specifies: `"b"` matches `"abc"`.
    func matches(_ text: String) throws(RegexBudgetExceeded) -> Bool {
        try regex.firstMatch(in: text)
    }
}

/// One schema (or subschema) after compilation. Subschemas are referred to by
/// index into the validator's node table, which is what lets `$ref` form cycles
/// (recursive schemas) without reference types.
struct SchemaNode: Sendable {
    /// Where this node sits in the schema, as a JSON Pointer fragment; used in
    /// messages and schema errors.
    var location: String
    /// The boolean schema `false`: nothing validates.
    var isFalse = false

    var ref: Int?
    var types: [JSONSchemaType]?
    var enumValues: [JSONValue]?
    /// `Optional.some(.null)` is `"const": null`; `nil` means no `const`.
    var constValue: JSONValue?

    var minLength: Int?
    var maxLength: Int?
    var pattern: CompiledPattern?

    /// Numeric bounds keep the schema's own `.int`/`.double` so integer
    /// comparisons stay exact.
    var minimum: JSONValue?
    var maximum: JSONValue?
    var exclusiveMinimum: JSONValue?
    var exclusiveMaximum: JSONValue?
    var multipleOf: JSONValue?

    var prefixItems: [Int] = []
    /// Applies to every item after `prefixItems`.
    var items: Int?
    var minItems: Int?
    var maxItems: Int?
    var uniqueItems = false

    var properties: [String: Int] = [:]
    var patternProperties: [(pattern: CompiledPattern, node: Int)] = []
    var additionalProperties: Int?
    var required: [String] = []
    var minProperties: Int?
    var maxProperties: Int?
    var dependentRequired: [(property: String, requires: [String])] = []

    var allOf: [Int] = []
    var anyOf: [Int] = []
    var oneOf: [Int] = []
    var not: Int?
    var ifSchema: Int?
    var thenSchema: Int?
    var elseSchema: Int?

    /// Subschemas applied to the same instance (not to a child of it). A cycle
    /// through these edges alone would recurse forever.
    var inPlaceSubschemas: [Int] {
        var result: [Int] = []
        if let ref { result.append(ref) }
        result += allOf
        result += anyOf
        result += oneOf
        for single in [not, ifSchema, thenSchema, elseSchema] {
            if let single { result.append(single) }
        }
        return result
    }
}

/// Turns a schema `JSONValue` into a `SchemaNode` table, checking its shape as
/// it goes so a bad schema fails when registered, not on some later call.
struct SchemaCompiler {
    private let root: JSONValue
    private(set) var nodes: [SchemaNode] = []
    /// Compiled nodes by pointer, so a `$ref` and the inline definition it
    /// points at share one node, and recursive references terminate.
    private var indexByLocation: [String: Int] = [:]

    init(root: JSONValue) {
        self.root = root
    }

    /// Compiles the whole schema; the root ends up at index 0.
    mutating func compileRoot() throws(JSONSchemaError) -> Int {
        let rootIndex = try compile(root, at: [])
        try rejectUnboundedRecursion()
        return rootIndex
    }

    // MARK: - Nodes

    private mutating func compile(_ value: JSONValue, at here: [String]) throws(JSONSchemaError) -> Int {
        let location = Self.location(here)
        if let existing = indexByLocation[location] { return existing }
        let index = nodes.count
        // Reserve the slot before compiling children so a `$ref` back to this
        // node (a recursive schema) finds it instead of recursing.
        nodes.append(SchemaNode(location: location))
        indexByLocation[location] = index
        let node = try build(value, at: here)
        nodes[index] = node
        return index
    }

    private mutating func build(_ value: JSONValue, at here: [String]) throws(JSONSchemaError) -> SchemaNode {
        var node = SchemaNode(location: Self.location(here))
        switch value {
        case .bool(true):
            return node
        case .bool(false):
            node.isFalse = true
            return node
        case .object(let object):
            try fill(&node, from: object, at: here)
            return node
        default:
            throw Self.error(here, "a schema must be an object or a boolean, got \(value.typeName)")
        }
    }

    private mutating func fill(_ node: inout SchemaNode, from object: [String: JSONValue], at here: [String])
        throws(JSONSchemaError)
    {
        for keyword in ["$dynamicRef", "$recursiveRef"] where object[keyword] != nil {
            throw Self.error(here + [keyword], "`\(keyword)` is not supported; use `$ref` to `#/$defs/...`")
        }

        // Definitions are compiled even when nothing references them, so a
        // malformed one is reported now rather than never.
        for container in ["$defs", "definitions"] {
            guard let defs = object[container] else { continue }
            guard case .object(let entries) = defs else {
                throw Self.error(here + [container], "must be an object of schemas")
            }
            for (name, schema) in entries.sorted(by: { $0.key < $1.key }) {
                _ = try compile(schema, at: here + [container, name])
            }
        }

        if let ref = object["$ref"] {
            guard case .string(let text) = ref else {
                throw Self.error(here + ["$ref"], "must be a string")
            }
            node.ref = try resolveReference(text, at: here + ["$ref"])
        }

        if let type = object["type"] { node.types = try Self.types(type, at: here + ["type"]) }
        if let values = object["enum"] {
            guard case .array(let list) = values else { throw Self.error(here + ["enum"], "must be an array") }
            node.enumValues = list
        }
        if let constant = object["const"] { node.constValue = constant }

        // Strings
        node.minLength = try Self.count(object, "minLength", at: here)
        node.maxLength = try Self.count(object, "maxLength", at: here)
        if let pattern = object["pattern"] {
            guard case .string(let source) = pattern else {
                throw Self.error(here + ["pattern"], "must be a string")
            }
            node.pattern = try Self.regex(source, at: here + ["pattern"])
        }

        // Numbers
        node.minimum = try Self.number(object, "minimum", at: here)
        node.maximum = try Self.number(object, "maximum", at: here)
        node.exclusiveMinimum = try Self.number(object, "exclusiveMinimum", at: here)
        node.exclusiveMaximum = try Self.number(object, "exclusiveMaximum", at: here)
        node.multipleOf = try Self.number(object, "multipleOf", at: here)
        if let divisor = node.multipleOf, let d = divisor.numberValue, !(d > 0) {
            throw Self.error(here + ["multipleOf"], "must be greater than 0")
        }

        // Arrays
        if let prefix = object["prefixItems"] {
            node.prefixItems = try schemaList(prefix, at: here + ["prefixItems"])
        }
        if let items = object["items"] {
            if case .array = items {
                // Draft 2019-09 and earlier spelled tuples as an `items` array
                // with `additionalItems` for the rest; tool schemas still do.
                guard object["prefixItems"] == nil else {
                    throw Self.error(here + ["items"], "must be a schema when `prefixItems` is present")
                }
                node.prefixItems = try schemaList(items, at: here + ["items"])
                if let rest = object["additionalItems"] {
                    node.items = try compile(rest, at: here + ["additionalItems"])
                }
            } else {
                node.items = try compile(items, at: here + ["items"])
            }
        }
        node.minItems = try Self.count(object, "minItems", at: here)
        node.maxItems = try Self.count(object, "maxItems", at: here)
        if let unique = object["uniqueItems"] {
            guard case .bool(let flag) = unique else { throw Self.error(here + ["uniqueItems"], "must be a boolean") }
            node.uniqueItems = flag
        }

        // Objects
        if let properties = object["properties"] {
            guard case .object(let entries) = properties else {
                throw Self.error(here + ["properties"], "must be an object of schemas")
            }
            for (name, schema) in entries.sorted(by: { $0.key < $1.key }) {
                node.properties[name] = try compile(schema, at: here + ["properties", name])
            }
        }
        if let patterns = object["patternProperties"] {
            guard case .object(let entries) = patterns else {
                throw Self.error(here + ["patternProperties"], "must be an object of schemas")
            }
            for (source, schema) in entries.sorted(by: { $0.key < $1.key }) {
                let regex = try Self.regex(source, at: here + ["patternProperties", source])
                node.patternProperties.append((regex, try compile(schema, at: here + ["patternProperties", source])))
            }
        }
        if let additional = object["additionalProperties"] {
            node.additionalProperties = try compile(additional, at: here + ["additionalProperties"])
        }
        if let required = object["required"] {
            node.required = try Self.strings(required, at: here + ["required"])
        }
        node.minProperties = try Self.count(object, "minProperties", at: here)
        node.maxProperties = try Self.count(object, "maxProperties", at: here)
        if let dependencies = object["dependentRequired"] {
            guard case .object(let entries) = dependencies else {
                throw Self.error(here + ["dependentRequired"], "must be an object of string arrays")
            }
            for (name, list) in entries.sorted(by: { $0.key < $1.key }) {
                let names = try Self.strings(list, at: here + ["dependentRequired", name])
                node.dependentRequired.append((name, names))
            }
        }

        // Combinators
        for keyword in ["allOf", "anyOf", "oneOf"] {
            guard let list = object[keyword] else { continue }
            let compiled = try schemaList(list, at: here + [keyword])
            guard !compiled.isEmpty else { throw Self.error(here + [keyword], "must not be empty") }
            switch keyword {
            case "allOf": node.allOf = compiled
            case "anyOf": node.anyOf = compiled
            default: node.oneOf = compiled
            }
        }
        if let not = object["not"] { node.not = try compile(not, at: here + ["not"]) }
        if let condition = object["if"] {
            node.ifSchema = try compile(condition, at: here + ["if"])
            if let then = object["then"] { node.thenSchema = try compile(then, at: here + ["then"]) }
            if let otherwise = object["else"] { node.elseSchema = try compile(otherwise, at: here + ["else"]) }
        }
    }

    private mutating func schemaList(_ value: JSONValue, at here: [String]) throws(JSONSchemaError) -> [Int] {
        guard case .array(let list) = value else { throw Self.error(here, "must be an array of schemas") }
        var result: [Int] = []
        for (offset, schema) in list.enumerated() {
            result.append(try compile(schema, at: here + [String(offset)]))
        }
        return result
    }

    // MARK: - $ref

    /// Only same-document references: `#` and `#/json/pointer`. Anything else
    /// (remote URLs, `$anchor` names) is refused at load rather than silently
    /// treated as "anything goes".
    private mutating func resolveReference(_ reference: String, at here: [String]) throws(JSONSchemaError) -> Int {
        guard reference.hasPrefix("#") else {
            throw Self.error(
                here, "unsupported reference `\(reference)`: only local references (`#`, `#/$defs/Name`) are supported")
        }
        let fragment = String(reference.dropFirst())
        if fragment.isEmpty { return try compile(root, at: []) }
        guard fragment.hasPrefix("/") else {
            throw Self.error(here, "unsupported reference `\(reference)`: anchor references are not supported")
        }
        guard let decoded = fragment.percentDecoded else {
            throw Self.error(here, "reference `\(reference)` is not a valid URI fragment")
        }
        let tokens = decoded.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map {
            $0.replacingScalars(of: "~1", with: "/").replacingScalars(of: "~0", with: "~")
        }
        var target = root
        for token in tokens {
            var next: JSONValue?
            switch target {
            case .object(let members):
                next = members[token]
            case .array(let list):
                if let offset = Int(token), list.indices.contains(offset) { next = list[offset] }
            default:
                break
            }
            guard let next else {
                throw Self.error(here, "reference `\(reference)` points to nothing in this schema")
            }
            target = next
        }
        return try compile(target, at: Array(tokens))
    }

    /// A `$ref` chain that comes back to itself without stepping into a child
    /// value (`{"$ref": "#"}`, or two `$defs` referring to each other) would
    /// loop forever on any instance, so it is a schema error.
    private func rejectUnboundedRecursion() throws(JSONSchemaError) {
        // 0 = unvisited, 1 = on the current path, 2 = finished.
        var state = [UInt8](repeating: 0, count: nodes.count)
        func visit(_ index: Int) throws(JSONSchemaError) {
            state[index] = 1
            for next in nodes[index].inPlaceSubschemas {
                if state[next] == 1 {
                    throw JSONSchemaError(
                        schemaPath: nodes[index].location,
                        message: "reference cycle through `\(nodes[next].location)` never descends into the "
                            + "instance, so validation would not terminate")
                }
                if state[next] == 0 { try visit(next) }
            }
            state[index] = 2
        }
        for index in nodes.indices where state[index] == 0 {
            try visit(index)
        }
    }

    // MARK: - Keyword shapes

    static func location(_ tokens: [String]) -> String {
        var text = "#"
        for token in tokens {
            text += "/" + token.replacingScalars(of: "~", with: "~0").replacingScalars(of: "/", with: "~1")
        }
        return text
    }

    static func error(_ tokens: [String], _ message: String) -> JSONSchemaError {
        JSONSchemaError(schemaPath: location(tokens), message: message)
    }

    private static func types(_ value: JSONValue, at here: [String]) throws(JSONSchemaError) -> [JSONSchemaType] {
        let names: [String]
        switch value {
        case .string(let name): names = [name]
        case .array: names = try strings(value, at: here)
        default: throw error(here, "must be a type name or an array of type names")
        }
        var result: [JSONSchemaType] = []
        for name in names {
            guard let type = JSONSchemaType(rawValue: name) else {
                throw error(
                    here,
                    "unknown type `\(name)`; expected one of null, boolean, object, array, number, string, integer")
            }
            result.append(type)
        }
        return result
    }

    private static func strings(_ value: JSONValue, at here: [String]) throws(JSONSchemaError) -> [String] {
        guard case .array(let list) = value else { throw error(here, "must be an array of strings") }
        var result: [String] = []
        for element in list {
            guard case .string(let text) = element else { throw error(here, "must be an array of strings") }
            result.append(text)
        }
        return result
    }

    /// A non-negative integer keyword (`minLength`, `maxItems`, ...); `2.0` is
    /// accepted as 2, as the spec allows.
    private static func count(_ object: [String: JSONValue], _ keyword: String, at here: [String])
        throws(JSONSchemaError) -> Int?
    {
        guard let value = object[keyword] else { return nil }
        guard JSONSchemaType.integer.admits(value), let count = value.intValue, count >= 0 else {
            throw error(here + [keyword], "must be a non-negative integer")
        }
        return count
    }

    private static func number(_ object: [String: JSONValue], _ keyword: String, at here: [String])
        throws(JSONSchemaError) -> JSONValue?
    {
        guard let value = object[keyword] else { return nil }
        switch value {
        case .int, .double:
            return value
        case .bool where keyword.hasPrefix("exclusive"):
            throw error(
                here + [keyword], "must be a number (the draft-04 boolean form is not supported)")
        default:
            throw error(here + [keyword], "must be a number")
        }
    }

    private static func regex(_ source: String, at here: [String]) throws(JSONSchemaError) -> CompiledPattern {
        do throws(RegexCompileError) {
            return try CompiledPattern(source)
        } catch {
            switch error {
            case .invalid: throw Self.error(here, "`\(source)` is not a valid regular expression")
            case .unavailable(let problem): throw Self.error(here, "`\(source)` cannot be compiled: \(problem.message)")
            }
        }
    }
}
