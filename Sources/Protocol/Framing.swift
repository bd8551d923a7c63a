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
    /// A `Content-Length` header block that could not be understood, or bytes
    /// outside any frame; skipped up to the next header.
    case malformedHeader(String)
    /// A frame whose `Content-Length` did not match its body (a header began
    /// inside it, or the input ended first). `id` as for `oversized`.
    case desynchronized(reason: String, id: RequestID?)
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
    /// Header mode: how many bytes of the pending body were searched for a header line.
    private var bodyScanned = 0
    /// Header mode: how many bytes after `start` were searched for a line end or a header.
    private var gapScanned = 0
    /// Header mode: whether the bytes up to the next header belong to a frame
    /// that was already answered (so skipping them needs no second answer).
    private var gapAnswered = false

    private struct Discard: Sendable {
        var byteCount: Int
        var remaining: Int?  // nil = until end of line
        var prefix: [UInt8]
    }

    /// How many leading bytes of an oversized frame are kept to recover its id.
    static let idRecoveryPrefix = 4096
    /// The longest header block (or run of bytes between frames) waited for.
    public static let maxHeaderBlockBytes = 8192
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
        if framing == .contentLength { return finishHeaderFramed() }
        let rest = trimmed(Array(buffer[start...]))
        reset()
        return rest.isEmpty ? nil : .frame(rest)
    }

    private mutating func reset() {
        buffer.removeAll(keepingCapacity: true)
        start = 0
        scanFrom = 0
        gapScanned = 0
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

    /// One step of the header-framed parser.
    private enum Step {
        case event(FrameEvent)
        /// More bytes are needed.
        case wait
        /// State changed; look again.
        case again
    }

    private mutating func nextHeaderFramed() -> FrameEvent? {
        while true {
            let step: Step
            if discarding?.remaining != nil {
                step = continueDiscard()
            } else if let length = pendingBodyLength {
                step = takeBody(length)
            } else {
                step = betweenFrames()
            }
            switch step {
            case .event(let event): return event
            case .wait: return nil
            case .again: continue
            }
        }
    }

    /// Skips the body of a frame over the size limit without buffering it. A
    /// header line inside it means the length lied: reading resumes there.
    private mutating func continueDiscard() -> Step {
        guard var d = discarding, let remaining = d.remaining else { return .again }
        let end = start + min(remaining, buffer.count - start)
        var take = end - start
        var resync = false
        switch findHeaderLine(from: start, before: end) {
        case .found(let p): take = p - start; resync = true
        case .partial(let p): take = p - start
        case nil: break
        }
        if d.prefix.count < Self.idRecoveryPrefix {
            d.prefix.append(contentsOf: buffer[start..<(start + min(take, Self.idRecoveryPrefix - d.prefix.count))])
        }
        start += take
        d.remaining = remaining - take
        if resync {
            discarding = nil
            gapAnswered = true
            compact()
            let read = d.byteCount - (d.remaining ?? 0)
            return .event(.desynchronized(
                reason: "Content-Length \(d.byteCount) overstates the body: the next header begins after \(read) bytes",
                id: Self.recoverID(d.prefix)))
        }
        if d.remaining == 0 {
            discarding = nil
            gapAnswered = true
            compact()
            return .event(.oversized(byteCount: d.byteCount, id: Self.recoverID(d.prefix)))
        }
        discarding = d
        compact()
        return .wait
    }

    /// The body of the frame whose header was read. Valid JSON never holds a
    /// header line, so one starting inside the declared body proves the length
    /// overstated: that frame is answered once and reading resumes at the header.
    private mutating func takeBody(_ length: Int) -> Step {
        let available = buffer.count - start
        let end = start + min(length, available)
        switch findHeaderLine(from: start + bodyScanned, before: end) {
        case .found(let p):
            let body = Array(buffer[start..<p])
            start = p
            pendingBodyLength = nil
            bodyScanned = 0
            gapAnswered = true
            compact()
            return .event(.desynchronized(
                reason: "Content-Length \(length) overstates the body: the next header begins after \(body.count) bytes",
                id: Self.recoverID(body)))
        case .partial(let p):
            bodyScanned = p - start
            return .wait
        case nil:
            bodyScanned = end - start
        }
        guard available >= length else { return .wait }
        let body = Array(buffer[start..<(start + length)])
        start += length
        pendingBodyLength = nil
        bodyScanned = 0
        // A body cut short (an understated length) is answered as malformed JSON;
        // the rest of it, up to the next header, must not be answered again.
        gapAnswered = !Self.endsAtTopLevelClose(body)
        compact()
        return .event(.frame(body))
    }

    /// Between frames: a header block, or bytes outside any frame. A line of
    /// JSON there is a newline-framed message from a client mixing framings: it
    /// is served (answers stay Content-Length framed). Anything else is answered
    /// once per gap with a parse error, unless it is the rest of a frame that
    /// was already answered; reading resumes at the next header.
    private mutating func betweenFrames() -> Step {
        if gapScanned == 0 {
            while start < buffer.count, buffer[start] == 0x0D || buffer[start] == 0x0A { start += 1 }
        }
        guard start < buffer.count else {
            reset()
            return .wait
        }
        var i = start + gapScanned
        var newline: Int?
        var header: Int?
        scan: while i < buffer.count {
            let b = buffer[i]
            if b == 0x0A {
                newline = i
                break
            }
            if b | 0x20 == 0x63 {  // 'c' or 'C'
                switch matchHeaderLine(at: i) {
                case true?:
                    header = i
                    break scan
                case nil:
                    gapScanned = i - start
                    return waitOrOverflow()
                case false?:
                    break
                }
            }
            i += 1
        }
        if header == nil && newline == nil {
            gapScanned = buffer.count - start
            return waitOrOverflow()
        }
        gapScanned = 0
        if let h = header {
            return h == start ? headerBlock() : outsideFrame(upTo: h, resumeAt: h)
        }
        guard let nl = newline else { return .wait }
        if isHeaderLine(start..<nl) { return headerBlock() }
        return outsideFrame(upTo: nl, resumeAt: nl + 1)
    }

    /// A header block starts at `start`; reads it through its blank line.
    private mutating func headerBlock() -> Step {
        guard let headerEnd = findHeaderEnd() else { return waitOrOverflow() }
        let headerText = String(decoding: buffer[start..<headerEnd.headerEnd], as: UTF8.self)
        start = headerEnd.bodyStart
        gapScanned = 0
        var contentLength: Int?
        for rawLine in headerText.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" || $0 == "\r" }) {
            let line = String(rawLine)
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingSpaces().lowercased()
            let value = line[line.index(after: colon)...].trimmingSpaces()
            if name == "content-length" { contentLength = Int(value) }
        }
        compact()
        guard let length = contentLength, length >= 0 else {
            // Its body, if any, is skipped up to the next header without a second answer.
            gapAnswered = true
            return .event(.malformedHeader("missing or invalid Content-Length header"))
        }
        if length > maxMessageBytes {
            discarding = Discard(byteCount: length, remaining: length, prefix: [])
        } else {
            pendingBodyLength = length
            bodyScanned = 0
        }
        return .again
    }

    /// Bytes between frames, up to a newline or a header.
    private mutating func outsideFrame(upTo end: Int, resumeAt resume: Int) -> Step {
        let text = trimmed(Array(buffer[start..<end]))
        start = resume
        compact()
        if text.isEmpty { return .again }
        if gapAnswered {
            // Only a complete JSON text is a message of its own here; the rest
            // belongs to a frame that was already answered.
            if (try? JSONValue.parse(text)) != nil { return .event(.frame(text)) }
            return .again
        }
        if text[0] == 0x7B || text[0] == 0x5B { return .event(.frame(text)) }
        gapAnswered = true
        return .event(.malformedHeader("bytes outside any frame where a Content-Length header was expected"))
    }

    /// Waits for more bytes, unless the pending ones can no longer become a
    /// frame: a header block over `maxHeaderBlockBytes`, a JSON line over the
    /// message limit. Those are dropped and answered once.
    private mutating func waitOrOverflow() -> Step {
        let pending = buffer.count - start
        let jsonStart = buffer[start] == 0x7B || buffer[start] == 0x5B
        guard pending > (jsonStart ? maxMessageBytes : Self.maxHeaderBlockBytes) else { return .wait }
        // Keep a header that may be arriving at the end (a partial match).
        var dropTo = start + gapScanned
        if dropTo <= start { dropTo = buffer.count }
        let prefix = Array(buffer[start..<min(dropTo, start + Self.idRecoveryPrefix)])
        let dropped = dropTo - start
        let answered = gapAnswered
        gapAnswered = true
        start = dropTo
        gapScanned = 0
        compact()
        if jsonStart { return .event(.oversized(byteCount: dropped, id: Self.recoverID(prefix))) }
        if answered { return .again }
        return .event(.malformedHeader("more than \(Self.maxHeaderBlockBytes) bytes without a complete Content-Length header"))
    }

    /// What is buffered at end of input in header framing: a frame cut off, or
    /// bytes outside any frame. Each is answered once.
    private mutating func finishHeaderFramed() -> FrameEvent? {
        defer { reset() }
        if let length = pendingBodyLength {
            pendingBodyLength = nil
            let body = Array(buffer[start...])
            return .desynchronized(
                reason: "the input ended after \(body.count) of the \(length) bytes Content-Length announced",
                id: Self.recoverID(body))
        }
        let text = trimmed(Array(buffer[start...]))
        if text.isEmpty { return nil }
        if gapAnswered {
            return (try? JSONValue.parse(text)) != nil ? .frame(text) : nil
        }
        if text[0] == 0x7B || text[0] == 0x5B { return .frame(text) }
        return .malformedHeader("the input ended inside a header block")
    }

    /// Whether a header line (`Name: value`) spans `range`.
    private func isHeaderLine(_ range: Range<Int>) -> Bool {
        var i = range.lowerBound
        while i < range.upperBound, Self.isTokenByte(buffer[i]) { i += 1 }
        return i > range.lowerBound && i < range.upperBound && buffer[i] == 0x3A
    }

    private static func isTokenByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x5F
    }

    private enum HeaderLineMatch {
        case found(Int)
        /// A candidate the buffered bytes end inside of.
        case partial(Int)
    }

    /// The first `Content-Length:` header line starting in `from..<before`:
    /// the name in any case, blanks, digits, blanks, a line break. Valid JSON
    /// never contains one (the name is no JSON token and a string cannot hold
    /// a raw line break), which is what makes it a safe point to resynchronise.
    private func findHeaderLine(from: Int, before: Int) -> HeaderLineMatch? {
        var i = from
        while i < before {
            if buffer[i] | 0x20 == 0x63 {
                switch matchHeaderLine(at: i) {
                case true?: return .found(i)
                case nil: return .partial(i)
                case false?: break
                }
            }
            i += 1
        }
        return nil
    }

    /// true: a `Content-Length: N` line starts at `i`; false: none does; nil:
    /// the buffered bytes end before that can be told.
    private func matchHeaderLine(at i: Int) -> Bool? {
        var j = i
        for expected in Self.contentLengthPrefix {
            guard j < buffer.count else { return nil }
            var b = buffer[j]
            if b >= 0x41 && b <= 0x5A { b += 0x20 }
            if b != expected { return false }
            j += 1
        }
        while j < buffer.count, buffer[j] == 0x20 || buffer[j] == 0x09 { j += 1 }
        var digits = 0
        while j < buffer.count, buffer[j] >= 0x30 && buffer[j] <= 0x39 {
            j += 1
            digits += 1
        }
        while j < buffer.count, buffer[j] == 0x20 || buffer[j] == 0x09 { j += 1 }
        guard j < buffer.count else { return nil }
        return digits > 0 && (buffer[j] == 0x0D || buffer[j] == 0x0A)
    }

    /// Whether a body ends right after the bracket closing its top-level object
    /// or array (then it was not cut short).
    static func endsAtTopLevelClose(_ body: [UInt8]) -> Bool {
        var depth = 0
        var inString = false
        var escaped = false
        var closedAt: Int?
        for (i, b) in body.enumerated() {
            if inString {
                if escaped { escaped = false } else if b == 0x5C { escaped = true } else if b == 0x22 { inString = false }
                continue
            }
            switch b {
            case 0x22: inString = true
            case 0x7B, 0x5B: depth += 1
            case 0x7D, 0x5D:
                depth -= 1
                if depth == 0 { closedAt = i }
            default: break
            }
        }
        guard !inString, depth == 0, let closedAt else { return false }
        return body[(closedAt + 1)...].allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
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
