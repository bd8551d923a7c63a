/// Writes JSON text for an `inout [UInt8]` through a small buffer on the
/// stack: literals, escaped strings, numbers and whole values are written
/// there with plain pointer stores, and the buffer goes into the array with
/// one append when it fills up or the write ends.
///
/// An append to `[UInt8]` is a generic call (a uniqueness and capacity check,
/// then a copy) of about a hundred instructions; an event's or journal line's
/// dozen members made forty of them, most of a few bytes. Staged, an event is
/// one or two appends. What it writes is byte for byte what the
/// `JSONTextWriter` functions write (JSONStageTests pin it).
public struct JSONStage {
    /// The stage's size: an event's or journal line's members fit, and it is
    /// small enough for the stack.
    static let size = 1024

    /// The array written to: the caller's, moved in and out (`write(into:_:)`).
    private var out: [UInt8]
    private let stage: UnsafeMutablePointer<UInt8>
    /// Bytes in `stage` not yet appended to `out`.
    private var staged = 0

    private init(out: consuming [UInt8], stage: UnsafeMutablePointer<UInt8>) {
        self.out = out
        self.stage = stage
    }

    /// Bytes in the array so far, what is staged included.
    package var count: Int { out.count &+ staged }

    /// A stage that holds nothing, to swap with this one (moving it).
    var placeholder: JSONStage { JSONStage(out: [], stage: stage) }

