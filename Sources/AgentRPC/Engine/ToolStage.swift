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
    /// Keeps an `ok` result's undo durably, so a turn cut by a crash can still be rolled back.
    func recordUndo(_ record: UndoRecord) throws
    /// Keeps a result's images and audio durably (before its entry names them);
    /// what its entry holds of them, in order, without those it cannot take.
    func keepMedia(_ media: [MediaContent]) throws -> [MediaReference]
    /// Journals that a call of the turn is about to be handed to its executor
    /// (`attempt`: which send; `arguments`: edited ones the user approved).
    func recordCallSent(_ callID: String, turn: String, attempt: Int, arguments: JSONValue?) throws
    /// Journals, in a session that parks, that the user is about to be asked
    /// about a call (its confirmation, `ask_user`'s question) for the `attempt`th time.
    func recordCallAsked(_ callID: String, turn: String, attempt: Int) throws
    /// Checks a client's confirmation answer (edited arguments against the
    /// schema, a rule's scope) and, for `approveForSession`, adds the rule.
    func acceptDecision(
        _ decision: ConfirmationDecision, reason: String?, arguments: JSONValue?, rule: ApprovalScope?,
        tool: String, schema: JSONValue?, source: ConfirmationSource
    ) throws -> ConfirmationAnswer
    /// Runs a call on the MCP server that offers `name`; nil when no server does.
    /// Cancelling the calling task withdraws the call.
    /// `elicitation` asks the client's user for a server's form (nil: the client does not answer `user/elicit`).
    func runMCPTool(named name: String, callId: String, arguments: JSONValue, timeout: Double, elicitation: MCPElicitation?) async throws -> (ToolOutcome, JSONValue)?
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
/// executor, whether its result came back and whether its output is recorded
/// is read here and nowhere else.
struct ToolCallState: Sendable {
    enum Phase: Sendable, Equatable {
        /// Not started: no event, nothing sent.
        case waiting
        /// Validation, hooks, guards, approval rules, confirmation: nothing sent yet.
        case checking
        /// Passed its checks; waits for its turn to run (a free slot, or the calls before it).
        case ready
        /// Running: handed to its executor (the client's `tool/call`, an MCP server, the engine), no result yet.
        case sent
        /// Its result is back; its `toolOutput` entry waits for the calls before it.
        case finished
        /// Its `toolOutput` entry is in the transcript.
        case answered
        /// Withdrawn (a cancel, a failed turn) or never run: it has no output.
        case withdrawn
    }
    let call: ModelToolCall
    /// `call.argumentsJSON` parsed (nil: not valid JSON), when the turn parsed
    /// it already for the round trip's `toolCalls` entry; unset, admission parses it.
    var parsedArguments: JSONValue?? = .none
    var phase: Phase = .waiting
    /// The arguments it was handed over with (edited ones after an approval), once sent.
    var sentArguments: JSONValue?
    /// How it ended, once it did (`finished` onwards).
    var result: ToolCallOutcome?
    /// Edited arguments the user approved: recorded with the output.
    var approvedArguments: JSONValue?
    /// An `ok` result's undo.
    var undo: JSONValue?
    /// Its `onToolCall` hook ran, so its `onToolOutput` must too.
    var hooked = false
    /// `toolCallFinished` went out when the result came, before the entry.
    var announced = false
    /// It runs on an MCP server (`session/cancel` withdraws it).
    var onMCPServer = false
    var span: ActiveSpan?
    /// A parked or crashed turn's call continued by `session/continue`: how
    /// many times it was sent before (0: never, it runs as any call) and the
    /// edited arguments it was approved with. A call sent before is in doubt:
    /// it is sent again as it was, without asking again.
    var priorSends = 0
    var priorArguments: JSONValue?
    /// How many times the user was asked about it before (its confirmation,
    /// `ask_user`'s question): the next question carries `attempt`.
    var priorAsks = 0
}

