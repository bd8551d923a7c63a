import AgentRPCProtocol

/// A session's `session/event` stream: it numbers the events (`seq` rises by
/// one per session), tags them with the running turn, and holds streamed deltas
/// back while the client reads slower than the server writes.
///
/// Owned by the session actor and used only on it: a class that is not
/// `Sendable`, so the compiler keeps it there, and the turn's runner can share it.
final class SessionEvents {
    private let sessionId: String
    private let channel: any ClientChannel
    private let logger: Logger
    private var seq = 0
    /// The turn that events naming none are tagged with: the running one. The
    /// last turn (which `getState` still names) must not tag events outside a turn.
    var runningTurnId: String?
    /// Deltas merged while the client is behind, not sent yet (`emitDelta`).
    private var heldDelta: (reasoning: Bool, text: String)?

    init(sessionId: String, channel: any ClientChannel, logger: Logger) {
        self.sessionId = sessionId
        self.channel = channel
        self.logger = logger
    }

    /// Sends one `session/event`.
    func emit(_ event: SessionEvent, turn: String? = nil) {
        // A held delta came first: it goes out before anything after it.
        releaseHeldDelta()
        send(event, turn: turn)
    }

    /// Streams a text or reasoning delta. While the client reads slower than
    /// the server writes, deltas are held and merged into one larger event
    /// instead of queueing one event each; none is dropped.
    func emitDelta(_ text: String, reasoning: Bool) {
        if heldDelta?.reasoning == reasoning {
            heldDelta?.text += text
            return
        }
        releaseHeldDelta()
        if channel.isBehind {
            heldDelta = (reasoning, text)
        } else {
            send(reasoning ? .reasoningDelta(text) : .textDelta(text))
        }
    }

    /// Back-pressure for a streaming turn (docs/protocol.md, "Every limit and
    /// its default"): held text goes out once the client caught up; when it
    /// reaches the output queue's bound, the turn waits for the client.
    /// Runs on the caller's actor (the session's), like the rest of this type.
    nonisolated(nonsending) func keepPace() async {
        guard let held = heldDelta else { return }
        if channel.isBehind {
            guard held.text.utf8.count >= channel.outputQueueBytes else { return }
            logger.debug("session \(sessionId): the client is behind; the turn waits for it")
            await channel.waitUntilWritable()
        }
        releaseHeldDelta()
    }

    private func send(_ event: SessionEvent, turn: String? = nil) {
        seq += 1
        let params = SessionEventParams(sessionId: sessionId, turnId: turn ?? runningTurnId, seq: seq, event: event)
        channel.notify(SessionEventNotification.name, params.json)
    }

    private func releaseHeldDelta() {
        guard let held = heldDelta else { return }
        heldDelta = nil
        send(held.reasoning ? .reasoningDelta(held.text) : .textDelta(held.text))
    }
}
