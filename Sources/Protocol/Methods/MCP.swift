// Model Context Protocol tool servers a session uses (docs/protocol.md, "MCP tool servers").

/// How agentrpc reaches an MCP server: the `type` of a spec, as the MCP clients
/// people copy configurations from write it.
public enum MCPTransportKind: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    /// A child process speaking newline-delimited JSON-RPC on its stdin and stdout.
    case stdio
    /// Streamable HTTP: one endpoint, POST per message, JSON or SSE answers.
    case http
    /// Another name of `http` (Cursor, Cline and others write it).
    case streamableHTTP = "streamable-http"
    /// The deprecated HTTP+SSE transport: accepted in a configuration, never started.
    case sse
}

/// When a server's tools ask the user before they run (docs/protocol.md, "MCP tool servers").
public enum MCPConfirmPolicy: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    /// By the tool's annotations read with the MCP defaults: a tool not marked
    /// `readOnlyHint: true` or `destructiveHint: false` asks.
    case hints
    /// Every tool of the server asks.
    case always
    /// No tool of the server asks by itself (guards still may).
    case never
}

/// One MCP server: a command to start (`stdio`, the default) or an endpoint (`type: "http"`).
/// `env` and `headers` values may name environment variables of agentrpc as `${NAME}`;
/// literal values are never stored with the session (they may hold credentials).
public struct MCPServerSpec: Codable, Sendable, Hashable {
    /// Letters, digits, `-` and `_`, at most `MCPBounds.maxServerNameLength`; the tools
    /// appear to the model as `mcp__<name>__<tool>`.
    public var name: String
    public var type: MCPTransportKind?
    /// stdio: the program (a path, or a name looked up on `PATH`).
    public var command: String?
    public var args: [String]?
    /// stdio: variables added to agentrpc's environment for the child.
    public var env: [String: String]?
    /// stdio: the child's working directory (default: agentrpc's).
    public var cwd: String?
    /// http: the MCP endpoint.
    public var url: String?
    /// http: headers sent with every request.
    public var headers: [String: String]?
    /// How long a turn waits for this server to be ready (default `MCPBounds.defaultStartupTimeoutSeconds`).
    public var startupTimeoutSeconds: Double?
    /// Which of its tools ask before they run (default `hints`).
    public var confirm: MCPConfirmPolicy?
    /// `true`: the server is not started; `session/getState` lists it as `disabled`.
    public var disabled: Bool?
    /// `false` is `disabled: true` (Codex writes it so).
    public var enabled: Bool?
    /// Tool names (as the server lists them) approved without asking: each is a
    /// standing approval rule for `mcp__<name>__<tool>`.
    public var autoApprove: [String]?
    /// Another name of `autoApprove` (Roo Code writes it).
    public var alwaysAllow: [String]?
    /// Whether calls of its tools may run beside other calls: `true` for all of
    /// them, `false` for none; absent, those with `readOnlyHint: true` may.
    public var parallel: Bool?
    /// Keys of the entry agentrpc does not read (other clients' settings): each is
    /// a warning in the log and in the server's `problems`, never an error. Not on the wire.
    public var ignoredKeys: [String] = []

    enum CodingKeys: String, CodingKey, CaseIterable {
        case name, type, command, args, env, cwd, url, headers, startupTimeoutSeconds
        case confirm, disabled, enabled, autoApprove, alwaysAllow, parallel
    }

    public init(
        name: String, type: MCPTransportKind? = nil, command: String? = nil, args: [String]? = nil,
        env: [String: String]? = nil, cwd: String? = nil, url: String? = nil, headers: [String: String]? = nil,
        startupTimeoutSeconds: Double? = nil, confirm: MCPConfirmPolicy? = nil, disabled: Bool? = nil,
        autoApprove: [String]? = nil, parallel: Bool? = nil
    ) {
        self.parallel = parallel
        self.name = name
        self.type = type
        self.command = command
        self.args = args
        self.env = env
        self.cwd = cwd
        self.url = url
        self.headers = headers
        self.startupTimeoutSeconds = startupTimeoutSeconds
        self.confirm = confirm
        self.disabled = disabled
        self.autoApprove = autoApprove
    }

