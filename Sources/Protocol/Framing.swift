/// How messages are delimited on the byte stream.
public enum Framing: String, Sendable, Hashable {
    /// One JSON text per line (the default).
    case newline
    /// LSP-style `Content-Length: N\r\n\r\n` headers before each body.
    case contentLength

    /// Wraps one message body for the wire.
    public func frame(_ body: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        frame(body, into: &out)
        return out
    }

    /// Appends one framed message body to `out` (lets writers batch frames).
    public func frame(_ body: [UInt8], into out: inout [UInt8]) {
        switch self {
        case .newline:
            out.append(contentsOf: body)
            out.append(0x0A)
        case .contentLength:
            out.append(contentsOf: "Content-Length: \(body.count)\r\n\r\n".utf8)
            out.append(contentsOf: body)
        }
    }
}

/// What the frame parser found next.
public enum FrameEvent: Sendable, Hashable {
    /// One complete message body.
    case frame([UInt8])
    /// A frame over the size limit was skipped whole. `id` is the request id if it
    /// could be read from the frame's first bytes, so the sender can be answered.
    case oversized(byteCount: Int, id: RequestID?)
    /// A `Content-Length` header block that could not be understood; skipped.
    case malformedHeader(String)
}

/// A pure, incremental frame parser: feed it bytes as they arrive, in any
/// chunking, and take complete frames out. It never blocks and never sleeps.
///
/// The framing is chosen by the first bytes: `Content-Length:` (any case) switches
/// the whole connection to header framing; anything else is newline-delimited.
public struct FrameParser: Sendable {
    public let maxMessageBytes: Int
    /// `nil` until enough bytes have arrived to tell.
    public private(set) var framing: Framing?

    private var buffer: [UInt8] = []
    private var start = 0
    /// Newline mode: where to resume looking for `\n`.
    private var scanFrom = 0
    /// An oversized frame being skipped: bytes left (header mode) or until newline.
    private var discarding: Discard?
    /// Header mode: the body length once the header block was parsed.
    private var pendingBodyLength: Int?

    private struct Discard: Sendable {
        var byteCount: Int
        var remaining: Int?  // nil = until end of line
        var prefix: [UInt8]
    }

    /// How many leading bytes of an oversized frame are kept to recover its id.
    static let idRecoveryPrefix = 4096
    private static let contentLengthPrefix = Array("content-length:".utf8)

    public init(maxMessageBytes: Int, framing: Framing? = nil) {
        self.maxMessageBytes = max(1, maxMessageBytes)
        self.framing = framing
    }

    /// Bytes buffered but not yet returned as frames.
    public var bufferedByteCount: Int { buffer.count - start }

