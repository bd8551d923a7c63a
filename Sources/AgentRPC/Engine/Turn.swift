import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Everything one turn tracks while it runs.
struct TurnState: Sendable {
    let id: String
    let mode: TurnMode
    let limits: EffectiveLimits
    let toolChoice: ToolChoice
    let options: TurnOptions
    let startedAt: ContinuousClock.Instant
    /// How many entries there were before the turn (for the `revert` policy). The
    /// entries themselves are the transcript's open turn's (`OpenTurn`), copied
    /// only if something rewrites them during the turn: a copy held here would
    /// make the turn's first append copy the whole history.
    let entryCountBefore: Int
    var roundTrips = 0
    var toolCallCount = 0
    var usage = Usage()
    /// `ok` results that carry `undo`, oldest first.
    var undoLog: [(callId: String, name: String, undo: JSONValue)] = []
    /// The `toolCalls` entry of the current round trip, if any (for trimming).
    var openToolCallsEntryID: String?
    /// Set when the model called a `final` tool: the turn ends with these arguments.
    var finalAnswer: JSONValue?
    /// The transcript error policy of the profile active when the turn ended.
    var errorPolicy: TranscriptErrorPolicy?
    /// Spans (nil when tracing is off): the turn's root, and the active agent's.
    var turnSpan: ActiveSpan?
    var agentSpan: ActiveSpan?
    /// Option warnings already reported in this turn (each is reported once).
    var reportedOptionWarnings: Set<OptionWarning> = []

    /// Call site > profile (case over defaults) > allowed.
    func toolCallingMode(_ profile: ResolvedProfile) -> ToolCallingMode {
        options.toolCallingMode ?? profile.options.toolCallingMode ?? .allowed
    }

    /// Counts one provider request's usage (its last, cumulative report) in the turn.
    /// A turn whose provider reported no usage keeps `usage` empty: not reported, not 0.
    /// Only a round trip of the turn is a reading of the conversation's context
    /// (`contextTokens`); a side request's model saw something else.
    mutating func addUsage(_ u: Usage, roundTrip: Bool) {
        var counted = u
        if !roundTrip { counted.contextTokens = nil }
        usage.add(counted)
    }
}

extension Usage {
    /// The wire form of a provider's usage report, priced at `pricing` when there is one.
    init(_ u: ModelUsage, pricing: Pricing?) {
        self.init(
            inputTokens: u.inputTokens, outputTokens: u.outputTokens, cachedInputTokens: u.cachedInputTokens, reasoningTokens: u.reasoningTokens,
            contextTokens: u.contextTokens, costUSD: pricing.map(u.costUSD))
    }
}

/// Limits after call-site options are applied over the session's.
struct EffectiveLimits: Sendable {
    var maxToolCalls: Int
    var maxRoundTrips: Int
    var wallClockSeconds: Double
    var toolTimeoutSeconds: Double
    var confirmationTimeoutSeconds: Double
    var askUserTimeoutSeconds: Double
    /// The turn's token and cost limits (none by default).
    var budget: Budget
    var maxParallelToolCalls: Int

    init(config: Limits?, overrides: Limits?) {
        budget = (config ?? Limits()).merged(with: overrides).budget
        maxToolCalls = overrides?.maxToolCalls ?? config?.maxToolCalls ?? Limits.defaultMaxToolCalls
        maxRoundTrips = overrides?.maxRoundTrips ?? config?.maxRoundTrips ?? Limits.defaultMaxRoundTrips
        wallClockSeconds = overrides?.wallClockSeconds ?? config?.wallClockSeconds ?? Limits.defaultWallClockSeconds
        toolTimeoutSeconds = overrides?.toolTimeoutSeconds ?? config?.toolTimeoutSeconds ?? Limits.defaultToolTimeoutSeconds
        confirmationTimeoutSeconds = overrides?.confirmationTimeoutSeconds ?? config?.confirmationTimeoutSeconds ?? Limits.defaultConfirmationTimeoutSeconds
        askUserTimeoutSeconds = overrides?.askUserTimeoutSeconds ?? config?.askUserTimeoutSeconds ?? Limits.defaultAskUserTimeoutSeconds
        maxParallelToolCalls = overrides?.maxParallelToolCalls ?? config?.maxParallelToolCalls ?? Limits.defaultMaxParallelToolCalls
    }
}

