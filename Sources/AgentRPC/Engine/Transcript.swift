import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// A committed change to a session's durable state, in the order it happened.
/// `Transcript` hands each one to its journal before the change takes effect,
/// and a journal replays them through `Transcript.replay(_:)`: one definition of
/// what each change does, for the live session and for loading it again.
enum TranscriptChange: Sendable, Equatable {
    /// An entry was appended; `nextEntryNumber` is the counter after it.
    case entryAppended(TranscriptEntry, nextEntryNumber: Int)
    /// The entries were rewritten by `operations` (a client's mutation, a hook's
    /// history edit, a summary, or a failed turn's trim or revert); `revision` is the new one.
    case entriesMutated(operations: [TranscriptOperation], revision: Int)
    /// Properties were set and removed (`removed` lists only keys that were present).
    case propertiesChanged(set: [String: JSONValue], removed: [String])
    /// A profile became the active one (before a round trip).
    case profileActivated(String)
    /// A turn began; `number` is the one its id was made from.
    case turnStarted(turnId: String, number: Int)
    /// An `ok` tool result of the running turn carried `undo`.
    case undoRecorded(turnId: String, UndoRecord)
    /// A call of the running turn's latest round trip is about to be handed to
    /// its executor (`tool/call`, an MCP server): from here on it may have run.
    /// `attempt`: which send (1 the first); `arguments`: the edited arguments
    /// it is sent with, when the user changed them.
    case callSent(turnId: String, callId: String, attempt: Int = 1, arguments: JSONValue? = nil)
    /// In a session that parks: the user is about to be asked about a call of
    /// the turn's latest round trip (its confirmation, or `ask_user`'s
    /// question); `attempt`: which time. A continued turn asks again with the next.
    case callAsked(turnId: String, callId: String, attempt: Int)
    /// In a session that parks: the call-site options the turn was sent with
    /// (written with its `turnStarted`), so a continued turn runs under them.
    case turnOptions(turnId: String, options: TurnOptions)
    /// In a session that parks: the turn is not a chat turn (written with its
    /// `turnStarted`); a `session/generate` turn is never parked, so one left
    /// open by a crash is recovered as in a session that cancels.
    case turnMode(turnId: String, mode: JournaledTurnMode)
    /// In a session that parks: a client hook that a continued turn would not
    /// come back to (`PendingHook.asksAgain`) is about to be asked;
    /// `hookAnswered` follows once its answer took effect. One asked and not
    /// answered is asked again by `session/continue`.
    case hookAsked(turnId: String, PendingHook)
    case hookAnswered(turnId: String)
    /// In a session that parks: a round trip's answer is journaled (in the
    /// write of its entries), with the turn's usage so far and where the
    /// scripted models are in their scripts, by `ModelPositions.key`.
    case roundTripAnswered(turnId: String, roundTrip: Int, usage: Usage, positions: [String: Int])
    /// A turn ended (any status, `interrupted` included).
    case turnEnded(TurnEnd)
    /// A turn committed with these undo records; they are kept for `session/rewind`.
    case undoRecordsKept([UndoRecord])
    /// A rewind removed these records' calls (and sent or dropped their undos).
    case undoRecordsTaken([UndoRecord])
    /// The model replaced the session's plan (`update_plan`).
    case planUpdated([PlanEntry])
    /// A compaction replaced the entries `removedIDs` by `summary`, which takes the
    /// place of the first of them; `nextEntryNumber` is the counter after it.
    case compacted(summary: TranscriptEntry, removedIDs: [String], nextEntryNumber: Int, revision: Int)
    /// The compaction whose summary is `summaryID` was undone: its entries are back in its place.
    case compactionUndone(summaryID: String, revision: Int)
    /// Usage outside any turn (a `session/compact`'s summary request) joins the totals.
    case usageRecorded(Usage)
}

/// The entries a compaction replaced by its summary, kept (with the session)
/// so that the compaction can be undone.
struct CompactionRecord: Sendable, Equatable {
    var summaryID: String
    var removed: [TranscriptEntry]
}

/// The kinds of turn other than a `session/send` chat turn, as the journal
/// names them (`turnMode`).
enum JournaledTurnMode: String, Sendable, Equatable {
    case generate
}

/// A client hook asked and not answered yet, as `hook/call` carries it.
struct PendingHook: Sendable, Equatable {
    var hook: HookName
    var profile: String
    var payload: JSONValue

