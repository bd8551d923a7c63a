import AgentRPC
import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Why a request to the server brought no result.
enum ChatCallFailure: Error {
    case rpc(RPCError)
    case serverGone
    case timedOut
}

/// The chat loop: a JSON-RPC client of an `agentrpc serve` child that reads
/// lines from a person, streams the turn's events back, runs the built-in
/// tools and asks before the ones that need confirmation.
///
/// Single-threaded: everything that happens (a line, Ctrl-C, a server
/// message) arrives through one `ChatInbox`, and only this loop touches state.
final class ChatConversation {
    /// What the chat was started with.
    struct Setup {
        var session: SessionConfig
        /// Running the built-in offline demo script rather than a configured model.
        var isDemo: Bool
        /// Echo the lines read, because no terminal did (piped input).
        var echoInput: Bool
        /// `--resume`: the stored session to continue ("" lists the recent ones to pick from); nil starts a new one.
        var resume: String? = nil
        var prompt = "you> "
    }

    /// How an answered confirmation goes back to the server.
    private enum Responder {
        /// The built-in flow: `session/confirm`.
        case sessionConfirm
        /// A `confirmation/request` the server sent, answered directly.
        case request(RequestID)
    }

    private struct Question {
        var callId: String
        var responder: Responder
    }

    /// The `session/send` in flight and what it showed so far.
    private struct TurnInProgress {
        var requestID: RequestID
        var cancelRequested = false
        var question: Question?
        /// Summed from `usage` events; nil when the provider reported none.
        var usage: Usage?
    }

    private let setup: Setup
    private let server: TranscriptServerProcess
    private let inbox: ChatInbox
    private let out: ChatTerminalOutput
    private var toolbox = ChatToolbox()

    private var sessionId = ""
    /// Whether the session is kept in the store, so `--resume` can continue it.
    private var isStored = false
    private var nextRequestNumber = 1
    private var responses: [RequestID: Result<JSONValue, RPCError>] = [:]
    /// Requests nobody waits for (`session/confirm`): only an error answer is shown.
    private var unawaited: Set<RequestID> = []
    private var pendingLines: [String] = []
    private var inputEnded = false
    private var serverGone = false
    private var interruptedAtPrompt = false
    private var turn: TurnInProgress?
    /// Provider round trips started, counted from `requestStarted`: in demo mode
    /// this says when the script has run out.
    private var roundTripsStarted = 0

    /// Longest wait for the answer to anything but a turn.
    private static let requestTimeout: TimeInterval = 30
    private static let writeTimeout: TimeInterval = 10

    init(setup: Setup, server: TranscriptServerProcess, inbox: ChatInbox, output: ChatTerminalOutput) {
        self.setup = setup
        self.server = server
        self.inbox = inbox
        self.out = output
    }

    // MARK: Lifecycle

    /// Runs until the person leaves; returns the exit status.
    func run() -> Int32 {
        guard start() else {
            if serverGone { reportServerGone() }
            return finish(status: 1)
        }
        while !serverGone, let line = readPrompt(), !serverGone {
            if !handle(line) { break }
        }
        if serverGone {
            reportServerGone()
            return finish(status: 1)
        }
        return finish(status: 0)
    }

    private func start() -> Bool {
        let initialize: JSONValue = [
            "protocolVersion": 1,
            "clientInfo": ["name": "agentrpc-chat", "version": .string(Server.version)],
            "capabilities": ["tools": true, "confirmations": "notify"],
        ]
        if case .failure(let failure) = call(InitializeRequest.self, initialize) {
            show(failure, doing: "initialize the server")
            return false
        }
        if let resume = setup.resume { return resumeSession(resume) }
        let params: JSONValue
        do {
            params = try JSONValue(encoding: setup.session)
        } catch {
            out.line("error: cannot encode the session configuration: \(error)")
            return false
        }
        switch call(SessionCreateRequest.self, params) {
        case .success(let handle):
            guard let id = handle["sessionId"]?.stringValue else {
                out.line("error: the server's session/create answer has no sessionId")
                return false
            }
            sessionId = id
            isStored = setup.session.store != false
            return true
        case .failure(let failure):
            show(failure, doing: "create the session")
            return false
        }
    }

