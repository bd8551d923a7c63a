import Testing
@testable import AgentRPCProtocol

private enum Role: String, Codable, Hashable, JSONSchemaStringEnum {
    case user, assistant
}

private struct Line: Codable, Hashable {
    var role: Role
    var text: String
}

private struct Model: Codable, Hashable {
    var name: String
    var temperature: Double?
    var script: [Line]
}

private struct Config: Codable, Hashable {
    var model: Model
    var tags: [String]
    var limits: [String: Int]
    var named: [String: Line]
    var extra: JSONValue?
    var options: JSONValue
    var maybe: Line?
    var count: Int
    var ratio: Float
    var small: UInt8
}

private struct Numbers: Codable, Hashable {
    var i: Int
    var d: Double
}

/// Writes through every kind of container, the way hand-written Codable code does.
private struct Handwritten: Codable, Hashable {
    var a: Int
    var pair: [String]
    var inner: String
    var parent: String

    enum Keys: String, CodingKey { case a, pair, nested, inner, parent }

    init(a: Int, pair: [String], inner: String, parent: String) {
        self.a = a
        self.pair = pair
        self.inner = inner
        self.parent = parent
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        a = try c.decode(Int.self, forKey: .a)
        var u = try c.nestedUnkeyedContainer(forKey: .pair)
        pair = []
        while !u.isAtEnd { pair.append(try u.decode(String.self)) }
        let n = try c.nestedContainer(keyedBy: Keys.self, forKey: .nested)
        inner = try n.decode(String.self, forKey: .inner)
        parent = try c.superDecoder().singleValueContainer().decode(String.self)
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(a, forKey: .a)
        var u = c.nestedUnkeyedContainer(forKey: .pair)
        for p in pair { try u.encode(p) }
        var n = c.nestedContainer(keyedBy: Keys.self, forKey: .nested)
        try n.encode(inner, forKey: .inner)
        var s = c.superEncoder().singleValueContainer()
        try s.encode(parent)
    }
}

/// A type that validates in `init(from:)` with its own error.
private struct Positive: Decodable {
    struct NotPositive: Error, CustomStringConvertible {
        var description: String { "must be positive" }
    }
    var value: Int
    init(from decoder: any Decoder) throws {
        value = try decoder.singleValueContainer().decode(Int.self)
        guard value > 0 else { throw NotPositive() }
    }
}

private struct Holder: Decodable {
    var items: [Positive]
}

private func decode<T: Decodable>(_ type: T.Type, _ text: String, strict: Bool = false) throws -> T {
    try JSONValue.parse(text).decode(as: type, rejectUnknownKeys: strict)
}

/// The failure of decoding `text` as `type`, or nil if it decoded.
private func failure<T: Decodable>(_ type: T.Type, _ text: String, strict: Bool = false) throws -> JSONDecodingFailure? {
    let value = try JSONValue.parse(text)
    do throws(JSONDecodingFailure) {
        _ = try value.decode(as: type, rejectUnknownKeys: strict)
        return nil
    } catch {
        return error
    }
}

@Suite struct JSONValueCodingTests {
    fileprivate static let config = Config(
        model: Model(name: "m", temperature: 0.5, script: [Line(role: .user, text: "hi"), Line(role: .assistant, text: "yo")]),
        tags: ["a", "b"],
        limits: ["x": 1, "y": 2],
        named: ["k": Line(role: .user, text: "t")],
        extra: ["free": [1, 2.5, "s", nil, true]],
        options: .null,
        maybe: nil,
        count: 3,
        ratio: 0.1,
        small: 255
    )

