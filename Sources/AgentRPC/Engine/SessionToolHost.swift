import AgentRPCProtocol

/// The session's side of the tool stage: the members `ToolStageHost` asks for
/// that the session does not have under the same name already (`revision`,
/// `inputValidator`, `append`, `emit`, `acceptDecision`, `runMCPTool`).
extension AgentSession: ToolStageHost {
    func approvingRule(tool: String, arguments: JSONValue) -> ApprovalRule? {
        approvalRules.approving(tool: tool, arguments: arguments)
    }

    func recordUndo(_ record: UndoRecord) throws {
        try transcript.recordUndo(record, turn: record.turnId)
    }

    func keepMedia(_ media: [MediaContent]) throws -> [MediaReference] {
        try media.compactMap { try self.media.keep($0) }
    }

    func recordCallSent(_ callID: String, turn: String, attempt: Int, arguments: JSONValue?) throws {
        try transcript.recordCallSent(callID, turn: turn, attempt: attempt, arguments: arguments)
    }

    func recordCallAsked(_ callID: String, turn: String, attempt: Int) throws {
        // Only a turn that can be continued asks again: other sessions write nothing.
        guard parks else { return }
        try transcript.recordCallAsked(callID, turn: turn, attempt: attempt)
    }

    func runToolHook(_ hook: HookName, profile: ResolvedProfile, toolName: String, payload: JSONValue) async throws {
        guard let runner else { throw RPCError.internalError("a tool hook ran with no turn") }
        try await runner.runHooks(hook, profile: profile, toolName: toolName, payload: payload, session: self)
    }

    func runBuiltinTool(_ tool: ResolvedTool, arguments: JSONValue, profile: ResolvedProfile, span: SpanContext?) async throws -> (ToolOutcome, JSONValue) {
        guard let runner else { throw RPCError.internalError("a built-in tool ran with no turn") }
        return try await runner.runBuiltinTool(tool, arguments: arguments, profile: profile, span: span, session: self)
    }

    /// What the stage is given for one round trip of `runner`'s turn.
    func toolStageContext(for runner: TurnRunner, profile: ResolvedProfile) -> ToolStageContext {
        ToolStageContext(
            sessionId: id, turnId: runner.turn.id, profile: profile, limits: runner.turn.limits, guards: config.guards ?? [],
            capabilities: context.clientCapabilities, channel: context.channel, control: runner.control,
            logger: context.logger, tracer: context.tracer, spanParent: runner.spanParent,
            mcpServers: mcp?.runners.map(\.spec.name) ?? [], roundTrip: runner.turn.roundTrips, progress: toolProgress)
    }
}
