/// Every method and notification of the protocol, in one place: the server's
/// dispatcher (its lifecycle checks), the schema generator and the docs table
/// read this list. Tests check it for duplicate names, and that the server has
/// exactly one handler for each client → server method and none for anything
/// else (`MethodServedTests`).
public enum MethodRegistry {
    /// All requests, both directions.
    public static let requests: [any RPCMethod.Type] = [
        InitializeRequest.self,
        ShutdownRequest.self,
        SessionCreateRequest.self,
        SessionSendRequest.self,
        SessionGenerateRequest.self,
        SessionCancelRequest.self,
        SessionContinueRequest.self,
        SessionParkRequest.self,
        SessionConfirmRequest.self,
        SessionGetStateRequest.self,
        SessionGetPromptRequest.self,
        SessionGetTranscriptRequest.self,
        SessionGetMediaRequest.self,
        SessionMutateTranscriptRequest.self,
        SessionSetPropertiesRequest.self,
        SessionListRequest.self,
        SessionCloseRequest.self,
        SessionResumeRequest.self,
        SessionDeleteRequest.self,
        SessionForkRequest.self,
        SessionSteerRequest.self,
        SessionSetApprovalRulesRequest.self,
        SessionRewindRequest.self,
        SessionCompactRequest.self,
        ToolCallRequest.self,
        ToolUndoRequest.self,
        ConfirmationRequest.self,
        HookCallRequest.self,
        ContextRefreshRequest.self,
        UserAskRequest.self,
        UserElicitRequest.self,
    ]

    /// All notifications, both directions. `session/cancel` is also a request:
    /// a name may appear once in each list.
    public static let notifications: [any RPCNotification.Type] = [
        ExitNotification.self,
        SessionCancelNotification.self,
        CancelRequestNotification.self,
        SessionEventNotification.self,
        TraceSpanNotification.self,
        ToolProgressNotification.self,
    ]

    /// Names listed twice within `requests` or within `notifications`; must be empty.
    public static func duplicateNames() -> [String] {
        func duplicates(_ names: [String]) -> [String] {
            var seen: Set<String> = []
            var dups: [String] = []
            for n in names where !seen.insert(n).inserted && !dups.contains(n) { dups.append(n) }
            return dups
        }
        return duplicates(requests.map { $0.name }) + duplicates(notifications.map { $0.name })
    }

    /// The request type called `name` in `direction`.
    public static func request(named name: String, direction: MethodDirection) -> (any RPCMethod.Type)? {
        requests.first { $0.name == name && $0.direction == direction }
    }

    /// The notification type called `name` in `direction`.
    public static func notification(named name: String, direction: MethodDirection) -> (any RPCNotification.Type)? {
        notifications.first { $0.name == name && $0.direction == direction }
    }

    /// When the server accepts the client → server method `name` (request or
    /// notification); nil for a name it does not declare.
    public static func lifecycle(of name: String) -> MethodLifecycle? {
        request(named: name, direction: .clientToServer)?.lifecycle ?? notification(named: name, direction: .clientToServer)?.lifecycle
    }
}
