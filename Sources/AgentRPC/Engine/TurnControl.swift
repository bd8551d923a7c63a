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

    /// Cooperative cancellation points: between stream events, between tool calls,
    /// after the stream drains.
    func checkpoint() throws {
        if cooperativeCancelRequested { throw TurnStop.cooperativeCancel }
        if reason != nil { throw CancellationError() }
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
