import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One MCP server of one session: starts it, initializes, lists its tools,
/// re-lists on `list_changed`, restarts it after a crash (with backoff, at most
/// `MCPBounds.maxRestarts` times in any `MCPBounds.restartWindowSeconds`), tries
/// a failed one again when a later turn starts (with a growing backoff), and
/// stops it. Every change of status is reported through `report` (the
/// `mcpServerStatus` event).
actor MCPServerRunner {
    nonisolated let spec: MCPServerSpec
    private let environment: [String: String]
    private let logger: Logger
    private let report: @Sendable (MCPServerState) async -> Void
    private let clock: MCPClock
    /// When the restarts of the current window happened (`clock` seconds).
    private var recentRestarts: [Double] = []
    /// When a failed server may be tried again: at the first turn that starts after it.
    private var nextTry: Double?
    /// The wait before the next try after a failure; doubles per failure, reset once ready.
    private var retryBackoff = MCPBounds.retryBackoffSeconds

    private var status: MCPServerStatus = .starting
    private var reason: String?
    /// The client answers `user/elicit`: servers are told they may ask for forms.
    private let elicits: Bool
    private var client: MCPClient?
    private var tools: [MCPTool] = []
    /// The prompts it listed at the last listing of its tools.
    private var prompts: [MCPPromptInfo] = []
    /// `tools` holds agentrpc's `read_resource` (the server declared `resources`).
    private var readsResources = false
    private var restarts = 0
    private var notes: [String] = []
    private var stopped = false
    private var runTask: Task<Void, Never>?
    /// Turns waiting for the server to leave `starting`/`restarting`.
    private var readyWaiters: [UUID: CheckedContinuation<Void, Never>] = [:]
    /// Status changes being reported right now (see `setStatus`).
    private var announcing = 0
    /// Resumed when the live connection ends.
    private var connectionEnd: CheckedContinuation<String, Never>?
    private var endedReason: String?
    /// `list_changed` handling: one listing at a time, at most one per
    /// `relistIntervalSeconds`; a storm coalesces into the next one. A listing
    /// covers the notifications counted when it began.
    private var changesSeen = 0
    private var changesListed = 0
    private var lastListing: ContinuousClock.Instant?
    private var relistTask: Task<Void, Never>?
    /// Round trips waiting for a listing that covers `changesSeen` as it was when they came.
    private var listingWaiters: [UUID: (covering: Int, continuation: CheckedContinuation<Void, Never>)] = [:]

    init(
        spec: MCPServerSpec, environment: [String: String], logger: Logger, clock: MCPClock = MCPClock(), elicits: Bool = false,
        report: @escaping @Sendable (MCPServerState) async -> Void
    ) {
        self.elicits = elicits
        self.spec = spec
        self.environment = environment
        self.logger = logger
        self.clock = clock
        self.report = report
    }

    static let sseNotSupported = "the deprecated HTTP+SSE transport (type: \"sse\") is not supported; the server was not started (use its streamable HTTP endpoint, type: \"http\")"

    var startupTimeout: Double { spec.startupTimeoutSeconds ?? MCPBounds.defaultStartupTimeoutSeconds }

    /// Reports `starting` (before `session/create` answers), then starts in the background.
    func start() async {
        guard runTask == nil, !stopped else { return }
        for warning in spec.ignoredKeyWarnings { logger.warning("mcp \(spec.name): \(warning)") }
        if spec.isDisabled {
            await setStatus(.disabled, reason: "disabled in its configuration")
            return
        }
        if spec.transport == .sse {
            await setStatus(.failed, reason: Self.sseNotSupported)
            return
        }
        await setStatus(.starting)
        runTask = Task { await self.run() }
    }

    /// The state `session/getState` shows.
    func state(exposedNames: [String]) async -> MCPServerState {
        let problems = await client?.problems ?? []
        let all = spec.ignoredKeyWarnings + notes + problems
        var state = MCPServerState(
            name: spec.name, transport: spec.transport, status: status, reason: reason,
            protocolVersion: await client?.protocolVersion, tools: exposedNames,
            stderr: stderrTail.isEmpty ? nil : stderrTail, restarts: restarts, problems: all.isEmpty ? nil : Array(all.suffix(MCPBounds.problemsKept)))
        state.nextTryAt = nextTryAt
        if status == .ready && !prompts.isEmpty { state.prompts = prompts }
        return state
    }

    var currentStatus: MCPServerStatus { status }
    private var exposedNames: [String] { tools.map { MCPServerSet.exposedName(server: spec.name, tool: $0.name) } }
    var currentTools: [MCPTool] { status == .ready ? tools : [] }
    private var stderrTail: [String] { client?.transport.stderrTail ?? [] }

    private func setStatus(_ new: MCPServerStatus, reason: String? = nil, exposed: [String] = []) async {
        status = new
        self.reason = reason
        var event = MCPServerState(name: spec.name, transport: spec.transport, status: new, reason: reason, restarts: restarts)
        if new == .ready {
            event.tools = exposedNames
            event.prompts = prompts
        }
        if new == .failed || new == .restarting { event.stderr = stderrTail }
        // Reported before a waiting round trip goes on (and a round trip that
        // asks meanwhile waits too): the event reaches the session ahead of
        // everything that round trip emits. Woken first, the turn could end
        // before the status it waited for was announced.
        announcing += 1
        await report(event)
        announcing -= 1
        if new != .starting && new != .restarting {
            let waiters = readyWaiters
            readyWaiters = [:]
            for (_, w) in waiters { w.resume() }
        }
    }

    private func run() async {
        // A first start that fails is not restarted: it is tried again at a later turn.
        var wasReady = false
        while !stopped {
            let outcome = await connectOnce()
            if stopped { break }
            let why: String
            switch outcome {
            case .failedToStart(let w) where !wasReady:
                await fail(w)
                return
            case .failedToStart(let w):
                // A restart that cannot start yet is tried again (an HTTP server
                // being restarted, say), within the same bound.
                why = w
            case .ended(let w):
                wasReady = true
                why = w
            }
            let now = clock.now()
            recentRestarts.removeAll { now - $0 >= MCPBounds.restartWindowSeconds }
            guard recentRestarts.count < MCPBounds.maxRestarts else {
                await fail("\(why); restarted \(recentRestarts.count) times within \(Int(MCPBounds.restartWindowSeconds)) s")
                return
            }
            recentRestarts.append(now)
            restarts += 1
            await setStatus(.restarting, reason: why)
            // 0.5 s, 1 s, 2 s within one window.
            try? await Task.sleep(for: .clampedSeconds(MCPBounds.restartBackoffSeconds * Double(1 << (recentRestarts.count - 1))))
        }
    }

    /// Gives up for now: `failed`, tried again at the first turn after the backoff.
    private func fail(_ why: String) async {
        nextTry = clock.now() + retryBackoff
        retryBackoff = min(retryBackoff * 2, MCPBounds.maxRetryBackoffSeconds)
        runTask = nil
        await setStatus(.failed, reason: why)
    }

    /// A turn is starting: a failed server whose next try is due starts again
    /// (the turn's round trip then waits for it as for any starting server).
    func retryIfDue() async {
        guard status == .failed, !stopped, runTask == nil, let due = nextTry, clock.now() >= due else { return }
        nextTry = nil
        logger.info("mcp \(spec.name): trying the failed server again")
        await setStatus(.starting)
        runTask = Task { await self.run() }
    }

    /// The next try as a wall-clock time, while the server is failed.
    private var nextTryAt: String? {
        guard status == .failed, let nextTry else { return nil }
        return Timestamp.iso8601(Date().addingTimeInterval(max(0, nextTry - clock.now())))
    }

    private enum ConnectionOutcome {
        case failedToStart(String)
        case ended(String)
    }

    /// Starts, initializes and lists once; returns when the connection ends.
    private func connectOnce() async -> ConnectionOutcome {
        let inbox = MCPInbox()
        let transport: any MCPTransport
        do {
            switch spec.transport {
            case .stdio:
                transport = try await MCPStdioTransport.start(spec: spec, environment: environment, inbox: inbox, logger: logger)
            case .http, .streamableHTTP:
                transport = try MCPHTTPTransport(spec: spec, environment: environment, inbox: inbox, logger: logger)
            case .sse:
                return .failedToStart(Self.sseNotSupported)
            }
        } catch {
            return .failedToStart("cannot start the server: \(error)")
        }
        let client = MCPClient(serverName: spec.name, transport: transport, logger: logger, elicits: elicits)
        self.client = client
        endedReason = nil
        await client.setHandlers(
            listChanged: { [weak self] in Task { await self?.listChanged() } },
            closed: { [weak self, id = ObjectIdentifier(client)] why in Task { await self?.connectionClosed(why, of: id) } })
        Task { await client.pump(inbox) }
        if stopped {
            await client.close(reason: "the session closed")
            return .ended("stopped")
        }
        do {
            // The probe and `initialize` (after a probe the server left unanswered) each have this long.
            let initTimeout = min(MCPBounds.requestTimeoutSeconds, startupTimeout)
            _ = try await withTimeout(2 * initTimeout, "initialize") { try await client.initialize(probeTimeout: initTimeout) }
            let covering = changesSeen
            let listed = try await client.listTools()
            await take(listed, from: client)
            listingDone(covering: covering)
            for note in listed.notes { logger.warning("mcp \(spec.name): \(note)") }
        } catch {
            let why = "\(error)" + (await describeExit(transport))
            await client.close(reason: why)
            return .failedToStart(why)
        }
        retryBackoff = MCPBounds.retryBackoffSeconds
        await setStatus(.ready)
        // A list_changed that came during the first listing is listed now.
        if changesListed < changesSeen, relistTask == nil { relistTask = Task { await self.relistLoop() } }
        let why = await withCheckedContinuation { (c: CheckedContinuation<String, Never>) in
            if let endedReason { c.resume(returning: endedReason) } else { connectionEnd = c }
        }
        tools = []
        await client.close(reason: why)
        return .ended(why + (await describeExit(transport)))
    }

    private func describeExit(_ transport: any MCPTransport) async -> String {
        guard let stdio = transport as? MCPStdioTransport else { return "" }
        // The output ends a moment before the exit can be reaped.
        for _ in 0..<10 where stdio.exitDescription == "still running" { try? await Task.sleep(for: .milliseconds(20)) }
        let exit = stdio.exitDescription
        return exit == "still running" ? "" : " (the process \(exit))"
    }

    /// The connection of the client `ended` (nil: the live one) is over. News
    /// that comes late, about a connection already replaced, leaves the new one be.
    private func connectionClosed(_ why: String, of ended: ObjectIdentifier? = nil) {
        if let ended, ended != client.map(ObjectIdentifier.init) { return }
        // Until the run loop reports why, a round trip must not offer the dead
        // server's tools, and waits (bounded) for the restart instead.
        if status == .ready && !stopped {
            status = .restarting
            tools = []
        }
        endedReason = why
        connectionEnd?.resume(returning: why)
        connectionEnd = nil
    }

    private func listChanged() {
        changesSeen += 1
        guard relistTask == nil else { return }
        relistTask = Task { await self.relistLoop() }
    }

    private func relistLoop() async {
        while changesListed < changesSeen, !stopped, status == .ready, let client {
            // A storm of list_changed costs one listing per interval, no more.
            if let lastListing {
                let next = lastListing.advanced(by: .clampedSeconds(MCPBounds.relistIntervalSeconds))
                if next > .now { try? await Task.sleep(until: next, clock: .continuous) }
                if stopped || status != .ready { break }
            }
            let covering = changesSeen
            lastListing = .now
            do {
                let listed = try await client.listTools()
                await take(listed, from: client)
                var relisted = MCPServerState(name: spec.name, transport: spec.transport, status: .ready, tools: exposedNames, restarts: restarts)
                relisted.prompts = prompts
                await report(relisted)
            } catch {
                logger.warning("mcp \(spec.name): re-listing tools failed: \(error)")
            }
            listingDone(covering: covering)
        }
        relistTask = nil
        // No listing comes for what is left now (the server is gone or stopped, or
        // not ready yet: it re-lists once ready): nobody waits for one.
        let waiters = listingWaiters
        listingWaiters = [:]
        for (_, w) in waiters { w.continuation.resume() }
    }

    /// The tool a server with `resources` gets for following its `resource_link`s.
    static let readResourceTool = "read_resource"
    /// The listed tools become the server's, with `read_resource` added when
    /// the server has resources and lists no tool of that name itself.
    private func take(_ listed: (tools: [MCPTool], notes: [String]), from client: MCPClient) async {
        tools = listed.tools
        notes = listed.notes
        let listedPrompts = await client.listPrompts()
        prompts = listedPrompts.prompts
        notes += listedPrompts.notes
        readsResources = false
        guard await client.hasResources() else { return }
        guard !tools.contains(where: { $0.name == Self.readResourceTool }) else {
            notes.append("the server lists a tool named '\(Self.readResourceTool)': it is offered instead of agentrpc's resource reader")
            return
        }
        readsResources = true
        tools.append(MCPTool(
            name: Self.readResourceTool,
            description: "Reads a resource of the MCP server '\(spec.name)' by its URI, such as a resource_link in one of its tools' output names.",
            inputSchema: [
                "type": "object", "properties": ["uri": ["type": "string", "description": "The resource's URI."]],
                "required": ["uri"], "additionalProperties": false,
            ],
            readOnlyHint: true, destructiveHint: false, idempotentHint: true))
    }

    private func listingDone(covering: Int) {
        changesListed = max(changesListed, covering)
        let done = listingWaiters.filter { $0.value.covering <= covering }
        for (id, waiter) in done {
            listingWaiters.removeValue(forKey: id)
            waiter.continuation.resume()
        }
    }

    /// Waits (up to `seconds`) for a listing that covers every `list_changed`
    /// seen so far, so the next round trip sees the new list. Only that one:
    /// notifications that keep coming do not hold the round trip.
    func settleListing(seconds: Double) async {
        let covering = changesSeen
        guard changesListed < covering, relistTask != nil else { return }
        let id = UUID()
        let timer = Task { [weak self] in
            try? await Task.sleep(for: .clampedSeconds(seconds))
            await self?.releaseListingWaiter(id)
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            listingWaiters[id] = (covering, c)
        }
        timer.cancel()
    }

    private func releaseListingWaiter(_ id: UUID) {
        listingWaiters.removeValue(forKey: id)?.continuation.resume()
    }

    /// Waits up to `seconds` while the server is starting or restarting.
    func waitUntilSettled(seconds: Double) async {
        guard status == .starting || status == .restarting || announcing > 0 else { return }
        let id = UUID()
        let timer = Task { [weak self] in
            try? await Task.sleep(for: .clampedSeconds(seconds))
            await self?.releaseWaiter(id)
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            readyWaiters[id] = c
        }
        timer.cancel()
    }

    private func releaseWaiter(_ id: UUID) {
        readyWaiters.removeValue(forKey: id)?.resume()
    }

    /// Calls one tool. Errors that are the server's (crash, timeout, protocol) come
    /// back as a failed outcome the model sees, saying whether the tool ran as
    /// far as is known; cancellation is thrown.
    func call(
        tool: String, arguments: JSONValue, timeout: Double, progress: MCPClient.ProgressHandler? = nil, elicitation: MCPClient.ElicitationHandler? = nil
    ) async throws -> (ToolOutcome, JSONValue) {
        guard status == .ready, let client else { return (.failed, .string(unavailable)) }
        do {
            if tool == Self.readResourceTool && readsResources {
                let result = try await client.request("resources/read", ["uri": arguments["uri"] ?? .null], timeout: timeout)
                return MCPToolOutput.resource(of: result)
            }
            let result = try await client.request(
                "tools/call", ["name": .string(tool), "arguments": arguments], timeout: timeout, progress: progress, elicitation: elicitation)
            return MCPToolOutput.outcome(of: result)
        } catch let error as MCPRequestError {
            switch error {
            case .timedOut(_, let seconds):
                return (.failed, .string("The tool did not finish within \(seconds) seconds and was abandoned; it may or may not have run."))
            case .rpc(let code, let message, _):
                return (.failed, .string("The MCP server '\(spec.name)' refused the call (error \(code)): \(message)"))
            case .gone(let why):
                connectionClosed(why, of: ObjectIdentifier(client))
                return (.failed, .string("The MCP server '\(spec.name)' went away during the call (\(why)); the tool may or may not have run."))
            case .notDelivered(let why), .sessionExpired(let why):
                // A server that cannot be reached has ended the connection by now:
                // the runner learns it before the call's outcome goes on, not when
                // the client's `closed` handler gets round to it, so the next round
                // trip waits for the restart (and sees its statuses) instead of
                // finding the server still `ready`.
                if let ended = await client.endedReason { connectionClosed(ended, of: ObjectIdentifier(client)) }
                return (.failed, .string("The call did not reach the MCP server '\(spec.name)' (\(why)); the tool did not run."))
            case .tooLarge, .malformed:
                return (.failed, .string("The MCP server '\(spec.name)' answered unusably: \(error)"))
            }
        }
    }

    /// `session/getPrompt`: the prompt `name` with `arguments`, as the server
    /// gives it (`prompts/get`); binary contents described as in tool output.
    func prompt(named name: String, arguments: [String: String]?) async throws -> SessionGetPromptResult {
        guard status == .ready, let client else { throw RPCError(.toolExecutorError, unavailable) }
        guard prompts.contains(where: { $0.name == name }) else {
            throw RPCError.invalidParams("the MCP server '\(spec.name)' lists no prompt named '\(name.prefix(128))'", field: "name")
        }
        var params: [String: JSONValue] = ["name": .string(name)]
        if let arguments { params["arguments"] = .object(arguments.mapValues { .string($0) }) }
        let result: JSONValue
        do {
            result = try await client.request("prompts/get", .object(params), timeout: MCPBounds.requestTimeoutSeconds)
        } catch is CancellationError {
            // Withdrawn by the client (the server was told): answered `cancelled`.
            throw CancellationError()
        } catch {
            throw RPCError(.toolExecutorError, "the MCP server '\(spec.name)' did not give the prompt '\(name.prefix(128))': \(error)")
        }
        let messages: [JSONValue] = (result["messages"]?.arrayValue ?? []).map { message in
            ["role": message["role"] ?? .null, "content": MCPToolOutput.shown(message["content"] ?? .null)]
        }
        return SessionGetPromptResult(description: result["description"]?.stringValue, messages: messages)
    }

    /// What a call to a tool of this server gets while it is not ready.
    var unavailable: String {
        let why = reason ?? status.rawValue
        return "The call was not run: the MCP server '\(spec.name)' is unavailable: \(why)" + (status == .failed ? "" : " (\(status.rawValue))") + "."
    }

    /// Stops the server for good (session closed or deleted, process exit).
    func stop() async {
        stopped = true
        relistTask?.cancel()
        let waiters = readyWaiters
        readyWaiters = [:]
        for (_, w) in waiters { w.resume() }
        let listing = listingWaiters
        listingWaiters = [:]
        for (_, w) in listing { w.continuation.resume() }
        if let client { await client.close(reason: "the session closed") }
        connectionClosed("the session closed")
        runTask?.cancel()
        if status != .failed { status = .stopped }
    }
}

/// Runs `work` with a deadline; the work's task is cancelled when it passes.
func withTimeout<T: Sendable>(_ seconds: Double, _ what: String, _ work: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await work() }
        group.addTask {
            try await Task.sleep(for: .clampedSeconds(seconds))
            throw MCPRequestError.timedOut(method: what, seconds: seconds)
        }
        guard let first = try await group.next() else { throw CancellationError() }
        group.cancelAll()
        return first
    }
}
