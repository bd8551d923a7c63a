import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A profile's view of the history (docs/protocol.md §11): the built-in transforms, applied
/// in order to a copy of the transcript just before a request. Lossless: the
/// session's transcript is never touched, entries keep their ids, and only
/// `redact` rewrites content.
///
/// A tool exchange — a `toolCalls` entry and the `toolOutput` entries answering its
/// calls — is never split: a provider rejects a tool result without its call, and a
/// call without its result.
enum HistoryTransformer {
    /// Applies `transforms` in order. `profile` is the active profile's name (for `ownTurnsOnly`).
    /// Throws `RegexBudgetExceeded` when a `redact` pattern runs past its budget.
    static func apply(_ transforms: [HistoryTransform], to entries: [TranscriptEntry], profile: String) throws -> [TranscriptEntry] {
        try transforms.reduce(entries) { current, transform in try apply(transform, to: current, profile: profile) }
    }

    /// Whether applying `transforms` runs user-supplied regexes.
    static func usesPatterns(_ transforms: [HistoryTransform]) -> Bool {
        transforms.contains { if case .redact = $0 { return true } else { return false } }
    }

    /// Applies one transform.
    static func apply(_ transform: HistoryTransform, to entries: [TranscriptEntry], profile: String) throws -> [TranscriptEntry] {
        switch transform {
        case .rollingWindow(let window): return rollingWindow(window, entries)
        case .dropCompletedToolCalls: return dropCompletedToolCalls(entries)
        case .keepToolRecords: return keepToolRecords(entries)
        case .redact(let redaction): return try redact(redaction, entries)
        case .ownTurnsOnly: return ownTurnsOnly(entries, profile: profile)
        }
    }

    // MARK: rollingWindow

    /// Keeps the newest entries whose total size is within the bound: `entries` counts
    /// entries, `messages` counts provider messages (`messageCount(of:)`), `tokens`
    /// estimates tokens (`estimatedTokens(of:)`).
    ///
    /// The cut then moves forward (the window only shrinks) until the window starts
    /// neither with a `toolOutput` nor inside a tool exchange, and — with `evenPairs` —
    /// at a prompt, so a user message and the answer to it stay together. When that
    /// leaves nothing, the newest exchange (with `evenPairs`, the latest prompt and
    /// everything after it) is kept whole even beyond the bound: a request without
    /// messages is of no use. `evenPairs` in a history without prompts is ignored.
    /// A window without a bound (none of the three sizes given) keeps everything.
    static func rollingWindow(_ window: RollingWindow, _ entries: [TranscriptEntry]) -> [TranscriptEntry] {
        let cost: (TranscriptEntry) -> Int
        let bound: Int
        if let n = window.entries {
            (cost, bound) = ({ _ in 1 }, n)
        } else if let n = window.messages {
            (cost, bound) = (messageCount(of:), n)
        } else if let n = window.tokens {
            (cost, bound) = (estimatedTokens(of:), n)
        } else {
            return entries
        }
        let count = entries.count
        var start = count
        var total = 0
        while start > 0 {
            let next = cost(entries[start - 1])
            if total + next > bound { break }
            total += next
            start -= 1
        }
        if start == 0 { return entries }

        let exchanges = ToolExchanges(entries)
        let pairs = window.evenPairs == true && entries.contains { $0.type == .prompt }
        func isBoundary(_ cut: Int) -> Bool {
            if cut == 0 || cut == count { return true }
            if exchanges.spansBoundary(cut) || entries[cut].type == .toolOutput { return false }
            return !pairs || entries[cut].type == .prompt
        }
        var cut = start
        while !isBoundary(cut) { cut += 1 }
        if cut == count {
            cut = count - 1
            while !isBoundary(cut) { cut -= 1 }
        }
        return Array(entries[cut...])
    }

    /// How many provider messages an entry becomes: one for a prompt, a response, a
    /// `toolCalls` entry and each `toolOutput`; none for reasoning (not replayed to models).
    static func messageCount(of entry: TranscriptEntry) -> Int {
        entry.type == .reasoning ? 0 : 1
    }

