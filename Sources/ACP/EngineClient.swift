import AgentRPC
import AgentRPCProtocol
import Synchronization

/// The engine's client, as the engine sees it: what the engine would send an
/// agentrpc client is answered here, by asking the editor in ACP terms.
/// `session/event` becomes `session/update`, `tool/call` of a built-in tool
/// becomes `fs/*` or `terminal/*`, `confirmation/request` becomes
/// `session/request_permission`, `tool/undo` writes the old text back.
final class EngineClient: ClientChannel {
    let editor: Connection
    let sessions: ACPSessions
    let logger: Logger

    /// The engine this channel serves, once it exists (it is made with this channel).
    private let engine = Mutex<EmbeddedServer?>(nil)

    init(editor: Connection, sessions: ACPSessions, logger: Logger) {
        self.editor = editor
        self.sessions = sessions
        self.logger = logger
    }

    func attach(_ engine: EmbeddedServer) { self.engine.withLock { $0 = engine } }

    /// Stores the user's standing choices with the session, so they hold after a load in another process.
    private func store(_ choices: StandingChoices, of session: ACPSession) async {
        guard let engine = engine.withLock({ $0 }) else { return }
        do {
            _ = try await engine.call(SessionSetPropertiesRequest.self, ["sessionId": .string(session.id), "set": [ACPProperty.permissions: choices.json]])
        } catch {
            logger.warning("session \(session.id): the user's permission choice was not stored: \(error)")
        }
    }

    func notify(_ method: String, _ params: JSONValue) {
        guard method == SessionEventNotification.name, let id = params["sessionId"]?.stringValue, let event = params["event"],
              let session = sessions.get(id) else { return }
        if event["type"]?.stringValue == "mcpServerStatus", let server = event["server"]?.stringValue {
            if event["status"]?.stringValue == "failed" {
                // A server that fails while the session runs is shown to the user at the next prompt.
                session.noteUnavailable([(session.mcpShownNames[server] ?? server, event["reason"]?.stringValue ?? "it failed")])
            }
            // Its prompts are slash commands: the editor hears of every change.
            session.serverStatus(server, status: event["status"]?.stringValue, prompts: event["prompts"]?.arrayValue) { commands in
                editor.notify("session/update", ACPUpdates.availableCommands(commands, session: id))
            }
        }
        for update in ACPUpdates.updates(for: event, session: session) {
            editor.notify("session/update", ["sessionId": .string(id), "update": update])
        }
    }

