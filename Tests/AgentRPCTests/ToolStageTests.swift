import AgentRPCProtocol
import Foundation
import Synchronization
import Testing

@testable import AgentRPC

/// The tool stage through its interface: a fake host and a fake client, no session.

/// A client whose answers come from `answer`; it keeps every request it was sent.
private final class FakeToolClient: ClientChannel {
    struct Sent: Sendable {
        let method: String
        let params: JSONValue
    }
    typealias Answer = @Sendable (_ method: String, _ params: JSONValue) async throws -> JSONValue
    private let sent = Mutex<[Sent]>([])
    private let answer = Mutex<Answer>({ _, _ in ["outcome": "ok", "content": "done"] })

    var requests: [Sent] { sent.withLock { $0 } }
    var toolCalls: [JSONValue] { requests.filter { $0.method == ToolCallRequest.name }.map(\.params) }

    func answering(_ answer: @escaping Answer) -> Self {
        self.answer.withLock { $0 = answer }
        return self
    }

    func notify(_ method: String, _ params: JSONValue) {}

    func request(_ method: String, _ params: JSONValue, timeout: Double) async throws -> JSONValue {
        sent.withLock { $0.append(Sent(method: method, params: params)) }
        return try await answer.withLock { $0 }(method, params)
    }
}

/// The session's side, recorded: entries, events, undo records, hooks.
private actor FakeToolHost: ToolStageHost {
    var revision = 7
    var entries: [TranscriptContent] = []
    var events: [SessionEvent] = []
    var undos: [UndoRecord] = []
    var sent: [String] = []
    var hooks: [String] = []
    var rules: [ApprovalRule] = []
    var accepted: [ConfirmationDecision] = []
    /// Answers the built-in confirmation as soon as it is asked.
    var confirmationAnswer: ConfirmationAnswer?
    /// What `getState` would have shown when the confirmation was asked.
    var pendingWhenAsked: PendingConfirmation?
    /// When set, a confirmation is answered (with `confirmationAnswer`) only
    /// once this returns for its call id, not at once.
    var confirmationGate: (@Sendable (String) async -> Void)?
    /// The calls running when each gated confirmation was answered.
    var activeWhenAnswered: [String: [String]] = [:]
    var mcpAnswer: (ToolOutcome, JSONValue)?
    /// Cancels the turn as `session/cancel` does as soon as a confirmation is asked.
    var cancelling: TurnControl?
    /// MCP calls wait until they are withdrawn.
    var mcpBlocks = false
    /// Events ("toolCallStarted c1"), entries ("entry c1") and MCP calls, in order.
    var log: [String] = []
    private var logWaiters: [(String, CheckedContinuation<Void, Never>)] = []
    var stage: ToolStage<FakeToolHost>?

    func set(
        rules: [ApprovalRule] = [], confirmationAnswer: ConfirmationAnswer? = nil, mcpAnswer: (ToolOutcome, JSONValue)? = nil,
        cancelling: TurnControl? = nil, mcpBlocks: Bool = false, confirmationGate: (@Sendable (String) async -> Void)? = nil
    ) {
        self.confirmationGate = confirmationGate
        self.rules = rules
        self.confirmationAnswer = confirmationAnswer
        self.mcpAnswer = mcpAnswer
        self.cancelling = cancelling
        self.mcpBlocks = mcpBlocks
    }

    private func record(_ line: String) {
        log.append(line)
        let ready = logWaiters.filter { $0.0 == line }
        logWaiters.removeAll { $0.0 == line }
        for (_, waiter) in ready { waiter.resume() }
    }

    /// Returns once `line` is in the log.
    func waitFor(_ line: String) async {
        if log.contains(line) { return }
        await withCheckedContinuation { logWaiters.append((line, $0)) }
    }

    func undoRecords() -> [UndoRecord] { stage?.undoRecords ?? [] }

    /// `session/cancel` as the runner passes it on.
    func cancelCooperatively() {
        stage?.context.control.requestCooperativeCancel()
        stage?.cancel()
    }

    func run(_ calls: [ModelToolCall], _ context: ToolStageContext) async throws -> [ToolCallOutcome] {
        let stage = ToolStage<FakeToolHost>(calls: calls, context: context)
        self.stage = stage
        return try await stage.run(host: self)
    }

    func activeToolCalls() -> [ToolCallRecord] { stage?.activeToolCalls ?? [] }
    func pendingConfirmation() -> PendingConfirmation? { stage?.pendingConfirmation }
    func phases() -> [ToolCallState.Phase] { stage?.calls.map(\.phase) ?? [] }

    /// Event types with their call ids, in order: "toolCallStarted c1".
    func eventLog() -> [String] {
        events.map { event in [event.type, event.json["callId"]?.stringValue].compactMap { $0 }.joined(separator: " ") }
    }

    /// Entries and the events with a call id, in order, without the started events.
    func finishLog() -> [String] { log.filter { $0.hasPrefix("entry") || $0.hasPrefix("toolCallFinished") } }

    // ToolStageHost
    func approvingRule(tool: String, arguments: JSONValue) -> ApprovalRule? { rules.first { $0.tool == tool } }

    func inputValidator(for tool: String, schema: JSONValue) throws -> JSONSchemaValidator { try JSONSchemaValidator(schema: schema) }

    func append(_ content: TranscriptContent, turn: String?) throws -> TranscriptEntry {
        entries.append(content)
        if case .toolOutput(let callId, _, _, _, _, _, _) = content { record("entry \(callId)") }
        return TranscriptEntry(id: "e\(entries.count)", turnId: turn, content)
    }

    func emit(_ event: SessionEvent, turn: String?) {
        events.append(event)
        record([event.type, event.json["callId"]?.stringValue].compactMap { $0 }.joined(separator: " "))
        guard event.type == SessionEvent.ConfirmationRequested.type, let stage else { return }
        pendingWhenAsked = stage.pendingConfirmation
        if let answer = confirmationAnswer {
            if let gate = confirmationGate {
                let callId = event.json["callId"]?.stringValue ?? ""
                Task {
                    await gate(callId)
                    self.answerGated(callId, answer)
                }
            } else {
                stage.resolveConfirmation(answer)
            }
        }
        if let cancelling {
            cancelling.requestCooperativeCancel()
            stage.cancel()
        }
    }

    private func answerGated(_ callId: String, _ answer: ConfirmationAnswer) {
        activeWhenAnswered[callId] = stage?.activeToolCalls.map(\.callId)
        stage?.resolveConfirmation(answer, callId: callId)
    }

    func recordUndo(_ record: UndoRecord) throws { undos.append(record) }

    let media = MediaStore(directory: nil)
    func keepMedia(_ media: [MediaContent]) throws -> [MediaReference] { try media.compactMap { try self.media.keep($0) } }

    func recordCallSent(_ callID: String, turn: String, attempt: Int, arguments: JSONValue?) throws { sent.append(callID) }
    func recordCallAsked(_ callID: String, turn: String, attempt: Int) throws {}

    func acceptDecision(
        _ decision: ConfirmationDecision, reason: String?, arguments: JSONValue?, rule: ApprovalScope?,
        tool: String, schema: JSONValue?, source: ConfirmationSource
    ) throws -> ConfirmationAnswer {
        accepted.append(decision)
        return ConfirmationAnswer(decision: decision, source: source, reason: reason, arguments: arguments)
    }

    func runMCPTool(named name: String, callId: String, arguments: JSONValue, timeout: Double, elicitation: MCPElicitation?) async throws -> (ToolOutcome, JSONValue)? {
        guard name.hasPrefix("mcp__") else { return nil }
        record("mcp \(name)")
        if mcpBlocks {
            await blockUntilCancelled()
            record("mcp withdrawn \(name)")
            throw CancellationError()
        }
        return mcpAnswer
    }

    func runToolHook(_ hook: HookName, profile: ResolvedProfile, toolName: String, payload: JSONValue) async throws {
        hooks.append("\(hook.rawValue) \(payload["callId"]?.stringValue ?? "")")
    }

    func runBuiltinTool(_ tool: ResolvedTool, arguments: JSONValue, profile: ResolvedProfile, span: SpanContext?) async throws -> (ToolOutcome, JSONValue) {
        (.ok, .string("built-in \(tool.name)"))
    }
}