    /// The hooks a continued turn would pass by: `onPrompt` (before its first
    /// round trip), `onActivate` (its profile is active already), `onToolOutput`
    /// (its call is completed) and `onResponse` (the answer is journaled).
    /// `onToolCall` runs again with its call, `onDeactivate` with the switch.
    static func asksAgain(_ hook: HookName) -> Bool {
        switch hook {
        case .onPrompt, .onActivate, .onToolOutput, .onResponse: return true
        case .onToolCall, .onDeactivate: return false
        }
    }
}

/// How a turn ended, as the journal keeps it.
struct TurnEnd: Sendable, Equatable {
    enum Status: String, Sendable, Equatable, CaseIterable {
        case completed, failed, cancelled
        /// The process died during the turn; recorded when the session is loaded again.
        case interrupted
    }
    var turnId: String
    var status: Status
    /// The turn's `stopReason` (completed turns).
    var stopReason: StopReason?
    var usage: Usage
    var undo: UndoOutcome
}

/// A turn that started and has not ended.
struct OpenTurn: Sendable, Equatable {
    var id: String
    /// The entries before the turn (the `revert` policy restores them): kept
    /// as a count while the turn only appends, copied only when something
    /// rewrites the entries during the turn. (Copying at every turn start would
    /// make loading a long journal quadratic.)
    var countBefore: Int
    var copiedBefore: [TranscriptEntry]?
    /// Oldest first.
    var undo: [UndoRecord] = []
    /// The calls of the turn's latest `toolCalls` entry that were handed to
    /// their executor (`callSent`): how many times, and the edited arguments
    /// they were sent with. A newer `toolCalls` entry starts it afresh.
    var sends: [String: CallSends] = [:]
    /// Round trips whose answer is journaled, and the turn's usage then
    /// (`roundTripAnswered`, sessions that park).
    var answeredRoundTrips = 0
    var usage = Usage()
    /// How many times the user was asked about each call of the latest
    /// `toolCalls` entry (`callAsked`); a newer entry starts it afresh.
    var asks: [String: Int] = [:]
    /// The call-site options of the send that began it (`turnOptions`).
    var options: TurnOptions?
    /// Nil for a chat turn (`turnMode`).
    var mode: JournaledTurnMode?
    /// A client hook asked and not answered (`hookAsked`, `hookAnswered`).
    var pendingHook: PendingHook?

    init(id: String, entriesBefore: [TranscriptEntry], undo: [UndoRecord] = [], sends: [String: CallSends] = [:]) {
        self.id = id
        self.countBefore = entriesBefore.count
        self.copiedBefore = entriesBefore
        self.undo = undo
        self.sends = sends
    }

    init(id: String, countBefore: Int) {
        self.id = id
        self.countBefore = countBefore
    }

    /// The entries before the turn, given the entries now.
    func entriesBefore(current: [TranscriptEntry]) -> [TranscriptEntry] {
        copiedBefore ?? Array(current.prefix(countBefore))
    }
}

/// How often a call was handed to its executor, and with what edited arguments.
struct CallSends: Sendable, Equatable {
    var count: Int
    var arguments: JSONValue?
}

extension OpenTurn {
    /// Where each call of the turn's latest `toolCalls` entry stands: its
    /// output is recorded (`completed`), it was handed to its executor with no
    /// output recorded (`inDoubt`), or it never was (`notSent`). Empty when the
    /// turn made no calls.
    func callStates(in entries: [TranscriptEntry]) -> [(call: ToolCallRecord, state: CallState)] {
        guard let index = entries.lastIndex(where: { e in
            if case .toolCalls = e.content { return e.turnId == id }
            return false
        }), case .toolCalls(let calls, _, _) = entries[index].content else { return [] }
        // An output answers the nearest unanswered call with its id (docs/turns.md).
        var outputs: [String: Int] = [:]
        for entry in entries[(index + 1)...] {
            if case .toolOutput(let callId, _, _, _, _, _, _) = entry.content { outputs[callId, default: 0] += 1 }
        }
        return calls.map { call in
            if let n = outputs[call.callId], n > 0 {
                outputs[call.callId] = n - 1
                return (call, .completed)
            }
            return (call, sends[call.callId] != nil ? .inDoubt : .notSent)
        }
    }
}

