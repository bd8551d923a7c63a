import AgentRPCProtocol
/// Turns a provider's SSE events into `ProviderEvent`s. Pure and incremental:
/// the HTTP transport feeds it events as they arrive, tests feed it fixtures.
/// Methods throw `ProviderError` or `ProviderContractViolation`.
public protocol ProviderStreamDecoder: Sendable {
    /// Events produced by one SSE event. After `.end` has been returned, the
    /// decoder ignores anything else.
    mutating func decode(_ event: SSEEvent) throws -> [ProviderEvent]
    /// Called at end of stream; throws `streamTruncated` if the terminal event never came.
    mutating func finish() throws -> [ProviderEvent]
    /// True once `.end` has been produced.
    var isComplete: Bool { get }
}

extension ProviderStreamDecoder {
    /// Runs a whole body, already split into chunks, through an SSE parser and
    /// this decoder. Used by tests and by the non-streaming fallback path.
    public mutating func decodeAll(chunks: [[UInt8]]) throws -> [ProviderEvent] {
        var parser = SSEParser()
        var events: [ProviderEvent] = []
        for chunk in chunks {
            for sse in try parser.feed(chunk) { events += try decode(sse) }
        }
        for sse in parser.finish() { events += try decode(sse) }
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
            return try JSONValue.parse(data)
        } catch {
            throw ProviderContractViolation("\(provider) stream event is not valid JSON (\(error.description))")
        }
    }
}
