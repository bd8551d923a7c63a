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
    static let providerNames = ProviderKind.allCases.map(\.rawValue)

    private let channel: any ClientChannel
    private let logger: Logger
    private let options: ServerOptions
    private let catalog: ModelCatalog
    private let dumper: RequestDumper?
    private let sessions = Mutex<[String: AgentSession]>([:])
    /// Loaded sessions in creation order, each with its creation number. `session/list`
    /// cursors are creation numbers, so a cursor stays valid when the session it was
    /// taken from is closed before the next page is asked for.
    private let order = Mutex<CreationOrder>(CreationOrder())
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
            let options = params.options ?? TurnOptions()
            guard params.queue == true else {
                let work = try await s.startTurn(input: params.input, options: options, mode: .chat)
                return .later { try await work.result().turnResult }
            }
            // The place in the queue is taken now, in request order; the wait is the request's.
            switch try await s.startOrEnqueue(input: params.input, options: options, mode: .chat) {
            case .started(let work):
                return .later { try await work.result().turnResult }
            case .queued(let id):
                return .later { try await s.awaitQueuedTurn(id).result().turnResult }
            }
        }
        table.on(SessionSteerRequest.self) { [self] params, _ in
            .now(try await session(params.sessionId).steer(input: params.input, expectedTurnId: params.expectedTurnId))
        }
        table.on(SessionRewindRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            let (result, undos) = try await s.rewindTranscript(params)
            if undos.isEmpty { return .now(result) }
            return .later {
                var answer = result
                answer.undos = await s.sendRewindUndos(undos)
                return answer
            }
        }
        table.on(SessionSetApprovalRulesRequest.self) { [self] params, _ in
            .now(try await session(params.sessionId).setApprovalRules(add: params.add ?? [], remove: params.remove ?? []))
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
            .now(try await session(params.sessionId).cancelCooperatively())
        }
        table.onNotification(SessionCancelNotification.self) { [self] params in
            _ = await (try? session(params.sessionId))?.cancelCooperatively()
        }
        table.on(SessionConfirmRequest.self) { [self] params, _ in
            .now(try await session(params.sessionId).confirm(params))
        }
        table.on(SessionGetStateRequest.self) { [self] params, _ in
            .now(try await session(params.sessionId).state())
        }
        table.on(SessionGetTranscriptRequest.self) { [self] params, _ in
            .now(try await session(params.sessionId).transcriptForClient())
        }
        // A malformed entry (e.g. an unknown entry type) is invalidTranscript
        // (docs/protocol.md §3), not a generic invalidParams.
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
            try unload(params.sessionId)
        }
        table.on(SessionResumeRequest.self) { [self] params, _ in
            // Without a store, only a loaded session can be "resumed".
            let s = try session(params.sessionId)
            return .now(await s.handle())
        }
        table.on(SessionDeleteRequest.self) { [self] params, _ in
            // Without a store there is nothing on disk to remove: delete is close.
            try unload(params.sessionId)
        }
    }

    /// Removes a session at once (later requests get `sessionNotFound`), then
    /// cancels its running turn, which rolls back, before answering.
    private func unload(_ id: String) throws -> Reply<Empty> {
        let s = try session(id)
        sessions.withLock { _ = $0.removeValue(forKey: id) }
        order.withLock { $0.remove(id) }
        return .later {
            await s.abortRunningTurn(reason: .closed)
            return Empty()
        }
    }

    private func create(_ config: SessionConfig) async throws -> SessionHandle {
        if shuttingDown.withLock({ $0 }) { throw RPCError(.invalidRequest, "the server is shutting down") }
        let problems = config.validate() + HistoryTransformer.patternProblems(in: config) + Self.regexProblems(in: config)
        if let first = problems.first {
            throw RPCError(.invalidConfiguration, first.description, data: [
                "field": .string(first.path),
                "problems": .array(problems.map { ["path": .string($0.path), "message": .string($0.message)] }),
            ])
        }
        if let model = config.model {
            _ = try catalog.resolve(model, field: "model")
        }
        if client.withLock({ $0.0.askUser }) != true, let field = Self.askUserField(in: config) {
            throw RPCError.invalidConfiguration("the session offers ask_user, but the client did not declare capabilities.askUser (it must answer user/ask)", field: field)
        }
        if client.withLock({ $0.0.tools }) == false, !(config.tools ?? []).isEmpty {
            throw RPCError.invalidConfiguration("the session declares tools, but the client said it runs none (capabilities.tools: false)", field: "tools")
        }
        // Resolving once now reports unknown tool names, blocks and cases at create time.
        _ = try ProfileResolver.resolve(config: config, properties: config.properties ?? [:])
        if sessions.withLock({ $0.count }) >= options.maxSessions {
            throw RPCError(.overloaded, "too many sessions (limit \(options.maxSessions)); close some and retry")
        }
        let id = "s-" + UUID().uuidString.lowercased().prefix(12)
        let session = AgentSession(id: String(id), config: config, context: context)
        sessions.withLock { $0[String(id)] = session }
        order.withLock { $0.append(String(id)) }
        return await session.handle()
    }

    /// Where the config offers `ask_user`, if anywhere.
    static func askUserField(in config: SessionConfig) -> String? {
        if config.askUser == true { return "askUser" }
        func find(_ tools: [ProfileTool]?, _ path: String) -> String? {
            (tools ?? []).firstIndex(of: .askUser).map { "\(path)[\($0)]" }
        }
        if let profiles = config.profiles {
            if let f = find(profiles.defaults?.tools, "profiles.defaults.tools") { return f }
            for name in profiles.cases.keys.sorted() {
                if let f = find(profiles.cases[name]?.tools, "profiles.cases.\(name).tools") { return f }
            }
        }
        for name in (config.blocks ?? [:]).keys.sorted() {
            if let f = find(config.blocks?[name]?.tools, "blocks.\(name).tools") { return f }
        }
        return nil
    }

    /// Egress and router patterns are regular expressions; a bad one is a configuration error, not a silent no-op.
    static func regexProblems(in config: SessionConfig) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        func check(_ pattern: String, _ path: String) {
            if (try? NSRegularExpression(pattern: pattern)) == nil {
                problems.append(ConfigProblem(path: path, message: "'\(pattern)' is not a valid regular expression"))
            }
        }
        func checkEgress(_ egress: Egress?, _ path: String) {
            for (i, p) in (egress?.refuse ?? []).enumerated() { check(p, "\(path).refuse[\(i)]") }
            for (i, r) in (egress?.redact ?? []).enumerated() { check(r.pattern, "\(path).redact[\(i)].pattern") }
        }
        checkEgress(config.egress, "egress")
        if let profiles = config.profiles {
            checkEgress(profiles.defaults?.egress, "profiles.defaults.egress")
            for name in profiles.cases.keys.sorted() { checkEgress(profiles.cases[name]?.egress, "profiles.cases.\(name).egress") }
        }
        for (i, rule) in (config.router?.rules ?? []).enumerated() { check(rule.pattern, "router.rules[\(i)].pattern") }
        return problems
    }

    private func list(_ params: SessionListParams) async throws -> SessionListResult {
        let limit = params.limit ?? SessionListParams.defaultLimit
        guard limit >= 1 else {
            throw RPCError.invalidParams("limit must be at least 1", field: "limit")
        }
        var after = 0
        if let cursor = params.cursor {
            guard let number = CreationOrder.number(fromCursor: cursor), number < order.withLock({ $0.next }) else {
                throw RPCError.invalidParams("unknown cursor '\(cursor)'", field: "cursor")
            }
            after = number
        }
        let (page, hasMore) = order.withLock { $0.page(after: after, limit: min(limit, SessionListParams.maxLimit)) }
        var data: [SessionSummary] = []
        for entry in page {
            if let s = sessions.withLock({ $0[entry.id] }) { data.append(await s.summary()) }
        }
        let next = hasMore ? page.last.map { CreationOrder.cursor(for: $0.number) } : nil
        return SessionListResult(data: data, nextCursor: next)
    }
}

/// Loaded session ids in creation order, numbered from 1 (`session/list` paging).
struct CreationOrder: Sendable {
    private(set) var entries: [(number: Int, id: String)] = []
    /// The number the next session gets; every cursor ever handed out is below it.
    private(set) var next = 1

    mutating func append(_ id: String) {
        entries.append((next, id))
        next += 1
    }

    mutating func remove(_ id: String) {
        entries.removeAll { $0.id == id }
    }

    /// Up to `limit` sessions created after number `after`, and whether more follow.
    func page(after: Int, limit: Int) -> (page: [(number: Int, id: String)], hasMore: Bool) {
        let rest = entries.drop { $0.number <= after }
        return (Array(rest.prefix(limit)), rest.count > limit)
    }

    static func cursor(for number: Int) -> String { String(number) }

    static func number(fromCursor cursor: String) -> Int? {
        guard let n = Int(cursor), n >= 1, cursor == String(n) else { return nil }
        return n
    }
}