/// Receives every change of a transcript before it takes effect in memory.
/// When `record` throws, the change is not made and the error reaches the
/// caller. The session's journal file is the one implementation
/// (docs/protocol.md, "Durable sessions").
protocol TranscriptJournal: AnyObject, Sendable {
    /// Writes the change (one whole line), not necessarily to stable storage yet.
    func record(_ change: TranscriptChange, at date: Date) throws
    /// Writes the changes all at once (one write), or none of them.
    func record(_ changes: [TranscriptChange], at date: Date) throws
    /// Makes everything recorded so far durable; may compact the journal, given
    /// the state it has recorded.
    func sync(_ state: Transcript) throws
    /// Replaces the journal by one snapshot of `state` (after changes it refused).
    func rewrite(_ state: Transcript) throws
    /// The JSON text of entry `id` when the last record written (one change or
    /// several in one write) appended it: its `entryAppended` event carries the
    /// same text, so the entry is serialized once. Nil otherwise.
    func writtenEntryText(_ id: String) -> ArraySlice<UInt8>?
}

extension TranscriptJournal {
    func writtenEntryText(_ id: String) -> ArraySlice<UInt8>? { nil }

    /// For journals that cannot do better: one change after another.
    func record(_ changes: [TranscriptChange], at date: Date) throws {
        for change in changes { try record(change, at: date) }
    }
}

/// The durable state of one session: entries with their ids, the revision, the
/// entry counter, the session properties, the active profile, the turns and
/// their usage. Every change to them goes through this type (and so through its
/// journal); the session actor owns one and reads it freely.
struct Transcript: Sendable {
    private(set) var entries: [TranscriptEntry] = []
    /// Which ids `entries` take, kept one of two ways. While every id is a
    /// generated one (`e<N>`, as `append` writes it) and N rises from entry to
    /// entry, only the highest N is kept (0 for none) and `takenIDs` is empty:
    /// loading a journal of 10,000 entries then hashes none of their ids. The
    /// first other id (a client's, or one out of order) makes this nil and
    /// `takenIDs` the set of every id.
    private var highestGeneratedID: Int? = 0
    private var takenIDs: Set<String> = []
    private(set) var revision = 0
    /// Names the current run of appends: a new value, unique in the process, is
    /// taken when a transcript is made and whenever its entries are rewritten
    /// (anything but an append). Two reads with the same stamp see the same
    /// entries, the later one possibly with more appended: what lets
    /// `ModelHistoryCache` convert only the new entries.
    private(set) var appendRunStamp = Transcript.newAppendRunStamp()
    private static let lastAppendRunStamp = Mutex<Int>(0)
    private static func newAppendRunStamp() -> Int {
        lastAppendRunStamp.withLock { stamp in
            stamp &+= 1
            return stamp
        }
    }
    /// The number of the next generated entry id (`e<N>`); ids taken by
    /// client-inserted entries are skipped.
    private(set) var nextEntryNumber = 1
    private(set) var properties: [String: JSONValue]
    /// The profile last activated (nil before the first request).
    private(set) var activeProfileName: String?
    /// The number the next turn's id is made from.
    private(set) var nextTurnNumber = 1
    private(set) var openTurn: OpenTurn?
    /// The usage of every turn that ended, summed.
    private(set) var usageTotals = Usage()
    /// Where each scripted model of a session that parks is in its script
    /// (`ModelPositions.key`): a resumed session goes on from there.
    private(set) var modelPositions: [String: Int] = [:]
    /// When anything last changed.
    private(set) var updatedAt: Date
    /// Undo records of committed turns, oldest first: what `session/rewind` can
    /// still undo. Kept here so a store keeps them with the session.
    private(set) var committedUndo: [UndoRecord] = []
    /// The plan the model keeps with `update_plan`; nil before its first call.
    private(set) var plan: [PlanEntry]?
    /// Older records are dropped first beyond this many.
    static let maxCommittedUndoRecords = 1000
    /// The compactions that can still be undone, oldest first.
    private(set) var compactions: [CompactionRecord] = []
    /// Older compactions stop being undoable beyond this many.
    static let maxCompactionRecords = 1000
    /// Nil without a store.
    var journal: (any TranscriptJournal)?
    /// A change was made that the journal refused (see `mutateEvenIfUnjournaled`):
    /// the next change rewrites the journal whole first.
    private(set) var journalBehind = false

    init(properties: [String: JSONValue], createdAt: Date = WallClock.now()) {
        self.properties = properties
        self.updatedAt = createdAt
    }

