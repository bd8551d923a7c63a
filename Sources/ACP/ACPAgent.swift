import AgentRPC
import AgentRPCProtocol
import AgentTools
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The ACP side of `agentrpc acp`: reads the editor's messages in order and
/// answers each by calling the embedded engine in agentrpc's own protocol.
final class ACPAgent: Sendable {
    static let protocolVersion = 1

    let editor: Connection
    let engine: EmbeddedServer
    let sessions: ACPSessions
    let configuration: ACPConfiguration
    let logger: Logger
    /// `--model`: the model every new session starts with.
    let modelOverride: String?
    let executable: String
    let environment: [String: String]
    /// Bounds this process's exit (`ExitWatchdog`); it also kills the local model server if it fires.
    let watchdog: ExitWatchdog?
    /// How long the end waits for running turns to stop (the server's own
    /// setting, which the exit watchdog's bound is derived from).
    let shutdownGraceSeconds: Double

    private let state = Mutex(State())

    struct State {
        var editor: EditorCapabilities?
        /// Requests whose answer is still being worked out, for `$/cancel_request`.
        var inFlight: [RequestID: Task<Void, Never>] = [:]
        /// `session/update`s that must follow a request's answer (an editor drops
        /// `available_commands_update` sent before the session exists for it).
        var afterAnswer: [RequestID: [JSONValue]] = [:]
        /// Sessions whose slash commands follow a request's answer (first of what follows it).
        var commandsAfterAnswer: [RequestID: ACPSession] = [:]
        /// Sessions loaded with a parked turn (`onDisconnect: "park"`): it goes
        /// on once the load is answered, asking the editor again what it waited for.
        var continueAfterAnswer: [RequestID: String] = [:]
        /// The local model, started at the first session that needs it.
        var localModel: LocalModelServer?
        var localModelTried = false
    }

    init(editor: Connection, engine: EmbeddedServer, sessions: ACPSessions, configuration: ACPConfiguration, logger: Logger,
         modelOverride: String?, executable: String, environment: [String: String], shutdownGraceSeconds: Double,
         watchdog: ExitWatchdog? = nil) {
        self.editor = editor
        self.engine = engine
        self.sessions = sessions
        self.configuration = configuration
        self.logger = logger
        self.modelOverride = modelOverride
        self.executable = executable
        self.environment = environment
        self.watchdog = watchdog
        self.shutdownGraceSeconds = shutdownGraceSeconds
    }

    /// Serves until the editor closes its end.
    func run() async {
        for await item in editor.inbound {
            switch item {
            case .frame(.single(let decoded)):
                await handle(decoded)
            case .frame(.batch(let items)):
                // ACP has no batches; each member is still served and answered on its own.
                for decoded in items { await handle(decoded) }
            case .frame(.emptyBatch):
                fail(nil, RPCError(.invalidRequest, "an empty batch is not a valid request"))
            case .oversized(let count, let id):
                fail(id, RPCError(code: .invalidRequest, kind: .messageTooLarge,
                    message: "message of \(count) bytes exceeds the limit of \(editor.maxMessageBytes) bytes",
                    data: ["limit": .int(editor.maxMessageBytes), "size": .int(count)]))
            case .malformedHeader(let why):
                fail(nil, RPCError(.parseError, "malformed header: \(why)"))
            case .desynchronized(let why, let id):
                fail(id, RPCError(.parseError, "\(why); the frame was not run"))
            }
        }
    }

    /// A signal (TERM, INT, HUP) ends the process at once: sessions are durable
    /// record by record, but a local model server would outlive it, so it is
    /// stopped first.
    func installSignalHandlers() -> [SignalSource] {
        [SIGTERM, SIGINT, SIGHUP].map { number in
            SignalSource(number) { [self] _ in
                // First, before anything here can wait: the exit is bounded from now on.
                watchdog?.arm(.signal(number))
                logger.info("received signal \(number); stopping")
                state.withLock { $0.localModel }?.stop()
                logger.flush()
                exit(128 + number)
            }
        }
    }

    /// How long the end waits for the requests still open to be answered.
    static let requestsGraceSeconds: Double = 5

    /// The end: running prompts are cancelled (their turns roll back), the
    /// engine's journals made durable, the local model stopped.
    func finish() async {
        // First: the editor may not wait long before it kills this process, and a
        // model server left behind would outlive it.
        state.withLock { $0.localModel }?.stop()
        watchdog?.killsWhenFiring(nil)
        // A session that parks keeps its waiting turn for the next load: the engine's shutdown parks it.
        if configuration.session["onDisconnect"]?.stringValue != "park" {
            for session in sessions.all { session.cancelPrompt() }
        }
        await engine.shutdown(reason: "the editor closed its input", graceSeconds: shutdownGraceSeconds)
        // Every request still open is answered (a cancelled prompt with `cancelled`) before the output is flushed.
        let running = state.withLock { Array($0.inFlight.values) }
        for task in running { task.cancel() }
        let deadline = ContinuousClock.now.advanced(by: .seconds(Self.requestsGraceSeconds))
        await withTaskGroup(of: Void.self) { group in
            group.addTask { for task in running { await task.value } }
            group.addTask { try? await Task.sleep(until: deadline, clock: .continuous) }
            await group.next()
            group.cancelAll()
        }
    }