    /// Decodes a spec as other MCP clients write it: keys agentrpc does not read
    /// are kept in `ignoredKeys` instead of failing the decoding (a strict decoder
    /// counts them as read); a wrong value of a key it reads still fails, naming it.
    public static func decodeTolerant(from decoder: any Decoder) throws -> MCPServerSpec {
        let known = Set(CodingKeys.allCases.map(\.stringValue))
        let keys = try decoder.container(keyedBy: MCPAnyKey.self).allKeys.map(\.stringValue)
        var spec = try MCPServerSpec(from: decoder)
        spec.ignoredKeys = keys.filter { !known.contains($0) }.sorted()
        return spec
    }

    /// The transport: `type` (`streamable-http` is `http`), else `http` for an
    /// entry with a `url` and no `command`, else `stdio`.
    public var transport: MCPTransportKind {
        switch type {
        case .streamableHTTP: return .http
        case .some(let t): return t
        case nil: return url != nil && command == nil ? .http : .stdio
        }
    }

    /// Not to be started (`disabled: true` or `enabled: false`).
    public var isDisabled: Bool { disabled == true || enabled == false }

    /// The names of its tools approved without asking (`autoApprove` and `alwaysAllow`).
    public var approvedTools: [String] { (autoApprove ?? []) + (alwaysAllow ?? []) }

    /// The warnings `ignoredKeys` become.
    public var ignoredKeyWarnings: [String] {
        ignoredKeys.map { "the configuration key '\($0.prefix(64))' is not one agentrpc reads; it was ignored" }
    }

    /// What the types cannot say; `path` is where the spec sits (`mcpServers[0]`).
    public func problems(at path: String) -> [ConfigProblem] {
        var out: [ConfigProblem] = []
        if let p = Self.nameProblem(name) { out.append(ConfigProblem(path: path + ".name", message: p)) }
        switch transport {
        case .stdio:
            if (command ?? "").isEmpty { out.append(ConfigProblem(path: path + ".command", message: "a stdio server needs a command")) }
            if url != nil { out.append(ConfigProblem(path: path + ".url", message: "url belongs to an http server (type: \"http\")")) }
            if headers != nil { out.append(ConfigProblem(path: path + ".headers", message: "headers belong to an http server (type: \"http\")")) }
        case .sse:
            // Never started (reported as such), so nothing more is asked of it.
            break
        case .http, .streamableHTTP:
            let u = url ?? ""
            if !(u.hasPrefix("http://") || u.hasPrefix("https://")) {
                out.append(ConfigProblem(path: path + ".url", message: "an http server needs an http:// or https:// url"))
            }
            for (key, value) in [("command", command), ("cwd", cwd)] where value != nil {
                out.append(ConfigProblem(path: "\(path).\(key)", message: "\(key) belongs to a stdio server"))
            }
            if args != nil { out.append(ConfigProblem(path: path + ".args", message: "args belong to a stdio server")) }
            if env != nil { out.append(ConfigProblem(path: path + ".env", message: "env belongs to a stdio server")) }
            for (key, value) in (headers ?? [:]).sorted(by: { $0.key < $1.key }) {
                if let p = Self.headerProblem(name: key, value: value) { out.append(ConfigProblem(path: "\(path).headers.\(key)", message: p)) }
            }
        }
        if let t = startupTimeoutSeconds, !MCPBounds.startupTimeoutSeconds.contains(t) {
            out.append(ConfigProblem(path: path + ".startupTimeoutSeconds", message: MCPBounds.startupTimeoutSeconds.requirement))
        }
        for (key, tools) in [("autoApprove", autoApprove), ("alwaysAllow", alwaysAllow)] {
            for (i, tool) in (tools ?? []).enumerated() where tool.isEmpty || tool.utf8.count > MCPBounds.maxToolNameLength {
                out.append(ConfigProblem(path: "\(path).\(key)[\(i)]", message: "a tool name of 1 to \(MCPBounds.maxToolNameLength) characters"))
            }
        }
        return out
    }

    /// Why a header cannot be sent as written, or nil: the name must be an HTTP
    /// token, the value one line (a line break would start a header of its own).
    static func headerProblem(name: String, value: String) -> String? {
        let token = !name.isEmpty && name.unicodeScalars.allSatisfy { s in
            (s >= "a" && s <= "z") || (s >= "A" && s <= "Z") || (s >= "0" && s <= "9") || "!#$%&'*+-.^_`|~".unicodeScalars.contains(s)
        }
        if !token { return "'\(name.prefix(64))' is not a valid HTTP header name" }
        if value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) { return "a header value must not contain a line break" }
        return nil
    }

    /// Why `name` cannot name a server, or nil.
    public static func nameProblem(_ name: String) -> String? {
        if name.isEmpty { return "must not be empty" }
        if name.utf8.count > MCPBounds.maxServerNameLength { return "must be at most \(MCPBounds.maxServerNameLength) characters" }
        let allowed = name.unicodeScalars.allSatisfy { s in
            (s >= "a" && s <= "z") || (s >= "A" && s <= "Z") || (s >= "0" && s <= "9") || s == "-" || s == "_"
        }
        if !allowed { return "'\(name)' may hold only letters, digits, '-' and '_'" }
        if name.contains("__") { return "'\(name)' must not contain '__' (it separates the parts of a tool name)" }
        return nil
    }
}

