import AgentRPCProtocol

/// The session's side of MCP: starting and stopping its servers, offering their
/// tools to each round trip, and running a call the model made to one.
extension AgentSession {
    /// Starts the servers in the background (create, fork and resume do not wait).
    /// A configuration that no longer resolves (a resumed session whose
    /// agentrpc.json lost a server) is logged and leaves the session without them.
    /// `deferred`: only noted; the servers start at the next call without it
    /// (a later `session/resume`, or the first round trip).
    func startMCPServers(deferred: Bool = false) async {
        guard mcp == nil else { return }
        mcpServers = deferred ? .deferred : .none
        guard !deferred, !(config.mcpServers ?? []).isEmpty || config.profiles != nil else { return }
        let sessionID = id
        let made: MCPServerSet?
        do {
            made = try MCPServerSet.make(
                config: config, catalog: context.catalog, environment: context.options.environment, logger: context.logger,
                elicits: context.clientCapabilities.elicitation == true,
                report: { [weak self] state in await self?.emit(state.statusEvent) })
        } catch {
            context.logger.warning("session \(sessionID): MCP servers not started: \(error)")
            return
        }
        guard let made else { return }
        mcpServers = .started(made)
        addConfiguredApprovals(made)
        await made.start()
    }

    /// `autoApprove` / `alwaysAllow` of the servers' configurations become standing
    /// approval rules (`mcp__<server>__<tool>`, any arguments), once per session.
    private func addConfiguredApprovals(_ servers: MCPServerSet) {
        let wanted = servers.runners.flatMap { r in
            r.spec.approvedTools.map { ApprovalRuleSpec(tool: MCPServerSet.exposedName(server: r.spec.name, tool: $0)) }
        }
        var seen: Set<String> = []
        let missing = wanted.filter { spec in
            seen.insert(spec.tool).inserted && !approvalRules.rules.contains { $0.tool == spec.tool && $0.arguments == nil }
        }
        guard !missing.isEmpty else { return }
        do {
            _ = try addApprovalRules(missing, field: "mcpServers.autoApprove")
        } catch {
            context.logger.warning("session \(id): the MCP servers' autoApprove rules were not added: \(error)")
        }
    }

    func stopMCPServers() async {
        await mcp?.stop()
    }

    /// Whether `withMCPTools` has anything to do: servers started, or to start.
    var offersMCPTools: Bool {
        if case .deferred = mcpServers { return true }
        return mcp != nil
    }

    /// `profile` with the tools of the ready MCP servers it offers appended, after
    /// waiting (bounded) for servers still starting and listings under way.
    func withMCPTools(_ profile: ResolvedProfile) async -> ResolvedProfile {
        if case .deferred = mcpServers { await startMCPServers() }
        guard let mcp else { return profile }
        await mcp.retryFailed(turn: runner?.id)
        await mcp.settle()
        var out = profile
        let taken = Set(profile.tools.map(\.name))
        let offered = await mcp.offeredTools(servers: mcpServerNames(profile: profile.name)).filter { !taken.contains($0.spec.name) }
        out.tools += offered.map { .client($0.spec) }
        // A schema our validator cannot use is a warning (the tool is still offered,
        // its arguments unchecked), reported the first time a turn offers it.
        if let turn = runner?.id {
            let warnings = mcp.newSchemaWarnings(offered, turn: turn)
            if !warnings.isEmpty { emit(.schemaWarnings(warnings), turn: turn) }
        }
        return out
    }

    /// The servers a profile case offers: its own list, else the defaults', else all.
    private func mcpServerNames(profile: String) -> [String]? {
        guard let profiles = config.profiles else { return nil }
        return profiles.cases[profile]?.mcpServers ?? profiles.defaults?.mcpServers
    }

    /// `session/getPrompt`: a prompt of one of the session's MCP servers.
    func mcpPrompt(_ params: SessionGetPromptParams) async throws -> SessionGetPromptResult {
        guard let runner = mcp?.runners.first(where: { $0.spec.name == params.server }) else {
            throw RPCError.invalidParams("the session has no MCP server named '\(params.server.prefix(64))'", field: "server")
        }
        return try await runner.prompt(named: params.name, arguments: params.arguments)
    }

    /// Which MCP server a tool name belongs to, for events.
    func mcpSource(of toolName: String) -> ToolSource? {
        mcp?.runner(ofTool: toolName).map { ToolSource(mcp: $0.spec.name) }
    }

    /// For a call to a tool no round trip offers: when the name is one of a
    /// server's that is not ready, the outcome says so ("the MCP server 'h' is
    /// unavailable: …") instead of "no tool named".
    func mcpUnavailable(toolName: String) async -> String? {
        guard let runner = mcp?.runner(ofTool: toolName), await runner.currentStatus != .ready else { return nil }
        return await runner.unavailable
    }

    /// Runs a call to an MCP tool, or returns nil when `name` is not one. Server
    /// failures are outcomes the model sees; cancelling the calling task ends the
    /// call at once (the server is sent `notifications/cancelled`) and is thrown.
    /// `session/cancel` withdraws it too: the tool stage cancels its task (its
    /// wait is a checkpoint, as a wait for the model is).
    func runMCPTool(
        named name: String, callId: String, arguments: JSONValue, timeout: Double, elicitation: MCPElicitation?
    ) async throws -> (ToolOutcome, JSONValue)? {
        guard let mcp, name.hasPrefix("mcp__") else { return nil }
        guard let offered = await mcp.offeredTools(servers: nil).first(where: { $0.spec.name == name }) else {
            // Offered at the round trip, gone now (the server crashed or re-listed).
            guard let source = mcpSource(of: name) else { return nil }
            if let down = await mcpUnavailable(toolName: name) { return (.failed, .string(down)) }
            return (.failed, .string("The tool is no longer offered by MCP server '\(source.mcp ?? "")'; it was not run."))
        }
        // The server's notifications/progress for this call become toolProgress events.
        let server = offered.server.spec.name
        let progress: MCPClient.ProgressHandler = { [weak self] progress, total, message in
            self?.reportToolProgress(SessionEvent.ToolProgress(callId: callId, progress: progress, total: total, message: message))
        }
        var asks: MCPClient.ElicitationHandler?
        if let elicitation {
            asks = { message, schema in try await elicitation(server, message, schema) }
        }
        let result = try await offered.server.call(
            tool: offered.toolName, arguments: arguments, timeout: timeout, progress: progress, elicitation: asks)
        try Task.checkCancellation()
        return result
    }
}

/// Asks the client's user for an MCP server's form: the server's name, its
/// message and requested schema in; the answer (`{action, content?}`) out.
typealias MCPElicitation = @Sendable (_ server: String, _ message: String, _ requestedSchema: JSONValue) async throws -> JSONValue

/// Where a session's MCP servers are.
enum SessionMCPServers {
    /// It names none, or they could not be made, or they are not asked for yet.
    case none
    /// `session/resume {startMCPServers: false}` loaded it: they start at the
    /// next call without that flag (a later `session/resume`, or the first round trip).
    case deferred
    case started(MCPServerSet)
}