    /// How many stored sessions `--resume` without an id offers.
    static let resumeChoices = 20

    /// `--resume [ID]`: loads a stored session (`session/resume`), the one named
    /// or one the person picks from the most recent; shows how it ended and its meter.
    private func resumeSession(_ requested: String) -> Bool {
        var id = requested
        if id.isEmpty {
            guard let picked = pickStoredSession() else { return false }
            id = picked
        }
        switch call(SessionResumeRequest.self, ["sessionId": .string(id)]) {
        case .success(let handle):
            sessionId = handle["sessionId"]?.stringValue ?? id
            isStored = true
            if handle["interruptedTurn"] != nil {
                // Its server stopped mid-turn (a crash, a kill): the load applied the error policy to that turn.
                out.note("(its last turn was cut short when its server stopped; what that turn completed is kept as the session's error policy says)")
            }
        case .failure(let failure):
            show(failure, doing: "resume the session \(id)")
            return false
        }
        guard let transcript = fetchTranscript() else { return false }
        out.line("Resumed \(sessionId): \(ChatFormatting.plural(transcript.entries.count, "entry", "entries")).")
        let lastPrompt = transcript.entries.lastIndex { $0.type == .prompt }
        if let lastPrompt {
            out.note("It ended with:")
            for entry in transcript.entries[lastPrompt...] { out.note("  " + ChatFormatting.entry(entry)) }
        }
        showMeter()
        return true
    }

    /// Lists the most recent stored sessions, newest first, and reads the
    /// person's choice (a number, an id, or Enter for the newest); nil when
    /// there is none or the input ended.
    private func pickStoredSession() -> String? {
        let listed: [JSONValue]
        switch call(SessionListRequest.self, ["limit": .int(Self.resumeChoices)]) {
        case .success(let page): listed = page["data"]?.arrayValue ?? []
        case .failure(let failure):
            show(failure, doing: "list the stored sessions")
            return nil
        }
        let ids = listed.compactMap { $0["sessionId"]?.stringValue }
        guard !ids.isEmpty else {
            out.line("There is no stored conversation to resume.")
            return nil
        }
        out.line("Recent conversations, newest first:")
        for (number, summary) in listed.enumerated() { out.line(ChatFormatting.storedSession(number + 1, summary)) }
        while true {
            guard let line = nextLine(asking: "Resume which one? [1-\(ids.count), Enter for 1] ") else { return nil }
            let answer = line.trimmingWhitespace()
            if answer.isEmpty { return ids[0] }
            if let number = Int(answer), (1...ids.count).contains(number) { return ids[number - 1] }
            if ids.contains(answer) { return answer }
            out.line("'\(answer)' is none of them: give a number from 1 to \(ids.count) or a session id")
        }
    }

    /// The polite way out: `shutdown`, `exit`, then wait (bounded) for the child.
    private func finish(status: Int32) -> Int32 {
        out.endLine()
        if isStored { out.note("This conversation is kept: agentrpc chat --resume \(sessionId) continues it.") }
        if !serverGone {
            _ = call(ShutdownRequest.self, nil, timeout: 5)
            notify(ExitNotification.self, nil)
        }
        server.closeStdin()
        if server.waitForExit(until: Date(timeIntervalSinceNow: 5)) == nil { server.stop() }
        return status
    }

    private func reportServerGone() {
        out.line("error: the agentrpc server exited unexpectedly.")
        let tail = server.stderrTail(lines: 10)
        if !tail.isEmpty { out.note("its last words:\n" + tail.joined(separator: "\n")) }
    }

    // MARK: Reading the person

    /// Shows the prompt and returns the next line, or nil at the end of input.
    private func readPrompt() -> String? { nextLine(asking: setup.prompt) }

