import AgentRPCProtocol
import Foundation
import Synchronization

/// What every session shares: the client channel, what the client said it can
/// do, the model catalog, and the request dump.
struct EngineContext: Sendable {
    let channel: any ClientChannel
    let logger: Logger
    let options: ServerOptions
    let catalog: ModelCatalog
    let dumper: RequestDumper?
    let clientCapabilities: ClientCapabilities
    /// Nil when no one listens (no trace file, client did not ask): spans cost nothing then.
    let tracer: Tracer?
}

/// Owns the loaded sessions and serves the `session/*` methods.
final class Engine: Sendable {
    static let providerNames = ["openai", "anthropic", "scripted"]

    private let channel: any ClientChannel
    private let logger: Logger
    private let options: ServerOptions
    private let catalog: ModelCatalog
    private let dumper: RequestDumper?
    private let sessions = Mutex<[String: AgentSession]>([:])
    /// Creation order, for stable `session/list` paging.
    private let order = Mutex<[String]>([])
    private let client = Mutex<(ClientCapabilities, ClientInfo?)>((ClientCapabilities(), nil))
    private let shuttingDown = Mutex(false)
    let tracer: Tracer

    init(options: ServerOptions, connection: any ClientChannel, logger: Logger) throws {
        self.channel = connection
        self.logger = logger
        self.options = options
        self.catalog = try ModelCatalog.load(explicitPath: options.configPath, environment: options.environment)
        self.dumper = try options.dumpRequestsPath.map { try RequestDumper(path: $0) }
        self.tracer = Tracer(includesPayloads: options.tracePayloads)
        if let path = options.traceFilePath {
            do {
                tracer.addExporter(try OTLPFileExporter(path: path))
            } catch {
                throw RPCError.invalidConfiguration("cannot write the trace file: \(error)", field: "--trace-file")
            }
        }
    }

    func setClient(capabilities: ClientCapabilities, info: ClientInfo?) async {
        client.withLock { $0 = (capabilities, info) }
        if capabilities.traces == true {
            let channel = self.channel
            tracer.addExporter(ClientSpanExporter { span in
                channel.notify(TraceSpanNotification.name, ["span": span])
            })
        }
    }

    private var context: EngineContext {
        EngineContext(
            channel: channel, logger: logger, options: options, catalog: catalog, dumper: dumper,
            clientCapabilities: client.withLock { $0.0 }, tracer: tracer.hasExporters ? tracer : nil)
    }

    func session(_ id: String) throws -> AgentSession {
        guard let s = sessions.withLock({ $0[id] }) else { throw RPCError.sessionNotFound(id) }
        return s
    }

    /// Cancels every running turn (each rolls back) and waits for them, bounded.
    func shutdownAll(reason: String) async {
        shuttingDown.withLock { $0 = true }
        let all = sessions.withLock { Array($0.values) }
        await withTaskGroup(of: Void.self) { group in
            for s in all { group.addTask { await s.abortRunningTurn(reason: .shutdown) } }
        }
    }

    // MARK: Handlers

