import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension AgentSession {
    /// Sends `tool/undo` for `records` (oldest first), newest first. Failures are
    /// not retried: the client was told, and an undo is its own to make good.
    /// Runs in a fresh task so a cancelled caller does not cut the rollback short.
    func rollBack(_ records: [UndoRecord], turnID: String, timeout: Double) async {
        let channel = context.channel
        let sessionID = id
        await Task {
            for record in records.reversed() {
                let params = ToolUndoParams(sessionId: sessionID, turnId: turnID, callId: record.callId, name: record.name, undo: record.undo)
                _ = try? await channel.request(ToolUndoRequest.name, (try? JSONValue(encoding: params)) ?? .null, timeout: timeout)
            }
        }.value
    }

    /// A loaded journal whose last turn never ended was cut by a crash. The
    /// session's transcript error policy is applied as to a failed turn, and a
    /// turn end with status `interrupted` is recorded and synced, before the
    /// session is handed out. Returns nil when there was no such turn. Where
    /// each call of its latest round trip stood is read before the policy trims it.
    /// With `rollback`, the caller then sends `tool/undo` (`rollBackInterrupted`).
    func recoverInterruptedTurn(rollback: Bool) throws -> InterruptedTurn? {
        guard let open = transcript.openTurn else { return nil }
        let calls = open.callStates(in: entries).map { RoundTripCall(callId: $0.call.callId, name: $0.call.name, state: $0.state) }
        try applyErrorPolicy(toOpen: open)
        let outcome: UndoOutcome = open.undo.isEmpty ? .none : (rollback ? .rolledBack : .committed)
        try transcript.endTurn(TurnEnd(turnId: open.id, status: .interrupted, stopReason: nil, usage: Usage(), undo: outcome))
        try transcript.sync()
        return InterruptedTurn(
            turnId: open.id, undo: open.undo.reversed().map { UndoRecordInfo(callId: $0.callId, name: $0.name, undo: $0.undo) },
            undoOutcome: outcome, calls: calls.isEmpty ? nil : calls)
    }

    /// The session's transcript error policy, applied to an open turn no task
    /// runs (cut by a crash, or a parked turn cancelled) as to a failed turn.
    func applyErrorPolicy(toOpen open: OpenTurn) throws {
        let profile = (try? resolveProfile()) ?? activeProfile
        let policy = profile?.transcriptErrorPolicy ?? config.transcriptErrorPolicy ?? .keepCompleted
        switch policy {
        case .keepCompleted:
            if let trim = Self.unansweredCallsTrim(entries, turnID: open.id) { try transcript.mutate(trim) }
        case .revert:
            if let revert = Self.revertOperations(from: entries, to: open.entriesBefore(current: entries)) { try transcript.mutate(revert) }
        case .preserve:
            // Streamed text is never journaled: what the process was writing
            // was never announced as final, so there is nothing to keep.
            break
        }
    }

    /// `session/resume {rollback: true}`: undoes what the interrupted turn did.
    func rollBackInterrupted(_ turn: InterruptedTurn) async {
        guard turn.undoOutcome == .rolledBack else { return }
        let oldestFirst = turn.undo.reversed().map { UndoRecord(turnId: turn.turnId, callId: $0.callId, name: $0.name, undo: $0.undo) }
        let timeout = min(config.limits?.toolTimeoutSeconds ?? Limits.defaultToolTimeoutSeconds, 30)
        await rollBack(oldestFirst, turnID: turn.turnId, timeout: timeout)
    }

    /// Under `keepCompleted`: the turn's last `toolCalls` entry loses the calls
    /// that never got an output (the entry goes when none did).
    static func unansweredCallsTrim(_ entries: [TranscriptEntry], turnID: String) -> [TranscriptOperation]? {
        guard let index = entries.lastIndex(where: { e in
            if case .toolCalls = e.content { return e.turnId == turnID }
            return false
        }) else { return nil }
        return unansweredCallsTrim(entries, toolCallsAt: index)
    }

    /// The operation that drops the calls of the `toolCalls` entry at `index`
    /// that no later `toolOutput` answers; nil when every call was answered.
    /// A failed turn and a turn recovered after a crash both trim this way.
    static func unansweredCallsTrim(_ entries: [TranscriptEntry], toolCallsAt index: Int) -> [TranscriptOperation]? {
        guard case .toolCalls(let calls, let profile, let text) = entries[index].content else { return nil }
        let answered = Set(entries[index...].compactMap { e -> String? in
            if case .toolOutput(let callId, _, _, _, _, _, _) = e.content { return callId }
            return nil
        })
        let kept = calls.filter { answered.contains($0.callId) }
        if kept.count == calls.count { return nil }
        let entryID = entries[index].id
        if kept.isEmpty { return [.remove(ids: [entryID])] }
        return [.replace(id: entryID, entry: TranscriptEntry(id: entryID, turnId: entries[index].turnId, .toolCalls(calls: kept, profile: profile, text: text)))]
    }
}
