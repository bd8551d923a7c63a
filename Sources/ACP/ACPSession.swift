import AgentRPC
import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// What the front end keeps about one ACP session beside the engine's session
/// of the same id: the workspace, the prompt that runs, how its tool calls look
/// in the editor, and the user's standing "reject always" choices.
final class ACPSession: Sendable {
    let id: String
    let cwd: String
    /// `cwd` and the `additionalDirectories`: tool paths must stay inside one.
    let roots: [String]
    let editor: EditorCapabilities
    /// The editor's `mcpServers` the session runs, as it sent them.
    let mcpServers: [JSONValue]
    /// What its selectors offer.
    let catalog: OptionCatalog
    private let state: Mutex<State>

    struct State {
        var prompt: RunningPrompt?
        /// Content shown in the editor for a call (a diff, a terminal), by call id.
        var display: [String: [JSONValue]] = [:]
        /// Calls announced (`tool_call`) whose last update has not been sent, in order.
        var openCalls: [String] = []
        /// Those of them that started running (`in_progress` was sent).
        var runningCalls: Set<String> = []
        /// Tools the user allowed or rejected for the rest of the session.
        var choices = StandingChoices()
        /// The permission mode.
        var permissionMode = PermissionMode.default
        /// Calls that will fail without running, by call id, with the problem
        /// found before the user was asked (an edit that cannot apply).
        var doomed: [String: String] = [:]
        /// The old text of the file an approved edit showed (nil: a new file), by call id.
        var approvedChanges: [String: String?] = [:]
        /// The model option's value (a model name).
        var model: String?
        /// Whether the user chose it (`session/set_config_option`): only then
        /// does it override what the session's profiles say, turn by turn.
        var modelChosen = false
        /// The active profile, as the editor was last told.
        var profile: String?
        /// The context window of the round trip under way (nil: unknown), and
        /// whether usage reported now is its own: from its start until its tool
        /// calls start or the turn ends (a router, summary or consult request
        /// reports its usage outside those bounds).
        var requestWindow: Int?
        var inRoundTrip = false
        /// What the session has cost so far, in US dollars: the stored total at
        /// a load plus every priced usage report since (ACP's `cost` is the
        /// session's cumulative cost); nil while nothing was priced.
        var costUSD: Double?
        /// Whether the editor has the session's title (`session_info_update`).
        var titled = false
        /// MCP servers that are not available, not yet shown to the user; and
        /// those already shown (each is shown once).
        var unavailable: [(name: String, reason: String)] = []
        var mcpShownNames: [String: String] = [:]
        var shownUnavailable: Set<String> = []
        /// The prompt commands of the MCP servers that are ready, by server.
        var prompts: [String: [PromptCommand]] = [:]
        /// Servers an `mcpServerStatus` event told of: what `session/getState`
        /// said before is older news for them.
        var promptsReported: Set<String> = []
        /// The commands the editor was last told of; nil until the answer that
        /// makes the session known to it was sent.
        var shownCommands: JSONValue?
    }

    struct RunningPrompt {
        var requestID: RequestID
        var call: EmbeddedCall?
        var cancelled = false
    }

    init(id: String, cwd: String, roots: [String], editor: EditorCapabilities, catalog: OptionCatalog, model: String?, profile: String?,
         mcpServers: [JSONValue]) {
        self.id = id
        self.cwd = cwd
        self.roots = roots
        self.editor = editor
        self.catalog = catalog
        self.mcpServers = mcpServers
        self.state = Mutex(State(model: model, profile: profile))
    }

    var model: String? {
        get { state.withLock { $0.model } }
        set { state.withLock { $0.model = newValue } }
    }

    /// The model the user chose for this session, if they chose one.
    var chosenModel: String? { state.withLock { $0.modelChosen ? $0.model : nil } }

    func choose(model: String) {
        state.withLock {
            $0.model = model
            $0.modelChosen = true
        }
    }

    /// Records the active profile; true when it changed (the editor should hear of it).
    func setProfile(_ profile: String) -> Bool {
        state.withLock { s in
            defer { s.profile = profile }
            return s.profile != profile
        }
    }

    var profile: String? { state.withLock { $0.profile } }

    var permissionMode: PermissionMode {
        get { state.withLock { $0.permissionMode } }
        set { state.withLock { $0.permissionMode = newValue } }
    }

    var choices: StandingChoices {
        get { state.withLock { $0.choices } }
        set { state.withLock { $0.choices = newValue } }
    }

    /// The editor's names of the session's MCP servers, by agentrpc's.
    var mcpShownNames: [String: String] {
        get { state.withLock { $0.mcpShownNames } }
        set { state.withLock { $0.mcpShownNames = newValue } }
    }

