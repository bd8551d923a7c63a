import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One change made to a tool's input schema so a provider accepts it is a
/// `SchemaWarning` (the wire type of `schemaWarnings`); its `path` is a
/// JSON-Pointer-like path into the schema (`/properties/city/format`).

/// Rewrites tool input schemas into what a provider accepts, reporting each change.
///
/// `strict: true` targets OpenAI strict function calling / structured outputs,
/// using the conservative subset OpenAI documented when strict mode launched
/// (accepted by every strict-capable model):
/// * every object gets `additionalProperties: false`;
/// * every property becomes required; a property that was optional becomes
///   nullable (`"type": [T, "null"]`, `null` added to an `enum`, or `anyOf` with
///   `{"type": "null"}`), so the model can still leave it out by sending null;
/// * keywords outside the subset are dropped: string `format`/`minLength`/
///   `maxLength`/`pattern`, numeric bounds, array/object size limits,
///   `patternProperties`, `default`, `if`/`then`/`else`, `not`…; `oneOf` becomes
///   `anyOf` and `allOf` is dropped (both with a warning).
///
/// `strict: false` (Anthropic, and OpenAI without strict) changes nothing except
/// making sure the root is an object schema, which both APIs require.
///
/// The engine still validates arguments against the *original* schema, so
/// dropping a constraint loosens what the model is told, never what we accept.
func adaptToolSchemas(_ tools: [ModelToolDefinition], strict: Bool)
    -> (tools: [ModelToolDefinition], warnings: [SchemaWarning])
{
    var warnings: [SchemaWarning] = []
    var adapted: [ModelToolDefinition] = []
    for tool in tools {
        var adapter = SchemaAdapter(tool: tool.name)
        var schema = adapter.ensureObjectRoot(tool.inputSchema)
        if strict { schema = adapter.strict(schema, path: "") }
        warnings += adapter.warnings
        adapted.append(ModelToolDefinition(name: tool.name, description: tool.description, inputSchema: schema))
    }
    return (adapted, warnings)
}

/// Adapts one schema (a structured-output response schema) the same way.
func adaptSchema(_ schema: JSONValue, name: String, strict: Bool) -> (schema: JSONValue, warnings: [SchemaWarning]) {
    let result = adaptToolSchemas([ModelToolDefinition(name: name, description: "", inputSchema: schema)], strict: strict)
    return (result.tools.first?.inputSchema ?? schema, result.warnings)
}

struct SchemaAdapter {
    let tool: String
    var warnings: [SchemaWarning] = []

    init(tool: String) { self.tool = tool }

    /// Keywords outside OpenAI's strict subset.
    static let unsupportedStrictKeywords: Set<String> = [
        "format", "minLength", "maxLength", "pattern", "contentEncoding", "contentMediaType",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems",
        "minProperties", "maxProperties", "patternProperties", "propertyNames", "unevaluatedProperties",
        "dependentRequired", "dependentSchemas", "dependencies", "if", "then", "else", "not", "allOf",
        "default", "examples", "readOnly", "writeOnly", "deprecated",
    ]

    mutating func warn(_ path: String, _ message: String) {
        warnings.append(SchemaWarning(tool: tool, path: path.isEmpty ? "/" : path, message: message))
    }

    static func escape(_ key: String) -> String {
        key.replacingScalars(of: "~", with: "~0").replacingScalars(of: "/", with: "~1")
    }

    mutating func ensureObjectRoot(_ schema: JSONValue) -> JSONValue {
        guard var o = schema.objectValue else {
            warn("", "root schema is not an object schema; replaced with an empty object schema")
            return ["type": "object", "properties": [:]]
        }
        if o["type"] == nil {
            o["type"] = "object"
            warn("/type", "root schema has no type; set to \"object\"")
        } else if o["type"] != "object" {
            warn("", "root schema type is \(o["type"]?.description ?? "?"), not object; replaced with an empty object schema")
            return ["type": "object", "properties": [:]]
        }
        if o["properties"] == nil { o["properties"] = [:] }
        return .object(o)
    }

