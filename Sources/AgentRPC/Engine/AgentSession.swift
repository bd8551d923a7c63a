import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One conversation. An actor, so every state change is ordered; the turn loop
/// runs on it and yields at each await, which is what lets `getState`,
/// `session/cancel` and `session/confirm` interleave with a running turn.
actor AgentSession {
    let id: String
    let config: SessionConfig
    let context: EngineContext
    let createdAt: Date

    /// Entries, revision and properties: every change to them goes through it.
    var transcript: Transcript
    var entries: [TranscriptEntry] { transcript.entries }
    var revision: Int { transcript.revision }
    var properties: [String: JSONValue] { transcript.properties }

    /// The `session/event` stream: `seq`, the running turn's tag, back-pressure.
    let events: SessionEvents
    /// The running turn, or the last one once none runs (`getState` shows it).
    var runner: TurnRunner?
    var isRunning: Bool { runner?.isRunning ?? false }
    /// The running turn, or the last one once no turn is running (docs/turns.md).
    var turnId: String? { runner?.id }

    /// The profile the last round trip resolved (nil before the first, with profiles).
    var activeProfile: ResolvedProfile?
    /// Providers, compiled tool schemas, context values and converted history,
    /// kept from turn to turn (`SessionCaches`).
    var caches = SessionCaches()

    // The human in the loop (HumanInTheLoop.swift)
    var sendQueue = SendQueue()
    var approvalRules = ApprovalRuleSet()
    /// True while a rewind sends its `tool/undo`s: no turn starts meanwhile.
    var rewindingUndos = false
    /// A `session/compact` in progress: no turn starts and the transcript is not edited meanwhile.
    var compaction: CompactionInProgress?
    /// The parked turn's `limits.parkedTTLSeconds` while this process holds
    /// it (ParkedTurns.swift); nil when no turn is parked or it has no TTL.
    var parkedExpiry: Task<Void, Never>?
    /// The parked turn being ended (a `session/cancel` or its TTL rolling it
    /// back): it is neither continued nor ended a second time meanwhile.
    var endingParkedTurn: String?
    /// The session's MCP servers, or why there are none yet; see `startMCPServers()`.
    var mcpServers = SessionMCPServers.none
    /// Running calls' progress reports on their way to `toolProgress` events (ToolProgress.swift).
    nonisolated let toolProgress = ToolProgressGate()
    /// The images and audio its tools returned, which its entries name.
    nonisolated let media: MediaStore
    /// The session's MCP servers (nil: it names none, or they are not started).
    var mcp: MCPServerSet? {
        if case .started(let set) = mcpServers { return set }
        return nil
    }

    /// `transcript`: the state a stored or forked session was loaded with (nil: a new, empty one).
    /// `media`: where its tools' images and audio are kept (default: in memory).
    init(
        id: String, config: SessionConfig, context: EngineContext, transcript: Transcript? = nil, createdAt: Date = WallClock.now(),
        media: MediaStore = MediaStore(directory: nil)
    ) {
        self.id = id
        self.media = media
        self.config = config
        self.context = context
        self.createdAt = createdAt
        self.events = SessionEvents(sessionId: id, channel: context.channel, logger: context.logger)
        let transcript = transcript ?? Transcript(properties: config.properties ?? [:], createdAt: createdAt)
        self.transcript = transcript
        // With profiles, the first request activates the initial profile (its
        // onActivate hooks run, profileActivated has no `previous`); a session
        // without profiles has nothing to activate. A loaded session has the
        // profile it last activated.
        if config.profiles == nil {
            self.activeProfile = try? ProfileResolver.resolve(config: config, properties: transcript.properties)
        } else if let name = transcript.activeProfileName {
            let current = try? ProfileResolver.resolve(config: config, properties: transcript.properties, activeSkills: Self.skillNames(transcript.properties))
            self.activeProfile = current?.name == name ? current : nil
        } else {
            self.activeProfile = nil
        }
    }

    // MARK: Read-only views

    /// The profile the current properties select: what the next request will use.
    /// (`activeProfile` lags behind until that request is built, so a property
    /// change between turns must not be reported as the old profile.)
    var activeProfileName: String {
        ProfileResolver.activeProfileName(config: config, properties: properties)
    }

    func handle() -> SessionHandle {
        SessionHandle(sessionId: id, revision: revision, activeProfile: activeProfileName)
    }

    func state() -> SessionState {
        SessionState(
            sessionId: id, isRunning: isRunning, turnId: turnId, currentText: runner?.currentText ?? "",
            activeToolCalls: runner?.activeToolCalls ?? [], pendingConfirmation: runner?.pendingConfirmation,
            lastUsageReport: runner?.lastUsageReport, lastSchemaWarnings: runner?.schemaWarnings ?? [],
            lastContextDiagnostics: runner?.contextDiagnostics ?? [], activeProfile: activeProfileName,
            properties: properties, revision: revision, entryCount: entries.count,
            queuedSends: sendQueue.isEmpty ? nil : sendQueue.count, approvalRules: approvalRules.rules.isEmpty ? nil : approvalRules.rules,
            usageTotals: transcript.usageTotals == Usage() ? nil : transcript.usageTotals,
            contextTokens: contextTokens, contextWindowTokens: contextWindowTokens, plan: transcript.plan, parked: parkedState)
    }

    /// Keeps the model's plan with the session (journaled) and says so (`planUpdated`).
    func updatePlan(_ entries: [PlanEntry]) throws {
        try transcript.updatePlan(entries)
        emit(SessionEvent(SessionEvent.PlanUpdated(entries: entries)))
    }

    /// The context meter's last figure: the running turn's last round trip,
    /// else what the store keeps (the last turn's, or a compaction's estimate).
    var contextTokens: Int? {
        if let runner, runner.isRunning, let reading = runner.turn.usage.contextTokens { return reading }
        return transcript.usageTotals.contextTokens
    }

    /// The window of the model the next round trip would use, when known.
    var contextWindowTokens: Int? {
        let profile = (try? resolveProfile()) ?? activeProfile
        guard let reference = try? resolveModelReference(options: TurnOptions(), profile: profile),
            let config = try? context.catalog.resolve(reference, field: "model")
        else { return nil }
        return ProviderFactory.capabilities(config)?.contextWindowTokens
    }

    func transcriptForClient() -> SessionTranscript {
        let profile = (try? resolveProfile()) ?? activeProfile
        return SessionTranscript(revision: revision, instructions: instructionsText(profile: profile), entries: entries)
    }

    func summary() -> SessionSummary {
        SessionSummary(
            sessionId: id, title: JournalStore.title(config: config, entries: entries), userId: config.userId, model: config.displayModel,
            createdAt: Timestamp.iso8601(createdAt), updatedAt: Timestamp.iso8601(transcript.updatedAt),
            revision: revision, entryCount: entries.count, isRunning: isRunning, loaded: true)
    }

    var updatedAt: Date { transcript.updatedAt }

    // MARK: The store

    /// Makes every committed change durable (docs/protocol.md, "Durable sessions").
    func syncJournal() throws {
        try transcript.sync()
    }

    /// Syncs and releases the journal (close, delete, exit); a long journal is
    /// rewritten as a snapshot first unless it is about to be deleted.
    func closeJournal(deleting: Bool = false) throws {
        disarmParkedTTL()
        let journal = transcript.journal as? any SessionJournal
        defer { transcript.journal = nil }
        do { try transcript.sync() } catch {
            // Not in sync with the state: no snapshot or summary of it.
            journal?.close()
            throw error
        }
        if deleting { journal?.close() } else { journal?.close(final: transcript) }
    }

    /// The state a fork starts from: the entries up to and including `atEntryID`.
    func forkSnapshot(atEntryID: String?) throws -> TranscriptSnapshot {
        if isRunning {
            throw RPCError(.sessionBusy, "a session cannot be forked while a turn is running", data: ["turnId": turnId.map { .string($0) } ?? .null])
        }
        return try Self.forkSnapshot(of: transcript, atEntryID: atEntryID)
    }

    static func forkSnapshot(of transcript: Transcript, atEntryID: String?) throws -> TranscriptSnapshot {
        var snapshot = transcript.snapshot
        if let atEntryID {
            guard let index = snapshot.entries.firstIndex(where: { $0.id == atEntryID }) else {
                throw RPCError.invalidParams("no entry with id '\(atEntryID)'", field: "atEntryId")
            }
            snapshot.entries = Array(snapshot.entries[...index])
        }
        // A new session: its own revision count and usage from zero, and no
        // undo records (a rewind of the fork must not undo the source's calls).
        snapshot.revision = 0
        snapshot.usage = Usage()
        snapshot.committedUndo = []
        snapshot.updatedAt = WallClock.now()
        return snapshot
    }

    // MARK: Events

    /// Sends one `session/event` (`SessionEvents`).
    func emit(_ event: SessionEvent, turn: String? = nil) {
        events.emit(event, turn: turn)
    }

    // MARK: Transcript changes that are announced

    /// Appends an entry and announces it (`entryAppended`), in that order.
    @discardableResult
    func append(_ content: TranscriptContent, turn: String?) throws -> TranscriptEntry {
        let entry = try transcript.append(content, turn: turn)
        announceAppended(entry, turn: turn)
        return entry
    }

    /// `entryAppended` for an entry just appended, with the JSON text its
    /// journal line holds (serialized once for both).
    func announceAppended(_ entry: TranscriptEntry, turn: String?) {
        // The journal alone is read: a method of the whole transcript, read from
        // the actor, would copy it (a retain and a release of each of its fields).
        events.emitEntryAppended(entry, text: transcript.journal?.writtenEntryText(entry.id), turn: turn)
    }

    /// Sets and removes properties and announces the change (`propertiesChanged`).
    func setProperties(set: [String: JSONValue], remove: [String]) throws -> SetPropertiesResult {
        let removed = try transcript.setProperties(set: set, remove: remove)
        if !set.isEmpty || !removed.isEmpty {
            emit(.propertiesChanged(set: set, removed: removed))
        }
        return SetPropertiesResult(properties: properties, activeProfile: activeProfileName)
    }

    // MARK: Instructions

    /// Persona and directives: the part of the instructions every profile shares.
    func personaPrefix() -> String {
        var parts: [String] = []
        if let persona = config.role?.persona, !persona.isEmpty { parts.append(persona) }
        if let directives = config.role?.directives, !directives.isEmpty {
            parts.append("Directives:\n" + directives.map { "- \($0)" }.joined(separator: "\n"))
        }
        return parts.isEmpty ? "" : parts.joined(separator: "\n\n") + "\n\n"
    }

    /// The system text for the next request: persona, directives, the active
    /// profile's instructions, and the context sources' latest values.
    func instructionsText(profile: ResolvedProfile?) -> String {
        var parts: [String] = []
        let prefix = personaPrefix()
        if !prefix.isEmpty { parts.append(String(prefix.dropLast(2))) }
        if let instructions = profile?.instructions, !instructions.isEmpty { parts.append(instructions) }
        let sources = (config.contextSources ?? []).compactMap { source -> String? in
            guard let value = caches.contextValues[source.name] else { return nil }
            return "## \(source.name)\n\(value)"
        }
        if !sources.isEmpty { parts.append("Context:\n" + sources.joined(separator: "\n\n")) }
        return parts.joined(separator: "\n\n")
    }

    // MARK: Profiles

    var activeSkillNames: [String] { Self.skillNames(properties) }

    static func skillNames(_ properties: [String: JSONValue]) -> [String] {
        (properties[activeSkillsProperty]?.arrayValue ?? []).compactMap(\.stringValue)
    }

    /// Resolves the profile for the coming round trip from the current properties.
    func resolveProfile() throws -> ResolvedProfile {
        let properties = self.properties
        if let last = caches.resolvedProfile, last.properties == properties { return last.profile }
        let profile = try ProfileResolver.resolve(config: config, properties: properties, activeSkills: Self.skillNames(properties))
        caches.resolvedProfile = (properties, profile)
        return profile
    }

    // MARK: Models, providers and schema validators (cached for the session)

    /// Call site > profile case > session > the config file's default model.
    func resolveModelReference(options: TurnOptions, profile: ResolvedProfile? = nil) throws -> ModelReference {
        if let m = options.model { return m }
        if let m = profile?.model { return m }
        if let m = config.model { return m }
        if let m = context.catalog.defaultReference { return m }
        throw RPCError.invalidConfiguration("no model is configured: give the session a \"model\" (or set defaultModel in agentrpc.json)", field: "model")
    }

    /// The provider for a model reference, created once per session.
    func provider(for reference: ModelReference) throws -> any ModelProvider {
        try caches.providers.provider(for: reference) {
            // The session's own cassette, else the server's (docs/testing.md).
            let cassette = try config.modelCassette.map { try context.cassettes.cassette($0) } ?? context.cassette
            let made = try ProviderFactory.make(context.catalog.resolve(reference, field: "model"), environment: context.options.environment, cassette: cassette)
            restorePosition(of: made, for: reference)
            return made
        }
    }

    /// A compiled validator for a tool's input schema, compiled once per schema.
    func inputValidator(for tool: String, schema: JSONValue) throws -> JSONSchemaValidator {
        try caches.inputValidator(for: tool, schema: schema)
    }

    // MARK: Turns

    /// Pre-flight and setup, run in request order: on failure nothing changed.
    /// Returns the control of the started turn; the loop runs in its own task.
    func startTurn(input: TurnInput, options: TurnOptions, mode: TurnMode) async throws -> TurnControl {
        // A queued send is next in line: a plain send must not overtake it.
        if !isRunning && !sendQueue.isEmpty { startNextQueuedSend() }
        // A parked turn past its TTL ends first (the only suspension here, and only then).
        if parkedTurnExpired { _ = try await expireParkedTurnIfDue() }
        return try beginTurn(input: input, options: options, mode: mode)
    }

    /// `startTurn` without suspension points, so the turn after a queued send's
    /// predecessor can start before any other request runs.
    func beginTurn(input: TurnInput, options: TurnOptions, mode: TurnMode) throws -> TurnControl {
        // 1. Pre-flight, no mutation on failure.
        if isRunning {
            throw RPCError(.alreadyRunning, "a turn is already running in this session", data: ["turnId": turnId.map { .string($0) } ?? .null])
        }
        if rewindingUndos {
            throw RPCError(.sessionBusy, "a rewind is still undoing tool calls; send again when it has answered")
        }
        if compaction != nil {
            throw RPCError(.sessionBusy, "the session is being compacted; send again when session/compact has answered")
        }
        if let parked = parkedTurn {
            throw RPCError(.sessionBusy, "the session's turn \(parked.id) is parked: go on with session/continue or end it with session/cancel", data: ["turnId": .string(parked.id)])
        }
        let profile = try resolveProfile()
        let modelRef = try resolveModelReference(options: options, profile: profile)
        let provider = try provider(for: modelRef)
        let tools = profile.tools
        let toolChoice = options.toolChoice ?? profile.options.toolChoice ?? config.toolChoice ?? .auto
        switch toolChoice {
        case .required where tools.isEmpty:
            throw RPCError.invalidConfiguration("toolChoice 'required' needs at least one tool", field: "toolChoice")
        case .tool(let name) where !tools.contains(where: { $0.name == name }):
            throw RPCError.invalidConfiguration("toolChoice names the tool '\(name)', which is not among the active tools", field: "toolChoice")
        default: break
        }
        if case .generate = mode {
            if !provider.capabilities.supportsStructuredOutput {
                throw RPCError(.structuredOutput, "the model's provider cannot produce structured output", data: ["reason": "unsupported"])
            }
        } else if toolChoice != .auto && toolChoice != ToolChoice.none && !provider.capabilities.supportsToolChoice {
            throw RPCError(.toolChoiceUnsupported, "the model's provider does not support forcing a tool choice", data: ["toolChoice": toolChoice.json])
        }
        if case .generate(let schema, _) = mode {
            do { _ = try JSONSchemaValidator(schema: schema) } catch {
                throw RPCError.invalidParams("schema is not a usable JSON Schema: \(error)", field: "schema")
            }
        }
        try PreFlight.images(input.images ?? [], provider: provider)
        try PreFlight.limitOverrides(options.limits)

        // 2. Schema validation of the active tools against the provider: warnings only.
        let warnings = PreFlight.schemaWarnings(for: profile, provider: provider)

        // 3. The turn begins.
        // Journaled first: a turn the store refuses has not begun.
        let sessionID = self.id
        // A turn that can be parked keeps its call-site options, so a continued one runs under them.
        let kept: TurnOptions? = parks && options != TurnOptions() ? options : nil
        // One that cannot park says so, so that a crash does not leave it parked either.
        let journaledMode: JournaledTurnMode? = parks && !mode.parks ? .generate : nil
        let entryCountBefore = entries.count
        // The turn's start and its prompt are journaled in one write.
        let (id, prompt) = try transcript.beginTurn(
            options: kept, mode: journaledMode, prompt: .prompt(text: input.text, images: input.images)
        ) { "t-\(sessionID.dropFirst(2).prefix(8))-\($0)" }
        let limits = EffectiveLimits(config: config.limits, overrides: options.limits)
        let turn = TurnState(
            id: id, mode: mode, limits: limits, toolChoice: toolChoice, options: options,
            startedAt: ContinuousClock.now, entryCountBefore: entryCountBefore)
        let runner = TurnRunner(turn: turn, events: events, schemaWarnings: warnings, previous: self.runner)
        self.runner = runner
        let control = runner.control
        emit(.turnStarted(input: input), turn: id)
        if !warnings.isEmpty { emit(.schemaWarnings(warnings), turn: id) }
        if let prompt { announceAppended(prompt, turn: id) }

        // On `TurnExecutor`: the turn's hops and its frames' wake-ups stay on one
        // thread per batch, and an answer's continuation runs on the reader thread.
        let task = Task { [self] () async throws -> TurnOutcome in
            guard #available(macOS 15.0, *) else { return try await runner.runTurn(input: input, session: self) }
            return try await withTaskExecutorPreference(TurnExecutor.shared) {
                try await runner.runTurn(input: input, session: self)
            }
        }
        control.attach(task)
        return control
    }

    /// Stops a running turn from outside (close, shutdown) and waits for it to wind down.
    func abortRunningTurn(reason: AbortReason) async {
        dropQueuedSends(source: reason == .closed ? "close" : "shutdown")
        abortCompaction(reason)
        guard let runner, runner.isRunning else { return }
        runner.abort(reason)
        // Said once the abort is made: whatever the turn does next ends it as cancelled.
        context.logger.debug("session \(id): the running turn is stopped (\(reason == .closed ? "close" : "shutdown"))")
        let control = runner.control
        _ = try? await control.result()
    }

    /// `session/cancel`: cooperative. Drops queued sends first (so none starts when
    /// the turn ends) and denies a built-in pending confirmation at once.
    func cancelCooperatively() -> SessionCancelResult {
        let dropped = dropQueuedSends(source: "session/cancel")
        guard let runner, runner.isRunning else { return SessionCancelResult(wasRunning: false, droppedQueued: dropped > 0 ? dropped : nil) }
        runner.cancel()
        return SessionCancelResult(wasRunning: true, droppedQueued: dropped > 0 ? dropped : nil)
    }

    /// Operations that turn `current` back into `before`: a truncation when the
    /// turn only appended, else the whole list. Nil when they are equal.
    static func revertOperations(from current: [TranscriptEntry], to before: [TranscriptEntry]) -> [TranscriptOperation]? {
        if current == before { return nil }
        if before.count <= current.count, Array(current.prefix(before.count)) == before {
            return [.truncateAfter(id: before.last?.id)]
        }
        return [.set(entries: before)]
    }

    // MARK: Messages to the running turn, the send queue, approval rules

    /// `session/steer`: queued for the running turn's next checkpoint.
    func steer(input: TurnInput, expectedTurnId: String?) throws -> SessionSteerResult {
        guard let runner, runner.takesSteering else {
            var data: [String: JSONValue] = [:]
            if let expectedTurnId { data["expectedTurnId"] = .string(expectedTurnId) }
            throw RPCError(.noRunningTurn, "no turn is running that could take this input; start one with session/send", data: data)
        }
        if let expectedTurnId, expectedTurnId != runner.id {
            throw RPCError(.turnMismatch, "the turn named by expectedTurnId is not the running turn; it has ended", data: [
                "expectedTurnId": .string(expectedTurnId), "turnId": .string(runner.id),
            ])
        }
        if runner.steeringWaiting >= HumanInTheLoopLimits.maxPendingSteering {
            throw RPCError(.overloaded, "\(HumanInTheLoopLimits.maxPendingSteering) steering inputs are already waiting for the next checkpoint")
        }
        if let provider = caches.providers.last?.provider { try PreFlight.images(input.images ?? [], provider: provider) }
        runner.steer(input)
        return SessionSteerResult(turnId: runner.id)
    }

    // MARK: Queued sends

    /// `session/send` with `queue: true`: starts now when the session is idle,
    /// else takes the next place in the queue (in request order).
    func startOrEnqueue(input: TurnInput, options: TurnOptions, mode: TurnMode) throws -> QueueTicket {
        if !isRunning && sendQueue.isEmpty { return .started(try beginTurn(input: input, options: options, mode: mode)) }
        return .queued(id: try sendQueue.enqueue(input: input, options: options, mode: mode))
    }

    /// Waits until the queued send's turn has started; withdrawing the request
    /// (`$/cancelRequest`) takes it out of the queue.
    func awaitQueuedTurn(_ id: Int) async throws -> TurnControl {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<TurnControl, any Error>) in
                sendQueue.attach(id, continuation)
            }
        } onCancel: {
            Task { await self.dropQueuedSend(id, source: "$/cancelRequest") }
        }
    }

    private func dropQueuedSend(_ id: Int, source: String) {
        sendQueue.drop(id, source: source)
    }

    /// Drops every queued send (cancel, close, shutdown); returns how many.
    @discardableResult
    func dropQueuedSends(source: String) -> Int {
        sendQueue.dropAll(source: source)
    }

    /// After a turn ended: the first queued send whose pre-flight passes starts now,
    /// before any other request can run a turn in between.
    func startNextQueuedSend() {
        while !isRunning, let entry = sendQueue.next() {
            let outcome = Result { try beginTurn(input: entry.input, options: entry.options, mode: entry.mode) }
            sendQueue.settle(entry, outcome)
        }
    }

    // MARK: Approval rules

    /// Adds a rule (from `approveForSession` or `session/setApprovalRules`) and announces the change.
    func addApprovalRules(_ specs: [ApprovalRuleSpec], removing ids: [String] = [], field: String) throws -> [ApprovalRule] {
        let (added, changed) = try approvalRules.change(adding: specs, removing: ids, field: field)
        if changed { emit(.approvalRulesChanged(rules: approvalRules.rules)) }
        return added
    }

    /// `session/setApprovalRules`.
    func setApprovalRules(add: [ApprovalRuleSpec], remove: [String]) throws -> SetApprovalRulesResult {
        _ = try addApprovalRules(add, removing: remove, field: "add")
        return SetApprovalRulesResult(rules: approvalRules.rules)
    }

    /// Checks edited arguments against the tool's input schema; nil when they fit.
    func schemaProblem(tool name: String, schema: JSONValue?, arguments: JSONValue) -> [JSONSchemaViolation]? {
        guard let schema else { return nil }
        guard let validator = try? inputValidator(for: name, schema: schema) else { return nil }
        let violations = validator.validate(arguments)
        return violations.isEmpty ? nil : violations
    }

    // MARK: Confirmation

    /// `session/confirm`. A decision that cannot be honoured (edited arguments that
    /// break the schema, a bad rule) is refused and the confirmation stays pending.
    func confirm(_ params: SessionConfirmParams) throws -> SessionConfirmResult {
        let callId = params.callId
        guard let runner, let pending = runner.pendingConfirmation, runner.confirmationIsOpen(callId: callId) else {
            let pending = runner?.pendingConfirmation
            let message = pending == nil ? "no confirmation is pending"
                : pending?.callId != callId ? "the pending confirmation is for another call" : "the confirmation was already settled"
            throw RPCError(.noPendingConfirmation, message, data: ["callId": .string(callId)])
        }
        let answer = try acceptDecision(
            params.decision, reason: params.reason, arguments: params.arguments, rule: params.rule,
            tool: pending.name, schema: runner.pendingConfirmationSchema, source: .client)
        guard runner.resolveConfirmation(answer, callId: callId) else {
            throw RPCError(.noPendingConfirmation, "the confirmation was already settled", data: ["callId": .string(callId)])
        }
        return SessionConfirmResult(rule: answer.decision == .approveForSession ? approvalRules.rules.last : nil)
    }

    /// Checks a decision's extras and, for `approveForSession`, adds the rule.
    /// Throws `invalidParams` (nothing changed) when they cannot be honoured.
    func acceptDecision(
        _ decision: ConfirmationDecision, reason: String?, arguments edited: JSONValue?, rule: ApprovalScope?,
        tool: String, schema: JSONValue?, source: ConfirmationSource
    ) throws -> ConfirmationAnswer {
        let approves = decision == .approve || decision == .approveForSession
        if edited != nil && !approves {
            throw RPCError.invalidParams("arguments can only come with an approve decision", field: "arguments")
        }
        if rule != nil && decision != .approveForSession {
            throw RPCError.invalidParams("rule can only come with approveForSession", field: "rule")
        }
        if let edited, let violations = schemaProblem(tool: tool, schema: schema, arguments: edited) {
            throw RPCError(.invalidParams, "the edited arguments do not match the input schema of '\(tool)': \(violations.map(\.description).joined(separator: "; "))", data: [
                "field": "arguments",
                "violations": .array(violations.map { ["path": .string($0.path), "message": .string($0.message)] }),
            ])
        }
        if decision == .approveForSession {
            _ = try addApprovalRules([ApprovalRuleSpec(tool: tool, arguments: rule?.arguments)], field: "rule")
        }
        return ConfirmationAnswer(decision: decision, source: source, reason: reason, arguments: edited)
    }
}

/// How a confirmation was settled.
struct ConfirmationAnswer: Sendable {
    var decision: ConfirmationDecision
    var source: ConfirmationSource
    var reason: String?
    /// Edited arguments to run the call with (approve decisions), already validated.
    var arguments: JSONValue? = nil
}

enum Timestamp {
    /// With whole milliseconds cut down as the journal keeps them (`JournalCodec.millis`):
    /// the formatter's own cut, from seconds since 2001, can differ by one near a boundary.
    static func iso8601(_ date: Date) -> String {
        JournalCodec.date(millis: JournalCodec.millis(date))
            .formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }
}