    /// A state read back from a snapshot.
    init(snapshot: TranscriptSnapshot) {
        entries = snapshot.entries
        revision = snapshot.revision
        nextEntryNumber = snapshot.nextEntryNumber
        properties = snapshot.properties
        activeProfileName = snapshot.activeProfile
        nextTurnNumber = snapshot.nextTurnNumber
        usageTotals = snapshot.usage
        committedUndo = snapshot.committedUndo
        modelPositions = snapshot.modelPositions
        plan = snapshot.plan
        compactions = snapshot.compactions
        updatedAt = snapshot.updatedAt
        indexIDs()
    }

    var count: Int { entries.count }

    /// Room for about `count` entries (a journal being loaded knows its line
    /// count): the array is then not copied as it grows. (The ids need no room
    /// while they are generated ones, see `highestGeneratedID`.)
    mutating func reserveCapacity(entries count: Int) {
        entries.reserveCapacity(count)
    }

    /// A snapshot taken during a turn keeps the turn open.
    mutating func restoreOpenTurn(_ turn: OpenTurn) { openTurn = turn }

    var snapshot: TranscriptSnapshot {
        TranscriptSnapshot(
            entries: entries, revision: revision, nextEntryNumber: nextEntryNumber, properties: properties,
            activeProfile: activeProfileName, nextTurnNumber: nextTurnNumber, usage: usageTotals, committedUndo: committedUndo,
            plan: plan, compactions: compactions, modelPositions: modelPositions, updatedAt: updatedAt)
    }

    // MARK: Changes

    /// Appends an entry under a fresh id.
    @discardableResult
    mutating func append(_ content: TranscriptContent, turn: String?) throws -> TranscriptEntry {
        let (entry, next) = freshEntry(content, turn: turn)
        try commit(.entryAppended(entry, nextEntryNumber: next))
        return entry
    }

    /// The entry `append` would add, and the entry counter after it.
    private func freshEntry(_ content: TranscriptContent, turn: String?) -> (TranscriptEntry, next: Int) {
        var number = nextEntryNumber
        while isTaken(generated: number) { number += 1 }
        return (TranscriptEntry(id: Self.generatedID(number), turnId: turn, content), number + 1)
    }

    /// The entries `operations` would produce, checked for shape; nothing changes.
    func preview(_ operations: [TranscriptOperation]) throws -> [TranscriptEntry] {
        let working = try TranscriptOperations.apply(operations, to: entries)
        try TranscriptShape.check(working)
        return working
    }

    /// Applies `operations` (checked with `preview` first when they came from
    /// outside; pass its result as `result` to save applying them twice). The
    /// revision rises once, and not at all when nothing changed. Returns whether
    /// anything changed.
    @discardableResult
    mutating func mutate(_ operations: [TranscriptOperation], result: [TranscriptEntry]? = nil) throws -> Bool {
        let working = try result ?? TranscriptOperations.apply(operations, to: entries)
        guard working != entries else { return false }
        try commit(.entriesMutated(operations: operations, revision: revision + 1), mutatedEntries: working)
        return true
    }

    /// For a failed turn's cleanup, which must happen whatever the store says:
    /// when the journal refuses the change it is made anyway, and the journal is
    /// marked behind so the next change rewrites it whole.
    mutating func mutateEvenIfUnjournaled(_ operations: [TranscriptOperation]) {
        do { try mutate(operations) } catch {
            guard let working = try? TranscriptOperations.apply(operations, to: entries), working != entries else { return }
            journalBehind = true
            try? make(.entriesMutated(operations: operations, revision: revision + 1), mutatedEntries: working, at: WallClock.now())
        }
    }

    /// `append` for a failed turn's cleanup (see `mutateEvenIfUnjournaled`).
    mutating func appendEvenIfUnjournaled(_ content: TranscriptContent, turn: String?) -> TranscriptEntry {
        if let entry = try? append(content, turn: turn) { return entry }
        journalBehind = true
        let (entry, next) = freshEntry(content, turn: turn)
        try? make(.entryAppended(entry, nextEntryNumber: next), mutatedEntries: nil, at: WallClock.now())
        return entry
    }

    /// Replaces the entries `removedIDs` (each present, in transcript order) by a
    /// `summary` entry under a fresh id, in the place of the first of them: one
    /// revision, journaled with what lets it be undone.
    @discardableResult
    mutating func compact(removing removedIDs: [String], summary text: String) throws -> TranscriptEntry {
        let (summary, next) = freshEntry(.summary(text: text), turn: nil)
        try commit(.compacted(summary: summary, removedIDs: removedIDs, nextEntryNumber: next, revision: revision + 1))
        return summary
    }