    private func handle(_ decoded: DecodedMessage) async {
        switch decoded {
        case .invalid(let id, let error):
            fail(id, error)
        case .message(.response):
            // Answers to our requests are settled by the connection's reader.
            break
        case .message(.notification(let method, let params)):
            await handleNotification(method, params)
        case .message(.request(let id, let method, let params)):
            await handleRequest(id: id, method: method, params: params)
        }
    }

    private func handleNotification(_ method: String, _ params: JSONValue?) async {
        switch method {
        case "session/cancel":
            guard let id = params?["sessionId"]?.stringValue, let session = sessions.get(id) else { return }
            session.cancelPrompt()
        case "$/cancel_request":
            guard let raw = params?["requestId"], let id = RequestID(json: raw) else { return }
            // A prompt's cancel is the turn's cancel: it answers `cancelled`, not an error.
            if let session = sessions.all.first(where: { $0.promptRequestID == id }) {
                session.cancelPrompt()
                return
            }
            state.withLock { $0.inFlight[id] }?.cancel()
        default:
            logger.debug("ignoring notification \(method)")
        }
    }

    private func handleRequest(id: RequestID, method: String, params: JSONValue?) async {
        if method != "initialize", state.withLock({ $0.editor }) == nil {
            fail(id, RPCError(.invalidRequest, "the first request must be 'initialize'"))
            return
        }
        let reply: Reply<JSONValue>
        do {
            reply = try await serve(id: id, method: method, params: params)
        } catch {
            state.withLock {
                _ = $0.afterAnswer.removeValue(forKey: id)
                _ = $0.commandsAfterAnswer.removeValue(forKey: id)
                _ = $0.continueAfterAnswer.removeValue(forKey: id)
            }
            fail(id, Self.rpcError(error, method: method, logger: logger))
            return
        }
        switch reply {
        case .now(let value):
            editor.send(.success(id, value))
            if let session = state.withLock({ $0.commandsAfterAnswer.removeValue(forKey: id) }) {
                session.showCommands { commands in editor.notify("session/update", ACPUpdates.availableCommands(commands, session: session.id)) }
            }
            for update in state.withLock({ $0.afterAnswer.removeValue(forKey: id) }) ?? [] { editor.notify("session/update", update) }
            if let parked = state.withLock({ $0.continueAfterAnswer.removeValue(forKey: id) }) { continueParkedTurn(of: parked) }
        case .later(let work):
            // Started and tracked under the lock, so its own removal always comes after the insert.
            state.withLock { s in
                s.inFlight[id] = Task { [self] in
                    let message: Message
                    do {
                        message = .success(id, try await work())
                    } catch {
                        message = .failure(id, Self.shown(Self.rpcError(error, method: method, logger: logger)))
                    }
                    // Answer and retire the id in one step, so a late `$/cancel_request` finds nothing.
                    state.withLock { s in
                        s.inFlight.removeValue(forKey: id)
                        editor.send(message)
                    }
                }
            }
        }
    }

    /// Answers a request (or a frame that was not one) with an error.
    private func fail(_ id: RequestID?, _ error: RPCError) {
        editor.send(.failure(id, Self.shown(error)))
    }

    /// An error as the editor shows it: the clients people use display
    /// `data.details`, never `message`, so the human text goes in both.
    static func shown(_ error: RPCError) -> RPCError {
        var shown = error
        if shown.data["details"] == nil { shown.data["details"] = .string(error.message) }
        return shown
    }

    static func rpcError(_ error: any Error, method: String, logger: Logger) -> RPCError {
        if let rpc = error as? RPCError { return rpc }
        if error is CancellationError { return .cancelled() }
        logger.error("\(method) failed unexpectedly: \(error)")
        return .internalError("\(method) failed: \(error)")
    }

    // MARK: Methods

    private func serve(id: RequestID, method: String, params: JSONValue?) async throws -> Reply<JSONValue> {
        let p = try ACPParams(params, method: method)
        switch method {
        case "initialize": return .now(try initialize(p))
        case "authenticate":
            // Nothing to log into: a key comes from the environment or the config file.
            if (try? chooseModel()) != nil { return .now(.object([:])) }
            throw noModelError()
        case "session/new": return .now(try await newSession(p, request: id))
        case "session/load": return .now(try await loadSession(p, replay: true, request: id))
        case "session/resume": return .now(try await loadSession(p, replay: false, request: id))
        case "session/fork": return .now(try await fork(p, request: id))
        case "session/prompt": return try await prompt(id: id, p)
        case "session/cancel":
            // A notification in ACP; some clients send it as a request. Answered
            // `null`, it cancels as the notification does (an unknown session included).
            if let session = sessions.get(try p.string("sessionId")) { session.cancelPrompt() }
            return .now(.null)
        case "session/set_mode": return .now(try await setMode(p))
        case "session/set_config_option": return .now(try await setConfigOption(p))
        case "session/set_model": return .now(try await setModel(p))
        case "session/list": return .now(try await list(p))
        case "session/close": return try await close(p, deleting: false)
        case "session/delete": return try await close(p, deleting: true)
        default: throw RPCError.methodNotFound(method)
        }
    }

