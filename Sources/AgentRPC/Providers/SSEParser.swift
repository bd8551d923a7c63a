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
        var events: [SSEEvent] = []
        for byte in bytes {
            streamBytes += 1
            if streamBytes > maximumStreamBytes {
                throw SSEParserError(message: "the model's response exceeds \(maximumStreamBytes) bytes")
            }
            if lastWasCR {
                lastWasCR = false
                // The LF of a CRLF pair whose CR already ended the line.
                if byte == 0x0A { continue }
            }
            switch byte {
            case 0x0D:
                lastWasCR = true
                if let e = endLine() { events.append(e) }
            case 0x0A:
                if let e = endLine() { events.append(e) }
            default:
                line.append(byte)
                if line.count + bufferedBytes > maximumBufferedBytes {
                    throw SSEParserError(message: "server-sent event exceeds \(maximumBufferedBytes) bytes")
                }
            }
        }
        return events
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
        var bytes = line[...]
        line.removeAll(keepingCapacity: true)
        if atStreamStart {
            atStreamStart = false
            // A UTF-8 BOM at the very start of the stream is not part of the first field.
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        }
        if bytes.isEmpty { return dispatch() }
        if bytes.first == 0x3A { return nil }  // ":" comment line

        let field: String
        let value: String
        if let colon = bytes.firstIndex(of: 0x3A) {
            field = String(decoding: bytes[..<colon], as: UTF8.self)
            var valueStart = bytes.index(after: colon)
            if valueStart < bytes.endIndex, bytes[valueStart] == 0x20 { valueStart = bytes.index(after: valueStart) }
            value = String(decoding: bytes[valueStart...], as: UTF8.self)
        } else {
            field = String(decoding: bytes, as: UTF8.self)
            value = ""
        }
        switch field {
        case "event":
            eventType = value
        case "data":
            if hasData { dataBuffer.append("\n") }
            dataBuffer.append(value)
            hasData = true
            bufferedBytes += value.utf8.count + 1
        case "id":
            // An id containing NUL is ignored, per spec.
            if !value.utf8.contains(0) { lastEventId = value }
        default:
            // `retry:` and unknown fields carry nothing we use.
            break
        }
        return nil
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
