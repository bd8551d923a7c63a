/// One dispatched Server-Sent Event.
struct SSEEvent: Sendable, Hashable {
    /// The `event:` field, `nil` when the event had none (the WHATWG default type "message").
    var event: String?
    /// The `data:` lines joined with "\n".
    var data: String
    /// The last event ID seen so far (it persists across events, as WHATWG says).
    var id: String?

    init(event: String? = nil, data: String, id: String? = nil) {
        self.event = event
        self.data = data
        self.id = id
    }

    /// This event as the parser lends its events out.
    func withBytes<R>(_ body: (SSEEventBytes) throws -> R) rethrows -> R {
        var data = data, event = event ?? ""
        return try data.withUTF8 { data in
            try event.withUTF8 { event in try body(SSEEventBytes(data: data, eventField: event, id: id)) }
        }
    }
}

/// One dispatched event as the parser holds it, lent to the caller of
/// `SSEParser.feed(_:each:)` for the length of one call: the fields as the
/// bytes that arrived, so a decoder reading the data's JSON straight from them
/// costs no string (an allocation and a UTF-8 check) per event.
struct SSEEventBytes {
    /// The `data:` lines joined with LF, as received: not checked as UTF-8 yet.
    let data: UnsafeBufferPointer<UInt8>
    /// The `event:` field's value; empty when the event had none (or an empty one).
    let eventField: UnsafeBufferPointer<UInt8>
    /// The last event ID seen so far.
    let id: String?

    /// The `event:` field as `SSEEvent.event` has it.
    var event: String? { eventField.isEmpty ? nil : String(decoding: eventField, as: UTF8.self) }

    /// The data as `SSEEvent.data` has it: invalid UTF-8 repaired (U+FFFD).
    var dataText: String { String(decoding: data, as: UTF8.self) }

    /// A copy that outlives the call.
    var owned: SSEEvent { SSEEvent(event: event, data: dataText, id: id) }
}

/// The SSE stream broke a limit we set to protect memory.
struct SSEParserError: Error, Sendable, Hashable {
    var message: String
}

/// Incremental `text/event-stream` parser following the WHATWG rules. It is fed
/// arbitrary byte chunks (network reads split anywhere: inside a CRLF pair, inside
/// a UTF-8 sequence) and hands out the events each chunk completes.
///
/// Fields are kept as raw bytes until their event is dispatched, so a
/// multi-byte character split across chunks is decoded only once it is whole,
/// and a consumer that reads bytes (`feed(_:each:)`) never has them decoded.
///
/// A chunk is parsed whole before any of its events is handed out: a chunk
/// that breaks a limit gives its error and none of its events.
///
/// EOF policy: `finish()` flushes a pending event that was never terminated by a
/// blank line. WHATWG would discard it, but recorded Anthropic streams end
/// with `message_stop` and no trailing blank line, and dropping it would make
/// every such stream look truncated.
struct SSEParser: Sendable {
    /// A single line or event larger than this is refused: a server streaming an
    /// endless line must not grow our memory without bound.
    var maximumBufferedBytes: Int
    /// A whole stream larger than this is refused: a model that never stops
    /// (text, reasoning or tool-argument fragments, each line small) must not
    /// grow the turn's memory without bound either. 100 times any real reply.
    var maximumStreamBytes: Int
    static let defaultMaximumStreamBytes = 64 * 1024 * 1024
    private var streamBytes = 0

    /// The start of a line whose end has not arrived yet (a line that arrives
    /// whole in one chunk is read where it is, never copied here).
    private var line: [UInt8] = []
    /// The previous chunk ended in CR; a LF at the start of the next chunk belongs to it.
    private var lastWasCR = false
    private var atStreamStart = true
    private var eventType: [UInt8] = []
    private var hasData = false
    private var lastEventId: String?
    /// The pending event's data lines, counted as the event limit counts them
    /// (each line's value and a separator).
    private var bufferedBytes = 0

    /// The fields of the events the chunk being fed has dispatched, one after
    /// another, then the pending event's data (from `pendingData`): reused
    /// from chunk to chunk, so dispatching an event allocates nothing.
    private var fieldBytes: [UInt8] = []
    private var pendingData = 0
    private var dispatched: [Dispatched] = []

    private struct Dispatched {
        var data: Range<Int>
        var event: Range<Int>
        var id: String?
    }

    init(maximumBufferedBytes: Int = 16 * 1024 * 1024, maximumStreamBytes: Int = SSEParser.defaultMaximumStreamBytes) {
        self.maximumBufferedBytes = maximumBufferedBytes
        self.maximumStreamBytes = maximumStreamBytes
    }