    public mutating func append<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        buffer.append(contentsOf: bytes)
    }

    /// The next event, or nil when more bytes are needed.
    public mutating func next() -> FrameEvent? {
        if framing == nil, !detectFraming() { return nil }
        switch framing {
        case .contentLength: return nextHeaderFramed()
        default: return nextLine()
        }
    }

    /// Everything still buffered at end of input: a last line without its newline
    /// is still a frame (a client may omit the final newline).
    public mutating func finish() -> FrameEvent? {
        if let event = next() { return event }
        if let d = discarding {
            discarding = nil
            reset()
            return .oversized(byteCount: d.byteCount, id: Self.recoverID(d.prefix))
        }
        if framing != .contentLength {
            let rest = trimmed(Array(buffer[start...]))
            reset()
            if !rest.isEmpty { return .frame(rest) }
        }
        reset()
        return nil
    }

    private mutating func reset() {
        buffer.removeAll(keepingCapacity: true)
        start = 0
        scanFrom = 0
    }

    private mutating func compact() {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            scanFrom -= start
            start = 0
        }
    }

    /// Returns false while the first non-blank bytes are still ambiguous.
    private mutating func detectFraming() -> Bool {
        var i = start
        while i < buffer.count, buffer[i] == 0x20 || buffer[i] == 0x0A || buffer[i] == 0x0D || buffer[i] == 0x09 { i += 1 }
        let available = buffer.count - i
        let needed = Self.contentLengthPrefix.count
        for k in 0..<min(available, needed) {
            var b = buffer[i + k]
            if b >= 0x41 && b <= 0x5A { b += 0x20 }  // ASCII lowercase
            if b != Self.contentLengthPrefix[k] {
                framing = .newline
                return true
            }
        }
        if available >= needed {
            framing = .contentLength
            start = i
            return true
        }
        return false
    }

    private mutating func nextLine() -> FrameEvent? {
        while true {
            if var d = discarding {
                // Skip the rest of an oversized line without buffering it.
                if let nl = buffer[scanFrom...].firstIndex(of: 0x0A) {
                    d.byteCount += nl - start
                    if d.prefix.count < Self.idRecoveryPrefix {
                        d.prefix.append(contentsOf: buffer[start..<min(nl, start + Self.idRecoveryPrefix - d.prefix.count)])
                    }
                    start = nl + 1
                    scanFrom = start
                    discarding = nil
                    compact()
                    return .oversized(byteCount: d.byteCount, id: Self.recoverID(d.prefix))
                }
                d.byteCount += buffer.count - start
                if d.prefix.count < Self.idRecoveryPrefix {
                    d.prefix.append(contentsOf: buffer[start..<min(buffer.count, start + Self.idRecoveryPrefix - d.prefix.count)])
                }
                discarding = d
                reset()
                return nil
            }
            guard let nl = buffer[scanFrom...].firstIndex(of: 0x0A) else {
                scanFrom = buffer.count
                if buffer.count - start > maxMessageBytes {
                    discarding = Discard(byteCount: 0, remaining: nil, prefix: [])
                    continue
                }
                return nil
            }
            var end = nl
            if end > start, buffer[end - 1] == 0x0D { end -= 1 }
            let length = end - start
            let lineStart = start
            start = nl + 1
            scanFrom = start
            if length > maxMessageBytes {
                let prefix = Array(buffer[lineStart..<min(end, lineStart + Self.idRecoveryPrefix)])
                compact()
                return .oversized(byteCount: length, id: Self.recoverID(prefix))
            }
            let line = trimmed(Array(buffer[lineStart..<end]))
            compact()
            if line.isEmpty { continue }  // blank lines between messages are harmless
            return .frame(line)
        }
    }

    private func trimmed(_ bytes: [UInt8]) -> [UInt8] {
        var lo = 0
        var hi = bytes.count
        while lo < hi, bytes[lo] == 0x20 || bytes[lo] == 0x09 || bytes[lo] == 0x0D || bytes[lo] == 0x0A { lo += 1 }
        while hi > lo, bytes[hi - 1] == 0x20 || bytes[hi - 1] == 0x09 || bytes[hi - 1] == 0x0D || bytes[hi - 1] == 0x0A { hi -= 1 }
        return lo == 0 && hi == bytes.count ? bytes : Array(bytes[lo..<hi])
    }

    private mutating func nextHeaderFramed() -> FrameEvent? {
        while true {
            if var d = discarding, let remaining = d.remaining {
                let take = min(remaining, buffer.count - start)
                if d.prefix.count < Self.idRecoveryPrefix {
                    d.prefix.append(contentsOf: buffer[start..<(start + min(take, Self.idRecoveryPrefix - d.prefix.count))])
                }
                start += take
                d.remaining = remaining - take
                if d.remaining == 0 {
                    discarding = nil
                    compact()
                    return .oversized(byteCount: d.byteCount, id: Self.recoverID(d.prefix))
                }
                discarding = d
                reset()
                return nil
            }
            if let length = pendingBodyLength {
                guard buffer.count - start >= length else { return nil }
                let body = Array(buffer[start..<(start + length)])
                start += length
                pendingBodyLength = nil
                compact()
                return .frame(body)
            }
            // Skip blank lines some clients put between frames.
            while start < buffer.count, buffer[start] == 0x0D || buffer[start] == 0x0A { start += 1 }
            guard let headerEnd = findHeaderEnd() else {
                if buffer.count - start > 8192 {
                    // No header block ends within a sane size: drop it and resync.
                    reset()
                    return .malformedHeader("header block too long")
                }
                return nil
            }
            let headerText = String(decoding: buffer[start..<headerEnd.headerEnd], as: UTF8.self)
            start = headerEnd.bodyStart
            var contentLength: Int?
            for rawLine in headerText.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" || $0 == "\r" }) {
                let line = String(rawLine)
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].trimmingSpaces().lowercased()
                let value = line[line.index(after: colon)...].trimmingSpaces()
                if name == "content-length" { contentLength = Int(value) }
            }
            guard let length = contentLength, length >= 0 else {
                compact()
                return .malformedHeader("missing or invalid Content-Length header")
            }
            if length > maxMessageBytes {
                discarding = Discard(byteCount: length, remaining: length, prefix: [])
                continue
            }
            pendingBodyLength = length
        }
    }

    /// Finds `\r\n\r\n` (or `\n\n`) after `start`.
    private func findHeaderEnd() -> (headerEnd: Int, bodyStart: Int)? {
        var i = start
        while i < buffer.count {
            if buffer[i] == 0x0A {
                if i + 1 < buffer.count, buffer[i + 1] == 0x0A { return (i, i + 2) }
                if i + 2 < buffer.count, buffer[i + 1] == 0x0D, buffer[i + 2] == 0x0A { return (i, i + 3) }
            }
            i += 1
        }
        return nil
    }

    /// Reads a top-level `"id"` member from the start of a (possibly cut-off)
    /// JSON object, so an oversized request can still be answered with its id.
    static func recoverID(_ prefix: [UInt8]) -> RequestID? {
        var depth = 0
        var i = 0
        var inString = false
        var stringStart = 0
        var lastKeyAtDepth1: [UInt8]? = nil
        while i < prefix.count {
            let b = prefix[i]
            if inString {
                if b == 0x5C { i += 2; continue }
                if b == 0x22 {
                    inString = false
                    if depth == 1 {
                        // Is this string a key? Look past whitespace for ':'.
                        var j = i + 1
                        while j < prefix.count, prefix[j] == 0x20 || prefix[j] == 0x09 { j += 1 }
                        if j < prefix.count, prefix[j] == 0x3A {
                            lastKeyAtDepth1 = Array(prefix[stringStart..<i])
                            if lastKeyAtDepth1 == Array("id".utf8) {
                                return parseIDValue(prefix, from: j + 1)
                            }
                        }
                    }
                }
                i += 1
                continue
            }
            switch b {
            case 0x22: inString = true; stringStart = i + 1
            case 0x7B, 0x5B: depth += 1
            case 0x7D, 0x5D: depth -= 1
            default: break
            }
            i += 1
        }
        return nil
    }

    private static func parseIDValue(_ bytes: [UInt8], from: Int) -> RequestID? {
        var i = from
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 { i += 1 }
        guard i < bytes.count else { return nil }
        var end = i
        if bytes[i] == 0x22 {
            end = i + 1
            while end < bytes.count, bytes[end] != 0x22 {
                if bytes[end] == 0x5C { end += 1 }
                end += 1
            }
            guard end < bytes.count else { return nil }
            end += 1
        } else {
            while end < bytes.count, bytes[end] == 0x2D || (bytes[end] >= 0x30 && bytes[end] <= 0x39) { end += 1 }
        }
        guard let value = try? JSONValue.parse(bytes[i..<end]) else { return nil }
        return RequestID(json: value)
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> String {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
