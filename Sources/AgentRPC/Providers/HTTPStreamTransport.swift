import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// Runs one provider request through `HTTPTransports.current` and turns the
/// response into `ProviderEvent`s as bytes arrive: transport →
/// `StreamingDataDelegate` (SSE parser → provider decoder) → stream.
///
/// * 2xx `text/event-stream` (or anything when no whole-body decoder is given):
///   decoded incrementally.
/// * 2xx with another content type and a whole-body decoder (OpenAI with
///   `stream: false`, or a server that ignored `stream: true`): the body is
///   collected and decoded at the end.
/// * non-2xx: up to 64 KiB of the body is collected and mapped by `ProviderErrorMapper`.
/// * transport failures become `network` errors.
///
/// Cancelling the consuming task (or dropping the stream) cancels the request
/// only; kept-alive connections stay. Retries are not done here: the engine decides.
enum HTTPStreamTransport {
    typealias WholeBodyDecoder = @Sendable ([UInt8]) throws -> [ProviderEvent]

    static let maximumErrorBodyBytes = 64 * 1024
    static let maximumWholeBodyBytes = 32 * 1024 * 1024

    static func stream(
        _ request: HTTPRequest, decoder: some ProviderStreamDecoder, wholeBodyDecoder: WholeBodyDecoder?, secrets: [String],
        cassette: CassetteBinding? = nil
    ) -> ProviderEventStream {
        // A model cassette decorates the transport: it replays, records or refuses (docs/testing.md).
        let transport = cassette.map { CassetteTransport($0, secrets: secrets, wrapping: HTTPTransports.current) } ?? HTTPTransports.current
        return ProviderEventStream { continuation in
            let delegate = StreamingDataDelegate(
                decoder: decoder, wholeBodyDecoder: wholeBodyDecoder, secrets: secrets, continuation: continuation)
            let handle = transport.start(request, sink: delegate)
            delegate.attach(handle)
            continuation.onTermination = { @Sendable termination in
                if case .cancelled = termination { handle.cancel() }
            }
        }
    }
}

/// One request's decoding state: fed by the transport. Of the provider's own
/// decoder type, so each event is decoded by a direct call on it (no
/// existential box to open and check for uniqueness per event).
final class StreamingDataDelegate<Decoder: ProviderStreamDecoder>: HTTPResponseSink {
    enum Mode: Sendable {
        case undecided, streaming, wholeBody, errorBody
    }

    struct State: Sendable {
        var decoder: Decoder
        var parser = SSEParser()
        var mode = Mode.undecided
        var body: [UInt8] = []
        var status = 0
        var headers: [String: String] = [:]
        var done = false
        var handle: HTTPRequestHandle?
    }

    /// What to do once the lock is released: yielding or finishing can run the
    /// termination handler synchronously, which must not happen under the lock.
    enum Action {
        case yield([ProviderEvent], finish: Bool)
        case fail(any Error, after: [ProviderEvent] = [])
        case nothing
    }

    private let state: Mutex<State>
    private let wholeBodyDecoder: HTTPStreamTransport.WholeBodyDecoder?
    private let secrets: [String]
    private let continuation: ProviderEventStream.Continuation

    init(
        decoder: Decoder, wholeBodyDecoder: HTTPStreamTransport.WholeBodyDecoder?, secrets: [String],
        continuation: ProviderEventStream.Continuation
    ) {
        self.state = Mutex(State(decoder: decoder))
        self.wholeBodyDecoder = wholeBodyDecoder
        self.secrets = secrets
        self.continuation = continuation
    }

    func attach(_ handle: HTTPRequestHandle) {
        state.withLock { $0.handle = handle }
    }

    func head(_ head: ResponseHead) {
        state.withLock { s in
            if !s.done && s.mode == .undecided { decideMode(&s, response: head) }
        }
    }

