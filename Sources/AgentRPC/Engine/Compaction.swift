import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where a compaction cuts the transcript: the entries before the cut are
/// summarized, the rest is kept verbatim (docs/protocol.md, "Compaction").
enum CompactionCut {
    /// The index of the first kept entry when the last `keepLast` entries are
    /// kept and nothing from `protectFrom` on (the running turn) is summarized.
    /// The cut moves back so that no tool call is parted from its outputs and no
    /// reasoning from the reply it goes back to the model with; `toPrompt` moves
    /// it further back, to a prompt (the `summarizeHistory` hook keeps whole
    /// exchanges). Nil when there is nothing worth summarizing.
    static func index(in entries: [TranscriptEntry], keepLast: Int, protectFrom: Int?, toPrompt: Bool) -> Int? {
        var cut = max(0, entries.count - max(0, keepLast))
        if let protectFrom { cut = min(cut, protectFrom) }
        if toPrompt {
            cut = min(cut, entries.count - 1)
            while cut > 0, entries[cut].type != .prompt { cut -= 1 }
        } else {
            while cut > 0, cut < entries.count, entries[cut].type == .toolOutput { cut -= 1 }
            while cut > 0, entries[cut - 1].type == .reasoning { cut -= 1 }
        }
        // A summary alone would only be summarized again.
        guard cut > 0, !(cut == 1 && entries[0].type == .summary) else { return nil }
        return cut
    }
}

/// What the context held at the last round trip, and where the transcript
/// stood when that request was built: the next request's size is that reading
/// plus what was appended since (`TurnRunner.estimatedContext`).
struct ContextMark: Sendable {
    var appendRunStamp: Int
    var entryCount: Int
    /// The request's input tokens, the cache's reads and writes included.
    var inputTokens: Int
}

/// What one compaction did.
struct CompactionOutcome: Sendable {
    var summary: String?
    var entriesRemoved: Int
    var tokensBefore: Int
    var tokensAfter: Int
    /// The summary entry (absent in a preview, or when only outputs were elided).
    var entry: TranscriptEntry?
    var outputsElided = 0
    var changedTranscript: Bool { entry != nil || outputsElided > 0 }
}

extension TurnRunner {
    /// The instructions of every summary request: compaction's and the
    /// `summarizeHistory` hook's.
    static let summaryInstructions =
        "Summarize the conversation below for your own later reference: keep facts, decisions, open questions and tool results that matter; be concise."

    /// The note an elided tool output leaves for the model.
    static func elisionNote(characters: Int) -> String {
        "[This tool output (\(characters) characters) \(elisionNoteEnding)"
    }
    private static let elisionNoteEnding = "was elided to fit the context window.]"

    // MARK: Estimates

    /// The tokens the next request will hold: the last round trip's input plus
    /// what was appended since, when nothing was rewritten meanwhile; else an
    /// estimate of the whole (characters / 4 of the entries, instructions and tools).
    func estimatedContext(instructions: String, tools: [ModelToolDefinition], session: isolated AgentSession) -> Int {
        let entries = session.entries
        if let mark = session.caches.contextMark, mark.appendRunStamp == session.transcript.appendRunStamp, mark.entryCount <= entries.count {
            return entries[mark.entryCount...].reduce(mark.inputTokens) { ModelUsage.saturatingSum($0, HistoryTransformer.estimatedTokens(of: $1)) }
        }
        let toolText = tools.reduce(0) { $0 + $1.name.utf8.count + $1.description.utf8.count + $1.inputSchema.serializedString().utf8.count }
        let fixed = (instructions.unicodeScalars.count + toolText + 3) / 4
        return entries.reduce(fixed) { ModelUsage.saturatingSum($0, HistoryTransformer.estimatedTokens(of: $1)) }
    }

    /// Remembers what a round trip's request held (its input as reported).
    func markContext(_ usage: Usage?, entryCount: Int, appendRunStamp: Int, session: isolated AgentSession) {
        guard let usage, let context = usage.contextTokens else { return }
        session.caches.contextMark = ContextMark(
            appendRunStamp: appendRunStamp, entryCount: entryCount, inputTokens: max(0, context - (usage.outputTokens ?? 0)))
    }

    // MARK: The summary

