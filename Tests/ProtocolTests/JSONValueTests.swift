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
    }
}
