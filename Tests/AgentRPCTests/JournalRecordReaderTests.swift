import AgentRPCProtocol
import Foundation
import Synchronization
import Testing

@testable import AgentRPC

/// The journal's record decoder: lines read straight from bytes
/// (`JournalRecordReader`) must read exactly as the general path reads them,
/// and hostile lines give a `JournalRecordError`, never a trap.
@Suite struct JournalRecordReaderTests {
    private static let at = Date(timeIntervalSince1970: 1_700_000_000.123)

    /// An entry's record is written without building its dictionary: the same
    /// bytes as the record's value serialized.
    @Test func anEntryLineIsItsRecordSerialized() throws {
        for (i, entry) in Self.entries.enumerated() {
            let change = TranscriptChange.entryAppended(entry, nextEntryNumber: i + 2)
            #expect(try JournalCodec.line(for: change, at: Self.at) == (try JournalCodec.record(for: change, at: Self.at)).serialized() + [0x0A])
        }
    }

    /// A call's send is written directly too (one per tool call): the same
    /// bytes as its record serialized, with and without its optional members.
    @Test func aCallSentLineIsItsRecordSerialized() throws {
        let changes: [TranscriptChange] = [
            .callSent(turnId: "t-1", callId: "c1"),
            .callSent(turnId: "t \"2\"", callId: "c/é", attempt: 3),
            .callSent(turnId: "t-1", callId: "c1", arguments: ["path": "/b", "n": [1, nil, true]]),
            .callSent(turnId: "t-1", callId: "c1", attempt: 2, arguments: [:]),
        ]
        for change in changes {
            #expect(try JournalCodec.line(for: change, at: Self.at) == (try JournalCodec.record(for: change, at: Self.at)).serialized() + [0x0A])
        }
    }

    /// Entry and call lines written through the stage (a 1 KB buffer on the
    /// stack) with text that crosses it: escapes, multi-byte text, empty and
    /// huge arguments, arguments that are not an object. Each is its record
    /// serialized (JSONStageTests pins that against a plain writer), and the
    /// range an entry line hands back is the entry's own text.
    @Test func linesWithOddAndLongTextAreTheirRecordsSerialized() throws {
        let texts = ["", "\u{1}\"\\\n", String(repeating: "é🙂", count: 170), String(repeating: "a", count: 1_019),
                     String(repeating: "\u{1F}", count: 171), String(repeating: "x\"", count: 60_000)]
        let arguments: [JSONValue] = [[:], [], "text", 42, nil, ["i": 0], .string(texts[5]), ["t": .array(texts.map { .string($0) })]]
        for (n, argument) in arguments.enumerated() {
            let text = texts[n % texts.count]
            let entries = [
                TranscriptEntry(id: "e\(n)", turnId: text, .toolCalls(calls: [ToolCallRecord(callId: text, name: "n", arguments: argument)], profile: text, text: nil)),
                TranscriptEntry(id: text, turnId: "t", .toolOutput(callId: "c", name: text, outcome: .ok, content: argument, profile: nil, approvedArguments: argument)),
                TranscriptEntry(id: "p", turnId: nil, .prompt(text: text, images: nil)),
            ]
            for entry in entries {
                let change = TranscriptChange.entryAppended(entry, nextEntryNumber: n)
                let line = try JournalCodec.line(for: change, at: Self.at)
                #expect(line == (try JournalCodec.record(for: change, at: Self.at)).serialized() + [0x0A], "entry \(n)")
                let (written, range) = JournalCodec.entryLine(entry, nextEntryNumber: n, at: Self.at)
                var alone: [UInt8] = []
                entry.serialize(into: &alone)
                #expect(written == line && Array(written[range]) == alone, "entry \(n)")
            }
            for change in [TranscriptChange.callSent(turnId: text, callId: text, attempt: n + 1, arguments: argument), .callSent(turnId: "t", callId: text)] {
                #expect(try JournalCodec.line(for: change, at: Self.at) == (try JournalCodec.record(for: change, at: Self.at)).serialized() + [0x0A], "call \(n)")
            }
        }
    }

