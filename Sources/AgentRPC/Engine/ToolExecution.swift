import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One tool call's steps: its admission (checks, hooks, guards, confirmation)
/// and its execution (`dispatch` for the client's tools). They run isolated to
/// the stage's host.
extension ToolStage {
    enum GuardDecision {
        case allow
        case confirm(reason: String?)
        case deny(reason: String?)
    }

    func guardVerdict(for tool: ToolSpec) -> GuardDecision {
        var firstConfirm: String?? = nil
        var allowed = false
        for g in context.guards where g.matches(tool) {
            switch g.verdict {
            case .deny: return .deny(reason: g.reason)
            case .confirm: if firstConfirm == nil { firstConfirm = .some(g.reason) }
            case .allow: allowed = true
            }
        }
        if let reason = firstConfirm { return .confirm(reason: reason) }
        if tool.confirmation == .always { return .confirm(reason: nil) }
        // An MCP tool's hints ask unless an `allow` guard lifts them (docs/protocol.md, "MCP tool servers").
        if !allowed, let reason = MCPServerSet.hintConfirmation(for: tool, server: source(of: tool.name)?.mcp) { return .confirm(reason: reason) }
        return .allow
    }

    /// Which MCP server a tool name belongs to, for events.
    func source(of toolName: String) -> ToolSource? {
        ToolSource.mcp(of: toolName, servers: context.mcpServers)
    }