    /// Asks `question` and returns the next line typed, or nil at the end of input.
    private func nextLine(asking question: String) -> String? {
        interruptedAtPrompt = false
        out.ask(question)
        while true {
            if !pendingLines.isEmpty {
                let line = pendingLines.removeFirst()
                showTyped(line)
                return line
            }
            if inputEnded || serverGone {
                out.endLine()
                return nil
            }
            pump(until: nil)
            if interruptedAtPrompt {
                // Ctrl-C at the prompt drops what was typed (the terminal did) and asks again.
                interruptedAtPrompt = false
                out.ask(question)
            }
        }
    }

    /// After a line is taken: a terminal already echoed it; piped input is echoed here.
    private func showTyped(_ line: String) {
        if setup.echoInput {
            out.write(line + "\n")
        } else {
            out.personEndedLine()
        }
    }

    /// Handles one line; false means leave.
    private func handle(_ line: String) -> Bool {
        let trimmed = line.trimmingWhitespace()
        if trimmed.isEmpty { return true }
        guard trimmed.hasPrefix("/") else {
            runTurn(line)
            return true
        }
        let parts = trimmed.split(separator: " ", maxSplits: 1).map(String.init)
        let argument = parts.count > 1 ? parts[1].trimmingWhitespace() : ""
        switch parts[0] {
        case "/exit", "/quit": return false
        case "/help": showHelp()
        case "/transcript": showTranscript()
        case "/undo": undoLastTurn()
        case "/profile": switchProfile(to: argument)
        case "/notes": showNotes()
        case "/compact": compact(instructions: argument)
        default: out.line("unknown command \(parts[0]); /help lists the commands")
        }
        return true
    }

    private func showHelp() {
        out.line("""
            Type a message and press Enter to send it. Commands:
              /transcript     show the conversation as the server keeps it
              /undo           take back the last turn (its prompt, tool calls, answer and notes)
              /profile NAME   switch to another profile of the session (sets its selector property)
              /notes          list the notes the write_note tool saved
              /compact [TEXT] summarize the conversation so far to make room (TEXT: what to keep)
              /help           this text
              /exit           leave (so does Ctrl-D)
            Ctrl-C cancels a running turn; at the prompt it clears the line.
            """)
    }

    // MARK: Turns

    private func runTurn(_ text: String) {
        if setup.isDemo && roundTripsStarted >= ChatDemoScript.items.count {
            out.note(ChatDemoScript.ended)
            return
        }
        guard let (result, usage) = runCancellable(SessionSendRequest.self, ["sessionId": .string(sessionId), "input": .string(text)]) else { return }
        switch result {
        case .success(let value):
            out.endLine()
            let summary = try? value.decode(as: TurnResult.self)
            // The result's usage is the authoritative sum, but it reads as zeros
            // when the provider reported nothing; the events tell the two apart.
            let reported = usage.map { summary?.usage ?? $0 }
            out.note(ChatFormatting.turnSummary(usage: reported, roundTrips: summary?.roundTrips, toolCalls: summary?.toolCalls))
            showMeter()
            if setup.isDemo && roundTripsStarted >= ChatDemoScript.items.count {
                out.note("(That was the last line of the offline demo script.)")
            }
        case .failure(let error) where error.code == .cancelled:
            out.line("[cancelled]")
            let partial = error.data["partialText"]?.stringValue ?? ""
            out.note(partial.isEmpty ? "(nothing was said before the cancel)" : "(the partial answer above was not added to the transcript)")
        case .failure(let error):
            out.line(ChatFormatting.error(error))
            if setup.isDemo && roundTripsStarted > ChatDemoScript.items.count { out.note(ChatDemoScript.ended) }
        }
    }

