import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The engine of `agentrpc serve`, run inside another program that talks to it
/// in agentrpc's own protocol without a pipe in between: methods are called by
/// name with JSON params, and what the server would write to its client
/// (notifications, `tool/call`, `confirmation/request`, ...) goes to a
/// `ClientChannel` the host implements. A second front end (`agentrpc acp`)
/// uses it so that it translates messages and never learns the engine's
/// internals; the same options, configuration file and store apply.
public final class EmbeddedServer: Sendable {
    private let engine: Engine
    private let table: MethodTable
    private let catalog: ModelCatalog

    /// Makes the engine as `agentrpc serve` would with `options` (configuration
    /// file, store, limits); what it sends its client goes to `channel`.
    /// `client` is what the host says it can do, as `initialize` would say it.
    public init(options: ServerOptions, channel: any ClientChannel, logger: Logger, client: ClientCapabilities, clientInfo: ClientInfo? = nil) async throws {
        let engine = try Engine(options: options, connection: channel, logger: logger)
        await engine.setClient(capabilities: client, info: clientInfo)
        var builder = MethodTable.Builder()
        engine.register(into: &builder)
        self.engine = engine
        self.table = builder.build()
        self.catalog = try ModelCatalog.load(explicitPath: options.configPath, environment: options.environment)
    }

    /// Starts a method as the dispatcher would: its ordered part (validation,
    /// a turn's start) has run when this returns, so calls made one after the
    /// other take effect in that order. Throws the method's `RPCError` when it
    /// fails before any long work starts.
    public func start(_ method: String, _ params: JSONValue? = nil) async throws -> EmbeddedCall {
        guard let handler = table.handler(for: method) else { throw RPCError.methodNotFound(method) }
        let reply = try await handler(params, RequestContext(requestID: nil, method: method))
        switch reply {
        case .now(let value):
            return EmbeddedCall(task: Task { .success(value) })
        case .later(let work):
            let task = Task<Result<JSONValue, RPCError>, Never> {
                do {
                    return .success(try await work())
                } catch {
                    return .failure(Self.rpcError(error, method: method))
                }
            }
            return EmbeddedCall(task: task)
        }
    }

    /// Calls a method and waits for its result.
    public func call(_ method: String, _ params: JSONValue? = nil) async throws -> JSONValue {
        try await start(method, params).result()
    }

    /// Starts method `M`, its name taken from the type (a call site cannot
    /// misspell it, and a renamed method does not compile); params as JSON.
    public func start<M: RPCMethod>(_ method: M.Type, _ params: JSONValue? = nil) async throws -> EmbeddedCall {
        try await start(M.name, params)
    }

    /// Calls method `M` and waits for its result; params and result as JSON.
    public func call<M: RPCMethod>(_ method: M.Type, _ params: JSONValue? = nil) async throws -> JSONValue {
        try await start(M.name, params).result()
    }

    /// Calls method `M`, whose params are a `SessionRef`, for session `sessionId`.
    public func call<M: RPCMethod>(_ method: M.Type, sessionId: String) async throws -> JSONValue where M.Params == SessionRef {
        try await start(M.name, ["sessionId": .string(sessionId)]).result()
    }

    /// Sends a notification (`session/cancel`), as the client would.
    public func notify(_ method: String, _ params: JSONValue? = nil) async {
        await table.notificationHandler(for: method)?(params)
    }

    /// Cancels every running turn (they roll back), bounded by `graceSeconds`,
    /// then makes every journal durable and releases it: the host's end.
    public func shutdown(reason: String, graceSeconds: Double) async {
        let engine = self.engine
        let deadline = ContinuousClock.now.advanced(by: .clampedSeconds(graceSeconds))
        _ = await Server.finishes(by: deadline) { await engine.shutdownAll(reason: reason) }
        await engine.closeAll()
        engine.tracer.close()
    }

    /// Where sessions are stored (nil: `--ephemeral`).
    public var storeLocation: String? { engine.storeLocation }

    /// The configuration file the models came from (nil: none was found).
    public var configPath: String? { catalog.sourcePath }

    /// The names of the models the session may use: the configuration
    /// file's and those an API key in the environment brings, sorted.
    public var modelNames: [String] { catalog.models.keys.sorted() }

    /// The model used when nothing names one (the file's `defaultModel`, else
    /// the first model an API key in the environment brings).
    public var defaultModel: String? { catalog.defaultModel }

    /// What a named model is: provider and model id, for showing it.
    public func modelDescription(_ name: String) -> (provider: String, model: String?)? {
        guard let config = catalog.models[name] else { return nil }
        return (config.provider.rawValue, config.model)
    }

    /// The configuration file's `acp` section, as written (nil: absent).
    public var acpSection: JSONValue? { catalog.acp }

    static func rpcError(_ error: any Error, method: String) -> RPCError {
        if let rpc = error as? RPCError { return rpc }
        if error is CancellationError { return .cancelled() }
        return .internalError("\(method) failed: \(error)")
    }
}

/// One method call of an `EmbeddedServer`: its result, and cancellation as
/// `$/cancelRequest` gives it (a turn stops at once and withdraws what it asked).
public struct EmbeddedCall: Sendable {
    let task: Task<Result<JSONValue, RPCError>, Never>

    /// The method's result, or its error.
    public func result() async throws(RPCError) -> JSONValue {
        try await task.value.get()
    }

    /// Withdraws the call: a running turn is cancelled and answers `cancelled`.
    public func cancel() { task.cancel() }
}
