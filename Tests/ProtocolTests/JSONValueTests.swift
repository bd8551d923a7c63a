import Testing
@testable import AgentRPCProtocol

@Suite struct JSONValueTests {
    @Test func integersAndDoublesStayApart() throws {
        #expect(try JSONValue.parse("1") == .int(1))
        #expect(try JSONValue.parse("1.0") == .double(1.0))
        #expect(try JSONValue.parse("-0") == .int(0))
        #expect(try JSONValue.parse("1e2") == .double(100))
        #expect(JSONValue.int(1).serializedString() == "1")
        #expect(JSONValue.double(1).serializedString() == "1.0")
        #expect(JSONValue.double(0.1).serializedString() == "0.1")
        #expect(try JSONValue.parse("9223372036854775807") == .int(Int.max))
        #expect(try JSONValue.parse("9223372036854775808") == .double(9223372036854775808))
    }

    @Test func integersSerializeAsPlainDecimals() throws {
        let cases: [(Int, String)] = [
            (0, "0"), (7, "7"), (-7, "-7"), (10, "10"), (1_000_000, "1000000"), (-120, "-120"),
            (Int.max, "9223372036854775807"), (Int.min, "-9223372036854775808"),
        ]
        for (value, text) in cases {
            #expect(JSONValue.int(value).serializedString() == text)
            #expect(try JSONValue.parse(text) == .int(value))
        }
        #expect(JSONValue.array([true, false, nil, -1]).serializedString() == "[true,false,null,-1]")
    }

    @Test func roundTripsStringsWithEscapes() throws {
        let text = #"{"a":"line\nbreak \"q\" \\ \u0001 é 😀","b":[true,false,null]}"#
        let v = try JSONValue.parse(text)
        #expect(v["a"] == .string("line\nbreak \"q\" \\ \u{01} é 😀"))
        #expect(try JSONValue.parse(v.serializedString()) == v)
        #expect(try JSONValue.parse(#""\ud83d\ude00""#) == .string("😀"))
    }

    @Test func sortedKeysAreDeterministic() {
        let v: JSONValue = ["b": 1, "a": ["y": 2, "x": 3]]
        #expect(v.serializedString() == #"{"a":{"x":3,"y":2},"b":1}"#)
    }

    /// Members come out in the order of `String`'s `<` on their keys, for any
    /// size and for keys that differ only after non-ASCII text.
    @Test func membersAreWrittenInKeyOrder() throws {
        let keys = ["", "a", "B", "é", "e\u{301}x", "😀", "z", "aa", "a\"b", "Z9"] + (0..<40).map { "k\($0 * 7919 % 100)" }
        for count in [0, 1, 2, 5, keys.count] {
            var object: [String: JSONValue] = [:]
            for (i, key) in keys.prefix(count).enumerated() { object[key] = .int(i) }
            var expected = "{"
            for (i, key) in object.keys.sorted().enumerated() {
                if i > 0 { expected += "," }
                expected += JSONValue.string(key).serializedString() + ":" + (object[key] ?? .null).serializedString()
            }
            expected += "}"
            #expect(JSONValue.object(object).serializedString() == expected)
        }
    }

    @Test(arguments: ["", "{", "[1,]", "{\"a\" 1}", "tru", "01", "1.", "\"\\x\"", "\"\\ud800\"", "[1] x", "\"a\u{01}\""])
    func rejectsMalformedText(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(text) }
    }

    @Test func refusesExcessiveNesting() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(deep) }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse([0x22, 0xFF, 0x22]) }
        // After ASCII, in a key, and in an escaped string (each takes its own path).
        #expect(throws: JSONParseError.self) { try JSONValue.parse([0x22, 0x61, 0x62, 0xC3, 0x22]) }
        #expect(throws: JSONParseError.self) { try JSONValue.parse([0x7B, 0x22, 0xFE, 0x22, 0x3A, 0x31, 0x7D]) }
        #expect(throws: JSONParseError.self) { try JSONValue.parse([0x22, 0x5C, 0x6E, 0xFF, 0x22]) }
    }

    /// Integers are read without a detour through text: every length up to the
    /// largest `Int` stays exact, and what does not fit becomes a double.
    @Test func integersOfEveryLengthParseExactly() throws {
        var value = 0
        for digit in 1...18 {
            value = value * 10 + digit % 10
            #expect(try JSONValue.parse("\(value)") == .int(value))
            #expect(try JSONValue.parse("-\(value)") == .int(-value))
            #expect(try JSONValue.parse("[\(value),\(value)]") == [.int(value), .int(value)])
        }
        #expect(try JSONValue.parse("1234567890123456789") == .int(1_234_567_890_123_456_789))
        #expect(try JSONValue.parse("-9223372036854775808") == .int(Int.min))
        #expect(try JSONValue.parse("-9223372036854775809") == .double(-9.223372036854775808e18))
        #expect(try JSONValue.parse("123456789012345678.5") == .double(123456789012345678.5))
        #expect(try JSONValue.parse("12e3") == .double(12000))
        #expect(try JSONValue.parse("-12E-1") == .double(-1.2))
        #expect(try JSONValue.parse("{\"a\":7}") == ["a": 7])
    }

    /// `parseMembers` answers a top-level object's members in document order,
    /// reads like the parsed object (a repeated key keeps its last value), and
    /// refuses anything that is not exactly one object.
    @Test func membersOfATopLevelObject() throws {
        let text = #" {"b":1,"a":{"x":[1,{"y":2}]},"b":3,"c":"é"} "#
        let m = try JSONValue.parseMembers(Array(text.utf8))
        #expect(m.members.map(\.key) == ["b", "a", "b", "c"])
        let object = try JSONValue.parse(text)
        for key in ["a", "b", "c", "missing"] { #expect(m[key] == object[key]) }
        #expect(m["b"] == 3)
        #expect(try JSONValue.parseMembers(Array("{}".utf8)).members.isEmpty)
        for bad in ["[1]", "1", "{\"a\":1} x", "{\"a\":}", "", "{\"a\":1"] {
            #expect(throws: JSONParseError.self) { try JSONValue.parseMembers(Array(bad.utf8)) }
        }
    }

    /// Objects are built once their members are known: nesting, repeated keys
    /// (the last wins) and empty objects come out as they were written.
    @Test func objectsKeepTheirMembersAtEveryDepth() throws {
        let v = try JSONValue.parse(#"{"a":{"b":{},"c":[{"d":1,"e":2},{}],"b":{"f":"é"}},"g":3,"a2":{"x":1,"x":2}}"#)
        #expect(v == ["a": ["b": ["f": "é"], "c": [["d": 1, "e": 2], [:]]], "g": 3, "a2": ["x": 2]])
    }
}