    /// Sends a request that Ctrl-C may withdraw (a turn, a compaction) and
    /// waits for its answer, everything else being handled meanwhile; with it,
    /// the usage its `usage` events summed. Nil when the server is gone.
    private func runCancellable<M: RPCMethod>(_ method: M.Type, _ params: JSONValue) -> (Result<JSONValue, RPCError>, Usage?)? {
        guard let id = request(method, params) else { return nil }
        turn = TurnInProgress(requestID: id)
        while responses[id] == nil && !serverGone {
            pump(until: nil)
        }
        let usage = turn?.usage
        turn = nil
        guard let result = responses.removeValue(forKey: id) else { return nil }
        return (result, usage)
    }

    /// The context meter and the session's cost, when the server knows them (`session/getState`).
    private func showMeter() {
        guard case .success(let state) = call(SessionGetStateRequest.self, ["sessionId": .string(sessionId)]),
            let meter = ChatFormatting.meter(
                contextTokens: state["contextTokens"]?.intValue, window: state["contextWindowTokens"]?.intValue,
                costUSD: state["usageTotals"]?["costUSD"]?.numberValue)
        else { return }
        out.note(meter)
    }

    /// `/compact [instructions]`: `session/compact`; Ctrl-C withdraws it and nothing changes.
    private func compact(instructions: String) {
        var params: [String: JSONValue] = ["sessionId": .string(sessionId)]
        if !instructions.isEmpty { params["instructions"] = .string(instructions) }
        out.note("(compacting: the model summarizes the conversation…)")
        guard let (result, _) = runCancellable(SessionCompactRequest.self, .object(params)) else { return }
        switch result {
        case .success(let value):
            let removed = value["entriesRemoved"]?.intValue ?? 0
            out.line("compacted: " + ChatFormatting.compaction(
                entriesRemoved: removed, tokensBefore: value["tokensBefore"]?.intValue, tokensAfter: value["tokensAfter"]?.intValue))
            showMeter()
        case .failure(let error) where error.code == .cancelled:
            out.line("[cancelled] (nothing was compacted)")
        case .failure(let error) where error.kind == .invalidParams && error.data["field"]?.stringValue == "keepLast":
            out.line("nothing to compact yet: the conversation is no longer than the part a compaction keeps")
        case .failure(let error):
            out.line(ChatFormatting.error(error))
        }
    }

    /// Ctrl-C: during a turn it withdraws the `session/send` (immediate, even for
    /// a stalled stream); at the prompt it only asks again.
    private func interrupt() {
        guard var current = turn else {
            interruptedAtPrompt = true
            return
        }
        // A pending question is denied by the server as part of the cancel.
        current.question = nil
        current.cancelRequested = true
        turn = current
        notify(CancelRequestNotification.self, ["id": current.requestID.json])
    }

    // MARK: Confirmation

    private func ask(callId: String, name: String, arguments: JSONValue, reason: String?, responder: Responder) {
        guard turn != nil, turn?.cancelRequested == false else {
            if case .request(let id) = responder { reply(id, ["decision": "deny", "reason": "the turn is being cancelled"]) }
            return
        }
        out.ask(ChatFormatting.confirmationQuestion(name, arguments, reason: reason))
        turn?.question = Question(callId: callId, responder: responder)
        // Piped input answers with its next line. At a terminal only a line typed
        // after the question counts: nothing typed earlier may approve a call.
        if setup.echoInput, !pendingLines.isEmpty {
            answer(pendingLines.removeFirst())
        } else if inputEnded {
            out.write("n (end of input)\n")
            answer("n")
        }
    }

    private func answer(_ line: String) {
        guard let question = turn?.question else { return }
        turn?.question = nil
        // At the start of a line the answer was already shown ("n (end of input)").
        if !out.atLineStart { showTyped(line) }
        let decision: JSONValue = ChatFormatting.isApproval(line) ? "approve" : "deny"
        switch question.responder {
        case .sessionConfirm:
            let params: JSONValue = ["sessionId": .string(sessionId), "callId": .string(question.callId), "decision": decision]
            if let id = request(SessionConfirmRequest.self, params) { unawaited.insert(id) }
        case .request(let id):
            reply(id, ["decision": decision])
        }
    }

    // MARK: Commands

