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
    var runningTurnId: String? {
        didSet { if runningTurnId != oldValue { deltaTail = nil } }
    }
    /// Deltas merged while the client is behind, not sent yet (`emitDelta`).
    private var heldDelta: (reasoning: Bool, text: String)?
    /// The server's own connection, when that is the channel: deltas are
    /// written to it as bytes (`Connection.notify(_:writingParams:params:)`).
    private let connection: Connection?
    /// The end of a delta's params for the running turn, made at its first delta.
    private var deltaTail: [UInt8]?

    init(sessionId: String, channel: any ClientChannel, logger: Logger) {
        self.sessionId = sessionId
        self.channel = channel
        self.logger = logger
        self.connection = channel as? Connection
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
            sendDelta(text, reasoning: reasoning)
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

    /// What `send(.textDelta(text))` sends, written as bytes when the channel
    /// is the server's connection.
    private func sendDelta(_ text: String, reasoning: Bool) {
        guard let connection else { return send(reasoning ? .reasoningDelta(text) : .textDelta(text)) }
        seq += 1
        let seq = seq
        let tail = deltaTail ?? SessionEventParams.deltaTail(sessionId: sessionId, turnId: runningTurnId)
        deltaTail = tail
        connection.notify(
            SessionEventNotification.name,
            writingParams: { SessionEventParams.writeDelta(text, reasoning: reasoning, seq: seq, tail: tail, into: &$0) },
            params: {
                SessionEventParams(sessionId: sessionId, turnId: runningTurnId, seq: seq, event: reasoning ? .reasoningDelta(text) : .textDelta(text)).json
            })
    }

    private func releaseHeldDelta() {
        guard let held = heldDelta else { return }
        heldDelta = nil
        sendDelta(held.text, reasoning: held.reasoning)
    }
}
