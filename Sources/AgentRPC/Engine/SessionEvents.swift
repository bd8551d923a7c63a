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
        didSet {
            if runningTurnId != oldValue {
                runningTail = nil
                deltaFrames = nil
            }
        }
    }
    /// Deltas merged while the client is behind, not sent yet (`emitDelta`).
    /// Read at every delta; used only on the session actor and never across
    /// a suspension, so without the runtime's exclusivity check.
    @exclusivity(unchecked) private var heldDelta: (reasoning: Bool, text: String)?
    /// The server's own connection, when that is the channel: events are
    /// written to it as bytes (`Connection.notify(_:writingParams:params:)`).
    private let connection: Connection?
    /// The end of an event's params for the running turn, made at its first event.
    private var runningTail: [UInt8]?
    /// The running turn's delta frames, made at its first delta (while the
    /// connection takes whole frames).
    private var deltaFrames: DeltaFrameWriter?

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

    /// `emit(.entryAppended(entry))`, the entry's JSON text taken from `text`
    /// when given (its journal line's, `Transcript.writtenEntryText`) instead
    /// of serializing the entry again.
    func emitEntryAppended(_ entry: TranscriptEntry, text: ArraySlice<UInt8>?, turn: String?) {
        releaseHeldDelta()
        guard let text else { return send(.entryAppended(entry), turn: turn) }
        send(.entryAppended(entry), turn: turn) { stage in SessionEvent.EntryAppended.write(into: &stage) { $0.bytes(text) } }
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
        if let connection {
            // Asked and sent under one lock of the output queue.
            let seq = seq + 1
            let sent: Bool
            if connection.writesNotificationFrames {
                sent = connection.enqueueNotificationFrameUnlessBehind(deltaFrameWriter().frame(text, reasoning: reasoning, seq: seq))
            } else {
                let tail = runningTail ?? tail(runningTurnId)
                sent = connection.notifyUnlessBehind(
                    SessionEventNotification.name,
                    writingParams: { SessionEventParams.writeDelta(text, reasoning: reasoning, seq: seq, tail: tail, into: &$0) },
                    params: { self.deltaParams(text, reasoning: reasoning, seq: seq) })
            }
            if sent { self.seq = seq } else { heldDelta = (reasoning, text) }
        } else if channel.isBehind {
            heldDelta = (reasoning, text)
        } else {
            sendDelta(text, reasoning: reasoning)
        }
    }

    /// Whether a delta is held back (then `keepPace` has something to do).
    var holdsDelta: Bool { heldDelta != nil }

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

    /// Sends one event; to the server's connection its params are written as
    /// bytes around the event's own object.
    /// `writeEvent`, when given, writes the event's object instead of its payload.
    private func send(_ event: SessionEvent, turn: String? = nil, writeEvent: ((inout JSONStage) -> Void)? = nil) {
        seq += 1
        let seq = seq
        let turnId = turn ?? runningTurnId
        // The closures are written at the calls, not kept in a local: a closure
        // kept in a local holds its own copy of the event (two copies an event).
        guard let connection else {
            return channel.notify(SessionEventNotification.name, SessionEventParams(sessionId: sessionId, turnId: turnId, seq: seq, event: event).json)
        }
        let tail = tail(turnId)
        connection.notify(
            SessionEventNotification.name,
            writingParams: { out in
                SessionEventParams.write(seq: seq, tail: tail, into: &out) { stage in
                    if let writeEvent { writeEvent(&stage) } else { event.payload.writeEventJSON(into: &stage) }
                }
            },
            params: { SessionEventParams(sessionId: self.sessionId, turnId: turnId, seq: seq, event: event).json })
    }

    /// What `send(.textDelta(text))` sends, without making the event.
    private func sendDelta(_ text: String, reasoning: Bool) {
        guard let connection else { return send(reasoning ? .reasoningDelta(text) : .textDelta(text)) }
        seq += 1
        let seq = seq
        if connection.writesNotificationFrames {
            return connection.enqueueNotificationFrame(deltaFrameWriter().frame(text, reasoning: reasoning, seq: seq))
        }
        let tail = runningTail ?? tail(runningTurnId)
        connection.notify(
            SessionEventNotification.name,
            writingParams: { SessionEventParams.writeDelta(text, reasoning: reasoning, seq: seq, tail: tail, into: &$0) },
            params: { deltaParams(text, reasoning: reasoning, seq: seq) })
    }

    /// A delta's params as a value (for a recorder or the trace log).
    private func deltaParams(_ text: String, reasoning: Bool, seq: Int) -> JSONValue {
        SessionEventParams(sessionId: sessionId, turnId: runningTurnId, seq: seq, event: reasoning ? .reasoningDelta(text) : .textDelta(text)).json
    }

    /// The end of an event's params for `turnId`: kept for the running turn.
    private func tail(_ turnId: String?) -> [UInt8] {
        guard turnId == runningTurnId else { return SessionEventParams.tail(sessionId: sessionId, turnId: turnId) }
        if let runningTail { return runningTail }
        let made = SessionEventParams.tail(sessionId: sessionId, turnId: turnId)
        runningTail = made
        return made
    }

    /// The running turn's delta frames.
    private func deltaFrameWriter() -> DeltaFrameWriter {
        if let deltaFrames { return deltaFrames }
        let frame = Connection.notificationFrame(SessionEventNotification.name)
        let made = DeltaFrameWriter(frameHead: frame.head, tail: runningTail ?? tail(runningTurnId), frameEnd: frame.end)
        deltaFrames = made
        return made
    }

    private func releaseHeldDelta() {
        guard let held = heldDelta else { return }
        heldDelta = nil
        sendDelta(held.text, reasoning: held.reasoning)
    }
}