    /// A rough token count: ceil(characters / 4) over the entry's text, or for tool
    /// entries the tool names plus the arguments / output as JSON text (string outputs
    /// raw). Reasoning counts 0: it is not replayed to models. Characters are Unicode scalars.
    static func estimatedTokens(of entry: TranscriptEntry) -> Int {
        var characters = 0
        switch entry.content {
        case .prompt(let text, _), .response(let text, _, _, _):
            characters = text.unicodeScalars.count
        case .summary(let text):
            characters = ModelHistory.summaryText(text).unicodeScalars.count
        case .reasoning:
            characters = 0
        case .toolCalls(let calls, _, let text):
            characters = (text ?? "").unicodeScalars.count
            for call in calls {
                characters += call.name.unicodeScalars.count + call.arguments.serializedString().unicodeScalars.count
            }
        case .toolOutput(_, let name, _, let content, _, _, _):
            characters = name.unicodeScalars.count + (content.stringValue ?? content.serializedString()).unicodeScalars.count
        }
        return (characters + 3) / 4
    }

    // MARK: dropCompletedToolCalls

    /// Removes the tool exchanges of earlier turns: every `toolCalls` entry before the
    /// latest prompt, with its outputs (and stray outputs before that prompt). The
    /// current turn's exchanges stay: the model needs their results to go on. The text
    /// a removed `toolCalls` entry carried goes with it (it is usually a preamble to the
    /// calls, and a call-less assistant message would only restate it). Without a
    /// prompt nothing is removed: there is no way to tell turns apart.
    static func dropCompletedToolCalls(_ entries: [TranscriptEntry]) -> [TranscriptEntry] {
        guard let latestPrompt = entries.lastIndex(where: { $0.type == .prompt }) else { return entries }
        let exchanges = ToolExchanges(entries)
        return entries.indices.compactMap { index in
            if let start = exchanges.start[index], start < latestPrompt { return nil }
            return entries[index]
        }
    }

    // MARK: keepToolRecords

    /// Keeps every tool exchange, plus the latest prompt and everything after it; drops
    /// earlier prompts, responses and reasoning. Without a prompt, only tool entries stay.
    static func keepToolRecords(_ entries: [TranscriptEntry]) -> [TranscriptEntry] {
        let latestPrompt = entries.lastIndex { $0.type == .prompt } ?? entries.count
        return entries.indices.compactMap { index in
            let type = entries[index].type
            return index >= latestPrompt || type == .toolCalls || type == .toolOutput ? entries[index] : nil
        }
    }

    // MARK: redact

    /// Replaces every match of `pattern` with `replacement` (taken literally, no `$1`
    /// templates) in prompt, response, reasoning and `toolCalls` texts, and in the
    /// string leaves of tool arguments and outputs, so JSON keeps its structure (object
    /// keys, tool names and images are left alone). Ids stay. An invalid pattern leaves
    /// the entries unchanged: check patterns at create time with `patternProblems(in:)`.
    /// Every match is bounded; one that runs past its budget throws `RegexBudgetExceeded`
    /// (the text is never passed on unredacted).
    static func redact(_ redaction: Redaction, _ entries: [TranscriptEntry]) throws -> [TranscriptEntry] {
        guard let regex = try? BoundedRegex(redaction.pattern) else { return entries }
        func text(_ s: String) throws -> String {
            try regex.replacingMatches(in: s, withLiteral: redaction.replacement)
        }
        func json(_ value: JSONValue) throws -> JSONValue {
            switch value {
            case .string(let s): return .string(try text(s))
            case .array(let items): return .array(try items.map(json))
            case .object(let members): return .object(try members.mapValues(json))
            case .null, .bool, .int, .double: return value
            }
        }
        return try entries.map { entry in
            var out = entry
            switch entry.content {
            case .prompt(let t, let images):
                out.content = .prompt(text: try text(t), images: images)
            case .response(let t, let profile, let incomplete, let stopReason):
                out.content = .response(text: try text(t), profile: profile, incomplete: incomplete, stopReason: stopReason)
            case .reasoning(let t, let profile, let signature):
                // The signature seals this exact text: once rewritten, it would be rejected.
                let rewritten = try text(t)
                out.content = .reasoning(text: rewritten, profile: profile, signature: rewritten == t ? signature : nil)
            case .toolCalls(let calls, let profile, let t):
                let rewritten = try calls.map { ToolCallRecord(callId: $0.callId, name: $0.name, arguments: try json($0.arguments)) }
                out.content = .toolCalls(calls: rewritten, profile: profile, text: try t.map(text))
            case .toolOutput(let callId, let name, let outcome, let content, let profile, let approved, let media):
                out.content = .toolOutput(
                    callId: callId, name: name, outcome: outcome, content: try json(content), profile: profile, approvedArguments: try approved.map(json),
                    media: media)
            case .summary(let t):
                out.content = .summary(text: try text(t))
            }
            return out
        }
    }

