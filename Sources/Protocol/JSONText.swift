/// A JSON text could not be parsed. `offset` is the byte position of the problem.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var offset: Int
    public var description: String { "\(message) at byte \(offset)" }
}

extension JSONValue {
    /// Nesting deeper than this is refused rather than risking the stack.
    public static let maximumNestingDepth = 512

    /// What the parser does with a `\uD800`–`\uDFFF` escape that is not half of a pair.
    public enum LoneSurrogates: Sendable {
        /// The document is invalid (a Swift string cannot hold the code unit).
        case reject
        /// The surrogate becomes the marker scalar `loneSurrogateMarkerBase + (unit - 0xD800)`,
        /// so a caller that knows the string continues elsewhere (a streamed delta whose
        /// pair was split across two JSON documents) can rejoin it; see `loneSurrogate(in:)`.
        case mark
    }

    /// First of the 2,048 scalars (U+10F800…U+10FFFF, the top of plane 16's private use
    /// area and its two noncharacters) standing for lone surrogates under `.mark`.
    public static let loneSurrogateMarkerBase: UInt32 = 0x10F800

    /// The surrogate code unit a `.mark` marker stands for, or nil for any other scalar.
    public static func loneSurrogate(in scalar: Unicode.Scalar) -> UInt32? {
        scalar.value >= loneSurrogateMarkerBase ? 0xD800 + (scalar.value - loneSurrogateMarkerBase) : nil
    }

    /// Parses one JSON text (RFC 8259) from UTF-8 bytes. Surrounding whitespace is
    /// allowed; anything else after the value is an error.
    public static func parse<Bytes: Collection>(
        _ bytes: Bytes, loneSurrogates: LoneSurrogates = .reject
    ) throws(JSONParseError) -> JSONValue
    where Bytes.Element == UInt8 {
        if let result = bytes.withContiguousStorageIfAvailable({ buffer in
            Result { () throws(JSONParseError) -> JSONValue in
                var parser = JSONTextParser(buffer, loneSurrogates: loneSurrogates)
                return try parser.parseDocument()
            }
        }) {
            return try result.get()
        }
        let copy = Array(bytes)
        return try copy.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            var parser = JSONTextParser(buffer, loneSurrogates: loneSurrogates)
            return try parser.parseDocument()
        }
    }

    /// Parses one JSON text (RFC 8259) that must be an object, into its members
    /// in document order, without building the top-level dictionary: for a
    /// caller that reads a few known members once (a journal's records), which
    /// saves hashing every key twice. Nested objects are `JSONValue`s as usual.
    public static func parseMembers<Bytes: Collection>(_ bytes: Bytes) throws(JSONParseError) -> JSONMembers
    where Bytes.Element == UInt8 {
        func run(_ buffer: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> JSONMembers {
            var parser = JSONTextParser(buffer, loneSurrogates: .reject)
            return try parser.parseMembersDocument()
        }
        if let result = bytes.withContiguousStorageIfAvailable({ buffer in Result { () throws(JSONParseError) in try run(buffer) } }) {
            return try result.get()
        }
        let copy = Array(bytes)
        return try copy.withUnsafeBufferPointer { buffer throws(JSONParseError) in try run(buffer) }
    }

    /// Parses a JSON text held in a string.
    public static func parse(_ text: String, loneSurrogates: LoneSurrogates = .reject) throws(JSONParseError) -> JSONValue {
        try parse(text.utf8, loneSurrogates: loneSurrogates)
    }

    /// Compact JSON as UTF-8 bytes, objects with sorted keys.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        JSONTextWriter.write(self, into: &out)
        return out
    }

    /// Appends the compact JSON form to `out`.
    public func serialize(into out: inout [UInt8]) {
        JSONTextWriter.write(self, into: &out)
    }

    /// Compact JSON text, objects with sorted keys.
    public func serializedString() -> String {
        // Made from the stage when the text fits it: no array between.
        JSONStage.text { $0.value(self) }
    }
}

/// The members of a JSON object in document order (see `JSONValue.parseMembers`).
public struct JSONMembers: Sendable {
    public var members: [(key: String, value: JSONValue)]

