import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One journal line after the header, as read back.
enum JournalRecord: Sendable {
    /// A change to replay onto the state before it.
    case change(TranscriptChange, at: Date)
    /// The whole state: what came before it no longer matters. (Boxed: a
    /// record is passed along once per line, and a `Transcript` is large.)
    indirect case snapshot(Transcript)
}

/// Why a journal line does not load. The line is not JSON (`syntax`, with the
/// byte in the line where it stops being JSON), or is JSON but not a record
/// this version reads (`record`: a missing member, a member of the wrong
/// type, an unknown record type, a counter out of range).
struct JournalRecordError: Error, Sendable, Equatable, CustomStringConvertible {
    enum Kind: Sendable, Equatable {
        case syntax
        case record
    }

    var kind: Kind
    var message: String
    /// For `syntax`: the byte offset in the line.
    var offset: Int?

    var description: String { offset.map { "\(message) at byte \($0)" } ?? message }
}

/// Reads the records a journal is mostly made of (`turnStarted`,
/// `entryAppended`, `callSent`, `turnEnded`, `snapshot`) from the line's bytes straight
/// into their types, with no `JSONValue` in between except for free-form
/// members (tool arguments and output, properties).
///
/// It takes a line only when it is sure: any other record type, a member name
/// it does not know or that is escaped, a value of another type than the one
/// written, or text that is not JSON makes it decline (throw), and the line
/// goes through `JournalCodec`'s general path, which reads every line and
/// decides alone what loads and what error a line that does not load gives.
/// So this reader must never take a line the general path refuses, nor read
/// one differently; the tests compare the two on every line they load.
struct JournalRecordReader {
    private var p: JSONTextParser

    /// The record types read here (`type` of a line); any other goes the general way.
    private enum RecordType: String {
        case entryAppended, turnStarted, turnEnded, callSent, snapshot
    }

    init(_ line: UnsafeBufferPointer<UInt8>) {
        p = JSONTextParser(line, loneSurrogates: .reject)
    }

    /// A member name as bytes of the line (plain ASCII, no escapes).
    private struct Name {
        var start: Int
        var count: Int
    }

    private func decline() -> JSONParseError { p.fail("not read directly") }

    /// `p.skipWhitespace()`, without the call when the next byte cannot be
    /// whitespace (every JSON whitespace byte is at most 0x20): a journal's
    /// lines have none, and that call into the other module took about 7 % of
    /// loading one (perf, 10,000 entries).
    @inline(__always)
    private mutating func skipSpace() {
        if p.index < p.bytes.count, p.bytes[p.index] > 0x20 { return }
        p.skipWhitespace()
    }

    private var atEnd: Bool { p.index >= p.bytes.count }
    private var current: UInt8 { p.bytes[p.index] }

    // MARK: Records

    mutating func record() throws(JSONParseError) -> JournalRecord {
        try record(
            change: { JournalRecord.change($0, at: $1) },
            append: { JournalRecord.change(.entryAppended($0, nextEntryNumber: $1), at: $2) },
            snapshot: { JournalRecord.snapshot($0) })
    }