    /// MCP servers that cannot run, to be shown to the user once (at the next prompt).
    func noteUnavailable(_ servers: [(name: String, reason: String)]) {
        state.withLock { s in
            for server in servers where !s.shownUnavailable.contains(server.name) && !s.unavailable.contains(where: { $0.name == server.name }) {
                s.unavailable.append(server)
            }
        }
    }

    /// The servers not shown yet; they count as shown from now on.
    func takeUnavailable() -> [(name: String, reason: String)] {
        state.withLock { s in
            defer {
                for server in s.unavailable { s.shownUnavailable.insert(server.name) }
                s.unavailable = []
            }
            return s.unavailable
        }
    }

    // MARK: Slash commands

    /// The prompts `session/getState` lists for its servers (`mcpServers`), for
    /// those no `mcpServerStatus` event told of yet (a server that got ready
    /// before the session was known here).
    func notePrompts(fromState servers: [JSONValue]) {
        state.withLock { s in
            for server in servers {
                guard let name = server["name"]?.stringValue, !s.promptsReported.contains(name) else { continue }
                Self.setPrompts(&s, server: name, status: server["status"]?.stringValue, prompts: server["prompts"]?.arrayValue)
            }
        }
    }

    /// An `mcpServerStatus` event: a ready server's prompts (none when absent)
    /// become commands, a failed or stopped one's go; while it restarts they
    /// stay. `send` gets the new list, under the lock (so lists go out in the
    /// order they were made), when it changed and the editor has one already.
    func serverStatus(_ server: String, status: String?, prompts: [JSONValue]?, send: (JSONValue) -> Void) {
        state.withLock { s in
            s.promptsReported.insert(server)
            Self.setPrompts(&s, server: server, status: status, prompts: prompts)
            guard let shown = s.shownCommands else { return }
            let now = Self.commands(s)
            guard now != shown else { return }
            s.shownCommands = now
            send(now)
        }
    }

    /// The answer that makes the session known was sent: `send` gets the
    /// commands (`available_commands_update`), and every change from now on.
    func showCommands(send: (JSONValue) -> Void) {
        state.withLock { s in
            let now = Self.commands(s)
            s.shownCommands = now
            send(now)
        }
    }

    /// The prompt command `/name` names, if a server of the session lists it.
    func promptCommand(named name: String) -> PromptCommand? {
        state.withLock { s in s.prompts.values.lazy.flatMap { $0 }.first { $0.name == name } }
    }

    private static func setPrompts(_ s: inout State, server: String, status: String?, prompts: [JSONValue]?) {
        switch status {
        case "ready":
            let shown = s.mcpShownNames[server] ?? server
            s.prompts[server] = (prompts ?? []).compactMap { PromptCommand(server: server, shownServer: shown, prompt: $0) }
        case "starting", "restarting":
            break
        default:
            s.prompts[server] = nil
        }
    }

    /// `available_commands_update`'s list: the built-in commands, then the
    /// servers' prompts (by server name, each server's in its order).
    private static func commands(_ s: State) -> JSONValue {
        let prompts = s.prompts.keys.sorted().flatMap { s.prompts[$0] ?? [] }
        return .array(SlashCommand.all.map(\.advertised) + prompts.map(\.advertised))
    }

    /// The session already has a title (it was prompted before this process loaded it).
    func markTitled() { state.withLock { $0.titled = true } }

    /// The title the first prompt gives the session (its first line, cut), once; nil after.
    func takeTitle(from text: String) -> String? {
        let line = text.split(whereSeparator: \.isNewline).first.map { $0.trimmingWhitespace() } ?? ""
        guard !line.isEmpty else { return nil }
        return state.withLock { s in
            guard !s.titled else { return nil }
            s.titled = true
            return line.count > Self.titleLength ? String(line.prefix(Self.titleLength - 1)) + "…" : line
        }
    }

    /// The longest title, in characters.
    static let titleLength = 80

    // MARK: The running prompt

    /// Claims the session for a prompt; throws `alreadyRunning` when one runs.
    func beginPrompt(_ id: RequestID) throws {
        try state.withLock { s in
            if let running = s.prompt {
                throw RPCError(.alreadyRunning, "a prompt is already running in this session (request \(running.requestID)); cancel it or wait for its answer")
            }
            s.prompt = RunningPrompt(requestID: id)
            s.display = [:]
            s.doomed = [:]
            s.approvedChanges = [:]
        }
    }

    /// Attaches the engine's turn; a cancel that came first cancels it now.
    func attach(_ call: EmbeddedCall) {
        let cancelNow = state.withLock { s -> Bool in
            s.prompt?.call = call
            return s.prompt?.cancelled ?? false
        }
        if cancelNow { call.cancel() }
    }

    /// Ends the prompt; answers whether it had been cancelled.
    func endPrompt() -> Bool {
        state.withLock { s in
            defer { s.prompt = nil }
            return s.prompt?.cancelled ?? false
        }
    }