/// One round trip's streamed output.
struct RoundTripOutput: Sendable {
    var text = ""
    var reasoning = ""
    /// Signatures of the thinking blocks streamed (Anthropic), in order.
    var reasoningSignatures: [String] = []
    var refusal = ""
    var toolCalls: [ModelToolCall] = []
    /// The round trip's last usage report, priced.
    var usage: Usage?
    var stopReason: ModelStopReason?
    /// The protocol's view of `stopReason` when the reply did not end normally.
    var endedHow: StopReason? {
        switch stopReason {
        case .maxTokens?: return .maxTokens
        case .contentFilter?: return .contentFilter
        case .refusal?: return .refusal
        case .endTurn?, .toolUse?, .other?, nil: return nil
        }
    }
    var hadOutput: Bool { !text.isEmpty || !reasoning.isEmpty || !refusal.isEmpty || !toolCalls.isEmpty }
    /// The reasoning as one transcript entry. A signature seals one thinking block's
    /// text: with several blocks run together in `reasoning`, none of them matches the
    /// whole, so the entry is kept unsigned (and is then not sent back). Reasoning
    /// that showed no text but is sealed (OpenAI Responses encrypted reasoning with
    /// no summary) is kept with empty text, so it can still be sent back.
    func reasoningEntry(profile: String) -> TranscriptContent? {
        let signature = reasoningSignatures.count == 1 ? reasoningSignatures.first : nil
        guard !reasoning.isEmpty || signature != nil else { return nil }
        return .reasoning(text: reasoning, profile: profile, signature: signature)
    }
}

/// The turn loop: round trips, streaming, and how a turn ends. It runs in the
/// turn's task on the session's actor (`session` is isolated), reading and
/// changing the session's long-lived state only through `session`.
extension TurnRunner {
    // MARK: The loop

    /// The checkpoint before a round trip: steering that arrived meanwhile joins
    /// the transcript as prompt entries, so the next request carries it.
    private func applySteering(session: isolated AgentSession) throws {
        for input in takeSteering() {
            let entry = try session.append(.prompt(text: input.text, images: input.images), turn: turn.id)
            session.emit(.steeringApplied(entryId: entry.id, input: input), turn: turn.id)
        }
    }

    /// Aborts the turn when its wall clock runs out; cancel it when the turn ends.
    private func startWallClock() -> Task<Void, Never> {
        Task { [control, limit = turn.limits.wallClockSeconds] in
            try? await Task.sleep(for: .clampedSeconds(limit))
            if !Task.isCancelled { control.abort(.wallClock(limit: limit)) }
        }
    }

    func runTurn(input: TurnInput, session: isolated AgentSession) async throws -> TurnOutcome {
        let watchdog = startWallClock()
        defer { watchdog.cancel() }
        turn.turnSpan = session.context.tracer?.startTurnSpan(sessionID: session.id, turnID: turn.id)
        turn.turnSpan?.setPayload(SpanAttributeKey.prompt, input.text)
        do {
            await refreshContextSources(session: session)
            // A stop during the refresh must not go on to route (a model call).
            try control.checkpoint()
            try await routeTurn(input: input, session: session)
            let first = try await enterProfile(session: session)
            try await runHooks(.onPrompt, profile: first, payload: ["input": input.json], session: session)
            let outcome = try await loop(session: session)
            turn.agentSpan?.end()
            turn.turnSpan?.setAttribute(SpanAttributeKey.turnStatus, .string(outcome.turnResult.stopReason.rawValue))
            turn.turnSpan?.recordUsage(outcome.turnResult.usage)
            turn.turnSpan?.end(status: .ok)
            return outcome
        } catch {
            throw await ended(by: error, session: session)
        }
    }

    /// How a turn that threw ends: failed or cancelled (rolled back), or, in a
    /// session that parks, parked when its client went away (end of input,
    /// `shutdown`, `session/close`): the journal keeps it open for `session/continue`.
    private func ended(by error: any Error, session: isolated AgentSession) async -> RPCError {
        let rpc = turnError(from: error)
        if session.parks, turn.mode.parks, control.reason == .shutdown || control.reason == .closed || control.reason == .parked,
            session.transcript.openTurn?.id == turn.id
        {
            do { try session.transcript.sync() } catch { session.context.logger.warning("session \(session.id): the journal could not be synced when its turn was parked: \(error)") }
            end()
            // Parked on purpose in a process that goes on: its TTL is counted from now
            // (one that lost its client or its session is checked when loaded again).
            if control.reason == .parked { session.armParkedTTL() }
            turn.turnSpan?.end(status: .error("parked"))
            return rpc
        }
        await finishFailed(error: rpc, cancelled: rpc.code == .cancelled, session: session)
        turn.agentSpan?.end(status: .error(rpc.kind.rawValue))
        turn.turnSpan?.setAttribute(SpanAttributeKey.turnStatus, .string(rpc.code == .cancelled ? "cancelled" : "failed"))
        turn.turnSpan?.end(status: .error("\(rpc.kind.rawValue): \(rpc.message)"))
        return rpc
    }