    /// `redact` transforms whose pattern is not a valid regular expression, with their
    /// config paths (`profiles.cases.x.history[1].redact.pattern`).
    static func patternProblems(in config: SessionConfig) -> [ConfigProblem] {
        guard let profiles = config.profiles else { return [] }
        var named: [(String, ProfileCase)] = []
        if let defaults = profiles.defaults { named.append(("profiles.defaults", defaults)) }
        for name in profiles.cases.keys.sorted() {
            if let c = profiles.cases[name] { named.append(("profiles.cases.\(name)", c)) }
        }
        var problems: [ConfigProblem] = []
        for (path, profile) in named {
            for (index, transform) in (profile.history ?? []).enumerated() {
                guard case .redact(let r) = transform, let problem = BoundedRegex.problem(with: r.pattern) else { continue }
                problems.append(ConfigProblem(path: "\(path).history[\(index)].redact.pattern", message: problem))
            }
        }
        return problems
    }

    // MARK: ownTurnsOnly

    /// Keeps the entries `profile` produced, the prompts of the turns they belong to
    /// (by `turnId`), and the latest prompt. A tool exchange belongs to whoever made
    /// the calls: its outputs follow the `toolCalls` entry even when they are labelled
    /// with another profile (a handoff switches profiles between the call and its output).
    static func ownTurnsOnly(_ entries: [TranscriptEntry], profile: String) -> [TranscriptEntry] {
        let exchanges = ToolExchanges(entries)
        let latestPrompt = entries.lastIndex { $0.type == .prompt }
        var keep = entries.indices.map { index -> Bool in
            let producer = exchanges.owner[index].map { entries[$0] } ?? entries[index]
            return producer.content.profile == profile
        }
        let turns = Set(entries.indices.compactMap { keep[$0] ? entries[$0].turnId : nil })
        for index in entries.indices where entries[index].type == .prompt {
            if index == latestPrompt || entries[index].turnId.map(turns.contains) == true { keep[index] = true }
        }
        return entries.indices.compactMap { keep[$0] ? entries[$0] : nil }
    }
}

/// Which entries form each tool exchange. A `toolOutput` belongs to the nearest
/// earlier `toolCalls` entry that made a call with its `callId`; an output with no
/// such entry is a stray (after a manual transcript edit) and belongs to none.
struct ToolExchanges {
    /// For each entry, the index of the `toolCalls` entry of its exchange (itself for a
    /// `toolCalls` entry), nil for entries outside any exchange and stray outputs.
    let owner: [Int?]
    /// For each tool entry, where its exchange starts: the `toolCalls` entry, or the
    /// entry itself for a stray output. Nil for entries that are no tool entry.
    let start: [Int?]
    /// `reach[cut]`: the last index of any exchange whose `toolCalls` entry is before `cut`.
    private let reach: [Int]

    init(_ entries: [TranscriptEntry]) {
        var owner = [Int?](repeating: nil, count: entries.count)
        var last: [Int: Int] = [:]
        var openCalls: [String: Int] = [:]
        for (index, entry) in entries.enumerated() {
            switch entry.content {
            case .toolCalls(let calls, _, _):
                owner[index] = index
                last[index] = index
                for call in calls { openCalls[call.callId] = index }
            case .toolOutput(let callId, _, _, _, _, _, _):
                if let callsIndex = openCalls[callId] {
                    owner[index] = callsIndex
                    last[callsIndex] = index
                }
            default:
                break
            }
        }
        var reach = [Int](repeating: -1, count: entries.count + 1)
        for index in entries.indices {
            reach[index + 1] = max(reach[index], owner[index] == index ? (last[index] ?? index) : -1)
        }
        self.owner = owner
        self.start = entries.indices.map { index in
            entries[index].type == .toolOutput ? (owner[index] ?? index) : owner[index]
        }
        self.reach = reach
    }

    /// Whether cutting before `cut` would separate some call from its output.
    func spansBoundary(_ cut: Int) -> Bool { reach[cut] >= cut }
}
