import AgentRPCProtocol
import Synchronization

/// Why a turn is being stopped from outside its own loop.
enum AbortReason: Sendable, Equatable {
    /// `$/cancelRequest` on the send request id: immediate.
    case requestCancelled
    /// `wallClockSeconds` ran out.
    case wallClock(limit: Double)
    /// `session/close` or `session/delete`.
    case closed
    /// End of input, `shutdown` or `exit`.
    case shutdown
    /// `session/park`: the turn stopped at a wait for the client and stays
    /// open for `session/continue`.
    case parked
}

/// The switches one running turn can be stopped with. Shared between the
/// session actor, the dispatcher's request task and the wall-clock watchdog,
/// so it is lock-based rather than actor-isolated: cancellation handlers are
/// synchronous and cannot hop onto an actor.
final class TurnControl: Sendable {
    let turnId: String
    private let abortReason = Mutex<AbortReason?>(nil)
    private let task = Mutex<Task<TurnOutcome, any Error>?>(nil)
    private let cooperative = Mutex<Bool>(false)
    /// True while the turn waits for the provider (its next stream event or a
    /// retry backoff): that wait is itself a checkpoint, so a cooperative cancel
    /// must end it rather than wait for an event a stalled stream never sends.
    private let waitingForProvider = Mutex<Bool>(false)
    /// `session/park` was asked for, and how many waits for the client (a
    /// `tool/call`, a confirmation, a `user/ask`, a hook) are under way now.
    private let parking = Mutex<(requested: Bool, clientWaits: Int)>((false, 0))

    init(turnId: String) { self.turnId = turnId }

    func attach(_ t: Task<TurnOutcome, any Error>) {
        let alreadyAborted = task.withLock { slot -> Bool in
            slot = t
            return abortReason.withLock { $0 != nil }
        }
        if alreadyAborted { t.cancel() }
    }

    /// Stops the turn now; the first reason recorded wins.
    func abort(_ reason: AbortReason) {
        abortReason.withLock { if $0 == nil { $0 = reason } }
        task.withLock { $0 }?.cancel()
    }

    var reason: AbortReason? { abortReason.withLock { $0 } }

    /// `session/cancel`: observed at the next checkpoint. A turn that is waiting
    /// for the provider is at a checkpoint already, so its wait is ended now.
    func requestCooperativeCancel() {
        cooperative.withLock { $0 = true }
        if waitingForProvider.withLock({ $0 }) { task.withLock { $0 }?.cancel() }
    }

    /// Marks the span in which the turn only waits for the provider; a
    /// cooperative cancel arriving meanwhile interrupts the wait.
    func setWaitingForProvider(_ waiting: Bool) {
        waitingForProvider.withLock { $0 = waiting }
        if waiting && cooperativeCancelRequested { task.withLock { $0 }?.cancel() }
    }
    var cooperativeCancelRequested: Bool { cooperative.withLock { $0 } }

    /// `session/park`: a turn that waits for the client now parks now; any
    /// other parks when it next would (`beginClientWait`).
    func requestPark() {
        let waiting = parking.withLock { state -> Bool in
            state.requested = true
            return state.clientWaits > 0
        }
        if waiting { abort(.parked) }
    }

    /// The turn is about to wait for the client. Throws (and stops the turn)
    /// instead when a park was asked for: nothing is sent.
    func beginClientWait() throws {
        let park = parking.withLock { state -> Bool in
            if !state.requested { state.clientWaits += 1 }
            return state.requested
        }
        if park {
            abort(.parked)
            throw CancellationError()
        }
    }

    func endClientWait() {
        parking.withLock { $0.clientWaits -= 1 }
    }

    /// Cooperative cancellation points: between stream events, between tool calls,
    /// after the stream drains.
    func checkpoint() throws {
        if cooperativeCancelRequested { throw TurnStop.cooperativeCancel }
        if reason != nil { throw CancellationError() }
    }

    /// Awaits the end of the turn's task, whatever it was; cancelling the
    /// waiter does not stop the turn (`session/park` waits with this).
    func settled() async {
        _ = try? await task.withLock { $0 }?.value
    }

    /// Awaits the turn, turning cancellation of the awaiting request into an
    /// immediate abort of the turn.
    func result() async throws -> TurnOutcome {
        guard let t = task.withLock({ $0 }) else { throw RPCError.internalError("turn task missing") }
        return try await withTaskCancellationHandler {
            try await t.value
        } onCancel: {
            self.abort(.requestCancelled)
        }
    }
}

/// What a finished turn produced.
struct TurnOutcome: Sendable {
    var turnResult: TurnResult
    /// The validated value of a `session/generate` turn.
    var structuredValue: JSONValue?
}

/// Chat turns run the tool loop; generate turns ask for structured output.
enum TurnMode: Sendable {
    case chat
    case generate(schema: JSONValue, strict: Bool)

    /// Whether a session that parks parks it. A generate turn does not: it
    /// offers no tools (only a client hook would wait on the client), and what
    /// it answers is not the `TurnResult` `session/continue` answers.
    var parks: Bool {
        if case .chat = self { return true }
        return false
    }
}

/// Errors raised inside the loop that are not already RPC errors.
enum TurnStop: Error {
    /// `session/cancel` observed at a checkpoint.
    case cooperativeCancel
    /// A confirmation answered `denyAndStop`.
    case deniedAndStopped(callId: String)
}

extension ToolChoice {
    /// The wire form, for error data.
    var json: JSONValue { (try? JSONValue(encoding: self)) ?? .null }
}