    private func fetchTranscript() -> SessionTranscript? {
        switch call(SessionGetTranscriptRequest.self, ["sessionId": .string(sessionId)]) {
        case .success(let value):
            do {
                return try value.decode(as: SessionTranscript.self)
            } catch {
                out.line("error: the transcript the server sent cannot be read: \(error)")
                return nil
            }
        case .failure(let failure):
            show(failure, doing: "read the transcript")
            return nil
        }
    }

    private func showTranscript() {
        guard let transcript = fetchTranscript() else { return }
        guard !transcript.entries.isEmpty else {
            out.line("(the transcript is empty)")
            return
        }
        let count = transcript.entries.count
        out.line("transcript (revision \(transcript.revision), \(count == 1 ? "1 entry" : "\(count) entries")):")
        for entry in transcript.entries { out.line("  " + ChatFormatting.entry(entry)) }
    }

    /// Rewinds to just before the last prompt, and drops the notes that turn wrote.
    private func undoLastTurn() {
        guard let transcript = fetchTranscript() else { return }
        guard let last = transcript.entries.lastIndex(where: { $0.type == .prompt }) else {
            out.line("nothing to undo: the transcript has no prompt")
            return
        }
        let anchor: JSONValue = last == 0 ? .null : .string(transcript.entries[last - 1].id)
        let params: JSONValue = [
            "sessionId": .string(sessionId), "expectedRevision": .int(transcript.revision),
            "operations": [["op": "truncateAfter", "id": anchor]],
        ]
        switch call(SessionMutateTranscriptRequest.self, params) {
        case .success:
            let removed = transcript.entries[last...]
            out.line("undid the last turn; removed \(removed.count == 1 ? "1 entry" : "\(removed.count) entries"):")
            for entry in removed { out.line("  - " + ChatFormatting.entry(entry)) }
            var writers: Set<String> = []
            for entry in removed {
                if case .toolOutput(let callId, let name, .ok, _, _, _, _) = entry.content, name == ChatToolbox.writeNote { writers.insert(callId) }
            }
            for note in toolbox.removeNotes(writtenBy: writers) {
                out.line("  - note #\(note.id), written in that turn: \(ChatFormatting.shorten(note.text))")
            }
        case .failure(let failure):
            show(failure, doing: "undo the last turn")
        }
    }

    private func switchProfile(to name: String) {
        guard let profiles = setup.session.profiles, !profiles.cases.isEmpty else {
            out.line("this session has no profiles (define some in a session file: agentrpc chat --session FILE)")
            return
        }
        let known = profiles.cases.keys.sorted().joined(separator: ", ")
        guard !name.isEmpty else {
            out.line("usage: /profile NAME — profiles: \(known)")
            return
        }
        guard let selector = profiles.selector else {
            out.line("this session's profiles have no selector property, so they cannot be chosen by name")
            return
        }
        guard profiles.cases[name] != nil else {
            out.line("no profile named '\(name)'; profiles: \(known)")
            return
        }
        switch call(SessionSetPropertiesRequest.self, ["sessionId": .string(sessionId), "set": [selector: .string(name)]]) {
        case .success(let value):
            // Profiles are resolved before each request, so the switch shows on the next one.
            let active = value["activeProfile"]?.stringValue ?? "?"
            out.line(active == name
                ? "\(selector) = \(name); profile \(name) is active"
                : "\(selector) = \(name); profile \(name) takes over from \(active) with the next request")
        case .failure(let failure):
            show(failure, doing: "switch the profile")
        }
    }

    private func showNotes() {
        guard !toolbox.notes.isEmpty else {
            out.line("(no notes)")
            return
        }
        for note in toolbox.notes { out.line("note #\(note.id): \(ChatFormatting.shorten(note.text))") }
    }

    private func show(_ failure: ChatCallFailure, doing what: String) {
        switch failure {
        case .rpc(let error): out.line("could not \(what): " + ChatFormatting.error(error))
        case .serverGone: out.line("could not \(what): the server is gone")
        case .timedOut: out.line("could not \(what): the server did not answer within \(Int(Self.requestTimeout)) seconds")
        }
    }