    /// The entries once the compaction of `summaryID` is undone; nothing changes.
    /// Nil when no undoable compaction has that summary in the transcript.
    func entriesUndoingCompaction(_ summaryID: String) -> [TranscriptEntry]? {
        guard let record = compactions.last(where: { $0.summaryID == summaryID }),
            let at = entries.firstIndex(where: { $0.id == summaryID })
        else { return nil }
        var working = entries
        working.replaceSubrange(at...at, with: record.removed)
        return working
    }

    /// Puts back the entries the compaction of `summaryID` replaced (check them
    /// with `entriesUndoingCompaction` first).
    mutating func undoCompaction(_ summaryID: String) throws {
        try commit(.compactionUndone(summaryID: summaryID, revision: revision + 1))
    }

    /// The summary in the transcript under which `contains` finds an entry,
    /// directly or under a summary it replaced in turn.
    func summaryHolding(_ contains: (TranscriptEntry) -> Bool) -> String? {
        func holds(_ record: CompactionRecord, depth: Int) -> Bool {
            record.removed.contains { entry in
                if contains(entry) { return true }
                guard depth < Self.maxCompactionRecords, case .summary = entry.content,
                    let inner = compactions.last(where: { $0.summaryID == entry.id })
                else { return false }
                return holds(inner, depth: depth + 1)
            }
        }
        for entry in entries {
            guard case .summary = entry.content, let record = compactions.last(where: { $0.summaryID == entry.id }) else { continue }
            if holds(record, depth: 0) { return entry.id }
        }
        return nil
    }

    /// Usage outside a turn, added to the totals (and, with `contextTokens`, the meter).
    mutating func recordUsage(_ usage: Usage) throws {
        guard usage != Usage() else { return }
        try commit(.usageRecorded(usage))
    }

    /// Sets and removes properties; returns the removed keys that were present, sorted.
    @discardableResult
    mutating func setProperties(set: [String: JSONValue], remove: [String]) throws -> [String] {
        let removed = Set(remove.filter { properties[$0] != nil }).sorted()
        guard !set.isEmpty || !removed.isEmpty else { return [] }
        try commit(.propertiesChanged(set: set, removed: removed))
        return removed
    }

    mutating func activateProfile(_ name: String) throws {
        guard name != activeProfileName else { return }
        try commit(.profileActivated(name))
    }

    /// Begins a turn; returns its number (the session makes the id from it).
    /// `options` and `mode`, when given, are journaled in the same write.
    mutating func beginTurn(options: TurnOptions? = nil, mode: JournaledTurnMode? = nil, id makeID: (Int) -> String) throws -> String {
        try beginTurn(options: options, mode: mode, prompt: nil, id: makeID).id
    }

    /// Begins a turn and appends its `prompt` (as `append` would) in the same
    /// journal write: nothing is announced between the two, so one `write(2)`
    /// serves both, and a store that refuses it has begun no turn.
    mutating func beginTurn(
        options: TurnOptions? = nil, mode: JournaledTurnMode? = nil, prompt: TranscriptContent?, id makeID: (Int) -> String
    ) throws -> (id: String, prompt: TranscriptEntry?) {
        let number = nextTurnNumber
        let id = makeID(number)
        if options == nil && mode == nil && prompt == nil {
            try commit(.turnStarted(turnId: id, number: number))
            return (id, nil)
        }
        var changes: [TranscriptChange] = [.turnStarted(turnId: id, number: number)]
        if let options { changes.append(.turnOptions(turnId: id, options: options)) }
        if let mode { changes.append(.turnMode(turnId: id, mode: mode)) }
        var entry: TranscriptEntry?
        if let prompt {
            let (fresh, next) = freshEntry(prompt, turn: id)
            changes.append(.entryAppended(fresh, nextEntryNumber: next))
            entry = fresh
        }
        let now = WallClock.now()
        try journalFirst { try $0.record(changes, at: now) }
        for change in changes { try make(change, mutatedEntries: nil, at: now) }
        return (id, entry)
    }

    mutating func recordCallAsked(_ callID: String, turn: String, attempt: Int) throws {
        try commit(.callAsked(turnId: turn, callId: callID, attempt: attempt))
    }

    mutating func updatePlan(_ entries: [PlanEntry]) throws {
        try commit(.planUpdated(entries))
    }

