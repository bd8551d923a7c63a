// Server → client context sources.

/// `context/refresh`: at turn start the server asks for the current values of the
/// session's context sources. A failure or timeout becomes a `contextDiagnostics` entry.
public enum ContextRefreshRequest: RPCMethod {
    public static let name = "context/refresh"
    public static let direction = MethodDirection.serverToClient
    public typealias Params = ContextRefreshParams
    public typealias Result = ContextRefreshResult
}

/// `context/refresh` params.
public struct ContextRefreshParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var turnId: String
    /// Names of `SessionConfig.contextSources`.
    public var sources: [String]

    public init(sessionId: String, turnId: String, sources: [String]) {
        self.sessionId = sessionId
        self.turnId = turnId
        self.sources = sources
    }
}

/// `context/refresh` result: text per source; a missing source keeps its last good value.
public struct ContextRefreshResult: Codable, Sendable, Hashable {
    public var values: [String: String]
    public init(values: [String: String]) { self.values = values }
}
