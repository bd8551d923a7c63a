// Server → client confirmation, for clients that declared `confirmations: "request"`.

/// `confirmation/request`: asks the client to approve a tool call; a timeout denies.
public enum ConfirmationRequest: RPCMethod {
    public static let name = "confirmation/request"
    public static let direction = MethodDirection.serverToClient
    public typealias Params = ConfirmationRequestParams
    public typealias Result = ConfirmationRequestResult
}

/// `confirmation/request` params.
public struct ConfirmationRequestParams: Codable, Sendable, Hashable {
    public var sessionId: String
    public var turnId: String
    public var callId: String
    public var name: String
    public var arguments: JSONValue
    /// Why confirmation is needed (the guard's reason).
    public var reason: String?

    public init(sessionId: String, turnId: String, callId: String, name: String, arguments: JSONValue, reason: String? = nil) {
        self.sessionId = sessionId
        self.turnId = turnId
        self.callId = callId
        self.name = name
        self.arguments = arguments
        self.reason = reason
    }
}

/// `confirmation/request` result.
public struct ConfirmationRequestResult: Codable, Sendable, Hashable {
    public var decision: ConfirmationDecision
    /// Shown to the model when denying.
    public var reason: String?

    public init(decision: ConfirmationDecision, reason: String? = nil) {
        self.decision = decision
        self.reason = reason
    }
}
