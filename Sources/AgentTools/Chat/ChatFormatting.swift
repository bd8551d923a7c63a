import AgentRPC
import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How the chat shows protocol values to a person: one line each, shortened.
/// Pure functions, so the wording is testable without a terminal.
enum ChatFormatting {
    /// Longest single-line rendering of a value before it is cut with "…".
    static let maxInline = 160

    /// A value on one line: strings as themselves, everything else as compact JSON.
    static func inline(_ value: JSONValue, limit: Int = maxInline) -> String {
        let text = value.stringValue ?? value.serializedString()
        return shorten(text, limit: limit)
    }

    /// Collapses line breaks and cuts to `limit` characters.
    static func shorten(_ text: String, limit: Int = maxInline) -> String {
        let flat = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).joined(separator: " ⏎ ")
        guard flat.count > limit else { return flat }
        return String(flat.prefix(max(1, limit - 1))) + "…"
    }

    /// `name({"a":1})`: how a tool call is shown, with its arguments as the model sent them.
    static func call(_ name: String, _ arguments: JSONValue) -> String {
        "\(name)(\(shorten(arguments.serializedString())))"
    }

    static func toolStarted(_ name: String, _ arguments: JSONValue) -> String { "→ " + call(name, arguments) }

    static func toolFinished(_ outcome: String, _ content: JSONValue) -> String { "← \(outcome): \(inline(content))" }

    static func confirmationQuestion(_ name: String, _ arguments: JSONValue, reason: String?) -> String {
        let why = reason.map { " (\($0))" } ?? ""
        return "Allow \(call(name, arguments))?\(why) [y/N] "
    }

    /// `y`/`yes` in any case approves; anything else, including an empty line, denies.
    static func isApproval(_ answer: String) -> Bool {
        ["y", "yes"].contains(answer.trimmingWhitespace().lowercased())
    }

    /// One transcript entry: `e3 toolOutput  current_time ok: {...}`.
    static func entry(_ entry: TranscriptEntry) -> String {
        let head = "\(entry.id) \(entry.type.rawValue)"
        switch entry.content {
        case .prompt(let text, let images):
            let attached = (images?.isEmpty ?? true) ? "" : " [+\(images?.count ?? 0) image(s)]"
            return "\(head): \(shorten(text))\(attached)"
        case .response(let text, _, let incomplete, let stopReason):
            let reason = stopReason.map { " (\($0.rawValue))" } ?? ""
            return "\(head): \(shorten(text))" + (incomplete ? " [incomplete\(reason)]" : stopReason.map { " [\($0.rawValue)]" } ?? "")
        case .reasoning(let text, _, _), .summary(let text):
            return "\(head): \(shorten(text))"
        case .toolCalls(let calls, _, let text):
            let said = text.map { " — said: \(shorten($0, limit: 60))" } ?? ""
            return "\(head): " + calls.map { call($0.name, $0.arguments) }.joined(separator: ", ") + said
        case .toolOutput(_, let name, let outcome, let content, _, _, _):
            return "\(head): \(name) \(outcome.rawValue): \(inline(content))"
        }
    }

    /// The line after a turn: tokens if the provider reported any, round trips and tool calls.
    static func turnSummary(usage: Usage?, roundTrips: Int?, toolCalls: Int?) -> String {
        var parts: [String] = []
        if let u = usage, u.inputTokens != nil || u.outputTokens != nil {
            var tokens = "\(u.inputTokens.map(String.init) ?? "?") in, \(u.outputTokens.map(String.init) ?? "?") out"
            if let c = u.cachedInputTokens, c > 0 { tokens += ", \(c) cached" }
            if let r = u.reasoningTokens, r > 0 { tokens += ", \(r) reasoning" }
            parts.append("usage: \(tokens) tokens")
        } else {
            parts.append("usage: not reported by the provider")
        }
        if let n = roundTrips { parts.append(plural(n, "round trip")) }
        if let n = toolCalls, n > 0 { parts.append(plural(n, "tool call")) }
        return "(" + parts.joined(separator: " · ") + ")"
    }

    static func plural(_ n: Int, _ noun: String, _ nouns: String? = nil) -> String { "\(n) \(n == 1 ? noun : nouns ?? noun + "s")" }

    /// The context meter after a turn: what the model had in context of its
    /// window, and the session's cost so far; nil when neither is known.
    static func meter(contextTokens: Int?, window: Int?, costUSD: Double?) -> String? {
        var parts: [String] = []
        if let used = contextTokens {
            var text = "context: \(grouped(used))"
            if let window, window > 0 {
                // Bounded before the conversion: a reading far past the window must not trap.
                let percent = min(Double(used) / Double(window) * 100, 999_999).rounded()
                text += " of \(grouped(window)) tokens (\(Int(percent))%)"
            } else {
                text += " tokens"
            }
            parts.append(text)
        }
        if let costUSD, costUSD.isFinite { parts.append("cost so far: " + dollars(costUSD)) }
        return parts.isEmpty ? nil : "(" + parts.joined(separator: " · ") + ")"
    }

    /// `1,234,567`: a token count as people read it.
    static func grouped(_ n: Int) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, digit) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
            out.append(digit)
        }
        return (n < 0 ? "-" : "") + out
    }

    /// US dollars: cents from a dollar up, four decimals below (a round trip often costs a fraction of a cent).
    static func dollars(_ amount: Double) -> String { String(cFormat: amount >= 1 ? "$%.2f" : "$%.4f", amount) }

    /// What a compaction did: `12 entries summarized, context about 3,900 → 800 tokens`.
    static func compaction(entriesRemoved: Int, tokensBefore: Int?, tokensAfter: Int?) -> String {
        var text = plural(entriesRemoved, "entry", "entries") + " summarized"
        if let before = tokensBefore, let after = tokensAfter { text += ", context about \(grouped(before)) → \(grouped(after)) tokens" }
        return text
    }

    /// One stored session `--resume` offers: `  1. s-… "title" (12 entries, updated 2026-11-27 16:40)`.
    static func storedSession(_ number: Int, _ summary: JSONValue) -> String {
        let id = summary["sessionId"]?.stringValue ?? "?"
        let title = summary["title"]?.stringValue.map { " \"\(shorten($0, limit: 60))\"" } ?? ""
        var details = [plural(summary["entryCount"]?.intValue ?? 0, "entry", "entries")]
        if let updated = summary["updatedAt"]?.stringValue {
            details.append("updated " + String(updated.replacingScalars(of: "T", with: " ").prefix(16)))
        }
        if summary["locked"]?.boolValue == true { details.append("open in another process") }
        return "  \(number). \(id)\(title) (\(details.joined(separator: ", ")))"
    }

    /// An error from the server: its stable `data.kind`, its message, and for a
    /// provider error the provider's own code and safe description.
    static func error(_ error: RPCError) -> String {
        let kind = error.kind.rawValue.isEmpty ? "code \(error.code.rawValue)" : error.kind.rawValue
        var text = "error [\(kind)]: \(error.message)"
        if let provider = error.data["provider"]?.objectValue {
            var details: [String] = []
            if let code = provider["code"]?.stringValue { details.append("provider code \(code)") }
            if let safe = provider["safeDescription"]?.stringValue, safe != error.message { details.append(safe) }
            if provider["requiresUserAction"]?.boolValue == true { details.append("needs action on your account") }
            if provider["retryGuidance"]?["kind"]?.stringValue == "retryWithBackoff" { details.append("may work if retried later") }
            if !details.isEmpty { text += " (" + details.joined(separator: "; ") + ")" }
        }
        if let limit = error.data["limit"], error.data["provider"] == nil { text += " (limit \(inline(limit)))" }
        return text
    }
}
