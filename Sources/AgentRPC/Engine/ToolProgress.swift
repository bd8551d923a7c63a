import AgentRPCProtocol
import Synchronization

/// Progress reports of running tool calls on their way to `toolProgress`
/// events: at most one event per call per `interval` (a faster stream is
/// coalesced, the latest value winning; one still held when the call ends goes
/// out just before its `toolCallFinished`) and none once the call's output is
/// recorded. Reports come in order from wherever they arrive (an MCP client's
/// actor, the dispatcher); the events go out on the session's actor.
final class ToolProgressGate: Sendable {
    /// The shortest gap between two events of one call (~10 a second).
    static let interval: Duration = .milliseconds(100)
    /// A report's message is cut to this many UTF-8 bytes.
    static let maxMessageBytes = 1024

    private struct Call {
        var latest: SessionEvent.ToolProgress?
        var lastSent: ContinuousClock.Instant?
        /// An event is scheduled; later reports only replace `latest`.
        var scheduled = false
    }
    private let calls = Mutex<[String: Call]>([:])

    /// The call runs from now on: its reports are taken.
    func begin(_ callId: String) {
        calls.withLock { $0[callId] = Call() }
    }

    /// The call ended: what it reports from now on is dropped. Returns the
    /// report it held back, which its output may still show first.
    @discardableResult
    func end(_ callId: String) -> SessionEvent.ToolProgress? {
        calls.withLock { $0.removeValue(forKey: callId)?.latest }
    }

    /// Records a report; returns how long to wait before `take`, or nil when
    /// the call is not running or an event is already scheduled.
    func offer(_ report: SessionEvent.ToolProgress) -> Duration? {
        var report = report
        if let message = report.message, message.utf8.count > Self.maxMessageBytes {
            report.message = String(decoding: message.utf8.prefix(Self.maxMessageBytes), as: UTF8.self)
        }
        return calls.withLock { calls -> Duration? in
            guard var call = calls[report.callId] else { return nil }
            call.latest = report
            let wasScheduled = call.scheduled
            call.scheduled = true
            calls[report.callId] = call
            guard !wasScheduled else { return nil }
            guard let last = call.lastSent else { return .zero }
            let wait = (last + Self.interval) - .now
            return wait > .zero ? wait : .zero
        }
    }

    /// The report to send now, if the call still runs.
    func take(_ callId: String) -> SessionEvent.ToolProgress? {
        calls.withLock { calls -> SessionEvent.ToolProgress? in
            guard var call = calls[callId] else { return nil }
            let latest = call.latest
            call.latest = nil
            call.scheduled = false
            if latest != nil { call.lastSent = .now }
            calls[callId] = call
            return latest
        }
    }
}

extension AgentSession {
    /// A running call reported progress (an MCP server's `notifications/progress`,
    /// the client's `tool/progress`): a `toolProgress` event, paced by the gate.
    nonisolated func reportToolProgress(_ report: SessionEvent.ToolProgress) {
        guard report.progress.isFinite, report.total?.isFinite ?? true,
              let wait = toolProgress.offer(report) else { return }
        Task { [weak self] in
            if wait > .zero { try? await Task.sleep(for: wait) }
            await self?.sendToolProgress(of: report.callId)
        }
    }

    private func sendToolProgress(of callId: String) {
        guard let report = toolProgress.take(callId) else { return }
        emit(SessionEvent(report))
    }
}