    /// `session/cancel`: the turn stops at once (the engine withdraws what it asked the editor).
    @discardableResult
    func cancelPrompt() -> Bool {
        let call = state.withLock { s -> EmbeddedCall?? in
            guard s.prompt != nil else { return .none }
            s.prompt?.cancelled = true
            return .some(s.prompt?.call)
        }
        guard case .some(let running) = call else { return false }
        running?.cancel()
        return true
    }

    var promptRequestID: RequestID? { state.withLock { $0.prompt?.requestID } }
    var isCancelling: Bool { state.withLock { $0.prompt?.cancelled ?? false } }

    // MARK: Usage

    func requestStarted(contextWindow: Int?) {
        state.withLock {
            $0.requestWindow = contextWindow
            $0.inRoundTrip = true
        }
    }

    func roundTripEnded() { state.withLock { $0.inRoundTrip = false } }

    /// The window of the round trip whose usage just came; nil when it is
    /// unknown or the report is not a round trip's.
    var roundTripWindow: Int? { state.withLock { $0.inRoundTrip ? $0.requestWindow : nil } }

    /// The window of the last request (nil: unknown): what the context a
    /// compaction left is measured against until the next request.
    var lastWindow: Int? { state.withLock { $0.requestWindow } }

    /// A loaded session's meter as stored: the window of the model its next
    /// round trip goes to, and what it has cost so far.
    func restoreMeter(window: Int?, costUSD: Double?) {
        state.withLock {
            $0.requestWindow = window
            $0.costUSD = costUSD
        }
    }

    var costUSD: Double? { state.withLock { $0.costUSD } }

    /// Adds a usage report's price (nil: not priced); answers the session's cost so far.
    func addCost(_ usd: Double?) -> Double? {
        state.withLock { s in
            if let usd, usd.isFinite { s.costUSD = (s.costUSD ?? 0) + usd }
            return s.costUSD
        }
    }

    // MARK: Tool calls

    func addDisplay(callId: String, _ item: JSONValue) {
        state.withLock { $0.display[callId, default: []].append(item) }
    }

    func display(callId: String) -> [JSONValue] { state.withLock { $0.display[callId] ?? [] } }

    func callStarted(_ callId: String) { state.withLock { $0.openCalls.append(callId) } }

    /// Whether the call was announced and has not ended.
    func isOpen(_ callId: String) -> Bool { state.withLock { $0.openCalls.contains(callId) } }

    func callFinished(_ callId: String) {
        state.withLock {
            $0.openCalls.removeAll { $0 == callId }
            $0.runningCalls.remove(callId)
        }
    }

    /// Marks an announced call as running; true the first time (when `in_progress` is news).
    func callRunning(_ callId: String) -> Bool {
        state.withLock { s in s.openCalls.contains(callId) && s.runningCalls.insert(callId).inserted }
    }

    /// The calls of the turn that never got their last update (a cancelled or
    /// failed turn); they are closed now.
    func takeOpenCalls() -> [String] {
        state.withLock { s in
            defer {
                s.openCalls = []
                s.runningCalls = []
            }
            return s.openCalls
        }
    }

    /// The call fails with `problem` when it runs, without running.
    func doom(_ callId: String, _ problem: String) { state.withLock { $0.doomed[callId] = problem } }
    func takeDoomed(_ callId: String) -> String? { state.withLock { $0.doomed.removeValue(forKey: callId) } }

    /// The user approved an edit whose diff showed `oldText` as the file's text.
    func approveChange(_ callId: String, oldText: String?) { state.withLock { $0.approvedChanges[callId] = .some(oldText) } }
    /// What the approved diff of the call showed; nil when none was approved.
    func takeApprovedChange(_ callId: String) -> String?? { state.withLock { $0.approvedChanges.removeValue(forKey: callId) } }

    /// Records a standing choice; answers the choices to store.
    func choose(always allowed: Bool, _ tool: String) -> StandingChoices {
        state.withLock { s in
            if allowed {
                s.choices.allow.insert(tool)
                s.choices.reject.remove(tool)
            } else {
                s.choices.reject.insert(tool)
                s.choices.allow.remove(tool)
            }
            return s.choices
        }
    }
}

/// The ACP sessions this process serves, by id.
final class ACPSessions: Sendable {
    private let sessions = Mutex<[String: ACPSession]>([:])

    func get(_ id: String) -> ACPSession? { sessions.withLock { $0[id] } }
    func add(_ session: ACPSession) { sessions.withLock { $0[session.id] = session } }
    @discardableResult
    func remove(_ id: String) -> ACPSession? { sessions.withLock { $0.removeValue(forKey: id) } }
    var all: [ACPSession] { sessions.withLock { Array($0.values) } }
}