    private func initialize(_ p: ACPParams) throws -> JSONValue {
        guard let version = try p.optionalInt("protocolVersion") else {
            throw RPCError.invalidParams("initialize: protocolVersion is required", field: "protocolVersion")
        }
        guard version >= 1 else {
            throw RPCError.invalidParams("initialize: protocolVersion \(version) is not supported; this agent speaks ACP version 1", field: "protocolVersion")
        }
        let capabilities = EditorCapabilities(p.value["clientCapabilities"])
        let first = state.withLock { s -> Bool in
            defer { if s.editor == nil { s.editor = capabilities } }
            return s.editor == nil
        }
        guard first else { throw RPCError(.invalidRequest, "'initialize' was already received") }
        return [
            "protocolVersion": .int(Self.protocolVersion),
            "agentCapabilities": [
                "loadSession": true,
                "promptCapabilities": ["image": true, "audio": false, "embeddedContext": true],
                // stdio and streamable HTTP MCP servers; the deprecated HTTP+SSE transport is not offered.
                "mcpCapabilities": ["http": true, "sse": false],
                "sessionCapabilities": ["list": [:], "delete": [:], "resume": [:], "close": [:], "additionalDirectories": [:], "fork": [:]],
            ],
            "agentInfo": ["name": "agentrpc", "title": "agentrpc", "version": .string(Server.version)],
            "authMethods": [
                ["id": "openai-api-key", "name": "OpenAI API key",
                 "description": "Set OPENAI_API_KEY (and optionally OPENAI_MODEL, OPENAI_BASE_URL) in the environment the editor starts agentrpc with."],
                ["id": "anthropic-api-key", "name": "Anthropic API key",
                 "description": "Set ANTHROPIC_API_KEY (and optionally ANTHROPIC_MODEL) in the environment the editor starts agentrpc with."],
                ["id": "agentrpc-json", "name": "agentrpc.json",
                 "description": "Name models in agentrpc.json (--config FILE, $AGENTRPC_CONFIG, or ./agentrpc.json) with their apiKeyEnv."],
            ],
        ]
    }

    private var editorCapabilities: EditorCapabilities { state.withLock { $0.editor } ?? EditorCapabilities() }

    /// The model a new session starts with: `--model`, the `acp` section's,
    /// the file's default (or an API key's), else the installed local model;
    /// nil when there is none.
    private func chooseModel() throws -> (name: String, reference: JSONValue)? {
        if let name = modelOverride ?? configuration.model ?? engine.defaultModel {
            guard engine.modelNames.contains(name) else {
                throw RPCError.invalidConfiguration("no model named '\(name)'" + (engine.configPath.map { " in \($0)" } ?? " (no agentrpc.json was found)"), field: "model")
            }
            return (name, .string(name))
        }
        // Tried once per process; started outside the lock (it may take a while to load).
        let firstTry = state.withLock { s -> Bool in
            defer { s.localModelTried = true }
            return !s.localModelTried
        }
        if firstTry, let started = try LocalModelServer.startIfInstalled(executable: executable, environment: environment, logger: logger) {
            logger.info(started.description)
            state.withLock { $0.localModel = started }
            watchdog?.killsWhenFiring(started.processIdentifier)
        }
        let local = state.withLock { $0.localModel }
        if let local { return (Self.localModelName, local.modelConfig) }
        return nil
    }

    static let localModelName = "local"

    private func noModelError() -> RPCError {
        .authRequired("no model is available: set OPENAI_API_KEY or ANTHROPIC_API_KEY in the environment agentrpc is started with, "
            + "or name models in agentrpc.json (--config FILE, $AGENTRPC_CONFIG, or ./agentrpc.json in the working directory)"
            + (engine.configPath.map { "; the configuration file \($0) names none" } ?? ""))
    }

    /// The session's slash commands follow the answer to `request`, as they
    /// are when it is sent (its MCP servers' prompts may come meanwhile).
    private func advertiseCommands(_ session: ACPSession, after request: RequestID) {
        state.withLock { $0.commandsAfterAnswer[request] = session }
    }

    /// A `session/update` about a session the editor learns of from `request`'s answer: sent after it.
    private func sendAfterAnswer(_ update: JSONValue, to request: RequestID) {
        state.withLock { $0.afterAnswer[request, default: []].append(update) }
    }