    /// The model's summary of `entries`: a side request (`purpose`) with the
    /// summary instructions, `earlierSummary` folded in and `extraInstructions`
    /// added, the entries as the conversation and one last user message asking
    /// for it. Dumped, traced, retried and counted like every side request.
    func summarize(
        _ entries: [TranscriptEntry], model reference: ModelReference, field: String, extraInstructions: String?, earlierSummary: String?,
        purpose: RequestDumper.Purpose, profile: String, session: isolated AgentSession
    ) async throws -> String {
        let provider = try session.provider(for: reference)
        let config = try session.context.catalog.resolve(reference, field: field)
        var instructions = Self.summaryInstructions
        if let earlierSummary, !earlierSummary.isEmpty { instructions += "\n\nAn earlier summary to fold in:\n\(earlierSummary)" }
        if let extraInstructions, !extraInstructions.isEmpty { instructions += "\n\n\(extraInstructions)" }
        var tools: [ModelToolDefinition] = []
        if provider.capabilities.requiresToolsWithToolHistory {
            // The API refuses tool calls in a history without their tools (Anthropic).
            var names: [String] = []
            for entry in entries {
                guard case .toolCalls(let calls, _, _) = entry.content else { continue }
                for call in calls where !names.contains(call.name) { names.append(call.name) }
            }
            tools = names.map { ModelToolDefinition(name: $0, description: "", inputSchema: ["type": "object"]) }
        }
        let request = ModelRequest(
            model: config.model ?? config.provider.rawValue, instructions: instructions,
            messages: ModelHistory.messages(from: entries) + [.user(text: "Write the summary now.", images: [])],
            tools: tools, toolChoice: .none)
        return try await sideRequest(request, provider: provider, purpose: purpose, profile: profile, parent: spanParent, session: session).text
    }

    // MARK: Compaction

    /// Summarizes the entries before the kept tail into one `summary` entry (one
    /// journaled revision), and with `elideTo` set, elides the running turn's
    /// oldest tool outputs until the context is estimated at that many tokens or
    /// fewer. `preview` changes nothing. Announced with `contextCompacted`.
    /// Nil when there was nothing to compact.
    func compact(
        trigger: CompactionTrigger, keepLast: Int?, instructions: String?, preview: Bool, elideTo target: Int? = nil,
        request: (instructions: String, tools: [ModelToolDefinition]), session: isolated AgentSession
    ) async throws -> CompactionOutcome? {
        let settings = session.config.compaction
        let entries = session.entries
        let before = estimatedContext(instructions: request.instructions, tools: request.tools, session: session)
        var outcome = CompactionOutcome(entriesRemoved: 0, tokensBefore: before, tokensAfter: before)
        // The running turn's entries stay whole: only its tool outputs may be elided.
        let runningFrom = isMaintenance ? nil : entries.firstIndex { $0.turnId == turn.id }
        let keep = keepLast ?? settings?.keepLast ?? CompactionConfig.defaultKeepLast
        if let cut = CompactionCut.index(in: entries, keepLast: keep, protectFrom: runningFrom, toPrompt: false) {
            let removed = Array(entries[..<cut])
            let profile = session.activeProfile?.name ?? session.activeProfileName
            let reference = try settings?.model ?? session.resolveModelReference(options: turn.options, profile: session.activeProfile)
            let text = try await summarize(
                removed, model: reference, field: "compaction.model", extraInstructions: instructions ?? settings?.instructions,
                earlierSummary: nil, purpose: .compaction, profile: profile, session: session)
            guard !text.trimmingWhitespaceAndNewlines().isEmpty else {
                throw RPCError(.providerContractViolation, "the model answered the summary request with no text; nothing was compacted")
            }
            let removedTokens = removed.reduce(0) { $0 + HistoryTransformer.estimatedTokens(of: $1) }
            let summaryTokens = HistoryTransformer.estimatedTokens(of: TranscriptEntry(id: "", .summary(text: text)))
            outcome.summary = text
            outcome.entriesRemoved = removed.count
            outcome.tokensAfter = max(0, before - removedTokens + summaryTokens)
            if !preview {
                outcome.entry = try session.transcript.compact(removing: removed.map(\.id), summary: text)
            }
        }
        if let target, !preview, outcome.tokensAfter > target, let runningFrom = session.entries.firstIndex(where: { $0.turnId == turn.id }) {
            let (operations, saved, count) = Self.elisions(in: session.entries, from: runningFrom, toSave: outcome.tokensAfter - target)
            if !operations.isEmpty {
                try session.transcript.mutate(operations)
                outcome.outputsElided = count
                outcome.tokensAfter = max(0, outcome.tokensAfter - saved)
            }
        }
        guard outcome.summary != nil || outcome.outputsElided > 0 else { return nil }
        if !preview {
            session.emit(SessionEvent(SessionEvent.ContextCompacted(
                entriesRemoved: outcome.entriesRemoved, tokensBefore: outcome.tokensBefore, tokensAfter: outcome.tokensAfter,
                trigger: trigger, entryId: outcome.entry?.id, outputsElided: outcome.outputsElided > 0 ? outcome.outputsElided : nil)))
            // The meter shows the context as the compaction left it, until the next round trip reads it.
            turn.usage.contextTokens = outcome.tokensAfter
        }
        return outcome
    }

