import AgentRPC
import AgentRPCProtocol

#if canImport(Glibc)
import Glibc
#endif

/// CPU time of the calling thread only: preemption by other processes on a
/// shared machine does not count, which makes small code changes visible.
func threadCPUNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

struct EventEncodingFigures {
    var events: Int
    /// Caller-thread CPU per event: building the params, serializing, framing, queueing.
    var callerCPUNanosPerEvent: Double
    var wallNanosPerEvent: Double
}

/// In process, no pipes: what one `textDelta` event costs the thread that emits
/// it, through the same calls the turn loop makes (`SessionEventParams.json`,
/// then `Connection.notify`), with the connection writing to /dev/null.
func measureEventEncoding(events: Int) throws -> EventEncodingFigures {
    let sink = open("/dev/null", O_WRONLY)
    guard sink >= 0 else { throw BenchError("cannot open /dev/null") }
    defer { close(sink) }
    let connection = Connection(inputFD: -1, outputFD: sink, maxMessageBytes: 1 << 24, logger: Logger(level: .off))
    func emit(_ seq: Int) {
        let params = SessionEventParams(sessionId: "s-0123456789ab", turnId: "t-01234567-1", seq: seq, event: .textDelta(" t\(seq % 10)"))
        connection.notify(SessionEventNotification.name, params.json)
    }
    for seq in 0..<1000 { emit(seq) }  // warm-up
    let cpu0 = threadCPUNanos()
    let t0 = nowNanos()
    for seq in 0..<events { emit(seq) }
    let wall = nowNanos() - t0
    let cpu = threadCPUNanos() - cpu0
    connection.flush(timeoutSeconds: 5)
    return EventEncodingFigures(events: events, callerCPUNanosPerEvent: Double(cpu) / Double(events), wallNanosPerEvent: Double(wall) / Double(events))
}
