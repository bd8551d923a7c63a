import AgentRPCProtocol

extension AgentSession {
    /// `session/mutateTranscript`: all operations apply to a copy; the copy
    /// replaces the transcript only if every operation succeeded and the result
    /// is a well-formed history. Entries keep their ids; the revision rises once.
    func mutateTranscript(expectedRevision: Int?, operations: [TranscriptOperation]) throws -> MutateTranscriptResult {
        if isRunning {
            throw RPCError(.sessionBusy, "the transcript cannot change while a turn is running", data: ["turnId": turnId.map { .string($0) } ?? .null])
        }
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
            case .toolOutput(let callId, _, _, _, _, _):
                if open.remove(callId) == nil {
                    throw fail("a toolOutput for '\(callId)' without an unanswered call in a toolCalls entry before it")
                }
            default:
                break
            }
        }
    }
}
