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
}

/// The SSE stream broke a limit we set to protect memory.
struct SSEParserError: Error, Sendable, Hashable {
    var message: String
}

/// Incremental `text/event-stream` parser following the WHATWG rules. It is fed
/// arbitrary byte chunks (network reads split anywhere: inside a CRLF pair, inside
/// a UTF-8 sequence) and returns the events each chunk completes.
///
/// Lines are kept as raw bytes until their terminator arrives, so a multi-byte
/// character split across chunks is decoded only once it is whole.
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

    private var line: [UInt8] = []
    /// The previous chunk ended in CR; a LF at the start of the next chunk belongs to it.
    private var lastWasCR = false
    private var atStreamStart = true
    private var eventType: String?
    private var dataBuffer = ""
    private var hasData = false
    private var lastEventId: String?
    private var bufferedBytes = 0

    init(maximumBufferedBytes: Int = 16 * 1024 * 1024, maximumStreamBytes: Int = SSEParser.defaultMaximumStreamBytes) {
        self.maximumBufferedBytes = maximumBufferedBytes
        self.maximumStreamBytes = maximumStreamBytes
    }

    /// Consumes one chunk and returns the events it completed, in order.
    mutating func feed<Bytes: Sequence>(_ bytes: Bytes) throws(SSEParserError) -> [SSEEvent]
    where Bytes.Element == UInt8 {
        // Data, arrays and native strings hand over their bytes in one piece:
        // scanned there, a line's bytes are copied as a run rather than one at
        // a time through the sequence's iterator (Data's is not inlined, and it
        // was most of a streamed response's parsing cost).
        var outcome: Result<[SSEEvent], SSEParserError>?
        _ = bytes.withContiguousStorageIfAvailable { buffer in
            outcome = Result { () throws(SSEParserError) in try self.feedContiguous(buffer) }
        }
        if let outcome { return try outcome.get() }
        var events: [SSEEvent] = []
        for byte in bytes { try feedByte(byte, into: &events) }
        return events
    }

    private mutating func feedByte(_ byte: UInt8, into events: inout [SSEEvent]) throws(SSEParserError) {
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
            if let e = endLine() { events.append(e) }
        case 0x0A:
            if let e = endLine() { events.append(e) }
        default:
            line.append(byte)
            if line.count + bufferedBytes > maximumBufferedBytes { throw eventTooLong }
        }
    }

    /// What `feedByte` does for each byte, with the bytes between line ends
    /// taken as one run: the same events, the same limits, the same error.
    private mutating func feedContiguous(_ buffer: UnsafeBufferPointer<UInt8>) throws(SSEParserError) -> [SSEEvent] {
        var events: [SSEEvent] = []
        var i = 0
        while i < buffer.count {
            let byte = buffer[i]
            if byte == 0x0D || byte == 0x0A || lastWasCR {
                try feedByte(byte, into: &events)
                i += 1
                continue
            }
            var end = i + 1
            while end < buffer.count, buffer[end] != 0x0D, buffer[end] != 0x0A { end += 1 }
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
            line.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[i..<end]))
            i = end
        }
        return events
    }

    private var streamTooLong: SSEParserError {
        SSEParserError(message: "the model's response exceeds \(maximumStreamBytes) bytes")
    }

    private var eventTooLong: SSEParserError {
        SSEParserError(message: "server-sent event exceeds \(maximumBufferedBytes) bytes")
    }

    /// Call at end of stream: processes an unterminated last line and flushes a
    /// pending event (see the EOF policy above).
    mutating func finish() -> [SSEEvent] {
        var events: [SSEEvent] = []
        if !line.isEmpty, let e = endLine() { events.append(e) }
        if let e = dispatch() { events.append(e) }
        lastWasCR = false
        return events
    }

    private mutating func endLine() -> SSEEvent? {
        var start = 0
        if atStreamStart {
            atStreamStart = false
            // A UTF-8 BOM at the very start of the stream is not part of the first field.
            if line.starts(with: [0xEF, 0xBB, 0xBF]) { start = 3 }
        }
        // The line is read in place and emptied after (a slice of it kept while
        // emptying it would make `removeAll` allocate a new buffer every line).
        // The field is compared as bytes and only a known field's value becomes
        // a string: one string per line, made once.
        let read = line.withUnsafeBufferPointer { all -> (Field, String)? in
            let bytes = UnsafeBufferPointer(rebasing: all[start...])
            let fieldEnd = bytes.firstIndex(of: 0x3A) ?? bytes.endIndex
            let field = Field(UnsafeBufferPointer(rebasing: bytes[..<fieldEnd]))
            guard field != .other else { return nil }
            var valueStart = fieldEnd
            if valueStart < bytes.endIndex {
                valueStart += 1
                if valueStart < bytes.endIndex, bytes[valueStart] == 0x20 { valueStart += 1 }
            }
            return (field, String(decoding: UnsafeBufferPointer(rebasing: bytes[valueStart...]), as: UTF8.self))
        }
        let blank = line.count == start
        line.removeAll(keepingCapacity: true)
        if blank { return dispatch() }
        // A comment line (":" first) has the empty field: `other`, like `retry:`
        // and unknown fields, carries nothing we use.
        guard let (field, value) = read else { return nil }
        switch field {
        case .event:
            eventType = value
        case .data:
            if hasData {
                dataBuffer.append("\n")
                dataBuffer.append(value)
            } else {
                // An event's only data line (nearly every event) is the data as it is.
                dataBuffer = value
            }
            hasData = true
            bufferedBytes += value.utf8.count + 1
        case .id:
            // An id containing NUL is ignored, per spec.
            if !value.utf8.contains(0) { lastEventId = value }
        case .other:
            break
        }
        return nil
    }

    /// The fields the parser acts on.
    private enum Field {
        case event, data, id, other

        init(_ name: UnsafeBufferPointer<UInt8>) {
            if name.elementsEqual("data".utf8) {
                self = .data
            } else if name.elementsEqual("event".utf8) {
                self = .event
            } else if name.elementsEqual("id".utf8) {
                self = .id
            } else {
                self = .other
            }
        }
    }

    private mutating func dispatch() -> SSEEvent? {
        defer {
            eventType = nil
            dataBuffer = ""
            hasData = false
            bufferedBytes = 0
        }
        // An event without any data line is not dispatched (WHATWG).
        guard hasData else { return nil }
        return SSEEvent(event: eventType.flatMap { $0.isEmpty ? nil : $0 }, data: dataBuffer, id: lastEventId)
    }
}
