import AgentRPCProtocol
import Foundation

/// A committed change to a session's transcript, in the order it happened.
/// `Transcript` hands each one to its journal before the change takes effect,
/// and a journal replays them through `Transcript.replay(_:)`: one definition of
/// what each change does, for the live session and for loading it again.
enum TranscriptChange: Sendable, Equatable {
    /// An entry was appended; `nextEntryNumber` is the counter after it.
    case entryAppended(TranscriptEntry, nextEntryNumber: Int)
    /// The entries were rewritten by `operations` (a client's mutation, a hook's
    /// history edit, or a failed turn's trim or revert); `revision` is the new one.
    case entriesMutated(operations: [TranscriptOperation], revision: Int)
    /// Properties were set and removed (`removed` lists only keys that were present).
    case propertiesChanged(set: [String: JSONValue], removed: [String])
    /// A turn committed with these undo records; they are kept for `session/rewind`.
    case undoRecordsKept([UndoRecord])
    /// A rewind removed these records' calls (and sent or dropped their undos).
    case undoRecordsTaken([UndoRecord])
}

/// Receives every change of a transcript before it takes effect in memory.
/// When `record` throws, the change is not made and the error reaches the
/// caller; the session's store is the one implementation (docs/protocol.md, "Durable sessions").
protocol TranscriptJournal: Sendable {
    func record(_ change: TranscriptChange) throws
}

/// The conversation state of one session: entries with their ids, the
/// revision, the entry counter and the session properties. Every change to
/// them goes through this type (and so through its journal); the session actor
/// owns one and reads it freely.
struct Transcript: Sendable {
    private(set) var entries: [TranscriptEntry] = []
    private var entryIDs: Set<String> = []
    private(set) var revision = 0
    /// The number of the next generated entry id (`e<N>`); ids taken by
    /// client-inserted entries are skipped.
    private(set) var nextEntryNumber = 1
    private(set) var properties: [String: JSONValue]
    /// When the entries last changed.
    private(set) var updatedAt: Date
    /// Undo records of committed turns, oldest first: what `session/rewind` can
    /// still undo. Kept here so a store keeps them with the session.
    private(set) var committedUndo: [UndoRecord] = []
    /// Older records are dropped first beyond this many.
    static let maxCommittedUndoRecords = 1000
    /// Nil without a store.
    var journal: (any TranscriptJournal)?
    /// A change was made that the journal refused (see `mutateEvenIfUnjournaled`).
    private(set) var journalBehind = false

    init(properties: [String: JSONValue], createdAt: Date = Date()) {
        self.properties = properties
        self.updatedAt = createdAt
    }

    var count: Int { entries.count }

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
        while entryIDs.contains("e\(number)") { number += 1 }
        return (TranscriptEntry(id: "e\(number)", turnId: turn, content), number + 1)
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
            guard let working = try? TranscriptOperations.apply(operations, to: entries) else { return }
            journalBehind = true
            try? make(.entriesMutated(operations: operations, revision: revision + 1), mutatedEntries: working, at: Date())
        }
    }

    /// `append` for a failed turn's cleanup (see `mutateEvenIfUnjournaled`).
    mutating func appendEvenIfUnjournaled(_ content: TranscriptContent, turn: String?) -> TranscriptEntry {
        if let entry = try? append(content, turn: turn) { return entry }
        journalBehind = true
        let (entry, next) = freshEntry(content, turn: turn)
        try? make(.entryAppended(entry, nextEntryNumber: next), mutatedEntries: nil, at: Date())
        return entry
    }

    /// Sets and removes properties; returns the removed keys that were present, sorted.
    @discardableResult
    mutating func setProperties(set: [String: JSONValue], remove: [String]) throws -> [String] {
        let removed = Set(remove.filter { properties[$0] != nil }).sorted()
        guard !set.isEmpty || !removed.isEmpty else { return [] }
        try commit(.propertiesChanged(set: set, removed: removed))
        return removed
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
        try journal?.record(change)
        try make(change, mutatedEntries: mutatedEntries, at: Date())
    }

    /// Makes a change without journaling it: for changes read back from a
    /// journal. Throws when a mutation's operations do not apply.
    mutating func replay(_ change: TranscriptChange, at date: Date = Date()) throws {
        try make(change, mutatedEntries: nil, at: date)
    }

    private mutating func make(_ change: TranscriptChange, mutatedEntries: [TranscriptEntry]?, at date: Date) throws {
        switch change {
        case .entryAppended(let entry, let next):
            entries.append(entry)
            entryIDs.insert(entry.id)
            nextEntryNumber = next
            revision += 1
            updatedAt = date
        case .entriesMutated(let operations, let newRevision):
            let working = try mutatedEntries ?? TranscriptOperations.apply(operations, to: entries)
            entries = working
            entryIDs = Set(working.map(\.id))
            revision = newRevision
            updatedAt = date
        case .propertiesChanged(let set, let removed):
            for key in removed { properties.removeValue(forKey: key) }
            for (k, v) in set { properties[k] = v }
        case .undoRecordsKept(let records):
            committedUndo.append(contentsOf: records)
            let excess = committedUndo.count - Self.maxCommittedUndoRecords
            if excess > 0 { committedUndo.removeFirst(excess) }
        case .undoRecordsTaken(let records):
            let taken = Set(records)
            committedUndo.removeAll { taken.contains($0) }
        }
    }
}
