import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A send waiting behind the running turn (`session/send` with `queue: true`).
struct QueuedSend: Sendable {
    let id: Int
    let input: TurnInput
    let options: TurnOptions
    let mode: TurnMode
    /// The waiting request, once its task has attached.
    var waiter: CheckedContinuation<TurnControl, any Error>?
}

/// How a queued send's request learns that its turn started (or will not).
enum QueueTicket: Sendable {
    case started(TurnControl)
    case queued(id: Int)
}

/// The `undo` an `ok` tool result carried, kept after the turn committed so that
/// `session/rewind` can still send it.
struct UndoRecord: Codable, Sendable, Hashable {
    var turnId: String
    var callId: String
    var name: String
    var undo: JSONValue
}

/// Bounds on what a client can pile up in a session (docs/protocol.md §17).
enum HumanInTheLoopLimits {
    static let maxPendingSteering = 16
    static let maxQueuedSends = 16
    static let maxApprovalRules = 32
    /// Glob steps one argument match may take before it counts as no match.
    static let globStepBudget = 100_000
    /// How long one `tool/undo` of a rewind may take.
    static let rewindUndoTimeoutSeconds = 30.0
}

/// A session's standing approval rules (docs/protocol.md §17), numbered `r1`, `r2`, …
struct ApprovalRuleSet {
    private(set) var rules: [ApprovalRule] = []
    private var nextNumber = 1

    /// The first rule that approves this call, if any.
    func approving(tool: String, arguments: JSONValue) -> ApprovalRule? {
        rules.first { ApprovalRuleMatcher.matches($0, tool: tool, arguments: arguments) }
    }

    /// Removes `ids` and adds `specs`, or throws `invalidParams` with nothing
    /// changed. Returns the added rules and whether the set changed.
    mutating func change(adding specs: [ApprovalRuleSpec], removing ids: [String], field: String) throws -> (added: [ApprovalRule], changed: Bool) {
        for id in ids where !rules.contains(where: { $0.id == id }) {
            throw RPCError.invalidParams("no approval rule '\(id)'", field: "remove")
        }
        for (i, spec) in specs.enumerated() {
            let path = specs.count == 1 && field != "add" ? field : "\(field)[\(i)]"
            if spec.tool.isEmpty { throw RPCError.invalidParams("an approval rule needs a tool name", field: path + ".tool") }
            if let problem = ApprovalRuleMatcher.problem(in: spec.arguments) {
                throw RPCError.invalidParams(problem.message, field: path + ".arguments" + problem.path)
            }
        }
        let remaining = rules.filter { !ids.contains($0.id) }
        if remaining.count + specs.count > HumanInTheLoopLimits.maxApprovalRules {
            throw RPCError.invalidParams("a session holds at most \(HumanInTheLoopLimits.maxApprovalRules) approval rules", field: field)
        }
        var added: [ApprovalRule] = []
        for spec in specs {
            added.append(ApprovalRule(id: "r\(nextNumber)", tool: spec.tool, arguments: spec.arguments))
            nextNumber += 1
        }
        let changed = remaining.count != rules.count || !added.isEmpty
        rules = remaining + added
        return (added, changed)
    }
}

/// Matches approval rules against a call's arguments, with bounded work: a
/// pattern that would take too long to decide counts as no match, so the user
/// is asked (never approved by accident).
enum ApprovalRuleMatcher {
    static func matches(_ rule: ApprovalRule, tool: String, arguments: JSONValue) -> Bool {
        guard rule.tool == tool else { return false }
        guard let patterns = rule.arguments, !patterns.isEmpty else { return true }
        guard case .object(let values) = arguments else { return false }
        for (name, pattern) in patterns {
            guard let value = values[name] else { return false }
            if case .string(let glob) = pattern {
                guard case .string(let text) = value, text.utf8.count <= ApprovalRule.maxMatchedValueLength,
                    BoundedGlob.matches(glob, text, budget: HumanInTheLoopLimits.globStepBudget) == true
                else { return false }
            } else if pattern != value {
                return false
            }
        }
        return true
    }

    /// The first problem with a rule's argument patterns (path below `arguments`).
    static func problem(in patterns: [String: JSONValue]?) -> (path: String, message: String)? {
        guard let patterns else { return nil }
        if patterns.count > ApprovalRule.maxPatternCount {
            return ("", "at most \(ApprovalRule.maxPatternCount) argument patterns per rule")
        }
        for name in patterns.keys.sorted() {
            if case .string(let glob) = patterns[name], glob.utf8.count > ApprovalRule.maxPatternLength {
                return (".\(name)", "a pattern is at most \(ApprovalRule.maxPatternLength) bytes long")
            }
        }
        return nil
    }
}

/// Shell-style globs (`*` any run, `?` one character) with a step budget: nil when
/// the budget ran out before the answer was known. Guards' tool-name patterns and
/// approval rules' argument patterns both match with it.
enum BoundedGlob {
    static func matches(_ pattern: String, _ text: String, budget: Int) -> Bool? {
        let p = Array(pattern), t = Array(text)
        var pi = 0, ti = 0, star = -1, mark = 0, steps = 0
        while ti < t.count {
            steps += 1
            if steps > budget { return nil }
            if pi < p.count, p[pi] == "?" || p[pi] == t[ti] {
                pi += 1; ti += 1
            } else if pi < p.count, p[pi] == "*" {
                star = pi; mark = ti; pi += 1
            } else if star >= 0 {
                pi = star + 1; mark += 1; ti = mark
            } else {
                return false
            }
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }
}
