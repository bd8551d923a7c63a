import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// What never goes into a cassette: API keys, credentials in headers, cookies,
/// and whatever the provider error scrubber treats as secret (the configured
/// secrets, and tokens shaped like an API key).
enum CassetteScrubber {
    /// The response headers a replay needs (decoding, retries) or a reader
    /// wants (request ids); nothing else is kept.
    static func keptHeader(_ name: String) -> Bool {
        let n = name.lowercased()
        if HTTPProviderConfiguration.isSensitiveHeader(n) || n.containsScalars("cookie") || n.containsScalars("auth") { return false }
        return ["content-type", "retry-after", "retry-after-ms", "x-should-retry", "x-request-id", "request-id"].contains(n)
            || n.hasPrefix("x-ratelimit-") || n.hasPrefix("anthropic-ratelimit-")
    }

    static func scrub(_ text: String, secrets: [String]) -> String {
        var out = text
        for secret in secrets where secret.count >= 4 {
            out = out.replacingScalars(of: secret, with: "[REDACTED]")
        }
        return ProviderErrorMapper.redactKeyLikeTokens(out)
    }

    /// Bytes that are not text: only the configured secrets can be found in them.
    static func scrub(bytes: [UInt8], secrets: [String]) -> [UInt8] {
        var out = bytes
        for secret in secrets where secret.count >= 4 {
            let needle = Array(secret.utf8)
            var result: [UInt8] = []
            var i = 0
            while i < out.count {
                if out.count - i >= needle.count, out[i..<(i + needle.count)].elementsEqual(needle) {
                    result += Array("[REDACTED]".utf8)
                    i += needle.count
                } else {
                    result.append(out[i])
                    i += 1
                }
            }
            out = result
        }
        return out
    }

    /// The response chunks with secrets removed, each at the time it arrived.
    /// Chunks are cut at UTF-8 character boundaries (so a chunk that is text is
    /// stored as text); a secret split across two chunks is found in the whole
    /// body, whose scrubbed text then becomes one chunk.
    static func scrub(chunks: [CassetteResponse.Chunk], secrets: [String]) -> [CassetteResponse.Chunk] {
        var aligned: [CassetteResponse.Chunk] = []
        var pending: [UInt8] = []
        for chunk in chunks {
            var bytes = pending + chunk.bytes
            let cut = completeUTF8Prefix(bytes)
            pending = Array(bytes[cut...])
            bytes.removeSubrange(cut...)
            if !bytes.isEmpty { aligned.append(.init(milliseconds: chunk.milliseconds, bytes: bytes)) }
        }
        if !pending.isEmpty {
            if aligned.isEmpty {
                aligned.append(.init(milliseconds: chunks.last?.milliseconds ?? 0, bytes: pending))
            } else {
                aligned[aligned.count - 1].bytes += pending
            }
        }
        var texts: [String] = []
        for chunk in aligned {
            guard let text = String(validating: chunk.bytes, as: UTF8.self) else {
                // Not text: no key-shaped token can be told apart in it.
                return aligned.map { .init(milliseconds: $0.milliseconds, bytes: scrub(bytes: $0.bytes, secrets: secrets)) }
            }
            texts.append(text)
        }
        let each = texts.map { scrub($0, secrets: secrets) }
        let whole = scrub(texts.joined(), secrets: secrets)
        if each.joined() == whole {
            return zip(aligned, each).map { .init(milliseconds: $0.milliseconds, bytes: Array($1.utf8)) }
        }
        return [.init(milliseconds: aligned.last?.milliseconds ?? 0, bytes: Array(whole.utf8))]
    }

    /// The length of the longest prefix of `bytes` that does not end inside a
    /// UTF-8 sequence.
    static func completeUTF8Prefix(_ bytes: [UInt8]) -> Int {
        var i = bytes.count
        var continuation = 0
        while i > 0, continuation < 3 {
            let b = bytes[i - 1]
            if b & 0xC0 == 0x80 {
                continuation += 1
                i -= 1
                continue
            }
            let length = b & 0x80 == 0 ? 1 : b & 0xE0 == 0xC0 ? 2 : b & 0xF0 == 0xE0 ? 3 : b & 0xF8 == 0xF0 ? 4 : 1
            return length > continuation + 1 ? i - 1 : bytes.count
        }
        return bytes.count
    }
}

/// Watches one live response on its way to the real sink and writes it to
/// the cassette when it ends: every byte as it arrives (before decoding), and
/// when our side stops reading.
final class CassetteRecorder: HTTPResponseSink {
    /// A response larger than this is not recorded (a warning says so).
    static let maximumBodyBytes = HTTPStreamTransport.maximumWholeBodyBytes