    // MARK: The server

    /// Takes one input and reacts to it; false when `deadline` passed first.
    @discardableResult
    private func pump(until deadline: Date?) -> Bool {
        guard let input = inbox.take(until: deadline) else { return false }
        switch input {
        case .line(let line):
            if turn?.question != nil { answer(line) } else { pendingLines.append(line) }
        case .endOfInput:
            inputEnded = true
            if turn?.question != nil {
                out.write("n (end of input)\n")
                answer("n")
            }
        case .interrupt:
            interrupt()
        case .server(.message(let json)):
            dispatch(json)
        case .server(.garbage(let what)):
            out.note("(the server wrote something that is not a protocol message: \(what))")
        case .serverClosed:
            serverGone = true
        }
        return true
    }

    private func dispatch(_ json: JSONValue) {
        guard case .message(let message) = Message.decode(json) else { return }
        switch message {
        case .response(let id?, let result):
            if unawaited.remove(id) != nil {
                if case .failure(let error) = result { out.note(ChatFormatting.error(error)) }
            } else {
                responses[id] = result
            }
        case .response(nil, .failure(let error)):
            out.note("the server refused a message: " + ChatFormatting.error(error))
        case .response(nil, .success):
            break
        case .request(let id, let method, let params):
            serve(id, method, params ?? .null)
        case .notification(SessionEventNotification.name, let params?):
            show(event: params)
        case .notification(CancelRequestNotification.name, let params?):
            // The server withdrew a question it asked with confirmation/request.
            if let withdrawn = params["id"].flatMap(RequestID.init(json:)),
                case .request(let asked)? = turn?.question?.responder, asked == withdrawn {
                turn?.question = nil
                out.note("(the question was withdrawn)")
            }
        case .notification:
            break
        }
    }

    /// Requests from the server: the tools, and a custom confirmation if it ever asks one.
    private func serve(_ id: RequestID, _ method: String, _ params: JSONValue) {
        switch method {
        case ToolCallRequest.name:
            guard let call = try? params.decode(as: ToolCallParams.self) else {
                replyError(id, .invalidParams("tool/call params are malformed"))
                return
            }
            let result = toolbox.call(name: call.name, arguments: call.arguments, callId: call.callId)
            do {
                reply(id, try JSONValue(encoding: result))
            } catch {
                replyError(id, .internalError("cannot encode the tool result: \(error)"))
            }
        case ToolUndoRequest.name:
            guard let undo = try? params.decode(as: ToolUndoParams.self) else {
                replyError(id, .invalidParams("tool/undo params are malformed"))
                return
            }
            if let note = toolbox.undo(name: undo.name, token: undo.undo) {
                out.note("↶ undone \(undo.name): note #\(note.id) removed")
            }
            reply(id, [:])
        case ConfirmationRequest.name:
            guard let question = try? params.decode(as: ConfirmationRequestParams.self) else {
                replyError(id, .invalidParams("confirmation/request params are malformed"))
                return
            }
            ask(callId: question.callId, name: question.name, arguments: question.arguments, reason: question.reason, responder: .request(id))
        default:
            replyError(id, .methodNotFound(method))
        }
    }

