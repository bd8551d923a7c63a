import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Receives every span that ends. Called on the thread that ended the span, so
/// an implementation must be thread-safe and must not block for long.
protocol SpanExporter: Sendable {
    func export(_ span: FinishedSpan)
    /// Waits until everything exported so far is written. Default: nothing to wait for.
    func flush()
    /// Flushes and releases resources; later spans are dropped. Default: nothing.
    func close()
}

extension SpanExporter {
    func flush() {}
    func close() {}
}

/// Sends each span's OTLP/JSON object to a closure; the server connects it to
/// the `trace/span` notification of a client that declared `traces`.
struct ClientSpanExporter: SpanExporter {
    private let send: @Sendable (JSONValue) -> Void

    /// `send` receives the span object (`FinishedSpan.otlpJSON`), to be wrapped
    /// as `TraceSpanParams(span:)`. It must not block.
    init(send: @escaping @Sendable (JSONValue) -> Void) {
        self.send = send
    }

    func export(_ span: FinishedSpan) { send(span.otlpJSON) }
}

/// Keeps finished spans in memory, in the order they ended; for tests.
final class InMemorySpanExporter: SpanExporter {
    private let stored = Mutex<[FinishedSpan]>([])

    init() {}

    func export(_ span: FinishedSpan) { stored.withLock { $0.append(span) } }

    /// The spans exported so far.
    var spans: [FinishedSpan] { stored.withLock { $0 } }

    /// The first span with this name, if any.
    func span(named name: String) -> FinishedSpan? { spans.first { $0.name == name } }
}

/// The trace file could not be opened.
struct TraceFileError: Error, Sendable, CustomStringConvertible {
    var path: String
    var reason: String
    var description: String { "cannot open trace file \(path): \(reason)" }
}

/// Appends one OTLP/JSON `ExportTraceServiceRequest` per span, one per line
/// (the OpenTelemetry Collector's file format), to a file.
///
/// `export` only serializes the span and appends the line to a buffer under a
/// short lock; a background job writes the buffer, so a slow disk never
/// holds up a turn. Lines that queue up while a write is in progress go out
/// together in the next write. If more than `maxBufferedBytes` are waiting,
/// whole lines are dropped and counted rather than letting memory grow.
final class OTLPFileExporter: SpanExporter {
    let path: String
    private let scopeVersion: String
    private let maxBufferedBytes: Int
    private let fd: Int32
    /// Held while a chunk is taken off the buffer and written, so chunks reach
    /// the file in export order however many drains run at once.
    private let writeOrder = Mutex(())

    private struct State: Sendable {
        var buffer: [UInt8] = []
        var drainScheduled = false
        var closed = false
        var fdClosed = false
        var droppedSpans = 0
        var writeError: String?
    }

    private let state = Mutex(State())

    /// Opens `path` for appending, creating it if needed; existing lines are kept.
    init(path: String, scopeVersion: String = Server.version, maxBufferedBytes: Int = 16 << 20) throws(TraceFileError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        if fd < 0 {
            throw TraceFileError(path: path, reason: String(cString: strerror(errno)))
        }
        self.fd = fd
        self.path = path
        self.scopeVersion = scopeVersion
        self.maxBufferedBytes = maxBufferedBytes
    }

    deinit {
        // close() normally did this; a forgotten close must not leak the descriptor.
        let needsClose = state.withLock { s in
            defer { s.fdClosed = true }
            return !s.fdClosed
        }
        if needsClose { closeDescriptor(fd) }
    }

    func export(_ span: FinishedSpan) {
        var line = OTLPJSON.exportRequest(spans: [span], scopeVersion: scopeVersion).serialized()
        line.append(UInt8(ascii: "\n"))
        let scheduleDrain = state.withLock { s -> Bool in
            if s.closed || s.writeError != nil || s.buffer.count + line.count > maxBufferedBytes {
                s.droppedSpans += 1
                return false
            }
            s.buffer.append(contentsOf: line)
            if s.drainScheduled { return false }
            s.drainScheduled = true
            return true
        }
        if scheduleDrain { Dispatching.async(utility: true) { self.drain() } }
    }

    /// Blocks until every line exported before the call is written.
    func flush() {
        drain()
    }

    /// Writes what is buffered and closes the file; later spans are dropped. Idempotent.
    func close() {
        let first = state.withLock { s -> Bool in
            defer { s.closed = true }
            return !s.closed
        }
        guard first else { return }
        drain()
        writeOrder.withLock { _ in
            let needsClose = state.withLock { s in
                defer { s.fdClosed = true }
                return !s.fdClosed
            }
            if needsClose { closeDescriptor(fd) }
        }
    }

    /// Spans not written: refused after `close`, after a write error, or for lack of buffer room.
    var droppedSpanCount: Int { state.withLock { $0.droppedSpans } }

    /// The first write error, if any; after one, the exporter stops writing.
    var writeError: String? { state.withLock { $0.writeError } }

    /// Writes what is buffered; returns once every line buffered before the call is written.
    private func drain() {
        writeOrder.withLock { _ in
            let chunk = state.withLock { s -> [UInt8] in
                s.drainScheduled = false
                if s.fdClosed { return [] }
                var taken: [UInt8] = []
                swap(&taken, &s.buffer)
                return taken
            }
            guard !chunk.isEmpty else { return }
            if let failure = writeAll(chunk) {
                state.withLock { s in
                    if s.writeError == nil { s.writeError = failure }
                }
            }
        }
    }

    private func writeAll(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBytes { raw -> String? in
            guard let base = raw.baseAddress else { return nil }
            var offset = 0
            while offset < raw.count {
                let n = write(fd, base + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return String(cString: strerror(errno))
                }
                offset += n
            }
            return nil
        }
    }
}