    /// Reads the line and hands what it holds to `change`, `append` (an
    /// `entryAppended`: the entry and the counter after it, not wrapped in a
    /// change, which would copy it twice more) or `snapshot` (loading a
    /// journal replays each change at once, which spares copying every record
    /// through a return value). A counter above `JournalCodec.maxCounter`
    /// declines, so the general path reports it.
    mutating func record<R>(
        change: (TranscriptChange, Date) -> R, append: (consuming TranscriptEntry, Int, Date) -> R, snapshot makeSnapshot: (Transcript) -> R
    ) throws(JSONParseError) -> R {
        skipSpace()
        var type: RecordType?
        var at: Int?
        var entry: TranscriptEntry?
        var nextEntry: Int?
        var turnID: String?
        var number: Int?
        var status: TurnEnd.Status?
        var stopReason: StopReason?
        var usage: Usage?
        var undo: UndoOutcome?
        // A snapshot's members.
        var entries: [TranscriptEntry]?
        var revision: Int?
        var properties: [String: JSONValue]?
        var nextTurn: Int?
        var activeProfile: JSONValue?
        var committedUndo: JSONValue?
        var plan: JSONValue?
        var openTurn: JSONValue?
        var updatedAt: Int?
        var callID: String?
        var attempt: Int?
        var arguments: JSONValue?
        var modelPositions: JSONValue?

        try openObject()
        var first = true
        while let name = try nextName(&first) {
            if named(name, "type") {
                // Another record type goes the general way.
                guard let known = try rawValue(recordType) else { throw decline() }
                type = known
            } else if named(name, "at") {
                at = try int()
            } else if named(name, "entry") {
                entry = try self.entry()
            } else if named(name, "nextEntry") {
                nextEntry = try int()
            } else if named(name, "turnId") {
                turnID = try string()
            } else if named(name, "number") {
                number = try int()
            } else if named(name, "status") {
                // An unknown status declines below, as a missing one does.
                status = try rawValue(turnStatus)
            } else if named(name, "stopReason") {
                // What is not one of the known reasons (another string, or not a string) is none.
                stopReason = try rawValueOrNil(self.stopReason)
            } else if named(name, "usage") {
                usage = try self.usage()
            } else if named(name, "undo") {
                undo = try rawValueOrNil(undoOutcome)
            } else if named(name, "entries") {
                entries = try entryArray()
            } else if named(name, "revision") {
                revision = try int()
            } else if named(name, "properties") {
                guard case .object(let o) = try p.parseValue() else { throw decline() }
                properties = o
            } else if named(name, "nextTurn") {
                nextTurn = try int()
            } else if named(name, "activeProfile") {
                activeProfile = try p.parseValue()
            } else if named(name, "committedUndo") {
                committedUndo = try p.parseValue()
            } else if named(name, "plan") {
                plan = try p.parseValue()
            } else if named(name, "openTurn") {
                openTurn = try p.parseValue()
            } else if named(name, "updatedAt") {
                updatedAt = try int()
            } else if named(name, "callId") {
                callID = try string()
            } else if named(name, "attempt") {
                attempt = try int()
            } else if named(name, "arguments") {
                arguments = try p.parseValue()
            } else if named(name, "modelPositions") {
                modelPositions = try p.parseValue()
            } else {
                // Another record type's member, or one this version does not write.
                throw decline()
            }
        }
        skipSpace()
        guard atEnd, let type else { throw decline() }

        let limit = JournalCodec.maxCounter
        if type == .snapshot {
            guard let entries, let revision, let nextEntry, let properties, let nextTurn, let usage, let updatedAt,
                revision <= limit, nextEntry <= limit, nextTurn <= limit
            else { throw decline() }
            do {
                let snapshot = TranscriptSnapshot(
                    entries: entries, revision: revision, nextEntryNumber: nextEntry, properties: properties,
                    activeProfile: activeProfile?.stringValue, nextTurnNumber: nextTurn, usage: usage,
                    committedUndo: try (committedUndo?.arrayValue ?? []).map(JournalCodec.decodeUndo),
                    plan: try plan.map { try $0.decode(as: [PlanEntry].self) },
                    modelPositions: try JournalCodec.positions(modelPositions),
                    updatedAt: JournalCodec.date(millis: updatedAt))
                var transcript = Transcript(snapshot: snapshot)
                if let openTurn { transcript.restoreOpenTurn(try JournalCodec.decodeOpenTurn(openTurn)) }
                return makeSnapshot(transcript)
            } catch {
                throw decline()
            }
        }
        guard let at else { throw decline() }
        let date = JournalCodec.date(millis: at)
        switch type {
        case .entryAppended:
            // Taken out of the local, so the entry is not copied (retained) into the change and released after.
            guard let entry = entry.take(), let nextEntry, nextEntry <= limit else { throw decline() }
            return append(entry, nextEntry, date)
        case .turnStarted:
            guard let turnID, let number, number <= limit else { throw decline() }
            return change(.turnStarted(turnId: turnID, number: number), date)
        case .turnEnded:
            guard let turnID, let status, let usage else { throw decline() }
            return change(.turnEnded(TurnEnd(turnId: turnID, status: status, stopReason: stopReason, usage: usage, undo: undo ?? .none)), date)
        case .callSent:
            // An attempt below 1 is the general path's error to give.
            guard let turnID, let callID, (attempt ?? 1) >= 1 else { throw decline() }
            return change(.callSent(turnId: turnID, callId: callID, attempt: attempt ?? 1, arguments: arguments), date)
        case .snapshot:
            throw decline()
        }
    }

