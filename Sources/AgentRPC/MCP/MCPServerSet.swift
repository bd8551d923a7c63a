import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The MCP servers of one session: which servers exist, the names their tools
/// have for the model, and where a call by such a name goes.
final class MCPServerSet: Sendable {
    let runners: [MCPServerRunner]
    private let byName: [String: MCPServerRunner]
    /// The turn whose schema warnings were reported, and for which tools.
    private let warned = Mutex<(turn: String?, tools: Set<String>)>((nil, []))
    /// The last turn that tried failed servers again.
    private let retriedTurn = Mutex<String?>(nil)

    /// The session's servers: its `mcpServers` entries, then agentrpc.json servers
    /// its profiles name. Throws `invalidConfiguration` for a name nowhere defined.
    /// `elicits`: the client answers `user/elicit`, so the servers are told they may ask for forms.
    static func make(
        config: SessionConfig, catalog: ModelCatalog, environment: [String: String], logger: Logger, elicits: Bool = false,
        report: @escaping @Sendable (MCPServerState) async -> Void
    ) throws -> MCPServerSet? {
        let specs = try specs(config: config, catalog: catalog)
        guard !specs.isEmpty else { return nil }
        let clock = MCPClock(environment: environment)
        return MCPServerSet(runners: specs.map {
            MCPServerRunner(spec: $0, environment: environment, logger: logger, clock: clock, elicits: elicits, report: report)
        })
    }

    static func specs(config: SessionConfig, catalog: ModelCatalog) throws -> [MCPServerSpec] {
        var specs: [MCPServerSpec] = []
        var names: Set<String> = []
        func named(_ name: String, field: String) throws -> MCPServerSpec {
            guard let spec = catalog.mcpServers[name] else {
                let known = catalog.mcpServers.keys.sorted()
                throw RPCError.invalidConfiguration(
                    "no MCP server named '\(name)' \(catalog.sourcePath.map { "in \($0)" } ?? "(no agentrpc.json was found)")"
                        + (known.isEmpty ? "" : "; known servers: \(known.joined(separator: ", "))"),
                    field: field)
            }
            return spec
        }
        for (i, entry) in (config.mcpServers ?? []).enumerated() {
            let spec: MCPServerSpec
            switch entry {
            case .named(let name): spec = try named(name, field: "mcpServers[\(i)]")
            case .inline(let s): spec = s
            }
            names.insert(spec.name)
            specs.append(spec)
        }
        var profileLists: [(String, [String])] = []
        if let p = config.profiles {
            if let d = p.defaults?.mcpServers { profileLists.append(("profiles.defaults.mcpServers", d)) }
            for name in p.cases.keys.sorted() { if let m = p.cases[name]?.mcpServers { profileLists.append(("profiles.cases.\(name).mcpServers", m)) } }
        }
        for (path, list) in profileLists {
            for (j, name) in list.enumerated() where !names.contains(name) {
                specs.append(try named(name, field: "\(path)[\(j)]"))
                names.insert(name)
            }
        }
        if specs.count > MCPBounds.maxServersPerSession {
            throw RPCError.invalidConfiguration("a session may use at most \(MCPBounds.maxServersPerSession) MCP servers", field: "mcpServers")
        }
        return specs
    }

    private init(runners: [MCPServerRunner]) {
        self.runners = runners
        var map: [String: MCPServerRunner] = [:]
        for r in runners { map[r.spec.name] = r }
        self.byName = map
    }

    func start() async {
        for r in runners { await r.start() }
    }

    func stop() async {
        await withTaskGroup(of: Void.self) { group in
            for r in runners { group.addTask { await r.stop() } }
        }
    }

    /// The first round trip of each turn tries failed servers again whose next try is due.
    func retryFailed(turn: String?) async {
        let first = retriedTurn.withLock { last -> Bool in
            guard let turn, last != turn else { return false }
            last = turn
            return true
        }
        guard first else { return }
        for r in runners { await r.retryIfDue() }
    }

    /// The runner of the server whose tools `toolName` would name, if any.
    func runner(ofTool toolName: String) -> MCPServerRunner? {
        guard toolName.hasPrefix("mcp__") else { return nil }
        return runners.first { Self.names(toolName, server: $0.spec.name) }
    }

    /// Whether `toolName` is a name the server `server` gives its tools (`mcp__<server>__<tool>`).
    static func names(_ toolName: String, server: String) -> Bool {
        toolName.hasPrefix("mcp__\(server)__")
    }

    /// Before a round trip: waits for servers still starting (each up to its
    /// `startupTimeoutSeconds`, all at once) and for listings `list_changed`
    /// asked for (as long again at most).
    func settle() async {
        await withTaskGroup(of: Void.self) { group in
            for r in runners {
                group.addTask {
                    await r.waitUntilSettled(seconds: r.startupTimeout)
                    await r.settleListing(seconds: r.startupTimeout)
                }
            }
        }
    }