    /// Admission of one call, in call order: `toolCallStarted`, validation,
    /// `onToolCall`, guards, approval rules and confirmation. Returns its
    /// outcome when it needs no execution, else how it runs. Throws what ends
    /// the turn (a veto, a stop during the confirmation).
    @inline(__always) func admit(at index: Int, host: isolated Host) async throws -> Admission {
        let call = calls[index].call
        let profile = context.profile
        let turnID = context.turnId
        setPhase(.checking, of: index)
        let span = context.spanParent.flatMap { context.tracer?.startToolSpan(name: call.name, callID: call.id, parent: $0) }
        span?.setPayload(SpanAttributeKey.toolArguments, call.argumentsJSON)
        setSpan(span, of: index)
        let parsedArguments = calls[index].parsedArguments ?? (try? JSONValue.parse(call.argumentsJSON))
        let shownArguments = parsedArguments ?? .string(call.argumentsJSON)
        host.emit(.toolCallStarted(callId: call.id, name: call.name, arguments: shownArguments, source: source(of: call.name)), turn: turnID)

        func settled(_ outcome: ToolOutcome, _ content: JSONValue, finalAnswer: JSONValue? = nil, stopAfter: TurnStop? = nil) -> Admission {
            .settled(ToolCallOutcome(callId: call.id, outcome: outcome, content: content, finalAnswer: finalAnswer), stopAfter: stopAfter)
        }

        // Unknown tools and bad arguments never reach the client.
        guard let resolved = profile.tool(named: call.name) else {
            let available = profile.tools.map(\.name).sorted()
            let message = context.unavailableTools[call.name]
                ?? "There is no tool named '\(call.name)'." + (available.isEmpty ? " No tools are available." : " Available tools: \(available.joined(separator: ", ")).")
            return settled(.failed, .string(message))
        }
        guard let arguments = parsedArguments else {
            return settled(.failed, .string("The arguments for '\(call.name)' are not valid JSON: \(call.argumentsJSON.prefix(200))"))
        }
        let schema: JSONValue? = resolved.clientSpec == nil ? resolved.modelDefinition.inputSchema : resolved.clientSpec?.inputSchema
        if let schema {
            let violations: [JSONSchemaViolation]
            do {
                let validator = try host.inputValidator(for: call.name, schema: schema)
                violations = validator.usesPatterns
                    ? await RegexWorkers.run { validator.validate(arguments) }
                    : validator.validate(arguments)
            } catch {
                violations = []
                context.logger.warning("tool \(call.name) has an unusable input schema: \(error)")
            }
            if !violations.isEmpty {
                let lines = violations.map { "- \($0)" }.joined(separator: "\n")
                return settled(.failed, .string("The arguments for '\(call.name)' do not match its input schema:\n\(lines)"))
            }
        }

        // Hooks see every valid call before it runs; a veto ends the turn. From
        // here on every call's output is followed by onToolOutput, whatever the
        // outcome, so the two hooks always come in pairs.
        // The payload is built only for a profile that has the hook: most have none.
        if profile.hooks[.onToolCall]?.isEmpty == false {
            try await host.runToolHook(.onToolCall, profile: profile, toolName: call.name, payload: [
                "callId": .string(call.id), "name": .string(call.name), "arguments": arguments,
            ])
        }
        setHooked(index)

        if case .askUser = resolved {
            return .execute(Execution(target: .askUser, arguments: arguments, parallel: false))
        }
        guard let tool = resolved.clientSpec else {
            // Built-in orchestration tools run inside the engine.
            return .execute(Execution(target: .builtin(resolved), arguments: arguments, parallel: false))
        }
        if tool.final == true {
            // A final tool ends the turn: its arguments are the answer. The client never runs it.
            return settled(.ok, "Final answer recorded.", finalAnswer: arguments)
        }

        // A call in doubt was approved when it was first sent: it goes as it went.
        let inDoubt = calls[index].priorSends > 0
        var runArguments = arguments
        if inDoubt, let prior = calls[index].priorArguments {
            setApprovedArguments(prior, of: index)
            runArguments = prior
        }
        if inDoubt, source(of: call.name)?.mcp != nil, tool.annotations?.idempotent != true {
            // An MCP server cannot look a key up: only a tool that says running it
            // twice is harmless is sent again (docs/protocol.md, "Durable sessions").
            return settled(.failed, .string(
                "The call was sent to its MCP server before the turn was interrupted, and no result was recorded: it may have run. It was not sent again, because the tool does not declare idempotentHint."))
        }
        // Guards: any deny wins; otherwise the first confirm; `confirmation: always` confirms.
        let verdict: GuardDecision = inDoubt ? .allow : guardVerdict(for: tool)
        if case .deny(let reason) = verdict {
            // A policy settled it: no question was asked, but clients still see who decided.
            host.emit(.confirmationResolved(callId: call.id, decision: .deny, source: .policy), turn: turnID)
            return settled(.denied, .string("The call was denied by policy" + (reason.map { ": \($0)" } ?? ".")))
        }
        if case .confirm(let reason) = verdict {
            if host.approvingRule(tool: call.name, arguments: arguments) != nil {
                // A standing rule answers for the user; guards already had their say.
                host.emit(.confirmationResolved(callId: call.id, decision: .approve, source: .rule), turn: turnID)
            } else {
                let answer = try await confirm(index, arguments: arguments, reason: reason, schema: schema, host: host)
                // An immediate stop ($/cancelRequest, wall clock, close) ends the turn now:
                // the denial it forced is not the user's and is not recorded as an outcome.
                if context.control.reason != nil { throw CancellationError() }
                switch answer.decision {
                case .deny:
                    let why = answer.reason.map { ": \($0)" } ?? "."
                    let text: String
                    switch answer.source {
                    case .cancel: text = "The call was not run: the turn was cancelled before it was confirmed."
                    case .timeout: text = "The call was not run: " + (answer.reason ?? "no confirmation arrived in time") + "."
                    default: text = "The user declined this call\(why)"
                    }
                    return settled(.denied, .string(text))
                case .denyAndStop:
                    // The refusal is recorded (the next turn's model learns why it stopped),
                    // then the turn ends as a cancel does.
                    let why = answer.reason.map { ": \($0)" } ?? "."
                    return settled(.denied, .string("The user declined this call and stopped the turn\(why)"), stopAfter: .deniedAndStopped(callId: call.id))
                case .approve, .approveForSession:
                    if let edited = answer.arguments, edited != arguments {
                        setApprovedArguments(edited, of: index)
                        runArguments = edited
                    }
                }
            }
        }
        return .execute(Execution(target: .tool, arguments: runArguments, parallel: tool.runsInParallel))
    }