    /// A turn's start and end and each answered round trip are written directly:
    /// the same bytes as their records serialized.
    @Test func aTurnsOwnLinesAreTheirRecordsSerialized() throws {
        let changes: [TranscriptChange] = [
            .turnStarted(turnId: "t-1", number: 1),
            .turnStarted(turnId: "t \"2\"", number: 42),
            .roundTripAnswered(turnId: "t-1", roundTrip: 1, usage: Usage(), positions: [:]),
            .roundTripAnswered(
                turnId: "t-1", roundTrip: 3, usage: Usage(inputTokens: 10, outputTokens: 2, contextTokens: 12, costUSD: 0.5),
                positions: ["openai:m": 4, "scripted": 1]),
            .turnEnded(TurnEnd(turnId: "t-1", status: .completed, stopReason: nil, usage: Usage(), undo: .none)),
            .turnEnded(TurnEnd(turnId: "t-1", status: .completed, stopReason: .maxTokens, usage: Usage(inputTokens: 1, cachedInputTokens: 7), undo: .committed)),
            .turnEnded(TurnEnd(turnId: "t-1", status: .interrupted, stopReason: nil, usage: Usage(reasoningTokens: 3), undo: .rolledBack)),
        ]
        for change in changes {
            #expect(try JournalCodec.line(for: change, at: Self.at) == (try JournalCodec.record(for: change, at: Self.at)).serialized() + [0x0A])
        }
    }

    /// One entry of each kind.
    private static var entries: [TranscriptEntry] {
        let turn = "t-1"
        return [
            TranscriptEntry(id: "e1", turnId: turn, .prompt(text: "Hello \"quoted\"\n\tand é ✓ 😀", images: [.url("https://example.com/a.png")])),
            TranscriptEntry(id: "e2", turnId: turn, .reasoning(text: "thinking", profile: "default", signature: "sig")),
            TranscriptEntry(id: "e3", turnId: turn, .toolCalls(
                calls: [ToolCallRecord(callId: "c1", name: "read", arguments: ["path": "/a", "n": 3, "deep": [["x": [1.5, nil, true]]]])],
                profile: "default", text: "calling")),
            TranscriptEntry(id: "e4", turnId: turn, .toolOutput(
                callId: "c1", name: "read", outcome: .ok, content: ["lines": ["a", "b"]], profile: nil, approvedArguments: ["path": "/b"])),
            TranscriptEntry(id: "e5", turnId: turn, .toolOutput(callId: "c2", name: "x", outcome: .denied, content: nil, profile: "p", approvedArguments: nil)),
            TranscriptEntry(id: "e6", turnId: turn, .response(text: "cut", profile: "default", incomplete: true, stopReason: .maxTokens)),
            TranscriptEntry(id: "e7", turnId: nil, .response(text: "", profile: nil, incomplete: false)),
            TranscriptEntry(id: "e8", turnId: turn, .toolOutput(
                callId: "c3", name: "shot", outcome: .ok, content: [["type": "image", "mimeType": "image/png", "note": "8 bytes of base64 image data not shown"]],
                profile: nil, media: [MediaReference(type: .image, mimeType: "image/png", sha256: String(repeating: "ab", count: 32), size: 6)])),
        ]
    }

    /// Lines as the store writes them, one of each kind of record and entry.
    private static func writtenLines() throws -> [String] {
        let turn = "t-1"
        let entries = Self.entries
        let undo = UndoRecord(turnId: turn, callId: "c1", name: "write", undo: ["restore": "old"])
        var changes: [TranscriptChange] = [.turnStarted(turnId: turn, number: 1)]
        for (i, e) in entries.enumerated() { changes.append(.entryAppended(e, nextEntryNumber: i + 2)) }
        changes += [
            .undoRecorded(turnId: turn, undo),
            .callSent(turnId: turn, callId: "c1"),
            .callSent(turnId: turn, callId: "call \"é\""),
            .callSent(turnId: turn, callId: "c1", attempt: 3, arguments: ["path": "/edited"]),
            .roundTripAnswered(turnId: turn, roundTrip: 2, usage: Usage(inputTokens: 9), positions: ["inline-ab": 4, "named": 1]),
            .roundTripAnswered(turnId: turn, roundTrip: 1, usage: Usage(), positions: [:]),
            .turnMode(turnId: turn, mode: .generate),
            .hookAsked(turnId: turn, PendingHook(hook: .onToolOutput, profile: "main", payload: ["callId": "c1", "content": "é"])),
            .hookAnswered(turnId: turn),
            .turnEnded(TurnEnd(turnId: turn, status: .completed, stopReason: .finalAnswer, usage: Usage(inputTokens: 5, outputTokens: 7, cachedInputTokens: 1, reasoningTokens: 2), undo: .committed)),
            .turnEnded(TurnEnd(turnId: "t-2", status: .interrupted, stopReason: nil, usage: Usage(), undo: .none)),
            .entriesMutated(operations: [.remove(ids: ["e7"])], revision: 9),
            .propertiesChanged(set: ["k": "v", "n": 1], removed: ["old"]),
            .profileActivated("fast"),
            .undoRecordsKept([undo]),
            .undoRecordsTaken([undo]),
            .planUpdated([PlanEntry(content: "Read \"it\"", priority: .high, status: .inProgress), PlanEntry(content: "é", priority: .low, status: .pending)]),
            .planUpdated([]),
        ]
        var lines = try changes.map { String(decoding: try JournalCodec.line(for: $0, at: at).dropLast(), as: UTF8.self) }

        // Snapshots: with an open turn and committed undo records, and without.
        var state = Transcript(properties: ["p": "q"])
        try state.keepUndoRecords([undo])
        let id = try state.beginTurn { "t-\($0)" }
        for e in entries { try state.append(e.content, turn: id) }
        try state.updatePlan([PlanEntry(content: "Write the test", priority: .medium, status: .completed)])
        try state.recordCallSent("c1", turn: id)
        try state.recordCallSent("c2", turn: id, attempt: 2, arguments: ["edited": true])
        _ = try state.appendAnswer(
            [.toolCalls(calls: [ToolCallRecord(callId: "c9", name: "x", arguments: [:])], profile: nil, text: nil)], turn: id,
            answered: .roundTripAnswered(turnId: id, roundTrip: 3, usage: Usage(outputTokens: 2), positions: ["m": 7]))
        try state.recordCallSent("c9", turn: id, attempt: 2, arguments: ["edited": true])
        lines.append(String(decoding: try JournalCodec.snapshotLine(state, at: at).dropLast(), as: UTF8.self))
        try state.endTurn(TurnEnd(turnId: id, status: .completed, stopReason: .completed, usage: Usage(inputTokens: 1), undo: .none))
        lines.append(String(decoding: try JournalCodec.snapshotLine(state, at: at).dropLast(), as: UTF8.self))
        return lines
    }