    /// The operations that elide the oldest tool outputs of the running turn
    /// (from `start`) until `toSave` tokens are saved, with the tokens saved
    /// and how many outputs. The outputs of the latest tool calls stay: the
    /// model is about to read them.
    static func elisions(in entries: [TranscriptEntry], from start: Int, toSave: Int) -> ([TranscriptOperation], saved: Int, count: Int) {
        guard let latestCalls = entries.lastIndex(where: { $0.type == .toolCalls }), latestCalls >= start else { return ([], 0, 0) }
        var operations: [TranscriptOperation] = []
        var saved = 0
        for index in start..<latestCalls where saved < toSave {
            let entry = entries[index]
            guard case .toolOutput(let callId, let name, let outcome, let content, let profile, let approved, _) = entry.content else { continue }
            let text = content.stringValue ?? content.serializedString()
            let note = elisionNote(characters: text.unicodeScalars.count)
            // Elided once is enough; an output no longer than the note stays.
            guard !(text.hasPrefix("[This tool output (") && text.hasSuffix(elisionNoteEnding)),
                text.unicodeScalars.count > note.unicodeScalars.count
            else { continue }
            let elided = TranscriptEntry(
                id: entry.id, turnId: entry.turnId,
                .toolOutput(callId: callId, name: name, outcome: outcome, content: .string(note), profile: profile, approvedArguments: approved))
            saved += HistoryTransformer.estimatedTokens(of: entry) - HistoryTransformer.estimatedTokens(of: elided)
            operations.append(.replace(id: entry.id, entry: elided))
        }
        return (operations, saved, operations.count)
    }

    // MARK: Automatic compaction

    /// Whether compaction runs on its own: on by default.
    func autoCompacts(session: isolated AgentSession) -> Bool {
        session.config.compaction?.auto ?? true
    }

    /// Before a round trip: the size to compact to, when the request would pass
    /// `threshold` of a known window; nil when it fits (or compaction is off).
    func compactionLimit(for request: ModelRequest, provider: any ModelProvider, session: isolated AgentSession) -> Int? {
        guard autoCompacts(session: session), let window = provider.capabilities.contextWindowTokens else { return nil }
        let threshold = session.config.compaction?.threshold ?? CompactionConfig.defaultThreshold
        let limit = Int((Double(window) * threshold).rounded(.down))
        guard estimatedContext(instructions: request.instructions, tools: request.tools, session: session) > limit else { return nil }
        return limit
    }

    /// Compacts before a round trip whose request passed `limit`
    /// (`compactionLimit`). Returns whether the transcript changed (the
    /// request is then built again).
    func compactBeforeRoundTrip(_ request: ModelRequest, limit: Int, session: isolated AgentSession) async throws -> Bool {
        let outcome = try await compact(
            trigger: .threshold, keepLast: nil, instructions: nil, preview: false, elideTo: limit,
            request: (request.instructions, request.tools), session: session)
        return outcome?.changedTranscript ?? false
    }

    /// The provider said the context is too long: compact once (eliding to
    /// the threshold of the window when it is known, else every older output
    /// of the running turn). Returns whether the transcript changed, so the
    /// round trip is worth retrying.
    func compactAfterOverflow(_ request: ModelRequest, provider: any ModelProvider, session: isolated AgentSession) async throws -> Bool {
        guard autoCompacts(session: session) else { return false }
        let threshold = session.config.compaction?.threshold ?? CompactionConfig.defaultThreshold
        let target = provider.capabilities.contextWindowTokens.map { Int((Double($0) * threshold).rounded(.down)) } ?? 0
        // The estimate said it fits, the provider says not: what the mark held was wrong.
        session.caches.contextMark = nil
        let outcome = try await compact(
            trigger: .overflow, keepLast: nil, instructions: nil, preview: false, elideTo: target,
            request: (request.instructions, request.tools), session: session)
        return outcome?.changedTranscript ?? false
    }
}
