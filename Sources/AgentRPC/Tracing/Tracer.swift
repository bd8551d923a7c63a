import Synchronization

/// Creates spans and hands each finished one to every registered exporter.
///
/// One tracer serves the whole server; it is safe to use from any task or
/// thread. Exporters run on the thread that ends a span, so they must return
/// quickly (the file exporter only queues bytes; the client exporter only
/// queues a notification).
///
/// Content — the prompt, tool arguments, tool output, the model's text — is kept
/// out of spans unless `includesPayloads` is set (`--trace-payloads`). The
/// decision is made in one place, `admits(key:)`, for every attribute of every
/// span, so the engine may set payload attributes without checking the flag.
final class Tracer: Sendable {
    /// Whether attributes in `SpanAttributeKey.payloadKeys` are kept.
    let includesPayloads: Bool
    /// Payload strings longer than this many UTF-8 bytes are cut, with a marker,
    /// so one large tool output cannot make a trace line megabytes long.
    let payloadByteLimit: Int
    /// Source of span timestamps.
    let clock: any TraceClock

    private struct Registry: Sendable {
        var nextID = 0
        var exporters: [(id: Int, exporter: any SpanExporter)] = []
    }

    private let registry = Mutex(Registry())

    /// Identifies an added exporter so it can be removed (e.g. when its client disconnects).
    struct ExporterRegistration: Sendable, Hashable {
        fileprivate let id: Int
    }

    init(
        exporters: [any SpanExporter] = [], includesPayloads: Bool = false, payloadByteLimit: Int = 64 * 1024,
        clock: any TraceClock = SystemTraceClock()
    ) {
        self.includesPayloads = includesPayloads
        self.payloadByteLimit = max(0, payloadByteLimit)
        self.clock = clock
        for exporter in exporters { addExporter(exporter) }
    }

    /// Adds an exporter; it receives spans that end from now on.
    @discardableResult
    func addExporter(_ exporter: any SpanExporter) -> ExporterRegistration {
        registry.withLock { r in
            let id = r.nextID
            r.nextID += 1
            r.exporters.append((id, exporter))
            return ExporterRegistration(id: id)
        }
    }

    /// Removes an exporter; spans that end afterwards no longer reach it. Does not close it.
    func removeExporter(_ registration: ExporterRegistration) {
        registry.withLock { r in r.exporters.removeAll { $0.id == registration.id } }
    }

    /// Whether any exporter is registered; without one, spans go nowhere.
    var hasExporters: Bool { registry.withLock { !$0.exporters.isEmpty } }

    /// Starts a span. With a parent it joins the parent's trace; without one it
    /// is the root of a new trace with a fresh random trace id.
    func startSpan(
        name: String, parent: SpanContext? = nil, kind: SpanKind = .internal, attributes: [String: SpanValue] = [:]
    ) -> ActiveSpan {
        let context = SpanContext(traceID: parent?.traceID ?? TraceID.random(), spanID: SpanID.random())
        return ActiveSpan(
            tracer: self, name: name, context: context, parentSpanID: parent?.spanID, kind: kind,
            startTimeUnixNano: clock.nowUnixNanos(), attributes: admit(attributes))
    }

    /// Whether an attribute with this key is recorded: the only place the payload setting is read.
    func admits(key: String) -> Bool {
        includesPayloads || !SpanAttributeKey.payloadKeys.contains(key)
    }

    /// The value to store for an attribute, or nil if it is dropped; payload strings are capped.
    func admit(key: String, value: SpanValue) -> SpanValue? {
        guard admits(key: key) else { return nil }
        if SpanAttributeKey.payloadKeys.contains(key), case .string(let text) = value {
            return .string(capped(text, toUTF8Bytes: payloadByteLimit))
        }
        return value
    }

    func admit(_ attributes: [String: SpanValue]) -> [String: SpanValue] {
        var kept: [String: SpanValue] = [:]
        for (key, value) in attributes {
            if let value = admit(key: key, value: value) { kept[key] = value }
        }
        return kept
    }

    /// Hands a finished span to every exporter, outside the registry lock so an
    /// exporter may add or remove exporters without deadlocking.
    func export(_ span: FinishedSpan) {
        let exporters = registry.withLock { $0.exporters.map(\.exporter) }
        for exporter in exporters { exporter.export(span) }
    }

    /// Waits until every exporter has written what it was given.
    func flush() {
        let exporters = registry.withLock { $0.exporters.map(\.exporter) }
        for exporter in exporters { exporter.flush() }
    }