    // MARK: Entries

    private mutating func entryArray() throws(JSONParseError) -> [TranscriptEntry] {
        var entries: [TranscriptEntry] = []
        try openArray()
        var first = true
        while try nextItem(&first) {
            entries.append(try entry())
        }
        return entries
    }

    /// What `TranscriptEntry(json:)` reads, with the same rules.
    private mutating func entry() throws(JSONParseError) -> TranscriptEntry {
        var id: String?
        var turnID: String?
        var type: TranscriptEntryType?
        var text: String?
        var images: JSONValue?
        var profile: String?
        var incomplete = false
        var stopReason: String?
        var signature: String?
        var calls: [ToolCallRecord]?
        var callID: String?
        var toolName: String?
        var outcome: String?
        var content: JSONValue?
        var approved: JSONValue?
        var media: JSONValue?

        try openObject()
        var first = true
        while let name = try nextName(&first) {
            if named(name, "id") {
                id = try string()
            } else if named(name, "turnId") {
                turnID = try optionalString()
            } else if named(name, "type") {
                guard let known = try rawValue(entryType) else { throw decline() }
                type = known
            } else if named(name, "text") {
                text = try optionalString()
            } else if named(name, "profile") {
                profile = try optionalString()
            } else if named(name, "incomplete") {
                switch try p.parseValue() {
                case .null: incomplete = false
                case .bool(let b): incomplete = b
                default: throw decline()
                }
            } else if named(name, "stopReason") {
                stopReason = try optionalString()
            } else if named(name, "signature") {
                signature = try optionalString()
            } else if named(name, "calls") {
                calls = try toolCalls()
            } else if named(name, "callId") {
                callID = try optionalString()
            } else if named(name, "name") {
                toolName = try optionalString()
            } else if named(name, "outcome") {
                outcome = try optionalString()
            } else if named(name, "content") {
                content = try p.parseValue()
            } else if named(name, "approvedArguments") {
                approved = try p.parseValue()
            } else if named(name, "images") {
                images = try p.parseValue()
            } else if named(name, "media") {
                media = try p.parseValue()
            } else {
                // Ignored, as `TranscriptEntry(json:)` ignores it.
                _ = try p.parseValue()
            }
        }
        guard let id, let type else { throw decline() }
        let entryContent: TranscriptContent
        switch type {
        case .prompt:
            guard let text else { throw decline() }
            var attachments: [ImageAttachment]?
            if let images, images != .null {
                guard let decoded = try? images.decode(as: [ImageAttachment].self) else { throw decline() }
                attachments = decoded
            }
            entryContent = .prompt(text: text, images: attachments)
        case .response:
            guard let text else { throw decline() }
            var reason: StopReason?
            if let stopReason {
                guard let known = StopReason(rawValue: stopReason) else { throw decline() }
                reason = known
            }
            entryContent = .response(text: text, profile: profile, incomplete: incomplete, stopReason: reason)
        case .reasoning:
            guard let text else { throw decline() }
            entryContent = .reasoning(text: text, profile: profile, signature: signature)
        case .toolCalls:
            guard let calls else { throw decline() }
            entryContent = .toolCalls(calls: calls, profile: profile, text: text)
        case .toolOutput:
            guard let callID, let toolName, let outcome = outcome.flatMap(ToolOutcome.init(rawValue:)), let content else { throw decline() }
            var references: [MediaReference]?
            if let media, media != .null {
                // Rare and small (a reference per image): the general rules, and their words on failure.
                guard case .array(let items) = media, let decoded = try? items.map({ item throws(JSONDecodingFailure) in try MediaReference(json: item) })
                else { throw decline() }
                references = decoded
            }
            entryContent = .toolOutput(
                callId: callID, name: toolName, outcome: outcome, content: content, profile: profile,
                approvedArguments: approved == .null ? nil : approved, media: references)
        case .summary:
            guard let text else { throw decline() }
            entryContent = .summary(text: text)
        }
        return TranscriptEntry(id: id, turnId: turnID, entryContent)
    }