    /// Runs a call that passed admission on its executor and returns its
    /// outcome. Cancelling the task withdraws it (`$/cancelRequest` to the
    /// client, `notifications/cancelled` to an MCP server); a failing executor
    /// throws.
    @inline(__always) func execute(_ index: Int, _ execution: Execution, host: isolated Host) async throws -> ToolCallOutcome {
        let call = calls[index].call
        let arguments = execution.arguments
        setPhase(.sent, of: index)
        context.channel.toolCallRunning(sessionId: context.sessionId, callId: call.id)
        func ended(_ outcome: ToolOutcome, _ content: JSONValue) -> ToolCallOutcome {
            ToolCallOutcome(callId: call.id, outcome: outcome, content: content)
        }
        switch execution.target {
        case .askUser:
            let (outcome, content) = try await askUser(index, arguments: arguments, host: host)
            return ended(outcome, content)
        case .builtin(let tool):
            let (outcome, content) = try await host.runBuiltinTool(tool, arguments: arguments, profile: context.profile, span: calls[index].span?.context)
            return ended(outcome, content)
        case .tool:
            break
        }
        // A client's tool is a wait for the client: `session/park` stops the turn before it is sent.
        let onClient = source(of: call.name) == nil
        if onClient { try context.control.beginClientWait() }
        defer { if onClient { context.control.endClientWait() } }
        try markSent(index, arguments: arguments, edited: calls[index].approvedArguments != nil, host: host)
        // Its progress reports become `toolProgress` events until its result is back (`ToolStage.finish`).
        context.progress.begin(call.id)
        // An MCP server's tool runs there instead (docs/protocol.md, "MCP tool servers").
        if source(of: call.name) != nil {
            setOnMCPServer(index)
            // session/cancel came while it waited for its turn: it is withdrawn as it would be now.
            if context.control.cooperativeCancelRequested { throw CancellationError() }
        }
        // Only an `mcp__` name can be a server's (`runMCPTool` says nil to any
        // other): a client's tool skips the async call and its task switches.
        if call.name.hasPrefix("mcp__"), let (outcome, content) = try await host.runMCPTool(
            named: call.name, callId: call.id, arguments: arguments, timeout: context.limits.toolTimeoutSeconds, elicitation: elicitation(callId: call.id)) {
            return withMedia(ended(outcome, content))
        }
        let params = ToolCallParams(
            sessionId: context.sessionId, turnId: context.turnId, callId: call.id, name: call.name, arguments: arguments, revision: host.revision,
            idempotencyKey: ToolCallParams.idempotencyKey(sessionId: context.sessionId, turnId: context.turnId, roundTrip: context.roundTrip, callId: call.id),
            attempt: calls[index].priorSends > 0 ? calls[index].priorSends + 1 : nil, inDoubt: calls[index].priorSends > 0 ? true : nil)
        let result: ToolCallResult
        switch try await dispatch(params, timeout: context.limits.toolTimeoutSeconds) {
        case .finished(let finished):
            result = finished
        case .timedOut(let seconds):
            return ended(.failed, .string("The tool did not finish within \(seconds) seconds and was abandoned."))
        }
        if result.outcome == .ok, let undo = result.undo, !undo.isNull {
            setUndo(undo, of: index)
            // Kept on disk at once, so a turn cut by a crash can still be rolled back.
            try host.recordUndo(UndoRecord(turnId: context.turnId, callId: call.id, name: call.name, undo: undo))
        }
        return withMedia(ended(result.outcome, result.content))
    }

    /// A tool's result with its images and audio taken out of its content
    /// (docs/protocol.md, "Images in tool results").
    private func withMedia(_ outcome: ToolCallOutcome) -> ToolCallOutcome {
        let (content, media) = ToolMedia.split(outcome.content)
        guard !media.isEmpty else { return outcome }
        var split = ToolCallOutcome(callId: outcome.callId, outcome: outcome.outcome, content: content, finalAnswer: outcome.finalAnswer)
        split.media = media
        return split
    }

    /// The one place that hands a call to the client (`tool/call`) and returns
    /// its result. `timeout` bounds the wait; cancelling the calling task
    /// withdraws the call. A failing executor throws `toolExecutorError` (the
    /// turn fails); a client that is gone ends the turn.
    nonisolated(nonsending) private func dispatch(_ call: ToolCallParams, timeout: Double) async throws -> ToolExecutionResult {
        let answer: JSONValue
        do {
            answer = try await context.channel.request(ToolCallRequest.name, writingParams: { call.write(into: &$0) }, params: { call.json }, timeout: timeout)
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
            return .finished(try ToolCallResult(json: answer))
        } catch {
            throw RPCError(.toolExecutorError, "the client's answer to tool/call is malformed: \(error)", data: ["callId": .string(call.callId), "name": .string(call.name)])
        }
    }

    /// The client's input closed while the call waited on it: the turn ends as
    /// it does at end of input (`data.source: "shutdown"`), whichever noticed first.
    private func clientGone() -> CancellationError {
        context.control.abort(.shutdown)
        return CancellationError()
    }