    private func newSession(_ p: ACPParams, request: RequestID) async throws -> JSONValue {
        let cwd = try p.absolutePath("cwd")
        let roots = [cwd] + (try p.absolutePaths("additionalDirectories"))
        // Required by ACP, but some clients (acpc) leave it out: none.
        let servers = try p.optionalArray("mcpServers")
        guard let model = try chooseModel() else { throw noModelError() }
        let editor = editorCapabilities
        // Every tool runs whatever the editor declared (in the front end where the editor cannot).
        let offered = configuration.tools
        var config = configuration.session
        config["model"] = model.reference
        config["tools"] = .array((config["tools"]?.arrayValue ?? []) + offered.map { $0.spec(needsPermission: configuration.permissions.contains($0)) })
        let builtins = config["builtinTools"]?.arrayValue ?? []
        if configuration.offersPlan && !builtins.contains(.string(ACPConfiguration.planTool)) {
            config["builtinTools"] = .array(builtins + [.string(ACPConfiguration.planTool)])
        }
        if config["role"] == nil && config["instructions"] == nil {
            // A role reaches every profile's instructions; `instructions` would not with profiles.
            config["role"] = ["persona": .string(configuration.instructions ?? ACPConfiguration.defaultInstructions(tools: offered, plan: configuration.offersPlan))]
        }
        // The workspace is kept with the session, so session/list can say where it belongs.
        config["userId"] = .string(Self.userIdPrefix + cwd)
        // The editor's MCP servers join the session's own (acp.session.mcpServers); their
        // tools run through the engine's tool path like every other.
        let mcp = ACPMCP.convert(servers)
        if !mcp.specs.isEmpty { config["mcpServers"] = .array((config["mcpServers"]?.arrayValue ?? []) + mcp.specs) }
        let created = try await engine.call(SessionCreateRequest.self, .object(config))
        guard let id = created["sessionId"]?.stringValue else { throw RPCError.internalError("session/create answered no sessionId") }
        let session = ACPSession(id: id, cwd: cwd, roots: roots, editor: editor, catalog: catalog, model: model.name,
                                 profile: created["activeProfile"]?.stringValue, mcpServers: servers)
        session.mcpShownNames = mcp.shownNames
        sessions.add(session)
        advertiseCommands(session, after: request)
        var answer = sessionState(session)
        answer["sessionId"] = .string(id)
        let notStarted = mcp.notStarted + (await failedMCPServers(session))
        session.noteUnavailable(notStarted)
        if let meta = mcpMeta(notStarted) { answer["_meta"] = meta }
        return .object(answer)
    }

    static let userIdPrefix = "acp:"

