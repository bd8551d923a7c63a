import AgentRPCProtocol
import Foundation

/// Running one tool call: checks, hooks, guards, confirmation, execution
/// (`AgentSession.executeTool`) and the output entry. Like the loop, it runs in
/// the turn's task on the session's actor.
extension TurnRunner {
    enum GuardDecision {
        case allow
        case confirm(reason: String?)
        case deny(reason: String?)
    }

    func guardVerdict(for tool: ToolSpec, session: isolated AgentSession) -> GuardDecision {
        var firstConfirm: String?? = nil
        var allowed = false
        for g in session.config.guards ?? [] where g.matches(tool) {
            switch g.verdict {
            case .deny: return .deny(reason: g.reason)
            case .confirm: if firstConfirm == nil { firstConfirm = .some(g.reason) }
            case .allow: allowed = true
            }
        }
        if let reason = firstConfirm { return .confirm(reason: reason) }
        if tool.confirmation == .always { return .confirm(reason: nil) }
        // An MCP tool's hints ask unless an `allow` guard lifts them (docs/protocol.md, "MCP tool servers").
        if !allowed, let reason = session.mcpHintConfirmation(for: tool) { return .confirm(reason: reason) }
        return .allow
    }

    /// Runs one tool call the model made: validation, guards, confirmation, the
    /// client's execution, and the `toolOutput` entry. Outcomes are values fed
    /// back to the model; only a thrown executor error ends the turn.
    func runToolCall(_ call: ModelToolCall, profile: ResolvedProfile, session: isolated AgentSession) async throws {
        let span = turn.spanParent.flatMap { session.context.tracer?.startToolSpan(name: call.name, callID: call.id, parent: $0) }
        span?.setPayload(SpanAttributeKey.toolArguments, call.argumentsJSON)
        turn.toolSpan = span?.context
        defer { turn.toolSpan = nil }
        do {
            if let outcome = try await executeToolCall(call, profile: profile, session: session) {
                span?.recordToolOutcome(outcome)
                if let span, span.includesPayloads, let output = lastToolOutputContent(callId: call.id, session: session) {
                    span.setPayload(SpanAttributeKey.toolOutput, output.stringValue ?? output.serializedString())
                }
            }
            span?.end()
        } catch {
            span?.end(status: .error("\(error)"))
            throw error
        }
    }