    /// `session/continue`: the parked turn goes on. The calls of its latest
    /// round trip that have no output run (those sent before are sent again,
    /// in doubt), then the loop goes on with the model, as the turn would have.
    func continueTurn(session: isolated AgentSession) async throws -> TurnOutcome {
        let watchdog = startWallClock()
        defer { watchdog.cancel() }
        turn.turnSpan = session.context.tracer?.startTurnSpan(sessionID: session.id, turnID: turn.id)
        do {
            // A client hook that had no answer is asked first, as it was (hookFired again).
            if let open = session.transcript.openTurn, open.id == turn.id, let pending = open.pendingHook {
                session.emit(.hookFired(hook: pending.hook, profile: pending.profile), turn: turn.id)
                try await callClientHook(pending, session: session)
            }
            if let last = session.entries.last, last.turnId == turn.id, case .response(let text, _, _, let stopReason) = last.content {
                // Stopped after its answer was journaled and before its end was: it ends with that answer.
                let undo: UndoOutcome = turn.undoLog.isEmpty ? .none : .committed
                try session.transcript.keepUndoRecords(turn.undoLog.map { UndoRecord(turnId: turn.id, callId: $0.callId, name: $0.name, undo: $0.undo) })
                let result = TurnResult(
                    turnId: turn.id, message: TurnMessage(entryId: last.id, text: text), stopReason: stopReason ?? .completed,
                    usage: turn.usage, roundTrips: turn.roundTrips, toolCalls: turn.toolCallCount, revision: session.revision)
                try session.transcript.endTurn(TurnEnd(turnId: turn.id, status: .completed, stopReason: result.stopReason, usage: turn.usage, undo: undo))
                try session.transcript.sync()
                end()
                session.emit(.turnEnded(status: .completed, undo: undo, error: nil, stopReason: stopReason), turn: turn.id)
                return TurnOutcome(turnResult: result, structuredValue: nil)
            }
            let profile = try await enterProfile(session: session)
            if let open = session.transcript.openTurn, open.id == turn.id {
                let pending = open.callStates(in: session.entries).filter { $0.state != .completed }
                if !pending.isEmpty {
                    turn.openToolCallsEntryID = session.entries.last(where: { e in
                        if case .toolCalls = e.content { return e.turnId == turn.id }
                        return false
                    })?.id
                    let calls = pending.map { p in
                        (call: ModelToolCall(id: p.call.callId, name: p.call.name, argumentsJSON: p.call.arguments.stringValue ?? p.call.arguments.serializedString()),
                         sends: open.sends[p.call.callId], asks: open.asks[p.call.callId] ?? 0)
                    }
                    var context = session.toolStageContext(for: self, profile: profile)
                    context.roundTrip = max(turn.roundTrips, 1)
                    let stage = ToolStage<AgentSession>(continuing: calls, context: context)
                    toolStage = stage
                    let outcomes = try await stage.run(host: session)
                    keepUndoRecords(of: stage)
                    toolStage = nil
                    if let final = outcomes.last(where: { $0.finalAnswer != nil })?.finalAnswer {
                        turn.finalAnswer = final
                        finishing = true
                        return try await finishCompleted(output: RoundTripOutput(), profile: profile, model: nil, session: session)
                    }
                    turn.openToolCallsEntryID = nil
                }
            }
            let outcome = try await loop(session: session)
            turn.agentSpan?.end()
            turn.turnSpan?.end(status: .ok)
            return outcome
        } catch {
            if let stage = toolStage { keepUndoRecords(of: stage) }
            toolStage = nil
            throw await ended(by: error, session: session)
        }
    }

    private func loop(session: isolated AgentSession) async throws -> TurnOutcome {
        while true {
            try control.checkpoint()
            try applySteering(session: session)
            if turn.roundTrips >= turn.limits.maxRoundTrips {
                throw RPCError(.maxRoundTripsExceeded, "the turn needed more than \(turn.limits.maxRoundTrips) round trips", data: ["limit": .int(turn.limits.maxRoundTrips)])
            }
            turn.roundTrips += 1
            // The profile is resolved before every round trip, so a change by the
            // client, a hook or a tool takes effect now, mid-turn included.
            let profile = try await enterProfile(session: session)
            turn.errorPolicy = profile.transcriptErrorPolicy
            let modelRef = try session.resolveModelReference(options: turn.options, profile: profile)
            let provider = try session.provider(for: modelRef)
            try checkBudgets(provider: provider, session: session)
            let output = try await roundTrip(profile: profile, modelRef: modelRef, provider: provider, session: session)
            try control.checkpoint()

            // A round trip cut off by the token limit or the content filter runs none of
            // its tool calls, whole or not (docs/protocol.md, "How a reply ended"): the
            // turn ends there, the same way for every provider.
            if output.toolCalls.isEmpty || output.endedHow?.cutsAnswer == true {
                if hasSteering == true && output.endedHow?.cutsAnswer != true {
                    // Steering arrived while the model answered: the answer stays in the
                    // transcript and the model gets one more round trip to take it in.
                    if let reasoning = output.reasoningEntry(profile: profile.name) { try session.append(reasoning, turn: turn.id) }
                    try session.append(.response(text: output.text, profile: profile.name, incomplete: false, stopReason: output.endedHow), turn: turn.id)
                    currentText = ""
                    continue
                }
                finishing = true
                return try await finishCompleted(output: output, profile: profile, model: (provider, modelRef), session: session)
            }
            if case .generate = turn.mode {
                throw RPCError(.providerContractViolation, "the model called a tool during structured output, where no tools were offered")
            }
            // Parsed once: for the entry here and for the tool stage's admission.
            let parsedArguments = output.toolCalls.map { try? JSONValue.parse($0.argumentsJSON) }
            let records = zip(output.toolCalls, parsedArguments).map { call, parsed in
                ToolCallRecord(callId: call.id, name: call.name, arguments: parsed ?? .string(call.argumentsJSON))
            }
            // The round trip's answer is journaled whole: a parked turn goes on from it.
            var answer: [TranscriptContent] = []
            if let reasoning = output.reasoningEntry(profile: profile.name) { answer.append(reasoning) }
            answer.append(.toolCalls(calls: records, profile: profile.name, text: output.text.isEmpty ? nil : output.text))
            let callsEntry = try session.appendRoundTrip(answer, of: self, provider: provider, modelRef: modelRef).last
            turn.openToolCallsEntryID = callsEntry?.id
            // The calls within maxToolCalls run; one more ends the turn once they have.
            let admitted = Array(output.toolCalls.prefix(max(0, turn.limits.maxToolCalls - turn.toolCallCount)))
            let outcomes = try await runTools(admitted, parsedArguments: Array(parsedArguments.prefix(admitted.count)), profile: profile, session: session)
            turn.toolCallCount += outcomes.count
            if let final = outcomes.last(where: { $0.finalAnswer != nil })?.finalAnswer { turn.finalAnswer = final }
            if admitted.count < output.toolCalls.count {
                try control.checkpoint()
                throw RPCError(.maxToolCallsExceeded, "the turn made more than \(turn.limits.maxToolCalls) tool calls", data: ["limit": .int(turn.limits.maxToolCalls)])
            }
            turn.openToolCallsEntryID = nil
            if turn.finalAnswer != nil {
                finishing = true
                return try await finishCompleted(output: output, profile: profile, model: (provider, modelRef), session: session)
            }
            // Text streamed before tool calls belongs to that round trip; the next
            // round trip's text starts a fresh answer.
            currentText = ""
        }
    }

