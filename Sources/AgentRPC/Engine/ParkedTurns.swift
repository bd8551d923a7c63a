import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Turns that wait for the client across processes (docs/protocol.md,
/// "Durable sessions"): in a session created with `onDisconnect: "park"`, a
/// turn the process left open (a crash, a `kill -9`) is not recovered when the
/// session is loaded but parked, and `session/continue` goes on with it.
extension AgentSession {
    /// Whether this session parks its turns instead of cancelling them.
    var parks: Bool { config.onDisconnect == .park }

    /// The open turn no task runs: a parked turn.
    var parkedTurn: OpenTurn? {
        guard !isRunning, let open = transcript.openTurn else { return nil }
        return open
    }

    /// Whether a loaded session's open turn is parked rather than recovered:
    /// the session parks, the turn is a chat turn (`TurnMode.parks`) and its
    /// prompt was journaled (a turn stopped before that has nothing to go on with).
    var keepsParkedTurn: Bool {
        guard parks, let open = transcript.openTurn, open.mode == nil else { return false }
        return entries.contains { $0.turnId == open.id }
    }

    /// What `getState` shows of the parked turn.
    var parkedState: ParkedTurn? {
        guard let open = parkedTurn else { return nil }
        let pending = open.callStates(in: entries).filter { $0.state != .completed }
        return ParkedTurn(turnId: open.id, pendingRequests: pending.map { RoundTripCall(callId: $0.call.callId, name: $0.call.name, state: $0.state) })
    }

    /// Appends a round trip's answer (its reasoning, then its tool calls) and
    /// announces each entry. In a session that parks, `roundTripAnswered` goes
    /// in the same journal write, with the scripted models' places.
    func appendRoundTrip(_ contents: [TranscriptContent], of runner: TurnRunner, provider: (any ModelProvider)?, modelRef: ModelReference?) throws -> [TranscriptEntry] {
        let turnId = runner.id
        guard parks else { return try contents.map { try append($0, turn: turnId) } }
        var positions: [String: Int] = [:]
        if let scripted = provider as? ScriptedProvider, let modelRef { positions[ModelPositions.key(modelRef)] = scripted.consumed }
        let made = try transcript.appendAnswer(
            contents, turn: turnId, answered: .roundTripAnswered(turnId: turnId, roundTrip: runner.turn.roundTrips, usage: runner.turn.usage, positions: positions))
        for entry in made { announceAppended(entry, turn: turnId) }
        return made
    }

    /// `session/continue`: a runner for the parked turn, on its journaled
    /// round trips and usage; the turn goes on in its own task.
    func continueParked() throws -> TurnControl {
        guard let open = parkedTurn else {
            throw RPCError(.invalidRequest, isRunning ? "the session's turn is running, not parked" : "the session has no parked turn")
        }
        if endingParkedTurn == open.id {
            throw RPCError(.invalidRequest, "the parked turn is being ended as cancelled (session/cancel or limits.parkedTTLSeconds)")
        }
        disarmParkedTTL()
        let turnCalls = entries.reduce(0) { n, e in
            if e.turnId == open.id, case .toolCalls(let calls, _, _) = e.content { return n + calls.count }
            return n
        }
        // The options it was sent with (journaled with its start) still hold.
        let options = open.options ?? TurnOptions()
        let toolChoice = options.toolChoice ?? (try? resolveProfile())?.options.toolChoice ?? config.toolChoice ?? .auto
        var state = TurnState(
            id: open.id, mode: .chat, limits: EffectiveLimits(config: config.limits, overrides: options.limits), toolChoice: toolChoice, options: options,
            startedAt: ContinuousClock.now, entryCountBefore: open.countBefore)
        state.roundTrips = open.answeredRoundTrips
        state.usage = open.usage
        state.toolCallCount = turnCalls
        state.undoLog = open.undo.map { ($0.callId, $0.name, $0.undo) }
        let runner = TurnRunner(turn: state, events: events, schemaWarnings: [], previous: self.runner)
        self.runner = runner
        let control = runner.control
        let task = Task { [self] () async throws -> TurnOutcome in
            try await runner.continueTurn(session: self)
        }
        control.attach(task)
        return control
    }

    /// `session/park`: the running turn parks at its next wait for the client.
    /// Nil when no turn is running.
    func requestPark() throws -> TurnControl? {
        guard parks else {
            throw RPCError(.invalidRequest, "the session does not park its turns: it was created with onDisconnect \"cancel\"")
        }
        guard let runner, runner.isRunning, !runner.isMaintenance else { return nil }
        guard runner.turn.mode.parks else {
            throw RPCError(
                .invalidRequest, "the running turn is a session/generate turn, which does not park: it ends as a cancel would when its client goes away",
                data: ["turnId": .string(runner.id)])
        }
        runner.control.requestPark()
        return runner.control
    }

    /// Whether the parked turn has waited longer than `limits.parkedTTLSeconds`
    /// since its last journaled change (`WallClock`).
    var parkedTurnExpired: Bool {
        guard parkedTurn != nil, let ttl = config.limits?.parkedTTLSeconds else { return false }
        return WallClock.now().timeIntervalSince(transcript.updatedAt) >= ttl
    }

    /// Ends the parked turn as cancelled when it waited too long
    /// (`session/resume`, `session/continue`, `session/send` check, and the
    /// timer `armParkedTTL` starts); true when it did.
    func expireParkedTurnIfDue() async throws -> Bool {
        guard parkedTurnExpired else { return false }
        return try await cancelParked(source: "parkedTTLSeconds", message: "the parked turn waited longer than limits.parkedTTLSeconds")
    }

    /// While this process holds a parked turn (`session/park` parked it, or
    /// `session/resume` loaded it) nothing else would look at its TTL: a
    /// sleeping task (no thread) ends it when its last journaled change is
    /// `limits.parkedTTLSeconds` old by the engine's clock (`WallClock`, so
    /// the test clock counts). Continuing, cancelling or closing disarms it.
    func armParkedTTL() {
        disarmParkedTTL()
        guard let open = parkedTurn, let ttl = config.limits?.parkedTTLSeconds else { return }
        let left = ttl - WallClock.now().timeIntervalSince(transcript.updatedAt)
        parkedExpiry = Task { [weak self] in
            try? await Task.sleep(for: .clampedSeconds(max(0, left)))
            await self?.parkedTTLElapsed(turnID: open.id)
        }
    }

    func disarmParkedTTL() {
        parkedExpiry?.cancel()
        parkedExpiry = nil
    }

    /// The timer's end, on the actor: a turn continued, cancelled or closed
    /// meanwhile disarmed it (checked here, where the disarming also runs).
    private func parkedTTLElapsed(turnID: String) async {
        guard !Task.isCancelled, parkedTurn?.id == turnID else { return }
        // From here on this task is the turn's end: nothing may cancel it midway.
        parkedExpiry = nil
        // A change journaled since it was armed (session/setProperties) moved the deadline.
        guard parkedTurnExpired else { return armParkedTTL() }
        do {
            _ = try await expireParkedTurnIfDue()
        } catch {
            context.logger.warning("session \(id): its parked turn could not be ended after limits.parkedTTLSeconds: \(error)")
        }
    }

    /// `session/cancel` of a parked turn (or its TTL): it ends as a cancelled
    /// turn does, its undo records rolled back and the error policy applied.
    /// False when there is none, or another cancel is ending it already.
    func cancelParked(source: String = "session/cancel", message: String = "the parked turn was cancelled") async throws -> Bool {
        guard let open = parkedTurn, endingParkedTurn != open.id else { return false }
        disarmParkedTTL()
        endingParkedTurn = open.id
        defer { endingParkedTurn = nil }
        let timeout = min(config.limits?.toolTimeoutSeconds ?? Limits.defaultToolTimeoutSeconds, 30)
        if !open.undo.isEmpty { await rollBack(open.undo, turnID: open.id, timeout: timeout) }
        try applyErrorPolicy(toOpen: open)
        let undo: UndoOutcome = open.undo.isEmpty ? .none : .rolledBack
        try transcript.endTurn(TurnEnd(turnId: open.id, status: .cancelled, stopReason: nil, usage: open.usage, undo: undo))
        try transcript.sync()
        emit(.turnEnded(status: .cancelled, undo: undo, error: .cancelled(message, data: ["source": .string(source)])), turn: open.id)
        return true
    }

    /// A scripted model made for a session that parks starts where its
    /// journal says the session's turns left it.
    func restorePosition(of provider: any ModelProvider, for reference: ModelReference) {
        guard parks, let scripted = provider as? ScriptedProvider, let position = transcript.modelPositions[ModelPositions.key(reference)] else { return }
        scripted.seek(to: position)
    }
}

/// How a model is named in the journal's `positions`.
enum ModelPositions {
    /// A named model by its name; an inline one by a hash of its whole
    /// configuration (its script included), which stays the same from process
    /// to process (keys are serialized sorted).
    static func key(_ reference: ModelReference) -> String {
        switch reference {
        case .named(let name):
            return name
        case .inline:
            let text = (try? JSONValue(encoding: reference))?.serializedString() ?? ""
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in text.utf8 {
                hash ^= UInt64(byte)
                hash = hash &* 0x0000_0100_0000_01b3
            }
            return "inline-" + String(hash, radix: 16)
        }
    }
}
