import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Plays a recorded response into a response sink exactly as an HTTP client
/// feeds a live one (head, body chunks, end), so it goes through
/// the same decoders: recorded retries, rate limits and broken streams happen
/// again. `fast` delivers at once; `recorded` at the recorded times, with the
/// idle timeout applied as the live client applies it.
enum CassettePlayer {
    static func start(_ exchange: CassetteExchange, pace: CassettePace, idleTimeout: Double, sink: any HTTPResponseSink) -> HTTPRequestHandle {
        let task = Task.detached {
            await play(exchange.response, pace: pace, idleTimeout: idleTimeout, sink: sink)
        }
        // Nobody reads the rest of a replayed response: it simply stops.
        return HTTPRequestHandle(cancel: { task.cancel() }, linger: { task.cancel() })
    }

    private static func play(_ response: CassetteResponse, pace: CassettePace, idleTimeout: Double, sink: any HTTPResponseSink) async {
        let start = ContinuousClock.now
        let timeout = idleTimeout.isFinite ? max(0, min(idleTimeout, DurationBounds.maximumSeconds)) : DurationBounds.maximumSeconds
        var last = 0
        /// Waits until `ms` after the start (paced only); false when the wait
        /// was cancelled or ran into the idle timeout (then reported).
        func arrive(at ms: Int) async -> Bool {
            if Task.isCancelled { return false }
            guard pace == .recorded else { return true }
            if Double(ms - last) / 1000 > timeout {
                guard await sleep(until: start.advanced(by: .milliseconds(last)) + .seconds(timeout)) else { return false }
                sink.end(timedOut(timeout))
                return false
            }
            last = max(last, ms)
            return await sleep(until: start.advanced(by: .milliseconds(ms)))
        }
        if let head = response.head {
            guard await arrive(at: response.headMilliseconds ?? 0) else { return }
            sink.head(head)
        }
        for chunk in response.chunks {
            guard await arrive(at: chunk.milliseconds) else { return }
            sink.body(Data(chunk.bytes))
        }
        switch response.end.outcome {
        case .complete:
            guard await arrive(at: response.end.milliseconds) else { return }
            sink.end(nil)
        case .failed(let error):
            guard await arrive(at: response.end.milliseconds) else { return }
            sink.end(error)
        case .abandoned:
            // The recording stopped reading here; the server had not finished.
            // Wait, as for a server that sends nothing more, for a cancel or the idle timeout.
            guard await sleep(until: .now + .seconds(timeout)) else { return }
            sink.end(timedOut(timeout))
        }
    }

    /// The live client's error for a response that stopped arriving.
    private static func timedOut(_ seconds: Double) -> HTTPTransportError {
        HTTPTransportError(kind: .idleTimedOut, detail: "no data for \(seconds) s")
    }

    private static func sleep(until deadline: ContinuousClock.Instant) async -> Bool {
        do {
            try await Task.sleep(until: deadline, clock: .continuous)
            return true
        } catch {
            return false
        }
    }
}