    /// One offered MCP tool: its model-facing spec and where calls go.
    struct Offered: Sendable {
        var spec: ToolSpec
        var server: MCPServerRunner
        var serverName: String
        var toolName: String
        /// Its input schema cannot be used to check arguments.
        var schemaWarning: SchemaWarning?
    }

    /// The tools of the ready servers among `servers` (nil: all), in server order.
    func offeredTools(servers: [String]?) async -> [Offered] {
        var out: [Offered] = []
        var taken: Set<String> = []
        for r in runners where servers?.contains(r.spec.name) ?? true {
            for tool in await r.currentTools {
                let name = Self.exposedName(server: r.spec.name, tool: tool.name)
                guard taken.insert(name).inserted else { continue }
                out.append(Offered(
                    spec: Self.toolSpec(tool, exposedName: name, confirm: r.spec.confirm ?? .hints, parallel: r.spec.parallel), server: r, serverName: r.spec.name, toolName: tool.name,
                    schemaWarning: tool.schemaProblem.map {
                        SchemaWarning(tool: name, path: $0.schemaPath, message: "the input schema cannot be used to check arguments: \($0.message)")
                    }))
            }
        }
        return out
    }

    /// The warnings of `offered` not yet reported in `turn`: each tool's once a
    /// turn, as the pre-flight reports the client tools' at its start.
    func newSchemaWarnings(_ offered: [Offered], turn: String) -> [SchemaWarning] {
        let all = offered.compactMap(\.schemaWarning)
        guard !all.isEmpty else { return [] }
        return warned.withLock { w in
            if w.turn != turn { w = (turn, []) }
            return all.filter { w.tools.insert($0.tool).inserted }
        }
    }

    /// The states `session/getState` lists.
    func states() async -> [MCPServerState] {
        var out: [MCPServerState] = []
        for r in runners {
            let names = await r.currentTools.map { Self.exposedName(server: r.spec.name, tool: $0.name) }
            out.append(await r.state(exposedNames: names))
        }
        return out
    }

    /// `mcp__<server>__<tool>`, with characters providers refuse replaced; a name
    /// that had to change or is over 64 characters ends in a hash of the original,
    /// so two tools never meet under one name and the name never changes between runs.
    static func exposedName(server: String, tool: String) -> String {
        let full = "mcp__\(server)__\(tool)"
        var clean = ""
        for s in full.unicodeScalars {
            let ok = (s >= "a" && s <= "z") || (s >= "A" && s <= "Z") || (s >= "0" && s <= "9") || s == "_" || s == "-"
            clean.unicodeScalars.append(ok ? s : "_")
        }
        if clean == full && clean.utf8.count <= 64 { return clean }
        var hash: UInt32 = 2_166_136_261
        for byte in full.utf8 { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        let suffix = "_" + String(hash, radix: 16).leftPadded(to: 8)
        return String(clean.prefix(64 - suffix.count)) + suffix
    }

    /// The model-facing spec. Annotations are the server's hints read with the
    /// MCP defaults (absent `readOnlyHint` is false; absent `destructiveHint` is
    /// true; a read-only tool is not destructive), so guards match what the
    /// specification says a tool without hints may do. `confirm: always|never`
    /// is the tool's `confirmation`; under `hints` it stays nil and the guard
    /// verdict asks by the hints (`asksByHints`), which an `allow` guard lifts.
    /// `readOnlyHint: true` lets its calls run in parallel unless the server's
    /// `parallel` (given here) says otherwise.
    static func toolSpec(_ tool: MCPTool, exposedName: String, confirm: MCPConfirmPolicy = .hints, parallel: Bool? = nil) -> ToolSpec {
        let readOnly = tool.readOnlyHint ?? false
        let annotations = ToolAnnotations(
            readOnly: readOnly, destructive: !readOnly && (tool.destructiveHint ?? true), idempotent: tool.idempotentHint ?? false)
        let confirmation: ConfirmationPolicy?
        switch confirm {
        case .hints: confirmation = nil
        case .always: confirmation = .always
        case .never: confirmation = .never
        }
        return ToolSpec(
            name: exposedName, description: tool.description ?? tool.title, inputSchema: tool.inputSchema,
            confirmation: confirmation, annotations: annotations, parallel: parallel)
    }

    /// Whether an MCP tool's annotations (as `toolSpec` fills them) ask for
    /// confirmation: it may change something and may destroy it.
    /// Why a tool of the MCP server `server` (nil: not an MCP tool) asks by its
    /// hints, or nil: guards and approval rules decide the rest.
    static func hintConfirmation(for tool: ToolSpec, server: String?) -> String? {
        guard tool.confirmation == nil, let server, asksByHints(tool.annotations) else { return nil }
        return "the MCP server '\(server)' does not mark this tool read-only or non-destructive"
    }

    static func asksByHints(_ annotations: ToolAnnotations?) -> Bool {
        guard let annotations else { return true }
        return annotations.readOnly != true && annotations.destructive != false
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
