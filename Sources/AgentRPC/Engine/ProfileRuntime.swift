import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The session property that records activated skills (docs/protocol.md §11: "activations live in a session property").
let activeSkillsProperty = "activeSkills"

/// Profiles at run time: entering a profile before each round trip, hooks,
/// the built-in orchestration tools and the router. Like the loop, it runs in
/// the turn's task on the session's actor (`session` is isolated).
extension TurnRunner {
    /// Resolves the profile before a round trip; when it changed, runs the old
    /// profile's `onDeactivate` and the new one's `onActivate` hooks and says so
    /// with `profileActivated`. The session's first request activates its initial
    /// profile the same way, without a previous one. A hook that changes
    /// properties again gets one more resolution, no more, so two profiles can
    /// never ping-pong forever.
    @inline(__always) func enterProfile(session: isolated AgentSession) async throws -> ResolvedProfile {
        var profile = try session.resolveProfile()
        // Each round trip comes here, and mostly the profile is active already and
        // the session has no MCP server: then nothing is awaited (an async call
        // costs the runtime two executor checks, ~500 instructions a round trip each).
        if session.activeProfile?.name != profile.name {
            profile = try await activate(profile, session: session)
        }
        session.activeProfile = profile
        startAgentSpan(profile: profile, session: session)
        if session.offersMCPTools { profile = await session.withMCPTools(profile) }
        return turn.options.readOnly == true ? profile.onlyReading : profile
    }

    /// Activates `profile`, a change of profile: the old one's `onDeactivate`, the
    /// new one's `onActivate`, `profileActivated`; returns the profile as resolved
    /// after those hooks (activated too if they changed it once more).
    private func activate(_ resolved: ResolvedProfile, session: isolated AgentSession) async throws -> ResolvedProfile {
        var profile = resolved
        for _ in 0..<2 {
            let previous = session.activeProfile
            if let previous, previous.name == profile.name { break }
            if let previous {
                try await runHooks(.onDeactivate, profile: previous, payload: ["next": .string(profile.name)], session: session)
            }
            try session.transcript.activateProfile(profile.name)
            session.activeProfile = profile
            session.emit(.profileActivated(profile: profile.name, previous: previous?.name), turn: turn.id)
            try await runHooks(.onActivate, profile: profile, payload: .object(previous.map { ["previous": .string($0.name)] } ?? [:]), session: session)
            profile = try session.resolveProfile()
        }
        return profile
    }

    /// One agent span per stretch of the turn a profile is active (a handoff starts a new one).
    private func startAgentSpan(profile: ResolvedProfile, session: isolated AgentSession) {
        if turn.agentSpan == nil || turn.agentSpan?.name != SpanName.agent(profile.name), let root = turn.turnSpan {
            turn.agentSpan?.end()
            turn.agentSpan = session.context.tracer?.startAgentSpan(profile: profile.name, parent: root.context)
        }
    }

    // MARK: Hooks

    /// Runs a hook's actions (defaults' then the case's, as resolved). Any action
    /// failing, or a client veto, ends the turn with `hookError`.
    func runHooks(_ hook: HookName, profile: ResolvedProfile, toolName: String? = nil, payload: JSONValue, session: isolated AgentSession) async throws {
        guard let actions = profile.hooks[hook], !actions.isEmpty else { return }
        session.emit(.hookFired(hook: hook, profile: profile.name), turn: turn.id)
        try await runActions(actions, hook: hook, profile: profile, toolName: toolName, payload: payload, session: session)
    }

