import AgentRPCProtocol
import Foundation

/// One conversation. An actor, so every state change is ordered; the turn loop
/// runs on it and yields at each await, which is what lets `getState`,
/// `session/cancel` and `session/confirm` interleave with a running turn.
actor AgentSession {
    let id: String
    let config: SessionConfig
    let context: EngineContext
    let createdAt: Date

    /// Entries, revision and properties: every change to them goes through it.
    var transcript: Transcript
    var entries: [TranscriptEntry] { transcript.entries }
    var revision: Int { transcript.revision }
    var properties: [String: JSONValue] { transcript.properties }

    /// The `session/event` stream: `seq`, the running turn's tag, back-pressure.
    let events: SessionEvents
    /// The running turn, or the last one once none runs (`getState` shows it).
    var runner: TurnRunner?
    var isRunning: Bool { runner?.isRunning ?? false }
    /// The running turn, or the last one once no turn is running (docs/turns.md).
    var turnId: String? { runner?.id }
    /// The running turn's switches; nil between turns.
    var control: TurnControl? { runner.flatMap { $0.isRunning ? $0.control : nil } }

    var lastContextValues: [String: String] = [:]
    var providers = ProviderCache()
    /// Compiled tool input schemas by tool name (recompiled if a profile's schema differs).
    var inputValidators: [String: (schema: JSONValue, validator: JSONSchemaValidator)] = [:]
    /// The profile the last round trip resolved (nil before the first, with profiles).
    var activeProfile: ResolvedProfile?
    /// What was sent last per model, for `cacheInvalidated`.
    var prefixTracker = PrefixTracker()
    /// The transcript's messages, converted incrementally from round trip to round trip.
    var historyCache = ModelHistoryCache()

    // The human in the loop (HumanInTheLoop.swift)
    var sendQueue = SendQueue()
    var approvalRules = ApprovalRuleSet()
    /// True while a rewind sends its `tool/undo`s: no turn starts meanwhile.
    var rewindingUndos = false
    /// The session's MCP servers (nil: it names none); see `startMCPServers()`.
    var mcp: MCPServerSet?
    /// `session/resume {startMCPServers: false}` loaded it; nothing started yet.
    var mcpStartDeferred = false

    /// `transcript`: the state a stored or forked session was loaded with (nil: a new, empty one).
    init(id: String, config: SessionConfig, context: EngineContext, transcript: Transcript? = nil, createdAt: Date = Date()) {
        self.id = id
        self.config = config
        self.context = context
        self.createdAt = createdAt
        self.events = SessionEvents(sessionId: id, channel: context.channel, logger: context.logger)
        let transcript = transcript ?? Transcript(properties: config.properties ?? [:], createdAt: createdAt)
        self.transcript = transcript
        // With profiles, the first request activates the initial profile (its
        // onActivate hooks run, profileActivated has no `previous`); a session
        // without profiles has nothing to activate. A loaded session has the
        // profile it last activated.
        if config.profiles == nil {
            self.activeProfile = try? ProfileResolver.resolve(config: config, properties: transcript.properties)
        } else if let name = transcript.activeProfileName {
            let current = try? ProfileResolver.resolve(config: config, properties: transcript.properties, activeSkills: Self.skillNames(transcript.properties))
            self.activeProfile = current?.name == name ? current : nil
        } else {
            self.activeProfile = nil
        }
    }

    // MARK: Read-only views

    /// The profile the current properties select: what the next request will use.
    /// (`activeProfile` lags behind until that request is built, so a property
    /// change between turns must not be reported as the old profile.)
    var activeProfileName: String {
        ProfileResolver.activeProfileName(config: config, properties: properties)
    }

    func handle() -> SessionHandle {
        SessionHandle(sessionId: id, revision: revision, activeProfile: activeProfileName)
    }

    func state() -> SessionState {
        SessionState(
            sessionId: id, isRunning: isRunning, turnId: turnId, currentText: runner?.currentText ?? "",
            activeToolCalls: runner?.activeToolCalls ?? [], pendingConfirmation: runner?.pendingConfirmation,
            lastUsageReport: runner?.lastUsageReport, lastSchemaWarnings: runner?.schemaWarnings ?? [],
            lastContextDiagnostics: runner?.contextDiagnostics ?? [], activeProfile: activeProfileName,
            properties: properties, revision: revision, entryCount: entries.count,
            queuedSends: sendQueue.isEmpty ? nil : sendQueue.count, approvalRules: approvalRules.rules.isEmpty ? nil : approvalRules.rules,
            usageTotals: transcript.usageTotals == Usage() ? nil : transcript.usageTotals)
    }

    func transcriptForClient() -> SessionTranscript {
        let profile = (try? resolveProfile()) ?? activeProfile
        return SessionTranscript(revision: revision, instructions: instructionsText(profile: profile), entries: entries)
    }

    func summary() -> SessionSummary {
        SessionSummary(
            sessionId: id, title: JournalStore.title(config: config, entries: entries), userId: config.userId, model: config.displayModel,
            createdAt: Timestamp.iso8601(createdAt), updatedAt: Timestamp.iso8601(transcript.updatedAt),
            revision: revision, entryCount: entries.count, isRunning: isRunning, loaded: true)
    }

    var updatedAt: Date { transcript.updatedAt }

    // MARK: The store

    /// Makes every committed change durable (docs/protocol.md, "Durable sessions").
    func syncJournal() throws {
        try transcript.sync()
    }

    /// Syncs and releases the journal (close, delete, exit); a long journal is
    /// rewritten as a snapshot first unless it is about to be deleted.
    func closeJournal(deleting: Bool = false) throws {
        let journal = transcript.journal as? any SessionJournal
        defer { transcript.journal = nil }
        do { try transcript.sync() } catch {
            // Not in sync with the state: no snapshot or summary of it.
            journal?.close()
            throw error
        }
        if deleting { journal?.close() } else { journal?.close(final: transcript) }
    }

    /// The state a fork starts from: the entries up to and including `atEntryID`.
    func forkSnapshot(atEntryID: String?) throws -> TranscriptSnapshot {
        if isRunning {
            throw RPCError(.sessionBusy, "a session cannot be forked while a turn is running", data: ["turnId": turnId.map { .string($0) } ?? .null])
        }
        return try Self.forkSnapshot(of: transcript, atEntryID: atEntryID)
    }

    static func forkSnapshot(of transcript: Transcript, atEntryID: String?) throws -> TranscriptSnapshot {
        var snapshot = transcript.snapshot
        if let atEntryID {
            guard let index = snapshot.entries.firstIndex(where: { $0.id == atEntryID }) else {
                throw RPCError.invalidParams("no entry with id '\(atEntryID)'", field: "atEntryId")
            }
            snapshot.entries = Array(snapshot.entries[...index])
        }
        // A new session: its own revision count and usage from zero, and no
        // undo records (a rewind of the fork must not undo the source's calls).
        snapshot.revision = 0
        snapshot.usage = Usage()
        snapshot.committedUndo = []
        snapshot.updatedAt = Date()
        return snapshot
    }

    // MARK: Events

    /// Sends one `session/event` (`SessionEvents`).
    func emit(_ event: SessionEvent, turn: String? = nil) {
        events.emit(event, turn: turn)
    }

    // MARK: Transcript changes that are announced

    /// Appends an entry and announces it (`entryAppended`), in that order.
    @discardableResult
    func append(_ content: TranscriptContent, turn: String?) throws -> TranscriptEntry {
        let entry = try transcript.append(content, turn: turn)
        emit(.entryAppended(entry), turn: turn)
        return entry
    }

    /// Sets and removes properties and announces the change (`propertiesChanged`).
    func setProperties(set: [String: JSONValue], remove: [String]) throws -> SetPropertiesResult {
        let removed = try transcript.setProperties(set: set, remove: remove)
        if !set.isEmpty || !removed.isEmpty {
            emit(.propertiesChanged(set: set, removed: removed))
        }
        return SetPropertiesResult(properties: properties, activeProfile: activeProfileName)
    }

    // MARK: Instructions

    /// Persona and directives: the part of the instructions every profile shares.
    func personaPrefix() -> String {
        var parts: [String] = []
        if let persona = config.role?.persona, !persona.isEmpty { parts.append(persona) }
        if let directives = config.role?.directives, !directives.isEmpty {
            parts.append("Directives:\n" + directives.map { "- \($0)" }.joined(separator: "\n"))
        }
        return parts.isEmpty ? "" : parts.joined(separator: "\n\n") + "\n\n"
    }

    /// The system text for the next request: persona, directives, the active
    /// profile's instructions, and the context sources' latest values.
    func instructionsText(profile: ResolvedProfile?) -> String {
        var parts: [String] = []
        let prefix = personaPrefix()
        if !prefix.isEmpty { parts.append(String(prefix.dropLast(2))) }
        if let instructions = profile?.instructions, !instructions.isEmpty { parts.append(instructions) }
        let sources = (config.contextSources ?? []).compactMap { source -> String? in
            guard let value = lastContextValues[source.name] else { return nil }
            return "## \(source.name)\n\(value)"
        }
        if !sources.isEmpty { parts.append("Context:\n" + sources.joined(separator: "\n\n")) }
        return parts.joined(separator: "\n\n")
    }
}

/// How a confirmation was settled.
struct ConfirmationAnswer: Sendable {
    var decision: ConfirmationDecision
    var source: ConfirmationSource
    var reason: String?
    /// Edited arguments to run the call with (approve decisions), already validated.
    var arguments: JSONValue? = nil
}

enum Timestamp {
    static func iso8601(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }
}