extension MCPServerSpec: JSONSchemaBounded {
    public static let jsonSchemaBounds: [String: NumericBounds] = ["startupTimeoutSeconds": MCPBounds.startupTimeoutSeconds]
}

/// A session's MCP server: the name of one in `agentrpc.json`'s `mcpServers`, or a full spec.
public enum MCPServerEntry: Codable, Sendable, Hashable, JSONSchemaProviding {
    case named(String)
    case inline(MCPServerSpec)

    public init(from decoder: any Decoder) throws {
        if let name = try? decoder.singleValueContainer().decode(String.self) {
            self = .named(name)
        } else {
            self = .inline(try MCPServerSpec.decodeTolerant(from: decoder))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .named(let name):
            var c = encoder.singleValueContainer()
            try c.encode(name)
        case .inline(let spec):
            try spec.encode(to: encoder)
        }
    }

    /// The server's name either way.
    public var name: String {
        switch self {
        case .named(let n): return n
        case .inline(let s): return s.name
        }
    }

    public static var jsonSchema: JSONValue {
        WireSchema.anyOf([
            WireSchema.describe(WireSchema.string, "The name of an MCP server configured in agentrpc.json."),
            WireSchema.ref(MCPServerSpec.self),
        ])
    }
    public static var jsonSchemaDependencies: [any Decodable.Type] { [MCPServerSpec.self] }
}

/// Any key of an object, to list them all.
struct MCPAnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Where an MCP server is in its life (`mcpServerStatus`, `session/getState`).
public enum MCPServerStatus: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case starting
    case ready
    /// Gave up: it did not start, or crashed more often than it is restarted.
    case failed
    /// Crashed or went away; it is started again after a backoff.
    case restarting
    /// The session closed it.
    case stopped
    /// Its configuration says `disabled: true` (or `enabled: false`): never started.
    case disabled
}

/// One MCP server as `session/getState` shows it.
public struct MCPServerState: Codable, Sendable, Hashable {
    public var name: String
    public var transport: MCPTransportKind
    public var status: MCPServerStatus
    /// Why it failed or is restarting.
    public var reason: String?
    /// The protocol version it answered with, once initialized.
    public var protocolVersion: String?
    /// The names the model sees (`mcp__<server>__<tool>`).
    public var tools: [String]
    /// The last lines the server wrote to stderr (stdio only).
    public var stderr: [String]?
    /// How often it was restarted.
    public var restarts: Int
    /// The last things it did wrong that did not stop it (bad JSON, an answer to an unknown id, ...).
    public var problems: [String]?
    /// While `failed`: when it is tried again (ISO 8601); the first turn that starts after it does.
    public var nextTryAt: String?
    /// The prompts it lists (`prompts/list`), when it declared `prompts` and has any;
    /// `session/getPrompt` fetches one.
    public var prompts: [MCPPromptInfo]?

    public init(
        name: String, transport: MCPTransportKind, status: MCPServerStatus, reason: String? = nil, protocolVersion: String? = nil,
        tools: [String] = [], stderr: [String]? = nil, restarts: Int = 0, problems: [String]? = nil
    ) {
        self.name = name
        self.transport = transport
        self.status = status
        self.reason = reason
        self.protocolVersion = protocolVersion
        self.tools = tools
        self.stderr = stderr
        self.restarts = restarts
        self.problems = problems
    }

    /// The `mcpServerStatus` event for this state: `stderr` when there is some,
    /// `tools` (and `prompts`, when it has any) when ready.
    public var statusEvent: SessionEvent {
        SessionEvent(SessionEvent.MCPServerStatusChanged(
            server: name, status: status, reason: reason, stderr: (stderr ?? []).isEmpty ? nil : stderr,
            tools: status == .ready ? tools : nil, prompts: status == .ready && prompts?.isEmpty == false ? prompts : nil))
    }
}