    /// Hands the calls to a tool stage of their own, which `getState`,
    /// `session/confirm` and `session/cancel` reach while it runs.
    @inline(__always) private func runTools(
        _ calls: [ModelToolCall], parsedArguments: [JSONValue?], profile: ResolvedProfile, session: isolated AgentSession
    ) async throws -> [ToolCallOutcome] {
        var context = session.toolStageContext(for: self, profile: profile)
        for call in calls where profile.tool(named: call.name) == nil {
            context.unavailableTools[call.name] = await session.mcpUnavailable(toolName: call.name)
        }
        let stage = ToolStage<AgentSession>(calls: calls, parsedArguments: parsedArguments, context: context)
        toolStage = stage
        defer {
            keepUndoRecords(of: stage)
            toolStage = nil
        }
        return try await stage.run(host: session)
    }

    /// The undo records of a stage's calls join the turn's, in call order,
    /// whatever order the results came in: they are rolled back newest first.
    private func keepUndoRecords(of stage: ToolStage<AgentSession>) {
        turn.undoLog += stage.undoRecords.map { (callId: $0.callId, name: $0.name, undo: $0.undo) }
    }

    /// One round trip: the request built from the transcript and sent. When it
    /// would pass the compaction threshold of the model's window the
    /// conversation is compacted first; when the provider answers that the
    /// context is too long, it is compacted once and the round trip sent again
    /// (docs/protocol.md, "Compaction").
    @inline(__always) private func roundTrip(profile: ResolvedProfile, modelRef: ModelReference, provider: any ModelProvider, session: isolated AgentSession) async throws -> RoundTripOutput {
        var compacted = false
        var overflowRetried = false
        while true {
            // Only what has work to do is awaited: each async call costs the runtime
            // two executor checks (~500 instructions), and most round trips have
            // no history transform, no egress rule and no compaction to make.
            let transformed = profile.history.isEmpty ? nil : try await transformedHistory(profile: profile, session: session)
            var (request, entryIDs, stablePrefix) = try buildRequest(
                profile: profile, modelRef: modelRef, provider: provider, transformed: transformed, session: session)
            if let egress = egressRules(profile: profile, session: session), try await applyEgress(egress, to: &request, profile: profile, session: session) {
                stablePrefix = nil
            }
            if !compacted, let limit = compactionLimit(for: request, provider: provider, session: session),
               try await compactBeforeRoundTrip(request, limit: limit, session: session) {
                compacted = true
                continue
            }
            reportOptionWarnings(provider.optionWarnings(for: request), session: session)
            if let change = session.caches.prefix.observe(
                model: request.model, instructions: request.instructions, tools: request.tools, messages: request.messages, entryIDs: entryIDs,
                stablePrefix: stablePrefix) {
                session.emit(.cacheInvalidated(reason: change.reason, firstChangedEntry: change.firstChangedEntry))
            }
            session.emit(.requestStarted(roundTrip: turn.roundTrips, profile: profile.name, provider: provider.name, model: request.model,
                                         contextWindowTokens: provider.capabilities.contextWindowTokens))
            let (stamp, count) = (session.transcript.appendRunStamp, session.entries.count)
            do {
                let output = try await send(request, provider: provider, purpose: .turn, profile: profile.name, parent: spanParent, shown: true, session: session)
                markContext(output.usage, entryCount: count, appendRunStamp: stamp, session: session)
                return output
            } catch let error as ProviderError where error.code == .contextLengthExceeded && !overflowRetried {
                overflowRetried = true
                compacted = true
                guard try await compactAfterOverflow(request, provider: provider, session: session) else { throw error }
                currentText = ""
            }
        }
    }