/// How one call ended, as the turn loop sees it.
struct ToolCallOutcome: Sendable, Equatable {
    let callId: String
    let outcome: ToolOutcome
    let content: JSONValue
    /// A `final` tool's arguments: the turn ends with them.
    var finalAnswer: JSONValue?
    /// The images and audio taken out of `content` (`ToolMedia.split`).
    var media: [MediaContent] = []
}

/// Runs the tool calls of one round trip: validation, hooks, guards, approval
/// rules, confirmation, `ask_user`, execution (the client, an MCP server, the
/// engine), undo records and the `toolOutput` entries, and returns how each
/// call ended, in call order. It reaches the session only through
/// `ToolStageHost`, and runs isolated to it. What `getState` shows of the
/// calls (`activeToolCalls`, `pendingConfirmation`) is read from here.
///
/// Three lanes, each a task on the host's actor (docs/protocol.md §5):
/// - admission, in call order: the checks and the confirmation of each call;
///   a call that may run in parallel starts as soon as it passed them (at most
///   `maxParallelToolCalls` at once), an exclusive one once every call before
///   it is recorded, and the next call is admitted once it is recorded too;
/// - one execution per call that runs;
/// - recording, in call order: each output entry once every earlier one is in,
///   then `onToolOutput`.
/// `runAlone`, `admit` and `execute` are `@inline(__always)`, as the turn's
/// round trip layers are (`TurnRunner`): two executor checks saved per call.
final class ToolStage<Host: ToolStageHost> {
    let context: ToolStageContext
    /// Every call of the round trip, in call order.
    // This and the lanes' counters below are read and changed on the host's
    // actor only, and no access spans a suspension: the runtime's exclusivity
    // check (a call, and a set to search, per access; ~20 a round trip) is left out.
    @exclusivity(unchecked) private(set) var calls: [ToolCallState]
    /// The built-in confirmation waiting for `session/confirm`.
    private(set) var pendingConfirmation: PendingConfirmation?
    /// The input schema of the call waiting for `session/confirm`, for edited arguments.
    private(set) var pendingConfirmationSchema: JSONValue?
    private var confirmationSlot: ConfirmationSlot?
    /// The outstanding `user/ask`, which `session/cancel` withdraws.
    var askUserRequest: Task<JSONValue, any Error>?

    // The lanes meet here; read and changed on the host's actor only.
    private let changes = ChangeSignal()
    private let lanes = StageTasks()
    /// Calls admitted so far: `0..<admitted` (admission goes in call order).
    @exclusivity(unchecked) private var admitted = 0
    @exclusivity(unchecked) private var admitting = true
    /// Calls recorded or withdrawn so far: `0..<recorded`.
    @exclusivity(unchecked) private var recorded = 0
    /// Executions under way.
    @exclusivity(unchecked) private var running = 0
    /// The next call is admitted once `recorded` reaches this (an exclusive
    /// call, or one settled while nothing ran before it, is recorded first).
    @exclusivity(unchecked) private var admitAfter = 0
    /// Ends the run once what is under way settled: `session/cancel` seen at a
    /// checkpoint, or a `denyAndStop`. Client calls already sent finish and
    /// are recorded; nothing new starts.
    private var stop: (any Error)?
    /// Ends the run at once: every call under way is withdrawn.
    private var failure: (any Error)?

    /// `parsedArguments`, when given, holds each call's arguments as parsed
    /// for its entry (nil where they are not valid JSON), so they are not parsed twice.
    /// The context is taken over, not copied (its many references retained again).
    init(calls: [ModelToolCall], parsedArguments: [JSONValue?]? = nil, context: consuming ToolStageContext) {
        self.context = context
        self.calls = calls.map { ToolCallState(call: $0) }
        if let parsedArguments, parsedArguments.count == calls.count {
            for index in self.calls.indices { self.calls[index].parsedArguments = .some(parsedArguments[index]) }
        }
    }