/// Which executor ran a tool call, on `toolCallStarted`/`toolCallFinished`: absent for the client's tools.
public struct ToolSource: Codable, Sendable, Hashable {
    /// The MCP server's name.
    public var mcp: String?
    public init(mcp: String? = nil) { self.mcp = mcp }
    public var json: JSONValue { .object(mcp.map { ["mcp": .string($0)] } ?? [:]) }
}

extension SessionConfig {
    /// `mcpServers` problems: bad specs, duplicate names, too many servers, and client
    /// tools whose names a server's tools could take (`mcp__<server>__...`).
    func mcpServerProblems() -> [ConfigProblem] {
        var out: [ConfigProblem] = []
        let entries = mcpServers ?? []
        if entries.count > MCPBounds.maxServersPerSession {
            out.append(ConfigProblem(path: "mcpServers", message: "at most \(MCPBounds.maxServersPerSession) servers"))
        }
        var seen: Set<String> = []
        for (i, entry) in entries.enumerated() {
            let path = "mcpServers[\(i)]"
            switch entry {
            case .named(let name):
                if let p = MCPServerSpec.nameProblem(name) { out.append(ConfigProblem(path: path, message: p)) }
            case .inline(let spec):
                out += spec.problems(at: path)
            }
            if !seen.insert(entry.name).inserted {
                out.append(ConfigProblem(path: path + (entry.isInline ? ".name" : ""), message: "duplicate MCP server name '\(entry.name)'"))
            }
        }
        var profileNames: [(String, [String])] = []
        if let p = profiles {
            if let d = p.defaults?.mcpServers { profileNames.append(("profiles.defaults.mcpServers", d)) }
            for name in p.cases.keys.sorted() { if let m = p.cases[name]?.mcpServers { profileNames.append(("profiles.cases.\(name).mcpServers", m)) } }
        }
        for (path, names) in profileNames {
            for (j, name) in names.enumerated() {
                if let p = MCPServerSpec.nameProblem(name) { out.append(ConfigProblem(path: "\(path)[\(j)]", message: p)) }
                seen.insert(name)
            }
        }
        for (i, tool) in (tools ?? []).enumerated() {
            for server in seen.sorted() where tool.name.hasPrefix("mcp__\(server)__") {
                out.append(ConfigProblem(
                    path: "tools[\(i)].name",
                    message: "client tool '\(tool.name)' clashes with the tools of MCP server '\(server)' (they are named mcp__\(server)__<tool>)"))
            }
        }
        return out
    }
}

extension MCPServerEntry {
    var isInline: Bool { if case .inline = self { return true } else { return false } }
}

/// One prompt an MCP server lists: a message template the user picks by name.
public struct MCPPromptInfo: Codable, Sendable, Hashable {
    public var name: String
    public var title: String?
    public var description: String?
    public var arguments: [MCPPromptArgument]?
    public init(name: String, title: String? = nil, description: String? = nil, arguments: [MCPPromptArgument]? = nil) {
        self.name = name
        self.title = title
        self.description = description
        self.arguments = arguments
    }
}

/// One argument of a prompt.
public struct MCPPromptArgument: Codable, Sendable, Hashable {
    public var name: String
    public var description: String?
    public var required: Bool?
    public init(name: String, description: String? = nil, required: Bool? = nil) {
        self.name = name
        self.description = description
        self.required = required
    }
}

/// `session/getPrompt`: one of an MCP server's prompts with its arguments
/// filled in, as the messages to send (docs/protocol.md, "MCP tool servers").
public enum SessionGetPromptRequest: RPCMethod {
    public static let name = "session/getPrompt"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionGetPromptParams
    public typealias Result = SessionGetPromptResult
}

public struct SessionGetPromptParams: Codable, Sendable, Hashable {
    public var sessionId: String
    /// The server's `name` in the session's `mcpServers`.
    public var server: String
    /// The prompt's name as the server lists it.
    public var name: String
    /// Its arguments (all strings, as MCP has them).
    public var arguments: [String: String]?
    public init(sessionId: String, server: String, name: String, arguments: [String: String]? = nil) {
        self.sessionId = sessionId
        self.server = server
        self.name = name
        self.arguments = arguments
    }
}

public struct SessionGetPromptResult: Codable, Sendable, Hashable {
    public var description: String?
    /// The prompt's messages as the server gave them: `{role: "user" | "assistant",
    /// content}`, `content` an MCP content block (binary data described, not inlined).
    public var messages: [JSONValue]
    public init(description: String? = nil, messages: [JSONValue]) {
        self.description = description
        self.messages = messages
    }
}