    /// Appends to `out` what `body` writes.
    @inline(__always)
    package static func write(into out: inout [UInt8], _ body: (inout JSONStage) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: size) { buffer in
            guard let base = buffer.baseAddress else { return }
            // The array is moved in and out, never copied.
            var writer = JSONStage(out: [], stage: base)
            swap(&writer.out, &out)
            body(&writer)
            writer.flush()
            swap(&writer.out, &out)
        }
    }

    /// What `body` writes, as a string.
    package static func text(_ body: (inout JSONStage) -> Void) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: size) { buffer in
            guard let base = buffer.baseAddress else { return "" }
            var writer = JSONStage(out: [], stage: base)
            body(&writer)
            // Nothing was flushed: the text is all on the stage.
            if writer.out.isEmpty { return String(decoding: UnsafeBufferPointer(start: base, count: writer.staged), as: UTF8.self) }
            writer.flush()
            return String(decoding: writer.out, as: UTF8.self)
        }
    }

    /// One ASCII byte and `number` in decimal, as a string (an entry id `e12`):
    /// written digit by digit into a few bytes on the stack.
    package static func decimal(_ number: Int, after prefix: UInt8) -> String {
        var digits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)  // a prefix, a sign and 19 digits fit
        return withUnsafeMutableBytes(of: &digits) { raw in
            let buffer = raw.bindMemory(to: UInt8.self)
            guard let base = buffer.baseAddress else { return "" }
            base[0] = prefix
            let count = JSONTextWriter.writeInt(number, to: base + 1)
            return String(decoding: UnsafeBufferPointer(start: base, count: count + 1), as: UTF8.self)
        }
    }

    /// Appends what is staged to the array.
    @inline(__always)
    private mutating func flush() {
        guard staged > 0 else { return }
        out.append(contentsOf: UnsafeBufferPointer(start: stage, count: staged))
        staged = 0
    }

    /// Whether `count` more bytes fit in the stage, flushing it first when
    /// they do not fit beside what is staged.
    @inline(__always)
    private mutating func room(_ count: Int) -> Bool {
        if staged &+ count <= Self.size { return true }
        flush()
        return count <= Self.size
    }

    /// Hands the array itself to `write`, after what is staged (for a part
    /// written by a function that appends to an array).
    @inline(__always)
    package mutating func direct(_ write: (inout [UInt8]) -> Void) {
        flush()
        write(&out)
    }

    @inline(__always)
    package mutating func byte(_ byte: UInt8) {
        if staged == Self.size { flush() }
        stage[staged] = byte
        staged &+= 1
    }

    /// Copies `bytes` as they are.
    @inline(__always)
    package mutating func bytes(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let from = bytes.baseAddress, bytes.count > 0 else { return }
        if room(bytes.count) {
            (stage + staged).update(from: from, count: bytes.count)
            staged &+= bytes.count
        } else {
            out.append(contentsOf: bytes)
        }
    }

    @inline(__always)
    package mutating func bytes(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { self.bytes($0) }
    }

    @inline(__always)
    package mutating func bytes(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBufferPointer { self.bytes($0) }
    }

    @inline(__always)
    package mutating func literal(_ literal: StaticString) {
        bytes(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// `value` in decimal.
    @inline(__always)
    package mutating func int(_ value: Int) {
        // A sign and 19 digits at most.
        if room(21) {
            staged &+= JSONTextWriter.writeInt(value, to: stage + staged)
        } else {
            JSONTextWriter.writeInt(value, into: &out)
        }
    }

    /// `value` as a JSON string, quotes included.
    @inline(__always)
    package mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { quoted($0) }
    }

    /// `value` escaped, without quotes.
    @inline(__always)
    package mutating func stringContents(_ value: String) {
        var value = value
        value.withUTF8 { contents($0) }
    }

    /// UTF-8 text as a JSON string, quotes included.
    @inline(__always)
    private mutating func quoted(_ text: UnsafeBufferPointer<UInt8>) {
        // Most strings need no escape: the quotes and the text in one go.
        if let from = text.baseAddress, JSONTextWriter.firstByteToEscape(text, from: 0) == text.count, room(text.count &+ 2) {
            let to = stage + staged
            to[0] = UInt8(ascii: "\"")
            (to + 1).update(from: from, count: text.count)
            to[text.count &+ 1] = UInt8(ascii: "\"")
            staged &+= text.count &+ 2
            return
        }
        byte(UInt8(ascii: "\""))
        contents(text)
        byte(UInt8(ascii: "\""))
    }

    /// An object member's key and colon, after a comma unless it is the first:
    /// `,"key":`.
    @inline(__always)
    package mutating func key(_ key: StaticString, first: Bool) {
        let count = key.utf8CodeUnitCount
        guard room(count &+ 4) else {
            if !first { byte(UInt8(ascii: ",")) }
            byte(UInt8(ascii: "\""))
            literal(key)
            byte(UInt8(ascii: "\""))
            return byte(UInt8(ascii: ":"))
        }
        var to = stage + staged
        if !first {
            to[0] = UInt8(ascii: ",")
            to += 1
        }
        to[0] = UInt8(ascii: "\"")
        (to + 1).update(from: key.utf8Start, count: count)
        to[count &+ 1] = UInt8(ascii: "\"")
        to[count &+ 2] = UInt8(ascii: ":")
        staged &+= first ? count &+ 3 : count &+ 4
    }

    /// UTF-8 text escaped as the inside of a JSON string.
    private mutating func contents(_ text: UnsafeBufferPointer<UInt8>) {
        let plain = JSONTextWriter.firstByteToEscape(text, from: 0)
        if plain == text.count { return bytes(text) }
        // Escapes: room for the longest (`\u00XX`) per byte, else the array's own path.
        if text.count <= Self.size / JSONTextWriter.maximumEscapedBytesPerByte, room(text.count &* JSONTextWriter.maximumEscapedBytesPerByte) {
            staged &+= JSONTextWriter.writeStringContents(text, to: stage + staged)
        } else {
            flush()
            JSONTextWriter.writeStringContents(text, into: &out)
        }
    }

    /// `value`'s compact text, objects with sorted keys: what
    /// `JSONValue.serialize(into:)` writes.
    package mutating func value(_ value: JSONValue) {
        switch value {
        case .null: literal("null")
        case .bool(let b): b ? literal("true") : literal("false")
        case .int(let i): int(i)
        case .double(let d): direct { JSONTextWriter.writeDouble(d, into: &$0) }
        case .string(let s): string(s)
        case .array(let a):
            byte(UInt8(ascii: "["))
            var first = true
            for element in a {
                if !first { byte(UInt8(ascii: ",")) }
                first = false
                self.value(element)
            }
            byte(UInt8(ascii: "]"))
        case .object(let o):
            byte(UInt8(ascii: "{"))
            if o.count == 1, let (key, member) = o.first {
                // Nothing to sort (a tool call's arguments, often).
                string(key)
                byte(UInt8(ascii: ":"))
                self.value(member)
            } else if o.count > 1 {
                // The members' positions sorted by key, on the stack: no array
                // of pairs to allocate, and no hash lookup per member.
                withUnsafeTemporaryAllocation(of: [String: JSONValue].Index.self, capacity: o.count) { order in
                    var count = 0
                    var position = o.startIndex
                    while position != o.endIndex {
                        order.initializeElement(at: count, to: position)
                        count += 1
                        o.formIndex(after: &position)
                    }
                    var members = UnsafeMutableBufferPointer(rebasing: order[..<count])
                    members.sort { o.keys[$0] < o.keys[$1] }
                    for (i, position) in members.enumerated() {
                        if i > 0 { byte(UInt8(ascii: ",")) }
                        string(o.keys[position])
                        byte(UInt8(ascii: ":"))
                        self.value(o.values[position])
                    }
                    members.deinitialize()
                }
            }
            byte(UInt8(ascii: "}"))
        }
    }
}