    // MARK: Streaming

    /// One request to the model with its retries: a round trip of the turn
    /// (`shown`: its text streams to the client and becomes `currentText`), or a
    /// side request of the engine's own (router, consult, summary), whose text
    /// only its caller sees. Usage is announced and counted the same way for both.
    @inline(__always) private func streamWithRetries(_ request: ModelRequest, provider: any ModelProvider, shown: Bool, session: isolated AgentSession) async throws -> RoundTripOutput {
        var attempt = 0
        while true {
            attempt += 1
            var output = RoundTripOutput()
            do {
                try await stream(request, provider: provider, shown: shown, into: &output, session: session)
                return output
            } catch {
                // A request that reported usage and then failed (or was cancelled)
                // was still paid for: it counts in the turn, retried or not.
                if let u = output.usage { turn.addUsage(u, roundTrip: shown) }
                guard let providerError = error as? ProviderError else { throw error }
                // A side request's reasoning is shown to no one: it does not count as output.
                let hadOutput = shown ? output.hadOutput : !output.text.isEmpty || !output.toolCalls.isEmpty
                try await waitBeforeRetry(providerError, attempt: attempt, hadOutput: hadOutput, session: session)
            }
        }
    }

    /// Sends one of the engine's own requests — the `llm` router's, a consult's, a
    /// summary's — outside the turn's round trips, through the same code as a
    /// round trip (`send`). Like a round trip it is dumped, traced as an `llm.completion`
    /// under `parent`, and its usage is announced with `usage`, becomes
    /// `lastUsageReport` and counts in the turn's usage: the `usage` events of a
    /// turn add up to its `TurnResult.usage`.
    func sideRequest(
        _ request: ModelRequest, provider: any ModelProvider, purpose: RequestDumper.Purpose, profile: String,
        parent: SpanContext?, session: isolated AgentSession
    ) async throws -> RoundTripOutput {
        try checkBudgets(provider: provider, session: session)
        reportOptionWarnings(provider.optionWarnings(for: request), session: session)
        return try await send(request, provider: provider, purpose: purpose, profile: profile, parent: parent, shown: false, session: session)
    }

    /// One request to the model, a round trip of the turn or a side request:
    /// dumped (`--dump-requests`), traced as an `llm.completion` under `parent`,
    /// streamed with its retries, its usage counted in the turn.
    @inline(__always) private func send(
        _ request: ModelRequest, provider: any ModelProvider, purpose: RequestDumper.Purpose, profile: String,
        parent: SpanContext?, shown: Bool, session: isolated AgentSession
    ) async throws -> RoundTripOutput {
        session.context.dumper?.dump(sessionId: session.id, turnId: turnIDForClients, purpose: purpose, roundTrip: turn.roundTrips, profile: profile, provider: provider.name, request: request,
                               body: session.context.dumper == nil ? nil : provider.wireBody(for: request))
        let span = parent.flatMap { session.context.tracer?.startCompletionSpan(provider: provider.name, model: request.model, parent: $0) }
        span?.setPayload(SpanAttributeKey.prompt, request.dumpJSON.serializedString())
        let output: RoundTripOutput
        do {
            output = try await streamWithRetries(request, provider: provider, shown: shown, session: session)
        } catch {
            // What may be shown, never the provider's own text: a trace is kept
            // without `--trace-payloads`, and that text (a provider error's
            // `unsafeMessage`) is for logs a user opts into.
            span?.end(status: .error(TurnRunner.safeDescription(of: error)))
            throw error
        }
        if let usage = output.usage {
            turn.addUsage(usage, roundTrip: shown)
            span?.recordUsage(usage)
        }
        span?.setPayload(SpanAttributeKey.completion, output.text)
        span?.end(status: .ok)
        return output
    }

    /// Transient provider errors before any output are retried (docs/turns.md):
    /// this returns after the backoff when another attempt is due, and rethrows
    /// the error when it is not retryable, output already streamed, attempts are
    /// used up, or the wait would outlast the turn's wall clock.
    private func waitBeforeRetry(_ error: ProviderError, attempt: Int, hadOutput: Bool, session: isolated AgentSession) async throws {
        // A provider failing because the turn was stopped is not a provider error.
        try control.checkpoint()
        guard error.retryGuidance.kind == .retryWithBackoff, !hadOutput, attempt < ProviderRetryPolicy.maxAttempts else { throw error }
        let delay = ProviderRetryPolicy.delay(attempt: attempt, hint: error.retryAfterSeconds)
        let elapsed = turn.startedAt.duration(to: .now)
        let remaining = turn.limits.wallClockSeconds - elapsed.secondsValue
        guard delay < remaining else { throw error }
        session.emit(.retrying(attempt: attempt, afterSeconds: delay, error: providerRPCError(error)))
        control.setWaitingForProvider(true)
        defer { control.setWaitingForProvider(false) }
        do { try await Task.sleep(for: .clampedSeconds(delay)) } catch {
            try control.checkpoint()
            throw error
        }
        try control.checkpoint()
    }