    private func runActions(_ actions: [HookAction], hook: HookName, profile: ResolvedProfile, toolName: String?, payload: JSONValue, session: isolated AgentSession) async throws {
        for action in actions {
            if let when = action.when, !ProfileResolver.condition(when, properties: session.properties, toolName: toolName) { continue }
            switch action.action {
            case .set(let values):
                _ = try session.setProperties(set: values, remove: [])
            case .remove(let names):
                _ = try session.setProperties(set: [:], remove: names)
            case .then(let nested):
                try await runActions(nested, hook: hook, profile: profile, toolName: toolName, payload: payload, session: session)
            case .summarizeHistory(let spec):
                do {
                    try await summarizeHistory(spec, profile: profile, session: session)
                } catch let error as RPCError where error.kind == .invalidConfiguration || error.kind == .budgetExceeded {
                    throw error
                } catch {
                    // A failed summary is a failed hook (docs/protocol.md §11: hookError, "a hook
                    // vetoed or failed"); a cancel stays a cancel.
                    if Task.isCancelled || error is CancellationError || error is TurnStop { throw error }
                    var data: [String: JSONValue] = ["hook": .string(hook.rawValue), "profile": .string(profile.name)]
                    if let e = error as? ProviderError { data["provider"] = e.json }
                    throw RPCError(.hookError, "the summarizeHistory action failed: \(Self.safeDescription(of: error))", data: data)
                }
            case .client:
                try await callClientHook(PendingHook(hook: hook, profile: profile.name, payload: payload), session: session)
            }
        }
    }

    /// Asks the client (`hook/call`). In a session that parks, a hook a
    /// continued turn would pass by is journaled as asked, then answered, so
    /// `session/continue` asks again one that had no answer (`askPendingHook`).
    func callClientHook(_ asked: PendingHook, session: isolated AgentSession) async throws {
        let hook = asked.hook
        func hookError(_ message: String, _ extra: [String: JSONValue] = [:]) -> RPCError {
            var data = extra
            data["hook"] = .string(hook.rawValue)
            data["profile"] = .string(asked.profile)
            return RPCError(.hookError, message, data: data)
        }
        guard session.context.clientCapabilities.hooks == true else {
            throw hookError("the \(hook.rawValue) hook asks the client, but the client did not declare the hooks capability")
        }
        let params = HookCallParams(sessionId: session.id, turnId: turn.id, hook: hook, profile: asked.profile, payload: asked.payload)
        let journaled = session.parks && turn.mode.parks && PendingHook.asksAgain(hook)
        if journaled { try session.transcript.recordHookAsked(asked, turn: turn.id) }
        try control.beginClientWait()
        defer { control.endClientWait() }
        let result: HookCallResult
        do {
            let raw = try await session.context.channel.request(HookCallRequest.name, try JSONValue(encoding: params), timeout: min(session.context.options.clientRequestTimeoutSeconds, turn.limits.wallClockSeconds))
            result = try raw.decode(as: HookCallResult.self)
        } catch OutgoingRequestError.rpc(let e) {
            throw hookError("the client's \(hook.rawValue) hook failed: \(e.message)", ["clientError": e.json])
        } catch OutgoingRequestError.timedOut(let s) {
            throw hookError("the client's \(hook.rawValue) hook did not answer within \(s) seconds")
        } catch OutgoingRequestError.disconnected {
            throw clientGone()
        } catch let e as JSONDecodingFailure {
            throw hookError("the client's answer to hook/call is malformed: \(e)")
        }
        if result.veto == true {
            throw hookError("the client's \(hook.rawValue) hook vetoed" + (result.reason.map { ": \($0)" } ?? ""), result.reason.map { ["reason": .string($0)] } ?? [:])
        }
        if result.set != nil || result.remove != nil {
            _ = try session.setProperties(set: result.set ?? [:], remove: result.remove ?? [])
        }
        if let operations = result.history, !operations.isEmpty {
            let working: [TranscriptEntry]
            do {
                working = try session.transcript.preview(operations)
            } catch let e as RPCError {
                throw hookError("the client's history edit was refused: \(e.message)")
            }
            // The running turn goes on appending to its own entries (an open tool
            // exchange, the prompt it answers), so they must stay as they are, last.
            let running = session.entries.filter { $0.turnId == turn.id }
            if Array(working.suffix(running.count)) != running || working.dropLast(running.count).contains(where: { $0.turnId == turn.id }) {
                throw hookError("the client's history edit was refused: it changes the running turn's entries; only earlier entries may be edited")
            }
            try session.transcript.mutate(operations, result: working)
        }
        if journaled { try session.transcript.recordHookAnswered(turn: turn.id) }
    }

