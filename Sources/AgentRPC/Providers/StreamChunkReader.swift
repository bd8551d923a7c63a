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
struct StreamChunkReader {
    /// The chunk is not one this reader recognises.
    struct Unrecognised: Error {}

    private var parser: JSONTextParser

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
            reader.parser.skipWhitespace()
            let value = try body(&reader)
            reader.parser.skipWhitespace()
            return reader.parser.index == data.count ? value : nil
        } catch {
            return nil
        }
    }

    /// The next value's first byte.
    private var next: UInt8? { parser.index < parser.bytes.count ? parser.bytes[parser.index] : nil }

    /// Calls `member` with each key of the object at the cursor, which must
    /// read or skip that member's value.
    mutating func members(_ member: (inout StreamChunkReader, Key) throws(Unrecognised) -> Void) throws(Unrecognised) {
        guard next == UInt8(ascii: "{") else { throw Unrecognised() }
        do { try parser.enter() } catch { throw Unrecognised() }
        parser.index += 1
        parser.skipWhitespace()
        if next == UInt8(ascii: "}") {
            parser.index += 1
            parser.leave()
            return
        }
        while true {
            parser.skipWhitespace()
            let key = try rawKey()
            parser.skipWhitespace()
            guard next == UInt8(ascii: ":") else { throw Unrecognised() }
            parser.index += 1
            parser.skipWhitespace()
            try member(&self, key)
            parser.skipWhitespace()
            switch next {
            case UInt8(ascii: ","): parser.index += 1
            case UInt8(ascii: "}"):
                parser.index += 1
                parser.leave()
                return
            default: throw Unrecognised()
            }
        }
    }

    /// Calls `element` for each element of the array at the cursor, which must
    /// read or skip it.
    mutating func elements(_ element: (inout StreamChunkReader) throws(Unrecognised) -> Void) throws(Unrecognised) {
        guard next == UInt8(ascii: "[") else { throw Unrecognised() }
        do { try parser.enter() } catch { throw Unrecognised() }
        parser.index += 1
        parser.skipWhitespace()
        if next == UInt8(ascii: "]") {
            parser.index += 1
            parser.leave()
            return
        }
        while true {
            parser.skipWhitespace()
            try element(&self)
            parser.skipWhitespace()
            switch next {
            case UInt8(ascii: ","): parser.index += 1
            case UInt8(ascii: "]"):
                parser.index += 1
                parser.leave()
                return
            default: throw Unrecognised()
            }
        }
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

    /// Whether the value at the cursor is `null` (then read past it).
    mutating func skipNull() throws(Unrecognised) -> Bool {
        guard next == UInt8(ascii: "n") else { return false }
        try skip()
        return true
    }

    /// Any value, as `JSONValue.parse` builds it: for a small member read the
    /// way the full decoder reads it (an index).
    mutating func value() throws(Unrecognised) -> JSONValue {
        do { return try parser.parseValue() } catch { throw Unrecognised() }
    }

    /// Reads past any value.
    mutating func skip() throws(Unrecognised) {
        do { try parser.skipValue() } catch { throw Unrecognised() }
    }

    /// A member's key, as the bytes between its quotes. A key with an escape,
    /// a control character or a non-ASCII byte is not recognised (none of the
    /// providers' keys has one), so two spellings of one key cannot both pass.
    private mutating func rawKey() throws(Unrecognised) -> Key {
        guard next == UInt8(ascii: "\"") else { throw Unrecognised() }
        let start = parser.index + 1
        var i = start
        let bytes = parser.bytes
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                parser.index = i + 1
                return Key(bytes: UnsafeBufferPointer(rebasing: bytes[start..<i]))
            }
            if b == UInt8(ascii: "\\") || b < 0x20 || b >= 0x80 { throw Unrecognised() }
            i += 1
        }
        throw Unrecognised()
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
        if seen { throw StreamChunkReader.Unrecognised() }
        seen = true
        value = new
    }

    var wasSeen: Bool { seen }
}