    func register(into table: inout MethodTable.Builder) {
        table.on(SessionCreateRequest.self, strictKeys: true, errorKind: .invalidConfiguration) { [self] config, _ in
            .now(try await create(config))
        }
        table.on(SessionSendRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            let work = try await s.startTurn(input: params.input, options: params.options ?? TurnOptions(), mode: .chat)
            return .later { try await work.result().turnResult }
        }
        table.on(SessionGenerateRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            let work = try await s.startTurn(
                input: params.input, options: params.options ?? TurnOptions(),
                mode: .generate(schema: params.schema, strict: params.strict ?? true))
            return .later {
                let outcome = try await work.result()
                return SessionGenerateResult(value: outcome.structuredValue ?? .null, turnId: outcome.turnResult.turnId, usage: outcome.turnResult.usage)
            }
        }
        table.on(SessionCancelRequest.self) { [self] params, _ in
            .now(SessionCancelResult(wasRunning: try await session(params.sessionId).cancelCooperatively()))
        }
        table.onNotification(SessionCancelNotification.self) { [self] params in
            _ = await (try? session(params.sessionId))?.cancelCooperatively()
        }
        table.on(SessionConfirmRequest.self) { [self] params, _ in
            try await session(params.sessionId).confirm(callId: params.callId, decision: params.decision, reason: params.reason)
            return .now(Empty())
        }
        table.on(SessionGetStateRequest.self) { [self] params, _ in
            .now(try await session(params.sessionId).state())
        }
        table.on(SessionGetTranscriptRequest.self) { [self] params, _ in
            .now(try await session(params.sessionId).transcript())
        }
        // A malformed entry (e.g. an unknown entry type) is invalidTranscript
        // (PROTOCOL.md section 5), not a generic invalidParams.
        table.on(SessionMutateTranscriptRequest.self, errorKindForField: { field in
            field.hasPrefix("operations") && (field.contains(".entries") || field.contains(".entry")) ? .invalidTranscript : .invalidParams
        }) { [self] params, _ in
            .now(try await session(params.sessionId).mutateTranscript(expectedRevision: params.expectedRevision, operations: params.operations))
        }
        table.on(SessionSetPropertiesRequest.self) { [self] params, _ in
            .now(try await session(params.sessionId).setProperties(set: params.set ?? [:], remove: params.remove ?? []))
        }
        table.on(SessionListRequest.self) { [self] params, _ in
            .now(try await list(params))
        }
        table.on(SessionCloseRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            sessions.withLock { _ = $0.removeValue(forKey: params.sessionId) }
            order.withLock { $0.removeAll { $0 == params.sessionId } }
            return .later {
                await s.abortRunningTurn(reason: .closed)
                return Empty()
            }
        }
        table.on(SessionResumeRequest.self) { [self] params, _ in
            // Without a store, only a loaded session can be "resumed".
            let s = try session(params.sessionId)
            return .now(await s.handle())
        }
        table.on(SessionDeleteRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            sessions.withLock { _ = $0.removeValue(forKey: params.sessionId) }
            order.withLock { $0.removeAll { $0 == params.sessionId } }
            return .later {
                await s.abortRunningTurn(reason: .closed)
                return Empty()
            }
        }
    }

    private func create(_ config: SessionConfig) async throws -> SessionHandle {
        if shuttingDown.withLock({ $0 }) { throw RPCError(.invalidRequest, "the server is shutting down") }
        let problems = config.validate()
        if let first = problems.first {
            throw RPCError(.invalidConfiguration, first.description, data: [
                "field": .string(first.path),
                "problems": .array(problems.map { ["path": .string($0.path), "message": .string($0.message)] }),
            ])
        }
        if let model = config.model {
            _ = try catalog.resolve(model, field: "model")
        }
        if sessions.withLock({ $0.count }) >= options.maxSessions {
            throw RPCError(.overloaded, "too many sessions (limit \(options.maxSessions)); close some and retry")
        }
        let id = "s-" + UUID().uuidString.lowercased().prefix(12)
        let session = AgentSession(id: String(id), config: config, context: context)
        sessions.withLock { $0[String(id)] = session }
        order.withLock { $0.append(String(id)) }
        return await session.handle()
    }

    private func list(_ params: SessionListParams) async throws -> SessionListResult {
        let ids = order.withLock { $0 }
        var start = 0
        if let cursor = params.cursor {
            guard let index = ids.firstIndex(of: cursor) else {
                throw RPCError.invalidParams("unknown cursor '\(cursor)'", field: "cursor")
            }
            start = index + 1
        }
        let limit = max(1, min(params.limit ?? 100, 1000))
        let page = Array(ids.dropFirst(start).prefix(limit))
        var data: [SessionSummary] = []
        for id in page {
            if let s = sessions.withLock({ $0[id] }) { data.append(await s.summary()) }
        }
        let next = start + page.count < ids.count ? page.last : nil
        return SessionListResult(data: data, nextCursor: next)
    }
}