    /// Lossy and global (docs/protocol.md §11): old entries are summarized by a model into
    /// a property and removed from the real transcript. The current turn's
    /// entries are never removed, and a tool exchange is never split. One more
    /// trigger of compaction's code: its cut (moved back to a prompt) and its
    /// summary request; what differs is where the summary goes, and that it
    /// starts at an entry count rather than at the window.
    private func summarizeHistory(_ spec: SummarizeHistory, profile: ResolvedProfile, session: isolated AgentSession) async throws {
        let threshold = spec.threshold ?? 20
        guard session.entries.count > threshold else { return }
        let entries = session.entries
        let running = entries.firstIndex { $0.turnId == turn.id }
        guard let cut = CompactionCut.index(in: entries, keepLast: spec.keepLast ?? 6, protectFrom: running, toPrompt: true) else { return }
        let old = Array(entries[..<cut])
        let reference = try spec.model ?? profile.model ?? session.resolveModelReference(options: turn.options)
        let previous = spec.into.flatMap { session.properties[$0]?.stringValue } ?? ""
        let summary = try await summarize(
            old, model: reference, field: "summarizeHistory.model", extraInstructions: nil, earlierSummary: previous,
            purpose: .summary, profile: profile.name, session: session)
        _ = try session.setProperties(set: [spec.into ?? "summary": .string(summary)], remove: [])
        try session.transcript.mutate([.remove(ids: old.map(\.id))])
    }

    // MARK: Built-in orchestration tools

    /// Runs a built-in tool; returns the outcome and content to append. `span`:
    /// the call's span, under which a consult's model call hangs.
    func runBuiltinTool(_ tool: ResolvedTool, arguments: JSONValue, profile: ResolvedProfile, span: SpanContext?, session: isolated AgentSession) async throws -> (ToolOutcome, JSONValue) {
        switch tool {
        case .client, .askUser:
            // Client tools go to the client, ask_user to the user (the tool stage).
            return (.failed, "not a built-in tool")
        case .updatePlan:
            // The arguments passed the tool's schema: entries of content, priority and status.
            let entries = try arguments["entries"].map { try $0.decode(as: [PlanEntry].self) } ?? []
            try session.updatePlan(entries)
            let open = entries.filter { $0.status != .completed }.count
            return (.ok, .string("Plan updated: \(entries.count) step\(entries.count == 1 ? "" : "s"), \(open) not completed."))
        case .handoff(let target, _, _):
            guard let selector = session.config.profiles?.selector else {
                return (.failed, .string("Handoff is unavailable: the session's profiles have no selector property."))
            }
            _ = try session.setProperties(set: [selector: .string(target)], remove: [])
            return (.ok, .string("Handed off to \(target). The \(target) profile continues the conversation."))
        case .consult(let target, _, _):
            let question = arguments["question"]?.stringValue ?? arguments.serializedString()
            let answer = try await consult(target, question: question, parent: span ?? spanParent, session: session)
            return (.ok, .string(answer))
        case .activateSkill(let skills):
            guard let name = arguments["name"]?.stringValue, let skill = skills.first(where: { $0.name == name }) else {
                return (.failed, .string("No such skill. Available: \(skills.map(\.name).joined(separator: ", "))."))
            }
            var active = session.activeSkillNames
            if !active.contains(name) { active.append(name) }
            _ = try session.setProperties(set: [activeSkillsProperty: .array(active.map { .string($0) })], remove: [])
            if let prompt = skill.prompt {
                // Returned as tool output, so the cached prefix stays intact.
                return (.ok, .string(prompt))
            }
            return (.ok, .string("Skill \(name) is active; its instructions now apply."))
        }
    }

