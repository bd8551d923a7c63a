import AgentRPCProtocol
import Foundation

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

extension AgentSession {
    // MARK: Steering

    /// `session/steer`: queued for the running turn's next checkpoint.
    func steer(input: TurnInput, expectedTurnId: String?) throws -> SessionSteerResult {
        guard let runner, runner.takesSteering else {
            var data: [String: JSONValue] = [:]
            if let expectedTurnId { data["expectedTurnId"] = .string(expectedTurnId) }
            throw RPCError(.noRunningTurn, "no turn is running that could take this input; start one with session/send", data: data)
        }
        if let expectedTurnId, expectedTurnId != runner.id {
            throw RPCError(.turnMismatch, "the turn named by expectedTurnId is not the running turn; it has ended", data: [
                "expectedTurnId": .string(expectedTurnId), "turnId": .string(runner.id),
            ])
        }
        if runner.steeringWaiting >= HumanInTheLoopLimits.maxPendingSteering {
            throw RPCError(.overloaded, "\(HumanInTheLoopLimits.maxPendingSteering) steering inputs are already waiting for the next checkpoint")
        }
        if let provider = providers.last?.provider { try PreFlight.images(input.images ?? [], provider: provider) }
        runner.steer(input)
        return SessionSteerResult(turnId: runner.id)
    }

    // MARK: Queued sends

    /// `session/send` with `queue: true`: starts now when the session is idle,
    /// else takes the next place in the queue (in request order).
    func startOrEnqueue(input: TurnInput, options: TurnOptions, mode: TurnMode) throws -> QueueTicket {
        if !isRunning && sendQueue.isEmpty { return .started(try beginTurn(input: input, options: options, mode: mode)) }
        return .queued(id: try sendQueue.enqueue(input: input, options: options, mode: mode))
    }

    /// Waits until the queued send's turn has started; withdrawing the request
    /// (`$/cancelRequest`) takes it out of the queue.
    func awaitQueuedTurn(_ id: Int) async throws -> TurnControl {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<TurnControl, any Error>) in
                sendQueue.attach(id, continuation)
            }
        } onCancel: {
            Task { await self.dropQueuedSend(id, source: "$/cancelRequest") }
        }
    }

    private func dropQueuedSend(_ id: Int, source: String) {
        sendQueue.drop(id, source: source)
    }

    /// Drops every queued send (cancel, close, shutdown); returns how many.
    @discardableResult
    func dropQueuedSends(source: String) -> Int {
        sendQueue.dropAll(source: source)
    }

    /// After a turn ended: the first queued send whose pre-flight passes starts now,
    /// before any other request can run a turn in between.
    func startNextQueuedSend() {
        while !isRunning, let entry = sendQueue.next() {
            let outcome = Result { try beginTurn(input: entry.input, options: entry.options, mode: entry.mode) }
            sendQueue.settle(entry, outcome)
        }
    }

    // MARK: Approval rules

    /// Adds a rule (from `approveForSession` or `session/setApprovalRules`) and announces the change.
    func addApprovalRules(_ specs: [ApprovalRuleSpec], removing ids: [String] = [], field: String) throws -> [ApprovalRule] {
        let (added, changed) = try approvalRules.change(adding: specs, removing: ids, field: field)
        if changed { emit(.approvalRulesChanged(rules: approvalRules.rules)) }
        return added
    }

    /// `session/setApprovalRules`.
    func setApprovalRules(add: [ApprovalRuleSpec], remove: [String]) throws -> SetApprovalRulesResult {
        _ = try addApprovalRules(add, removing: remove, field: "add")
        return SetApprovalRulesResult(rules: approvalRules.rules)
    }

    /// Checks edited arguments against the tool's input schema; nil when they fit.
    func schemaProblem(tool name: String, schema: JSONValue?, arguments: JSONValue) -> [JSONSchemaViolation]? {
        guard let schema else { return nil }
        guard let validator = try? inputValidator(for: name, schema: schema) else { return nil }
        let violations = validator.validate(arguments)
        return violations.isEmpty ? nil : violations
    }
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

extension AgentSession {
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
        let cut: Int
        switch (params.toEntryId, params.turnId) {
        case (let entryId?, nil):
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
            throw RPCError.invalidParams("give exactly one of toEntryId and turnId", field: params.toEntryId == nil ? "toEntryId" : "turnId")
        }
        let removed = Array(entries[cut...])
        // A call is identified by its turn and call id: models reuse call ids across turns.
        let removedCalls = Set(removed.compactMap { entry -> UndoKey? in
            guard case .toolOutput(let callId, _, _, _, _, _) = entry.content, let turn = entry.turnId else { return nil }
            return UndoKey(turnId: turn, callId: callId)
        })
        if !removed.isEmpty { try transcript.mutate([.truncateAfter(id: cut == 0 ? nil : entries[cut - 1].id)]) }
        let taken = try transcript.takeUndoRecords { removedCalls.contains(UndoKey(turnId: $0.turnId, callId: $0.callId)) }
        let undos = params.undo ? Array(taken.reversed()) : []
        if !undos.isEmpty { rewindingUndos = true }
        let result = SessionRewindResult(revision: revision, entryCount: entries.count, removedEntries: removed.map(\.id), undos: [])
        return (result, undos)
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
