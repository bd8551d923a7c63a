import AgentRPCProtocol

/// A `session/compact` in progress: what close cancels, and what keeps turns
/// and transcript edits out meanwhile.
struct CompactionInProgress {
    /// Runs the summary request; used on the session's actor only.
    let runner: TurnRunner
    var work: Task<SessionCompactResult, any Error>?
}

extension AgentSession {
    /// `session/compact`, the ordered part: refused while a turn, a rewind's
    /// undos or another compaction runs; from here until it ends, sends and
    /// transcript edits are refused (`sessionBusy`). The summary request runs
    /// in `runCompaction`, outside the request order.
    func beginCompaction(_ params: SessionCompactParams) throws {
        if let keep = params.keepLast, !BudgetBounds.keepLast.contains(Double(keep)) {
            throw RPCError.invalidParams("keepLast \(BudgetBounds.keepLast.requirement)", field: "keepLast")
        }
        if isRunning {
            throw RPCError(.sessionBusy, "the session cannot be compacted while a turn is running", data: ["turnId": turnId.map { .string($0) } ?? .null])
        }
        if rewindingUndos { throw RPCError(.sessionBusy, "a rewind is still undoing tool calls") }
        if compaction != nil { throw RPCError(.sessionBusy, "the session is being compacted") }
        let state = TurnState(
            id: "compaction", mode: .chat, limits: EffectiveLimits(config: config.limits, overrides: nil), toolChoice: .auto,
            options: TurnOptions(), startedAt: .now, entryCountBefore: entries.count)
        compaction = CompactionInProgress(runner: TurnRunner(maintenanceOn: state, events: events))
    }

    /// Runs the compaction `beginCompaction` admitted, bounded by the session's
    /// `wallClockSeconds`; withdrawing the request or closing the session stops it.
    func runCompaction(_ params: SessionCompactParams) async throws -> SessionCompactResult {
        guard let runner = compaction?.runner else { throw RPCError.internalError("no compaction was admitted") }
        let work = Task { try await self.compactNow(runner, params) }
        compaction?.work = work
        let limit = runner.turn.limits.wallClockSeconds
        let control = runner.control
        let watchdog = Task {
            try? await Task.sleep(for: .clampedSeconds(limit))
            if !Task.isCancelled {
                control.abort(.wallClock(limit: limit))
                work.cancel()
            }
        }
        defer { watchdog.cancel() }
        return try await withTaskCancellationHandler {
            try await work.value
        } onCancel: {
            control.abort(.requestCancelled)
            work.cancel()
        }
    }

    /// Stops a running `session/compact` (close, shutdown).
    func abortCompaction(_ reason: AbortReason) {
        guard let compaction else { return }
        compaction.runner.control.abort(reason)
        compaction.work?.cancel()
    }

    private func compactNow(_ runner: TurnRunner, _ params: SessionCompactParams) async throws -> SessionCompactResult {
        defer { compaction = nil }
        let span = context.tracer?.startCompactionSpan(sessionID: id)
        runner.turn.turnSpan = span
        let profile = (try? resolveProfile()) ?? activeProfile
        let preview = params.preview == true
        do {
            let outcome = try await runner.compact(
                trigger: .manual, keepLast: params.keepLast, instructions: params.instructions, preview: preview,
                request: (instructionsText(profile: profile), profile?.modelToolDefinitions ?? []), session: self)
            guard let outcome, let summary = outcome.summary else {
                throw RPCError.invalidParams(
                    "nothing to compact: the transcript's \(entries.count) entries are all kept (keepLast, the tool exchanges they hold)", field: "keepLast")
            }
            // The summary request was paid for, previewed or not; the meter shows the compacted context.
            try transcript.recordUsage(runner.turn.usage)
            try transcript.sync()
            span?.recordUsage(runner.turn.usage)
            span?.end(status: .ok)
            return SessionCompactResult(
                summary: summary, entriesRemoved: outcome.entriesRemoved, tokensBefore: outcome.tokensBefore, tokensAfter: outcome.tokensAfter,
                revision: revision, entryId: outcome.entry?.id, preview: preview ? true : nil)
        } catch {
            var spent = runner.turn.usage
            spent.contextTokens = nil
            do { try transcript.recordUsage(spent) } catch { context.logger.warning("session \(id): the usage of a failed compaction could not be stored: \(error)") }
            let rpc = compactionError(error, runner: runner)
            span?.end(status: .error(rpc.kind.rawValue))
            throw rpc
        }
    }

    /// What a failed compaction answers: the error a turn would end with.
    private func compactionError(_ error: any Error, runner: TurnRunner) -> RPCError {
        switch (error, runner.control.reason) {
        case (_, .wallClock(let limit)?):
            return RPCError(.wallClockTimeoutExceeded, "the compaction ran longer than \(limit) seconds", data: ["limit": .double(limit)])
        case (_, .closed?):
            return .cancelled("the session was closed", data: ["source": "close"])
        case (_, .shutdown?):
            return .cancelled("the server is shutting down", data: ["source": "shutdown"])
        case (let e as RPCError, _):
            return e
        case (let e as ProviderError, _):
            return runner.providerRPCError(e)
        case (let e as ProviderContractViolation, _):
            return RPCError(.providerContractViolation, "the model's provider broke its protocol: \(e.message)")
        default:
            return .cancelled("the compaction was cancelled", data: ["source": "$/cancelRequest"])
        }
    }
}
