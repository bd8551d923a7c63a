import AgentRPCProtocol
import Synchronization

/// Everything the tool stage may read of the session it runs for and do to it
/// (docs/architecture.md, "The tool stage"). The session conforms
/// (`SessionToolHost.swift`); unit tests give the stage a fake. The stage runs
/// isolated to its host, so these are plain calls on the host's actor.
protocol ToolStageHost: Actor {
    // What it reads
    /// The transcript's revision now (a `tool/call` carries it).
    var revision: Int { get }
    /// The standing approval rule that answers a confirmation for the user, if any.
    func approvingRule(tool: String, arguments: JSONValue) -> ApprovalRule?
    /// A compiled validator of a tool's input schema, kept from turn to turn.
    func inputValidator(for tool: String, schema: JSONValue) throws -> JSONSchemaValidator

    // What it may do
    /// Appends an entry to the transcript and announces it.
    @discardableResult
    func append(_ content: TranscriptContent, turn: String?) throws -> TranscriptEntry
    /// Sends one `session/event`.
    func emit(_ event: SessionEvent, turn: String?)
    /// Keeps an `ok` result's undo for the turn's rollback, durably.
    func recordUndo(_ record: UndoRecord) throws
    /// Journals that a call of the turn is about to be handed to its executor
    /// (`attempt`: which send; `arguments`: edited ones the user approved).
    func recordCallSent(_ callID: String, turn: String, attempt: Int, arguments: JSONValue?) throws
    /// Checks a client's confirmation answer (edited arguments against the
    /// schema, a rule's scope) and, for `approveForSession`, adds the rule.
    func acceptDecision(
        _ decision: ConfirmationDecision, reason: String?, arguments: JSONValue?, rule: ApprovalScope?,
        tool: String, schema: JSONValue?, source: ConfirmationSource
    ) throws -> ConfirmationAnswer
    /// Runs a call on the MCP server that offers `name`; nil when no server does.
    func runMCPTool(named name: String, callId: String, arguments: JSONValue, timeout: Double, control: TurnControl) async throws -> (ToolOutcome, JSONValue)?
    /// Runs the profile's `onToolCall` / `onToolOutput` hook actions; a veto or failure throws.
    func runToolHook(_ hook: HookName, profile: ResolvedProfile, toolName: String, payload: JSONValue) async throws
    /// Runs a built-in orchestration tool (handoff, consult, skills); `span` is the call's.
    func runBuiltinTool(_ tool: ResolvedTool, arguments: JSONValue, profile: ResolvedProfile, span: SpanContext?) async throws -> (ToolOutcome, JSONValue)
}

/// What the stage is given for one round trip and does not change while it runs.
struct ToolStageContext: Sendable {
    let sessionId: String
    let turnId: String
    /// The profile the round trip ran under: its tools (MCP tools included) and hooks.
    let profile: ResolvedProfile
    let limits: EffectiveLimits
    let guards: [Guard]
    let capabilities: ClientCapabilities
    /// Where `tool/call`, `confirmation/request` and `user/ask` go.
    let channel: any ClientChannel
    let control: TurnControl
    let logger: Logger
    let tracer: Tracer?
    /// The span a call's span hangs under (nil when tracing is off).
    let spanParent: SpanContext?
    /// The names of the session's MCP servers (a call's `source` in events).
    let mcpServers: [String]
    /// Why tools the calls name but the profile does not offer are unavailable,
    /// when it is not simply that no such tool exists (an MCP server that is down).
    var unavailableTools: [String: String] = [:]
    /// The turn's round trip whose calls these are (from 1): model call ids
    /// repeat from round trip to round trip, so a call's `idempotencyKey` names it too.
    var roundTrip = 1
    /// Running calls' progress reports on their way to `toolProgress` events.
    var progress = ToolProgressGate()
}

/// Where one call of the round trip is. The stage keeps this for every call in
/// one place (`ToolStage.calls`): whether a call has been handed to its
/// executor and whether its output is recorded is read here and nowhere else.
struct ToolCallState: Sendable {
    enum Phase: Sendable, Equatable {
        /// Not started: no event, nothing sent.
        case waiting
        /// Validation, hooks, guards, approval rules, confirmation: nothing sent yet.
        case checking
        /// Handed to its executor (the client's `tool/call`, an MCP server), no result yet.
        case sent
        /// Its `toolOutput` entry is in the transcript.
        case answered
    }
    let call: ModelToolCall
    var phase: Phase = .waiting
    /// The arguments it was handed over with (edited ones after an approval), once sent.
    var sentArguments: JSONValue?
    var outcome: ToolOutcome?
    /// A parked or crashed turn's call continued by `session/continue`: how
    /// many times it was sent before (0: never, it runs as any call) and the
    /// edited arguments it was approved with. A call sent before is in doubt:
    /// it is sent again as it was, without asking again.
    var priorSends = 0
    var priorArguments: JSONValue?
}

/// How one call ended, as the turn loop sees it.
struct ToolCallOutcome: Sendable, Equatable {
    let callId: String
    let outcome: ToolOutcome
    let content: JSONValue
    /// A `final` tool's arguments: the turn ends with them.
    var finalAnswer: JSONValue?
}

/// Runs the tool calls of one round trip: validation, hooks, guards, approval
/// rules, confirmation, `ask_user`, execution (the client or an MCP server),
/// undo records and the `toolOutput` entries, and returns how each call ended,
/// in call order. It reaches the session only through `ToolStageHost`, and
/// runs isolated to it. What `getState` shows of the calls (`activeToolCalls`,
/// `pendingConfirmation`) is read from here.
final class ToolStage<Host: ToolStageHost> {
    let context: ToolStageContext
    /// Every call of the round trip, in call order.
    private(set) var calls: [ToolCallState]
    /// The built-in confirmation waiting for `session/confirm`.
    private(set) var pendingConfirmation: PendingConfirmation?
    /// The input schema of the call waiting for `session/confirm`, for edited arguments.
    private(set) var pendingConfirmationSchema: JSONValue?
    private var confirmationSlot: ConfirmationSlot?
    /// The outstanding `user/ask`, which `session/cancel` withdraws.
    var askUserRequest: Task<JSONValue, any Error>?

