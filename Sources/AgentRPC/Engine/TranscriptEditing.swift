import AgentRPCProtocol

extension AgentSession {
    /// `session/mutateTranscript`: all operations apply to a copy; the copy
    /// replaces the transcript only if every operation succeeded and the result
    /// is a well-formed history. Entries keep their ids; the revision rises once.
    func mutateTranscript(expectedRevision: Int?, operations: [TranscriptOperation]) throws -> MutateTranscriptResult {
        if isRunning {
            throw RPCError(.sessionBusy, "the transcript cannot change while a turn is running", data: ["turnId": turnId.map { .string($0) } ?? .null])
        }
        if compaction != nil { throw RPCError(.sessionBusy, "the transcript cannot change while the session is being compacted") }
        if let expectedRevision, expectedRevision != revision {
            throw RPCError(.revisionMismatch, "the transcript is at revision \(revision), not \(expectedRevision)", data: [
                "expectedRevision": .int(expectedRevision), "revision": .int(revision),
            ])
        }
        let working = try transcript.preview(operations)
        try transcript.mutate(operations, result: working)
        try transcript.sync()
        return MutateTranscriptResult(revision: revision, entryCount: entries.count)
    }

    // MARK: Rewind

    /// `session/rewind`, the ordered part: cuts the transcript and takes the undo
    /// records of the removed tool calls (newest first). The undos themselves are
    /// sent by `sendRewindUndos`, outside the request order, since they wait on the client.
    func rewindTranscript(_ params: SessionRewindParams) throws -> (result: SessionRewindResult, undos: [UndoRecord]) {
        if isRunning {
            throw RPCError(.sessionBusy, "the transcript cannot be rewound while a turn is running", data: ["turnId": turnId.map { .string($0) } ?? .null])
        }
        if rewindingUndos {
            throw RPCError(.sessionBusy, "an earlier rewind is still undoing tool calls")
        }
        if compaction != nil { throw RPCError(.sessionBusy, "the transcript cannot be rewound while the session is being compacted") }
        let given = [("toEntryId", params.toEntryId), ("turnId", params.turnId), ("compaction", params.compaction)].filter { $0.1 != nil }.map(\.0)
        guard given.count == 1 else {
            // None: the first there could be; several: the first one too many.
            throw RPCError.invalidParams("give exactly one of toEntryId, turnId and compaction", field: given.count == 0 ? "toEntryId" : given[1])
        }
        if let summary = params.compaction {
            let restored = try undoCompactions(holding: nil, summary: summary)
            try transcript.sync()
            return (SessionRewindResult(revision: revision, entryCount: entries.count, removedEntries: [summary], undos: [], restoredEntries: restored), [])
        }
        // A point a compaction summarized is put back first, then cut as any other.
        let isPoint: (TranscriptEntry) -> Bool = { entry in params.toEntryId.map { entry.id == $0 } ?? (entry.turnId == params.turnId) }
        var restored: [String] = []
        if !entries.contains(where: isPoint) { restored = try undoCompactions(holding: isPoint, summary: nil) }
        let cut: Int
        switch (params.toEntryId, params.turnId) {
        case (let entryId?, _):
            guard let index = entries.firstIndex(where: { $0.id == entryId }) else {
                throw RPCError(.invalidParams, "the transcript has no entry with this id", data: ["field": "toEntryId", "entryId": .string(entryId)])
            }
            cut = index + 1
        case (nil, let turn?):
            guard let index = entries.firstIndex(where: { $0.turnId == turn }) else {
                throw RPCError(.invalidParams, "the transcript has no entry of this turn", data: ["field": "turnId", "turnId": .string(turn)])
            }
            cut = index
        default:
            throw RPCError.invalidParams("give exactly one of toEntryId, turnId and compaction", field: "toEntryId")
        }
        let removed = Array(entries[cut...])
        // A call is identified by its turn and call id: models reuse call ids across turns.
        let removedCalls = Set(removed.compactMap { entry -> UndoKey? in
            guard case .toolOutput(let callId, _, _, _, _, _, _) = entry.content, let turn = entry.turnId else { return nil }
            return UndoKey(turnId: turn, callId: callId)
        })
        if !removed.isEmpty { try transcript.mutate([.truncateAfter(id: cut == 0 ? nil : entries[cut - 1].id)]) }
        let taken = try transcript.takeUndoRecords { removedCalls.contains(UndoKey(turnId: $0.turnId, callId: $0.callId)) }
        let undos = params.undo ? Array(taken.reversed()) : []
        if !undos.isEmpty { rewindingUndos = true }
        let kept = Set(entries.map(\.id))
        let stillRestored = restored.filter { kept.contains($0) }
        let result = SessionRewindResult(
            revision: revision, entryCount: entries.count, removedEntries: removed.map(\.id), undos: [],
            restoredEntries: stillRestored.isEmpty ? nil : stillRestored)
        return (result, undos)
    }