    mutating func recordUndo(_ record: UndoRecord, turn: String) throws {
        try commit(.undoRecorded(turnId: turn, record))
    }

    mutating func recordHookAsked(_ hook: PendingHook, turn: String) throws {
        try commit(.hookAsked(turnId: turn, hook))
    }

    mutating func recordHookAnswered(turn: String) throws {
        try commit(.hookAnswered(turnId: turn))
    }

    mutating func recordCallSent(_ callID: String, turn: String, attempt: Int = 1, arguments: JSONValue? = nil) throws {
        try commit(.callSent(turnId: turn, callId: callID, attempt: attempt, arguments: arguments))
    }

    /// Appends a round trip's entries (its reasoning, then its tool calls) and
    /// its `roundTripAnswered` in one journal write: after a crash the answer is
    /// there whole, or the round trip is not.
    mutating func appendAnswer(_ contents: [TranscriptContent], turn: String, answered: TranscriptChange) throws -> [TranscriptEntry] {
        var changes: [TranscriptChange] = []
        var made: [TranscriptEntry] = []
        var next = nextEntryNumber
        for content in contents {
            var number = next
            while isTaken(generated: number) { number += 1 }
            let entry = TranscriptEntry(id: Self.generatedID(number), turnId: turn, content)
            next = number + 1
            made.append(entry)
            changes.append(.entryAppended(entry, nextEntryNumber: next))
        }
        changes.append(answered)
        let now = WallClock.now()
        try journalFirst { try $0.record(changes, at: now) }
        for change in changes { try make(change, mutatedEntries: nil, at: now) }
        return made
    }

    mutating func endTurn(_ end: TurnEnd) throws {
        try commit(.turnEnded(end))
    }

    /// `endTurn` for a failed turn (see `mutateEvenIfUnjournaled`).
    mutating func endTurnEvenIfUnjournaled(_ end: TurnEnd) {
        do { try endTurn(end) } catch {
            journalBehind = true
            try? make(.turnEnded(end), mutatedEntries: nil, at: WallClock.now())
        }
    }

    /// Makes everything committed so far durable (fsync); a no-op without a store.
    mutating func sync() throws {
        guard let journal else { return }
        if journalBehind {
            try journal.rewrite(self)
            journalBehind = false
        }
        try journal.sync(self)
    }

    /// Keeps a committed turn's undo records (the newest `maxCommittedUndoRecords` stay).
    mutating func keepUndoRecords(_ records: [UndoRecord]) throws {
        guard !records.isEmpty else { return }
        try commit(.undoRecordsKept(records))
    }

    /// Takes out the records `matching` selects, oldest first.
    mutating func takeUndoRecords(matching: (UndoRecord) -> Bool) throws -> [UndoRecord] {
        let taken = committedUndo.filter(matching)
        guard !taken.isEmpty else { return [] }
        try commit(.undoRecordsTaken(taken))
        return taken
    }

    /// Journals a change, then makes it.
    private mutating func commit(_ change: TranscriptChange, mutatedEntries: [TranscriptEntry]? = nil) throws {
        let now = WallClock.now()
        try journalFirst { try $0.record(change, at: now) }
        try make(change, mutatedEntries: mutatedEntries, at: now)
    }

    /// Hands changes to the journal (after the rewrite it owes, if any) before they are made.
    private mutating func journalFirst(_ write: (any TranscriptJournal) throws -> Void) throws {
        guard let journal else { return }
        if journalBehind {
            try journal.rewrite(self)
            journalBehind = false
        }
        try write(journal)
    }

    /// Makes a change without journaling it: for changes read back from a
    /// journal. Throws when a change does not fit the state (a mutation whose
    /// operations do not apply).
    mutating func replay(_ change: TranscriptChange, at date: Date) throws {
        try make(change, mutatedEntries: nil, at: date)
    }

    /// `replay(.entryAppended(entry, nextEntryNumber: next), at: date)`
    /// without wrapping the entry in a change: loading a journal hands each
    /// entry it reads here, and each wrapping and unwrapping copies it.
    mutating func replayAppend(_ entry: consuming TranscriptEntry, nextEntryNumber next: Int, at date: Date) throws {
        try appendEntry(entry, next: next)
        updatedAt = date
    }