    func request(_ method: String, _ params: JSONValue, timeout: Double) async throws -> JSONValue {
        // The engine bounds each of its requests; a client normally enforces the
        // bound, so this one does too, and withdraws what it asked the editor.
        try await withThrowingTaskGroup(of: JSONValue?.self) { group in
            group.addTask { try await self.serve(method, params, timeout: timeout) }
            group.addTask {
                try await Task.sleep(for: .seconds(max(0, timeout)))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            guard let answer = first else { throw OutgoingRequestError.timedOut(seconds: timeout) }
            return answer
        }
    }

    /// The engine starts running a call (after any permission): `in_progress`,
    /// for every call, whoever runs it (the editor, the front end, an MCP server, the engine).
    func toolCallRunning(sessionId: String, callId: String) {
        guard let session = sessions.get(sessionId), session.callRunning(callId) else { return }
        editor.notify("session/update", ["sessionId": .string(sessionId), "update": [
            "sessionUpdate": "tool_call_update", "toolCallId": .string(callId), "status": "in_progress",
        ]])
    }

    var isBehind: Bool { editor.isBehind }
    var outputQueueBytes: Int { editor.outputQueueBytes }
    func waitUntilWritable() async { await editor.waitUntilWritable() }

    private func serve(_ method: String, _ params: JSONValue, timeout: Double) async throws -> JSONValue {
        guard let id = params["sessionId"]?.stringValue, let session = sessions.get(id) else {
            throw OutgoingRequestError.rpc(RPCError.sessionNotFound(params["sessionId"]?.stringValue ?? ""))
        }
        let callId = params["callId"]?.stringValue ?? ""
        let runner = ToolRunner(editor: editor, session: session, callId: callId, timeout: timeout)
        switch method {
        case ToolCallRequest.name:
            guard let name = params["name"]?.stringValue, let tool = BuiltinTool(rawValue: name) else {
                return ToolRun.failed("agentrpc acp has no tool \(params["name"]?.stringValue ?? "")").answer
            }
            return try await runner.run(tool, params["arguments"] ?? .object([:])).answer
        case ToolUndoRequest.name:
            try await runner.undo(params["undo"] ?? .null)
            return .object([:])
        case ConfirmationRequest.name:
            return try await askPermission(params, session: session, runner: runner, timeout: timeout)
        case UserElicitRequest.name:
            return try await showForm(params, session: session, timeout: timeout)
        default:
            // Hooks, context sources and ask_user are not offered to ACP sessions.
            throw OutgoingRequestError.rpc(RPCError.methodNotFound(method))
        }
    }

    /// An MCP server's form (`user/elicit`) as ACP's `elicitation/create` in form
    /// mode, tied to the session and its tool call, when the editor declared
    /// `elicitation.form`; refused otherwise (the server then hears `cancel`).
    private func showForm(_ params: JSONValue, session: ACPSession, timeout: Double) async throws -> JSONValue {
        guard session.editor.elicitationForm else {
            throw OutgoingRequestError.rpc(RPCError(.methodNotFound, "the editor shows no forms (it did not declare clientCapabilities.elicitation.form)"))
        }
        let server = params["server"]?.stringValue ?? "?"
        var request: [String: JSONValue] = [
            "sessionId": .string(session.id), "mode": "form",
            "message": .string("MCP server '\(server)': \(params["message"]?.stringValue ?? "")"),
            "requestedSchema": params["requestedSchema"] ?? .object([:]),
        ]
        if let callId = params["callId"]?.stringValue { request["toolCallId"] = .string(callId) }
        let answer = try await editor.request("elicitation/create", .object(request), timeout: timeout)
        switch answer["action"]?.stringValue {
        case "accept": return ["action": "accept", "content": .object(answer["content"]?.objectValue ?? [:])]
        case "decline": return ["action": "decline"]
        default: return ["action": "cancel"]
        }
    }

    /// The permission options offered, and the decision each one is.
    static let options: [(id: String, name: String, kind: String)] = [
        ("allow_once", "Allow", "allow_once"),
        ("allow_always", "Always allow", "allow_always"),
        ("reject_once", "Reject", "reject_once"),
        ("reject_always", "Always reject", "reject_always"),
    ]

    private func askPermission(_ params: JSONValue, session: ACPSession, runner: ToolRunner, timeout: Double) async throws -> JSONValue {
        let name = params["name"]?.stringValue ?? ""
        let arguments = params["arguments"] ?? .object([:])
        let choices = session.choices
        if choices.reject.contains(name) {
            return ["decision": "deny", "reason": .string("the user rejected every call of \(name) for this session")]
        }
        let view = ToolCallView(name: name, arguments: arguments, cwd: session.cwd)
        var toolCall: [String: JSONValue] = [
            "toolCallId": .string(runner.callId), "title": .string(view.title), "kind": .string(view.kind),
            "status": "pending", "rawInput": arguments,
        ]
        // What the user approves is what runs: an edit shows its diff, and one that
        // cannot apply fails without asking (it would fail after the user approved).
        var approvedOldText: String?? = nil
        if let tool = BuiltinTool(rawValue: name) {
            // Reading the file for the diff must not eat the user's time to decide.
            let reader = ToolRunner(editor: editor, session: session, callId: runner.callId, timeout: min(30, timeout / 2))
            let preview: Result<[JSONValue], ToolRunError>
            do {
                if tool.isEdit {
                    preview = try await reader.plannedChange(tool, arguments).map { change in
                        approvedOldText = .some(change.oldText)
                        return [change.diff]
                    }
                } else {
                    preview = try await reader.preview(tool, arguments)
                }
            } catch let error as OutgoingRequestError {
                preview = .failure(ToolRunError("the file could not be read to show the change: \(error)"))
            }
            switch preview {
            case .success(let items):
                if !items.isEmpty { toolCall["content"] = .array(items) }
            case .failure(let problem):
                session.doom(runner.callId, problem.message)
                return ["decision": "approve"]
            }
        }
        // Nothing to ask: the user allowed every call of the tool, or the mode lets it through.
        if choices.allow.contains(name) || session.permissionMode.approvesWithoutAsking(name) {
            if let approvedOldText { session.approveChange(runner.callId, oldText: approvedOldText) }
            return ["decision": "approve"]
        }
        if !view.locations.isEmpty { toolCall["locations"] = .array(view.locations) }
        let request: JSONValue = [
            "sessionId": .string(session.id), "toolCall": .object(toolCall),
            "options": .array(Self.options.map { ["optionId": .string($0.id), "name": .string($0.name), "kind": .string($0.kind)] }),
        ]
        let answer: JSONValue
        do {
            answer = try await editor.request("session/request_permission", request, timeout: timeout)
        } catch OutgoingRequestError.rpc(let error) {
            return ["decision": "deny", "reason": .string("the editor could not ask the user: \(error.message)")]
        }
        let outcome = answer["outcome"]
        switch (outcome?["outcome"]?.stringValue, outcome?["optionId"]?.stringValue) {
        case ("selected", "allow_once"?):
            if let approvedOldText { session.approveChange(runner.callId, oldText: approvedOldText) }
            return ["decision": "approve"]
        case ("selected", "allow_always"?):
            if let approvedOldText { session.approveChange(runner.callId, oldText: approvedOldText) }
            // Every later call of this tool in the session, stored with it (an
            // engine approval rule would not outlive this process).
            await store(session.choose(always: true, name), of: session)
            return ["decision": "approve"]
        case ("selected", "reject_once"?):
            return ["decision": "deny", "reason": "the user rejected this call"]
        case ("selected", "reject_always"?):
            await store(session.choose(always: false, name), of: session)
            return ["decision": "deny", "reason": .string("the user rejected this call, and every later call of \(name) in this session")]
        case ("cancelled", _):
            return ["decision": "deny", "reason": "the prompt was cancelled before the user decided"]
        case (_, let option):
            logger.warning("session/request_permission answered with an unknown outcome or option \(option ?? "none"): \(answer)")
            return ["decision": "deny", "reason": .string("the editor answered with an unknown permission option \(option.map { "'\($0)'" } ?? "(none)"); the call was not run")]
        }
    }
}