    /// Returns the outcome appended for the call.
    private func executeToolCall(_ call: ModelToolCall, profile: ResolvedProfile, session: isolated AgentSession) async throws -> ToolOutcome? {
        let parsedArguments = try? JSONValue.parse(call.argumentsJSON)
        let shownArguments = parsedArguments ?? .string(call.argumentsJSON)
        session.emit(.toolCallStarted(callId: call.id, name: call.name, arguments: shownArguments, source: session.mcpSource(of: call.name)))

        // Unknown tools and bad arguments never reach the client.
        guard let resolved = profile.tool(named: call.name) else {
            let available = profile.tools.map(\.name).sorted()
            let message = await session.mcpUnavailable(toolName: call.name)
                ?? "There is no tool named '\(call.name)'." + (available.isEmpty ? " No tools are available." : " Available tools: \(available.joined(separator: ", ")).")
            try finishToolCall(call, profile: profile, outcome: .failed, content: .string(message), session: session)
            return .failed
        }
        guard let arguments = parsedArguments else {
            try finishToolCall(call, profile: profile, outcome: .failed, content: .string("The arguments for '\(call.name)' are not valid JSON: \(call.argumentsJSON.prefix(200))"), session: session)
            return .failed
        }
        let schema: JSONValue? = resolved.clientSpec == nil ? resolved.modelDefinition.inputSchema : resolved.clientSpec?.inputSchema
        if let schema {
            let violations: [JSONSchemaViolation]
            do {
                let validator = try session.inputValidator(for: call.name, schema: schema)
                violations = validator.usesPatterns
                    ? await RegexWorkers.run { validator.validate(arguments) }
                    : validator.validate(arguments)
            } catch {
                violations = []
                session.context.logger.warning("tool \(call.name) has an unusable input schema: \(error)")
            }
            if !violations.isEmpty {
                let lines = violations.map { "- \($0)" }.joined(separator: "\n")
                try finishToolCall(call, profile: profile, outcome: .failed, content: .string("The arguments for '\(call.name)' do not match its input schema:\n\(lines)"), session: session)
                return .failed
            }
        }

        // Hooks see every valid call before it runs; a veto ends the turn.
        try await runHooks(.onToolCall, profile: profile, toolName: call.name, payload: [
            "callId": .string(call.id), "name": .string(call.name), "arguments": arguments,
        ], session: session)

        // Set when the user approved edited arguments: the call runs with these.
        var approvedArguments: JSONValue? = nil

        // From here on every call ends with its toolOutput entry and onToolOutput,
        // whatever the outcome, so the two hooks always come in pairs.
        func output(_ outcome: ToolOutcome, _ content: JSONValue) async throws -> ToolOutcome {
            try finishToolCall(call, profile: profile, outcome: outcome, content: content, approvedArguments: approvedArguments, session: session)
            try await runHooks(.onToolOutput, profile: profile, toolName: call.name, payload: [
                "callId": .string(call.id), "name": .string(call.name), "outcome": .string(outcome.rawValue), "content": content,
            ], session: session)
            return outcome
        }

        if case .askUser = resolved {
            session.context.channel.toolCallRunning(sessionId: session.id, callId: call.id)
            let (outcome, content) = try await askUser(callId: call.id, arguments: arguments, session: session)
            return try await output(outcome, content)
        }
        guard let tool = resolved.clientSpec else {
            // Built-in orchestration tools run inside the engine.
            session.context.channel.toolCallRunning(sessionId: session.id, callId: call.id)
            let (outcome, content) = try await runBuiltinTool(resolved, arguments: arguments, profile: profile, session: session)
            return try await output(outcome, content)
        }
        if tool.final == true {
            // A final tool ends the turn: its arguments are the answer. The client never runs it.
            turn.finalAnswer = arguments
            return try await output(.ok, "Final answer recorded.")
        }

        // Guards: any deny wins; otherwise the first confirm; `confirmation: always` confirms.
        let verdict = guardVerdict(for: tool, session: session)
        if case .deny(let reason) = verdict {
            // A policy settled it: no question was asked, but clients still see who decided.
            session.emit(.confirmationResolved(callId: call.id, decision: .deny, source: .policy))
            return try await output(.denied, .string("The call was denied by policy" + (reason.map { ": \($0)" } ?? ".")))
        }
        if case .confirm(let reason) = verdict {
            if session.approvalRules.approving(tool: call.name, arguments: arguments) != nil {
                // A standing rule answers for the user; guards already had their say.
                session.emit(.confirmationResolved(callId: call.id, decision: .approve, source: .rule))
            } else {
                let answer = try await confirm(call: call, arguments: arguments, reason: reason, schema: schema, session: session)
                // An immediate stop ($/cancelRequest, wall clock, close) ends the turn now:
                // the denial it forced is not the user's and is not recorded as an outcome.
                if control.reason != nil { throw CancellationError() }
                switch answer.decision {
                case .deny:
                    let why = answer.reason.map { ": \($0)" } ?? "."
                    let text: String
                    switch answer.source {
                    case .cancel: text = "The call was not run: the turn was cancelled before it was confirmed."
                    case .timeout: text = "The call was not run: " + (answer.reason ?? "no confirmation arrived in time") + "."
                    default: text = "The user declined this call\(why)"
                    }
                    return try await output(.denied, .string(text))
                case .denyAndStop:
                    // The refusal is recorded (the next turn's model learns why it stopped),
                    // then the turn ends as a cancel does.
                    let why = answer.reason.map { ": \($0)" } ?? "."
                    _ = try await output(.denied, .string("The user declined this call and stopped the turn\(why)"))
                    throw TurnStop.deniedAndStopped(callId: call.id)
                case .approve, .approveForSession:
                    if let edited = answer.arguments, edited != arguments { approvedArguments = edited }
                }
            }
        }

        // The client (or an MCP server) runs it.
        session.context.channel.toolCallRunning(sessionId: session.id, callId: call.id)
        let runArguments = approvedArguments ?? arguments
        let record = ToolCallRecord(callId: call.id, name: call.name, arguments: runArguments)
        activeToolCalls.append(record)
        defer { activeToolCalls.removeAll { $0.callId == call.id } }
        // An MCP server's tool runs there instead (docs/protocol.md, "MCP tool servers").
        if let (outcome, content) = try await session.runMCPTool(named: call.name, arguments: runArguments, timeout: turn.limits.toolTimeoutSeconds, control: control) {
            return try await output(outcome, content)
        }
        let params = ToolCallParams(sessionId: session.id, turnId: turn.id, callId: call.id, name: call.name, arguments: runArguments, revision: session.revision)
        let result: ToolCallResult
        switch try await executeTool(params, timeout: turn.limits.toolTimeoutSeconds, session: session) {
        case .finished(let finished):
            result = finished
        case .timedOut(let seconds):
            return try await output(.failed, .string("The tool did not finish within \(seconds) seconds and was abandoned."))
        }
        if result.outcome == .ok, let undo = result.undo, !undo.isNull {
            turn.undoLog.append((callId: call.id, name: call.name, undo: undo))
            // Kept on disk too, so a turn cut by a crash can still be rolled back.
            try session.transcript.recordUndo(UndoRecord(turnId: turn.id, callId: call.id, name: call.name, undo: undo), turn: turn.id)
        }
        return try await output(result.outcome, result.content)
    }