    /// Phone-a-friend: a short-lived child conversation with its own, isolated
    /// transcript (the parent's history is never shown), prompted with the
    /// question; its answer becomes the tool output. Usage counts in the parent
    /// turn; it runs inside the parent's task, so cancelling the parent cancels it.
    private func consult(_ target: String, question: String, parent: SpanContext?, session: isolated AgentSession) async throws -> String {
        var childProperties = session.properties
        if let selector = session.config.profiles?.selector { childProperties[selector] = .string(target) }
        let child = try ProfileResolver.resolve(config: session.config, properties: childProperties, activeSkills: [])
        let reference = try child.model ?? session.config.model ?? session.context.catalog.defaultReference ?? session.resolveModelReference(options: turn.options)
        let provider = try session.provider(for: reference)
        let modelConfig = try session.context.catalog.resolve(reference, field: "profiles.cases.\(target).model")
        let request = ModelRequest(
            model: modelConfig.model ?? modelConfig.provider.rawValue, instructions: session.personaPrefix() + child.instructions,
            messages: [.user(text: question, images: [])], tools: [], toolChoice: .none,
            options: GenerationOptions(temperature: child.options.temperature, maxOutputTokens: child.options.maxOutputTokens, reasoningLevel: child.options.reasoningLevel))
        return try await sideRequest(request, provider: provider, purpose: .consult, profile: child.name, parent: parent, session: session).text
    }

    // MARK: Router

    /// Picks the agent for this turn (docs/protocol.md §11) by setting the selector.
    /// No router: nothing happens and no model is called.
    func routeTurn(input: TurnInput, session: isolated AgentSession) async throws {
        guard let router = session.config.router, let profiles = session.config.profiles, let selector = profiles.selector else { return }
        let agents = profiles.cases.keys.sorted()
        let fallback = ProfileResolver.fallbackCaseName(profiles) ?? agents.first ?? ProfileResolver.defaultProfileName
        var chosen: String?
        var diagnostic: String?
        let span = turn.turnSpan.flatMap { session.context.tracer?.startRouterSpan(parent: $0.context, routerKind: router.kind.rawValue) }
        switch router.kind {
        case .rules:
            // The rules are the client's patterns: matched on a regex worker, each match bounded.
            let rules = router.rules ?? [], text = input.text
            let picked = await RegexWorkers.run { () -> Result<String?, RegexBudgetExceeded> in
                do throws(RegexBudgetExceeded) {
                    for rule in rules {
                        guard let regex = try? BoundedRegex(rule.pattern) else { continue }
                        if try regex.firstMatch(in: text) { return .success(rule.profile) }
                    }
                    return .success(nil)
                } catch {
                    return .failure(error)
                }
            }
            switch picked {
            case .success(let profile): chosen = profile
            case .failure(let error): throw error.turnError(field: "router.rules")
            }
        case .llm:
            do {
                let picked = try await classify(input: input, router: router, agents: agents, profiles: profiles, parent: span?.context, session: session)
                if let picked, agents.contains(picked) {
                    chosen = picked
                } else {
                    diagnostic = picked.map { "the router chose the unknown agent '\($0)'; using '\(fallback)'" } ?? "the router made no selection; using '\(fallback)'"
                }
            } catch let error as RPCError where error.kind == .budgetExceeded || error.kind == .invalidConfiguration {
                // A spent budget, or a cost limit on a model without prices, stops every request.
                span?.end(status: .error(error.kind.rawValue))
                throw error
            } catch {
                // A cancel (either kind) is not a router failure: it ends the turn.
                if Task.isCancelled || error is CancellationError || error is TurnStop {
                    span?.end(status: .error("cancelled"))
                    throw error is TurnStop ? error : CancellationError()
                }
                diagnostic = "the router failed (\(Self.safeDescription(of: error))); using '\(fallback)'"
            }
        }
        let agent = chosen ?? fallback
        span?.setAttribute(SpanAttributeKey.profile, .string(agent))
        span?.end()
        if let diagnostic {
            session.context.logger.warning(diagnostic)
            let d = [ContextDiagnostic(source: "router", message: diagnostic)]
            contextDiagnostics += d
            session.emit(.contextDiagnostics(d), turn: turn.id)
        }
        if session.properties[selector] != .string(agent) {
            _ = try session.setProperties(set: [selector: .string(agent)], remove: [])
        }
    }