    @inline(__always) private func stream(_ request: ModelRequest, provider: any ModelProvider, shown: Bool, into output: inout RoundTripOutput, session: isolated AgentSession) async throws {
        var ended = false
        // Waiting for the next event is a checkpoint: session/cancel ends even a
        // stalled stream (the iteration then finishes quietly, see below).
        control.setWaitingForProvider(true)
        defer { control.setWaitingForProvider(false) }
        // A shown round trip's text is kept once, in `shownText` (which
        // getState reads while it streams), and is the output's when the
        // stream ends or fails: one append a delta, not two.
        let shownStart = shown ? shownText.count : 0
        defer {
            if shown { output.text = String(decoding: shownText[shownStart...], as: UTF8.self) }
        }
        let events = session.events
        let stream = provider.stream(request)
        // One batch at a time (everything the provider buffered since the last
        // one: a network read's events), its events read where they are (no
        // copy of each) and handled synchronously up to the next await that is
        // due: a held-back delta to pace, or the actor to let go. No async
        // iterator call and no pacing call per event.
        var sinceYield = 0
        while let batch = try await stream.nextBatch() {
            var next = 0
            while next < batch.count {
                next = try batch.withUnsafeBufferPointer { buffer in
                    var i = next
                    while i < buffer.count {
                        try control.checkpoint()
                        switch buffer[i] {
                        case .textDelta(let delta) where !delta.isEmpty:
                            if shown {
                                shownText.append(contentsOf: delta.utf8)
                                events.emitDelta(delta, reasoning: false)
                            } else {
                                output.text += delta
                            }
                        case .reasoningDelta(let delta) where !delta.isEmpty:
                            output.reasoning += delta
                            if shown { events.emitDelta(delta, reasoning: true) }
                        case .textDelta, .reasoningDelta:
                            break
                        case .reasoningSignature(let signature):
                            // Not shown to clients: it only matters for sending the thinking back.
                            output.reasoningSignatures.append(signature)
                        case .refusalDelta(let delta):
                            // A refusal is the model's answer to the user: shown as text.
                            guard !delta.isEmpty else { break }
                            output.refusal += delta
                            if shown {
                                shownText.append(contentsOf: delta.utf8)
                                events.emitDelta(delta, reasoning: false)
                            } else {
                                output.text += delta
                            }
                        case .toolCall(let call):
                            output.toolCalls.append(call)
                        case .usage(let reported):
                            let report = Usage(believableUsage(reported, session: session), pricing: provider.capabilities.pricing)
                            output.usage = report
                            lastUsageReport = report
                            session.emit(.usage(report))
                            try checkBudgets(pending: report, provider: provider, session: session)
                        case .end(let reason):
                            output.stopReason = reason
                            ended = true
                        }
                        i += 1
                        sinceYield += 1
                        if (shown && events.holdsDelta) || sinceYield == ProviderEventStream.eventsPerYield { break }
                    }
                    return i
                }
                if shown, events.holdsDelta { await events.keepPace() }
                // A long burst (a scripted item of 40,000 deltas, a large read)
                // must not hold the session actor to its end: what waits for it
                // (the abort at end of input, session/cancel, getState) gets in.
                if sinceYield == ProviderEventStream.eventsPerYield {
                    sinceYield = 0
                    await Task.yield()
                }
            }
        }
        // A cancelled task ends the stream's iteration quietly; that is not truncation.
        try control.checkpoint()
        try Task.checkCancellation()
        if !ended {
            throw ProviderError(code: .streamTruncated, safeDescription: "the model's stream ended before it was complete")
        }
    }

    // MARK: Ending

