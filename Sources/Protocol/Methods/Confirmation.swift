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
    /// Which time this call's confirmation is asked: 2 when a parked turn
    /// continued asks again, and so on; absent the first time.
    public var attempt: Int?

    public init(sessionId: String, turnId: String, callId: String, name: String, arguments: JSONValue, reason: String? = nil, attempt: Int? = nil) {
        self.attempt = attempt
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
    /// Approve decisions: the edited arguments to run the call with.
    public var arguments: JSONValue?
    /// `approveForSession`: which later calls the rule approves.
    public var rule: ApprovalScope?

    public init(decision: ConfirmationDecision, reason: String? = nil, arguments: JSONValue? = nil, rule: ApprovalScope? = nil) {
        self.decision = decision
        self.reason = reason
        self.arguments = arguments
        self.rule = rule
    }
}
