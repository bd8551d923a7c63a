import AgentRPCProtocol
/// Turns a provider's SSE events into `ProviderEvent`s. Pure and incremental:
/// the HTTP transport feeds it events as they arrive, tests feed it fixtures.
/// Methods throw `ProviderError` or `ProviderContractViolation`.
protocol ProviderStreamDecoder: Sendable {
    /// Appends the events one SSE event produces to `events` (an array the
    /// transport keeps per read, so a text delta costs no array of its own).
    /// The event is the parser's bytes, lent for the call: a decoder reads its
    /// common events from them and makes the data a string only for the rest.
    /// After `.end` has been produced, the decoder ignores anything else.
    mutating func decode(_ event: SSEEventBytes, into events: inout [ProviderEvent]) throws
    /// Called at end of stream; throws `streamTruncated` if the terminal event never came.
    mutating func finish() throws -> [ProviderEvent]
    /// True once `.end` has been produced.
    var isComplete: Bool { get }
    /// Usage the stream has reported but the decoder holds back until `.end`.
    /// A stream that fails before its end still cost that much, so the
    /// transport sends it before the failure.
    var unreportedUsage: ModelUsage? { get }
}

extension ProviderStreamDecoder {
    var unreportedUsage: ModelUsage? { nil }

    /// The events one SSE event produces.
    mutating func decode(_ event: SSEEvent) throws -> [ProviderEvent] {
        var events: [ProviderEvent] = []
        try event.withBytes { try decode($0, into: &events) }
        return events
    }
}

extension ProviderStreamDecoder {
    /// Runs a whole body, already split into chunks, through an SSE parser and
    /// this decoder. Used by tests and by the non-streaming fallback path.
    mutating func decodeAll(chunks: [[UInt8]]) throws -> [ProviderEvent] {
        var parser = SSEParser()
        var events: [ProviderEvent] = []
        for chunk in chunks {
            try chunk.withUnsafeBufferPointer { chunk in try parser.feed(chunk) { try decode($0, into: &events) } }
        }
        try parser.finish { try decode($0, into: &events) }
        events += try finish()
        return events
    }
}

extension ProviderError {
    /// The stream closed before its terminal event.
    static func truncated(_ detail: String) -> ProviderError {
        ProviderError(
            code: .streamTruncated,
            safeDescription: "The provider's response stream ended before it was complete (\(detail)).")
    }
}

/// Shared JSON helpers for the decoders.
enum DecoderJSON {
    static func parsePayload(_ data: String, provider: String) throws(ProviderContractViolation) -> JSONValue {
        do {
            // Each SSE event is its own JSON document, so a surrogate pair split
            // across two deltas arrives as two lone halves: keep them as markers
            // for `SurrogateStitcher` rather than failing the turn.
            return try JSONValue.parse(data, loneSurrogates: .mark)
        } catch {
            throw ProviderContractViolation("\(provider) stream event is not valid JSON (\(error.description))")
        }
    }
}

/// Rejoins surrogate pairs that a provider split across two streamed deltas
/// (`"A\ud83d"` then `"\ude00B"`), and turns a surrogate with no partner into
/// U+FFFD. Works on the marker scalars `JSONValue.parse(_:loneSurrogates: .mark)`
/// leaves in strings; each delta kind (text, reasoning, refusal) is its own sequence.
struct SurrogateStitcher: Sendable {
    private var pendingHigh: [Kind: UInt32] = [:]

    enum Kind: Sendable, Hashable { case text, reasoning, refusal }