    private func show(event params: JSONValue) {
        guard params["sessionId"]?.stringValue == sessionId, let event = params["event"],
            let type = event["type"]?.stringValue
        else { return }
        switch type {
        case "textDelta":
            out.stream(event["delta"]?.stringValue ?? "", as: .text)
        case "reasoningDelta":
            out.stream(event["delta"]?.stringValue ?? "", as: .reasoning)
        case "requestStarted":
            roundTripsStarted += 1
        case "toolCallStarted":
            out.line(ChatFormatting.toolStarted(event["name"]?.stringValue ?? "?", event["arguments"] ?? .null))
        case "confirmationRequested":
            ask(
                callId: event["callId"]?.stringValue ?? "", name: event["name"]?.stringValue ?? "?",
                arguments: event["arguments"] ?? .null, reason: event["reason"]?.stringValue, responder: .sessionConfirm)
        case "confirmationResolved":
            let source = event["source"]?.stringValue ?? ""
            guard source != "client" else { return }
            if let question = turn?.question, question.callId == event["callId"]?.stringValue {
                turn?.question = nil
            }
            let how = event["decision"]?.stringValue == "approve" ? "approved" : "denied"
            let why = ["cancel": "the turn was cancelled", "timeout": "no answer in time", "policy": "by policy"][source] ?? source
            out.note("(\(how): \(why))")
        case "toolCallFinished":
            out.line(ChatFormatting.toolFinished(event["outcome"]?.stringValue ?? "?", event["content"] ?? .null))
        case "usage":
            guard let report = try? event.decode(as: Usage.self) else { return }
            var sum = turn?.usage ?? Usage()
            sum.add(report)
            turn?.usage = sum
        case "retrying":
            let after = event["afterSeconds"]?.numberValue.map { String(cFormat: "%.1f", $0) } ?? "?"
            let why = event["error"].flatMap(RPCError.init(json:)).map(ChatFormatting.error) ?? "a provider error"
            out.note("(\(why) — retrying in \(after)s)")
        case "profileActivated":
            out.note("(profile: \(event["profile"]?.stringValue ?? "?"))")
        case "schemaWarnings":
            let count = event["warnings"]?.arrayValue?.count ?? 0
            if count > 0 { out.note("(\(ChatFormatting.plural(count, "tool schema warning")) from the provider adapter)") }
        case "contextCompacted":
            // `/compact` says it itself when it answers.
            guard event["trigger"]?.stringValue != "manual" else { return }
            let why = event["trigger"]?.stringValue == "overflow" ? "the model's window was exceeded" : "the context neared the model's window"
            out.note("(\(why); compacted: " + ChatFormatting.compaction(
                entriesRemoved: event["entriesRemoved"]?.intValue ?? 0, tokensBefore: event["tokensBefore"]?.intValue,
                tokensAfter: event["tokensAfter"]?.intValue) + ")")
        case "turnEnded":
            if event["undo"]?.stringValue == "rolledBack" { out.note("(this turn's tool side effects were rolled back)") }
        default:
            break
        }
    }

    // MARK: Wire

    @discardableResult
    private func transmit(_ message: Message) -> Bool {
        guard !serverGone else { return false }
        do {
            try server.write(Framing.newline.frame(message.json.serialized()), until: Date(timeIntervalSinceNow: Self.writeTimeout))
            return true
        } catch {
            serverGone = true
            return false
        }
    }

    /// Sends a request; nil when the server can no longer be written to.
    private func request<M: RPCMethod>(_ method: M.Type, _ params: JSONValue?) -> RequestID? {
        let id = RequestID.int(nextRequestNumber)
        nextRequestNumber += 1
        return transmit(.request(id: id, method: M.name, params: params)) ? id : nil
    }

    private func notify<N: RPCNotification>(_ method: N.Type, _ params: JSONValue?) {
        transmit(.notification(method: N.name, params: params))
    }

    private func reply(_ id: RequestID, _ result: JSONValue) { transmit(.success(id, result)) }

    private func replyError(_ id: RequestID, _ error: RPCError) { transmit(.failure(id, error)) }

    /// A request whose answer is awaited, everything else being handled meanwhile.
    private func call<M: RPCMethod>(_ method: M.Type, _ params: JSONValue?, timeout: TimeInterval = requestTimeout) -> Result<JSONValue, ChatCallFailure> {
        guard let id = request(method, params) else { return .failure(.serverGone) }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while true {
            if let result = responses.removeValue(forKey: id) { return result.mapError { .rpc($0) } }
            if serverGone { return .failure(.serverGone) }
            if Date() >= deadline || !pump(until: deadline) { return .failure(.timedOut) }
        }
    }
}