    /// The session's MCP servers that failed, once every one is ready or failed
    /// (a bounded wait: one still starting after it is not named here, and is
    /// shown to the user at a prompt if it fails later).
    private func failedMCPServers(_ session: ACPSession) async -> [(name: String, reason: String)] {
        let deadline = ContinuousClock.now.advanced(by: .clampedSeconds(ACPToolBounds.mcpSettleSeconds))
        while true {
            let servers = (try? await engine.call(SessionGetStateRequest.self, sessionId: session.id))?["mcpServers"]?.arrayValue ?? []
            let settling = servers.contains { ["starting", "restarting"].contains($0["status"]?.stringValue ?? "") }
            if !settling || ContinuousClock.now >= deadline {
                session.notePrompts(fromState: servers)
                return servers.filter { $0["status"]?.stringValue == "failed" }.map { server in
                    let name = server["name"]?.stringValue ?? "?"
                    return (session.mcpShownNames[name] ?? name, server["reason"]?.stringValue ?? "it failed")
                }
            }
            // Servers report no event this front end can await before the session is known: 50 ms steps within the bound.
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Names the editor's MCP servers that were not started, never dropping them silently.
    private func mcpMeta(_ notStarted: [(name: String, reason: String)]) -> JSONValue? {
        for server in notStarted { logger.warning("MCP server \(server.name) not started: \(server.reason)") }
        return ACPMCP.meta(notStarted)
    }

    /// `modes` and `configOptions` of a session's answers.
    private func sessionState(_ session: ACPSession) -> [String: JSONValue] {
        ["modes": session.modesJSON, "configOptions": session.configOptionsJSON]
    }

    /// What the selectors of a session made now offer.
    private var catalog: OptionCatalog {
        OptionCatalog(
            models: availableModels.map { name in
                OptionCatalog.Model(name: name, description: engine.modelDescription(name).map { $0.provider + ($0.model.map { " \($0)" } ?? "") })
            },
            profiles: configuration.profiles)
    }

    /// `session/fork` (unstable ACP): the engine's fork, with everything a load
    /// gives (the model, mode and choices stored with it are copied). The fork runs
    /// the MCP servers the editor sends now: a stored fork is closed and loaded
    /// again with them, as a load in a new process would be.
    private func fork(_ p: ACPParams, request: RequestID) async throws -> JSONValue {
        let source = try p.string("sessionId")
        _ = try p.absolutePath("cwd")
        let forked = try await engine.call(SessionForkRequest.self, ["sessionId": .string(source)])
        guard let id = forked["sessionId"]?.stringValue else { throw RPCError.internalError("session/fork answered no sessionId") }
        if isStored { _ = try await engine.call(SessionCloseRequest.self, sessionId: id) }
        var params = p.value
        params["sessionId"] = .string(id)
        var answer = try await loadSession(ACPParams(.object(params), method: "session/fork"), replay: false, request: request,
                                           engineHasIt: !isStored).objectValue ?? [:]
        answer["sessionId"] = .string(id)
        return .object(answer)
    }

    /// The images and audio clips a replayed tool output named, as its live
    /// `tool_call_update` carried them (`session/getMedia`; the same blocks,
    /// each at most the size a tool result may keep). One no longer in the
    /// store is left out with a warning in the log: the output's text keeps its note.
    private func replayedMedia(of entry: JSONValue, session id: String) async -> [JSONValue] {
        guard entry["type"]?.stringValue == "toolOutput", let references = entry["media"]?.arrayValue, !references.isEmpty else { return [] }
        var blocks: [JSONValue] = []
        for reference in references {
            guard let sha256 = reference["sha256"]?.stringValue else { continue }
            do {
                blocks.append(try await engine.call(SessionGetMediaRequest.self, ["sessionId": .string(id), "sha256": .string(sha256)]))
            } catch {
                logger.warning("session \(id): the replay of call \(entry["callId"]?.stringValue ?? "?") shows its note only: \(error)")
            }
        }
        return blocks
    }

    /// `engineHasIt`: the engine holds the session already though this front end
    /// does not (a fork that is not stored); it keeps the servers it runs.
    private func loadSession(_ p: ACPParams, replay: Bool, request: RequestID, engineHasIt: Bool = false) async throws -> JSONValue {
        let id = try p.string("sessionId")
        let cwd = try p.absolutePath("cwd")
        let roots = [cwd] + (try p.absolutePaths("additionalDirectories"))
        let servers = try p.optionalArray("mcpServers")
        let mcp = ACPMCP.convert(servers)
        var notApplied = mcp.notStarted
        var resume: [String: JSONValue] = ["sessionId": .string(id)]
        if let loaded = sessions.get(id) {
            if loaded.promptRequestID != nil { throw RPCError(.sessionBusy, "a prompt is running in this session") }
            if loaded.mcpServers != servers {
                if isStored {
                    // Loaded here with other servers: closed first, so this load runs the servers
                    // sent now and replays before any of them starts, as a load in a new process does.
                    _ = try await engine.call(SessionCloseRequest.self, sessionId: id)
                    sessions.remove(id)
                } else {
                    // Closing would lose it: it keeps the servers it runs.
                    notApplied += servers.map { ($0["name"]?.stringValue ?? "(unnamed)", "the session is loaded in this process and not stored, so it keeps the MCP servers it runs") }
                }
            }
        }
        let reloading = sessions.get(id) == nil
        if engineHasIt {
            notApplied += servers.map { ($0["name"]?.stringValue ?? "(unnamed)", "sessions are not stored, so the fork keeps the MCP servers of the session it was forked from") }
        } else if reloading {
            // The editor sends the servers it wants on every load: they replace those it
            // sent before, beside the agent's own (acp.session.mcpServers).
            let own = configuration.session["mcpServers"]?.arrayValue ?? []
            resume["mcpServers"] = .array(own + mcp.specs)
            // A replay comes before any MCP server of the session starts: the engine
            // defers them until the second resume below.
            if replay { resume["startMCPServers"] = false }
        }
        let handle = try await engine.call(SessionResumeRequest.self, .object(resume))
        let session = ACPSession(id: id, cwd: cwd, roots: roots, editor: editorCapabilities, catalog: catalog,
                                 model: nil, profile: handle["activeProfile"]?.stringValue, mcpServers: reloading ? servers : sessions.get(id)?.mcpServers ?? [])
        session.mcpShownNames = reloading ? mcp.shownNames : sessions.get(id)?.mcpShownNames ?? [:]
        if replay {
            do {
                let transcript = try await engine.call(SessionGetTranscriptRequest.self, sessionId: id)
                for entry in transcript["entries"]?.arrayValue ?? [] {
                    // A tool's images are read one entry at a time, as they go out.
                    let media = await replayedMedia(of: entry, session: id)
                    for update in ACPUpdates.replay(entry: entry, cwd: cwd, media: media) {
                        // A long conversation goes out at the editor's pace, not into memory.
                        if editor.isBehind { await editor.waitUntilWritable() }
                        editor.notify("session/update", ["sessionId": .string(id), "update": update])
                    }
                }
                // The plan as the model last left it comes after the conversation.
                let plan = try await engine.call(SessionGetStateRequest.self, sessionId: id)["plan"]
                if let plan, !plan.isNull { editor.notify("session/update", ["sessionId": .string(id), "update": ACPUpdates.plan(plan)]) }
                _ = try await engine.call(SessionResumeRequest.self, ["sessionId": .string(id)])
            } catch {
                // Not left loaded behind the editor's back: a retried load starts afresh.
                if reloading { _ = try? await engine.call(SessionCloseRequest.self, sessionId: id) }
                throw error
            }
        }
        sessions.add(session)
        // What the user chose for the session is stored with it (properties): the
        // model, the permission mode, the tools always allowed or rejected.
        let state = try await engine.call(SessionGetStateRequest.self, sessionId: id)
        let properties = state["properties"]
        if let chosen = properties?[ACPProperty.model]?.stringValue, availableModels.contains(chosen) {
            session.choose(model: chosen)
        } else {
            session.model = try? chooseModel()?.name
        }
        session.permissionMode = properties?[ACPProperty.mode]?.stringValue.flatMap(PermissionMode.init(rawValue:)) ?? .default
        session.choices = StandingChoices(properties?[ACPProperty.permissions])
        // A session that was prompted before has its title already.
        if (state["entryCount"]?.intValue ?? 0) > 0 { session.markTitled() }
        advertiseCommands(session, after: request)
        if handle["parkedTurn"] != nil { self.state.withLock { $0.continueAfterAnswer[request] = id } }
        // The meter as the session left it, shown before the next prompt (the stored figure and cost).
        session.restoreMeter(window: state["contextWindowTokens"]?.intValue, costUSD: state["usageTotals"]?["costUSD"]?.numberValue)
        if let used = state["contextTokens"]?.intValue, let size = session.lastWindow {
            for update in ACPUpdates.usageUpdate(used: used, size: size, costUSD: session.costUSD) {
                sendAfterAnswer(["sessionId": .string(session.id), "update": update], to: request)
            }
        }
        var answer = sessionState(session)
        let notStarted = notApplied + (await failedMCPServers(session))
        session.noteUnavailable(notStarted)
        if let meta = mcpMeta(notStarted) { answer["_meta"] = meta }
        return .object(answer)
    }

    /// A session loaded with a parked turn goes on with it: the engine asks
    /// again what the turn waited for (a permission becomes
    /// `session/request_permission` again), and its updates follow as a
    /// prompt's would. It ends as the turn does; a prompt meanwhile is refused
    /// as busy by the engine.
    private func continueParkedTurn(of sessionID: String) {
        Task { [engine, logger] in
            do {
                _ = try await engine.call(SessionContinueRequest.self, sessionId: sessionID)
            } catch {
                logger.warning("session \(sessionID): its parked turn did not end well: \(error)")
            }
        }
    }

    /// Whether sessions outlive a close (not `--ephemeral`, not `acp.session.store: false`).
    private var isStored: Bool { engine.storeLocation != nil && configuration.session["store"] != false }

    /// The models a session may switch to: the configuration's, and the local one when it runs.
    private var availableModels: [String] {
        var names = engine.modelNames
        if state.withLock({ $0.localModel }) != nil { names.append(Self.localModelName) }
        return names
    }

    private func session(_ p: ACPParams) throws -> ACPSession {
        let id = try p.string("sessionId")
        guard let session = sessions.get(id) else { throw RPCError.sessionNotFound(id) }
        return session
    }

    private func prompt(id: RequestID, _ p: ACPParams) async throws -> Reply<JSONValue> {
        let session = try session(p)
        let input = try ACPPrompt.input(try p.array("prompt"), cwd: session.cwd)
        try session.beginPrompt(id)
        if let (command, argument) = SlashCommand.parse(input["text"]?.stringValue ?? "") {
            return .later { [self] in
                let context = SlashCommandContext(engine: engine, session: session)
                var done: SlashCommand.Outcome?
                var failure: (any Error)?
                do {
                    done = try await command.run(context, argument)
                } catch {
                    failure = error
                }
                let cancelled = session.endPrompt()
                // A command the editor's cancel stopped (a compaction withdrawn) answers as a cancelled
                // prompt does; one that was done before the cancel reached it says what it did.
                if cancelled, failure != nil {
                    return ["stopReason": "cancelled", "_meta": ["agentrpc": ["command": .string(command.name)]]]
                }
                if let failure { throw failure }
                guard let (message, meta) = done else { throw RPCError.internalError("the command \(command.name) answered nothing") }
                editor.notify("session/update", ["sessionId": .string(session.id), "update": ACPUpdates.chunk("agent_message_chunk", message)])
                return ["stopReason": "end_turn", "_meta": ["agentrpc": .object(meta)]]
            }
        }
        let text = input["text"]?.stringValue ?? ""
        if let (word, argument) = SlashCommand.split(text), let command = session.promptCommand(named: word) {
            return .later { [self] in try await runPromptCommand(command, argument: argument, typed: text, session: session) }
        }
        let call: EmbeddedCall
        do {
            call = try await startTurn(input, typed: text, session: session)
        } catch {
            _ = session.endPrompt()
            throw error
        }
        return .later { [self] in try await finishTurn(call, session: session) }
    }

    /// Starts the prompt's turn (`session/send`) with the session's mode and model.
    private func startTurn(_ input: JSONValue, typed: String, session: ACPSession) async throws -> EmbeddedCall {
        // MCP servers that cannot run are said once, before the answer that would have used them.
        let unavailable = session.takeUnavailable()
        if !unavailable.isEmpty {
            let text = unavailable.map { "MCP server '\($0.name)' is not available: \($0.reason)." }.joined(separator: "\n") + "\n\n"
            editor.notify("session/update", ["sessionId": .string(session.id), "update": ACPUpdates.chunk("agent_message_chunk", text)])
        }
        if let title = session.takeTitle(from: typed) {
            // The first prompt names the session in the editor's list.
            editor.notify("session/update", ["sessionId": .string(session.id), "update": ["sessionUpdate": "session_info_update", "title": .string(title)]])
        }
        var send: [String: JSONValue] = ["sessionId": .string(session.id), "input": input]
        var options = session.permissionMode.turnOptions
        if let model = session.chosenModel {
            if model == Self.localModelName, let local = state.withLock({ $0.localModel }) {
                options["model"] = local.modelConfig
            } else {
                options["model"] = .string(model)
            }
        }
        if !options.isEmpty { send["options"] = .object(options) }
        let call = try await engine.start(SessionSendRequest.self, .object(send))
        session.attach(call)
        return call
    }

    /// The prompt's answer, once its turn ended.
    private func finishTurn(_ call: EmbeddedCall, session: ACPSession) async throws -> JSONValue {
        let outcome: Result<JSONValue, RPCError>
        do throws(RPCError) {
            outcome = .success(try await call.result())
        } catch {
            outcome = .failure(error)
        }
        // A call the turn left unfinished is closed before the answer, so no
        // spinner is left running in the editor.
        for callId in session.takeOpenCalls() {
            editor.notify("session/update", ["sessionId": .string(session.id), "update": [
                "sessionUpdate": "tool_call_update", "toolCallId": .string(callId), "status": "failed",
                "content": .array(session.display(callId: callId) + [["type": "content", "content": ["type": "text", "text": "The turn ended before this call finished."]]]),
            ]])
        }
        let cancelled = session.endPrompt()
        return try Self.promptAnswer(outcome, cancelled: cancelled)
    }

    /// `/server:prompt [arguments]`: the MCP server's prompt, fetched with the
    /// arguments the text gives (`session/getPrompt`), its messages sent as the
    /// turn. Arguments that do not fit the prompt, or a server that does not give
    /// it, are told to the user as an agent message instead of a turn.
    private func runPromptCommand(_ command: PromptCommand, argument: String, typed: String, session: ACPSession) async throws -> JSONValue {
        func tell(_ message: String) -> JSONValue {
            _ = session.endPrompt()
            editor.notify("session/update", ["sessionId": .string(session.id), "update": ACPUpdates.chunk("agent_message_chunk", message)])
            return ["stopReason": "end_turn", "_meta": ["agentrpc": ["command": .string(command.name), "refused": .string(message)]]]
        }
        let arguments: [String: String]
        switch command.arguments(from: argument) {
        case .failure(let refusal): return tell(refusal.message)
        case .success(let given): arguments = given
        }
        var params: [String: JSONValue] = ["sessionId": .string(session.id), "server": .string(command.server), "name": .string(command.prompt)]
        if !arguments.isEmpty { params["arguments"] = .object(arguments.mapValues(JSONValue.string)) }
        let messages: [JSONValue]
        do {
            let fetch = try await engine.start(SessionGetPromptRequest.self, .object(params))
            // The editor's cancel withdraws the fetch as it would the turn.
            session.attach(fetch)
            messages = try await fetch.result()["messages"]?.arrayValue ?? []
        } catch {
            if session.isCancelling {
                _ = session.endPrompt()
                return ["stopReason": "cancelled", "_meta": ["agentrpc": ["command": .string(command.name)]]]
            }
            return tell((error as? RPCError)?.message ?? "The prompt /\(command.name) could not be fetched: \(error)")
        }
        guard !messages.isEmpty else { return tell("The MCP server gave no messages for /\(command.name): there is nothing to send.") }
        let call: EmbeddedCall
        do {
            call = try await startTurn(["text": .string(PromptCommand.turnText(messages))], typed: typed, session: session)
        } catch {
            _ = session.endPrompt()
            throw error
        }
        let answer = try await finishTurn(call, session: session)
        guard var o = answer.objectValue, var meta = answer["_meta"]?["agentrpc"]?.objectValue else { return answer }
        meta["command"] = .string(command.name)
        o["_meta"] = ["agentrpc": .object(meta)]
        return .object(o)
    }

    /// A turn's end as ACP's `stopReason`; a failure stays an error, with
    /// agentrpc's `kind` and retry guidance in `data`.
    static func promptAnswer(_ outcome: Result<JSONValue, RPCError>, cancelled: Bool) throws -> JSONValue {
        switch outcome {
        case .success(let result):
            let stopReason: String
            switch result["stopReason"]?.stringValue {
            case "maxTokens": stopReason = "max_tokens"
            case "refusal", "contentFilter": stopReason = "refusal"
            default: stopReason = "end_turn"
            }
            var meta: [String: JSONValue] = ["stopReason": result["stopReason"] ?? .null]
            for key in ["turnId", "usage", "roundTrips", "toolCalls"] { if let v = result[key] { meta[key] = v } }
            return ["stopReason": .string(stopReason), "_meta": ["agentrpc": .object(meta)]]
        case .failure(let error):
            // Whatever ends a cancelled turn, the editor hears `cancelled`.
            if cancelled || error.code == .cancelled {
                // `_meta.agentrpc` as every answer has it: the turn, and who cancelled it.
                var meta: [String: JSONValue] = ["stopReason": "cancelled"]
                for key in ["turnId", "source"] { if let v = error.data[key] { meta[key] = v } }
                return ["stopReason": "cancelled", "_meta": ["agentrpc": .object(meta)]]
            }
            if error.code == .maxToolCallsExceeded || error.code == .maxRoundTripsExceeded {
                return ["stopReason": "max_turn_requests", "_meta": ["agentrpc": ["error": error.json]]]
            }
            throw error
        }
    }

    /// `session/set_mode`: the permission mode; a client that reads config options hears of it too.
    private func setMode(_ p: ACPParams) async throws -> JSONValue {
        let session = try session(p)
        try await choose(mode: try p.string("modeId"), field: "modeId", of: session)
        editor.notify("session/update", ["sessionId": .string(session.id), "update": [
            "sessionUpdate": "config_option_update", "configOptions": session.configOptionsJSON,
        ]])
        return .object([:])
    }

    /// Sets and stores the permission mode.
    private func choose(mode value: String, field: String, of session: ACPSession) async throws {
        guard let mode = PermissionMode(rawValue: value) else {
            throw RPCError.invalidParams("no mode '\(value)' (modes: \(PermissionMode.allCases.map(\.rawValue).joined(separator: ", ")))", field: field)
        }
        _ = try await engine.call(SessionSetPropertiesRequest.self, ["sessionId": .string(session.id), "set": [ACPProperty.mode: .string(mode.rawValue)]])
        session.permissionMode = mode
    }

    /// Sets and stores the model (`session/set_config_option` and `session/set_model`).
    private func choose(model value: String, field: String, of session: ACPSession) async throws {
        let names = availableModels
        guard names.contains(value) else {
            throw RPCError.invalidParams("no model '\(value)' (models: \(names.joined(separator: ", ")))", field: field)
        }
        _ = try await engine.call(SessionSetPropertiesRequest.self, ["sessionId": .string(session.id), "set": [ACPProperty.model: .string(value)]])
        session.choose(model: value)
    }

    private func setConfigOption(_ p: ACPParams) async throws -> JSONValue {
        let session = try session(p)
        let option = try p.string("configId")
        let value = try p.string("value")
        switch option {
        case OptionCatalog.modeOption:
            try await choose(mode: value, field: "value", of: session)
            // A client that reads session modes hears of it too.
            editor.notify("session/update", ["sessionId": .string(session.id), "update": [
                "sessionUpdate": "current_mode_update", "currentModeId": .string(session.permissionMode.rawValue),
            ]])
        case OptionCatalog.modelOption:
            try await choose(model: value, field: "value", of: session)
        case OptionCatalog.profileOption where session.catalog.profiles != nil:
            guard let profiles = session.catalog.profiles, profiles.cases.contains(value) else {
                throw RPCError.invalidParams("no profile '\(value)' (profiles: \(session.catalog.profiles?.cases.joined(separator: ", ") ?? ""))", field: "value")
            }
            let result = try await engine.call(SessionSetPropertiesRequest.self, ["sessionId": .string(session.id), "set": [profiles.selector: .string(value)]])
            _ = session.setProfile(result["activeProfile"]?.stringValue ?? value)
        default:
            let ids = session.configOptionsJSON.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            throw RPCError.invalidParams("session/set_config_option: no option '\(option)' (options: \(ids.joined(separator: ", ")))", field: "configId")
        }
        return ["configOptions": session.configOptionsJSON]
    }

    /// `session/set_model` (unstable ACP, which `acpc --model` sends): the `model` config option.
    private func setModel(_ p: ACPParams) async throws -> JSONValue {
        let session = try session(p)
        try await choose(model: try p.string("modelId"), field: "modelId", of: session)
        return .object([:])
    }

    private func list(_ p: ACPParams) async throws -> JSONValue {
        let cwd = try p.optionalString("cwd").map(ACPPaths.normalize)
        var query: [String: JSONValue] = ["limit": 100]
        if let cursor = try p.optionalString("cursor") { query["cursor"] = .string(cursor) }
        let page = try await engine.call(SessionListRequest.self, .object(query))
        var listed: [JSONValue] = []
        for summary in page["data"]?.arrayValue ?? [] {
            // Only sessions made through ACP know their workspace.
            guard let id = summary["sessionId"]?.stringValue, let owner = summary["userId"]?.stringValue,
                  owner.hasPrefix(Self.userIdPrefix) else { continue }
            let workspace = String(owner.dropFirst(Self.userIdPrefix.count))
            if let cwd, workspace != cwd { continue }
            var info: [String: JSONValue] = ["sessionId": .string(id), "cwd": .string(workspace)]
            if let title = summary["title"]?.stringValue { info["title"] = .string(title) }
            if let updated = summary["updatedAt"]?.stringValue { info["updatedAt"] = .string(updated) }
            listed.append(.object(info))
        }
        var answer: [String: JSONValue] = ["sessions": .array(listed)]
        if let next = page["nextCursor"], !next.isNull { answer["nextCursor"] = next }
        return .object(answer)
    }

    private func close(_ p: ACPParams, deleting: Bool) async throws -> Reply<JSONValue> {
        let id = try p.string("sessionId")
        sessions.get(id)?.cancelPrompt()
        let call: EmbeddedCall
        do {
            call = try await engine.start(deleting ? SessionDeleteRequest.name : SessionCloseRequest.name, ["sessionId": .string(id)])
        } catch let error as RPCError where deleting && error.code == .sessionNotFound {
            // ACP: deleting a session that does not exist succeeds.
            sessions.remove(id)
            return .now(.object([:]))
        }
        sessions.remove(id)
        return .later {
            _ = try await call.result()
            return .object([:])
        }
    }
}
