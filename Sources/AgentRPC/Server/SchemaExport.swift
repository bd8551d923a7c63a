import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Writes the JSON Schema of every method's params and result, every
/// notification, and the error object, generated from the Swift types
/// (`agentrpc schema --out DIR`). The committed copy lives in `schema/`.
package enum SchemaExport {
    /// File name → schema document, deterministic.
    static func documents() throws -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        var index: [JSONValue] = []
        for m in MethodRegistry.requests {
            let base = fileBase(m.name)
            out["\(base).params.json"] = try titled(JSONSchemaGenerator.schema(for: m.paramsType), "\(m.name) params")
            out["\(base).result.json"] = try titled(JSONSchemaGenerator.schema(for: m.resultType), "\(m.name) result")
            let entry: [String: JSONValue] = [
                "method": .string(m.name), "kind": .string("request"), "direction": .string(m.direction.rawValue),
                "params": .string("\(base).params.json"), "result": .string("\(base).result.json"),
            ]
            index.append(.object(entry))
        }
        for n in MethodRegistry.notifications {
            let base = fileBase(n.name)
            // A name used for both a request and a notification (session/cancel) keeps distinct files.
            let file = out["\(base).params.json"] == nil ? "\(base).params.json" : "\(base).notification.params.json"
            out[file] = try titled(JSONSchemaGenerator.schema(for: n.paramsType), "\(n.name) notification params")
            let entry: [String: JSONValue] = [
                "method": .string(n.name), "kind": .string("notification"), "direction": .string(n.direction.rawValue), "params": .string(file),
            ]
            index.append(.object(entry))
        }
        out["error.json"] = try titled(JSONSchemaGenerator.schema(for: ErrorObject.self), "JSON-RPC error object")
        out["index.json"] = ["protocolVersion": .int(InitializeRequest.protocolVersion), "methods": .array(index)]
        return out
    }

    static func fileBase(_ method: String) -> String {
        method.replacing("$/", with: "").replacing("/", with: ".")
    }

    private static func titled(_ schema: JSONValue, _ title: String) -> JSONValue {
        guard case .object(var o) = schema else { return schema }
        o["title"] = .string(title)
        return .object(o)
    }

    /// Pretty, stable text for a committed file.
    package static func render(_ value: JSONValue) -> String { PrettyJSON.render(value) + "\n" }

    /// Writes every document into `directory`, removing stale `.json` files there.
    package static func write(to directory: String) throws {
        let fm = FileManager.default
        try fm.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let docs = try documents()
        for existing in (try? fm.contentsOfDirectory(atPath: directory)) ?? [] where existing.hasSuffix(".json") && docs[existing] == nil {
            try fm.removeItem(atPath: directory.appendingPathComponent(existing))
        }
        for (name, doc) in docs {
            try Data(render(doc).utf8).write(to: URL(fileURLWithPath: directory.appendingPathComponent(name)))
        }
    }
}

/// Indented JSON with sorted keys, for files people read and diff.
enum PrettyJSON {
    static func render(_ value: JSONValue, indent: String = "") -> String {
        switch value {
        case .array(let a):
            if a.isEmpty { return "[]" }
            let inner = indent + "  "
            return "[\n" + a.map { inner + render($0, indent: inner) }.joined(separator: ",\n") + "\n" + indent + "]"
        case .object(let o):
            if o.isEmpty { return "{}" }
            let inner = indent + "  "
            return "{\n" + o.keys.sorted().map { key in
                inner + JSONValue.string(key).serializedString() + ": " + render(o[key] ?? .null, indent: inner)
            }.joined(separator: ",\n") + "\n" + indent + "}"
        default:
            return value.serializedString()
        }
    }
}

extension RPCMethod {
    /// The params type, reachable from an existential metatype.
    static var paramsType: any Decodable.Type { Params.self }
    static var resultType: any Decodable.Type { Result.self }
}

extension RPCNotification {
    static var paramsType: any Decodable.Type { Params.self }
}