    /// Where a tool call runs, once it passed validation, hooks, guards and
    /// confirmation: the one place that hands a call to its executor (today the
    /// client, with `tool/call`) and returns its result. `timeout` bounds the
    /// wait; cancelling the calling task withdraws the call. A failing executor
    /// throws `toolExecutorError` (the turn fails); a client that is gone ends the turn.
    private func executeTool(_ call: ToolCallParams, timeout: Double, session: isolated AgentSession) async throws -> ToolExecutionResult {
        let answer: JSONValue
        do {
            answer = try await session.context.channel.request(ToolCallRequest.name, call.json, timeout: timeout)
        } catch OutgoingRequestError.rpc(let clientError) {
            throw RPCError(.toolExecutorError, "the client's tool '\(call.name)' failed: \(clientError.message)", data: [
                "callId": .string(call.callId), "name": .string(call.name), "clientError": clientError.json,
            ])
        } catch OutgoingRequestError.timedOut(let seconds) {
            return .timedOut(seconds: seconds)
        } catch OutgoingRequestError.disconnected {
            throw clientGone()
        }
        do {
            return .finished(try answer.decode(as: ToolCallResult.self))
        } catch {
            throw RPCError(.toolExecutorError, "the client's answer to tool/call is malformed: \(error)", data: ["callId": .string(call.callId), "name": .string(call.name)])
        }
    }

    /// The client's input closed while the turn waited on it: the turn ends as
    /// it does at end of input (`data.source: "shutdown"`), whichever noticed first.
    func clientGone() -> CancellationError {
        if isRunning { control.abort(.shutdown) }
        return CancellationError()
    }

    /// The content of the newest `toolOutput` entry for `callId` (hooks may have appended after it).
    private func lastToolOutputContent(callId: String, session: isolated AgentSession) -> JSONValue? {
        for entry in session.entries.reversed() {
            if case .toolOutput(let id, _, _, let content, _, _) = entry.content, id == callId { return content }
        }
        return nil
    }

    private func finishToolCall(_ call: ModelToolCall, profile: ResolvedProfile, outcome: ToolOutcome, content: JSONValue, approvedArguments: JSONValue? = nil, session: isolated AgentSession) throws {
        try session.append(.toolOutput(callId: call.id, name: call.name, outcome: outcome, content: content, profile: profile.name, approvedArguments: approvedArguments), turn: turn.id)
        session.emit(.toolCallFinished(callId: call.id, name: call.name, outcome: outcome, content: content, source: session.mcpSource(of: call.name)))
    }

