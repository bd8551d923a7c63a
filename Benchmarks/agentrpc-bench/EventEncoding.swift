import AgentRPC
import AgentRPCProtocol
import Foundation

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
    let connection = try Connection(inputFD: -1, outputFD: sink, maxMessageBytes: 1 << 24, logger: Logger(level: .off))
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

struct RequestBodyFigures {
    var messages: Int
    /// Caller-thread CPU per request to build one provider's whole JSON body and
    /// serialize it (`requestBody(for:)`, what `--dump-requests` shows).
    var whole: ProviderMicros
    /// The same bytes as a request sends them (`bodyBytes(for:)`): the provider
    /// already sent the request before, two messages shorter, and reuses its
    /// serialized messages.
    var incremental: ProviderMicros
    var bodyBytes: Int
}

struct ProviderMicros {
    var openAI: Double
    var anthropic: Double
    var responses: Double
}

/// In process: what an HTTP provider spends on the body of one request late in a
/// long tool turn (`roundTrips` tool exchanges after a prompt), built whole and
/// serialized, and encoded as a round trip does it, after the previous round
/// trip's request (the same history but the last exchange) went through the
/// same provider instance. The body is that many bytes either way.
func measureRequestBodies(roundTrips: Int, repeats: Int) -> RequestBodyFigures {
    var messages: [ModelMessage] = [.user(text: "Call the tool \(roundTrips) times, then say done.", images: [])]
    for n in 1...max(roundTrips, 1) {
        messages.append(.assistant(text: "", toolCalls: [ModelToolCall(id: "call_\(n)", name: "count", argumentsJSON: #"{"n":\#(n)}"#)], reasoning: nil))
        messages.append(.toolResult(callId: "call_\(n)", name: "count", content: "ok", isError: false))
    }
    let tool = ModelToolDefinition(name: "count", description: "Counts.", inputSchema: ["type": "object", "properties": ["n": ["type": "integer"]]])
    let request = ModelRequest(model: "m", instructions: "You count.", messages: messages, tools: [tool])
    var previous = request
    previous.messages.removeLast(2)
    let configuration = HTTPProviderConfiguration(baseURL: URL(fileURLWithPath: "/"), apiKey: nil, model: "m")
    var bytes = 0
    func cpuMicros(_ build: () -> [UInt8], after: () -> Void = {}) -> Double {
        after()
        bytes = build().count  // warm-up
        var total: UInt64 = 0
        for _ in 0..<repeats {
            after()
            let cpu0 = threadCPUNanos()
            bytes = build().count
            total += threadCPUNanos() - cpu0
        }
        return Double(total) / Double(repeats) / 1000
    }
    let openAI = OpenAIProvider(configuration: configuration)
    let anthropic = AnthropicProvider(configuration: configuration)
    let responses = OpenAIResponsesProvider(configuration: configuration)
    let whole = ProviderMicros(
        openAI: cpuMicros { openAI.requestBody(for: request).body.serialized() },
        anthropic: cpuMicros { anthropic.requestBody(for: request).body.serialized() },
        responses: cpuMicros { responses.requestBody(for: request).body.serialized() })
    let incremental = ProviderMicros(
        openAI: cpuMicros({ openAI.bodyBytes(for: request) }, after: { _ = openAI.bodyBytes(for: previous) }),
        anthropic: cpuMicros({ anthropic.bodyBytes(for: request) }, after: { _ = anthropic.bodyBytes(for: previous) }),
        responses: cpuMicros({ responses.bodyBytes(for: request) }, after: { _ = responses.bodyBytes(for: previous) }))
    return RequestBodyFigures(messages: messages.count, whole: whole, incremental: incremental, bodyBytes: bytes)
}