    func body(_ data: Data) {
        let action = state.withLock { s -> Action in
            if s.done { return .nothing }
            if s.mode == .undecided { decideMode(&s, response: nil) }
            switch s.mode {
            case .streaming:
                var events: [ProviderEvent] = []
                do {
                    try data.withUnsafeBytes { raw in
                        try s.parser.feed(raw.assumingMemoryBound(to: UInt8.self)) { try s.decoder.decode($0, into: &events) }
                    }
                    if s.decoder.isComplete { s.done = true }
                    return .yield(events, finish: s.done)
                } catch {
                    s.done = true
                    // What arrived before the failure in the same read is delivered:
                    // whether output was streamed decides if the engine may retry.
                    return failStreaming(s, classify(error), after: events)
                }
            case .wholeBody, .errorBody:
                let limit = s.mode == .errorBody ? HTTPStreamTransport.maximumErrorBodyBytes : HTTPStreamTransport.maximumWholeBodyBytes
                if s.body.count < limit { s.body += data.prefix(limit - s.body.count) }
                if s.mode == .wholeBody && s.body.count >= limit {
                    s.done = true
                    return .fail(ProviderContractViolation("provider response body exceeds \(limit) bytes"))
                }
                return .nothing
            case .undecided:
                return .nothing
            }
        }
        perform(action)
    }

    func end(_ error: (any Error)?) {
        let action = state.withLock { s -> Action in
            if s.done { return .nothing }
            s.done = true
            if let error {
                let mapped = ProviderErrorMapper.map(transportError: error, secrets: secrets)
                return s.mode == .streaming ? failStreaming(s, mapped, after: []) : .fail(mapped)
            }
            if s.mode == .undecided { decideMode(&s, response: nil) }
            switch s.mode {
            case .errorBody:
                return .fail(ProviderErrorMapper.map(status: s.status, headers: s.headers, body: s.body, secrets: secrets))
            case .wholeBody:
                do {
                    return .yield(try wholeBodyDecoder?(s.body) ?? [], finish: true)
                } catch {
                    return .fail(classify(error))
                }
            case .streaming, .undecided:
                var events: [ProviderEvent] = []
                do {
                    try s.parser.finish { try s.decoder.decode($0, into: &events) }
                    events += try s.decoder.finish()
                    return .yield(events, finish: true)
                } catch {
                    return failStreaming(s, classify(error), after: events)
                }
            }
        }
        perform(action)
    }

    /// A stream that breaks off after the model reported usage was still paid
    /// for: the usage goes out before the failure, and the turn counts it.
    private func failStreaming(_ s: State, _ error: any Error, after events: [ProviderEvent]) -> Action {
        guard let usage = s.decoder.unreportedUsage else { return .fail(error, after: events) }
        return .fail(error, after: events + [.usage(usage)])
    }

    private func decideMode(_ s: inout State, response: ResponseHead?) {
        s.status = response?.status ?? 0
        s.headers = response?.headers ?? [:]
        if !(200..<300).contains(s.status) {
            s.mode = .errorBody
        } else if wholeBodyDecoder != nil, !(s.headers["content-type"] ?? "").lowercased().containsScalars("text/event-stream") {
            s.mode = .wholeBody
        } else {
            s.mode = .streaming
        }
    }

    private func classify(_ error: any Error) -> any Error {
        if error is ProviderError || error is ProviderContractViolation { return error }
        if let e = error as? SSEParserError { return ProviderContractViolation("provider stream: \(e.message)") }
        return ProviderContractViolation("provider stream could not be decoded: \(error)")
    }

    private func perform(_ action: Action) {
        switch action {
        case .yield(let events, let finish):
            continuation.yield(contentsOf: events)
            if finish {
                // The answer is whole: let the response end by itself, so its
                // connection stays reusable, rather than cancel it. Said before
                // the consumer sees the end, so a cassette has written the exchange by then.
                state.withLock { $0.handle }?.linger()
                continuation.finish()
            }
        case .fail(let error, let events):
            continuation.yield(contentsOf: events)
            state.withLock { $0.handle }?.cancel()
            continuation.finish(throwing: error)
        case .nothing:
            break
        }
    }
}