    mutating func strict(_ schema: JSONValue, path: String) -> JSONValue {
        guard var o = schema.objectValue else { return schema }
        for key in o.keys.sorted() where Self.unsupportedStrictKeywords.contains(key) {
            o[key] = nil
            warn("\(path)/\(Self.escape(key))", "\"\(key)\" is not supported in strict mode; dropped")
        }
        if let oneOf = o.removeValue(forKey: "oneOf") {
            if o["anyOf"] == nil {
                o["anyOf"] = oneOf
                warn("\(path)/oneOf", "\"oneOf\" is not supported in strict mode; changed to \"anyOf\"")
            } else {
                warn("\(path)/oneOf", "\"oneOf\" is not supported in strict mode and \"anyOf\" is already present; dropped")
            }
        }

        if let properties = o["properties"]?.objectValue {
            let required = Set((o["required"]?.arrayValue ?? []).compactMap(\.stringValue))
            var newProperties: [String: JSONValue] = [:]
            for name in properties.keys.sorted() {
                let propertyPath = "\(path)/properties/\(Self.escape(name))"
                guard let property = properties[name] else { continue }
                var adapted = strict(property, path: propertyPath)
                if !required.contains(name) {
                    adapted = makeNullable(adapted, path: propertyPath)
                }
                newProperties[name] = adapted
            }
            o["properties"] = .object(newProperties)
            o["required"] = .array(properties.keys.sorted().map { .string($0) })
        }
        let isObject = o["type"] == "object" || o["type"]?.arrayValue?.contains("object") == true || o["properties"] != nil
        if isObject && o["additionalProperties"] != .bool(false) {
            if o["additionalProperties"] != nil {
                warn("\(path)/additionalProperties", "strict mode requires additionalProperties: false; replaced")
            } else {
                warn("\(path)/additionalProperties", "added additionalProperties: false (required in strict mode)")
            }
            o["additionalProperties"] = false
            if o["properties"] == nil { o["properties"] = [:] }
            if o["required"] == nil { o["required"] = [] }
        }

        if let items = o["items"] {
            o["items"] = strict(items, path: "\(path)/items")
        }
        if let anyOf = o["anyOf"]?.arrayValue {
            o["anyOf"] = .array(anyOf.enumerated().map { strict($0.element, path: "\(path)/anyOf/\($0.offset)") })
        }
        for defsKey in ["$defs", "definitions"] {
            if let defs = o[defsKey]?.objectValue {
                var newDefs: [String: JSONValue] = [:]
                for name in defs.keys.sorted() {
                    if let d = defs[name] { newDefs[name] = strict(d, path: "\(path)/\(defsKey)/\(Self.escape(name))") }
                }
                o[defsKey] = .object(newDefs)
            }
        }
        return .object(o)
    }

    /// Makes an optional property required-but-nullable.
    mutating func makeNullable(_ schema: JSONValue, path: String) -> JSONValue {
        guard var o = schema.objectValue else { return schema }
        var changed = false
        switch o["type"] {
        case .string(let t)?:
            if t != "null" {
                o["type"] = [.string(t), "null"]
                changed = true
            }
        case .array(let types)?:
            if !types.contains("null") {
                o["type"] = .array(types + ["null"])
                changed = true
            }
        default:
            if o["enum"] == nil && o["const"] == nil {
                // No type to widen ($ref, anyOf…): offer null as an alternative.
                let inner = JSONValue.object(o)
                if var anyOf = o["anyOf"]?.arrayValue, o.count == 1 || (o.count == 2 && o["description"] != nil) {
                    if !anyOf.contains(["type": "null"]) { anyOf.append(["type": "null"]) }
                    o["anyOf"] = .array(anyOf)
                } else {
                    var wrapper: [String: JSONValue] = ["anyOf": [inner, ["type": "null"]]]
                    if let d = o["description"] { wrapper["description"] = d }
                    o = wrapper
                }
                changed = true
            }
        }
        if var values = o["enum"]?.arrayValue, !values.contains(.null) {
            values.append(.null)
            o["enum"] = .array(values)
            changed = true
        }
        if changed {
            warn(path, "optional property made required and nullable (strict mode requires every property)")
        } else {
            warn(path, "optional property made required (strict mode requires every property)")
        }
        return .object(o)
    }
}