    private mutating func toolCalls() throws(JSONParseError) -> [ToolCallRecord] {
        var calls: [ToolCallRecord] = []
        try openArray()
        var first = true
        while try nextItem(&first) {
            var callID: String?
            var toolName: String?
            var arguments: JSONValue?
            try openObject()
            var firstMember = true
            while let name = try nextName(&firstMember) {
                if named(name, "callId") {
                    callID = try string()
                } else if named(name, "name") {
                    toolName = try string()
                } else if named(name, "arguments") {
                    arguments = try p.parseValue()
                } else {
                    _ = try p.parseValue()
                }
            }
            guard let callID, let toolName, let arguments else { throw decline() }
            calls.append(ToolCallRecord(callId: callID, name: toolName, arguments: arguments))
        }
        return calls
    }

    /// What `Usage(json:)` reads: absent or `null` counts stay nil.
    private mutating func usage() throws(JSONParseError) -> Usage {
        var usage = Usage()
        try openObject()
        var first = true
        while let name = try nextName(&first) {
            if named(name, "inputTokens") {
                usage.inputTokens = try count()
            } else if named(name, "outputTokens") {
                usage.outputTokens = try count()
            } else if named(name, "cachedInputTokens") {
                usage.cachedInputTokens = try count()
            } else if named(name, "reasoningTokens") {
                usage.reasoningTokens = try count()
            } else if named(name, "contextTokens") {
                usage.contextTokens = try count()
            } else if named(name, "costUSD") {
                // Rare (a priced model) and a fraction: read by the general parser.
                switch try p.parseValue() {
                case .null: usage.costUSD = nil
                case let v: guard let d = v.numberValue, d.isFinite else { throw decline() }; usage.costUSD = d
                }
            } else {
                _ = try p.parseValue()
            }
        }
        return usage
    }

    /// A token count: an integer, or nil for `null`.
    private mutating func count() throws(JSONParseError) -> Int? {
        guard !atEnd else { throw decline() }
        if current == UInt8(ascii: "n") {
            guard try p.parseValue() == .null else { throw decline() }
            return nil
        }
        return try int()
    }

    // MARK: Values

    private mutating func string() throws(JSONParseError) -> String {
        guard !atEnd, current == UInt8(ascii: "\"") else { throw decline() }
        return try p.parseString()
    }

    /// A string, or nil for `null`.
    private mutating func optionalString() throws(JSONParseError) -> String? {
        guard !atEnd else { throw decline() }
        if current == UInt8(ascii: "\"") { return try p.parseString() }
        guard try p.parseValue() == .null else { throw decline() }
        return nil
    }