    private mutating func appendEntry(_ entry: consuming TranscriptEntry, next: Int) throws {
        guard take(entry.id) else { throw ReplayMismatch("entry id '\(entry.id)' is already taken") }
        if openTurn?.sends.isEmpty == false || openTurn?.asks.isEmpty == false, case .toolCalls = entry.content {
            openTurn?.sends = [:]
            openTurn?.asks = [:]
        }
        entries.append(entry)
        nextEntryNumber = next
        revision += 1
    }

    /// Entries rewritten (anything but an append): a running turn keeps a copy
    /// of the entries before it for the `revert` policy.
    private mutating func replaceEntries(_ working: [TranscriptEntry], revision newRevision: Int) {
        if var open = openTurn, open.copiedBefore == nil {
            open.copiedBefore = Array(entries.prefix(open.countBefore))
            openTurn = open
        }
        entries = working
        indexIDs()
        revision = newRevision
        appendRunStamp = Self.newAppendRunStamp()
    }

    private mutating func make(_ change: TranscriptChange, mutatedEntries: [TranscriptEntry]?, at date: Date) throws {
        switch change {
        case .entryAppended(let entry, let next):
            try appendEntry(entry, next: next)
        case .entriesMutated(let operations, let newRevision):
            let working = try mutatedEntries ?? TranscriptOperations.apply(operations, to: entries)
            replaceEntries(working, revision: newRevision)
        case .compacted(let summary, let removedIDs, let next, let newRevision):
            let doomed = Set(removedIDs)
            guard doomed.count == removedIDs.count, let first = entries.firstIndex(where: { doomed.contains($0.id) }) else {
                throw ReplayMismatch("a compaction of entries the transcript does not hold")
            }
            let removed = entries.filter { doomed.contains($0.id) }
            guard removed.count == doomed.count else { throw ReplayMismatch("a compaction of entries the transcript does not hold") }
            var working = entries.filter { !doomed.contains($0.id) }
            guard !working.contains(where: { $0.id == summary.id }) else { throw ReplayMismatch("entry id '\(summary.id)' is already taken") }
            working.insert(summary, at: first)
            replaceEntries(working, revision: newRevision)
            nextEntryNumber = next
            compactions.append(CompactionRecord(summaryID: summary.id, removed: removed))
            let excess = compactions.count - Self.maxCompactionRecords
            if excess > 0 { compactions.removeFirst(excess) }
        case .compactionUndone(let summaryID, let newRevision):
            guard let working = entriesUndoingCompaction(summaryID), let index = compactions.lastIndex(where: { $0.summaryID == summaryID }) else {
                throw ReplayMismatch("no compaction with the summary '\(summaryID)' to undo")
            }
            replaceEntries(working, revision: newRevision)
            compactions.remove(at: index)
        case .usageRecorded(let usage):
            usageTotals.add(usage)
        case .propertiesChanged(let set, let removed):
            for key in removed { properties.removeValue(forKey: key) }
            for (k, v) in set { properties[k] = v }
        case .profileActivated(let name):
            activeProfileName = name
        case .turnStarted(let id, let number):
            openTurn = OpenTurn(id: id, countBefore: entries.count)
            nextTurnNumber = number + 1
        case .undoRecorded(let turnID, let record):
            guard openTurn?.id == turnID else { throw ReplayMismatch("an undo record for turn '\(turnID)', which is not running") }
            openTurn?.undo.append(record)
        case .callSent(let turnID, let callID, let attempt, let arguments):
            guard openTurn?.id == turnID else { throw ReplayMismatch("a call sent in turn '\(turnID)', which is not running") }
            let earlier = openTurn?.sends[callID]?.arguments
            openTurn?.sends[callID] = CallSends(count: attempt, arguments: arguments ?? earlier)
        case .callAsked(let turnID, let callID, let attempt):
            guard openTurn?.id == turnID else { throw ReplayMismatch("a call asked about in turn '\(turnID)', which is not running") }
            openTurn?.asks[callID] = attempt
        case .turnOptions(let turnID, let options):
            guard openTurn?.id == turnID else { throw ReplayMismatch("options of turn '\(turnID)', which is not running") }
            openTurn?.options = options
        case .turnMode(let turnID, let mode):
            guard openTurn?.id == turnID else { throw ReplayMismatch("the mode of turn '\(turnID)', which is not running") }
            openTurn?.mode = mode
        case .hookAsked(let turnID, let hook):
            guard openTurn?.id == turnID else { throw ReplayMismatch("a hook asked in turn '\(turnID)', which is not running") }
            openTurn?.pendingHook = hook
        case .hookAnswered(let turnID):
            guard openTurn?.id == turnID else { throw ReplayMismatch("a hook answered in turn '\(turnID)', which is not running") }
            openTurn?.pendingHook = nil
        case .roundTripAnswered(let turnID, let roundTrip, let usage, let positions):
            guard openTurn?.id == turnID else { throw ReplayMismatch("a round trip of turn '\(turnID)', which is not running") }
            openTurn?.answeredRoundTrips = roundTrip
            openTurn?.usage = usage
            for (model, position) in positions { modelPositions[model] = position }
        case .turnEnded(let end):
            if openTurn?.id == end.turnId { openTurn = nil }
            usageTotals.add(end.usage)
        case .undoRecordsKept(let records):
            committedUndo.append(contentsOf: records)
            let excess = committedUndo.count - Self.maxCommittedUndoRecords
            if excess > 0 { committedUndo.removeFirst(excess) }
        case .undoRecordsTaken(let records):
            let taken = Set(records)
            committedUndo.removeAll { taken.contains($0) }
        case .planUpdated(let entries):
            plan = entries
        }
        updatedAt = date
    }
}

