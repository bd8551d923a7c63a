import AgentRPCProtocol

/// Sends waiting for the running turn to end (`session/send` with
/// `queue: true`), first in line first, and the outcomes of those that were
/// settled before their request started waiting. Part of the session actor's state.
struct SendQueue {
    private var waiting: [QueuedSend] = []
    private var nextNumber = 1
    private var settled: [Int: Result<TurnControl, any Error>] = [:]

    var isEmpty: Bool { waiting.isEmpty }
    var count: Int { waiting.count }

    /// Takes the next place in line; returns its number.
    mutating func enqueue(input: TurnInput, options: TurnOptions, mode: TurnMode) throws -> Int {
        if waiting.count >= HumanInTheLoopLimits.maxQueuedSends {
            throw RPCError(.overloaded, "\(HumanInTheLoopLimits.maxQueuedSends) sends are already queued in this session")
        }
        let id = nextNumber
        nextNumber += 1
        waiting.append(QueuedSend(id: id, input: input, options: options, mode: mode))
        return id
    }

    /// The request of send `id` waits on `continuation` (answered at once if settled already).
    mutating func attach(_ id: Int, _ continuation: CheckedContinuation<TurnControl, any Error>) {
        if let outcome = settled.removeValue(forKey: id) {
            continuation.resume(with: outcome)
        } else if let index = waiting.firstIndex(where: { $0.id == id }) {
            waiting[index].waiter = continuation
        } else {
            continuation.resume(throwing: RPCError.internalError("queued send \(id) is unknown"))
        }
    }

    /// Takes the first send out of line; its outcome goes to `settle`.
    mutating func next() -> QueuedSend? {
        waiting.isEmpty ? nil : waiting.removeFirst()
    }

    /// Hands a send's outcome to its request, or keeps it until the request waits.
    mutating func settle(_ entry: QueuedSend, _ outcome: Result<TurnControl, any Error>) {
        if let waiter = entry.waiter {
            waiter.resume(with: outcome)
        } else {
            settled[entry.id] = outcome
        }
    }

    /// Drops send `id` if it still waits.
    mutating func drop(_ id: Int, source: String) {
        guard let index = waiting.firstIndex(where: { $0.id == id }) else { return }
        let entry = waiting.remove(at: index)
        settle(entry, .failure(Self.droppedError(source: source)))
    }

    /// Drops every waiting send (cancel, close, shutdown); returns how many.
    mutating func dropAll(source: String) -> Int {
        let dropped = waiting
        waiting = []
        for entry in dropped { settle(entry, .failure(Self.droppedError(source: source))) }
        return dropped.count
    }

    static func droppedError(source: String) -> RPCError {
        .cancelled("the queued send was dropped before its turn started", data: ["source": .string(source), "queued": true])
    }
}