    /// Lines no writer of ours produces, that the general path still reads (or refuses).
    private static let unusualLines: [String] = [
        #"  { "type" : "turnStarted" , "at" : 1 , "turnId" : "t-1" , "number" : 1 }  "#,
        #"{"type":"turnStarted","at":1.0,"turnId":"t-1","number":1e0}"#,
        #"{"type":"turnStarted","at":1,"turnId":"t-1","number":1,"future":{"a":[1,2]}}"#,
        #"{"type":"turnStarted","at":1,"turnId":"t-1","number":1,"number":2}"#,
        #"{"type":"turnStarted","at":1,"turnId":"t-1","number":"1"}"#,
        #"{"t\u0079pe":"turnStarted","at":1,"turnId":"t-1","number":1}"#,
        #"{"type":"turnStarted","at":1,"turnId":"t-\u00e9","number":1}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"prompt","text":null}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"prompt","text":"a","turnId":null,"x":5}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"prompt","text":"a","stopReason":5}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"response","text":"a","stopReason":"nope"}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"response","text":"a","incomplete":null,"profile":null}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"response","text":"a","incomplete":1}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"toolCalls","calls":[{"callId":"c","name":"n","arguments":null,"z":1}]}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"toolCalls","calls":[{"callId":"c","name":"n"}]}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"toolOutput","callId":"c","name":"n","outcome":"ok","content":null}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"toolOutput","callId":"c","name":"n","outcome":"ok"}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"toolOutput","callId":"c","name":"n","outcome":"maybe","content":1}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"prompt","text":"a","images":[{"nope":1}]}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"other","text":"a"}}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":[]}"#,
        #"{"type":"entryAppended","at":1,"nextEntry":2}"#,
        #"{"type":"turnEnded","at":1,"turnId":"t","status":"completed","usage":{"inputTokens":null,"other":"x"},"stopReason":7,"undo":"weird"}"#,
        #"{"type":"turnEnded","at":1,"turnId":"t","status":"completed","usage":{"inputTokens":1.5}}"#,
        #"{"type":"turnEnded","at":1,"turnId":"t","status":"done","usage":{}}"#,
        #"{"type":"turnEnded","at":1,"turnId":"t","status":"completed","usage":[]}"#,
        #"{"type":"snapshot","entries":[],"revision":0,"nextEntry":1,"properties":{},"nextTurn":1,"usage":{},"updatedAt":5,"committedUndo":"x","activeProfile":3}"#,
        #"{"type":"snapshot","entries":[],"revision":0,"nextEntry":1,"properties":[],"nextTurn":1,"usage":{},"updatedAt":5}"#,
        #"{"type":"snapshot","entries":[],"revision":0,"nextEntry":1,"properties":{},"nextTurn":1,"usage":{},"updatedAt":5,"openTurn":{"turnId":"t"}}"#,
        // Escaped or non-ASCII strings where a known word is expected, and integers at the edges of the direct reading.
        #"{"type":"turn\u0045nded","at":1,"turnId":"t","status":"c\u006fmpleted","stopReason":"fin\u0061lAnswer","undo":"c\u006fmmitted","usage":{"inputTokens":-0,"outputTokens":123456789012345678}}"#,
        #"{"type":"turnEnded","at":-0,"turnId":"t","status":"completed","stopReason":null,"undo":null,"usage":{"inputTokens":1E2,"outputTokens":1234567890123456789}}"#,
        #"{"type":"turnEnded","at":1,"turnId":"t","status":"completed","stopReason":"é","undo":{"a":1},"usage":{"inputTokens":00}}"#,
        #"{"type":"turnEnded","at":1,"turnId":"t","status":"compl\u00e9ted","usage":{}}"#,
        #"{"type":"turnEnded","at":1,"turnId":"t","status":5,"usage":{}}"#,
        #"{"type":"entryAppended","at":123456789012345678,"nextEntry":2,"entry":{"id":"e1","type":"pr\u006fmpt","text":"a"}}"#,
        #"{"type":"entryAppended","at":-12,"nextEntry":2.0,"entry":{"id":"e1","type":"prompt\u0000","text":"a"}}"#,
        #"{"type":"turnStarted","at":1,"turnId":"t-1","number":-1}"#,
        #"{"type":"turnStarted","at":-,"turnId":"t-1","number":1}"#,
        #"{"type":"snapsh\u006ft","entries":[],"revision":0,"nextEntry":1,"properties":{},"nextTurn":1,"usage":{},"updatedAt":5}"#,
        #"{"type":"callSent","at":1,"turnId":"t"}"#,
        #"{"type":"callSent","at":1,"turnId":"t","callId":"c","attempt":0}"#,
        #"{"type":"callSent","at":1,"turnId":"t","callId":"c","attempt":"2"}"#,
        #"{"type":"roundTripAnswered","at":1,"turnId":"t","roundTrip":1,"usage":{},"positions":{"m":"x"}}"#,
        #"{"type":"roundTripAnswered","at":1,"turnId":"t","roundTrip":1}"#,
        #"{"type":"snapshot","entries":[],"revision":0,"nextEntry":1,"properties":{},"nextTurn":1,"usage":{},"updatedAt":5,"modelPositions":{"m":1.5}}"#,
        #"{"type":"snapshot","entries":[],"revision":0,"nextEntry":1,"properties":{},"nextTurn":1,"usage":{},"updatedAt":5,"openTurn":{"turnId":"t","entriesBefore":[],"undo":[],"sends":{"c":{"count":2}},"answeredRoundTrips":"1"}}"#,
        #"{"type":"callSent","at":1,"turnId":"t","callId":5}"#,
        #"{"type":"callSent","at":1,"callId":"c"}"#,
        #"{"type":"snapshot","entries":[],"revision":0,"nextEntry":1,"properties":{},"nextTurn":1,"usage":{},"updatedAt":5,"openTurn":{"turnId":"t","entriesBefore":[],"undo":[],"sentCalls":"c1"}}"#,
        #"{"type":"snapshot","entries":[],"revision":0,"nextEntry":1,"properties":{},"nextTurn":1,"usage":{},"updatedAt":5,"openTurn":{"turnId":"t","entriesBefore":[],"undo":[],"sentCalls":["c1",2]}}"#,
        #"{"type":"nothing","at":1}"#,
        #"{"at":1}"#,
        #"{"type":5,"at":1}"#,
        "{}", "[]", "5", #""turnStarted""#, "null",
    ]