// MARK: Entry ids

extension Transcript {
    /// The id `e<N>` of the `number`th appended entry, written straight into
    /// a string (one is made per entry; an interpolation costs several times as much).
    static func generatedID(_ number: Int) -> String {
        JSONStage.decimal(number, after: UInt8(ascii: "e"))
    }

    /// N of an id `e<N>` written as `append` writes it (N from 1, no sign, no
    /// leading zero, at most 18 digits so it cannot overflow), else nil. Two
    /// different such ids have different numbers.
    fileprivate static func generatedNumber(_ id: String) -> Int? {
        var utf8 = id.utf8.makeIterator()
        guard utf8.next() == UInt8(ascii: "e") else { return nil }
        var number = 0
        var digits = 0
        while let b = utf8.next() {
            guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9"), digits < 18, digits > 0 || b != UInt8(ascii: "0") else { return nil }
            number = number * 10 + Int(b - UInt8(ascii: "0"))
            digits += 1
        }
        return digits > 0 ? number : nil
    }

    /// Whether an entry has the id `e<number>`.
    fileprivate func isTaken(generated number: Int) -> Bool {
        guard let highest = highestGeneratedID else { return takenIDs.contains("e\(number)") }
        guard number <= highest else { return false }
        // The entries' numbers rise: a binary search finds it.
        var low = 0
        var high = entries.count
        while low < high {
            let middle = low + (high - low) / 2
            let found = Self.generatedNumber(entries[middle].id) ?? 0
            if found == number { return true }
            if found < number { low = middle + 1 } else { high = middle }
        }
        return false
    }

    /// Takes `id` for an entry about to be appended; false when an entry has it already.
    fileprivate mutating func take(_ id: String) -> Bool {
        if let highest = highestGeneratedID {
            if let number = Self.generatedNumber(id), number > highest {
                highestGeneratedID = number
                return true
            }
            takenIDs = Set(entries.map(\.id))
            highestGeneratedID = nil
        }
        return takenIDs.insert(id).inserted
    }

    /// Indexes the ids of `entries` anew (after they were replaced).
    fileprivate mutating func indexIDs() {
        var highest = 0
        for entry in entries {
            guard let number = Self.generatedNumber(entry.id), number > highest else {
                highestGeneratedID = nil
                takenIDs = Set(entries.map(\.id))
                return
            }
            highest = number
        }
        highestGeneratedID = highest
        takenIDs = []
    }
}

/// A change read back from a journal that does not fit the state before it.
struct ReplayMismatch: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The whole durable state at one moment: what a compacted journal holds
/// after its first line, and what a fork starts from.
struct TranscriptSnapshot: Sendable, Equatable {
    var entries: [TranscriptEntry]
    var revision: Int
    var nextEntryNumber: Int
    var properties: [String: JSONValue]
    var activeProfile: String?
    var nextTurnNumber: Int
    var usage: Usage
    /// Undo records of committed turns (what `session/rewind` can still undo).
    var committedUndo: [UndoRecord]
    /// The model's plan (`update_plan`), when it made one.
    var plan: [PlanEntry]? = nil
    /// The compactions that can still be undone.
    var compactions: [CompactionRecord] = []
    /// Scripted models' places in their scripts (sessions that park).
    var modelPositions: [String: Int] = [:]
    var updatedAt: Date
}
