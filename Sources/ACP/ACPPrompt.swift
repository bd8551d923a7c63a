import AgentRPC
import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `session/prompt`'s content blocks as one turn input (`{text, images?}`).
enum ACPPrompt {
    static func input(_ blocks: [JSONValue], cwd: String) throws -> JSONValue {
        guard !blocks.isEmpty else { throw RPCError.invalidParams("session/prompt: prompt must hold at least one content block", field: "prompt") }
        var parts: [String] = []
        var images: [JSONValue] = []
        for (index, block) in blocks.enumerated() {
            let field = "prompt[\(index)]"
            func bad(_ why: String) -> RPCError { RPCError.invalidParams("session/prompt: \(field) \(why)", field: field) }
            guard let o = block.objectValue, let type = o["type"]?.stringValue else { throw bad("must be a content block with a type") }
            switch type {
            case "text":
                guard let text = o["text"]?.stringValue else { throw bad("(text) needs a string text") }
                parts.append(text)
            case "resource_link":
                guard let uri = o["uri"]?.stringValue, let name = o["name"]?.stringValue else { throw bad("(resource_link) needs uri and name") }
                // Named, not read: the model reads it with read_file if it wants it.
                let path = filePath(uri).map { ACPPaths.display(ACPPaths.normalize($0), cwd: cwd) }
                parts.append(path.map { "[@\(name)](\(uri)) (file \($0))" } ?? "[@\(name)](\(uri))")
            case "resource":
                guard let resource = o["resource"]?.objectValue, let uri = resource["uri"]?.stringValue else { throw bad("(resource) needs resource.uri") }
                if let text = resource["text"]?.stringValue {
                    parts.append("<context uri=\"\(uri)\">\n\(text)\n</context>")
                } else if let blob = resource["blob"]?.stringValue, let mime = resource["mimeType"]?.stringValue, mime.hasPrefix("image/") {
                    images.append(["data": .string(blob), "mimeType": .string(mime)])
                } else {
                    throw bad("(resource) must embed text (binary resources other than images are not supported)")
                }
            case "image":
                guard let data = o["data"]?.stringValue, let mime = o["mimeType"]?.stringValue else { throw bad("(image) needs data and mimeType") }
                images.append(["data": .string(data), "mimeType": .string(mime)])
            case "audio":
                throw bad("is audio, which this agent does not take (promptCapabilities.audio is false)")
            default:
                throw bad("has an unknown type '\(type)'")
            }
        }
        var input: [String: JSONValue] = ["text": .string(parts.joined(separator: "\n"))]
        if !images.isEmpty { input["images"] = .array(images) }
        return .object(input)
    }

    /// The path of a `file://` URI (percent-escapes decoded), else nil.
    static func filePath(_ uri: String) -> String? {
        guard uri.hasPrefix("file://") else { return nil }
        let rest = uri.dropFirst("file://".count)
        guard let slash = rest.firstIndex(of: "/") else { return nil }
        return rest[slash...].percentDecoded
    }
}