    public init(_ members: [(key: String, value: JSONValue)]) { self.members = members }

    /// The member's value; a repeated key has its last value, as in a parsed object.
    public subscript(key: String) -> JSONValue? {
        var i = members.count
        while i > 0 {
            i -= 1
            if members[i].key == key { return members[i].value }
        }
        return nil
    }

    /// The object of these members (keys distinct).
    public var object: JSONValue { .object(Dictionary(members, uniquingKeysWith: { _, last in last })) }

    /// Appends `object`'s JSON text as `serialize(into:)` writes it (members
    /// sorted by key) without building its dictionary: a wire type that lists
    /// its members once gets both its value and its bytes from them. Keys
    /// must be distinct.
    public func serialize(into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        withUnsafeTemporaryAllocation(of: Int.self, capacity: members.count) { buffer in
            var order = buffer
            for i in members.indices { order.initializeElement(at: i, to: i) }
            order.sort { members[$0].key < members[$1].key }
            for (n, i) in order.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                JSONTextWriter.writeString(members[i].key, into: &out)
                out.append(UInt8(ascii: ":"))
                JSONTextWriter.write(members[i].value, into: &out)
            }
        }
        out.append(UInt8(ascii: "}"))
    }
}

/// Writes an object's JSON text member by member, straight into a buffer:
/// for wire types written at every event, which list their members in the
/// sorted key order `JSONValue.serialize` writes (checked in debug builds),
/// instead of building a dictionary or a list of members to sort. Written
/// through a `JSONStage`: a member is a few stores, not five appends.
package struct JSONObjectWriter {
    private var stage: JSONStage
    private var count = 0
    #if DEBUG
    private var lastKey = ""
    #endif

    private init(stage: consuming JSONStage) { self.stage = stage }

    /// Appends `{`, what `body` writes, and `}` to `out`.
    package static func write(into out: inout [UInt8], _ body: (inout JSONObjectWriter) -> Void) {
        JSONStage.write(into: &out) { write(into: &$0, body) }
    }

    /// Writes `{`, what `body` writes, and `}` into a stage already open.
    package static func write(into stage: inout JSONStage, _ body: (inout JSONObjectWriter) -> Void) {
        // The stage (and the array in it) is moved in and out, never copied:
        // a copy would share the array, and its next append copy it whole.
        var writer = JSONObjectWriter(stage: stage.placeholder)
        swap(&writer.stage, &stage)
        writer.stage.byte(UInt8(ascii: "{"))
        body(&writer)
        writer.stage.byte(UInt8(ascii: "}"))
        swap(&writer.stage, &stage)
    }

    /// Starts a member: the comma before it, its key and colon.
    package mutating func key(_ key: StaticString) {
        #if DEBUG
        let name = key.description
        assert(count == 0 || lastKey < name, "members out of order: \(lastKey) before \(name)")
        lastKey = name
        #endif
        stage.key(key, first: count == 0)
        count += 1
    }

    /// A string member; nothing when `value` is nil.
    package mutating func string(_ key: StaticString, _ value: String?) {
        guard let value else { return }
        self.key(key)
        stage.string(value)
    }

    /// An integer member; nothing when `value` is nil.
    package mutating func int(_ key: StaticString, _ value: Int?) {
        guard let value else { return }
        self.key(key)
        stage.int(value)
    }

    /// Any member; nothing when `value` is nil (a JSON null is `.null`).
    package mutating func value(_ key: StaticString, _ value: JSONValue?) {
        guard let value else { return }
        self.key(key)
        stage.value(value)
    }

    /// A member whose value `write` appends as JSON text.
    package mutating func member(_ key: StaticString, _ write: (inout [UInt8]) -> Void) {
        self.key(key)
        stage.direct(write)
    }

    /// A member whose value `write` writes into the stage.
    package mutating func staged(_ key: StaticString, _ write: (inout JSONStage) -> Void) {
        self.key(key)
        write(&stage)
    }
}

extension Result where Failure == JSONParseError {
    fileprivate init(_ body: () throws(JSONParseError) -> Success) {
        do { self = .success(try body()) } catch { self = .failure(error) }
    }
}