    /// `model`: the round trip's provider and model, whose place in a script a
    /// session that parks journals with the response (nil: no model answered now).
    private func finishCompleted(
        output: RoundTripOutput, profile: ResolvedProfile, model: (provider: any ModelProvider, reference: ModelReference)?, session: isolated AgentSession
    ) async throws -> TurnOutcome {
        var structured: JSONValue? = nil
        let endedHow = turn.finalAnswer == nil ? output.endedHow : nil
        switch turn.mode {
        case .chat where endedHow?.cutsAnswer == true:
            // Cut off, perhaps in the middle of the demanded call: the stop reason says why.
            break
        case .chat where turn.finalAnswer == nil:
            var demandsTool: Bool
            switch turn.toolChoice {
            case .required, .tool: demandsTool = turn.roundTrips == 1
            default: demandsTool = false
            }
            if turn.toolCallingMode(profile) == .required && !profile.tools.isEmpty { demandsTool = true }
            if demandsTool {
                throw RPCError(.toolChoiceNotHonored, "the model answered in text although toolChoice demanded a tool call", data: ["toolChoice": turn.toolChoice.json])
            }
        case .chat:
            break
        case .generate(let schema, _):
            structured = try await Self.validateStructured(output.text, schema: schema, endedHow: endedHow)
        }
        let text: String
        var answer: [TranscriptContent] = []
        if let final = turn.finalAnswer {
            // The final tool's arguments are the answer. Text the model streamed
            // beside the call is already in its toolCalls entry: repeating it here
            // would show it to the model twice on the next turn.
            text = final.serializedString()
        } else {
            if let reasoning = output.reasoningEntry(profile: profile.name) { answer.append(reasoning) }
            text = output.text
        }
        answer.append(.response(text: text, profile: profile.name, incomplete: endedHow?.cutsAnswer == true, stopReason: endedHow))
        guard let response = try session.appendRoundTrip(answer, of: self, provider: model?.provider, modelRef: model?.reference).last else {
            throw RPCError.internalError("the response entry was not appended")
        }
        try await runHooks(.onResponse, profile: profile, payload: ["text": .string(text), "entryId": .string(response.id)], session: session)
        let undo: UndoOutcome = turn.undoLog.isEmpty ? .none : .committed
        try session.transcript.keepUndoRecords(turn.undoLog.map { UndoRecord(turnId: turn.id, callId: $0.callId, name: $0.name, undo: $0.undo) })
        let result = TurnResult(
            turnId: turn.id, message: TurnMessage(entryId: response.id, text: text),
            stopReason: turn.finalAnswer == nil ? endedHow ?? .completed : .finalAnswer, finalAnswer: turn.finalAnswer,
            usage: turn.usage, roundTrips: turn.roundTrips, toolCalls: turn.toolCallCount, revision: session.revision)
        // Durable before anyone hears the turn is over (docs/protocol.md, "Durable sessions").
        try session.transcript.endTurn(TurnEnd(turnId: turn.id, status: .completed, stopReason: result.stopReason, usage: turn.usage, undo: undo))
        try session.transcript.sync()
        end()
        // Only a reply that did not end normally says so here, like its response entry.
        session.emit(.turnEnded(status: .completed, undo: undo, error: nil, stopReason: endedHow), turn: turn.id)
        session.startNextQueuedSend()
        return TurnOutcome(turnResult: result, structuredValue: structured)
    }

    nonisolated(nonsending) private static func validateStructured(_ text: String, schema: JSONValue, endedHow: StopReason?) async throws -> JSONValue {
        let value: JSONValue
        do {
            value = try JSONValue.parse(text.trimmingWhitespaceAndNewlines())
        } catch {
            switch endedHow {
            case let reason? where reason.cutsAnswer:
                throw RPCError(.structuredOutput, "the model's answer was cut off (\(reason.rawValue)) before the JSON was complete", data: [
                    "reason": "truncated", "stopReason": .string(reason.rawValue),
                ])
            case .refusal?:
                throw RPCError(.structuredOutput, "the model refused to answer", data: ["reason": "refusal", "stopReason": "refusal"])
            default:
                throw RPCError(.structuredOutput, "the model's answer is not valid JSON: \(error)", data: ["reason": "invalidJSON"])
            }
        }
        let validator: JSONSchemaValidator
        do { validator = try JSONSchemaValidator(schema: schema) } catch {
            throw RPCError.invalidParams("schema is not a usable JSON Schema: \(error)", field: "schema")
        }
        let violations = validator.usesPatterns ? await RegexWorkers.run { validator.validate(value) } : validator.validate(value)
        if let first = violations.first {
            throw RPCError(.structuredOutput, "the model's answer does not match the schema: \(first)", data: [
                "reason": "schemaViolation", "path": .string(first.path),
            ])
        }
        return value
    }

