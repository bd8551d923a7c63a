import AgentRPCProtocol

/// The engine's view of the client: notifications out, requests out with a
/// bounded wait. `Connection` is the real one; tests can supply their own.
public protocol ClientChannel: Sendable {
    func notify(_ method: String, _ params: JSONValue)
    /// Throws `OutgoingRequestError` or `CancellationError` (the request is then withdrawn).
    func request(_ method: String, _ params: JSONValue, timeout: Double) async throws -> JSONValue
}

extension Connection: ClientChannel {}