    /// The calls of a continued round trip, with what was sent of each before.
    init(continuing calls: [(call: ModelToolCall, sends: CallSends?, asks: Int)], context: ToolStageContext) {
        self.context = context
        self.calls = calls.map { ToolCallState(call: $0.call, priorSends: $0.sends?.count ?? 0, priorArguments: $0.sends?.arguments, priorAsks: $0.asks) }
    }

    /// Journals that the user is asked about the call now and returns the
    /// `attempt` the question carries (nil the first time).
    func markAsked(_ index: Int, host: isolated Host) throws -> Int? {
        let attempt = calls[index].priorAsks + 1
        try host.recordCallAsked(calls[index].call.id, turn: context.turnId, attempt: attempt)
        return attempt > 1 ? attempt : nil
    }

    /// The calls handed to their executor and not back yet, in call order.
    var activeToolCalls: [ToolCallRecord] {
        calls.compactMap { state in
            guard state.phase == .sent, let arguments = state.sentArguments else { return nil }
            return ToolCallRecord(callId: state.call.id, name: state.call.name, arguments: arguments)
        }
    }

    /// The undo of every `ok` result that carried one, in call order: rolled back newest first.
    var undoRecords: [UndoRecord] {
        calls.compactMap { state in
            state.undo.map { UndoRecord(turnId: context.turnId, callId: state.call.id, name: state.call.name, undo: $0) }
        }
    }

    /// Runs the calls and returns their outcomes in call order. Throws what
    /// ends the turn (a stop, a veto, `denyAndStop`, an executor failure);
    /// the outputs recorded before that stay.
    func run(host: isolated Host) async throws -> [ToolCallOutcome] {
        guard !calls.isEmpty else { return [] }
        if calls.count == 1, source(of: calls[0].call.name) == nil {
            await runAlone(host: host)
            return try outcomesInCallOrder()
        }
        let admission = Task { [self] in
            _ = host
            await self.admitInOrder(host: host)
        }
        let recording = Task { [self] in
            _ = host
            await self.recordInOrder(host: host)
        }
        lanes.add(.admission, admission)
        lanes.add(.recording, recording)
        let lanes = self.lanes
        await withTaskCancellationHandler {
            await admission.value
            await recording.value
            // Nothing starts after admission ended: these are the last.
            for execution in lanes.executions() { await execution.value }
        } onCancel: {
            lanes.cancelAll()
        }
        return try outcomesInCallOrder()
    }

    /// What the run returns once its lanes are done: the outcomes in call
    /// order, or what ends the turn.
    private func outcomesInCallOrder() throws -> [ToolCallOutcome] {
        let ending = failure ?? ((Task.isCancelled || context.control.reason != nil) ? CancellationError() : stop)
        if let ending {
            for index in calls.indices where calls[index].span != nil {
                calls[index].span?.end(status: .error("\(ending)"))
                calls[index].span = nil
            }
            throw ending
        }
        return calls.compactMap(\.result)
    }

    /// A round trip of one call (most are) that no MCP server runs: the three
    /// lanes' steps one after another in the calling task, without their
    /// tasks and wake-ups. The events, entries and ending are those the lanes
    /// give one call; cancelling the calling task withdraws the call as
    /// cancelling the lanes does. An MCP server's call keeps its lanes:
    /// `session/cancel` withdraws its execution alone (`withdrawMCPCalls`).
    @inline(__always) private func runAlone(host: isolated Host) async {
        guard !Task.isCancelled else { return }
        do {
            try context.control.checkpoint()
        } catch {
            end(with: error)
            return
        }
        admitted = 1
        let admission: Admission
        do {
            admission = try await admit(at: 0, host: host)
        } catch {
            withdraw(0)
            end(with: error)
            return
        }
        switch admission {
        case .settled(let outcome, let stopAfter):
            finish(0, outcome, host: host)
            if let stopAfter { end(with: stopAfter) }
        case .execute(let execution):
            guard failure == nil, !Task.isCancelled else {
                withdraw(0)
                return
            }
            running = 1
            do {
                finish(0, try await execute(0, execution, host: host), host: host)
            } catch {
                context.progress.end(calls[0].call.id)
                withdraw(0)
                if !(error is CancellationError) { fail(error) }
            }
            running = 0
        }
        admitting = false
        // The recording lane's checks: a withdrawn run records nothing.
        guard failure == nil, !Task.isCancelled, calls[0].result != nil else { return }
        do {
            try await record(0, host: host)
        } catch {
            fail(error)
            return
        }
        recorded = 1
    }