/// The parser, visible inside the package for decoders that read their own
/// types straight from JSON text (the session journal's records) and take
/// free-form values, strings and numbers from here, so the rules are the same.
package struct JSONTextParser {
    package let bytes: UnsafeBufferPointer<UInt8>
    package var index = 0
    /// Objects and arrays open around `index`; a decoder that opens one itself
    /// calls `enter()` and `leave()` so the nesting bound counts it.
    package var depth = 0
    let loneSurrogates: JSONValue.LoneSurrogates
    /// The members of the objects being parsed, innermost last: an object is
    /// built once its member count is known, at that capacity, instead of
    /// growing (and rehashing) its dictionary member by member.
    var members: [(String, JSONValue)] = []

    package init(_ bytes: UnsafeBufferPointer<UInt8>, loneSurrogates: JSONValue.LoneSurrogates) {
        self.bytes = bytes
        self.loneSurrogates = loneSurrogates
    }

    /// A lone surrogate: an error, or its marker scalar (see `JSONValue.LoneSurrogates`).
    func lone(_ unit: UInt32) throws(JSONParseError) -> UInt32 {
        guard loneSurrogates == .mark else { throw fail("unpaired surrogate") }
        return JSONValue.loneSurrogateMarkerBase + (unit - 0xD800)
    }

    package func fail(_ message: String) -> JSONParseError { JSONParseError(message: message, offset: index) }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if index != bytes.count { throw fail("unexpected data after the JSON value") }
        return value
    }

    package mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    package mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character")
        }
    }

    /// Reads past one value, accepting exactly what `parseValue` accepts (the
    /// same string, number and nesting rules) without building it: for a
    /// decoder that reads a few members of a document and passes over the rest.
    package mutating func skipValue() throws(JSONParseError) {
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            try enter()
            index += 1
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                leave()
                return
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                try skipString()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                index += 1
                skipWhitespace()
                try skipValue()
                skipWhitespace()
                guard index < bytes.count else { throw fail("unexpected end of input") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; break }
                throw fail("expected ',' or '}'")
            }
            leave()
        case UInt8(ascii: "["):
            try enter()
            index += 1
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                leave()
                return
            }
            while true {
                skipWhitespace()
                try skipValue()
                skipWhitespace()
                guard index < bytes.count else { throw fail("unexpected end of input") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; break }
                throw fail("expected ',' or ']'")
            }
            leave()
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): _ = try parseNumber()
        default: _ = try parseValue()  // a literal: nothing to build
        }
    }

    /// Reads past a string as `parseString` would. A string of printable ASCII
    /// without escapes (an id, a model name) is only scanned; any other is
    /// parsed, so its escapes and UTF-8 are checked by the same code.
    package mutating func skipString() throws(JSONParseError) {
        if plainString() == nil { _ = try parseString() }
    }

    /// The bytes between the quotes of the string at `index` (its opening
    /// quote), read past it, when they are printable ASCII without an escape
    /// (the string is then exactly those bytes); else nil, `index` unmoved.
    /// Eight bytes at a time: ids, model names and keys are most of what a
    /// streamed chunk's reader passes over.
    package mutating func plainString() -> UnsafeBufferPointer<UInt8>? {
        let start = index + 1
        var i = start
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while i + 8 <= bytes.count {
                // The first byte of the eight that is not plain (the closing
                // quote of a short key or id, most often) is found at once.
                let flags = JSONTextWriter.bytesToEscapeOrNonASCII(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
                if flags == 0 {
                    i += 8
                    continue
                }
                i += flags.trailingZeroBitCount / 8
                guard bytes[i] == UInt8(ascii: "\"") else { return nil }
                index = i + 1
                return UnsafeBufferPointer(rebasing: bytes[start..<i])
            }
        }
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                index = i + 1
                return UnsafeBufferPointer(rebasing: bytes[start..<i])
            }
            if b == UInt8(ascii: "\\") || b < 0x20 || b >= 0x80 { return nil }
            i += 1
        }
        return nil
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw fail("unexpected end of input") }
        let p = literal.utf8Start
        for i in 0..<count where bytes[index + i] != p[i] {
            throw fail("invalid literal")
        }
        index += count
    }

    package mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > JSONValue.maximumNestingDepth { throw fail("nesting too deep") }
    }

    package mutating func leave() { depth -= 1 }

    mutating func parseMembersDocument() throws(JSONParseError) -> JSONMembers {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "{") else { throw fail("expected an object") }
        let first = try parseMembers()
        let result = JSONMembers(members[first...].map { (key: $0.0, value: $0.1) })
        members.removeSubrange(first...)
        skipWhitespace()
        if index != bytes.count { throw fail("unexpected data after the JSON value") }
        return result
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        let first = try parseMembers()
        var object = [String: JSONValue](minimumCapacity: members.count - first)
        // In document order, so a repeated key keeps its last value.
        for i in first..<members.count { object[members[i].0] = members[i].1 }
        members.removeSubrange(first...)
        return .object(object)
    }

    /// Parses an object's members onto `members`; returns where they start.
    mutating func parseMembers() throws(JSONParseError) -> Int {
        try enter()
        index += 1
        skipWhitespace()
        let first = members.count
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return first
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipWhitespace()
            members.append((key, try parseValue()))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; break }
            throw fail("expected ',' or '}'")
        }
        depth -= 1
        return first
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        var array: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(array)
        }
        while true {
            skipWhitespace()
            array.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; break }
            throw fail("expected ',' or ']'")
        }
        depth -= 1
        return .array(array)
    }

    package mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes; validate UTF-8 once when building the String,
        // and not at all when every byte was ASCII (always valid UTF-8).
        var ascii = true
        // Eight bytes at a time while none of them is a quote, a backslash or
        // a control character (the bytes that end this path or are refused):
        // texts are most of what a journal or a frame holds, and a byte at a
        // time this scan was most of reading one.
        if let base = bytes.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            /// Whether a byte of `x` is zero (exact as a whole: a borrow only
            /// starts at a zero byte).
            @inline(__always) func hasZero(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highs }
            while bytes.count - index >= 8 {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
                // A byte below 0x20: the same borrow test, against 0x20 instead of 1.
                let control = (word &- ones &* 0x20) & ~word & highs
                if hasZero(word ^ (ones &* 0x22)) | hasZero(word ^ (ones &* 0x5C)) | control != 0 { break }
                if word & highs != 0 { ascii = false }
                index += 8
            }
        }
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                if ascii { return String(decoding: slice, as: UTF8.self) }
                guard let s = String(validating: slice, as: UTF8.self) else {
                    throw JSONParseError(message: "invalid UTF-8 in string", offset: start)
                }
                return s
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw fail("control character in string") }
            if b >= 0x80 { ascii = false }
            index += 1
        }
        var buffer = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let b = bytes[index]
            switch b {
            case UInt8(ascii: "\""):
                index += 1
                guard let s = String(validating: buffer, as: UTF8.self) else {
                    throw JSONParseError(message: "invalid UTF-8 in string", offset: start)
                }
                return s
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw fail("unexpected end of input") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): buffer.append(0x22)
                case UInt8(ascii: "\\"): buffer.append(0x5C)
                case UInt8(ascii: "/"): buffer.append(0x2F)
                case UInt8(ascii: "b"): buffer.append(0x08)
                case UInt8(ascii: "f"): buffer.append(0x0C)
                case UInt8(ascii: "n"): buffer.append(0x0A)
                case UInt8(ascii: "r"): buffer.append(0x0D)
                case UInt8(ascii: "t"): buffer.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        // A high surrogate pairs with an immediately following escaped low one.
                        if bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        {
                            let mark = index
                            index += 2
                            let low = try parseHex4()
                            if (0xDC00...0xDFFF).contains(low) {
                                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                            } else {
                                // Not a pair: the next escape is parsed on its own.
                                scalar = try lone(scalar)
                                index = mark
                            }
                        } else {
                            scalar = try lone(scalar)
                        }
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        scalar = try lone(scalar)
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("invalid unicode escape") }
                    buffer.append(contentsOf: Array(String(Character(u)).utf8))
                default:
                    throw fail("invalid escape")
                }
            default:
                if b < 0x20 { throw fail("control character in string") }
                buffer.append(b)
                index += 1
            }
        }
        throw fail("unterminated string")
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw fail("unexpected end of input") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("invalid hex digit")
            }
            v = v << 4 | d
            index += 1
        }
        return v
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        var isInteger = true
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard index < bytes.count else { throw fail("unexpected end of input") }
        // The integer part's value, while it has at most 18 digits (it cannot overflow).
        var magnitude = 0
        let integerDigits = index
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(bytes[index]) {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                if index - integerDigits < 18 { magnitude = magnitude * 10 + Int(bytes[index] - UInt8(ascii: "0")) }
                index += 1
            }
        } else {
            throw fail("invalid number")
        }
        if index - integerDigits <= 18, index == bytes.count
            || (bytes[index] != UInt8(ascii: ".") && bytes[index] != UInt8(ascii: "e") && bytes[index] != UInt8(ascii: "E"))
        {
            return .int(negative ? -magnitude : magnitude)
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            if index == digits { throw fail("invalid number") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            if index == digits { throw fail("invalid number") }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if isInteger, let i = Int(text) { return .int(i) }
        guard let d = Double(text) else { throw JSONParseError(message: "invalid number", offset: start) }
        return .double(d)
    }
}