    private func confirm(call: ModelToolCall, arguments: JSONValue, reason: String?, schema: JSONValue?, session: isolated AgentSession) async throws -> ConfirmationAnswer {
        let timeout = turn.limits.confirmationTimeoutSeconds
        if session.context.clientCapabilities.confirmations == .request {
            // Custom handler: not interrupted by session/cancel (only $/cancelRequest).
            let params = ConfirmationRequestParams(sessionId: session.id, turnId: turn.id, callId: call.id, name: call.name, arguments: arguments, reason: reason)
            var answer: ConfirmationAnswer
            do {
                let raw = try await session.context.channel.request(ConfirmationRequest.name, try JSONValue(encoding: params), timeout: timeout)
                let result = try raw.decode(as: ConfirmationRequestResult.self)
                // An answer that cannot be honoured as given denies: running the call
                // with other arguments or a broader rule than approved would be worse.
                do {
                    answer = try session.acceptDecision(
                        result.decision, reason: result.reason, arguments: result.arguments, rule: result.rule,
                        tool: call.name, schema: schema, source: .client)
                } catch let refusal as RPCError {
                    answer = ConfirmationAnswer(decision: .deny, source: .client, reason: "the confirmation answer could not be used: \(refusal.message)")
                }
            } catch OutgoingRequestError.timedOut {
                answer = ConfirmationAnswer(decision: .deny, source: .timeout, reason: "no answer within \(timeout) seconds")
            } catch OutgoingRequestError.rpc(let e) {
                answer = ConfirmationAnswer(decision: .deny, source: .client, reason: "the confirmation handler failed: \(e.message)")
            } catch OutgoingRequestError.disconnected {
                throw clientGone()
            } catch let e as JSONDecodingFailure {
                answer = ConfirmationAnswer(decision: .deny, source: .client, reason: "the confirmation answer was malformed: \(e)")
            }
            session.emit(.confirmationResolved(callId: call.id, decision: answer.decision, source: answer.source))
            return answer
        }

        // Built-in flow: state + event, answered by session/confirm.
        pendingConfirmation = PendingConfirmation(callId: call.id, name: call.name, arguments: arguments, reason: reason)
        pendingConfirmationSchema = schema
        session.emit(.confirmationRequested(callId: call.id, name: call.name, arguments: arguments, reason: reason))
        if control.cooperativeCancelRequested {
            resolveConfirmationLater(callId: call.id, ConfirmationAnswer(decision: .deny, source: .cancel, reason: "the turn was cancelled"))
        }
        let callId = call.id
        let timeoutTask = Task { [weak session] in
            try? await Task.sleep(for: .clampedSeconds(timeout))
            guard !Task.isCancelled else { return }
            await session?.resolveConfirmation(ConfirmationAnswer(decision: .deny, source: .timeout, reason: "no answer within \(timeout) seconds"), callId: callId)
        }
        defer { timeoutTask.cancel() }
        let answer = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<ConfirmationAnswer, Never>) in
                awaitConfirmation(callId: callId, continuation)
            }
        } onCancel: {
            Task { await session.resolveConfirmation(ConfirmationAnswer(decision: .deny, source: .cancel, reason: "the turn was cancelled"), callId: callId) }
        }
        pendingConfirmation = nil
        pendingConfirmationSchema = nil
        session.emit(.confirmationResolved(callId: call.id, decision: answer.decision, source: answer.source))
        return answer
    }

    // MARK: Context sources

    /// Asks the client for fresh context values; failures become diagnostics and
    /// the last good value stays.
    func refreshContextSources(session: isolated AgentSession) async {
        let sources = session.config.contextSources ?? []
        guard !sources.isEmpty else {
            contextDiagnostics = []
            return
        }
        var diagnostics: [ContextDiagnostic] = []
        if session.context.clientCapabilities.contextSources != true {
            diagnostics = sources.map { ContextDiagnostic(source: $0.name, message: "the client did not declare the contextSources capability") }
        } else {
            let params = ContextRefreshParams(sessionId: session.id, turnId: turn.id, sources: sources.map(\.name))
            do {
                let raw = try await session.context.channel.request(ContextRefreshRequest.name, try JSONValue(encoding: params), timeout: min(session.context.options.clientRequestTimeoutSeconds, 30, turn.limits.wallClockSeconds))
                let result = try raw.decode(as: ContextRefreshResult.self)
                for source in sources {
                    if let value = result.values[source.name] {
                        session.caches.contextValues[source.name] = value
                    } else {
                        diagnostics.append(ContextDiagnostic(source: source.name, message: "the client returned no value; the last good value is used"))
                    }
                }
            } catch is CancellationError {
                // The turn is being stopped: that is not a failure of the sources.
                return
            } catch {
                let why: String
                switch error {
                case OutgoingRequestError.timedOut(let s): why = "no answer within \(s) seconds"
                case OutgoingRequestError.rpc(let e): why = "the client failed: \(e.message)"
                default: why = "\(error)"
                }
                diagnostics = sources.map { ContextDiagnostic(source: $0.name, message: "\(why); the last good value is used") }
            }
        }
        contextDiagnostics = diagnostics
        if !diagnostics.isEmpty { session.emit(.contextDiagnostics(diagnostics), turn: turn.id) }
    }

    // MARK: ask_user

    /// Runs the built-in `ask_user`: a `user/ask` request whose answer is the output.
    /// Like a built-in confirmation, `session/cancel` settles it at once: the
    /// question is withdrawn, the output says so, and the turn stops at its next
    /// checkpoint. An immediate stop withdraws it and records nothing.
    private func askUser(callId: String, arguments: JSONValue, session: isolated AgentSession) async throws -> (ToolOutcome, JSONValue) {
        guard session.context.clientCapabilities.askUser == true else {
            return (.failed, "The user cannot be asked: the client does not answer user/ask.")
        }
        let question = arguments["question"]?.stringValue ?? arguments.serializedString()
        let options = arguments["options"]?.arrayValue.map { $0.compactMap(\.stringValue) }
        let timeout = turn.limits.askUserTimeoutSeconds
        let payload = try JSONValue(encoding: UserAskParams(sessionId: session.id, turnId: turn.id, callId: callId, question: question, options: options))
        let channel = session.context.channel
        // Its own task, so that session/cancel can withdraw the question without
        // stopping the turn's task (which still records the call's output).
        let request = Task { try await channel.request(UserAskRequest.name, payload, timeout: timeout) }
        askUserRequest = request
        defer { askUserRequest = nil }
        if control.cooperativeCancelRequested { request.cancel() }
        do {
            let raw = try await withTaskCancellationHandler { try await request.value } onCancel: { request.cancel() }
            let answer = try raw.decode(as: UserAskResult.self)
            return (.ok, .string(answer.answer))
        } catch is CancellationError {
            guard control.reason == nil, control.cooperativeCancelRequested else { throw CancellationError() }
            return (.failed, "The question was withdrawn: the turn was cancelled before the user answered.")
        } catch OutgoingRequestError.timedOut(let seconds) {
            return (.failed, .string("The user did not answer within \(seconds) seconds."))
        } catch OutgoingRequestError.rpc(let e) {
            return (.failed, .string("The question could not be asked: \(e.message)"))
        } catch OutgoingRequestError.disconnected {
            throw clientGone()
        } catch let e as JSONDecodingFailure {
            return (.failed, .string("The user's answer was malformed: \(e)"))
        }
    }
}

/// How a tool call's execution ended, when it did not fail.
enum ToolExecutionResult: Sendable {
    case finished(ToolCallResult)
    /// No result within the timeout: the call was abandoned.
    case timedOut(seconds: Double)
}

extension Guard {
    /// A guard matches by tool-name glob and/or required annotations (all must hold).
    func matches(_ tool: ToolSpec) -> Bool {
        // Tool names are short; the budget only bounds a pathological pattern.
        if let pattern = match.name, BoundedGlob.matches(pattern, tool.name, budget: HumanInTheLoopLimits.globStepBudget) != true { return false }
        if let wanted = match.annotations {
            for name in wanted where !(tool.annotations?.value(named: name) ?? false) { return false }
        }
        return match.name != nil || match.annotations != nil
    }
}

extension ToolAnnotations {
    func value(named name: String) -> Bool {
        switch name {
        case "readOnly": return readOnly ?? false
        case "destructive": return destructive ?? false
        case "idempotent": return idempotent ?? false
        default: return false
        }
    }
}