    // MARK: Admission

    private func admitInOrder(host: isolated Host) async {
        defer {
            admitting = false
            changes.fire()
        }
        for index in calls.indices {
            await waitUntil(host: host) { self.recorded >= self.admitAfter || self.failure != nil }
            guard failure == nil, !Task.isCancelled else { return }
            do {
                try context.control.checkpoint()
            } catch {
                end(with: error)
                return
            }
            admitted = index + 1
            let admission: Admission
            do {
                admission = try await admit(at: index, host: host)
            } catch {
                withdraw(index)
                end(with: error)
                return
            }
            switch admission {
            case .settled(let outcome, let stopAfter):
                finish(index, outcome, host: host)
                // Nothing ran before it: its output comes before the next call starts.
                if calls[..<index].allSatisfy({ $0.result != nil || $0.phase == .withdrawn }) { admitAfter = index + 1 }
                if let stopAfter {
                    end(with: stopAfter)
                    return
                }
            case .execute(let execution):
                calls[index].phase = .ready
                let cap = max(1, context.limits.maxParallelToolCalls)
                if execution.parallel {
                    await waitUntil(host: host) { self.running < cap || self.failure != nil }
                } else {
                    // Exclusive: alone, after every call before it is recorded; the next waits for it.
                    await waitUntil(host: host) { (self.recorded == index && self.running == 0) || self.failure != nil }
                    admitAfter = index + 1
                }
                guard failure == nil, !Task.isCancelled else {
                    withdraw(index)
                    return
                }
                launch(index, execution, host: host)
            }
        }
    }

    /// A stop waits for what is under way; anything else withdraws it.
    private func end(with error: any Error) {
        if error is TurnStop {
            if stop == nil { stop = error }
            withdrawMCPCalls()
        } else {
            fail(error)
        }
        changes.fire()
    }

    /// The first failure ends the run: every call under way is withdrawn.
    private func fail(_ error: any Error) {
        if failure == nil { failure = error }
        lanes.cancelExecutions()
        lanes.cancel(.admission)
        confirmationSlot?.settle(ConfirmationAnswer(decision: .deny, source: .cancel, reason: "the turn failed"))
        askUserRequest?.cancel()
        changes.fire()
    }

    private func withdraw(_ index: Int) {
        guard calls[index].result == nil else { return }
        calls[index].phase = .withdrawn
        changes.fire()
    }

    // MARK: Execution

    private func launch(_ index: Int, _ execution: Execution, host: isolated Host) {
        running += 1
        let task = Task { [self] in
            _ = host
            do {
                let outcome = try await self.execute(index, execution, host: host)
                self.finish(index, outcome, host: host)
            } catch is CancellationError {
                self.context.progress.end(self.calls[index].call.id)
                self.withdraw(index)
            } catch {
                self.context.progress.end(self.calls[index].call.id)
                self.withdraw(index)
                self.fail(error)
            }
            self.running -= 1
            self.lanes.remove(.execution(index))
            self.changes.fire()
        }
        lanes.add(.execution(index), task)
    }

    /// A call's result is back. Its output is recorded in call order; when an
    /// earlier call is still out, `toolCallFinished` says so now.
    private func finish(_ index: Int, _ outcome: ToolCallOutcome, host: isolated Host) {
        // The last progress report held back goes out now; none after `toolCallFinished`.
        if let held = context.progress.end(calls[index].call.id) { host.emit(SessionEvent(held), turn: context.turnId) }
        calls[index].result = outcome
        calls[index].phase = .finished
        if calls[..<index].contains(where: { $0.result == nil && $0.phase != .withdrawn }) {
            calls[index].announced = true
            announce(index, host: host)
        }
        changes.fire()
    }