    /// Flushes and closes every exporter; call once, at shutdown.
    func close() {
        let exporters = registry.withLock { $0.exporters.map(\.exporter) }
        for exporter in exporters { exporter.close() }
    }
}

/// Cuts `text` to at most `limit` UTF-8 bytes on a scalar boundary and says how much was cut.
func capped(_ text: String, toUTF8Bytes limit: Int) -> String {
    let total = text.utf8.count
    guard total > limit else { return text }
    var kept = 0
    var end = text.unicodeScalars.startIndex
    for index in text.unicodeScalars.indices {
        let width = UTF8.width(text.unicodeScalars[index])
        if kept + width > limit { break }
        kept += width
        end = text.unicodeScalars.index(after: index)
    }
    return String(text.unicodeScalars[..<end]) + "…[truncated \(total - kept) bytes]"
}

/// A span in progress. Set attributes while the work runs, then `end` it once;
/// ending is what exports it. A span that is never ended is never exported.
///
/// Safe to share between tasks: its state is behind a lock.
final class ActiveSpan: Sendable {
    let name: String
    /// Pass this as `parent` to start a child span.
    let context: SpanContext
    let parentSpanID: SpanID?
    let kind: SpanKind
    let startTimeUnixNano: UInt64

    private struct State: Sendable {
        var attributes: [String: SpanValue]
        var errorMessage: String?
        var hasError = false
        var ended = false
    }

    private let tracer: Tracer
    private let state: Mutex<State>

    init(
        tracer: Tracer, name: String, context: SpanContext, parentSpanID: SpanID?, kind: SpanKind,
        startTimeUnixNano: UInt64, attributes: [String: SpanValue]
    ) {
        self.tracer = tracer
        self.name = name
        self.context = context
        self.parentSpanID = parentSpanID
        self.kind = kind
        self.startTimeUnixNano = startTimeUnixNano
        self.state = Mutex(State(attributes: attributes))
    }

    /// Sets (or replaces) an attribute. Ignored after `end`, and for payload keys
    /// when the tracer leaves payloads out.
    func setAttribute(_ key: String, _ value: SpanValue) {
        guard let value = tracer.admit(key: key, value: value) else { return }
        state.withLock { s in
            if !s.ended { s.attributes[key] = value }
        }
    }

    /// Sets several attributes at once; same rules as `setAttribute`.
    func setAttributes(_ attributes: [String: SpanValue]) {
        let kept = tracer.admit(attributes)
        guard !kept.isEmpty else { return }
        state.withLock { s in
            if !s.ended { s.attributes.merge(kept) { _, new in new } }
        }
    }

    /// Sets a content attribute (e.g. `gen_ai.prompt`). The text is only computed
    /// when the tracer keeps payloads, so callers can serialize freely.
    func setPayload(_ key: String, _ text: @autoclosure () -> String) {
        guard tracer.admits(key: key) else { return }
        setAttribute(key, .string(text()))
    }

    /// Marks the span as failed; `end()` without an explicit status then reports
    /// an error with this message. The first recorded message is kept.
    func recordError(_ message: String) {
        state.withLock { s in
            if s.ended || s.hasError { return }
            s.hasError = true
            s.errorMessage = message
        }
    }

    /// Ends the span and exports it. Only the first call does anything; it returns
    /// true. Without `status`, the span is ok unless `recordError` was called.
    @discardableResult
    func end(status: SpanStatus? = nil) -> Bool {
        let endTime = max(tracer.clock.nowUnixNanos(), startTimeUnixNano)
        let finished: FinishedSpan? = state.withLock { s in
            if s.ended { return nil }
            s.ended = true
            let resolved = status ?? (s.hasError ? .error(message: s.errorMessage) : .ok)
            return FinishedSpan(
                name: name, context: context, parentSpanID: parentSpanID, kind: kind,
                startTimeUnixNano: startTimeUnixNano, endTimeUnixNano: endTime, attributes: s.attributes,
                status: resolved)
        }
        guard let finished else { return false }
        tracer.export(finished)
        return true
    }

    /// Whether content attributes are kept (so a caller can skip gathering them).
    var includesPayloads: Bool { tracer.includesPayloads }

    /// Whether `end` has been called.
    var isEnded: Bool { state.withLock { $0.ended } }

    /// The attributes recorded so far (for tests and for copying onto a parent).
    var attributes: [String: SpanValue] { state.withLock { $0.attributes } }
}
