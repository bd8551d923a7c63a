import AgentRPCProtocol

/// The engine's view of the client: notifications out, requests out with a
/// bounded wait. `Connection` is the real one; tests can supply their own.
public protocol ClientChannel: Sendable {
    func notify(_ method: String, _ params: JSONValue)
    /// Throws `OutgoingRequestError` or `CancellationError` (the request is then withdrawn).
    func request(_ method: String, _ params: JSONValue, timeout: Double) async throws -> JSONValue
    /// Whether the client reads slower than the server writes.
    var isBehind: Bool { get }
    /// The output a producer should keep queued at most, in bytes.
    var outputQueueBytes: Int { get }
    /// Suspends until the client caught up, is gone, or the task is cancelled.
    func waitUntilWritable() async
}

extension ClientChannel {
    // A channel without a queue (tests) is never behind.
    public var isBehind: Bool { false }
    public var outputQueueBytes: Int { .max }
    public func waitUntilWritable() async {}
}

extension Connection: ClientChannel {}