    private func announce(_ index: Int, host: isolated Host) {
        guard let outcome = calls[index].result else { return }
        let call = calls[index].call
        host.emit(
            .toolCallFinished(
                callId: call.id, name: call.name, outcome: outcome.outcome, content: outcome.content, source: source(of: call.name),
                media: outcome.media.isEmpty ? nil : outcome.media),
            turn: context.turnId)
    }

    // MARK: Recording

    private func recordInOrder(host: isolated Host) async {
        while true {
            await waitUntil(host: host) {
                self.failure != nil || (self.recorded < self.admitted && self.calls[self.recorded].phase.isSettled)
                    || (!self.admitting && self.recorded >= self.admitted)
            }
            guard failure == nil, !Task.isCancelled, !lanes.allCancelled, recorded < admitted else { return }
            let index = recorded
            if calls[index].result != nil {
                do {
                    try await record(index, host: host)
                } catch {
                    fail(error)
                    return
                }
            }
            recorded += 1
            changes.fire()
        }
    }

    /// The call's `toolOutput` entry, `toolCallFinished` unless it went out
    /// already, and `onToolOutput`.
    private func record(_ index: Int, host: isolated Host) async throws {
        guard let outcome = calls[index].result else { return }
        let call = calls[index].call
        let media = outcome.media.isEmpty ? nil : try host.keepMedia(outcome.media)
        try host.append(.toolOutput(
            callId: call.id, name: call.name, outcome: outcome.outcome, content: outcome.content, profile: context.profile.name,
            approvedArguments: calls[index].approvedArguments, media: media.flatMap { $0.isEmpty ? nil : $0 }), turn: context.turnId)
        if !calls[index].announced { announce(index, host: host) }
        calls[index].phase = .answered
        if let span = calls[index].span {
            span.recordToolOutcome(outcome.outcome)
            if span.includesPayloads { span.setPayload(SpanAttributeKey.toolOutput, outcome.content.stringValue ?? outcome.content.serializedString()) }
        }
        if calls[index].hooked, context.profile.hooks[.onToolOutput]?.isEmpty == false {
            try await host.runToolHook(.onToolOutput, profile: context.profile, toolName: call.name, payload: [
                "callId": .string(call.id), "name": .string(call.name), "outcome": .string(outcome.outcome.rawValue), "content": outcome.content,
            ])
        }
        calls[index].span?.end()
        calls[index].span = nil
    }

    // MARK: Coordination

