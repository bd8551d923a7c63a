@testable import AgentRPCProtocol
import Foundation
import Testing

/// A union for the generator test: two variants, one with a string enum and a
/// stated-schema type as properties (both must become `$ref`s).
private enum Shape: String, Codable, JSONSchemaStringEnum { case round, square }

private struct Circle: Codable { var shape: Shape; var label: TurnInput?; var radius: Double }
private struct Mark: Codable { var at: [Int] }

private struct Drawing: Decodable, JSONSchemaTaggedUnion {
    static var tagKey: String { "kind" }
    static var variants: [(tag: String, type: any Decodable.Type)] { [("circle", Circle.self), ("mark", Mark.self)] }
    init(from decoder: any Decoder) throws {}
}

@Suite struct EventRegistryTests {
    /// An event built directly for speed must be, member for member, what its
    /// payload's `Codable` form encodes: its fields stay declared once.
    @Test func everyDirectlyBuiltEventIsItsCodableForm() {
        let mcp = ToolSource(mcp: "kit")
        let payloads: [any SessionEventPayload] = [
            SessionEvent.TextDelta(delta: "a \"b\""),
            SessionEvent.ReasoningDelta(delta: "think"),
            SessionEvent.RequestStarted(roundTrip: 2, profile: "default", provider: "openai", model: "m"),
            SessionEvent.RequestStarted(roundTrip: 1, profile: "p", provider: "anthropic", model: "m", contextWindowTokens: 8192),
            SessionEvent.ToolCallStarted(callId: "c1", name: "read", arguments: ["path": "/a", "n": 3]),
            SessionEvent.ToolCallStarted(callId: "c2", name: "mcp__kit__echo", arguments: .null, source: mcp),
            SessionEvent.ToolCallFinished(callId: "c1", name: "read", outcome: .ok, content: "text"),
            SessionEvent.ToolCallFinished(callId: "c2", name: "mcp__kit__echo", outcome: .failed, content: ["x": [1, 2]], source: mcp),
            SessionEvent.ToolCallFinished(
                callId: "c3", name: "shot", outcome: .ok, content: ["a note"], media: [MediaContent(type: .image, mimeType: "image/png", data: "AAEC")]),
            SessionEvent.EntryAppended(entry: TranscriptEntry(id: "e1", turnId: "t1", .prompt(text: "hi", images: [.url("u")]))),
            SessionEvent.EntryAppended(entry: TranscriptEntry(id: "e2", .response(text: "yo", profile: "b", incomplete: true))),
            Usage(inputTokens: 10, outputTokens: 2, cachedInputTokens: nil, reasoningTokens: 1),
            Usage(cachedInputTokens: 3, contextTokens: 9, costUSD: 0.125),
            SessionEvent.TurnStarted(input: "hi \"you\""),
            SessionEvent.TurnStarted(input: TurnInput(text: "look", images: [.url("u"), .data(base64: "AA==", mimeType: "image/png")])),
            SessionEvent.TurnEnded(status: .completed, undo: .none, error: nil),
            SessionEvent.TurnEnded(status: .completed, undo: .committed, error: nil, stopReason: .maxTokens),
            SessionEvent.TurnEnded(status: .failed, undo: .rolledBack, error: RPCError(.providerError, "down", data: ["status": 503])),
        ]
        for payload in payloads {
            #expect(payload.eventJSON == payload.encodedEventJSON, "\(type(of: payload).type)")
            // And the bytes written without building it are its serialized form.
            var bytes: [UInt8] = []
            payload.writeEventJSON(into: &bytes)
            #expect(bytes == payload.eventJSON.serialized(), "\(type(of: payload).type)")
        }
    }

