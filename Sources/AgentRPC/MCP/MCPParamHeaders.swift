import AgentRPCProtocol

/// A tool argument a modern (2026-07-28) Streamable HTTP server wants mirrored
/// into the request header `Mcp-Param-{name}` (`x-mcp-header` in the argument's
/// schema), so what routes the request needs not read its body. The server
/// refuses a call whose headers do not match its arguments (`HeaderMismatch`).
struct MCPParamHeader: Sendable, Hashable {
    /// The chain of `properties` keys from the schema's root to the argument.
    var path: [String]
    /// `{name}` of `Mcp-Param-{name}`.
    var name: String

    static let annotationKey = "x-mcp-header"
    static let prefix = "Mcp-Param-"

    /// Why a tool's annotations are unusable: the specification has the tool left out.
    struct Invalid: Error, CustomStringConvertible {
        var description: String
    }

    /// The annotations of a tool's `inputSchema`. Valid ones sit on a string,
    /// integer or boolean property reached from the root through `properties`
    /// alone, name a header token, and differ from each other ignoring case.
    static func annotations(of schema: JSONValue) throws(Invalid) -> [MCPParamHeader] {
        var found: [MCPParamHeader] = []
        try collect(schema, chain: [], depth: 0, into: &found)
        var seen: Set<String> = []
        for header in found where !seen.insert(header.name.lowercased()).inserted {
            throw Invalid(description: "two of its arguments ask for the header \(prefix)\(header.name.prefix(64))")
        }
        return found
    }

    /// Deeper schemas are not searched (a server's schema is bounded, its nesting need not be).
    private static let maxDepth = 32
    /// Members that hold instance values, not schemas: an `x-mcp-header` key in them means nothing.
    private static let valueKeywords: Set<String> = ["default", "const", "enum", "examples"]

    /// `chain`: the `properties` keys that lead here, nil when the way here
    /// took any other keyword (`items`, `oneOf`, `$defs`, ...).
    private static func collect(_ schema: JSONValue, chain: [String]?, depth: Int, into found: inout [MCPParamHeader]) throws(Invalid) {
        guard depth < maxDepth, let object = schema.objectValue else { return }
        if let annotation = object[annotationKey] {
            guard let chain, !chain.isEmpty else {
                throw Invalid(description: "it has \(annotationKey) where only properties reached through `properties` alone may have it")
            }
            let argument = chain.joined(separator: ".").prefix(128)
            guard let name = annotation.stringValue, !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
                throw Invalid(description: "the \(annotationKey) of its argument '\(argument)' is not a header name")
            }
            guard let type = object["type"]?.stringValue, ["string", "integer", "boolean"].contains(type) else {
                throw Invalid(description: "its argument '\(argument)' has \(annotationKey) but is not a string, integer or boolean")
            }
            found.append(MCPParamHeader(path: chain, name: name))
        }
        for (key, child) in object where !valueKeywords.contains(key) {
            if key == "properties", let properties = child.objectValue {
                for (name, property) in properties {
                    try collect(property, chain: chain.map { $0 + [name] }, depth: depth + 1, into: &found)
                }
            } else if let items = child.arrayValue {
                for item in items { try collect(item, chain: nil, depth: depth + 1, into: &found) }
            } else {
                try collect(child, chain: nil, depth: depth + 1, into: &found)
            }
        }
    }

    /// RFC 9110's `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"): return true
        default: return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// The largest integer a header may carry (the specification's JavaScript-safe range).
    private static let maxSafeInteger = 9_007_199_254_740_991

    /// The headers a call's arguments give: each annotated argument that has a
    /// value (not null) as its string form (`true`/`false`, a decimal integer,
    /// the text), encoded as `Mcp-Name` is. Throws when they would be longer
    /// than `MCPBounds.maxParamHeaderBytes` together.
    static func headers(_ annotations: [MCPParamHeader], arguments: JSONValue) throws(MCPTransportError) -> [String: String] {
        var out: [String: String] = [:]
        var bytes = 0
        for annotation in annotations {
            var value: JSONValue? = arguments
            for key in annotation.path { value = value?[key] }
            let text: String
            switch value {
            case .string(let s): text = s
            case .bool(let b): text = b ? "true" : "false"
            case .int(let i): text = String(i)
            case .double(let d) where d.rounded() == d && abs(d) <= Double(maxSafeInteger): text = String(Int(d))
            default: continue
            }
            let encoded = MCPHTTPTransport.headerValue(text)
            bytes += encoded.utf8.count
            guard bytes <= MCPBounds.maxParamHeaderBytes else {
                throw MCPTransportError(description: "the argument '\(annotation.path.joined(separator: ".").prefix(128))' is too long for its header "
                    + "\(prefix)\(annotation.name) (the headers of one call may hold at most \(MCPBounds.maxParamHeaderBytes) bytes); it was not sent")
            }
            out[prefix + annotation.name] = encoded
        }
        return out
    }
}
