import AgentRPCProtocol

/// The engine's view of the client: notifications out, requests out with a
/// bounded wait. `Connection` is the real one; tests can supply their own.
public protocol ClientChannel: Sendable {
    func notify(_ method: String, _ params: JSONValue)
    /// Throws `OutgoingRequestError` or `CancellationError` (the request is then withdrawn).
    func request(_ method: String, _ params: JSONValue, timeout: Double) async throws -> JSONValue
    /// `request` with params that `write` appends as JSON text, the same as
    /// `params()`: a channel that writes JSON need not build the value. Runs
    /// on the caller's executor (a `tool/call` per tool call: a hop off the
    /// session actor and back would cost the runtime's executor checks twice).
    nonisolated(nonsending) func request(_ method: String, writingParams write: (inout [UInt8]) -> Void, params: () -> JSONValue, timeout: Double) async throws -> JSONValue
    /// Whether the client reads slower than the server writes.
    var isBehind: Bool { get }
    /// The output a producer should keep queued at most, in bytes.
    var outputQueueBytes: Int { get }
    /// Suspends until the client caught up, is gone, or the task is cancelled.
    func waitUntilWritable() async
    /// A tool call passed its checks (validation, hooks, guards, confirmation)
    /// and its executor starts now. Not an event of the protocol: an embedding
    /// host that shows calls running (`agentrpc acp`'s `in_progress`) learns it
    /// here, before the executor's own requests.
    func toolCallRunning(sessionId: String, callId: String)
}

extension ClientChannel {
    // A channel without a queue (tests) is never behind.
    public var isBehind: Bool { false }
    public var outputQueueBytes: Int { .max }
    public func waitUntilWritable() async {}
    public func toolCallRunning(sessionId: String, callId: String) {}
    nonisolated(nonsending) public func request(_ method: String, writingParams write: (inout [UInt8]) -> Void, params: () -> JSONValue, timeout: Double) async throws -> JSONValue {
        try await request(method, params(), timeout: timeout)
    }
}

extension Connection: ClientChannel {}