    private static func same(_ a: JournalRecord, _ b: JournalRecord) -> Bool {
        switch (a, b) {
        case (.change(let c1, let d1), .change(let c2, let d2)): return c1 == c2 && d1 == d2
        case (.snapshot(let t1), .snapshot(let t2)): return t1.snapshot == t2.snapshot && t1.openTurn == t2.openTurn
        default: return false
        }
    }

    private static func result(_ body: () throws(JournalRecordError) -> JournalRecord) -> Result<JournalRecord, JournalRecordError> {
        do { return .success(try body()) } catch { return .failure(error) }
    }

    /// The decoder's answer equals the general path's: the same record, or the same error.
    private static func expectSameAsGeneral(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let decoded = result { () throws(JournalRecordError) in try JournalCodec.decodeRecord(bytes) }
        // The counter bound applies to both paths alike, after them.
        let general = bytes.withUnsafeBufferPointer { buffer in
            result { () throws(JournalRecordError) in
                let record = try JournalCodec.decodeRecordInGeneral(buffer)
                try JournalCodec.checkCounters(record)
                return record
            }
        }
        let text = String(decoding: bytes.prefix(200), as: UTF8.self)
        switch (decoded, general) {
        case (.success(let a), .success(let b)):
            #expect(same(a, b), "read differently: \(text)", sourceLocation: sourceLocation)
        case (.failure(let a), .failure(let b)):
            #expect(a == b, "\(a) vs \(b): \(text)", sourceLocation: sourceLocation)
        default:
            Issue.record("one path loads and the other does not: \(decoded) / \(general): \(text)", sourceLocation: sourceLocation)
        }
    }