/// The profile of a session whose config is `{"tools": tools}` plus `extra` members.
private func profile(tools: String, extra: String = "") throws -> ResolvedProfile {
    let config = try JSONValue.parse(#"{"tools": \#(tools)\#(extra)}"#).decode(as: SessionConfig.self)
    return try ProfileResolver.resolve(config: config, properties: [:])
}

private func context(
    _ profile: ResolvedProfile, client: FakeToolClient, guards: [Guard] = [], capabilities: ClientCapabilities = ClientCapabilities(tools: true),
    control: TurnControl = TurnControl(turnId: "t1"), mcpServers: [String] = [], limits: Limits? = nil
) -> ToolStageContext {
    ToolStageContext(
        sessionId: "s1", turnId: "t1", profile: profile, limits: EffectiveLimits(config: limits, overrides: nil), guards: guards,
        capabilities: capabilities, channel: client, control: control, logger: Logger(level: .off), tracer: nil, spanParent: nil,
        mcpServers: mcpServers)
}

private func call(_ id: String, _ name: String, _ arguments: String = "{}") -> ModelToolCall {
    ModelToolCall(id: id, name: name, argumentsJSON: arguments)
}

/// The client's side of a test: requests as they arrive, answers and
/// withdrawals, how many were out at once; and waits on them.
private actor ClientLog {
    enum Condition: Sendable {
        case line(String)
        case inFlightAtLeast(Int)
    }
    private(set) var lines: [String] = []
    private(set) var inFlight = 0
    private(set) var maxInFlight = 0
    private var waiters: [Int: (Condition, CheckedContinuation<Void, Never>)] = [:]
    private var nextToken = 0

    func arrived(_ id: String) {
        inFlight += 1
        maxInFlight = max(maxInFlight, inFlight)
        note("request \(id)")
    }

    func left(_ id: String, withdrawn: Bool) {
        inFlight -= 1
        note((withdrawn ? "withdrawn " : "answer ") + id)
    }

    /// Returns once `condition` holds, or the task is cancelled.
    func wait(_ condition: Condition) async {
        let token = nextToken
        nextToken += 1
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if holds(condition) || Task.isCancelled {
                    continuation.resume()
                } else {
                    waiters[token] = (condition, continuation)
                }
            }
        } onCancel: {
            Task { await self.release(token) }
        }
    }

    private func holds(_ condition: Condition) -> Bool {
        switch condition {
        case .line(let line): return lines.contains(line)
        case .inFlightAtLeast(let n): return inFlight >= n
        }
    }

    private func release(_ token: Int) {
        waiters.removeValue(forKey: token)?.1.resume()
    }

    private func note(_ line: String) {
        lines.append(line)
        for (token, waiter) in waiters where holds(waiter.0) {
            waiters[token] = nil
            waiter.1.resume()
        }
    }
}