    /// Consumes one chunk and calls `each` with the events it completed, in
    /// order. Throws `SSEParserError` (then nothing is handed out) or what
    /// `each` throws (then the chunk's later events are dropped).
    mutating func feed(_ chunk: UnsafeBufferPointer<UInt8>, each: (SSEEventBytes) throws -> Void) throws {
        try scan(chunk)
        try handOut(each)
    }

    /// Consumes one chunk and returns the events it completed, in order.
    mutating func feed<Bytes: Sequence>(_ bytes: Bytes) throws(SSEParserError) -> [SSEEvent]
    where Bytes.Element == UInt8 {
        // Data, arrays and native strings hand over their bytes in one piece:
        // scanned there, a line is read in place or copied as a run rather than
        // one byte at a time through the sequence's iterator (Data's is not
        // inlined, and it was most of a streamed response's parsing cost).
        var outcome: Result<Void, SSEParserError>?
        _ = bytes.withContiguousStorageIfAvailable { buffer in
            outcome = Result { () throws(SSEParserError) in try self.scan(buffer) }
        }
        if let outcome {
            try outcome.get()
        } else {
            do throws(SSEParserError) {
                for byte in bytes { try feedByte(byte) }
            } catch {
                discardDispatched()
                throw error
            }
        }
        var events: [SSEEvent] = []
        handOut { events.append($0.owned) }
        return events
    }

    /// Call at end of stream: processes an unterminated last line and hands
    /// out a pending event (see the EOF policy above).
    mutating func finish(each: (SSEEventBytes) throws -> Void) rethrows {
        if !line.isEmpty { endBufferedLine() }
        dispatch()
        lastWasCR = false
        try handOut(each)
    }

    mutating func finish() -> [SSEEvent] {
        var events: [SSEEvent] = []
        finish { events.append($0.owned) }
        return events
    }

    private mutating func feedByte(_ byte: UInt8) throws(SSEParserError) {
        streamBytes += 1
        if streamBytes > maximumStreamBytes { throw streamTooLong }
        if lastWasCR {
            lastWasCR = false
            // The LF of a CRLF pair whose CR already ended the line.
            if byte == 0x0A { return }
        }
        switch byte {
        case 0x0D:
            lastWasCR = true
            endBufferedLine()
        case 0x0A:
            endBufferedLine()
        default:
            line.append(byte)
            if line.count + bufferedBytes > maximumBufferedBytes { throw eventTooLong }
        }
    }

