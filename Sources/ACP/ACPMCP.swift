import AgentRPCProtocol

/// The editor's MCP servers (`session/new`'s `mcpServers`) as agentrpc's
/// `session/create` server specs. A server agentrpc cannot start is never
/// dropped silently: it is named, with the reason, in the answer's `_meta`.
enum ACPMCP {
    struct Conversion {
        var specs: [JSONValue] = []
        var notStarted: [(name: String, reason: String)] = []
        /// The editor's name of each server, by the name agentrpc gave it.
        var shownNames: [String: String] = [:]
    }

    static func convert(_ servers: [JSONValue]) -> Conversion {
        var out = Conversion()
        var taken: Set<String> = []
        for server in servers {
            let shown = server["name"]?.stringValue ?? "(unnamed)"
            let name = uniqueName(shown, taken: &taken)
            out.shownNames[name] = shown
            switch server["type"]?.stringValue ?? "stdio" {
            case "stdio":
                guard let command = server["command"]?.stringValue, !command.isEmpty else {
                    out.notStarted.append((shown, "a stdio server needs a command"))
                    continue
                }
                var spec: [String: JSONValue] = ["name": .string(name), "command": .string(command)]
                let args = (server["args"]?.arrayValue ?? []).compactMap(\.stringValue)
                if !args.isEmpty { spec["args"] = .array(args.map(JSONValue.string)) }
                var env: [String: JSONValue] = [:]
                for variable in server["env"]?.arrayValue ?? [] {
                    if let n = variable["name"]?.stringValue, let v = variable["value"]?.stringValue { env[n] = .string(v) }
                }
                if !env.isEmpty { spec["env"] = .object(env) }
                out.specs.append(.object(spec))
            case "http":
                guard let url = server["url"]?.stringValue else {
                    out.notStarted.append((shown, "an http server needs a url"))
                    continue
                }
                var spec: [String: JSONValue] = ["name": .string(name), "type": "http", "url": .string(url)]
                var headers: [String: JSONValue] = [:]
                for header in server["headers"]?.arrayValue ?? [] {
                    if let n = header["name"]?.stringValue, let v = header["value"]?.stringValue { headers[n] = .string(v) }
                }
                if !headers.isEmpty { spec["headers"] = .object(headers) }
                out.specs.append(.object(spec))
            case let other:
                out.notStarted.append((shown, "the \(other) transport is not supported (mcpCapabilities says which are)"))
            }
        }
        return out
    }

    /// agentrpc's server names are letters, digits, `-` and `_` (they become part
    /// of tool names); an editor's may be any text.
    static func uniqueName(_ raw: String, taken: inout Set<String>) -> String {
        var base = String(raw.unicodeScalars.map { scalar -> Character in
            let c = Character(scalar)
            return (c.isASCII && (c.isLetter || c.isNumber)) || c == "-" || c == "_" ? c : "_"
        }.prefix(MCPBounds.maxServerNameLength - 4))
        if base.isEmpty { base = "server" }
        var name = base
        var n = 2
        while taken.contains(name) {
            name = "\(base)_\(n)"
            n += 1
        }
        taken.insert(name)
        return name
    }

    /// `_meta.agentrpc` naming the servers that were not started.
    static func meta(_ notStarted: [(name: String, reason: String)]) -> JSONValue? {
        guard !notStarted.isEmpty else { return nil }
        return ["agentrpc": [
            "mcpServersNotStarted": .array(notStarted.map { ["name": .string($0.name), "reason": .string($0.reason)] }),
        ]]
    }
}