    /// Every kind of transcript entry writes the bytes its `json` serializes to.
    @Test func anEntryWritesItsSerializedForm() {
        let entries: [TranscriptEntry] = [
            TranscriptEntry(id: "e1", turnId: "t1", .prompt(text: "hi \"you\"", images: [.url("u"), .data(base64: "AA==", mimeType: "image/png")])),
            TranscriptEntry(id: "e2", .prompt(text: "plain", images: nil)),
            TranscriptEntry(id: "e3", turnId: "t1", .response(text: "yo", profile: "b", incomplete: true, stopReason: .maxTokens)),
            TranscriptEntry(id: "e4", .response(text: "", profile: nil, incomplete: false)),
            TranscriptEntry(id: "e5", turnId: "t1", .reasoning(text: "hm", profile: "p", signature: "sig")),
            TranscriptEntry(id: "e6", turnId: "t1", .toolCalls(calls: [ToolCallRecord(callId: "c1", name: "n", arguments: ["a": [1, 2.5, nil]])], profile: "p", text: "t")),
            TranscriptEntry(id: "e7", turnId: "t1", .toolOutput(callId: "c1", name: "n", outcome: .ok, content: ["x": "y"], profile: "p", approvedArguments: ["a": 1])),
            TranscriptEntry(id: "e8", .toolOutput(callId: "c2", name: "n", outcome: .denied, content: nil, profile: nil, approvedArguments: nil)),
            TranscriptEntry(id: "e9", turnId: "t2", .summary(text: "what came before")),
            TranscriptEntry(id: "e10", .reasoning(text: "", profile: nil, signature: nil)),
            TranscriptEntry(id: "e11", .toolCalls(calls: [ToolCallRecord(callId: "c1", name: "n", arguments: .null), ToolCallRecord(callId: "c\"2", name: "m", arguments: "s")], profile: nil, text: nil)),
            TranscriptEntry(
                id: "e12", turnId: "t3",
                .toolOutput(
                    callId: "c3", name: "shot", outcome: .failed, content: ["a note"], profile: "p", approvedArguments: nil,
                    media: [MediaReference(type: .image, mimeType: "image/png", sha256: "ab", size: 3)])),
        ]
        for entry in entries {
            var bytes: [UInt8] = []
            entry.serialize(into: &bytes)
            #expect(bytes == entry.json.serialized(), "\(entry.id)")
        }
    }

    /// A delta's params written as bytes are what its `SessionEventParams`
    /// serializes to: escapes, non-ASCII text, with and without a turn.
    @Test func deltaParamsWrittenAsBytesAreTheirSerializedForm() {
        for delta in ["", "plain", "a \"quoted\"\nline\té\\ \u{1} 😀", "</script>"] {
            for turnId in [nil, "t-2", "t \"odd\""] as [String?] {
                for reasoning in [false, true] {
                    for seq in [0, 1, 4_242, Int.max] {
                        let tail = SessionEventParams.tail(sessionId: "s-1 é", turnId: turnId)
                        var bytes: [UInt8] = []
                        SessionEventParams.writeDelta(delta, reasoning: reasoning, seq: seq, tail: tail, into: &bytes)
                        let event: SessionEvent = reasoning ? .reasoningDelta(delta) : .textDelta(delta)
                        let expected = SessionEventParams(sessionId: "s-1 é", turnId: turnId, seq: seq, event: event).json.serialized()
                        #expect(bytes == expected, "\(String(decoding: bytes, as: UTF8.self))")
                    }
                }
            }
        }
    }