    /// What `feedByte` does for each byte, with the bytes between line ends
    /// taken as one run: the same events, the same limits, the same error.
    private mutating func scan(_ buffer: UnsafeBufferPointer<UInt8>) throws(SSEParserError) {
        do throws(SSEParserError) {
            var i = 0
            while i < buffer.count {
                let byte = buffer[i]
                if byte == 0x0D || byte == 0x0A || lastWasCR {
                    try feedByte(byte)
                    i += 1
                    continue
                }
                let end = Self.lineEnd(in: buffer, from: i + 1)
                let run = end - i
                // Byte k of the run (from 1) breaks the stream limit when k > streamRoom,
                // the event limit when k > lineRoom; byte by byte the stream is checked first.
                let streamRoom = maximumStreamBytes - streamBytes
                let lineRoom = maximumBufferedBytes - line.count - bufferedBytes
                if run > streamRoom || run > lineRoom {
                    let streamFirst = streamRoom <= lineRoom
                    let taken = streamFirst ? max(0, streamRoom) : max(1, lineRoom + 1)
                    streamBytes += streamFirst ? taken + 1 : taken
                    line.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[i..<(i + min(taken, run))]))
                    throw streamFirst ? streamTooLong : eventTooLong
                }
                streamBytes += run
                if line.isEmpty, end < buffer.count, streamBytes < maximumStreamBytes {
                    // The whole line and its end are in this chunk: read in place.
                    // (`feedByte` counts the line end against the stream limit
                    // first; with room for it, it only ends the line.)
                    streamBytes += 1
                    lastWasCR = buffer[end] == 0x0D
                    endLine(UnsafeBufferPointer(rebasing: buffer[i..<end]))
                    i = end + 1
                } else {
                    line.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[i..<end]))
                    i = end
                }
            }
        } catch {
            discardDispatched()
            throw error
        }
    }

    /// The index of the first CR or LF in `buffer` from `start`, or its count;
    /// eight bytes at a time (a line is a whole JSON chunk, ~100 bytes).
    static func lineEnd(in buffer: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var i = start
        if let base = buffer.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while buffer.count - i >= 8 {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self))
                let lf = word ^ (ones &* 0x0A), cr = word ^ (ones &* 0x0D)
                // The high bit of each zero byte of `lf` or `cr`: exact up to the
                // first one (a borrow only starts at a zero byte), which is the answer.
                let found = ((lf &- ones) & ~lf | (cr &- ones) & ~cr) & highs
                if found != 0 { return i + found.trailingZeroBitCount / 8 }
                i += 8
            }
        }
        while i < buffer.count, buffer[i] != 0x0D, buffer[i] != 0x0A { i += 1 }
        return i
    }

    private var streamTooLong: SSEParserError {
        SSEParserError(message: "the model's response exceeds \(maximumStreamBytes) bytes")
    }

    private var eventTooLong: SSEParserError {
        SSEParserError(message: "server-sent event exceeds \(maximumBufferedBytes) bytes")
    }

    /// Ends the line collected in `line`, keeping its buffer for the next one.
    private mutating func endBufferedLine() {
        var bytes = line
        line = []
        bytes.withUnsafeBufferPointer { endLine($0) }
        bytes.removeAll(keepingCapacity: true)
        line = bytes
    }

    /// One line, without its line end. The field is compared as bytes and a
    /// value is kept as bytes: nothing is decoded here.
    private mutating func endLine(_ all: UnsafeBufferPointer<UInt8>) {
        var start = 0
        if atStreamStart {
            atStreamStart = false
            // A UTF-8 BOM at the very start of the stream is not part of the first field.
            if all.starts(with: [0xEF, 0xBB, 0xBF]) { start = 3 }
        }
        if all.count == start {
            dispatch()
            return
        }
        let bytes = UnsafeBufferPointer(rebasing: all[start...])
        let fieldEnd = bytes.firstIndex(of: 0x3A) ?? bytes.endIndex
        // A comment line (":" first) has the empty field: `other`, like `retry:`
        // and unknown fields, carries nothing we use.
        let field = Field(UnsafeBufferPointer(rebasing: bytes[..<fieldEnd]))
        guard field != .other else { return }
        var valueStart = fieldEnd
        if valueStart < bytes.endIndex {
            valueStart += 1
            if valueStart < bytes.endIndex, bytes[valueStart] == 0x20 { valueStart += 1 }
        }
        let value = UnsafeBufferPointer(rebasing: bytes[valueStart...])
        switch field {
        case .event:
            eventType.removeAll(keepingCapacity: true)
            eventType.append(contentsOf: value)
        case .data:
            if hasData { fieldBytes.append(0x0A) }
            fieldBytes.append(contentsOf: value)
            hasData = true
            bufferedBytes += value.count + 1
        case .id:
            // An id containing NUL is ignored, per spec.
            if !value.contains(0) { lastEventId = String(decoding: value, as: UTF8.self) }
        case .other:
            break
        }
    }

    /// The fields the parser acts on.
    private enum Field {
        case event, data, id, other

        init(_ name: UnsafeBufferPointer<UInt8>) {
            if name.equals("data") {
                self = .data
            } else if name.equals("event") {
                self = .event
            } else if name.equals("id") {
                self = .id
            } else {
                self = .other
            }
        }
    }

    private mutating func dispatch() {
        defer {
            eventType.removeAll(keepingCapacity: true)
            hasData = false
            bufferedBytes = 0
        }
        // An event without any data line is not dispatched (WHATWG); it had no data bytes.
        guard hasData else { return }
        let data = pendingData..<fieldBytes.count
        fieldBytes.append(contentsOf: eventType)
        dispatched.append(Dispatched(data: data, event: data.upperBound..<fieldBytes.count, id: lastEventId))
        pendingData = fieldBytes.count
    }

    /// Lends out the dispatched events, then forgets them (keeping the
    /// pending event's data).
    private mutating func handOut(_ each: (SSEEventBytes) throws -> Void) rethrows {
        guard !dispatched.isEmpty else { return }
        defer { discardDispatched() }
        try fieldBytes.withUnsafeBufferPointer { bytes in
            for event in dispatched {
                try each(SSEEventBytes(
                    data: UnsafeBufferPointer(rebasing: bytes[event.data]),
                    eventField: UnsafeBufferPointer(rebasing: bytes[event.event]), id: event.id))
            }
        }
    }

    private mutating func discardDispatched() {
        dispatched.removeAll(keepingCapacity: true)
        fieldBytes.removeSubrange(..<pendingData)
        pendingData = 0
    }
}
