// `initialize`, `shutdown`, `exit` (docs/protocol.md §2).

/// `initialize`: must be the first request; a second one is refused.
public enum InitializeRequest: RPCMethod {
    public static let name = "initialize"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = InitializeParams
    public typealias Result = InitializeResult
    public static let lifecycle = MethodLifecycle.first

    /// The protocol version this server speaks.
    public static let protocolVersion = 1
}

/// `initialize` params.
public struct InitializeParams: Codable, Sendable, Hashable {
    public var protocolVersion: Int
    public var clientInfo: ClientInfo?
    public var capabilities: ClientCapabilities?

    public init(protocolVersion: Int = InitializeRequest.protocolVersion, clientInfo: ClientInfo? = nil, capabilities: ClientCapabilities? = nil) {
        self.protocolVersion = protocolVersion
        self.clientInfo = clientInfo
        self.capabilities = capabilities
    }
}

/// Who the client is, for logs and traces.
public struct ClientInfo: Codable, Sendable, Hashable {
    public var name: String
    public var version: String?

    public init(name: String, version: String? = nil) {
        self.name = name
        self.version = version
    }
}

/// What the client can answer. Absent means no: the server sends no request the
/// client did not declare (`tool/call`, `hook/call`, `context/refresh`, `trace/span`).
public struct ClientCapabilities: Codable, Sendable, Hashable {
    /// The client executes `tool/call` (and `tool/undo`).
    public var tools: Bool?
    /// `notify` (default): `confirmationRequested` events answered by `session/confirm`;
    /// `request`: the server sends `confirmation/request` and awaits the answer.
    public var confirmations: ConfirmationMode?
    public var hooks: Bool?
    public var contextSources: Bool?
    /// The client wants `trace/span` notifications.
    public var traces: Bool?
    /// The client answers `user/ask` (needed by sessions that offer `ask_user`).
    public var askUser: Bool?
    /// The client answers `user/elicit`: an MCP server's form (`elicitation/create`)
    /// reaches its user; without it, servers are told agentrpc cannot ask.
    public var elicitation: Bool?

    public init(
        tools: Bool? = nil, confirmations: ConfirmationMode? = nil, hooks: Bool? = nil, contextSources: Bool? = nil,
        traces: Bool? = nil, askUser: Bool? = nil, elicitation: Bool? = nil
    ) {
        self.askUser = askUser
        self.elicitation = elicitation
        self.tools = tools
        self.confirmations = confirmations
        self.hooks = hooks
        self.contextSources = contextSources
        self.traces = traces
    }
}

/// How the client takes confirmations.
public enum ConfirmationMode: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    case notify
    case request
}

/// `initialize` result.
public struct InitializeResult: Codable, Sendable, Hashable {
    public var protocolVersion: Int
    public var serverInfo: ServerInfo
    public var capabilities: ServerCapabilities

    public init(protocolVersion: Int = InitializeRequest.protocolVersion, serverInfo: ServerInfo, capabilities: ServerCapabilities) {
        self.protocolVersion = protocolVersion
        self.serverInfo = serverInfo
        self.capabilities = capabilities
    }
}

/// The server's name and version.
public struct ServerInfo: Codable, Sendable, Hashable {
    public var name: String
    public var version: String

    public init(name: String = "agentrpc", version: String) {
        self.name = name
        self.version = version
    }
}

/// What this server supports.
public struct ServerCapabilities: Codable, Sendable, Hashable {
    /// Provider kinds available (`openai`, `openai-responses`, `anthropic`, `scripted`).
    public var providers: [String]
    public var transcriptMutation: Bool
    public var profiles: Bool
    public var router: Bool
    public var structuredOutput: Bool
    /// Sessions are kept on disk (false with `--ephemeral`).
    public var store: Bool
    /// Where, when `store` is true.
    public var storeDirectory: String?
    public var traces: Bool
    /// Frames larger than this are refused with `messageTooLarge`.
    public var maxMessageBytes: Int

    public init(
        providers: [String], transcriptMutation: Bool = true, profiles: Bool = true, router: Bool = true,
        structuredOutput: Bool = true, store: Bool, storeDirectory: String? = nil, traces: Bool = true, maxMessageBytes: Int
    ) {
        self.storeDirectory = storeDirectory
        self.providers = providers
        self.transcriptMutation = transcriptMutation
        self.profiles = profiles
        self.router = router
        self.structuredOutput = structuredOutput
        self.store = store
        self.traces = traces
        self.maxMessageBytes = maxMessageBytes
    }
}

/// `shutdown`: cancels running turns and refuses new sessions; answers `null`.
/// Params may be absent or `{}`.
public enum ShutdownRequest: RPCMethod {
    public static let name = "shutdown"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = Empty
    public typealias Result = NullResult
    public static let lifecycle = MethodLifecycle.runningAndAfterShutdown
}

/// `exit`: the server flushes the store and exits.
public enum ExitNotification: RPCNotification {
    public static let name = "exit"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = Empty
    public static let lifecycle = MethodLifecycle.always
}