    @Test func roundTripsNestedValues() throws {
        let json = try JSONValue(encoding: Self.config)
        #expect(json == [
            "model": ["name": "m", "temperature": 0.5, "script": [["role": "user", "text": "hi"], ["role": "assistant", "text": "yo"]]],
            "tags": ["a", "b"],
            "limits": ["x": 1, "y": 2],
            "named": ["k": ["role": "user", "text": "t"]],
            "extra": ["free": [1, 2.5, "s", nil, true]],
            "options": nil,
            "count": 3,
            "ratio": 0.1,
            "small": 255,
        ])
        #expect(try json.decode(as: Config.self, rejectUnknownKeys: true) == Self.config)
    }

    @Test func jsonValueFieldsAreVerbatim() throws {
        // `1` and `1.0` would collapse through a Bool/Int/Double probing detour.
        let value: JSONValue = ["extra": ["i": 1, "d": 1.0], "i": 1, "d": 2]
        struct Free: Codable, Hashable { var extra: JSONValue; var i: Int; var d: Double }
        let free = try value.decode(as: Free.self)
        #expect(free.extra == ["i": 1, "d": 1.0])
        #expect(free.d == 2)
        #expect(try JSONValue(encoding: free) == ["extra": ["i": 1, "d": 1.0], "i": 1, "d": 2.0])
        #expect(try JSONValue(encoding: JSONValue.double(3)) == .double(3))
    }

    @Test func integralDoublesStayDoubles() throws {
        #expect(try JSONValue(encoding: Numbers(i: 2, d: 2)) == ["i": .int(2), "d": .double(2)])
        #expect(try JSONValue(encoding: [1.0, 2.5]) == [.double(1), .double(2.5)])
        #expect(try JSONValue(encoding: Int64(-7)) == .int(-7))
    }

    @Test func nilOptionalsAreOmitted() throws {
        let json = try JSONValue(encoding: Model(name: "m", temperature: nil, script: []))
        #expect(json == ["name": "m", "script": []])
    }

    @Test func handwrittenContainersRoundTrip() throws {
        let value = Handwritten(a: 1, pair: ["x", "y"], inner: "in", parent: "p")
        let json = try JSONValue(encoding: value)
        #expect(json == ["a": 1, "pair": ["x", "y"], "nested": ["inner": "in"], "super": "p"])
        #expect(try json.decode(as: Handwritten.self, rejectUnknownKeys: true) == value)
    }

    @Test func unencodableValuesThrow() {
        #expect(throws: EncodingError.self) { try JSONValue(encoding: Double.nan) }
        #expect(throws: EncodingError.self) { try JSONValue(encoding: [Double.infinity]) }
        #expect(throws: EncodingError.self) { try JSONValue(encoding: UInt64.max) }
    }

    // MARK: strict types

    @Test func boolOnlyFromBool() throws {
        #expect(try decode(Bool.self, "true") == true)
        #expect(try failure(Bool.self, "1") == JSONDecodingFailure(path: "", message: "expected boolean, got integer"))
        #expect(try failure(Bool.self, "\"true\"")?.message == "expected boolean, got string")
    }

    @Test func stringOnlyFromString() throws {
        #expect(try decode(String.self, "\"s\"") == "s")
        #expect(try failure(String.self, "1")?.message == "expected string, got integer")
        #expect(try failure(String.self, "null")?.message == "expected string, got null")
        #expect(try failure(String.self, "[]")?.message == "expected string, got array")
    }

    @Test func integersFromIntegralNumbersInRange() throws {
        #expect(try decode(Int.self, "5") == 5)
        #expect(try decode(Int.self, "5.0") == 5)
        #expect(try decode(Int.self, "-2e3") == -2000)
        #expect(try decode(UInt8.self, "255") == 255)
        #expect(try decode(Int64.self, "-9223372036854775808") == Int64.min)
        #expect(try failure(Int.self, "5.5")?.message == "expected integer, got number 5.5")
        #expect(try failure(UInt8.self, "256")?.message == "integer 256 out of range for UInt8")
        #expect(try failure(UInt.self, "-1")?.message == "integer -1 out of range for UInt")
        #expect(try failure(Int.self, "1e30")?.message == "integer 1e+30 out of range for Int")
        #expect(try failure(Int.self, "\"5\"")?.message == "expected integer, got string")
        #expect(try failure(Int.self, "true")?.message == "expected integer, got boolean")
    }

    @Test func floatingPointFromAnyNumber() throws {
        #expect(try decode(Double.self, "3") == 3)
        #expect(try decode(Double.self, "3.25") == 3.25)
        #expect(try decode(Float.self, "0.5") == 0.5)
        #expect(try failure(Double.self, "\"3\"")?.message == "expected number, got string")
        #expect(try failure(Float.self, "1e300")?.message == "number 1e+300 out of range for Float")
    }

    @Test func optionalsFromAbsentOrNull() throws {
        #expect(try decode(Model.self, #"{"name":"m","script":[]}"#).temperature == nil)
        #expect(try decode(Model.self, #"{"name":"m","temperature":null,"script":[]}"#).temperature == nil)
        #expect(try decode(Model.self, #"{"name":"m","temperature":1,"script":[]}"#).temperature == 1)
        #expect(try decode([Int?].self, "[1,null]") == [1, nil])
        #expect(try failure(Model.self, #"{"name":"m","temperature":"hot","script":[]}"#)
            == JSONDecodingFailure(path: "temperature", message: "expected number, got string"))
    }

    @Test func stringEnumsListAcceptedValues() throws {
        #expect(try decode(Role.self, "\"user\"") == .user)
        #expect(try failure(Line.self, #"{"role":"bot","text":""}"#)
            == JSONDecodingFailure(path: "role", message: #"expected one of "user", "assistant", got "bot""#))
    }

    /// The decoder asks whether a type is a string enum only of a JSON string (the
    /// cast is costly the first time, `standardIntegerType`); any other value fails
    /// in the enum's own `init(from:)`, with the same message at the same path.
    @Test func stringEnumsFromOtherThanAStringFailAsAStringWould() throws {
        #expect(try failure(Line.self, #"{"role":1,"text":""}"#) == JSONDecodingFailure(path: "role", message: "expected string, got integer"))
        #expect(try failure(Line.self, #"{"role":null,"text":""}"#) == JSONDecodingFailure(path: "role", message: "expected string, got null"))
        #expect(try failure([Role].self, #"["user",{}]"#) == JSONDecodingFailure(path: "[1]", message: "expected string, got object"))
    }

    /// Every fixed-width integer of the standard library is recognised as an
    /// integer both ways (by identity, `standardIntegerType`), with its range.
    @Test func everyStandardIntegerTypeDecodesAndEncodes() throws {
        func roundTrip<I: FixedWidthInteger & Codable>(_: I.Type) throws {
            // JSON integers are `Int`s here: UInt64's top half is out of reach.
            let top = I.isSigned || I.bitWidth < 64 ? I.max : I(Int.max)
            #expect(try decode(I.self, "\(top)") == top)
            #expect(try decode(I.self, "7.0") == 7)
            #expect(try failure(I.self, "\"7\"")?.message == "expected integer, got string")
            if I.isSigned {
                #expect(try JSONValue(encoding: I(-7)) == .int(-7))
            } else {
                #expect(try failure(I.self, "-1")?.message == "integer -1 out of range for \(I.self)")
            }
            if I.bitWidth < 64 {
                #expect(try failure(I.self, "\(Int(I.max) + 1)")?.message == "integer \(Int(I.max) + 1) out of range for \(I.self)")
                #expect(try JSONValue(encoding: I.max) == .int(Int(I.max)))
            }
        }
        try roundTrip(Int.self)
        try roundTrip(Int8.self)
        try roundTrip(Int16.self)
        try roundTrip(Int32.self)
        try roundTrip(Int64.self)
        try roundTrip(UInt.self)
        try roundTrip(UInt8.self)
        try roundTrip(UInt16.self)
        try roundTrip(UInt32.self)
        try roundTrip(UInt64.self)
        #expect(throws: EncodingError.self) { try JSONValue(encoding: UInt.max) }
    }

    // MARK: error paths

    @Test func failuresNameTheirPath() throws {
        let text = #"{"name":"m","script":[{"role":"user","text":"a"},{"role":"user","text":"b"},{"role":"user","text":3}]}"#
        #expect(try failure(Model.self, text) == JSONDecodingFailure(path: "script[2].text", message: "expected string, got integer"))
        let nested = #"{"model":{"name":"m","script":[{"role":"user"}]}}"#
        #expect(try failure(Config.self, nested) == JSONDecodingFailure(path: "model.script[0].text", message: "missing required field"))
        #expect(try failure([[Int]].self, "[[1],[2,\"x\"]]") == JSONDecodingFailure(path: "[1][1]", message: "expected integer, got string"))
        #expect(try failure([String: Line].self, #"{"k":{"role":"user","text":null}}"#)
            == JSONDecodingFailure(path: "k.text", message: "expected string, got null"))
        #expect(try failure(Model.self, "[]") == JSONDecodingFailure(path: "", message: "expected object, got array"))
        #expect(try failure([Int].self, "{}") == JSONDecodingFailure(path: "", message: "expected array, got object"))
    }

    @Test func customErrorsKeepTheirPath() throws {
        #expect(try failure(Holder.self, #"{"items":[1,0]}"#) == JSONDecodingFailure(path: "items[1]", message: "must be positive"))
        // A DecodingError thrown by a custom init keeps its coding path and text.
        #expect(try failure(NullResult.self, "1") == JSONDecodingFailure(path: "", message: "expected null"))
        #expect(try failure(Handwritten.self, #"{"a":1,"pair":["x"]}"#) == JSONDecodingFailure(path: "nested", message: "missing required field"))
        #expect(JSONDecodingFailure(path: "a.b", message: "m").description == "a.b: m")
        #expect(JSONDecodingFailure(path: "", message: "m").description == "m")
    }

    // MARK: unknown keys

    @Test func unknownKeysAreIgnoredByDefault() throws {
        #expect(try decode(Line.self, #"{"role":"user","text":"","extra":1}"#) == Line(role: .user, text: ""))
    }

    @Test func unknownKeysAtTheRoot() throws {
        #expect(try failure(Line.self, #"{"role":"user","text":"","zeta":1,"alpha":2}"#, strict: true)
            == JSONDecodingFailure(path: "alpha", message: "unknown field"))
    }

    @Test func unknownKeysInNestedStructsArraysAndDictionaries() throws {
        let base = try JSONValue(encoding: Self.config)
        func strictFailure(_ edit: (inout [String: JSONValue]) -> Void) -> JSONDecodingFailure? {
            guard case .object(var o) = base else { return nil }
            edit(&o)
            do throws(JSONDecodingFailure) {
                _ = try JSONValue.object(o).decode(as: Config.self, rejectUnknownKeys: true)
                return nil
            } catch {
                return error
            }
        }
        #expect(strictFailure { _ in } == nil)
        #expect(strictFailure { $0["model"] = ["name": "m", "script": [], "temprature": 1] }
            == JSONDecodingFailure(path: "model.temprature", message: "unknown field"))
        #expect(strictFailure { $0["model"] = ["name": "m", "script": [["role": "user", "text": "", "bogus": true]]] }
            == JSONDecodingFailure(path: "model.script[0].bogus", message: "unknown field"))
        #expect(strictFailure { $0["named"] = ["k": ["role": "user", "text": "", "bogus": true]] }
            == JSONDecodingFailure(path: "named.k.bogus", message: "unknown field"))
        #expect(strictFailure { $0["maybe"] = ["role": "user", "text": "", "bogus": true] }
            == JSONDecodingFailure(path: "maybe.bogus", message: "unknown field"))
        // Dictionary keys are data, and JSONValue contents are free-form.
        #expect(strictFailure { $0["limits"] = ["anything": 1]; $0["options"] = ["whatever": ["deep": 1]] } == nil)
        // Null optional fields count as asked about.
        #expect(strictFailure { $0["maybe"] = nil; $0["extra"] = nil } == nil)
    }

    @Test func firstUnknownKeyIsSortedByPath() throws {
        let text = #"{"model":{"name":"m","script":[],"zz":1},"tags":[],"limits":{},"named":{},"options":1,"count":1,"ratio":1,"small":1,"b":1}"#
        #expect(try failure(Config.self, text, strict: true) == JSONDecodingFailure(path: "b", message: "unknown field"))
    }

    @Test func typesThatReadNothingRejectAllKeys() throws {
        #expect(try decode(Empty.self, "{}", strict: true) == Empty())
        #expect(try failure(Empty.self, #"{"x":1}"#, strict: true) == JSONDecodingFailure(path: "x", message: "unknown field"))
        #expect(try decode(Empty.self, #"{"x":1}"#) == Empty())
    }

    @Test func handwrittenContainersCountAsAsked() throws {
        let text = #"{"a":1,"pair":[],"nested":{"inner":"i","other":2},"super":"p"}"#
        #expect(try failure(Handwritten.self, text, strict: true) == JSONDecodingFailure(path: "nested.other", message: "unknown field"))
    }
}
