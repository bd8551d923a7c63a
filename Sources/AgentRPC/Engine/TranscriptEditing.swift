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
        let working = try TranscriptOperations.apply(operations, to: entries)
        try TranscriptShape.check(working)
        if working != entries { replaceAllEntries(working) }
        return MutateTranscriptResult(revision: revision, entryCount: entries.count)
    }
}

/// What makes a history well-formed: unique ids, and every `toolOutput` after
/// a `toolCalls` entry that made that call (each answered at most once).
enum TranscriptShape {
    static func check(_ entries: [TranscriptEntry]) throws {
        var seen = Set<String>()
        var calls = Set<String>()
        var answered = Set<String>()
        for (i, e) in entries.enumerated() {
            func fail(_ message: String) -> RPCError {
                RPCError(.invalidTranscript, "entry \(i) ('\(e.id)'): \(message)", data: ["index": .int(i), "entryId": .string(e.id)])
            }
            if e.id.isEmpty { throw fail("an entry needs a non-empty id") }
            if !seen.insert(e.id).inserted { throw fail("duplicate id") }
            switch e.content {
            case .toolCalls(let list, _, _):
                for c in list where !calls.insert(c.callId).inserted { throw fail("duplicate callId '\(c.callId)'") }
            case .toolOutput(let callId, _, _, _, _):
                if !calls.contains(callId) { throw fail("a toolOutput for '\(callId)' without its toolCalls entry before it") }
                if !answered.insert(callId).inserted { throw fail("a second toolOutput for '\(callId)'") }
            default:
                break
            }
        }
    }
}