enum JSONTextWriter {
    static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    static func write(_ value: JSONValue, into out: inout [UInt8]) {
        JSONStage.write(into: &out) { $0.value(value) }
    }

    static func appendLiteral(_ literal: StaticString, into out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Decimal digits without an intermediate String.
    static func writeInt(_ i: Int, into out: inout [UInt8]) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for a sign and 20 digits
        withUnsafeMutableBytes(of: &digits) { raw in
            let buffer = raw.bindMemory(to: UInt8.self)
            let start = formatInt(i, rightAlignedIn: buffer)
            // A buffer pointer, not a slice of the raw bytes: its append is a copy, not a generic loop.
            out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start...]))
        }
    }

    /// `writeInt` at `p` (room for 21 bytes needed); returns the bytes written.
    @inline(__always)
    static func writeInt(_ i: Int, to p: UnsafeMutablePointer<UInt8>) -> Int {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        return withUnsafeMutableBytes(of: &digits) { raw in
            let buffer = raw.bindMemory(to: UInt8.self)
            let start = formatInt(i, rightAlignedIn: buffer)
            let count = buffer.count - start
            if let base = buffer.baseAddress { p.update(from: base + start, count: count) }
            return count
        }
    }

    /// `i`'s decimal text written at the end of `buffer` (24 bytes); returns where it starts.
    @inline(__always)
    private static func formatInt(_ i: Int, rightAlignedIn buffer: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var start = buffer.count
        // Work with the magnitude so Int.min does not overflow.
        var magnitude = i.magnitude
        repeat {
            start -= 1
            buffer[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
        if i < 0 {
            start -= 1
            buffer[start] = UInt8(ascii: "-")
        }
        return start
    }

    static func writeDouble(_ d: Double, into out: inout [UInt8]) {
        guard d.isFinite else {
            // JSON has no NaN or infinity.
            out.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])
            return
        }
        // Swift prints the shortest text that round-trips, e.g. "0.1", "1e-07", "1.0".
        out.append(contentsOf: d.description.utf8)
    }

    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        writeStringContents(s, into: &out)
        out.append(UInt8(ascii: "\""))
    }

    /// `s` as the inside of a JSON string (escaped, without its quotes): a
    /// caller with a literal around it writes the quotes with the literal.
    static func writeStringContents(_ s: String, into out: inout [UInt8]) {
        var s = s
        s.withUTF8 { writeStringContents($0, into: &out) }
    }

    /// UTF-8 text as the inside of a JSON string.
    static func writeStringContents(_ buf: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        // Runs without an escape are appended whole; most strings are one run.
        var runStart = 0
        var i = firstByteToEscape(buf, from: 0)
        while i < buf.count {
            if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[runStart..<i])) }
            var escape: UInt64 = 0
            withUnsafeMutableBytes(of: &escape) { raw in
                let bytes = raw.bindMemory(to: UInt8.self)
                guard let base = bytes.baseAddress else { return }
                out.append(contentsOf: UnsafeBufferPointer(start: base, count: writeEscape(buf[i], to: base)))
            }
            runStart = i + 1
            i = firstByteToEscape(buf, from: runStart)
        }
        if runStart < buf.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[runStart..<buf.count])) }
    }

    /// The most bytes `writeStringContents` writes for one byte of text (`\u00XX`).
    static let maximumEscapedBytesPerByte = 6

    /// `writeStringContents` at `p`, which must have room for
    /// `maximumEscapedBytesPerByte` bytes per UTF-8 byte of `s`; returns the
    /// bytes written. For a writer that frames a message in memory of its own.
    static func writeStringContents(_ s: String, to p: UnsafeMutablePointer<UInt8>) -> Int {
        var s = s
        return s.withUTF8 { writeStringContents($0, to: p) }
    }

    /// UTF-8 text as the inside of a JSON string at `p` (room as above).
    @inline(__always)
    static func writeStringContents(_ buf: UnsafeBufferPointer<UInt8>, to p: UnsafeMutablePointer<UInt8>) -> Int {
        guard let source = buf.baseAddress else { return 0 }
        var written = 0
        var runStart = 0
        var i = firstByteToEscape(buf, from: 0)
        while i < buf.count {
            (p + written).update(from: source + runStart, count: i - runStart)
            written += i - runStart
            written += writeEscape(buf[i], to: p + written)
            runStart = i + 1
            i = firstByteToEscape(buf, from: runStart)
        }
        (p + written).update(from: source + runStart, count: buf.count - runStart)
        return written + buf.count - runStart
    }

    /// The escape of a byte `firstByteToEscape` stopped at (`\"`, `\n`, …,
    /// `\u00XX`), written at `p`; returns its length (2 or 6).
    @inline(__always)
    private static func writeEscape(_ b: UInt8, to p: UnsafeMutablePointer<UInt8>) -> Int {
        p[0] = 0x5C
        switch b {
        case 0x22, 0x5C: p[1] = b
        case 0x0A: p[1] = UInt8(ascii: "n")
        case 0x0D: p[1] = UInt8(ascii: "r")
        case 0x09: p[1] = UInt8(ascii: "t")
        case 0x08: p[1] = UInt8(ascii: "b")
        case 0x0C: p[1] = UInt8(ascii: "f")
        default:
            p[1] = UInt8(ascii: "u")
            p[2] = 0x30
            p[3] = 0x30
            p[4] = hex[Int(b >> 4)]
            p[5] = hex[Int(b & 0xF)]
            return 6
        }
        return 2
    }

    /// The position of the first byte from `start` on that a JSON string must
    /// escape (a control character, `"` or `\`), else `bytes.count`. Eight
    /// bytes are tested at a time: strings are written at every event, and
    /// nearly all their bytes need no escape.
    @inline(__always)
    static func firstByteToEscape(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var i = start
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            while i + 8 <= bytes.count, !anyByteToEscape(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { i += 8 }
        }
        while i < bytes.count {
            let b = bytes[i]
            if b < 0x20 || b == 0x22 || b == 0x5C { return i }
            i += 1
        }
        return bytes.count
    }

    /// The high bit of each byte of `word` (loaded little-endian) that is
    /// below 0x20, `"`, `\` or 0x80 and above, exact for the lowest such byte
    /// (a borrow only runs upwards from it); zero when there is none.
    @inline(__always)
    static func bytesToEscapeOrNonASCII(_ word: UInt64) -> UInt64 {
        (escapeFlags(word) | word) & 0x8080_8080_8080_8080
    }

    /// Whether one of the eight bytes of `word` is below 0x20, `"` or `\`
    /// (the "has a byte less than n" and "has a zero byte" bit tricks: exact
    /// for the question whether any byte is, bytes of 0x80 and above never are).
    @inline(__always)
    static func anyByteToEscape(_ word: UInt64) -> Bool {
        escapeFlags(word) & 0x8080_8080_8080_8080 != 0
    }

    /// In each byte's high bit (the rest is noise): the byte is below 0x20,
    /// `"` or `\`, or a lower byte was (a borrow).
    @inline(__always)
    private static func escapeFlags(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let control = (word &- ones &* 0x20) & ~word
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        return control | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)
    }
}
