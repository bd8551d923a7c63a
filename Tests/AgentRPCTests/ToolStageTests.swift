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
    var mcpAnswer: (ToolOutcome, JSONValue)?
    /// Cancels the turn as `session/cancel` does as soon as a confirmation is asked.
    var cancelling: TurnControl?
    var stage: ToolStage<FakeToolHost>?

    func set(
        rules: [ApprovalRule] = [], confirmationAnswer: ConfirmationAnswer? = nil, mcpAnswer: (ToolOutcome, JSONValue)? = nil,
        cancelling: TurnControl? = nil
    ) {
        self.rules = rules
        self.confirmationAnswer = confirmationAnswer
        self.mcpAnswer = mcpAnswer
        self.cancelling = cancelling
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

    // ToolStageHost
    func approvingRule(tool: String, arguments: JSONValue) -> ApprovalRule? { rules.first { $0.tool == tool } }

    func inputValidator(for tool: String, schema: JSONValue) throws -> JSONSchemaValidator { try JSONSchemaValidator(schema: schema) }

    func append(_ content: TranscriptContent, turn: String?) throws -> TranscriptEntry {
        entries.append(content)
        return TranscriptEntry(id: "e\(entries.count)", turnId: turn, content)
    }

    func emit(_ event: SessionEvent, turn: String?) {
        events.append(event)
        guard event.type == SessionEvent.ConfirmationRequested.type, let stage else { return }
        pendingWhenAsked = stage.pendingConfirmation
        if let answer = confirmationAnswer { stage.resolveConfirmation(answer) }
        if let cancelling {
            cancelling.requestCooperativeCancel()
            stage.cancel()
        }
    }

    func recordUndo(_ record: UndoRecord) throws { undos.append(record) }

    func recordCallSent(_ callID: String, turn: String, attempt: Int, arguments: JSONValue?) throws { sent.append(callID) }

    func acceptDecision(
        _ decision: ConfirmationDecision, reason: String?, arguments: JSONValue?, rule: ApprovalScope?,
        tool: String, schema: JSONValue?, source: ConfirmationSource
    ) throws -> ConfirmationAnswer {
        accepted.append(decision)
        return ConfirmationAnswer(decision: decision, source: source, reason: reason, arguments: arguments)
    }

    func runMCPTool(named name: String, callId: String, arguments: JSONValue, timeout: Double, control: TurnControl) async throws -> (ToolOutcome, JSONValue)? {
        name.hasPrefix("mcp__") ? mcpAnswer : nil
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
    control: TurnControl = TurnControl(turnId: "t1"), mcpServers: [String] = []
) -> ToolStageContext {
    ToolStageContext(
        sessionId: "s1", turnId: "t1", profile: profile, limits: EffectiveLimits(config: nil, overrides: nil), guards: guards,
        capabilities: capabilities, channel: client, control: control, logger: Logger(level: .off), tracer: nil, spanParent: nil,
        mcpServers: mcpServers)
}

private func call(_ id: String, _ name: String, _ arguments: String = "{}") -> ModelToolCall {
    ModelToolCall(id: id, name: name, argumentsJSON: arguments)
}

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
        #expect(await other.phases() == [.sent, .waiting])
        #expect(await other.entries.isEmpty)
    }

    @Test func hooksSeeEachValidCallAndItsOutputInPairs() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        _ = try await host.run([call("c1", "read"), call("c2", "nope"), call("c3", "read")], context(try profile(tools: #"[{"name": "read"}]"#), client: client))
        #expect(await host.hooks == ["onToolCall c1", "onToolOutput c1", "onToolCall c3", "onToolOutput c3"])
    }

    @Test func askUserNeedsTheClientsCapability() async throws {
        let client = FakeToolClient()
        let host = FakeToolHost()
        let p = try profile(tools: "[]", extra: #", "askUser": true"#)
        let outcomes = try await host.run([call("c1", "ask_user", #"{"question": "?"}"#)], context(p, client: client))
        #expect(outcomes.map(\.content) == ["The user cannot be asked: the client does not answer user/ask."])
        #expect(client.requests.isEmpty)
    }
}