    private static func readDirectly(_ line: String) -> JournalRecord? {
        Array(line.utf8).withUnsafeBufferPointer { buffer in
            var reader = JournalRecordReader(buffer)
            return try? reader.record()
        }
    }

    @Test func theCommonRecordsAreReadDirectlyAndEveryLineAsInGeneral() throws {
        let written = try Self.writtenLines()
        var direct = 0
        for line in written {
            Self.expectSameAsGeneral(Array(line.utf8))
            guard let type = try JSONValue.parse(line)["type"]?.stringValue else { continue }
            if ["turnStarted", "entryAppended", "turnEnded", "snapshot"].contains(type) {
                #expect(Self.readDirectly(line) != nil, "not read directly: \(line.prefix(120))")
                direct += 1
            }
        }
        #expect(direct == 13)
        for line in Self.unusualLines { Self.expectSameAsGeneral(Array(line.utf8)) }
    }

    /// Lines mutated at random (a seeded generator, so a failure repeats) are
    /// read or refused exactly as the general path reads or refuses them.
    @Test func mutatedLinesReadAsInGeneral() throws {
        var rng = SplitMix64(state: 0x5EED_2026)
        let lines = try Self.writtenLines() + Self.unusualLines
        let alphabet = Array(#"{}[]":,\ -+.0123456789eEtrufalsn"#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xE2, 0xED, 0xF0, 0xFF]
        for _ in 0..<6000 {
            var bytes = Array(lines[Int(rng.next() % UInt64(lines.count))].utf8)
            for _ in 0..<(1 + Int(rng.next() % 3)) where !bytes.isEmpty {
                let i = Int(rng.next() % UInt64(bytes.count))
                switch rng.next() % 4 {
                case 0: bytes[i] = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                case 1: bytes.remove(at: i)
                case 2: bytes.insert(alphabet[Int(rng.next() % UInt64(alphabet.count))], at: i)
                default: bytes.removeSubrange(i...)
                }
            }
            Self.expectSameAsGeneral(bytes)
        }
    }

    private static func error(_ line: String) -> JournalRecordError? {
        error(Array(line.utf8))
    }

    private static func error(_ bytes: [UInt8]) -> JournalRecordError? {
        do {
            _ = try JournalCodec.decodeRecord(bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test func deepNestingIsASyntaxErrorNotACrash() {
        for depth in [513, 100_000] {
            for (open, close) in [("[", "]"), (#"{"a":"#, "}")] {
                let nested = String(repeating: open, count: depth) + "1" + String(repeating: close, count: depth)
                for line in [
                    #"{"type":"turnStarted","at":1,"turnId":"t","number":1,"x":"# + nested + "}",
                    #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"toolOutput","callId":"c","name":"n","outcome":"ok","content":"# + nested + "}}",
                ] {
                    let e = Self.error(line)
                    #expect(e?.kind == .syntax && e?.message == "nesting too deep", "\(depth) \(open): \(String(describing: e))")
                }
            }
        }
        // 512 levels in all (the record is the first) still load.
        let nested = String(repeating: "[", count: 511) + String(repeating: "]", count: 511)
        #expect(Self.error(#"{"type":"turnStarted","at":1,"turnId":"t","number":1,"x":"# + nested + "}") == nil)
    }

    @Test func hugeNumbersAreRefusedOrReadAsInGeneral() {
        for (member, value) in [
            ("at", "1e400"), ("at", "-1e400"), ("at", "99999999999999999999999999"), ("at", "1.5"), ("at", String(repeating: "9", count: 5000)),
            ("number", "9223372036854775807"), ("number", "9223372036854775808"), ("number", "9007199254740993"),
        ] {
            let line = #"{"type":"turnStarted","at":1,"turnId":"t","number":1,""# + member + #"":"# + value + "}"
            let e = Self.error(line)
            #expect(e?.kind == .record, "\(member)=\(value.prefix(30)): \(String(describing: e))")
            Self.expectSameAsGeneral(Array(line.utf8))
        }
        // The largest counter accepted, and a negative time.
        #expect(Self.error(#"{"type":"turnStarted","at":-5,"turnId":"t","number":9007199254740992}"#) == nil)
        let snapshot = #"{"type":"snapshot","entries":[],"revision":9007199254740993,"nextEntry":1,"properties":{},"nextTurn":1,"usage":{},"updatedAt":5}"#
        #expect(Self.error(snapshot)?.message == "'revision' is larger than 9007199254740992")
    }

    /// Integers are read eight digits at a time where eight digits follow:
    /// every length, sign and ending reads as the general path reads it.
    @Test func integersOfEveryLengthReadAsInGeneral() throws {
        let digits = "3141592653589793238462643383"
        for length in 1...24 {
            for start in [0, 1, 5] {
                let magnitude = String(digits.dropFirst(start).prefix(length))
                for value in [magnitude, "-" + magnitude, magnitude + ".0", magnitude + ".5", magnitude + "e2", "0" + magnitude, magnitude + "x"] {
                    for member in ["at", "number"] {
                        let others = member == "at" ? #""number":1"# : #""at":1"#
                        let line = #"{"type":"turnStarted","turnId":"t",""# + member + #"":"# + value + "," + others + "}"
                        Self.expectSameAsGeneral(Array(line.utf8))
                        if member == "at", value == magnitude, length <= 18, case .change(_, let at)? = try? JournalCodec.decodeRecord(Array(line.utf8)) {
                            #expect(JournalCodec.millis(at) == JournalCodec.millis(JournalCodec.date(millis: Int(magnitude)!)), "\(value)")
                        }
                    }
                }
            }
        }
        for text in ["00000000", "12345678", "99999999", "09876543", "1234567/", "1234567:", "12345678"] {
            let word = Array(text.utf8).withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
            #expect(JournalRecordReader.eightDigits(word) == Int(text), "\(text)")
        }
        // 18 digits: two words and two single digits.
        let longest = try JournalCodec.decodeRecord(Array(#"{"type":"turnStarted","at":123456789012345678,"turnId":"t","number":2}"#.utf8))
        guard case .change(.turnStarted(_, 2), let at) = longest else {
            Issue.record("read as \(longest)")
            return
        }
        #expect(at == JournalCodec.date(millis: 123_456_789_012_345_678))
    }

    /// Member names are scanned a word at a time to the first byte that is
    /// not plain: an escape, a control character, a byte outside ASCII or a
    /// cut line at any position of a name of any length reads as the general
    /// path reads it (declined there, then read or refused in general).
    @Test func namesWithAnyByteAnywhereReadAsInGeneral() {
        let letters = Array("abcdefghijklmnopqrstu".utf8)
        let inserts: [[UInt8]] = [Array(#"\"#.utf8), Array(#"""#.utf8), Array(#"t"#.utf8), [0x01], [0x1F], Array("é".utf8), [0xFF], [0x7F], [0x20]]
        for length in 0...letters.count {
            for insert in inserts {
                for at in 0...length {
                    let name = Array(letters[..<at]) + insert + Array(letters[at..<length])
                    for member in [name, Array("type".utf8[...].prefix(at)) + insert + Array("type".utf8.dropFirst(at))] {
                        let line = Array(#"{"at":1,""#.utf8) + member + Array(#"":"turnStarted","number":1,"turnId":"t","type":"turnStarted"}"#.utf8)
                        Self.expectSameAsGeneral(line)
                        Self.expectSameAsGeneral(Array(line.prefix(9 + member.count)))
                        // In an entry, where a name the reader does not know is skipped.
                        let inEntry = Array(#"{"at":1,"entry":{"id":"e1",""#.utf8) + member
                            + Array(#"":1,"text":"a","type":"prompt"},"nextEntry":2,"type":"entryAppended"}"#.utf8)
                        Self.expectSameAsGeneral(inEntry)
                    }
                }
            }
        }
        // Plain names of every length around a word read as in general too.
        for length in 1...20 {
            let line = #"{"at":1,""# + String(repeating: "x", count: length) + #"":1,"number":1,"turnId":"t","type":"turnStarted"}"#
            Self.expectSameAsGeneral(Array(line.utf8))
        }
    }

    @Test func badUTF8IsASyntaxError() {
        let prefix = Array(#"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"prompt","text":""#.utf8)
        let suffix = Array(#""}}"#.utf8)
        for bad: [UInt8] in [[0xFF], [0xC3, 0x28], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0x80]] {
            let e = Self.error(prefix + bad + suffix)
            #expect(e?.kind == .syntax && e?.message == "invalid UTF-8 in string", "\(bad): \(String(describing: e))")
            Self.expectSameAsGeneral(prefix + bad + suffix)
        }
        // Outside a string, and in a member name.
        #expect(Self.error([0x7B, 0xFF, 0x7D])?.kind == .syntax)
        #expect(Self.error(Array(#"{""#.utf8) + [0xC3, 0x28] + Array(#"":1}"#.utf8))?.kind == .syntax)
    }

    @Test func truncatedEscapesAreASyntaxError() {
        for text in [#"\"#, #"\u"#, #"\u12"#, #"\u12G4"#, #"\uD800"#, #"\uD800\u0041"#, #"\uDC00"#, #"\x"#, "\u{01}"] {
            for line in [
                #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"prompt","text":""# + text + #""}}"#,
                #"{"type":"entryAppended","at":1,"nextEntry":2,"entry":{"id":"e1","type":"prompt","text":""# + text,
            ] {
                #expect(Self.error(line)?.kind == .syntax, "\(line)")
                Self.expectSameAsGeneral(Array(line.utf8))
            }
        }
        // A line cut anywhere is refused, never read as a shorter record.
        let whole = Array(#"{"type":"turnEnded","at":1,"turnId":"t-1","status":"completed","stopReason":"completed","undo":"none","usage":{"inputTokens":12}}"#.utf8)
        for n in 0..<whole.count {
            #expect(Self.error(Array(whole.prefix(n)))?.kind == .syntax, "cut at \(n)")
        }
    }

    /// Through the whole load: a hostile line stops loading there with a
    /// warning, and the session loads as it was before it.
    @Test func aHostileLineStopsTheLoadWithAWarning() throws {
        let header = JournalCodec.headerLine(JournalHeader(sessionID: "s-h", createdAt: Date(), config: [:]))
        let good = try JournalCodec.line(for: .turnStarted(turnId: "t-1", number: 1), at: Self.at)
        for hostile in [
            #"{"type":"turnStarted","at":1,"turnId":"t-2","number":9223372036854775807}"#,
            #"{"type":"entryAppended","at":1,"nextEntry":9223372036854775807,"entry":{"id":"e1","type":"prompt","text":"a"}}"#,
            #"{"type":"turnStarted","at":1,"turnId":"t-2","x":"# + String(repeating: "[", count: 200_000),
        ] {
            let loaded = try JournalCodec.load(header + good + Array(hostile.utf8) + [0x0A] + good)
            #expect(loaded.warnings.map(\.line) == [3], "\(hostile.prefix(60))")
            #expect(loaded.transcript.openTurn?.id == "t-1" && loaded.transcript.nextTurnNumber == 2)
        }
    }

    /// An appended entry whose id is taken (read by the direct reader and
    /// appended without a change around it) stops loading there too, whether
    /// the ids so far are generated ones or not.
    @Test func anEntryWhoseIDIsTakenStopsTheLoadWithAWarning() throws {
        let header = JournalCodec.headerLine(JournalHeader(sessionID: "s-h", createdAt: Date(), config: [:]))
        func appended(_ id: String, next: Int) throws -> [UInt8] {
            try JournalCodec.line(for: .entryAppended(TranscriptEntry(id: id, .prompt(text: id, images: nil)), nextEntryNumber: next), at: Self.at)
        }
        for ids in [["e1", "e2", "e2"], ["e1", "e2", "e1"], ["note", "e1", "note"]] {
            var bytes = header
            for (i, id) in ids.enumerated() { bytes += try appended(id, next: i + 2) }
            let loaded = try JournalCodec.load(bytes)
            #expect(loaded.warnings.map(\.line) == [4], "\(ids)")
            #expect(loaded.warnings.first?.message.contains("already taken") == true, "\(ids)")
            #expect(loaded.transcript.entries.map(\.id) == Array(ids.prefix(2)) && loaded.transcript.nextEntryNumber == 3)
        }
    }
}

/// Two readers of one journal at once load it once.
@Suite struct SharedJournalReadsTests {
    /// Waits (bounded) until `condition` holds.
    private func waitUntil(_ condition: () -> Bool) -> Bool {
        let deadline = DispatchTime.now() + .seconds(30)
        while !condition() {
            if DispatchTime.now() > deadline { return false }
            usleep(1000)
        }
        return true
    }

    private func line(_ id: Int) throws -> [UInt8] {
        try JournalCodec.line(
            for: .entryAppended(TranscriptEntry(id: "e\(id)", .prompt(text: "p\(id)", images: nil)), nextEntryNumber: id + 1), at: Date())
    }

    /// The first read is held until a second caller waits for it; `change`
    /// runs on the file meanwhile. Returns both callers' entry counts and
    /// how many times the file was read.
    private func twoReaders(change: (String) throws -> Void) throws -> (first: Int?, second: Int?, reads: Int) {
        let dir = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-shared-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/s-x.jsonl"
        let bytes = JournalCodec.headerLine(JournalHeader(sessionID: "s-x", createdAt: Date(), config: [:])) + (try line(1))
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))

        let calls = Atomic<Int>(0)
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let reads = SharedJournalReads { p in
            let loaded = try SharedJournalReads.readAndLoad(p)
            if calls.add(1, ordering: .relaxed).newValue == 1 {
                started.signal()
                _ = release.wait(timeout: .now() + 30)
            }
            return loaded
        }
        let counts = Mutex<[Int: Int]>([:])
        let group = DispatchGroup()
        for which in [1, 2] {
            if which == 2 {
                #expect(started.wait(timeout: .now() + 30) == .success)
                try change(path)
            }
            DispatchQueue.global().async(group: group) {
                if let loaded = try? reads.load(path) { counts.withLock { $0[which] = loaded.contents.transcript.count } }
            }
        }
        #expect(waitUntil { reads.waiting(path) == 1 })
        release.signal()
        #expect(group.wait(timeout: .now() + 30) == .success)
        let result = counts.withLock { $0 }
        return (result[1], result[2], calls.load(ordering: .relaxed))
    }

    @Test func aSecondReaderTakesTheFirstReadersResult() throws {
        let r = try twoReaders { _ in }
        #expect(r.first == 1 && r.second == 1 && r.reads == 1)
    }

    @Test func aJournalChangedMeanwhileIsReadAgain() throws {
        let extra = try line(2)
        let r = try twoReaders { path in
            let handle = try #require(FileHandle(forWritingAtPath: path))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(extra))
            try handle.close()
        }
        #expect(r.first == 1 && r.second == 2 && r.reads == 2)
    }
}

/// Temporary files a crash leaves in the store are removed at start.
@Suite struct StoreLeftoversTests {
    @Test func temporaryFilesOfGoneProcessesAreRemovedAndOthersKept() throws {
        let dir = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-leftovers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A process that has exited: its pid is gone.
        let gone = Process()
        gone.executableURL = URL(fileURLWithPath: "/bin/true")
        try gone.run()
        gone.waitUntilExit()
        let dead = gone.processIdentifier
        let me = getpid()
        let alive = getppid()
        func touch(_ name: String, secondsAgo: Int = 0) {
            let path = dir + "/" + name
            #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8)))
            if secondsAgo > 0 {
                let then = Date().addingTimeInterval(-Double(secondsAgo))
                try? FileManager.default.setAttributes([.modificationDate: then], ofItemAtPath: path)
            }
        }
        let removedNames = [
            ".index.tmp-\(dead)", "s-a.jsonl.tmp-\(dead)", ".tmp.owner-\(dead)-123",
            ".index.tmp-\(me)",  // this pid, but older than the store: an earlier process's
            "s-b.jsonl.tmp-\(alive)",  // a live process's, but two hours old
        ]
        let keptNames = [
            "s-a.jsonl", "s-a.lock", ".index", "s-a.jsonl.corrupt-\(dead)", "notes.tmp-\(dead)", ".index.tmp-x\(dead)",
            ".index.tmp-\(alive)", "s-c.jsonl.tmp-\(alive)",  // a live process's, being written
        ]
        for name in removedNames { touch(name, secondsAgo: name.hasPrefix("s-b") ? 7200 : name.hasSuffix("-\(me)") ? 30 : 0) }
        for name in keptNames { touch(name) }
        // The media an import was reading: a directory with files in it.
        let staging = [JournalStore.importMediaPrefix + "\(dead)-1a2b", JournalStore.importMediaPrefix + "\(alive)-3c4d"]
        for name in staging {
            try FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: false)
            #expect(FileManager.default.createFile(atPath: dir + "/" + name + "/" + String(repeating: "a", count: 64), contents: Data("x".utf8)))
        }
        let store = JournalStore(directory: dir, logger: Logger(level: .off))
        // Written by this process after the store opened: in use.
        touch("s-d.jsonl.tmp-\(me)")
        let removed = store.removeLeftoverTemporaries()
        #expect(Set(removed) == Set(removedNames + [staging[0]]))
        let left = Set(try FileManager.default.contentsOfDirectory(atPath: dir))
        #expect(left == Set(keptNames + ["s-d.jsonl.tmp-\(me)", staging[1]]))
    }
}
