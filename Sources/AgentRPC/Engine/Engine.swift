import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
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
    /// The model cassettes open in this server, and the server's own (docs/testing.md).
    let cassettes: ModelCassettes
    let cassette: ModelCassette?
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
    /// Nil with `--ephemeral`.
    private let store: (any SessionStore)?
    private let client = Mutex<(ClientCapabilities, ClientInfo?)>((ClientCapabilities(), nil))
    private let shuttingDown = Mutex(false)
    let tracer: Tracer
    private let cassettes: ModelCassettes
    private let cassette: ModelCassette?

    init(options: ServerOptions, connection: any ClientChannel, logger: Logger) throws {
        self.channel = connection
        self.logger = logger
        ProcessLogger.current.withLock { $0 = logger }
        self.options = options
        self.catalog = try ModelCatalog.load(explicitPath: options.configPath, environment: options.environment)
        // Options a provider cannot take are turn warnings (docs/protocol.md, "Model
        // options"); the file's are also named on stderr at start, where they were written.
        for (name, model) in catalog.models.sorted(by: { $0.key < $1.key }) where ProviderFactory.definition(for: model.provider)?.isLanguageModel ?? false {
            for warning in ProviderFactory.modelOptions(model).warnings {
                logger.warning("\(catalog.sourcePath ?? "agentrpc.json"): models.\(name).options.\(warning.key): \(warning.message)")
            }
        }
        self.dumper = try options.dumpRequestsPath.map { try RequestDumper(path: $0) }
        self.cassettes = ModelCassettes(logger: logger)
        // `--model-cassette` is relative to the working directory, agentrpc.json's to the file.
        if let config = options.modelCassette {
            self.cassette = try cassettes.cassette(config)
        } else if let config = catalog.modelCassette {
            let directory = catalog.sourcePath.map { $0.deletingLastPathComponent }.flatMap { $0.isEmpty ? nil : $0 }
            self.cassette = try cassettes.cassette(config, relativeTo: directory)
        } else {
            self.cassette = nil
        }
        self.tracer = Tracer(includesPayloads: options.tracePayloads)
        try WallClock.configure(environment: options.environment)
        if options.ephemeral {
            self.store = nil
        } else {
            var directory = options.storeDirectory ?? JournalStore.defaultDirectory(environment: options.environment)
            if !directory.hasPrefix("/") { directory = FileManager.default.currentDirectoryPath + "/" + directory }
            self.store = JournalStore(directory: directory, logger: logger, killSwitch: try TestKillSwitch.from(environment: options.environment))
        }
        defer {
            if let store = store as? JournalStore {
                StoreRetention.startAtLaunch(catalog.store, on: store, logger: logger) { [weak self] id in self?.sessions.withLock { $0[id] } != nil }
            }
        }
        if let path = options.traceFilePath {
            do {
                tracer.addExporter(try OTLPFileExporter(path: path))
            } catch {
                throw RPCError.invalidConfiguration("cannot write the trace file: \(error)", field: "--trace-file")
            }
        }
    }

    /// Where sessions are stored (nil: `--ephemeral`).
    var storeLocation: String? { store?.location }

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
            clientCapabilities: client.withLock { $0.0 }, tracer: tracer.hasExporters ? tracer : nil,
            cassettes: cassettes, cassette: cassette)
    }

    /// A client's `tool/progress`. About a call that is not running (any more):
    /// nothing to report. Never blocks (it may run on the reader thread).
    func reportToolProgress(_ params: ToolProgressNotification.Params) {
        (try? session(params.sessionId))?.reportToolProgress(SessionEvent.ToolProgress(
            callId: params.callId, progress: params.progress, total: params.total, message: params.message))
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

    /// `shutdown`: everything committed is made durable before the answer.
    func syncAll() async throws {
        let all = sessions.withLock { Array($0.values) }
        var failure: (any Error)?
        for s in all {
            do { try await s.syncJournal() } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// At exit: sync and release every journal (their locks would die with the process anyway),
    /// and stop every MCP server.
    func closeAll() async {
        let all = sessions.withLock { Array($0.values) }
        await withTaskGroup(of: Void.self) { group in
            for s in all { group.addTask { await s.stopMCPServers() } }
        }
        for s in all {
            do { try await s.closeJournal() } catch { logger.warning("session \(s.id): \(error)") }
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
        table.on(SessionCompactRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            // Admitted in request order (a send right after it is sessionBusy); the summary request runs after.
            try await s.beginCompaction(params)
            return .later { try await s.runCompaction(params) }
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
            let s = try session(params.sessionId)
            // A parked turn ends as a cancelled one does (rolled back) before the answer.
            if await s.parkedTurn != nil {
                return .later { SessionCancelResult(wasRunning: try await s.cancelParked()) }
            }
            return .now(await s.cancelCooperatively())
        }
        table.onNotification(SessionCancelNotification.self) { [self] params in
            guard let s = try? session(params.sessionId) else { return }
            if await s.parkedTurn != nil { _ = try? await s.cancelParked() } else { _ = await s.cancelCooperatively() }
        }
        table.on(SessionContinueRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            if try await s.expireParkedTurnIfDue() {
                throw RPCError(.invalidRequest, "the parked turn waited longer than limits.parkedTTLSeconds and ended as cancelled")
            }
            let work = try await s.continueParked()
            return .later { try await work.result().turnResult }
        }
        table.on(SessionParkRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            guard let control = try await s.requestPark() else {
                return .now(SessionParkResult(wasRunning: false, parked: await s.parkedState))
            }
            return .later {
                // Parked at its next wait for the client, or ended without one.
                await control.settled()
                await s.dropQueuedSends(source: "session/park")
                return SessionParkResult(wasRunning: true, parked: await s.parkedState)
            }
        }
        // Over stdio the server's reader takes these first (Server.init), in order
        // with the call's answer; this handler serves the other channels.
        table.onNotification(ToolProgressNotification.self) { [self] params in reportToolProgress(params) }
        table.on(SessionConfirmRequest.self) { [self] params, _ in
            .now(try await session(params.sessionId).confirm(params))
        }
        table.on(SessionGetStateRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            var state = await s.state()
            state.mcpServers = await s.mcp?.states()
            return .now(state)
        }
        table.on(SessionGetPromptRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            // The server may take its time (up to its bound): later requests are
            // not held behind it, and `$/cancelRequest` withdraws it.
            return .later { try await s.mcpPrompt(params) }
        }
        table.on(SessionGetTranscriptRequest.self) { [self] params, _ in
            .now(try await session(params.sessionId).transcriptForClient())
        }
        table.on(SessionGetMediaRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            // The file is read off the session's actor.
            return .now(try ToolMedia.content(try await s.mediaReference(sha256: params.sha256), store: s.media))
        }
        // A malformed entry (e.g. an unknown entry type) is invalidTranscript
        // (docs/protocol.md §3), not a generic invalidParams.
        table.on(SessionMutateTranscriptRequest.self, errorKindForField: { field in
            field.hasPrefix("operations") && (field.contains(".entries") || field.contains(".entry")) ? .invalidTranscript : .invalidParams
        }) { [self] params, _ in
            .now(try await session(params.sessionId).mutateTranscript(expectedRevision: params.expectedRevision, operations: params.operations))
        }
        table.on(SessionSetPropertiesRequest.self) { [self] params, _ in
            let s = try session(params.sessionId)
            let result = try await s.setProperties(set: params.set ?? [:], remove: params.remove ?? [])
            try await s.syncJournal()
            return .now(result)
        }
        table.on(SessionListRequest.self) { [self] params, _ in
            .now(try await list(params))
        }
        table.on(SessionCloseRequest.self) { [self] params, _ in
            try unload(params.sessionId, deleting: false)
        }
        table.on(SessionResumeRequest.self) { [self] params, _ in
            try await resume(params)
        }
        table.on(SessionDeleteRequest.self) { [self] params, _ in
            try SessionIDRule.check(params.sessionId)
            if sessions.withLock({ $0[params.sessionId] }) != nil {
                return try unload(params.sessionId, deleting: true)
            }
            guard let store, try store.delete(params.sessionId) else { throw RPCError.sessionNotFound(params.sessionId) }
            return .now(Empty())
        }
        table.on(SessionForkRequest.self) { [self] params, _ in
            .now(try await fork(params))
        }
    }

    /// Removes a session at once (later requests get `sessionNotFound`), then
    /// cancels its running turn, which rolls back, syncs and releases its
    /// journal (and with `deleting`, removes it) before answering.
    private func unload(_ id: String, deleting: Bool) throws -> Reply<Empty> {
        let s = try session(id)
        sessions.withLock { _ = $0.removeValue(forKey: id) }
        let store = self.store
        return .later {
            await s.abortRunningTurn(reason: .closed)
            await s.stopMCPServers()
            if deleting {
                try? await s.closeJournal(deleting: true)
                _ = try store?.delete(id)
            } else {
                try await s.closeJournal()
            }
            return Empty()
        }
    }

    /// Loads a stored session (or answers a loaded one's handle). An
    /// interrupted last turn is recovered before the session is handed out;
    /// `rollback` then undoes its tool results before the answer.
    private func resume(_ params: SessionResumeParams) async throws -> Reply<SessionResumeResult> {
        let id = params.sessionId
        try SessionIDRule.check(id)
        if let loaded = sessions.withLock({ $0[id] }) {
            if params.mcpServers != nil {
                throw RPCError.invalidParams("mcpServers applies only when session/resume loads the session; this one is loaded (close it first)", field: "mcpServers")
            }
            // The later call that starts servers a first resume deferred.
            if params.startMCPServers != false { await loaded.startMCPServers() }
            let handle = await loaded.handle()
            return .now(SessionResumeResult(
                sessionId: handle.sessionId, revision: handle.revision, activeProfile: handle.activeProfile, parkedTurn: await loaded.parkedState))
        }
        guard let store else { throw RPCError.sessionNotFound(id) }
        if shuttingDown.withLock({ $0 }) { throw RPCError(.invalidRequest, "the server is shutting down") }
        if sessions.withLock({ $0.count }) >= options.maxSessions {
            throw RPCError(.overloaded, "too many sessions (limit \(options.maxSessions)); close some and retry")
        }
        let (journal, contents) = try store.open(id)
        var config = contents.config
        if let servers = params.mcpServers {
            config.mcpServers = servers.isEmpty ? nil : servers
            do {
                try Self.checkMCPServers(config, catalog: catalog)
            } catch {
                journal.close()
                throw error
            }
        }
        let session = AgentSession(
            id: id, config: config, context: context, transcript: contents.transcript, createdAt: contents.header.createdAt,
            media: MediaStore(directory: store.mediaDirectory(id)))
        let interrupted: InterruptedTurn?
        do {
            // A session that parks keeps its open turn for session/continue, once its prompt is journaled.
            if await session.keepsParkedTurn {
                interrupted = nil
                // Past its TTL it ends now; else it ends when due unless continued first.
                if try await !session.expireParkedTurnIfDue() { await session.armParkedTTL() }
            } else {
                interrupted = try await session.recoverInterruptedTurn(rollback: params.rollback == true)
            }
        } catch {
            journal.close()
            throw error
        }
        // Another resume of the same id may have won meanwhile; it holds the lock, so this one cannot have.
        sessions.withLock { $0[id] = session }
        await session.startMCPServers(deferred: params.startMCPServers == false)
        let handle = await session.handle()
        var warnings = contents.warnings.map { ContextDiagnostic(source: "journal", message: $0.message) }
        // A stat per image or audio clip named, none read: a file removed by hand (or an import that let
        // them go) is said now, not found out by a model that gets a note in place of a screenshot.
        let missingMedia = contents.transcript.mediaReferences.filter { !session.media.has($0) }
        if !missingMedia.isEmpty { warnings.append(ContextDiagnostic(source: "media", message: ToolMedia.missingNote(missingMedia))) }
        let result = SessionResumeResult(
            sessionId: id, revision: handle.revision, activeProfile: handle.activeProfile, interruptedTurn: interrupted,
            warnings: warnings.isEmpty ? nil : warnings, parkedTurn: await session.parkedState)
        guard let interrupted, interrupted.undoOutcome == .rolledBack else { return .now(result) }
        return .later {
            await session.rollBackInterrupted(interrupted)
            return result
        }
    }

    /// A server list given to `session/resume` is checked as `session/create` checks it.
    static func checkMCPServers(_ config: SessionConfig, catalog: ModelCatalog) throws {
        // The rest was valid when the session was created, so what fails now is the new list.
        let problems = config.validate()
        if let first = problems.first {
            let field = first.path.hasPrefix("mcpServers") ? first.path : "mcpServers"
            throw RPCError(.invalidConfiguration, first.description, data: [
                "field": .string(field),
                "problems": .array(problems.map { ["path": .string($0.path), "message": .string($0.message)] }),
            ])
        }
        _ = try MCPServerSet.specs(config: config, catalog: catalog)
    }

    /// A new session with a copy of another's configuration, properties and
    /// entries up to `atEntryId`.
    private func fork(_ params: SessionForkParams) async throws -> SessionHandle {
        try SessionIDRule.check(params.sessionId)
        if shuttingDown.withLock({ $0 }) { throw RPCError(.invalidRequest, "the server is shutting down") }
        let snapshot: TranscriptSnapshot
        let config: SessionConfig
        let media: MediaStore
        if let source = sessions.withLock({ $0[params.sessionId] }) {
            snapshot = try await source.forkSnapshot(atEntryID: params.atEntryId)
            config = source.config
            media = source.media
        } else if let store {
            let contents = try store.read(params.sessionId)
            snapshot = try AgentSession.forkSnapshot(of: contents.transcript, atEntryID: params.atEntryId)
            config = contents.config
            media = MediaStore(directory: store.mediaDirectory(params.sessionId))
        } else {
            throw RPCError.sessionNotFound(params.sessionId)
        }
        return try await start(config: config, initial: snapshot, forkedFrom: params.sessionId, mediaFrom: media)
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
        _ = try MCPServerSet.specs(config: config, catalog: catalog)
        // Opening the session's cassette now reports a missing or unreadable file at create time.
        if let cassette = config.modelCassette { _ = try cassettes.cassette(cassette) }
        return try await start(config: config, initial: nil, forkedFrom: nil)
    }

    /// Registers a new session (created or forked), with its journal unless the
    /// server is ephemeral or the configuration says `store: false`.
    /// `mediaFrom`: a fork's source, whose images and audio the fork's entries name.
    private func start(config: SessionConfig, initial: TranscriptSnapshot?, forkedFrom: String?, mediaFrom: MediaStore? = nil) async throws -> SessionHandle {
        if sessions.withLock({ $0.count }) >= options.maxSessions {
            throw RPCError(.overloaded, "too many sessions (limit \(options.maxSessions)); close some and retry")
        }
        let id = "s-" + String(UUID().uuidString.lowercased().prefix(12))
        let createdAt = WallClock.now()
        var transcript = initial.map(Transcript.init(snapshot:)) ?? Transcript(properties: config.properties ?? [:], createdAt: createdAt)
        let stored = store.flatMap { config.store != false ? $0 : nil }
        let media = MediaStore(directory: stored?.mediaDirectory(id))
        if let mediaFrom, let initial {
            // Kept before the journal names them.
            do {
                try media.copy(initial.mediaReferences, from: mediaFrom)
            } catch {
                if let directory = media.directory { MediaStore.remove(directory: directory) }
                throw error
            }
        }
        if let store = stored {
            let (stored, dropped) = try config.forStorage()
            if !dropped.isEmpty {
                logger.warning("session \(id): not stored (they may hold credentials; put the model in the config file to keep them): \(dropped.joined(separator: ", "))")
            }
            do {
                transcript.journal = try store.create(JournalHeader(sessionID: id, createdAt: createdAt, config: stored, forkedFrom: forkedFrom), config: config, initial: initial)
            } catch {
                // The media copied for a fork that was not stored would belong to no session.
                if let directory = media.directory { MediaStore.remove(directory: directory) }
                throw error
            }
        }
        let session = AgentSession(id: id, config: config, context: context, transcript: transcript, createdAt: createdAt, media: media)
        sessions.withLock { $0[id] = session }
        await session.startMCPServers()
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
            if let problem = BoundedRegex.problem(with: pattern) { problems.append(ConfigProblem(path: path, message: problem)) }
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

    /// Loaded and stored sessions, newest-updated first (ties by id). The
    /// cursor is the position of the last session of the page in that order,
    /// so sessions closed or deleted meanwhile do not strand it. Stored
    /// sessions come from the store's index, so a page costs the same however
    /// many are stored; loaded ones are asked for their state.
    private func list(_ params: SessionListParams) async throws -> SessionListResult {
        let limit = params.limit ?? SessionListParams.defaultLimit
        guard limit >= 1 else {
            throw RPCError.invalidParams("limit must be at least 1", field: "limit")
        }
        var after: ListPosition?
        if let cursor = params.cursor {
            guard let position = ListPosition(cursor: cursor) else {
                throw RPCError.invalidParams("'\(cursor.prefix(64))' is not a cursor this server handed out", field: "cursor")
            }
            after = position
        }
        let filter = try StoredSessionFilter(params)
        let pageSize = min(limit, SessionListParams.maxLimit)
        let loaded = sessions.withLock { $0 }
        var live: [(position: ListPosition, summary: SessionSummary)] = []
        if params.loaded != false {
            for (id, s) in loaded {
                let position = ListPosition(updatedAt: await s.updatedAt, sessionID: id)
                if let after, !(after < position) { continue }
                let summary = await s.summary()
                if !filter.isRecentEnough(position.updatedAt) { continue }
                if !filter.matches(title: summary.title, model: summary.model) { continue }
                live.append((position, summary))
            }
            live.sort { $0.position < $1.position }
        }
        var stored: [StoredSessionSummary] = []
        if params.loaded != true, let store {
            stored = store.page(after: after, count: pageSize + 1, filter: filter) { loaded[$0] != nil }
        }
        // Merge the two sorted lists.
        var data: [SessionSummary] = []
        var last: ListPosition?
        var i = 0
        var j = 0
        while data.count < pageSize, i < live.count || j < stored.count {
            let storedPosition = j < stored.count ? ListPosition(updatedAt: stored[j].updatedAt, sessionID: stored[j].sessionID) : nil
            if i < live.count, storedPosition.map({ live[i].position < $0 }) ?? true {
                data.append(live[i].summary)
                last = live[i].position
                i += 1
            } else if let position = storedPosition {
                let s = stored[j]
                data.append(SessionSummary(
                    sessionId: s.sessionID, title: s.title, userId: s.userId, model: s.model,
                    createdAt: Timestamp.iso8601(s.createdAt), updatedAt: Timestamp.iso8601(s.updatedAt),
                    revision: s.revision, entryCount: s.entryCount, isRunning: false, loaded: false,
                    locked: s.locked, lockedBy: s.lockedBy.map { Int($0) }))
                last = position
                j += 1
            }
        }
        let hasMore = i < live.count || j < stored.count
        return SessionListResult(data: data, nextCursor: hasMore ? last?.cursor : nil)
    }
}

/// A place in `session/list` order: newest-updated first, then by id.
struct ListPosition: Sendable, Comparable {
    /// Microseconds since 1970: finer than any two changes of one session.
    var micros: Int64
    var sessionID: String

    init(updatedAt: Date, sessionID: String) {
        let us = (updatedAt.timeIntervalSince1970 * 1_000_000).rounded()
        self.micros = us.isFinite && abs(us) < 9e18 ? Int64(us) : 0
        self.sessionID = sessionID
    }

    var updatedAt: Date { Date(timeIntervalSince1970: Double(micros) / 1_000_000) }

    /// `<micros>.<sessionId>`.
    var cursor: String { "\(micros).\(sessionID)" }

    init?(cursor: String) {
        guard let dot = cursor.firstIndex(of: "."), let us = Int64(cursor[..<dot]), us >= 0 else { return nil }
        let id = String(cursor[cursor.index(after: dot)...])
        guard SessionIDRule.isPlain(id) else { return nil }
        self.micros = us
        self.sessionID = id
    }

    static func < (a: ListPosition, b: ListPosition) -> Bool {
        a.micros != b.micros ? a.micros > b.micros : a.sessionID < b.sessionID
    }
}