    private func confirm(_ index: Int, arguments: JSONValue, reason: String?, schema: JSONValue?, host: isolated Host) async throws -> ConfirmationAnswer {
        let call = calls[index].call
        let timeout = context.limits.confirmationTimeoutSeconds
        let turnID = context.turnId
        try context.control.beginClientWait()
        defer { context.control.endClientWait() }
        let attempt = try markAsked(index, host: host)
        if context.capabilities.confirmations == .request {
            // Custom handler: not interrupted by session/cancel (only $/cancelRequest).
            let params = ConfirmationRequestParams(
                sessionId: context.sessionId, turnId: turnID, callId: call.id, name: call.name, arguments: arguments, reason: reason, attempt: attempt)
            var answer: ConfirmationAnswer
            do {
                let raw = try await context.channel.request(ConfirmationRequest.name, try JSONValue(encoding: params), timeout: timeout)
                let result = try raw.decode(as: ConfirmationRequestResult.self)
                // An answer that cannot be honoured as given denies: running the call
                // with other arguments or a broader rule than approved would be worse.
                do {
                    answer = try host.acceptDecision(
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
            host.emit(.confirmationResolved(callId: call.id, decision: answer.decision, source: answer.source), turn: turnID)
            return answer
        }

        // Built-in flow: state + event, answered by session/confirm.
        let slot = openConfirmation(PendingConfirmation(callId: call.id, name: call.name, arguments: arguments, reason: reason), schema: schema)
        host.emit(.confirmationRequested(callId: call.id, name: call.name, arguments: arguments, reason: reason, attempt: attempt), turn: turnID)
        if context.control.cooperativeCancelRequested {
            slot.settle(ConfirmationAnswer(decision: .deny, source: .cancel, reason: "the turn was cancelled"))
        }
        let timeoutTask = Task {
            try? await Task.sleep(for: .clampedSeconds(timeout))
            guard !Task.isCancelled else { return }
            slot.settle(ConfirmationAnswer(decision: .deny, source: .timeout, reason: "no answer within \(timeout) seconds"))
        }
        defer { timeoutTask.cancel() }
        let answer = await withTaskCancellationHandler {
            await slot.wait()
        } onCancel: {
            slot.settle(ConfirmationAnswer(decision: .deny, source: .cancel, reason: "the turn was cancelled"))
        }
        closeConfirmation()
        host.emit(.confirmationResolved(callId: call.id, decision: answer.decision, source: answer.source), turn: turnID)
        return answer
    }

    // MARK: MCP elicitation

    /// Asks the client's user for an MCP server's form during call `callId`:
    /// `user/elicit` on the same path as `user/ask` (bounded by
    /// `askUserTimeoutSeconds`; cancelling the call, as `session/cancel` does,
    /// withdraws it). Nil when the client does not answer `user/elicit`.
    private func elicitation(callId: String) -> MCPElicitation? {
        guard context.capabilities.elicitation == true else { return nil }
        let (channel, sessionId, turnId, timeout) = (context.channel, context.sessionId, context.turnId, context.limits.askUserTimeoutSeconds)
        return { server, message, schema in
            let payload = try JSONValue(encoding: UserElicitParams(
                sessionId: sessionId, turnId: turnId, callId: callId, server: server, message: message, requestedSchema: schema))
            let answer = try await channel.request(UserElicitRequest.name, payload, timeout: timeout).decode(as: UserElicitResult.self)
            guard answer.action == .accept else { return ["action": .string(answer.action.rawValue)] }
            return ["action": "accept", "content": .object(answer.content ?? [:])]
        }
    }

    // MARK: ask_user

    /// Runs the built-in `ask_user`: a `user/ask` request whose answer is the output.
    /// Like a built-in confirmation, `session/cancel` settles it at once: the
    /// question is withdrawn, the output says so, and the turn stops at its next
    /// checkpoint. An immediate stop withdraws it and records nothing.
    private func askUser(_ index: Int, arguments: JSONValue, host: isolated Host) async throws -> (ToolOutcome, JSONValue) {
        let callId = calls[index].call.id
        guard context.capabilities.askUser == true else {
            return (.failed, "The user cannot be asked: the client does not answer user/ask.")
        }
        let question = arguments["question"]?.stringValue ?? arguments.serializedString()
        let options = arguments["options"]?.arrayValue.map { $0.compactMap(\.stringValue) }
        let timeout = context.limits.askUserTimeoutSeconds
        let channel = context.channel
        try context.control.beginClientWait()
        defer { context.control.endClientWait() }
        var params = UserAskParams(sessionId: context.sessionId, turnId: context.turnId, callId: callId, question: question, options: options)
        params.attempt = try markAsked(index, host: host)
        let payload = try JSONValue(encoding: params)
        // Its own task, so that session/cancel can withdraw the question without
        // stopping the turn's task (which still records the call's output).
        let request = Task { try await channel.request(UserAskRequest.name, payload, timeout: timeout) }
        askUserRequest = request
        defer { askUserRequest = nil }
        let control = context.control
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

extension ToolSpec {
    /// Whether calls of it may run beside other calls: `parallel` when the
    /// declaration says, else a read-only tool may (docs/protocol.md §5).
    var runsInParallel: Bool { parallel ?? annotations?.readOnly ?? false }
}

extension ToolSource {
    /// The MCP server a tool name belongs to (`mcp__<server>__<tool>`), among `servers`.
    static func mcp(of toolName: String, servers: [String]) -> ToolSource? {
        guard toolName.hasPrefix("mcp__") else { return nil }
        return servers.first { MCPServerSet.names(toolName, server: $0) }.map { ToolSource(mcp: $0) }
    }
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
