import AgentRPCProtocol

/// Reads a few members of one streamed chunk's JSON straight from its bytes,
/// for the chunks a stream is made of (a text delta): no `JSONValue` tree, no
/// dictionary per object, keys compared as bytes. Strings, numbers and the
/// values passed over go through `JSONTextParser`, so what is accepted is what
/// `JSONValue.parse` accepts.
///
/// It only recognises: anything it was not written for (an escaped or
/// non-ASCII key, a member of an unexpected type, a repeated member it reads,
/// invalid JSON) makes `read` return nil, and the decoder then parses the chunk
/// as before, so errors and unusual chunks behave exactly as they did.
///
/// A decoder walks a chunk with plain loops (`enterObject` then `nextKey`
/// until nil, `enterArray` then `nextElement` until false): no closure per
/// object, so what it reads stays in its own locals.
struct StreamChunkReader {
    /// The chunk is not one this reader recognises.
    struct Unrecognised: Error {}

    private var parser: JSONTextParser
    /// The cursor is just inside an object or array: no comma before its first member.
    private var atFirst = false

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        // Lone surrogates are kept as markers, as `DecoderJSON.parsePayload` keeps them.
        parser = JSONTextParser(bytes, loneSurrogates: .mark)
    }

    /// Runs `body` over the JSON text `data` (one value, whitespace around it
    /// allowed); nil when `body` or the text is not recognised. The bytes are
    /// an SSE event's as they arrived: a string with invalid UTF-8 is not
    /// recognised (`parseString` refuses it), so the decoder's full parse
    /// reads it from the repaired text, as it always has.
    static func read<T>(_ data: UnsafeBufferPointer<UInt8>, _ body: (inout StreamChunkReader) throws(Unrecognised) -> T) -> T? {
        var reader = StreamChunkReader(data)
        do {
            reader.skipSpace()
            let value = try body(&reader)
            reader.skipSpace()
            return reader.parser.index == data.count ? value : nil
        } catch {
            return nil
        }
    }

    /// The next value's first byte.
    private var next: UInt8? { parser.index < parser.bytes.count ? parser.bytes[parser.index] : nil }

    /// Whitespace, which the providers' compact JSON rarely has: checked here
    /// before the parser's loop is called.
    @inline(__always) private mutating func skipSpace() {
        if let b = next, b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { parser.skipWhitespace() }
    }

    /// Opens the object at the cursor; then `nextKey` until it returns nil.
    mutating func enterObject() throws(Unrecognised) {
        guard next == UInt8(ascii: "{") else { throw Unrecognised() }
        do { try parser.enter() } catch { throw Unrecognised() }
        parser.index += 1
        atFirst = true
    }

    /// The next member's key, the cursor then at its value, which the caller
    /// must read or skip; nil at the end of the object (read past it).
    mutating func nextKey() throws(Unrecognised) -> Key? {
        guard try more(closing: UInt8(ascii: "}")) else { return nil }
        let key = try rawKey()
        skipSpace()
        guard next == UInt8(ascii: ":") else { throw Unrecognised() }
        parser.index += 1
        skipSpace()
        return key
    }

    /// Opens the array at the cursor; then `nextElement` until it returns false.
    mutating func enterArray() throws(Unrecognised) {
        guard next == UInt8(ascii: "[") else { throw Unrecognised() }
        do { try parser.enter() } catch { throw Unrecognised() }
        parser.index += 1
        atFirst = true
    }

    /// Whether an element follows, the cursor then at it (the caller must read
    /// or skip it); false at the end of the array (read past it).
    mutating func nextElement() throws(Unrecognised) -> Bool {
        let more = try more(closing: UInt8(ascii: "]"))
        if more { skipSpace() }
        return more
    }

    /// Past the separator before the next member or element: true when one
    /// follows, false after the closing bracket.
    private mutating func more(closing: UInt8) throws(Unrecognised) -> Bool {
        skipSpace()
        if atFirst {
            atFirst = false
        } else if next == UInt8(ascii: ",") {
            parser.index += 1
            skipSpace()
            return true
        } else if next != closing {
            throw Unrecognised()
        }
        guard next == closing else { return true }
        parser.index += 1
        parser.leave()
        return false
    }

    /// A string, or nil for `null`; anything else is not recognised.
    mutating func stringOrNull() throws(Unrecognised) -> String? {
        switch next {
        case UInt8(ascii: "\""):
            do { return try parser.parseString() } catch { throw Unrecognised() }
        case UInt8(ascii: "n"):
            try skip()
            return nil
        default:
            throw Unrecognised()
        }
    }

    /// A string; anything else is not recognised.
    mutating func string() throws(Unrecognised) -> String {
        guard next == UInt8(ascii: "\""), let s = try stringOrNull() else { throw Unrecognised() }
        return s
    }

    /// Whether the string at the cursor is `name` (read past it), compared as
    /// bytes when it is plain ASCII, as a string otherwise (so it is equal
    /// exactly when `string() == name` would be); anything but a string is
    /// not recognised. An event's type, read without making a string of it.
    mutating func string(is name: StaticString) throws(Unrecognised) -> Bool {
        try string(is: name, or: name) != nil
    }

    /// Which of `first` (0) and `second` (1) the string at the cursor is (read
    /// past it), nil for any other string; compared as `string(is:)` compares.
    /// A delta's type, read without making a string of it.
    mutating func string(is first: StaticString, or second: StaticString) throws(Unrecognised) -> Int? {
        guard next == UInt8(ascii: "\"") else { throw Unrecognised() }
        if let plain = plainString() {
            let key = Key(bytes: plain)
            return key == first ? 0 : key == second ? 1 : nil
        }
        let text = try string()
        return text == first.description ? 0 : text == second.description ? 1 : nil
    }

    /// Whether the value at the cursor is `null` (then read past it).
    mutating func skipNull() throws(Unrecognised) -> Bool {
        guard next == UInt8(ascii: "n") else { return false }
        try skip()
        return true
    }

    /// Any value, as `JSONValue.parse` builds it.
    mutating func value() throws(Unrecognised) -> JSONValue {
        do { return try parser.parseValue() } catch { throw Unrecognised() }
    }

    /// The value's `JSONValue.intValue`, as the full decoder reads an index: a
    /// plain integer of a few digits (nearly every index) read from its
    /// bytes, anything else through `value()`.
    mutating func intValue() throws(Unrecognised) -> Int? {
        let bytes = parser.bytes
        var i = parser.index
        var magnitude = 0
        // At most nine digits, no sign, no leading zero: no overflow, and the
        // number is exactly this integer when neither a fraction nor an exponent follows.
        while i < bytes.count, i - parser.index < 9, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") {
            magnitude = magnitude * 10 + Int(bytes[i] - UInt8(ascii: "0"))
            i += 1
        }
        let digits = i - parser.index
        let ends = i < bytes.count && !(bytes[i] >= UInt8(ascii: "0") && bytes[i] <= UInt8(ascii: "9"))
            && bytes[i] != UInt8(ascii: ".") && bytes[i] != UInt8(ascii: "e") && bytes[i] != UInt8(ascii: "E")
        guard digits > 0, ends, digits == 1 || bytes[parser.index] != UInt8(ascii: "0") else { return try value().intValue }
        parser.index = i
        return magnitude
    }

    /// Reads past any value.
    mutating func skip() throws(Unrecognised) {
        do { try parser.skipValue() } catch { throw Unrecognised() }
    }

    /// The bytes between the quotes of the string at the cursor, read past it,
    /// when they are printable ASCII without an escape (the string is then
    /// exactly those bytes); else nil and the cursor stays.
    private mutating func plainString() -> UnsafeBufferPointer<UInt8>? { parser.plainString() }

    /// A member's key, as the bytes between its quotes. A key with an escape,
    /// a control character or a non-ASCII byte is not recognised (none of the
    /// providers' keys has one), so two spellings of one key cannot both pass.
    private mutating func rawKey() throws(Unrecognised) -> Key {
        guard next == UInt8(ascii: "\""), let bytes = plainString() else { throw Unrecognised() }
        return Key(bytes: bytes)
    }

    /// Marks a member a reader takes at most once (then written straight
    /// where it goes, no `ReadOnce` copy): a repeated one is not recognised.
    static func firstTime(_ seen: inout Bool) throws(Unrecognised) {
        if seen { throw Unrecognised() }
        seen = true
    }

    /// A member's key, compared with the names a decoder reads.
    struct Key {
        let bytes: UnsafeBufferPointer<UInt8>

        static func == (key: Key, name: StaticString) -> Bool { key.bytes.equals(name) }

        static func ~= (name: StaticString, key: Key) -> Bool { key == name }
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether these bytes are `name`'s UTF-8.
    func equals(_ name: StaticString) -> Bool {
        let count = name.utf8CodeUnitCount
        guard self.count == count else { return false }
        let p = name.utf8Start
        for i in 0..<count where self[i] != p[i] { return false }
        return true
    }
}

/// A member a chunk reader takes at most once: a repeated one is not recognised
/// (the full parse keeps the last, and the decoder would read that).
struct ReadOnce<Value> {
    private(set) var value: Value?
    private var seen = false

    mutating func set(_ new: Value?) throws(StreamChunkReader.Unrecognised) {
        try StreamChunkReader.firstTime(&seen)
        value = new
    }

    var wasSeen: Bool { seen }
}