    private struct State {
        var head: ResponseHead?
        var headMilliseconds: Int?
        var chunks: [CassetteResponse.Chunk] = []
        var bytes = 0
        var tooLarge = false
        var finished = false
    }

    private let cassette: ModelCassette
    private let request: CassetteMatching.Request
    private let secrets: [String]
    private let downstream: any HTTPResponseSink
    private let started = ContinuousClock.now
    private let state = Mutex(State())

    init(cassette: ModelCassette, request: CassetteMatching.Request, secrets: [String], downstream: any HTTPResponseSink) {
        self.cassette = cassette
        self.request = request
        self.secrets = secrets
        self.downstream = downstream
    }

    private var elapsedMilliseconds: Int {
        let d = started.duration(to: .now)
        return Int(d.components.seconds) * 1000 + Int(d.components.attoseconds / 1_000_000_000_000_000)
    }

    func head(_ head: ResponseHead) {
        let ms = elapsedMilliseconds
        state.withLock { s in
            if s.head == nil {
                s.head = head
                s.headMilliseconds = ms
            }
        }
        downstream.head(head)
    }

    func body(_ data: Data) {
        let ms = elapsedMilliseconds
        state.withLock { s in
            if s.finished || s.tooLarge { return }
            s.bytes += data.count
            if s.bytes > Self.maximumBodyBytes {
                s.tooLarge = true
                s.chunks = []
                return
            }
            s.chunks.append(.init(milliseconds: ms, bytes: Array(data)))
        }
        downstream.body(data)
    }

    func end(_ error: (any Error)?) {
        let outcome: CassetteResponse.Outcome = error.map { .failed(ProviderErrorMapper.map(transportError: $0, secrets: secrets)) } ?? .complete
        finish(outcome)
        downstream.end(error)
    }

    private func finish(_ outcome: CassetteResponse.Outcome) {
        let ms = elapsedMilliseconds
        let taken: State? = state.withLock { s in
            if s.finished { return nil }
            s.finished = true
            return s
        }
        guard let s = taken else { return }
        if s.tooLarge {
            cassette.warn("a \(request.provider) response over \(Self.maximumBodyBytes) bytes was not recorded")
            return
        }
        var outcome = outcome
        if case .failed(var e) = outcome {
            e.unsafeMessage = CassetteScrubber.scrub(e.unsafeMessage, secrets: secrets)
            outcome = .failed(e)
        }
        var headers: [String: String] = [:]
        for (name, value) in s.head?.headers ?? [:] where CassetteScrubber.keptHeader(name) {
            headers[name.lowercased()] = CassetteScrubber.scrub(value, secrets: secrets)
        }
        let response = CassetteResponse(
            headMilliseconds: s.headMilliseconds, status: s.head?.status, headers: headers,
            chunks: CassetteScrubber.scrub(chunks: s.chunks, secrets: secrets), end: .init(milliseconds: ms, outcome: outcome))
        cassette.append(CassetteExchange(provider: request.provider, method: request.method, path: request.path, body: request.body, response: response))
    }

    /// `handle`, telling this recorder when our side gives up on the response
    /// (a replay then waits there, as the server did), or has the whole answer
    /// (what follows, such as `data: [DONE]`, changes nothing a replay decodes,
    /// and may take long or never come).
    func watching(_ handle: HTTPRequestHandle) -> HTTPRequestHandle {
        HTTPRequestHandle(
            cancel: { [self] in
                finish(.abandoned)
                handle.cancel()
            },
            linger: { [self] in
                finish(.complete)
                handle.linger()
            })
    }
}

/// The transport decorator of a model cassette: each request is replayed from
/// the cassette, sent through the wrapped transport and recorded, or refused
/// with `cassetteMiss` (`ModelCassette.route`).
struct CassetteTransport: HTTPTransport {
    let binding: CassetteBinding
    let secrets: [String]
    let inner: any HTTPTransport

    init(_ binding: CassetteBinding, secrets: [String], wrapping inner: any HTTPTransport) {
        self.binding = binding
        self.secrets = secrets
        self.inner = inner
    }

    func start(_ request: HTTPRequest, sink: any HTTPResponseSink) -> HTTPRequestHandle {
        let cassette = binding.cassette
        switch cassette.route(provider: binding.provider, request: request, secrets: secrets) {
        case .replay(let exchange):
            return CassettePlayer.start(exchange, pace: cassette.pace, idleTimeout: request.idleTimeoutSeconds, sink: sink)
        case .record(let matched):
            let recorder = CassetteRecorder(cassette: cassette, request: matched, secrets: secrets, downstream: sink)
            return recorder.watching(inner.start(request, sink: recorder))
        case .miss(let error):
            sink.end(error)
            return HTTPRequestHandle(cancel: {})
        }
    }
}