    /// What may be shown of an error: never a provider's raw message, which can echo request content.
    static func safeDescription(of error: any Error) -> String {
        switch error {
        case let e as ProviderError: return e.safeDescription
        case let e as RPCError: return e.message
        case let e as ProviderContractViolation: return "the provider broke its protocol: \(e.message)"
        default: return "\(type(of: error))"
        }
    }

    private func classify(input: TurnInput, router: Router, agents: [String], profiles: Profiles, parent: SpanContext?, session: isolated AgentSession) async throws -> String? {
        let reference = try router.model ?? session.resolveModelReference(options: turn.options)
        let provider = try session.provider(for: reference)
        let modelConfig = try session.context.catalog.resolve(reference, field: "router.model")
        let descriptions = agents.map { name in "- \(name)" + (profiles.cases[name]?.description.map { ": \($0)" } ?? "") }.joined(separator: "\n")
        let tool = ModelToolDefinition(
            name: "select_agent", description: "Select the agent that should answer the user's message.",
            inputSchema: ["type": "object", "properties": ["agent": ["type": "string", "enum": .array(agents.map { .string($0) })]], "required": ["agent"]])
        let request = ModelRequest(
            model: modelConfig.model ?? modelConfig.provider.rawValue,
            instructions: (router.instructions ?? "Route the user's message to the best agent.") + "\n\nAgents:\n" + descriptions,
            messages: ModelHistory.messages(from: session.entries), tools: [tool], toolChoice: .tool("select_agent"))
        let response = try await sideRequest(request, provider: provider, purpose: .router, profile: "router", parent: parent, session: session)
        // The last select_agent call counts; any text beside it is ignored.
        let selection = response.toolCalls.last { $0.name == "select_agent" }.flatMap { try? JSONValue.parse($0.argumentsJSON) }?["agent"]?.stringValue
        return selection
    }
}

/// The five transcript operations over a copy of the entries (shared by
/// `session/mutateTranscript` and client hooks).
enum TranscriptOperations {
    static func apply(_ operations: [TranscriptOperation], to entries: [TranscriptEntry]) throws -> [TranscriptEntry] {
        var working = entries
        for (i, op) in operations.enumerated() {
            func fail(_ message: String) -> RPCError {
                RPCError(.invalidTranscript, "operation \(i): \(message)", data: ["operation": .int(i)])
            }
            func position(of id: String) throws -> Int {
                guard let p = working.firstIndex(where: { $0.id == id }) else { throw fail("no entry with id '\(id)'") }
                return p
            }
            switch op {
            case .remove(let ids):
                for id in ids { _ = try position(of: id) }
                let doomed = Set(ids)
                working.removeAll { doomed.contains($0.id) }
            case .truncateAfter(let id):
                if let id {
                    let p = try position(of: id)
                    working.removeSubrange((p + 1)...)
                } else {
                    working.removeAll()
                }
            case .replace(let id, let entry):
                let p = try position(of: id)
                working[p] = entry
            case .insert(let after, let new):
                var at = 0
                if let after { at = try position(of: after) + 1 }
                working.insert(contentsOf: new, at: at)
            case .set(let new):
                working = new
            }
        }
        return working
    }
}