    /// The failure contract: roll back undo records newest first, apply the
    /// transcript policy, then report.
    private func finishFailed(error: RPCError, cancelled: Bool, session: isolated AgentSession) async {
        // The turn's own task is cancelled now; rollback must not be, so it runs
        // in a fresh task that does not inherit the cancellation.
        let undoLog = turn.undoLog
        let turnID = turn.id
        let undoOutcome: UndoOutcome
        if undoLog.isEmpty {
            undoOutcome = .none
        } else {
            await session.rollBack(undoLog.map { UndoRecord(turnId: turnID, callId: $0.callId, name: $0.name, undo: $0.undo) }, turnID: turnID, timeout: min(turn.limits.toolTimeoutSeconds, 30))
            undoOutcome = .rolledBack
        }
        let policy = turn.errorPolicy ?? session.config.transcriptErrorPolicy ?? .keepCompleted
        // The policy's changes are made even when the store refuses them: the
        // in-memory transcript must stay well-formed for the next turn.
        switch policy {
        case .keepCompleted:
            if let trim = trimIncompleteToolCalls(session: session) { session.transcript.mutateEvenIfUnjournaled(trim) }
        case .revert:
            // A turn whose end was already recorded (and whose sync then failed) is no
            // longer open: the entries before it are then the first ones.
            let open = session.transcript.openTurn.flatMap { $0.id == turnID ? $0 : nil }
            let before = open?.entriesBefore(current: session.entries) ?? Array(session.entries.prefix(turn.entryCountBefore))
            if let revert = AgentSession.revertOperations(from: session.entries, to: before) { session.transcript.mutateEvenIfUnjournaled(revert) }
        case .preserve:
            if !currentText.isEmpty {
                let partial = currentText
                let entry = session.transcript.appendEvenIfUnjournaled(.response(text: partial, profile: session.activeProfile?.name ?? session.activeProfileName, incomplete: true), turn: turnID)
                session.emit(.entryAppended(entry), turn: turnID)
            }
        }
        if session.transcript.openTurn?.id == turnID {
            session.transcript.endTurnEvenIfUnjournaled(TurnEnd(turnId: turnID, status: cancelled ? .cancelled : .failed, stopReason: nil, usage: turn.usage, undo: undoOutcome))
        }
        do { try session.transcript.sync() } catch { session.context.logger.warning("session \(session.id): the journal could not be synced after a failed turn: \(error)") }
        end()
        session.emit(.turnEnded(status: cancelled ? .cancelled : .failed, undo: undoOutcome, error: error), turn: turnID)
        session.startNextQueuedSend()
    }

    /// Under `keepCompleted`, only completed tool exchanges stay: calls of the
    /// interrupted round trip that never got an output are dropped.
    private func trimIncompleteToolCalls(session: isolated AgentSession) -> [TranscriptOperation]? {
        guard let entryID = turn.openToolCallsEntryID, let index = session.entries.firstIndex(where: { $0.id == entryID }) else { return nil }
        return AgentSession.unansweredCallsTrim(session.entries, toolCallsAt: index)
    }

    /// Maps whatever ended the turn to its protocol error, with `turnId` and `partialText`.
    private func turnError(from error: any Error) -> RPCError {
        var rpc: RPCError
        switch error {
        case let e as RPCError:
            rpc = e
        case let e as ProviderError:
            rpc = providerRPCError(e)
        case let e as ProviderContractViolation:
            rpc = RPCError(.providerContractViolation, "the model's provider broke its protocol: \(e.message)")
        case TurnStop.cooperativeCancel:
            rpc = .cancelled("the turn was cancelled", data: ["source": "session/cancel"])
        case TurnStop.deniedAndStopped(let callId):
            rpc = .cancelled("the user denied a tool call and stopped the turn", data: ["source": "confirmation", "callId": .string(callId)])
        default:
            switch control.reason {
            case .wallClock(let limit):
                rpc = RPCError(.wallClockTimeoutExceeded, "the turn ran longer than \(limit) seconds", data: ["limit": .double(limit)])
            case .closed:
                rpc = .cancelled("the session was closed", data: ["source": "close"])
            case .shutdown:
                rpc = .cancelled("the server is shutting down", data: ["source": "shutdown"])
            case .parked:
                rpc = .cancelled("the turn was parked: go on with session/continue", data: ["source": "session/park"])
            case .none where control.cooperativeCancelRequested:
                rpc = .cancelled("the turn was cancelled", data: ["source": "session/cancel"])
            case .requestCancelled, .none:
                rpc = .cancelled("the turn was cancelled", data: ["source": "$/cancelRequest"])
            }
        }
        // A cancellation that raced a wall-clock abort reports the limit.
        if rpc.code == .cancelled, case .wallClock(let limit) = control.reason, !(error is TurnStop) {
            rpc = RPCError(.wallClockTimeoutExceeded, "the turn ran longer than \(limit) seconds", data: ["limit": .double(limit)])
        }
        rpc.data["turnId"] = .string(turn.id)
        rpc.data["partialText"] = .string(currentText)
        return rpc
    }

    func providerRPCError(_ e: ProviderError) -> RPCError {
        var data: [String: JSONValue] = ["provider": e.json, "partialText": .string(currentText)]
        if let id = turnIDForClients { data["turnId"] = .string(id) }
        return RPCError(.providerError, e.safeDescription, data: data)
    }
}

/// Automatic retries of transient provider errors before any output (docs/turns.md).
/// As the official SDKs do (docs/protocol.md, "Provider errors and retries"):
/// the provider's `Retry-After` when it is between 0 and 120 s, else
/// exponential backoff from 0.5 s capped at 8 s, with jitter. The caller never
/// waits past the turn's wall clock.
enum ProviderRetryPolicy {
    static let maxAttempts = 4
    static let baseDelay = 0.5
    static let maxBackoff = 8.0
    static let maxHint = 120.0

    static func delay(attempt: Int, hint: Double?) -> Double {
        if let hint, hint.isFinite, hint >= 0, hint <= maxHint { return hint }
        let exponential = min(maxBackoff, baseDelay * pow(2, Double(min(max(attempt, 1), 16) - 1)))
        return exponential * Double.random(in: 0.8...1.2)
    }
}