    /// A delta's whole frame, written by `DeltaFrameWriter` into its reused
    /// buffer, is the envelope around `writeDelta`'s params, byte for byte:
    /// every ASCII byte alone (the escapes), non-ASCII text, texts longer than
    /// the buffer (it grows, then shrinks again), signed and extreme `seq`s.
    @Test func deltaFramesAreTheEnvelopeAroundTheDeltaParams() {
        let head = Array(#"{"jsonrpc":"2.0","method":"session/event","params":"#.utf8)
        let end: [UInt8] = [UInt8(ascii: "}"), 0x0A]
        var texts = (0..<128).map { String(UnicodeScalar(UInt8($0))) }
        texts += ["", "plain", "a \"quoted\"\nline\té\\ \u{1} 😀", "</script>", String(repeating: "\u{7}x", count: 5_000),
                  String(repeating: "é😀", count: 20_000), "after the long ones"]
        for turnId in [nil, "t \"odd\""] as [String?] {
            let tail = SessionEventParams.tail(sessionId: "s-1 é", turnId: turnId)
            let writer = DeltaFrameWriter(frameHead: head, tail: tail, frameEnd: end)
            for (n, text) in texts.enumerated() {
                let reasoning = n % 3 == 0
                let seq = [0, 7, -12, Int.max, Int.min, 4_242][n % 6]
                var expected = head
                SessionEventParams.writeDelta(text, reasoning: reasoning, seq: seq, tail: tail, into: &expected)
                expected += end
                let frame = Array(writer.frame(text, reasoning: reasoning, seq: seq))
                #expect(frame == expected, "\(String(decoding: frame, as: UTF8.self))")
            }
        }
    }

    /// Integers as `writeInt` writes them, into an array and into memory, are their decimal text.
    @Test func integersWrittenAsBytesAreTheirDecimalText() {
        var values = [0, 1, -1, 9, 10, -10, 99, 100, 12_345, Int.max, Int.min, Int.max - 1, Int.min + 1]
        var power = 1
        for _ in 0..<18 {
            power *= 10
            values += [power - 1, power, power + 1, -power]
        }
        for value in values {
            var bytes: [UInt8] = [UInt8(ascii: "x")]
            JSONTextWriter.writeInt(value, into: &bytes)
            #expect(bytes == Array("x\(value)".utf8))
            var memory = [UInt8](repeating: 0, count: 21)
            let count = memory.withUnsafeMutableBufferPointer { JSONTextWriter.writeInt(value, to: $0.baseAddress!) }
            #expect(Array(memory[..<count]) == Array("\(value)".utf8))
        }
    }

    /// Any event's params written around its own object are what its
    /// `SessionEventParams` serializes to.
    @Test func eventParamsWrittenAsBytesAreTheirSerializedForm() {
        let events: [SessionEvent] = [
            .requestStarted(roundTrip: 2, profile: "p", provider: "scripted", model: "m"),
            .toolCallStarted(callId: "c\"1", name: "echo", arguments: ["i": 1, "b": [true, .null]]),
            .turnEnded(status: .completed, undo: .none, error: nil),
        ]
        for event in events {
            for turnId in [nil, "t-1"] as [String?] {
                let tail = SessionEventParams.tail(sessionId: "s-9", turnId: turnId)
                var bytes: [UInt8] = []
                SessionEventParams.write(seq: 12, tail: tail, into: &bytes) { $0.value(event.json) }
                let expected = SessionEventParams(sessionId: "s-9", turnId: turnId, seq: 12, event: event).json.serialized()
                #expect(bytes == expected, "\(String(decoding: bytes, as: UTF8.self))")
            }
        }
    }

    @Test func everyWireNameIsListedOnce() {
        #expect(SessionEvent.duplicateTypes() == [])
        #expect(SessionEvent.registry.count == Set(SessionEvent.registry.map { $0.type }).count)
    }

    @Test func decodingPicksTheRegisteredPayloadType() throws {
        let event = try JSONValue.parse(#"{"type": "hookFired", "hook": "onResponse", "profile": "p"}"#).decode(as: SessionEvent.self)
        #expect(event.payload(as: SessionEvent.HookFired.self) == SessionEvent.HookFired(hook: .onResponse, profile: "p"))
        #expect(event.payload(as: SessionEvent.TextDelta.self) == nil)
        #expect(event.type == "hookFired")
        // The `type` member is the envelope's, not an unknown field of the payload.
        let strict = try JSONValue.parse(#"{"type": "textDelta", "delta": "x"}"#).decode(as: SessionEvent.self, rejectUnknownKeys: true)
        #expect(strict == .textDelta("x"))
    }

    @Test func everyPayloadEncodesWithItsWireName() throws {
        // The schema's alternatives are the registry, in order, and each names its payload's `type`.
        let schema = try JSONSchemaGenerator.schema(for: SessionEvent.self)
        let tags = schema["oneOf"]?.arrayValue?.compactMap { $0["properties"]?["type"]?["const"]?.stringValue }
        #expect(tags == SessionEvent.registry.map { $0.type })
        for alternative in schema["oneOf"]?.arrayValue ?? [] {
            #expect(alternative["required"]?.arrayValue?.first == "type")
            #expect(alternative["additionalProperties"] == false)
        }
    }

    @Test func taggedUnionSchemaInlinesVariantsAndNamesLeafTypes() throws {
        let schema = try JSONSchemaGenerator.schema(for: Drawing.self)
        let expected: JSONValue = [
            "oneOf": [
                [
                    "type": "object", "additionalProperties": false,
                    "properties": [
                        "kind": ["const": "circle"], "shape": ["$ref": "#/$defs/Shape"], "label": ["$ref": "#/$defs/TurnInput"],
                        "radius": ["type": "number"],
                    ],
                    "required": ["kind", "radius", "shape"],
                ],
                [
                    "type": "object", "additionalProperties": false,
                    "properties": ["kind": ["const": "mark"], "at": ["type": "array", "items": ["type": "integer"]]],
                    "required": ["kind", "at"],
                ],
            ],
        ]
        #expect(schema["oneOf"] == expected["oneOf"])
        #expect(schema["$defs"]?["Shape"] == ["type": "string", "enum": ["round", "square"]])
        #expect(schema["$defs"]?["TurnInput"] != nil)
        #expect(schema["$defs"]?["ImageAttachment"] != nil)
    }
}