    /// Rewrites one batch of decoder events. A high surrogate ending a delta is held
    /// back until the next delta of its kind; `.end` flushes whatever is held as U+FFFD.
    mutating func process(_ events: [ProviderEvent]) -> [ProviderEvent] {
        // Nearly every batch has nothing to rejoin: it goes out as it came, not copied.
        if pendingHigh.isEmpty, !events.contains(where: Self.hasMarker) { return events }
        var out: [ProviderEvent] = []
        out.reserveCapacity(events.count)
        for event in events {
            switch event {
            case .textDelta(let t):
                if let joined = join(t, .text) { out.append(.textDelta(joined)) }
            case .reasoningDelta(let t):
                if let joined = join(t, .reasoning) { out.append(.reasoningDelta(joined)) }
            case .refusalDelta(let t):
                if let joined = join(t, .refusal) { out.append(.refusalDelta(joined)) }
            case .toolCall(var call):
                // Arguments arrive whole here (fragments were joined by the
                // decoder), so a pair split across fragments is next to itself.
                call.argumentsJSON = Self.resolved(call.argumentsJSON)
                call.name = Self.resolved(call.name)
                call.id = Self.resolved(call.id)
                out.append(.toolCall(call))
            case .end:
                out += flush()
                out.append(event)
            default:
                out.append(event)
            }
        }
        return out
    }

    /// `process` over `events[start...]`, in place; nothing copied when there is nothing to rejoin.
    mutating func process(_ events: inout [ProviderEvent], from start: Int) {
        if pendingHigh.isEmpty, !events[start...].contains(where: Self.hasMarker) { return }
        let batch = Array(events[start...])
        events.removeSubrange(start...)
        events += process(batch)
    }

    /// Whether `process` would change `event` when nothing is held.
    private static func hasMarker(_ event: ProviderEvent) -> Bool {
        switch event {
        case .textDelta(let t), .reasoningDelta(let t), .refusalDelta(let t): hasMarker(t)
        case .toolCall(let call): hasMarker(call.argumentsJSON) || hasMarker(call.name) || hasMarker(call.id)
        default: false
        }
    }

    private static func hasMarker(_ text: String) -> Bool {
        // Every marker scalar (U+10F800 and up) starts with the byte F4 in UTF-8:
        // looked for in the string's storage (its UTF-8 view's iterator cost
        // more than the rest of passing a delta on).
        var text = text
        guard text.withUTF8({ $0.contains(0xF4) }) else { return false }
        return text.unicodeScalars.contains { $0.value >= JSONValue.loneSurrogateMarkerBase }
    }

    /// `text` with its marked surrogates joined into pairs where they are next to
    /// each other, and every other one replaced by U+FFFD.
    static func resolved(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.value >= JSONValue.loneSurrogateMarkerBase }) else { return text }
        var stitcher = SurrogateStitcher()
        let joined = stitcher.join(text, .text) ?? ""
        return stitcher.pendingHigh[.text] == nil ? joined : joined + "\u{FFFD}"
    }

    /// U+FFFD deltas for every high surrogate still waiting for its partner.
    mutating func flush() -> [ProviderEvent] {
        var out: [ProviderEvent] = []
        for kind in [Kind.text, .reasoning, .refusal] where pendingHigh[kind] != nil {
            pendingHigh[kind] = nil
            switch kind {
            case .text: out.append(.textDelta("\u{FFFD}"))
            case .reasoning: out.append(.reasoningDelta("\u{FFFD}"))
            case .refusal: out.append(.refusalDelta("\u{FFFD}"))
            }
        }
        return out
    }

    /// The delta with pairs rejoined, or nil when nothing is left to emit yet.
    mutating func join(_ text: String, _ kind: Kind) -> String? {
        var pending = pendingHigh[kind]
        // Fast path: the common delta has no marker and nothing is held.
        if pending == nil, !text.unicodeScalars.contains(where: { $0.value >= JSONValue.loneSurrogateMarkerBase }) {
            return text
        }
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            let unit = JSONValue.loneSurrogate(in: scalar)
            if let high = pending {
                pending = nil
                if let low = unit, (0xDC00...0xDFFF).contains(low),
                    let pair = Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                {
                    scalars.append(pair)
                    continue
                }
                scalars.append("\u{FFFD}")
            }
            if let unit {
                if (0xD800...0xDBFF).contains(unit) { pending = unit } else { scalars.append("\u{FFFD}") }
            } else {
                scalars.append(scalar)
            }
        }
        pendingHigh[kind] = pending
        return scalars.isEmpty ? nil : String(scalars)
    }
}