    /// Returns once `condition` holds (checked on the host's actor after each
    /// change) or the task is cancelled.
    private func waitUntil(host: isolated Host, _ condition: () -> Bool) async {
        while !condition() && !Task.isCancelled {
            await changes.wait(after: changes.generation)
        }
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

    func setApprovedArguments(_ arguments: JSONValue?, of index: Int) {
        calls[index].approvedArguments = arguments
    }

    func setHooked(_ index: Int) {
        calls[index].hooked = true
    }

    func setSpan(_ span: ActiveSpan?, of index: Int) {
        calls[index].span = span
    }

    func setOnMCPServer(_ index: Int) {
        calls[index].onMCPServer = true
    }

    func setUndo(_ undo: JSONValue, of index: Int) {
        calls[index].undo = undo
    }

    // MARK: session/cancel and the built-in confirmation's mailbox

    /// `session/cancel`: the pending confirmation is denied, the question to
    /// the user withdrawn, and the calls on MCP servers withdrawn (their wait
    /// is a checkpoint, as a wait for the model is); client calls already sent
    /// finish and are recorded.
    func cancel() {
        if stop == nil { stop = TurnStop.cooperativeCancel }
        resolveConfirmation(ConfirmationAnswer(decision: .deny, source: .cancel, reason: "the turn was cancelled"))
        askUserRequest?.cancel()
        withdrawMCPCalls()
        changes.fire()
    }

    private func withdrawMCPCalls() {
        for index in calls.indices where calls[index].onMCPServer && calls[index].phase == .sent {
            lanes.cancel(.execution(index))
        }
    }

    /// Shows `pending` in `getState` and returns the slot its answer will arrive in.
    func openConfirmation(_ pending: PendingConfirmation, schema: JSONValue?) -> ConfirmationSlot {
        let slot = ConfirmationSlot()
        pendingConfirmation = pending
        pendingConfirmationSchema = schema
        confirmationSlot = slot
        if failure != nil { slot.settle(ConfirmationAnswer(decision: .deny, source: .cancel, reason: "the turn failed")) }
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
}

extension ToolCallState.Phase {
    /// Nothing more will happen to the call but its recording.
    var isSettled: Bool { self == .finished || self == .withdrawn || self == .answered }
}

/// What admission decided for a call.
enum Admission {
    /// It needs no execution: its outcome is known (a failed check, a denial, a
    /// final answer). `stopAfter`: the turn ends once it is recorded.
    case settled(ToolCallOutcome, stopAfter: TurnStop? = nil)
    case execute(Execution)
}

/// A call that passed its checks, and how it runs.
struct Execution {
    enum Target {
        /// A client tool or an MCP server's.
        case tool
        case askUser
        case builtin(ResolvedTool)
    }
    let target: Target
    let arguments: JSONValue
    /// It may run beside other such calls; otherwise it runs alone.
    let parallel: Bool
}

/// The stage's lanes and executions, which a cancel reaches from any thread.
final class StageTasks: Sendable {
    enum Key: Hashable, Sendable {
        case admission
        case recording
        case execution(Int)
    }
    private let tasks = Mutex<(all: [Key: Task<Void, Never>], cancelled: Bool)>(([:], false))

    func add(_ key: Key, _ task: Task<Void, Never>) {
        let cancelled = tasks.withLock { state -> Bool in
            state.all[key] = task
            return state.cancelled
        }
        if cancelled { task.cancel() }
    }

    func remove(_ key: Key) {
        _ = tasks.withLock { $0.all.removeValue(forKey: key) }
    }

    func cancel(_ key: Key) {
        tasks.withLock { $0.all[key] }?.cancel()
    }

    func cancelExecutions() {
        for task in executions() { task.cancel() }
    }

    /// Cancels every task, and any added later: the lanes first, so that no
    /// output is recorded once a withdrawn call lets the recording lane on.
    func cancelAll() {
        let all = tasks.withLock { state -> [Task<Void, Never>] in
            state.cancelled = true
            return [state.all[.admission], state.all[.recording]].compactMap { $0 } + executions(in: state.all)
        }
        for task in all { task.cancel() }
    }

    /// `cancelAll` was called: the run is being withdrawn as a whole.
    var allCancelled: Bool { tasks.withLock { $0.cancelled } }

    func executions() -> [Task<Void, Never>] {
        tasks.withLock { executions(in: $0.all) }
    }

    private func executions(in all: [Key: Task<Void, Never>]) -> [Task<Void, Never>] {
        all.filter { if case .execution = $0.key { return true } else { return false } }.map(\.value)
    }
}

/// Wakes the stage's lanes when something they wait for may have changed.
/// Sendable: a cancel handler fires it from any thread.
final class ChangeSignal: Sendable {
    private let state = Mutex<(generation: UInt64, waiters: [CheckedContinuation<Void, Never>])>((0, []))

    var generation: UInt64 { state.withLock { $0.generation } }

    func fire() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns at the first `fire` after `generation` was read (at once if one
    /// came already), or when the task is cancelled.
    func wait(after generation: UInt64) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    guard state.generation == generation else { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            fire()
        }
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
        state.withLock {
            switch $0 {
            case .open, .waiting: return false
            case .settled, .delivered: return true
            }
        }
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