    /// Undoes the compaction of `summary`, or those (newest first) under which
    /// the transcript holds an entry `holding` finds, until it is back. Returns
    /// the ids put back. Each undo is one journaled revision; a compaction whose
    /// entries would clash with the transcript's (an id taken since) is refused
    /// before anything changes.
    private func undoCompactions(holding: ((TranscriptEntry) -> Bool)?, summary: String?) throws -> [String] {
        var restored: [String] = []
        var next = summary
        if let holding { next = transcript.summaryHolding(holding) }
        guard let first = next, transcript.entriesUndoingCompaction(first) != nil else {
            if let summary {
                throw RPCError(.invalidParams, "the transcript has no summary entry with this id whose compaction can be undone", data: [
                    "field": "compaction", "entryId": .string(summary),
                ])
            }
            return []
        }
        while let summaryID = next {
            guard let working = transcript.entriesUndoingCompaction(summaryID) else { break }
            try TranscriptShape.check(working)
            let before = Set(entries.map(\.id))
            try transcript.undoCompaction(summaryID)
            restored.append(contentsOf: entries.map(\.id).filter { !before.contains($0) })
            guard let holding, !entries.contains(where: holding) else { break }
            next = transcript.summaryHolding(holding)
        }
        return restored
    }

    /// Sends `tool/undo` for each record in order; a failure does not stop the rest.
    func sendRewindUndos(_ records: [UndoRecord]) async -> [RewindUndo] {
        defer { rewindingUndos = false }
        var done: [RewindUndo] = []
        let channel = context.channel
        for record in records {
            let params = ToolUndoParams(sessionId: id, turnId: record.turnId, callId: record.callId, name: record.name, undo: record.undo)
            let timeout = HumanInTheLoopLimits.rewindUndoTimeoutSeconds
            var status = RewindUndoStatus.undone
            var failure: String?
            do {
                _ = try await channel.request(ToolUndoRequest.name, try JSONValue(encoding: params), timeout: timeout)
            } catch OutgoingRequestError.rpc(let e) {
                status = .failed
                failure = e.message
            } catch OutgoingRequestError.timedOut(let seconds) {
                status = .failed
                failure = "no answer within \(seconds) seconds"
            } catch {
                status = .failed
                failure = "the undo could not be sent: \(error)"
            }
            done.append(RewindUndo(turnId: record.turnId, callId: record.callId, name: record.name, status: status, error: failure))
        }
        return done
    }
}

/// A tool call across the session's turns.
private struct UndoKey: Hashable {
    let turnId: String
    let callId: String
}

/// What makes a history well-formed: unique entry ids, unique call ids within
/// one `toolCalls` entry, and every `toolOutput` answering a call of an earlier
/// `toolCalls` entry that is still unanswered. Call ids are matched to the
/// nearest open call, not required unique across the whole history: models
/// (local ones especially) reuse ids such as `call_0` from turn to turn.
enum TranscriptShape {
    static func check(_ entries: [TranscriptEntry]) throws {
        var seen = Set<String>()
        var open = Set<String>()
        for (i, e) in entries.enumerated() {
            func fail(_ message: String) -> RPCError {
                RPCError(.invalidTranscript, "entry \(i) ('\(e.id)'): \(message)", data: ["index": .int(i), "entryId": .string(e.id)])
            }
            if e.id.isEmpty { throw fail("an entry needs a non-empty id") }
            if !seen.insert(e.id).inserted { throw fail("duplicate id") }
            switch e.content {
            case .toolCalls(let list, _, _):
                var here = Set<String>()
                for c in list where !here.insert(c.callId).inserted { throw fail("duplicate callId '\(c.callId)'") }
                open.formUnion(here)
            case .toolOutput(let callId, _, _, _, _, _, _):
                if open.remove(callId) == nil {
                    throw fail("a toolOutput for '\(callId)' without an unanswered call in a toolCalls entry before it")
                }
            default:
                break
            }
        }
    }
}
