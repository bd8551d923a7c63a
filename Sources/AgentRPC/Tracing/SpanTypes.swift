/// A 128-bit trace id. Every span of one turn shares it.
struct TraceID: Sendable, Hashable, CustomStringConvertible {
    var high: UInt64
    var low: UInt64

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A random, non-zero id (all-zero ids are invalid in OTLP and W3C trace context).
    static func random() -> TraceID {
        var rng = SystemRandomNumberGenerator()
        while true {
            let id = TraceID(high: rng.next(), low: rng.next())
            if id.high != 0 || id.low != 0 { return id }
        }
    }

    /// 32 lowercase hex digits, as OTLP/JSON encodes trace ids.
    var hex: String { hexDigits(high) + hexDigits(low) }

    /// Parses 32 hex digits (either case); nil for anything else.
    init?(hex: String) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 32, let high = parseHex(utf8[0..<16]), let low = parseHex(utf8[16..<32]) else { return nil }
        self.init(high: high, low: low)
    }

    var description: String { hex }
}

/// A 64-bit span id, unique within its trace.
struct SpanID: Sendable, Hashable, CustomStringConvertible {
    var value: UInt64

    init(_ value: UInt64) { self.value = value }

    /// A random, non-zero id.
    static func random() -> SpanID {
        var rng = SystemRandomNumberGenerator()
        while true {
            let value: UInt64 = rng.next()
            if value != 0 { return SpanID(value) }
        }
    }

    /// 16 lowercase hex digits, as OTLP/JSON encodes span ids.
    var hex: String { hexDigits(value) }

    /// Parses 16 hex digits (either case); nil for anything else.
    init?(hex: String) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 16, let value = parseHex(utf8[...]) else { return nil }
        self.init(value)
    }

    var description: String { hex }
}

/// What a child span needs from its parent: the trace it belongs to and the parent's id.
struct SpanContext: Sendable, Hashable {
    var traceID: TraceID
    var spanID: SpanID

    init(traceID: TraceID, spanID: SpanID) {
        self.traceID = traceID
        self.spanID = spanID
    }
}

/// OTLP `SpanKind`; the raw value is the number OTLP/JSON carries.
enum SpanKind: Int, Sendable, Hashable {
    /// Work inside the server: the turn, routing, an agent's part of the turn.
    case `internal` = 1
    case server = 2
    /// A call out of the server: a model completion, a tool call.
    case client = 3
}

/// How a span ended. OTLP's "unset" is never produced: every span ends ok or in error.
enum SpanStatus: Sendable, Hashable {
    case ok
    case error(message: String?)

    /// OTLP `Status.code`: 1 ok, 2 error.
    var code: Int {
        switch self {
        case .ok: return 1
        case .error: return 2
        }
    }

    /// Shorthand for `.error(message:)`.
    static func error(_ message: String) -> SpanStatus { .error(message: message) }
}

/// An attribute value: the scalar kinds of OTLP `AnyValue`.
enum SpanValue: Sendable, Hashable {
    case string(String)
    case int(Int)
    case double(Double)
    case bool(Bool)
}

extension SpanValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral
{
    init(stringLiteral value: String) { self = .string(value) }
    init(integerLiteral value: Int) { self = .int(value) }
    init(floatLiteral value: Double) { self = .double(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
}

/// A span after `end`: immutable, handed to every exporter.
struct FinishedSpan: Sendable, Hashable {
    var name: String
    var context: SpanContext
    /// Nil for a root span.
    var parentSpanID: SpanID?
    var kind: SpanKind
    var startTimeUnixNano: UInt64
    var endTimeUnixNano: UInt64
    var attributes: [String: SpanValue]
    var status: SpanStatus

    init(
        name: String, context: SpanContext, parentSpanID: SpanID?, kind: SpanKind, startTimeUnixNano: UInt64,
        endTimeUnixNano: UInt64, attributes: [String: SpanValue], status: SpanStatus
    ) {
        self.name = name
        self.context = context
        self.parentSpanID = parentSpanID
        self.kind = kind
        self.startTimeUnixNano = startTimeUnixNano
        self.endTimeUnixNano = endTimeUnixNano
        self.attributes = attributes
        self.status = status
    }
}

private let hexAlphabet: [UInt8] = Array("0123456789abcdef".utf8)

private func hexDigits(_ value: UInt64) -> String {
    var out = [UInt8](repeating: 0, count: 16)
    var v = value
    for i in stride(from: 15, through: 0, by: -1) {
        out[i] = hexAlphabet[Int(v & 0xF)]
        v >>= 4
    }
    return String(decoding: out, as: UTF8.self)
}

private func parseHex(_ digits: ArraySlice<UInt8>) -> UInt64? {
    var value: UInt64 = 0
    for d in digits {
        let nibble: UInt8
        switch d {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = d - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = d - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = d - UInt8(ascii: "A") + 10
        default: return nil
        }
        value = value << 4 | UInt64(nibble)
    }
    return value
}