    init(calls: [ModelToolCall], context: ToolStageContext) {
        self.context = context
        self.calls = calls.map { ToolCallState(call: $0) }
    }

    /// The calls of a continued round trip, with what was sent of each before.
    init(continuing calls: [(call: ModelToolCall, sends: CallSends?)], context: ToolStageContext) {
        self.context = context
        self.calls = calls.map { ToolCallState(call: $0.call, priorSends: $0.sends?.count ?? 0, priorArguments: $0.sends?.arguments) }
    }

    /// The calls handed to their executor and not answered yet, in call order.
    var activeToolCalls: [ToolCallRecord] {
        calls.compactMap { state in
            guard state.phase == .sent, let arguments = state.sentArguments else { return nil }
            return ToolCallRecord(callId: state.call.id, name: state.call.name, arguments: arguments)
        }
    }

    /// Runs every call, one after another in call order; each is a checkpoint
    /// before it starts. Returns their outcomes in call order. Throws what ends
    /// the turn (a stop, a veto, `denyAndStop`, an executor failure); the
    /// outputs recorded before that stay.
    func run(host: isolated Host) async throws -> [ToolCallOutcome] {
        var outcomes: [ToolCallOutcome] = []
        outcomes.reserveCapacity(calls.count)
        for index in calls.indices {
            try context.control.checkpoint()
            outcomes.append(try await runCall(at: index, host: host))
        }
        return outcomes
    }

    func setPhase(_ phase: ToolCallState.Phase, of index: Int) {
        calls[index].phase = phase
    }

    /// Journals the send (after a crash the call is then known to be in doubt,
    /// docs/protocol.md "Durable sessions"), then marks the call sent.
    func markSent(_ index: Int, arguments: JSONValue, edited: Bool, host: isolated Host) throws {
        // Not `edited ? arguments : nil`: that nil would be JSON null.
        var editedArguments: JSONValue?
        if edited { editedArguments = arguments }
        try host.recordCallSent(calls[index].call.id, turn: context.turnId, attempt: calls[index].priorSends + 1, arguments: editedArguments)
        calls[index].phase = .sent
        calls[index].sentArguments = arguments
    }

    func markAnswered(_ index: Int, outcome: ToolOutcome) {
        calls[index].phase = .answered
        calls[index].outcome = outcome
    }

    // MARK: The built-in confirmation's mailbox

    /// Shows `pending` in `getState` and returns the slot its answer will arrive in.
    func openConfirmation(_ pending: PendingConfirmation, schema: JSONValue?) -> ConfirmationSlot {
        let slot = ConfirmationSlot()
        pendingConfirmation = pending
        pendingConfirmationSchema = schema
        confirmationSlot = slot
        return slot
    }

    func closeConfirmation() {
        pendingConfirmation = nil
        pendingConfirmationSchema = nil
        confirmationSlot = nil
    }

    /// Whether `session/confirm` for `callId` would settle the pending confirmation.
    func confirmationIsOpen(callId: String) -> Bool {
        guard let pending = pendingConfirmation, pending.callId == callId, let slot = confirmationSlot else { return false }
        return !slot.isSettled
    }

    /// Settles the pending built-in confirmation (if it is `callId`'s, when given).
    @discardableResult
    func resolveConfirmation(_ answer: ConfirmationAnswer, callId: String? = nil) -> Bool {
        guard let pending = pendingConfirmation, callId == nil || callId == pending.callId, let slot = confirmationSlot else { return false }
        return slot.settle(answer)
    }

    /// `session/cancel`: the pending confirmation is denied and the question to the user withdrawn.
    func cancel() {
        resolveConfirmation(ConfirmationAnswer(decision: .deny, source: .cancel, reason: "the turn was cancelled"))
        askUserRequest?.cancel()
    }
}

/// A built-in confirmation's answer: settled once, by whichever comes first
/// (`session/confirm`, the timeout, a cancel; the last two from outside the
/// session's actor), and awaited once. An answer that arrives before the wait
/// begins is kept for it.
final class ConfirmationSlot: Sendable {
    private enum State {
        case open
        case waiting(CheckedContinuation<ConfirmationAnswer, Never>)
        case settled(ConfirmationAnswer)
        case delivered
    }
    private let state = Mutex<State>(.open)

    var isSettled: Bool {
        state.withLock { if case .open = $0 { return false }; if case .waiting = $0 { return false }; return true }
    }

    /// Returns false when an answer was already given.
    @discardableResult
    func settle(_ answer: ConfirmationAnswer) -> Bool {
        let waiter = state.withLock { state -> CheckedContinuation<ConfirmationAnswer, Never>?? in
            switch state {
            case .open:
                state = .settled(answer)
                return .some(nil)
            case .waiting(let continuation):
                state = .delivered
                return .some(continuation)
            case .settled, .delivered:
                return nil
            }
        }
        guard let waiter else { return false }
        waiter?.resume(returning: answer)
        return true
    }

    func wait() async -> ConfirmationAnswer {
        await withCheckedContinuation { continuation in
            let early = state.withLock { state -> ConfirmationAnswer? in
                if case .settled(let answer) = state {
                    state = .delivered
                    return answer
                }
                state = .waiting(continuation)
                return nil
            }
            if let early { continuation.resume(returning: early) }
        }
    }
}
