import Testing

@testable import AgentRPCProtocol

/// JSON text written through `JSONStage` (every value, object member, event,
/// entry and `tool/call` params) is byte for byte what a plain writer makes:
/// compact, objects with sorted keys, `\"` `\\` `\n` `\r` `\t` `\b` `\f`
/// escaped by name and other control characters as `\u00xx`, everything else
/// (non-ASCII, `/`, DEL) as it is. The reference below is that writer, a
/// byte at a time; the cases cross the stage's size in every way (strings
/// just under, at and over it, escapes that only fit unescaped, a value
/// bigger than the stage after a partly filled one).
@Suite struct JSONStageTests {
    /// The plain writer the stage must agree with.
    static func reference(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out += Array("null".utf8)
        case .bool(let b): out += Array((b ? "true" : "false").utf8)
        case .int(let i): out += Array(String(i).utf8)
        case .double(let d): out += Array((d.isFinite ? d.description : "null").utf8)
        case .string(let s): referenceString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, element) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                reference(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (i, key) in o.keys.sorted().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                referenceString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                reference(o[key] ?? .null, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func referenceString(_ s: String, into out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case 0x22: out += Array(#"\""#.utf8)
            case 0x5C: out += Array(#"\\"#.utf8)
            case 0x0A: out += Array(#"\n"#.utf8)
            case 0x0D: out += Array(#"\r"#.utf8)
            case 0x09: out += Array(#"\t"#.utf8)
            case 0x08: out += Array(#"\b"#.utf8)
            case 0x0C: out += Array(#"\f"#.utf8)
            case ..<0x20: out += Array(#"\u00"#.utf8) + [hex[Int(b >> 4)], hex[Int(b & 0xF)]]
            default: out.append(b)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    static func reference(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        reference(value, into: &out)
        return out
    }

    /// Strings of every kind, and of lengths around the stage's size and the
    /// most it holds escaped.
    static let strings: [String] = {
        let size = JSONStage.size
        let most = size / JSONTextWriter.maximumEscapedBytesPerByte
        var strings = ["", "plain", "a \"quoted\"\nline\té\\ \u{1} 😀 /\u{7F}", "</script>", "\u{0}\u{1F}\u{8}\u{C}\r",
                       String(repeating: "é", count: 700), String(repeating: "🙂x", count: 400)]
        strings += (0..<0x80).map { String(UnicodeScalar(UInt8($0))) }
        for length in [most - 1, most, most + 1, size - 3, size - 2, size - 1, size, size + 1, 3 * size] {
            strings.append(String(repeating: "a", count: length))
            strings.append(String(repeating: "\u{1}", count: length))
            strings.append(String(repeating: "a", count: max(0, length - 1)) + "\"")
            strings.append("\n" + String(repeating: "b", count: max(0, length - 1)))
        }
        strings.append(String(repeating: "ab\"c\u{2}😀", count: 50_000))
        return strings
    }()

    static var values: [JSONValue] {
        var values: [JSONValue] = [
            .null, true, false, 0, -1, .int(Int.max), .int(Int.min), 2.5, 1e-7, 1.0, .double(.infinity), .double(.nan), -0.0,
            [], [:], [[]], [[:]], ["a": [:]], [1, "two", nil, [3.5, ["k": false]]],
            ["b": 1, "a": 2, "é": 3, "\"": 4, "": 5, "A": 6, "aa": 7, "a\u{1}": 8, "😀": 9],
            ["i": 4],
        ]
        values += strings.map { .string($0) }
        values.append(.object(Dictionary(uniqueKeysWithValues: strings.enumerated().map { ($1, .int($0)) })))
        values.append(.array(strings.map { .string($0) }))
        var deep: JSONValue = "bottom"
        for n in 0..<300 { deep = n % 2 == 0 ? [deep] : ["level \(n)": deep, "x": .int(n)] }
        values.append(deep)
        return values
    }

    @Test func valuesAreWrittenAsThePlainWriterWritesThem() {
        for value in Self.values {
            let bytes = value.serialized()
            #expect(bytes == Self.reference(value), "\(String(decoding: bytes.prefix(200), as: UTF8.self))")
            // As text: made from the stage when it fits, from the array when it does not.
            #expect(value.serializedString() == String(decoding: Self.reference(value), as: UTF8.self), "\(String(decoding: bytes.prefix(200), as: UTF8.self))")
        }
    }

    /// After bytes already in the array, and after a partly filled stage:
    /// nothing before is lost or moved, and nothing is written twice.
    @Test func whatIsAlreadyWrittenStays() {
        let values = Self.values
        for (n, value) in values.enumerated() {
            let before = Array(String(repeating: "p", count: n * 37 % 1_500).utf8)
            var bytes = before
            JSONStage.write(into: &bytes) { stage in
                stage.literal("<")
                stage.string(String(repeating: "s", count: n * 53 % 1_100))
                stage.value(value)
                stage.bytes(Array(repeating: UInt8(ascii: "z"), count: n * 29 % 2_100))
                stage.int(n)
                stage.direct { $0 += Array("|direct|".utf8) }
                stage.stringContents("tail \"\(n)\"")
            }
            var expected = before + Array("<".utf8)
            Self.referenceString(String(repeating: "s", count: n * 53 % 1_100), into: &expected)
            expected += Self.reference(value) + Array(repeating: UInt8(ascii: "z"), count: n * 29 % 2_100) + Array(String(n).utf8)
            expected += Array("|direct|".utf8) + Array(#"tail \"\#(n)\""#.utf8)
            #expect(bytes == expected, "value \(n)")
        }
    }

    /// Members written by `JSONObjectWriter`, staged or handed the array, are
    /// the object's serialized form.
    @Test func objectMembersAreTheObjectsSerializedForm() {
        for (n, text) in Self.strings.enumerated() {
            let value = Self.values[n % Self.values.count]
            var bytes = Array("x".utf8)
            JSONObjectWriter.write(into: &bytes) { o in
                o.value("a", value)
                o.string("b", text)
                o.string("c", nil)
                o.int("d", n)
                o.member("e") { JSONValue.string(text).serialize(into: &$0) }
                o.staged("f") { stage in JSONObjectWriter.write(into: &stage) { $0.string("g", text) } }
                o.value("h", nil)
            }
            let expected = Array("x".utf8) + Self.reference(["a": value, "b": .string(text), "d": .int(n), "e": .string(text), "f": ["g": .string(text)]])
            #expect(bytes == expected, "string \(n)")
        }
    }

    /// The wire types written at every round trip, with odd strings and
    /// arguments: what their values serialize to, by the plain writer.
    @Test func roundTripWireTypesAreTheirValuesText() {
        let arguments: [JSONValue] = [["i": 0], [:], [], "not an object", 3, nil, ["text": .string(Self.strings[2])],
                                      .string(String(repeating: "é\"", count: 3_000)), ["big": .array(Self.strings.map { .string($0) })]]
        let odd = ["c1", "call \"x\" é", "", String(repeating: "🙂", count: 600), "\u{1}\n"]
        for (n, argument) in arguments.enumerated() {
            let id = odd[n % odd.count]
            let name = odd[(n + 1) % odd.count]
            let record = ToolCallRecord(callId: id, name: name, arguments: argument)
            let entries = [
                TranscriptEntry(id: "e\(n)", turnId: id, .toolCalls(calls: [record, record], profile: name, text: n % 2 == 0 ? nil : name)),
                TranscriptEntry(id: id, turnId: nil, .toolOutput(callId: id, name: name, outcome: .ok, content: argument, profile: name, approvedArguments: n % 3 == 0 ? argument : nil)),
            ]
            for entry in entries {
                var bytes: [UInt8] = []
                entry.serialize(into: &bytes)
                #expect(bytes == Self.reference(entry.json), "entry \(n)")
            }
            let payloads: [any SessionEventPayload] = [
                SessionEvent.ToolCallStarted(callId: id, name: name, arguments: argument, source: n % 2 == 0 ? nil : ToolSource(mcp: name)),
                SessionEvent.ToolCallFinished(callId: id, name: name, outcome: .failed, content: argument),
                SessionEvent.RequestStarted(roundTrip: n, profile: name, provider: id, model: name, contextWindowTokens: n % 2 == 0 ? nil : n),
            ]
            for payload in payloads {
                var bytes: [UInt8] = []
                payload.writeEventJSON(into: &bytes)
                #expect(bytes == Self.reference(payload.eventJSON), "\(type(of: payload).type) \(n)")
                let tail = SessionEventParams.tail(sessionId: name, turnId: n % 2 == 0 ? nil : id)
                var params: [UInt8] = []
                SessionEventParams.write(seq: n, tail: tail, into: &params) { payload.writeEventJSON(into: &$0) }
                let event = SessionEventParams(sessionId: name, turnId: n % 2 == 0 ? nil : id, seq: n, event: SessionEvent(payload))
                #expect(params == Self.reference(event.json), "params of \(type(of: payload).type) \(n)")
            }
            let call = ToolCallParams(
                sessionId: name, turnId: id, callId: id, name: name, arguments: argument, revision: n, idempotencyKey: id + name,
                attempt: n % 2 == 0 ? nil : n, inDoubt: n % 2 == 0 ? nil : true)
            var bytes: [UInt8] = []
            call.write(into: &bytes)
            #expect(bytes == Self.reference(call.json), "tool/call \(n)")
        }
    }
}
