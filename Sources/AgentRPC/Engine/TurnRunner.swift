import AgentRPCProtocol

/// Everything that lives for one turn: the turn loop's own `TurnState`, what
/// `getState` shows of the turn, the switches it is stopped with
/// (`TurnControl`), and its mailbox. Steering, confirmation answers and
/// cancels reach the running turn as messages to it (`steer`, `resolveConfirmation`,
/// `cancel`, `abort`); the loop takes them in at its checkpoints.
///
/// `beginTurn` creates one per turn. The session keeps the last one after the
/// turn ended, because `getState` still shows that turn (`turnId`,
/// `currentText`, its usage and diagnostics) until the next one starts.
/// Used only on the session actor: a class that is not `Sendable`, so the
/// compiler keeps it there. The async layers of a round trip (`roundTrip`,
/// `send`, `streamWithRetries`, `stream`, `runTools`, `enterProfile`) are
/// `@inline(__always)`: an async call between two of them cost the runtime a
/// task-executor check at the callee's entry and another at the caller's
/// resumption (~240 instructions each, under the turn's executor preference).
final class TurnRunner {
    let id: String
    let control: TurnControl
    private let events: SessionEvents
    /// Limits, counters, usage, the undo log and spans: read and changed only by
    /// the turn's task (the loop, its tool calls and hooks). No access spans a
    /// suspension (`TurnState` has no async mutating method, and it is never
    /// passed `inout` to an async call), so the runtime's exclusivity check
    /// per access is left out, as for `shownText`. Read by its fields: a method
    /// or computed property of the whole state, or the state passed as an
    /// argument, copies it (a retain and a release of each of its fields).
    @exclusivity(unchecked) var turn: TurnState
    /// The span new model and tool spans hang under.
    var spanParent: SpanContext? { turn.agentSpan?.context ?? turn.turnSpan?.context }

    // What getState shows (docs/protocol.md §3); when each changes is in docs/turns.md.
    private(set) var isRunning = true
    /// The shown text of the running reply, as UTF-8: appended once per
    /// streamed delta (bytes are appended for less than a string's append
    /// costs), made a string only when read (`currentText`). Only the
    /// session actor touches a runner, and no access to it spans a
    /// suspension, so the runtime's exclusivity check per append is left out.
    @exclusivity(unchecked) var shownText: [UInt8] = []
    var currentText: String {
        get { String(decoding: shownText, as: UTF8.self) }
        set { shownText = Array(newValue.utf8) }
    }
    /// The tool calls of the round trip running now, if any (`ToolStage`).
    var toolStage: ToolStage<AgentSession>?
    var activeToolCalls: [ToolCallRecord] { toolStage?.activeToolCalls ?? [] }
    var pendingConfirmation: PendingConfirmation? { toolStage?.pendingConfirmation }
    /// The input schema of the call waiting for `session/confirm`, for edited arguments.
    var pendingConfirmationSchema: JSONValue? { toolStage?.pendingConfirmationSchema }
    var lastUsageReport: Usage?
    let schemaWarnings: [SchemaWarning]
    var contextDiagnostics: [ContextDiagnostic]
    /// A runner of the engine's own work outside any turn (`session/compact`):
    /// its model requests go through the turn's code, but there is no turn to
    /// announce, tag events with or end.
    let isMaintenance: Bool
    /// The id events, errors and dumps name: none for maintenance work.
    var turnIDForClients: String? { isMaintenance ? nil : turn.id }

    // The mailbox
    /// `session/steer` input waiting for the next checkpoint.
    private var pendingSteering: [TurnInput] = []
    /// Set once the turn has decided to end: steering would be lost now.
    var finishing = false

    /// `previous`: the session's last turn, whose context diagnostics stay
    /// visible until this turn refreshes its context sources.
    init(turn: TurnState, events: SessionEvents, schemaWarnings: [SchemaWarning], previous: TurnRunner?) {
        self.id = turn.id
        self.turn = turn
        self.control = TurnControl(turnId: turn.id)
        self.events = events
        self.schemaWarnings = schemaWarnings
        self.contextDiagnostics = previous?.contextDiagnostics ?? []
        self.isMaintenance = false
        events.runningTurnId = turn.id
    }

    /// A maintenance runner (`isMaintenance`) on the session's limits.
    init(maintenanceOn turn: TurnState, events: SessionEvents) {
        self.id = turn.id
        self.turn = turn
        self.control = TurnControl(turnId: turn.id)
        self.events = events
        self.schemaWarnings = []
        self.contextDiagnostics = []
        self.isMaintenance = true
    }

    /// The turn ended: nothing is pending any more. Steering that no checkpoint
    /// took in ends with the turn (docs/protocol.md §17).
    func end() {
        isRunning = false
        toolStage = nil
        pendingSteering = []
        finishing = false
        if !isMaintenance, events.runningTurnId == id { events.runningTurnId = nil }
    }

    // MARK: Steering

    /// Whether input sent now would still reach the model in this turn.
    var takesSteering: Bool {
        isRunning && !finishing && control.reason == nil && !control.cooperativeCancelRequested
    }

    var hasSteering: Bool { !pendingSteering.isEmpty }
    var steeringWaiting: Int { pendingSteering.count }

    /// `session/steer`: queued for the next checkpoint (the session checked the input).
    func steer(_ input: TurnInput) {
        pendingSteering.append(input)
    }

    /// The checkpoint before a round trip takes every steering input that arrived.
    func takeSteering() -> [TurnInput] {
        defer { pendingSteering = [] }
        return pendingSteering
    }

    // MARK: Stopping

    /// `session/cancel`: observed at the next checkpoint; a built-in confirmation
    /// is denied and a question to the user withdrawn at once.
    func cancel() {
        control.requestCooperativeCancel()
        toolStage?.cancel()
    }

    /// Close or shutdown: the turn stops now.
    func abort(_ reason: AbortReason) {
        control.abort(reason)
        resolveConfirmation(ConfirmationAnswer(decision: .deny, source: .cancel, reason: "the session is closing"))
    }

    // MARK: Confirmation

    /// Whether `session/confirm` for `callId` would settle the pending confirmation.
    func confirmationIsOpen(callId: String) -> Bool {
        toolStage?.confirmationIsOpen(callId: callId) ?? false
    }

    /// Settles the waiting built-in confirmation, if any (and if it is `callId`'s).
    @discardableResult
    func resolveConfirmation(_ answer: ConfirmationAnswer, callId: String? = nil) -> Bool {
        toolStage?.resolveConfirmation(answer, callId: callId) ?? false
    }

    /// The client's input closed while the turn waited on it: the turn ends as
    /// it does at end of input (`data.source: "shutdown"`), whichever noticed first.
    func clientGone() -> CancellationError {
        if isRunning { control.abort(.shutdown) }
        return CancellationError()
    }
}