    /// A number with an integer value (`JSONValue.intValue`'s rule). Plain
    /// integers of up to 18 digits are read here; any other number (a
    /// fraction, an exponent, more digits) goes through the parser's rule.
    private mutating func int() throws(JSONParseError) -> Int {
        let digit = UInt8(ascii: "0")...UInt8(ascii: "9")
        guard !atEnd, current == UInt8(ascii: "-") || digit.contains(current) else { throw decline() }
        let bytes = p.bytes
        var i = p.index
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        let first = i
        var magnitude = 0
        if i < bytes.count, bytes[i] == UInt8(ascii: "0") {
            // JSON has no leading zeros: what follows a 0 is not part of the number.
            i += 1
        } else {
            // Eight digits at a time while all eight are digits (a journal's
            // times have 13): one multiply-add per digit was a chain of about
            // 50 cycles per time, 7 % of loading a journal. At most 18 digits
            // are read either way, so `magnitude` stays below 10^18.
            if let base = bytes.baseAddress {
                while bytes.count - i >= 8, i - first <= 10 {
                    let word = UInt64(littleEndian: UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self))
                    guard let value = Self.eightDigits(word) else { break }
                    magnitude = magnitude * 100_000_000 + value
                    i += 8
                }
            }
            while i < bytes.count, digit.contains(bytes[i]), i - first < 18 {
                magnitude = magnitude * 10 + Int(bytes[i] - UInt8(ascii: "0"))
                i += 1
            }
        }
        let plain = i > first && (i == bytes.count || !(digit.contains(bytes[i]) || bytes[i] == UInt8(ascii: ".") || bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")))
        guard plain else {
            guard let value = try p.parseValue().intValue else { throw decline() }
            return value
        }
        p.index = i
        return negative ? -magnitude : magnitude
    }

    /// The value of eight ASCII digits (the first in the lowest byte), or nil
    /// when any of the eight bytes is not a digit.
    @inline(__always)
    static func eightDigits(_ word: UInt64) -> Int? {
        let nibbles: UInt64 = 0xF0F0_F0F0_F0F0_F0F0
        let threes: UInt64 = 0x3030_3030_3030_3030
        // Every high nibble 3, and still 3 after adding 6 (so no byte above '9'; no carry crosses a byte).
        guard word & nibbles == threes, (word &+ 0x0606_0606_0606_0606) & nibbles == threes else { return nil }
        // Pairs, then fours, then all eight: each step multiplies the higher
        // half by its weight and adds the lower, in every lane at once.
        var w = word & 0x0F0F_0F0F_0F0F_0F0F
        w = (w &* (10 << 8 + 1)) >> 8
        w = ((w & 0x00FF_00FF_00FF_00FF) &* (100 << 16 + 1)) >> 16
        w = ((w & 0x0000_FFFF_0000_FFFF) &* (10_000 << 32 + 1)) >> 32
        return Int(w)
    }

    /// A string member that is one of `T`'s raw values, nil when it is none
    /// of them; not a string declines. `known` recognizes the values written
    /// most from the line's bytes, without making a `String`; any other
    /// string is read and compared by `T(rawValue:)`, so `known` only makes it
    /// faster and never decides.
    @inline(__always)  // specialized for each type and its `known`
    private mutating func rawValue<T: RawRepresentable>(_ known: (Name) -> T?) throws(JSONParseError) -> T? where T.RawValue == String {
        guard !atEnd, current == UInt8(ascii: "\"") else { throw decline() }
        var i = p.index + 1
        while i < p.bytes.count {
            let b = p.bytes[i]
            if b == UInt8(ascii: "\"") {
                let word = Name(start: p.index + 1, count: i - p.index - 1)
                p.index = i + 1
                if let value = known(word) { return value }
                return T(rawValue: String(decoding: UnsafeBufferPointer(rebasing: p.bytes[word.start..<word.start + word.count]), as: UTF8.self))
            }
            // An escape, a control character or a byte of a longer UTF-8 sequence: the parser's rules.
            if b == UInt8(ascii: "\\") || b < 0x20 || b >= 0x80 { break }
            i += 1
        }
        return T(rawValue: try p.parseString())
    }

    /// `rawValue`, but any value that is not a string is nil too (how the
    /// general path reads `stopReason` and `undo` of a `turnEnded`).
    @inline(__always)
    private mutating func rawValueOrNil<T: RawRepresentable>(_ known: (Name) -> T?) throws(JSONParseError) -> T? where T.RawValue == String {
        guard !atEnd else { throw decline() }
        if current == UInt8(ascii: "\"") { return try rawValue(known) }
        _ = try p.parseValue()
        return nil
    }

    // The values `rawValue` recognizes from bytes (a value missing here is still read, more slowly).

    private func recordType(_ w: Name) -> RecordType? {
        if named(w, "entryAppended") { return .entryAppended }
        if named(w, "turnStarted") { return .turnStarted }
        if named(w, "turnEnded") { return .turnEnded }
        if named(w, "callSent") { return .callSent }
        if named(w, "snapshot") { return .snapshot }
        return nil
    }

    private func entryType(_ w: Name) -> TranscriptEntryType? {
        if named(w, "prompt") { return .prompt }
        if named(w, "response") { return .response }
        if named(w, "toolCalls") { return .toolCalls }
        if named(w, "toolOutput") { return .toolOutput }
        if named(w, "reasoning") { return .reasoning }
        return nil
    }

    private func turnStatus(_ w: Name) -> TurnEnd.Status? {
        if named(w, "completed") { return .completed }
        if named(w, "failed") { return .failed }
        if named(w, "cancelled") { return .cancelled }
        return nil
    }

    private func stopReason(_ w: Name) -> StopReason? {
        if named(w, "completed") { return .completed }
        if named(w, "finalAnswer") { return .finalAnswer }
        return nil
    }

    private func undoOutcome(_ w: Name) -> UndoOutcome? {
        if named(w, "none") { return UndoOutcome.none }
        if named(w, "committed") { return .committed }
        return nil
    }

    // MARK: Structure

    private mutating func openObject() throws(JSONParseError) {
        guard !atEnd, current == UInt8(ascii: "{") else { throw decline() }
        try p.enter()
        p.index += 1
    }

    private mutating func openArray() throws(JSONParseError) {
        guard !atEnd, current == UInt8(ascii: "[") else { throw decline() }
        try p.enter()
        p.index += 1
    }

    /// The next member's name, the parser then at its value; nil (and the
    /// object closed) at its end.
    private mutating func nextName(_ first: inout Bool) throws(JSONParseError) -> Name? {
        skipSpace()
        guard !atEnd else { throw decline() }
        if current == UInt8(ascii: "}") {
            p.index += 1
            p.leave()
            return nil
        }
        if first {
            first = false
        } else {
            guard current == UInt8(ascii: ",") else { throw decline() }
            p.index += 1
            skipSpace()
            guard !atEnd else { throw decline() }
        }
        guard current == UInt8(ascii: "\"") else { throw decline() }
        // The scan works on locals: through `p` every byte was a load and a
        // store of the parser's index (about a seventh of loading a journal).
        let bytes = p.bytes
        let start = p.index + 1
        var i = start
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") { break }
            // Escaped, a control character or not ASCII: the general path compares such names.
            guard b &- 0x20 < 0x60, b != UInt8(ascii: "\\") else { throw decline() }
            i += 1
        }
        guard i < bytes.count else { throw decline() }
        let name = Name(start: start, count: i - start)
        p.index = i + 1
        skipSpace()
        guard !atEnd, current == UInt8(ascii: ":") else { throw decline() }
        p.index += 1
        skipSpace()
        return name
    }

    /// Whether there is a next array item (the parser then at it); false (and
    /// the array closed) at its end.
    private mutating func nextItem(_ first: inout Bool) throws(JSONParseError) -> Bool {
        skipSpace()
        guard !atEnd else { throw decline() }
        if current == UInt8(ascii: "]") {
            p.index += 1
            p.leave()
            return false
        }
        if first {
            first = false
        } else {
            guard current == UInt8(ascii: ",") else { throw decline() }
            p.index += 1
            skipSpace()
        }
        return true
    }

    private func named(_ name: Name, _ expected: StaticString) -> Bool {
        guard name.count == expected.utf8CodeUnitCount else { return false }
        let e = expected.utf8Start
        for i in 0..<name.count where p.bytes[name.start + i] != e[i] {
            return false
        }
        return true
    }
}