/// Suspends until the calling task is cancelled.
private func blockUntilCancelled() async {
    await ClientLog().wait(.line("never"))
}

/// A client whose `tool/call` answers wait for `hold` (by call id); a call
/// cancelled meanwhile is withdrawn. `answer` gives the result.
private func heldClient(
    _ log: ClientLog, hold: @escaping @Sendable (String) async -> Void,
    answer: @escaping @Sendable (String) throws -> JSONValue = { id in ["outcome": "ok", "content": .string("ran \(id)")] }
) -> FakeToolClient {
    FakeToolClient().answering { method, params in
        let id = params["callId"]?.stringValue ?? ""
        await log.arrived(id)
        await hold(id)
        if Task.isCancelled {
            await log.left(id, withdrawn: true)
            throw CancellationError()
        }
        await log.left(id, withdrawn: false)
        return try answer(id)
    }
}

private let readOnlyTools = #"[{"name": "read", "annotations": {"readOnly": true}}, {"name": "write"}]"#

@Suite struct ToolStageTests {
    @Test func runsTheCallsInCallOrderAndRecordsEachOutput() async throws {
        let client = FakeToolClient().answering { _, params in
            ["outcome": "ok", "content": .string("ran \(params["callId"]?.stringValue ?? "")")]
        }
        let host = FakeToolHost()
        let outcomes = try await host.run(
            [call("c1", "read", #"{"f": "a"}"#), call("c2", "write", #"{"f": "b"}"#)],
            context(try profile(tools: #"[{"name": "read"}, {"name": "write"}]"#), client: client))

        #expect(outcomes == [
            ToolCallOutcome(callId: "c1", outcome: .ok, content: "ran c1"),
            ToolCallOutcome(callId: "c2", outcome: .ok, content: "ran c2"),
        ])
        #expect(client.toolCalls.map { $0["callId"] } == ["c1", "c2"])
        #expect(client.toolCalls.first == [
            "sessionId": "s1", "turnId": "t1", "callId": "c1", "name": "read", "arguments": ["f": "a"], "revision": 7, "idempotencyKey": "s1/t1/1/c1",
        ])
        // Each send is journaled (a crash then knows the call may have run).
        #expect(await host.sent == ["c1", "c2"])
        #expect(await host.entries == [
            .toolOutput(callId: "c1", name: "read", outcome: .ok, content: "ran c1", profile: "default"),
            .toolOutput(callId: "c2", name: "write", outcome: .ok, content: "ran c2", profile: "default"),
        ])
        #expect(await host.eventLog() == ["toolCallStarted c1", "toolCallFinished c1", "toolCallStarted c2", "toolCallFinished c2"])
        #expect(await host.phases() == [.answered, .answered])
        #expect(await host.activeToolCalls().isEmpty)
    }

    @Test func callsThatCannotRunNeverReachTheClient() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        let tools = #"[{"name": "typed", "inputSchema": {"type": "object", "required": ["n"]}}, {"name": "rm"}]"#
        let outcomes = try await host.run(
            [call("c1", "nope"), call("c2", "typed", "{not json"), call("c3", "typed", "{}"), call("c4", "rm")],
            context(try profile(tools: tools), client: client, guards: [Guard(match: GuardMatch(name: "rm"), verdict: .deny, reason: "never")]))

        #expect(outcomes.map(\.outcome) == [.failed, .failed, .failed, .denied])
        #expect(outcomes[0].content.stringValue?.hasPrefix("There is no tool named 'nope'.") == true)
        #expect(outcomes[1].content.stringValue?.hasPrefix("The arguments for 'typed' are not valid JSON") == true)
        #expect(outcomes[2].content.stringValue?.hasPrefix("The arguments for 'typed' do not match its input schema") == true)
        #expect(outcomes[3].content == "The call was denied by policy: never")
        #expect(client.requests.isEmpty)
        #expect(await host.eventLog().contains("confirmationResolved c4"))
    }

    @Test func aToolOfAServerThatIsDownSaysSoInsteadOfNoSuchTool() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        var ctx = context(try profile(tools: "[]"), client: client, mcpServers: ["h"])
        ctx.unavailableTools["mcp__h__x"] = "The MCP server 'h' is unavailable: it failed to start."
        let outcomes = try await host.run([call("c1", "mcp__h__x")], ctx)
        #expect(outcomes == [ToolCallOutcome(callId: "c1", outcome: .failed, content: "The MCP server 'h' is unavailable: it failed to start.")])
        #expect(client.requests.isEmpty)
    }

    @Test func aCallIsActiveWhileItsExecutorHasItAndAnsweredAfter() async throws {
        let host = FakeToolHost()
        let seen = Mutex<([ToolCallRecord], [ToolCallState.Phase])>(([], []))
        let client = FakeToolClient().answering { _, _ in
            let state = (await host.activeToolCalls(), await host.phases())
            seen.withLock { $0 = state }
            return ["outcome": "ok", "content": "x"]
        }
        _ = try await host.run([call("c1", "read", #"{"f": 1}"#), call("c2", "read")], context(try profile(tools: #"[{"name": "read"}]"#), client: client))

        // Seen while c2 was out: c1 answered, c2 sent with its arguments.
        #expect(seen.withLock { $0.0 } == [ToolCallRecord(callId: "c2", name: "read", arguments: [:])])
        #expect(seen.withLock { $0.1 } == [.answered, .sent])
        #expect(await host.activeToolCalls().isEmpty)
    }

    @Test func aBuiltInConfirmationIsPendingUntilAnsweredAndEditedArgumentsRun() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        await host.set(confirmationAnswer: ConfirmationAnswer(decision: .approve, source: .client, arguments: ["f": "safe"]))
        let outcomes = try await host.run(
            [call("c1", "write", #"{"f": "risky"}"#)], context(try profile(tools: #"[{"name": "write", "confirmation": "always"}]"#), client: client))

        #expect(await host.pendingWhenAsked == PendingConfirmation(callId: "c1", name: "write", arguments: ["f": "risky"]))
        #expect(client.toolCalls.first?["arguments"] == ["f": "safe"])
        #expect(outcomes.map(\.outcome) == [.ok])
        #expect(await host.entries == [.toolOutput(callId: "c1", name: "write", outcome: .ok, content: "done", profile: "default", approvedArguments: ["f": "safe"])])
        #expect(await host.eventLog() == ["toolCallStarted c1", "confirmationRequested c1", "confirmationResolved c1", "toolCallFinished c1"])
    }

    @Test func aStandingRuleAnswersForTheUser() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        await host.set(rules: [ApprovalRule(id: "r1", tool: "write")])
        let outcomes = try await host.run([call("c1", "write")], context(try profile(tools: #"[{"name": "write", "confirmation": "always"}]"#), client: client))

        #expect(outcomes.map(\.outcome) == [.ok])
        #expect(await host.eventLog() == ["toolCallStarted c1", "confirmationResolved c1", "toolCallFinished c1"])
        #expect(await host.events[1].json["source"] == "rule")
    }

    @Test func aClientConfirmationHandlerIsAskedAndItsAnswerChecked() async throws {
        let client = FakeToolClient().answering { method, _ in
            method == ConfirmationRequest.name ? ["decision": "deny", "reason": "no"] : ["outcome": "ok", "content": "ran"]
        }
        let host = FakeToolHost()
        let outcomes = try await host.run(
            [call("c1", "write")],
            context(try profile(tools: #"[{"name": "write", "confirmation": "always"}]"#), client: client, capabilities: ClientCapabilities(tools: true, confirmations: .request)))

        #expect(outcomes == [ToolCallOutcome(callId: "c1", outcome: .denied, content: "The user declined this call: no")])
        #expect(client.requests.map(\.method) == [ConfirmationRequest.name])
        #expect(await host.accepted == [.deny])
    }

    @Test func cancelDeniesThePendingConfirmationAndTheNextCallNeverStarts() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        let control = TurnControl(turnId: "t1")
        await host.set(cancelling: control)
        await #expect(throws: TurnStop.self) {
            try await host.run([call("c1", "write"), call("c2", "write")],
                               context(try profile(tools: #"[{"name": "write", "confirmation": "always"}]"#), client: client, control: control))
        }
        #expect(await host.entries == [
            .toolOutput(callId: "c1", name: "write", outcome: .denied, content: "The call was not run: the turn was cancelled before it was confirmed.", profile: "default"),
        ])
        #expect(await host.phases() == [.answered, .waiting])
        #expect(await host.pendingConfirmation() == nil)
        #expect(client.requests.isEmpty)
    }

    @Test func aCancelBeforeTheFirstCallRunsNone() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        let control = TurnControl(turnId: "t1")
        control.requestCooperativeCancel()
        await #expect(throws: TurnStop.self) {
            try await host.run([call("c1", "read")], context(try profile(tools: #"[{"name": "read"}]"#), client: client, control: control))
        }
        #expect(await host.events.isEmpty)
        #expect(client.requests.isEmpty)
    }

    @Test func denyAndStopRecordsTheRefusalThenEndsTheTurn() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        await host.set(confirmationAnswer: ConfirmationAnswer(decision: .denyAndStop, source: .client))
        await #expect(throws: TurnStop.self) {
            try await host.run([call("c1", "write"), call("c2", "write")], context(try profile(tools: #"[{"name": "write", "confirmation": "always"}]"#), client: client))
        }
        #expect(await host.entries.count == 1)
        #expect(await host.phases() == [.answered, .waiting])
        #expect(client.requests.isEmpty)
    }

    @Test func okResultsWithUndoAreRecordedOthersAreNot() async throws {
        let client = FakeToolClient().answering { _, params in
            params["callId"] == "c1" ? ["outcome": "ok", "content": "w", "undo": ["rm": "a"]] : ["outcome": "failed", "content": "no", "undo": ["rm": "b"]]
        }
        let host = FakeToolHost()
        _ = try await host.run([call("c1", "write"), call("c2", "write")], context(try profile(tools: #"[{"name": "write"}]"#), client: client))
        #expect(await host.undos == [UndoRecord(turnId: "t1", callId: "c1", name: "write", undo: ["rm": "a"])])
    }

    @Test func aFinalToolEndsWithItsArgumentsAndNeverRuns() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        let outcomes = try await host.run([call("c1", "answer", #"{"v": 3}"#)], context(try profile(tools: #"[{"name": "answer", "final": true}]"#), client: client))
        #expect(outcomes == [ToolCallOutcome(callId: "c1", outcome: .ok, content: "Final answer recorded.", finalAnswer: ["v": 3])])
        #expect(client.requests.isEmpty)
    }

    @Test func mcpToolsRunOnTheirServerAndNameItInEvents() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        await host.set(mcpAnswer: (.ok, "from fs"))
        let outcomes = try await host.run([call("c1", "mcp__fs__read")], context(try profile(tools: #"[{"name": "mcp__fs__read", "annotations": {"readOnly": true}}]"#), client: client, mcpServers: ["web", "fs"]))
        #expect(outcomes.map(\.content) == ["from fs"])
        #expect(client.requests.isEmpty)
        #expect(await host.events.first?.json["source"] == ["mcp": "fs"])
    }

    @Test func anMCPToolsHintsAskUnlessAnAllowGuardLiftsThem() async throws {
        let tools = #"[{"name": "mcp__fs__write"}]"#
        let asking = FakeToolHost()
        await asking.set(confirmationAnswer: ConfirmationAnswer(decision: .approve, source: .client), mcpAnswer: (.ok, "wrote"))
        _ = try await asking.run([call("c1", "mcp__fs__write")], context(try profile(tools: tools), client: FakeToolClient(), mcpServers: ["fs"]))
        #expect(await asking.eventLog().contains("confirmationRequested c1"))

        let allowed = FakeToolHost()
        await allowed.set(mcpAnswer: (.ok, "wrote"))
        let outcomes = try await allowed.run(
            [call("c1", "mcp__fs__write")],
            context(try profile(tools: tools), client: FakeToolClient(), guards: [Guard(match: GuardMatch(name: "mcp__fs__*"), verdict: .allow)], mcpServers: ["fs"]))
        #expect(outcomes.map(\.content) == ["wrote"])
        #expect(await allowed.eventLog() == ["toolCallStarted c1", "toolCallFinished c1"])
    }

    @Test func aTimedOutCallFailsAndAFailingClientEndsTheTurn() async throws {
        let timingOut = FakeToolClient().answering { _, _ in throw OutgoingRequestError.timedOut(seconds: 3) }
        let host = FakeToolHost()
        let outcomes = try await host.run([call("c1", "slow")], context(try profile(tools: #"[{"name": "slow"}]"#), client: timingOut))
        #expect(outcomes == [ToolCallOutcome(callId: "c1", outcome: .failed, content: "The tool did not finish within 3.0 seconds and was abandoned.")])

        let failing = FakeToolClient().answering { _, _ in throw OutgoingRequestError.rpc(RPCError(.internalError, "boom")) }
        let other = FakeToolHost()
        await #expect(throws: RPCError.self) {
            try await other.run([call("c1", "slow"), call("c2", "slow")], context(try profile(tools: #"[{"name": "slow"}]"#), client: failing))
        }
        #expect(await other.phases() == [.withdrawn, .waiting])
        #expect(await other.entries.isEmpty)
    }

    @Test func hooksSeeEachValidCallAndItsOutputInPairs() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        var hooked = try profile(tools: #"[{"name": "read"}]"#)
        let action = try JSONValue.parse(#"{"set": {"seen": true}}"#).decode(as: HookAction.self)
        hooked.hooks = Hooks(onToolCall: [action], onToolOutput: [action])
        _ = try await host.run([call("c1", "read"), call("c2", "nope"), call("c3", "read")], context(hooked, client: client))
        #expect(await host.hooks == ["onToolCall c1", "onToolOutput c1", "onToolCall c3", "onToolOutput c3"])
    }

    @Test func aProfileWithoutToolHooksRunsNone() async throws {
        let host = FakeToolHost()
        var other = try profile(tools: #"[{"name": "read"}]"#)
        other.hooks = Hooks(onPrompt: [try JSONValue.parse(#"{"set": {"seen": true}}"#).decode(as: HookAction.self)])
        for p in [try profile(tools: #"[{"name": "read"}]"#), other] {
            _ = try await host.run([call("c1", "read"), call("c2", "read")], context(p, client: FakeToolClient()))
            _ = try await host.run([call("c3", "read")], context(p, client: FakeToolClient()))
        }
        #expect(await host.hooks.isEmpty)
        #expect(await host.entries.count == 6)
    }

    @Test func askUserNeedsTheClientsCapability() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        let p = try profile(tools: "[]", extra: #", "askUser": true"#)
        let outcomes = try await host.run([call("c1", "ask_user", #"{"question": "?"}"#)], context(p, client: client))
        #expect(outcomes.map(\.content) == ["The user cannot be asked: the client does not answer user/ask."])
        #expect(client.requests.isEmpty)
    }

    // MARK: Parallel calls

    @Test func parallelCallsRunTogetherAndTheirOutputsAreRecordedInCallOrder() async throws {
        let host = FakeToolHost()
        let log = ClientLog()
        // All three are out at once; then they are answered last first.
        let client = heldClient(log) { id in
            switch id {
            case "c3": await log.wait(.inFlightAtLeast(3))
            case "c2": await host.waitFor("toolCallFinished c3")
            default: await host.waitFor("toolCallFinished c2")
            }
        }
        let outcomes = try await host.run([call("c1", "read"), call("c2", "read"), call("c3", "read")], context(try profile(tools: readOnlyTools), client: client))

        #expect(outcomes.map(\.callId) == ["c1", "c2", "c3"])
        #expect(await log.maxInFlight == 3)
        // Finishes are announced as they come; entries (and the finish of the first) in call order.
        #expect(await host.finishLog() == ["toolCallFinished c3", "toolCallFinished c2", "entry c1", "toolCallFinished c1", "entry c2", "entry c3"])
        #expect(await host.entries.map { entry -> String in
            if case .toolOutput(let callId, _, _, _, _, _, _) = entry { return callId }
            return ""
        } == ["c1", "c2", "c3"])
        #expect(await host.phases() == [.answered, .answered, .answered])
    }

    @Test func anExclusiveCallRunsAloneAfterTheCallsBeforeItAndBeforeTheNext() async throws {
        let host = FakeToolHost()
        let log = ClientLog()
        let client = heldClient(log) { id in
            switch id {
            // r1 runs while w2 is admitted; w2 must not start until r1 is back.
            case "r1": await host.waitFor("toolCallStarted w2")
            // r3 and r4 run together after w2.
            case "r3": await log.wait(.line("request r4"))
            default: break
            }
        }
        _ = try await host.run(
            [call("r1", "read"), call("w2", "write"), call("r3", "read"), call("r4", "read")], context(try profile(tools: readOnlyTools), client: client))

        let lines = await log.lines
        #expect(Array(lines.prefix(4)) == ["request r1", "answer r1", "request w2", "answer w2"])
        // r3 and r4 start in either order (r3 answers only once r4 is out).
        #expect(Set(lines.dropFirst(4)) == ["request r3", "request r4", "answer r3", "answer r4"])
        #expect(Array(await host.finishLog().prefix(4)) == ["entry r1", "toolCallFinished r1", "entry w2", "toolCallFinished w2"])
    }

    @Test func noMoreThanMaxParallelToolCallsRunAtOnce() async throws {
        let host = FakeToolHost()
        let log = ClientLog()
        // Each waits for a second one beside it: with a cap of 2, two are out at a time.
        let client = heldClient(log) { _ in await log.wait(.inFlightAtLeast(2)) }
        let outcomes = try await host.run(
            (1...4).map { call("c\($0)", "read") }, context(try profile(tools: readOnlyTools), client: client, limits: Limits(maxParallelToolCalls: 2)))
        #expect(outcomes.count == 4)
        #expect(await log.maxInFlight == 2)
    }

    @Test func aCancelWithdrawsEveryOutstandingCall() async throws {
        let host = FakeToolHost()
        let log = ClientLog()
        // c4 answers at once; its output waits for the three before it, which never answer.
        let client = heldClient(log) { id in if id != "c4" { await log.wait(.line("never")) } }
        let ctx = context(try profile(tools: readOnlyTools), client: client)
        let run = Task { try await host.run([call("c1", "read"), call("c2", "read"), call("c3", "read"), call("c4", "read")], ctx) }
        await log.wait(.inFlightAtLeast(3))
        await host.waitFor("toolCallFinished c4")
        #expect(await host.activeToolCalls().map(\.callId) == ["c1", "c2", "c3"])
        run.cancel()
        await #expect(throws: CancellationError.self) { try await run.value }
        #expect(Set(await log.lines.filter { $0.hasPrefix("withdrawn") }) == ["withdrawn c1", "withdrawn c2", "withdrawn c3"])
        // Nothing is recorded once the run is withdrawn, not even the answer that was in.
        #expect(await host.entries.isEmpty)
        #expect(await host.phases() == [.withdrawn, .withdrawn, .withdrawn, .finished])
        #expect(await host.activeToolCalls().isEmpty)
    }

    @Test func aCancelWithdrawsALoneCallAndRecordsNothing() async throws {
        // One call runs without lanes (ToolStage.runAlone): a cancel still withdraws it.
        let host = FakeToolHost()
        let log = ClientLog()
        let client = heldClient(log) { _ in await log.wait(.line("never")) }
        let ctx = context(try profile(tools: readOnlyTools), client: client)
        let run = Task { try await host.run([call("c1", "write")], ctx) }
        await log.wait(.line("request c1"))
        #expect(await host.activeToolCalls().map(\.callId) == ["c1"])
        run.cancel()
        await #expect(throws: CancellationError.self) { try await run.value }
        #expect(await log.lines == ["request c1", "withdrawn c1"])
        #expect(await host.entries.isEmpty)
        #expect(await host.phases() == [.withdrawn])
        #expect(await host.eventLog() == ["toolCallStarted c1"])
    }

    @Test func aTimedOutParallelCallDoesNotStopItsSiblings() async throws {
        let host = FakeToolHost()
        let log = ClientLog()
        let client = heldClient(log, hold: { _ in await log.wait(.inFlightAtLeast(3)) }) { id in
            if id == "c2" { throw OutgoingRequestError.timedOut(seconds: 0.5) }
            return ["outcome": "ok", "content": .string("ran \(id)")]
        }
        let outcomes = try await host.run([call("c1", "read"), call("c2", "read"), call("c3", "read")], context(try profile(tools: readOnlyTools), client: client))
        #expect(outcomes.map(\.outcome) == [.ok, .failed, .ok])
        #expect(outcomes[1].content == "The tool did not finish within 0.5 seconds and was abandoned.")
    }

    @Test func anExecutorErrorEndsTheRunAndWithdrawsTheCallsStillOut() async throws {
        let host = FakeToolHost()
        let log = ClientLog()
        let client = heldClient(log, hold: { id in
            await log.wait(id == "c1" ? .line("never") : .line("request c1"))
        }) { _ in throw OutgoingRequestError.rpc(RPCError(.internalError, "boom")) }
        await #expect(throws: RPCError.self) {
            try await host.run([call("c1", "read"), call("c2", "read")], context(try profile(tools: readOnlyTools), client: client))
        }
        #expect(await log.lines.contains("withdrawn c1"))
        #expect(await host.entries.isEmpty)
    }

    @Test func undoRecordsAreKeptInCallOrderWhateverOrderTheResultsCameIn() async throws {
        let host = FakeToolHost()
        let log = ClientLog()
        let client = heldClient(log, hold: { id in if id == "c1" { await host.waitFor("toolCallFinished c2") } }) { id in
            ["outcome": "ok", "content": "w", "undo": ["rm": .string(id)]]
        }
        _ = try await host.run([call("c1", "read"), call("c2", "read")], context(try profile(tools: readOnlyTools), client: client))
        // Journaled as they came; rolled back newest first by call order.
        #expect(await host.undos.map(\.callId) == ["c2", "c1"])
        #expect(await host.undoRecords().map(\.callId) == ["c1", "c2"])
    }

    @Test func sessionCancelWithdrawsMCPCallsAndLetsClientCallsFinish() async throws {
        let host = FakeToolHost()
        await host.set(mcpBlocks: true)
        let log = ClientLog()
        let client = heldClient(log) { _ in await host.waitFor("mcp withdrawn mcp__fs__read") }
        let tools = #"[{"name": "mcp__fs__read", "annotations": {"readOnly": true}}, {"name": "read", "annotations": {"readOnly": true}}]"#
        let ctx = context(try profile(tools: tools), client: client, mcpServers: ["fs"])
        let run = Task { try await host.run([call("m1", "mcp__fs__read"), call("c2", "read")], ctx) }
        await host.waitFor("mcp mcp__fs__read")
        await log.wait(.line("request c2"))
        await host.cancelCooperatively()
        await #expect(throws: TurnStop.self) { try await run.value }
        #expect(await log.lines.contains("answer c2"))
        #expect(await host.entries == [.toolOutput(callId: "c2", name: "read", outcome: .ok, content: "ran c2", profile: "default")])
        #expect(await host.phases() == [.withdrawn, .answered])
    }

    @Test func confirmationsComeOneAtATimeWhileApprovedCallsRun() async throws {
        let host = FakeToolHost()
        let log = ClientLog()
        // w2 is approved once r1 runs, w3 once the approved w2 runs; r1 and w2
        // are held until w3 is answered, so each confirmation is asked and
        // answered while the calls before it run.
        await host.set(
            confirmationAnswer: ConfirmationAnswer(decision: .approve, source: .client),
            confirmationGate: { id in await log.wait(.line(id == "w2" ? "request r1" : "request w2")) })
        let client = heldClient(log) { id in if id != "w3" { await host.waitFor("confirmationResolved w3") } }
        let tools = #"[{"name": "read", "annotations": {"readOnly": true}}, {"name": "write", "confirmation": "always", "parallel": true}]"#
        let outcomes = try await host.run([call("r1", "read"), call("w2", "write"), call("w3", "write")], context(try profile(tools: tools), client: client))
        #expect(outcomes.map(\.outcome) == [.ok, .ok, .ok])
        #expect(await host.activeWhenAnswered == ["w2": ["r1"], "w3": ["r1", "w2"]])
        // One at a time, in call order.
        #expect(await host.eventLog().filter { $0.hasPrefix("confirmation") } == [
            "confirmationRequested w2", "confirmationResolved w2", "confirmationRequested w3", "confirmationResolved w3",
        ])
        #expect(await host.pendingConfirmation() == nil)
    }
}
