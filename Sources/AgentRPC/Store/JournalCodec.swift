import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The journal's line format (docs/protocol.md, "Durable sessions"): a header
/// line, then one JSON object per committed change, each with `type` and `at`
/// (milliseconds since 1970). Writing and reading live side by side here so
/// the two cannot drift.
enum JournalCodec {
    // MARK: Writing

    static func headerLine(_ header: JournalHeader) -> [UInt8] {
        var o: [String: JSONValue] = [
            "type": "session", "format": .int(header.format), "sessionId": .string(header.sessionID),
            "createdAt": .int(millis(header.createdAt)), "config": header.config,
        ]
        if let from = header.forkedFrom { o["forkedFrom"] = .string(from) }
        return line(.object(o))
    }

    static func line(for change: TranscriptChange, at date: Date) throws -> [UInt8] {
        if case .entryAppended(let entry, let next) = change { return entryLine(entry, nextEntryNumber: next, at: date).line }
        if case .callSent(let turnID, let callID, let attempt, let arguments) = change {
            // One per tool call sent: written straight as well, in sorted order.
            var bytes: [UInt8] = []
            bytes.reserveCapacity(96)
            JSONStage.write(into: &bytes) { line in
                if let arguments {
                    line.literal(#"{"arguments":"#)
                    line.value(arguments)
                    line.literal(#","at":"#)
                } else {
                    line.literal(#"{"at":"#)
                }
                line.int(millis(date))
                if attempt != 1 {
                    line.literal(#","attempt":"#)
                    line.int(attempt)
                }
                line.literal(#","callId":"#)
                line.string(callID)
                line.literal(#","turnId":"#)
                line.string(turnID)
                line.literal(#","type":"callSent"}\#n"#)
            }
            return bytes
        }
        // A turn's start and end and each answered round trip: written straight too.
        switch change {
        case .turnStarted(let turnID, let number):
            return directLine(at: date) { o in
                o.int("number", number)
                o.string("turnId", turnID)
                o.string("type", "turnStarted")
            }
        case .roundTripAnswered(let turnID, let roundTrip, let usage, let positions):
            return directLine(at: date) { o in
                o.value("positions", positions.isEmpty ? nil : .object(positions.mapValues { .int($0) }))
                o.int("roundTrip", roundTrip)
                o.string("turnId", turnID)
                o.string("type", "roundTripAnswered")
                o.member("usage") { usage.writeJSON(into: &$0) }
            }
        case .turnEnded(let end):
            return directLine(at: date) { o in
                o.string("status", end.status.rawValue)
                o.string("stopReason", end.stopReason?.rawValue)
                o.string("turnId", end.turnId)
                o.string("type", "turnEnded")
                o.string("undo", end.undo.rawValue)
                o.member("usage") { end.usage.writeJSON(into: &$0) }
            }
        default:
            return line(try record(for: change, at: date))
        }
    }

    /// A record's line whose members after `at` `write` lists in sorted key
    /// order: the bytes `record(for:at:)` serializes to, without its dictionary.
    private static func directLine(at date: Date, _ write: (inout JSONObjectWriter) -> Void) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128)
        JSONObjectWriter.write(into: &bytes) { o in
            o.int("at", millis(date))
            write(&o)
        }
        bytes.append(0x0A)
        return bytes
    }

    /// An appended entry's line, and where in it the entry's JSON text is (its
    /// `entryAppended` event carries the same text). Every entry of every
    /// turn: written straight, members in the sorted order `record` serializes
    /// to, without its dictionary.
    static func entryLine(_ entry: TranscriptEntry, nextEntryNumber next: Int, at date: Date) -> (line: [UInt8], entry: Range<Int>) {
        var bytes: [UInt8] = []
        var range = 0..<0
        JSONStage.write(into: &bytes) { line in
            line.literal(#"{"at":"#)
            line.int(millis(date))
            line.literal(#","entry":"#)
            let start = line.count
            entry.serialize(into: &line)
            range = start..<line.count
            line.literal(#","nextEntry":"#)
            line.int(next)
            line.literal(#","type":"entryAppended"}\#n"#)
        }
        return (bytes, range)
    }

    /// The record of `change` as a value: what `line(for:at:)` writes.
    static func record(for change: TranscriptChange, at date: Date) throws -> JSONValue {
        var o: [String: JSONValue] = ["at": .int(millis(date))]
        switch change {
        case .entryAppended(let entry, let next):
            o["type"] = "entryAppended"
            o["entry"] = entry.json
            o["nextEntry"] = .int(next)
        case .entriesMutated(let operations, let revision):
            o["type"] = "transcriptMutated"
            o["operations"] = try JSONValue(encoding: operations)
            o["revision"] = .int(revision)
        case .propertiesChanged(let set, let removed):
            o["type"] = "propertiesChanged"
            o["set"] = .object(set)
            o["removed"] = .array(removed.map { .string($0) })
        case .profileActivated(let name):
            o["type"] = "profileActivated"
            o["profile"] = .string(name)
        case .turnStarted(let id, let number):
            o["type"] = "turnStarted"
            o["turnId"] = .string(id)
            o["number"] = .int(number)
        case .undoRecorded(let turnID, let record):
            o["type"] = "undoRecorded"
            o["turnId"] = .string(turnID)
            o["record"] = undoJSON(record)
        case .callSent(let turnID, let callID, let attempt, let arguments):
            o["type"] = "callSent"
            o["turnId"] = .string(turnID)
            o["callId"] = .string(callID)
            if attempt != 1 { o["attempt"] = .int(attempt) }
            if let arguments { o["arguments"] = arguments }
        case .callAsked(let turnID, let callID, let attempt):
            o["type"] = "callAsked"
            o["turnId"] = .string(turnID)
            o["callId"] = .string(callID)
            if attempt != 1 { o["attempt"] = .int(attempt) }
        case .turnOptions(let turnID, let options):
            o["type"] = "turnOptions"
            o["turnId"] = .string(turnID)
            o["options"] = try JSONValue(encoding: options)
        case .turnMode(let turnID, let mode):
            o["type"] = "turnMode"
            o["turnId"] = .string(turnID)
            o["mode"] = .string(mode.rawValue)
        case .hookAsked(let turnID, let hook):
            o["type"] = "hookAsked"
            o["turnId"] = .string(turnID)
            o["hook"] = hookJSON(hook)
        case .hookAnswered(let turnID):
            o["type"] = "hookAnswered"
            o["turnId"] = .string(turnID)
        case .roundTripAnswered(let turnID, let roundTrip, let usage, let positions):
            o["type"] = "roundTripAnswered"
            o["turnId"] = .string(turnID)
            o["roundTrip"] = .int(roundTrip)
            o["usage"] = usage.json
            if !positions.isEmpty { o["positions"] = .object(positions.mapValues { .int($0) }) }
        case .undoRecordsKept(let records):
            o["type"] = "undoRecordsKept"
            o["records"] = .array(records.map(undoJSON))
        case .undoRecordsTaken(let records):
            o["type"] = "undoRecordsTaken"
            o["records"] = .array(records.map(undoJSON))
        case .planUpdated(let entries):
            o["type"] = "planUpdated"
            o["entries"] = try JSONValue(encoding: entries)
        case .turnEnded(let end):
            o["type"] = "turnEnded"
            o["turnId"] = .string(end.turnId)
            o["status"] = .string(end.status.rawValue)
            if let reason = end.stopReason { o["stopReason"] = .string(reason.rawValue) }
            o["usage"] = end.usage.json
            o["undo"] = .string(end.undo.rawValue)
        case .compacted(let summary, let removedIDs, let next, let revision):
            o["type"] = "compacted"
            o["entry"] = summary.json
            o["removed"] = .array(removedIDs.map { .string($0) })
            o["nextEntry"] = .int(next)
            o["revision"] = .int(revision)
        case .compactionUndone(let summaryID, let revision):
            o["type"] = "compactionUndone"
            o["summaryId"] = .string(summaryID)
            o["revision"] = .int(revision)
        case .usageRecorded(let usage):
            o["type"] = "usageRecorded"
            o["usage"] = usage.json
        }
        return .object(o)
    }

    static func snapshotLine(_ state: Transcript, at date: Date) throws -> [UInt8] {
        let s = state.snapshot
        var o: [String: JSONValue] = [
            "type": "snapshot", "at": .int(millis(date)), "updatedAt": .int(millis(s.updatedAt)),
            "entries": .array(s.entries.map(\.json)), "revision": .int(s.revision), "nextEntry": .int(s.nextEntryNumber),
            "properties": .object(s.properties), "nextTurn": .int(s.nextTurnNumber), "usage": s.usage.json,
        ]
        if let profile = s.activeProfile { o["activeProfile"] = .string(profile) }
        if !s.committedUndo.isEmpty { o["committedUndo"] = .array(s.committedUndo.map(undoJSON)) }
        if let plan = s.plan { o["plan"] = try JSONValue(encoding: plan) }
        if !s.modelPositions.isEmpty { o["modelPositions"] = .object(s.modelPositions.mapValues { .int($0) }) }
        if !s.compactions.isEmpty {
            o["compactions"] = .array(s.compactions.map { ["summaryId": .string($0.summaryID), "removed": .array($0.removed.map(\.json))] })
        }
        if let open = state.openTurn {
            var turn: [String: JSONValue] = [
                "turnId": .string(open.id), "entriesBefore": .array(open.entriesBefore(current: state.entries).map(\.json)),
                "undo": .array(open.undo.map(undoJSON)),
            ]
            if !open.sends.isEmpty {
                turn["sends"] = .object(open.sends.mapValues { s in
                    var o: [String: JSONValue] = ["count": .int(s.count)]
                    if let arguments = s.arguments { o["arguments"] = arguments }
                    return .object(o)
                })
            }
            if open.answeredRoundTrips > 0 {
                turn["answeredRoundTrips"] = .int(open.answeredRoundTrips)
                turn["usage"] = open.usage.json
            }
            if !open.asks.isEmpty { turn["asks"] = .object(open.asks.mapValues { .int($0) }) }
            if let options = open.options { turn["options"] = try JSONValue(encoding: options) }
            if let mode = open.mode { turn["mode"] = .string(mode.rawValue) }
            if let hook = open.pendingHook { turn["pendingHook"] = hookJSON(hook) }
            o["openTurn"] = .object(turn)
        }
        return line(.object(o))
    }

    private static func hookJSON(_ h: PendingHook) -> JSONValue {
        ["hook": .string(h.hook.rawValue), "profile": .string(h.profile), "payload": h.payload]
    }

    private static func decodeHook(_ value: JSONValue) throws -> PendingHook {
        let name = try field(value, "hook", \.stringValue)
        guard let hook = HookName(rawValue: name) else { throw Malformed(description: "'hook' is not a hook: '\(name)'") }
        return PendingHook(hook: hook, profile: try field(value, "profile", \.stringValue), payload: try field(value, "payload") { $0 })
    }

    private static func undoJSON(_ r: UndoRecord) -> JSONValue {
        ["turnId": .string(r.turnId), "callId": .string(r.callId), "name": .string(r.name), "undo": r.undo]
    }

    private static func line(_ value: JSONValue) -> [UInt8] {
        var bytes = value.serialized()
        bytes.append(0x0A)
        return bytes
    }

    /// Whole milliseconds, cut down as `updatedAt` is shown (RFC 3339 with
    /// milliseconds), so a time read back from a journal shows the same. A time
    /// within a microsecond below a boundary counts as the boundary: a `Date`
    /// made for a whole millisecond (parsed, or read back) can come back a few
    /// ulps below it (about 0.2 µs here), and must not lose that millisecond.
    static func millis(_ date: Date) -> Int {
        let ms = (date.timeIntervalSince1970 * 1000 + 0.001).rounded(.down)
        return ms.isFinite && abs(ms) < 1e15 ? Int(ms) : 0
    }

    /// The middle of millisecond `millis`: a `Date` keeps seconds since 2001 as a
    /// `Double`, so the exact boundary can come back a hair below it, and cutting it
    /// down (`millis`, the RFC 3339 text) would then lose a millisecond (a session's
    /// `updatedAt` read back from its journal showed 1 ms earlier than when loaded).
    static func date(millis: Int) -> Date { Date(timeIntervalSince1970: (Double(millis) + 0.5) / 1000) }

    // MARK: Reading

    /// Rebuilds a session from a journal's bytes. The first line must be a
    /// header this version understands (else `journalUnreadable`); a last line
    /// without its newline is torn and ignored; the first line that does not
    /// load stops loading there, with a warning.
    static func load(_ bytes: [UInt8]) throws -> JournalContents {
        try bytes.withUnsafeBufferPointer { buffer in
            var lines = JournalBufferLines(buffer)
            return try load(&lines, byteCount: buffer.count)
        }
    }

    /// `byteCount`: the journal's size, for an estimate of its entries.
    static func load(_ lines: inout some JournalLineSource, byteCount: Int) throws -> JournalContents {
        guard let first = try lines.next() else {
            throw RPCError(.journalUnreadable, "the journal has no complete first line")
        }
        let header = try decodeHeader(first)
        let config: SessionConfig
        do { config = try header.config.decode(as: SessionConfig.self) } catch {
            throw RPCError(.journalUnreadable, "the session configuration in the journal's first line does not load: \(error)")
        }
        var transcript = Transcript(properties: config.properties ?? [:], createdAt: header.createdAt)
        // Room for the entries, so appending never copies them: a turn's four
        // lines (start, prompt, response, end) take at least 160 bytes for
        // two entries. Space reserved and never written costs no memory.
        transcript.reserveCapacity(entries: min(byteCount / 80, 1 << 17))
        var warnings: [JournalWarning] = []
        var validLength = lines.consumed
        var records = 0
        var lineNumber = 1
        while let line = try lines.next() {
            lineNumber += 1
            if line.isEmpty { continue }
            do {
                // The common records are replayed as they are read; a line the
                // direct reader declines goes the general way (see `decodeRecord`).
                var reader = JournalRecordReader(line)
                var replayFailure: (any Error)?
                let direct = try? reader.record(
                    change: { change, at -> Bool in
                        do { try transcript.replay(change, at: at) } catch { replayFailure = error }
                        return false
                    },
                    append: { entry, next, at -> Bool in
                        do { try transcript.replayAppend(entry, nextEntryNumber: next, at: at) } catch { replayFailure = error }
                        return false
                    },
                    snapshot: { state -> Bool in
                        transcript = state
                        return true
                    })
                if let replayFailure { throw replayFailure }
                let isSnapshot: Bool
                if let direct {
                    isSnapshot = direct
                } else {
                    let record = try decodeRecordInGeneral(line)
                    try checkCounters(record)
                    switch record {
                    case .snapshot(let state):
                        transcript = state
                        isSnapshot = true
                    case .change(let change, let at):
                        try transcript.replay(change, at: at)
                        isSnapshot = false
                    }
                }
                records = isSnapshot ? 0 : records + 1
            } catch {
                var rest = 0
                while try lines.next() != nil { rest += 1 }
                warnings.append(JournalWarning(
                    line: lineNumber,
                    message: "line \(lineNumber) of the journal could not be loaded (\(error)); the session is loaded as it was before it"
                        + (rest > 0 ? ", and the \(rest) line(s) after it were not loaded" : "")))
                break
            }
            validLength = lines.consumed
        }
        return JournalContents(
            header: header, config: config, transcript: transcript, warnings: warnings, tornBytes: lines.rest, validLength: validLength,
            fileLength: lines.consumed + lines.rest, recordsSinceSnapshot: records)
    }

    /// Counters above this are refused: the state adds to them (the next
    /// entry, turn and revision), which must never overflow, and clients read
    /// them as JSON numbers, exact up to 2^53.
    static let maxCounter = 1 << 53

    /// One record line (after the header) as its record type. The records a
    /// journal is mostly made of are read straight from the bytes
    /// (`JournalRecordReader`); any line that reader declines goes through the
    /// general path here, which alone decides what loads and why a line does
    /// not, so both read every line alike.
    static func decodeRecord(_ line: UnsafeBufferPointer<UInt8>) throws(JournalRecordError) -> JournalRecord {
        var reader = JournalRecordReader(line)
        let record: JournalRecord
        if let direct = try? reader.record() {
            record = direct
        } else {
            record = try decodeRecordInGeneral(line)
        }
        try checkCounters(record)
        return record
    }

    static func decodeRecord(_ line: [UInt8]) throws(JournalRecordError) -> JournalRecord {
        try line.withUnsafeBufferPointer { buffer throws(JournalRecordError) in try decodeRecord(buffer) }
    }

    /// The general path of `decodeRecord`: the line parsed into its members, then read.
    static func decodeRecordInGeneral(_ line: UnsafeBufferPointer<UInt8>) throws(JournalRecordError) -> JournalRecord {
        let value: JSONMembers
        do { value = try JSONValue.parseMembers(line) } catch {
            throw JournalRecordError(kind: .syntax, message: error.message, offset: error.offset)
        }
        do {
            let type = try field(value, "type", \.stringValue)
            if type == "snapshot" { return .snapshot(try decodeSnapshot(value)) }
            let (change, at) = try decodeChange(value, type: type)
            return .change(change, at: at)
        } catch {
            throw JournalRecordError(kind: .record, message: "\(error)")
        }
    }

    static func checkCounters(_ record: JournalRecord) throws(JournalRecordError) {
        func check(_ name: String, _ value: Int) throws(JournalRecordError) {
            if value > maxCounter { throw JournalRecordError(kind: .record, message: "'\(name)' is larger than \(maxCounter)") }
        }
        switch record {
        case .change(.entryAppended(_, let next), _): try check("nextEntry", next)
        case .change(.entriesMutated(_, let revision), _), .change(.compactionUndone(_, let revision), _): try check("revision", revision)
        case .change(.compacted(_, _, let next, let revision), _):
            try check("nextEntry", next)
            try check("revision", revision)
        case .change(.turnStarted(_, let number), _): try check("number", number)
        case .change: break
        case .snapshot(let t):
            try check("revision", t.revision)
            try check("nextEntry", t.nextEntryNumber)
            try check("nextTurn", t.nextTurnNumber)
        }
    }

    static func decodeHeader<Bytes: Collection>(_ bytes: Bytes) throws -> JournalHeader where Bytes.Element == UInt8 {
        guard let value = try? JSONValue.parse(bytes), value["type"]?.stringValue == "session",
            let format = value["format"]?.intValue, let id = value["sessionId"]?.stringValue,
            let created = value["createdAt"]?.intValue, let config = value["config"], config.objectValue != nil
        else {
            throw RPCError(.journalUnreadable, "the journal's first line is not a session header")
        }
        if format > JournalHeader.formatVersion {
            throw RPCError(.journalUnreadable, "the journal is in format version \(format); this agentrpc reads format version \(JournalHeader.formatVersion) and older. Use a newer agentrpc.", data: [
                "formatVersion": .int(format), "supportedVersion": .int(JournalHeader.formatVersion),
            ])
        }
        return JournalHeader(format: format, sessionID: id, createdAt: date(millis: created), config: config, forkedFrom: value["forkedFrom"]?.stringValue)
    }

    private struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    private static func field<T>(_ value: some MemberLookup, _ key: String, _ get: (JSONValue) -> T?) throws -> T {
        guard let member = value[key], let typed = get(member) else { throw Malformed(description: "'\(key)' is missing or has the wrong type") }
        return typed
    }

    private static func decodeChange(_ value: JSONMembers, type: String) throws -> (TranscriptChange, Date) {
        let at = date(millis: try field(value, "at", \.intValue))
        switch type {
        case "entryAppended":
            let entry = try TranscriptEntry(json: try field(value, "entry") { $0 })
            return (.entryAppended(entry, nextEntryNumber: try field(value, "nextEntry", \.intValue)), at)
        case "transcriptMutated":
            let operations = try field(value, "operations") { $0 }.decode(as: [TranscriptOperation].self)
            return (.entriesMutated(operations: operations, revision: try field(value, "revision", \.intValue)), at)
        case "propertiesChanged":
            let removed = try field(value, "removed", \.arrayValue).compactMap(\.stringValue)
            return (.propertiesChanged(set: try field(value, "set", \.objectValue), removed: removed), at)
        case "profileActivated":
            return (.profileActivated(try field(value, "profile", \.stringValue)), at)
        case "turnStarted":
            return (.turnStarted(turnId: try field(value, "turnId", \.stringValue), number: try field(value, "number", \.intValue)), at)
        case "undoRecorded":
            return (.undoRecorded(turnId: try field(value, "turnId", \.stringValue), try decodeUndo(try field(value, "record") { $0 })), at)
        case "callSent":
            return (.callSent(
                turnId: try field(value, "turnId", \.stringValue), callId: try field(value, "callId", \.stringValue), attempt: try attempt(value),
                arguments: value["arguments"]), at)
        case "callAsked":
            return (.callAsked(
                turnId: try field(value, "turnId", \.stringValue), callId: try field(value, "callId", \.stringValue),
                attempt: try attempt(value)), at)
        case "turnOptions":
            return (.turnOptions(turnId: try field(value, "turnId", \.stringValue), options: try field(value, "options") { $0 }.decode(as: TurnOptions.self)), at)
        case "hookAsked":
            return (.hookAsked(turnId: try field(value, "turnId", \.stringValue), try decodeHook(try field(value, "hook") { $0 })), at)
        case "hookAnswered":
            return (.hookAnswered(turnId: try field(value, "turnId", \.stringValue)), at)
        case "turnMode":
            let name = try field(value, "mode", \.stringValue)
            guard let mode = JournaledTurnMode(rawValue: name) else { throw Malformed(description: "'mode' is not a kind of turn: '\(name)'") }
            return (.turnMode(turnId: try field(value, "turnId", \.stringValue), mode: mode), at)
        case "roundTripAnswered":
            return (.roundTripAnswered(
                turnId: try field(value, "turnId", \.stringValue), roundTrip: try field(value, "roundTrip", \.intValue),
                usage: try Usage(json: try field(value, "usage") { $0 }), positions: try positions(value["positions"])), at)
        case "undoRecordsKept":
            return (.undoRecordsKept(try field(value, "records", \.arrayValue).map(decodeUndo)), at)
        case "undoRecordsTaken":
            return (.undoRecordsTaken(try field(value, "records", \.arrayValue).map(decodeUndo)), at)
        case "planUpdated":
            return (.planUpdated(try field(value, "entries") { $0 }.decode(as: [PlanEntry].self)), at)
        case "turnEnded":
            guard let status = TurnEnd.Status(rawValue: try field(value, "status", \.stringValue)) else {
                throw Malformed(description: "unknown turn status")
            }
            let end = TurnEnd(
                turnId: try field(value, "turnId", \.stringValue), status: status,
                stopReason: value["stopReason"]?.stringValue.flatMap(StopReason.init(rawValue:)),
                usage: try Usage(json: try field(value, "usage") { $0 }),
                undo: value["undo"]?.stringValue.flatMap(UndoOutcome.init(rawValue:)) ?? .none)
            return (.turnEnded(end), at)
        case "compacted":
            let summary = try TranscriptEntry(json: try field(value, "entry") { $0 })
            let removed = try field(value, "removed", \.arrayValue).map { id in
                guard let id = id.stringValue else { throw Malformed(description: "'removed' holds a non-string") }
                return id
            }
            return (.compacted(summary: summary, removedIDs: removed, nextEntryNumber: try field(value, "nextEntry", \.intValue),
                               revision: try field(value, "revision", \.intValue)), at)
        case "compactionUndone":
            return (.compactionUndone(summaryID: try field(value, "summaryId", \.stringValue), revision: try field(value, "revision", \.intValue)), at)
        case "usageRecorded":
            return (.usageRecorded(try Usage(json: try field(value, "usage") { $0 })), at)
        default:
            throw Malformed(description: "unknown record type '\(type)'")
        }
    }

    static func decodeUndo(_ value: JSONValue) throws -> UndoRecord {
        UndoRecord(
            turnId: try field(value, "turnId", \.stringValue), callId: try field(value, "callId", \.stringValue),
            name: try field(value, "name", \.stringValue), undo: try field(value, "undo") { $0 })
    }

    private static func decodeSnapshot(_ value: JSONMembers) throws -> Transcript {
        let snapshot = TranscriptSnapshot(
            entries: try field(value, "entries", \.arrayValue).map(TranscriptEntry.init(json:)),
            revision: try field(value, "revision", \.intValue), nextEntryNumber: try field(value, "nextEntry", \.intValue),
            properties: try field(value, "properties", \.objectValue), activeProfile: value["activeProfile"]?.stringValue,
            nextTurnNumber: try field(value, "nextTurn", \.intValue), usage: try Usage(json: try field(value, "usage") { $0 }),
            committedUndo: try (value["committedUndo"]?.arrayValue ?? []).map(decodeUndo),
            plan: try value["plan"].map { try $0.decode(as: [PlanEntry].self) },
            compactions: try (value["compactions"]?.arrayValue ?? []).map { record in
                CompactionRecord(
                    summaryID: try field(record, "summaryId", \.stringValue),
                    removed: try field(record, "removed", \.arrayValue).map(TranscriptEntry.init(json:)))
            },
            modelPositions: try positions(value["modelPositions"]),
            updatedAt: date(millis: try field(value, "updatedAt", \.intValue)))
        var transcript = Transcript(snapshot: snapshot)
        if let open = value["openTurn"] { transcript.restoreOpenTurn(try decodeOpenTurn(open)) }
        return transcript
    }

    /// A record's `attempt` (absent: the first).
    private static func attempt(_ value: JSONMembers) throws -> Int {
        guard let a = value["attempt"] else { return 1 }
        guard let n = a.intValue, n >= 1 else { throw Malformed(description: "'attempt' is not a positive integer") }
        return n
    }

    /// A snapshot's `openTurn`.
    static func decodeOpenTurn(_ open: JSONValue) throws -> OpenTurn {
        let turnID = try field(open, "turnId", \.stringValue)
        let before = try field(open, "entriesBefore", \.arrayValue).map(TranscriptEntry.init(json:))
        let undo = try field(open, "undo", \.arrayValue).map(decodeUndo)
        // `sentCalls` (each sent once) is what the first version wrote.
        var sends: [String: CallSends] = [:]
        for id in open["sentCalls"]?.arrayValue ?? [] {
            guard let id = id.stringValue else { throw Malformed(description: "'sentCalls' holds a value that is not a string") }
            sends[id] = CallSends(count: 1)
        }
        if let members = open["sends"] {
            guard let members = members.objectValue else { throw Malformed(description: "'sends' is not an object") }
            for (id, s) in members { sends[id] = CallSends(count: try field(s, "count", \.intValue), arguments: s["arguments"]) }
        }
        var turn = OpenTurn(id: turnID, entriesBefore: before, undo: undo, sends: sends)
        if let answered = open["answeredRoundTrips"] {
            guard let n = answered.intValue else { throw Malformed(description: "'answeredRoundTrips' is not an integer") }
            turn.answeredRoundTrips = n
            turn.usage = try Usage(json: try field(open, "usage") { $0 })
        }
        if let asks = open["asks"] {
            guard let members = asks.objectValue else { throw Malformed(description: "'asks' is not an object") }
            turn.asks = try members.mapValues { v in
                guard let n = v.intValue else { throw Malformed(description: "'asks' holds a value that is not an integer") }
                return n
            }
        }
        if let options = open["options"] { turn.options = try options.decode(as: TurnOptions.self) }
        if let hook = open["pendingHook"] { turn.pendingHook = try decodeHook(hook) }
        if let name = open["mode"] {
            guard let mode = name.stringValue.flatMap(JournaledTurnMode.init(rawValue:)) else { throw Malformed(description: "'mode' is not a kind of turn") }
            turn.mode = mode
        }
        return turn
    }

    /// A `positions` / `modelPositions` object (absent: none).
    static func positions(_ value: JSONValue?) throws -> [String: Int] {
        guard let value else { return [:] }
        guard let members = value.objectValue else { throw Malformed(description: "'positions' is not an object") }
        return try members.mapValues { v in
            guard let n = v.intValue else { throw Malformed(description: "'positions' holds a value that is not an integer") }
            return n
        }
    }
}

/// What a journal record's members are read from: a record line (its members
/// as parsed, see `JSONValue.parseMembers`) or an object nested in one.
private protocol MemberLookup {
    subscript(key: String) -> JSONValue? { get }
}

extension JSONValue: MemberLookup {}
extension JSONMembers: MemberLookup {}
