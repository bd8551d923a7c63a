import AgentRPCProtocol
import Foundation
import Testing
import Synchronization
@testable import AgentRPC
@testable import AgentTools

/// The cassette file format, scrubbing and the first-difference search, in
/// process. Recording and replaying through the real binary is tested in
/// clients/python/tests/test_model_cassette.py.
@Suite struct ModelCassetteTests {
    static let header = #"{"agentrpcCassette":{"agentrpcVersion":"0.1.0","formatVersion":1,"providers":["openai"]}}"#
    static let exchange = #"{"request":{"body":{"messages":[{"content":"hi","role":"user"}],"model":"m"},"method":"POST","path":"/v1/chat/completions","provider":"openai"},"response":{"chunks":[{"ms":3,"text":"data: {}\n\n"}],"end":{"ms":4},"headers":{"content-type":"text/event-stream"},"ms":2,"status":200}}"#

    @Test func aTornLastLineIsLeftOutAndTheRestLoads() throws {
        let text = Self.header + "\n" + Self.exchange + "\n" + Self.exchange.prefix(40)
        let contents = try CassetteContents.parse(Array(text.utf8))
        #expect(contents.exchanges.count == 1)
        #expect(contents.tornLine == 3)
        #expect(contents.intactBytes == Self.header.utf8.count + Self.exchange.utf8.count + 2)
        #expect(contents.exchanges[0].line == 2)
    }

    @Test func aBrokenLineBeforeTheLastIsAnError() {
        let text = Self.header + "\n{broken\n" + Self.exchange + "\n"
        #expect(throws: CassetteFormatError.self) { try CassetteContents.parse(Array(text.utf8)) }
    }

    /// A hand-edited time or status out of range is an error naming the line
    /// and the field (a replay at the recorded pace once trapped on a negative time).
    @Test(arguments: [
        (#"{"ms":3,"#, #"{"ms":-9223372036854775808,"#, "response.chunks[0].ms"),
        (#"{"ms":3,"#, #"{"ms":1.5,"#, "response.chunks[0].ms"),
        (#""ms":2,"status":200"#, #""ms":99999999999999,"status":200"#, "response.ms"),
        (#""status":200"#, #""status":-5"#, "response.status"),
        (#""end":{"ms":4}"#, #""end":{"ms":-1}"#, "response.end.ms"),
    ])
    func aTimeOrStatusOutOfRangeIsAnErrorNamingTheField(_ edit: (from: String, to: String, field: String)) throws {
        let line = Self.exchange.replacingOccurrences(of: edit.from, with: edit.to)
        #expect(line != Self.exchange)
        let text = Self.header + "\n" + line + "\n"
        #expect {
            try CassetteContents.parse(Array(text.utf8))
        } throws: { error in
            let e = error as? CassetteFormatError
            return e?.line == 2 && e?.message.hasPrefix(edit.field) == true
        }
    }

    @Test func aNewerFormatOrAMissingHeaderIsAnError() {
        let newer = #"{"agentrpcCassette":{"formatVersion":2,"providers":[]}}"# + "\n"
        #expect(throws: CassetteFormatError.self) { try CassetteContents.parse(Array(newer.utf8)) }
        #expect(throws: CassetteFormatError.self) { try CassetteContents.parse(Array((Self.exchange + "\n").utf8)) }
    }

    @Test func anExchangeLineRoundTrips() throws {
        let value = try JSONValue.parse(Self.exchange)
        let exchange = try CassetteExchange(value, line: 2)
        #expect(exchange.json == value)
        #expect(exchange.response.head?.status == 200)
        #expect(exchange.response.chunks.map(\.milliseconds) == [3])
    }

    @Test func bytesThatAreNotTextAreKeptAsBase64() throws {
        var exchange = try CassetteExchange(try JSONValue.parse(Self.exchange), line: 2)
        exchange.response.chunks = [.init(milliseconds: 1, bytes: [0xFF, 0x00, 0x41])]
        let chunk = exchange.json["response"]?["chunks"]?.arrayValue?.first
        #expect(chunk?["base64"]?.stringValue == "/wBB")
        #expect(try CassetteExchange(exchange.json, line: 2).response.chunks[0].bytes == [0xFF, 0x00, 0x41])
    }

    @Test func aCharacterSplitAcrossChunksIsMovedWholeIntoOneChunk() {
        let bytes = Array("é😀".utf8)
        let chunks: [CassetteResponse.Chunk] = [.init(milliseconds: 1, bytes: Array(bytes[0..<3])), .init(milliseconds: 2, bytes: Array(bytes[3...]))]
        let scrubbed = CassetteScrubber.scrub(chunks: chunks, secrets: [])
        #expect(scrubbed.map { String(decoding: $0.bytes, as: UTF8.self) } == ["é", "😀"])
        #expect(scrubbed.map(\.milliseconds) == [1, 2])
    }

    @Test func aSecretSplitAcrossChunksIsStillRemoved() {
        let secret = "my-private-key-123"
        let text = "data: echo \(secret) done\n\n"
        let cut = text.index(text.startIndex, offsetBy: 16)
        let chunks: [CassetteResponse.Chunk] = [
            .init(milliseconds: 1, bytes: Array(text[..<cut].utf8)), .init(milliseconds: 5, bytes: Array(text[cut...].utf8)),
        ]
        let scrubbed = CassetteScrubber.scrub(chunks: chunks, secrets: [secret])
        let joined = scrubbed.map { String(decoding: $0.bytes, as: UTF8.self) }.joined()
        #expect(!joined.contains(secret))
        #expect(joined == "data: echo [REDACTED] done\n\n")
        // Key-shaped tokens go too, as from error messages.
        let keyLike = CassetteScrubber.scrub(chunks: [.init(milliseconds: 1, bytes: Array("key sk-abcdefghijkl".utf8))], secrets: [])
        #expect(String(decoding: keyLike[0].bytes, as: UTF8.self) == "key [REDACTED]")
    }

    @Test func onlyTheHeadersThatMatterAreKept() {
        #expect(CassetteScrubber.keptHeader("Content-Type"))
        #expect(CassetteScrubber.keptHeader("retry-after-ms"))
        #expect(CassetteScrubber.keptHeader("x-request-id"))
        #expect(!CassetteScrubber.keptHeader("set-cookie"))
        #expect(!CassetteScrubber.keptHeader("authorization"))
        #expect(!CassetteScrubber.keptHeader("x-ratelimit-remaining-tokens"))
        #expect(!CassetteScrubber.keptHeader("openai-organization"))
    }

    @Test func theFirstDifferenceIsAJSONPointerInCanonicalOrder() throws {
        let recorded: JSONValue = ["model": "m", "messages": [["role": "user", "content": "hello"]], "a/b": ["x~": 1]]
        let sent: JSONValue = ["model": "m", "messages": [["role": "user", "content": "hullo"]], "a/b": ["x~": 1]]
        let found = CassetteMatching.firstDifference(recorded, sent, pointer: "")
        #expect(found?.pointer == "/messages/0/content")
        #expect(found?.recorded == "hello" && found?.sent == "hullo")
        // Keys sort before comparison: "a/b" comes first, escaped per RFC 6901.
        let other: JSONValue = ["model": "n", "messages": [], "a/b": ["x~": 2]]
        #expect(CassetteMatching.firstDifference(recorded, other, pointer: "")?.pointer == "/a~1b/x~0")
        // A missing member or element is a difference where it is missing.
        let longer: JSONValue = ["model": "m", "messages": [["role": "user", "content": "hello"], ["role": "user", "content": "more"]], "a/b": ["x~": 1]]
        let extra = try #require(CassetteMatching.firstDifference(recorded, longer, pointer: ""))
        #expect(extra.pointer == "/messages/1")
        #expect(extra.recorded == Optional<JSONValue>.none && extra.sent == ["role": "user", "content": "more"])
        #expect(CassetteMatching.firstDifference(recorded, recorded, pointer: "") == nil)
    }

    @Test func theNearestRequestIsTheSameProviderAndPathWithTheLongestCommonBody() throws {
        let base = try CassetteExchange(try JSONValue.parse(Self.exchange), line: 2)
        var far = base
        far.body = ["model": "zzz"]
        far.line = 3
        var otherProvider = base
        otherProvider.provider = "anthropic"
        otherProvider.line = 4
        let exchanges = [far, base, otherProvider]
        let request = CassetteMatching.Request(provider: "openai", method: "POST", path: "/v1/chat/completions", body: ["messages": [["content": "hi!", "role": "user"]], "model": "m"])
        let nearest = CassetteMatching.nearest(to: request, in: exchanges, canonical: exchanges.map { $0.body.serializedString() })
        #expect(nearest == 1)
        let difference = CassetteMatching.difference(recorded: otherProvider, sent: request)
        #expect(difference.part == "provider")
    }
}

/// The cassette options of `chat` (and the parser `serve` and `acp` share).
@Suite struct CassetteCommandLineTests {
    @Test func chatPassesTheCassetteOptionsToItsServer() throws {
        let options = try ChatCommand.parse(["--model-cassette", "c.jsonl", "--cassette-mode=auto", "--cassette-pace", "recorded"]).get()
        #expect(options.cassette.serverArguments == ["--model-cassette", "c.jsonl", "--cassette-mode", "auto", "--cassette-pace", "recorded"])
        #expect(try options.cassette.config().get() == ModelCassetteConfig(path: "c.jsonl", mode: .auto, pace: .recorded))
    }

    @Test(arguments: [["--cassette-mode", "rewind"], ["--cassette-pace", "slow"], ["--cassette-mode", "auto"], ["--model-cassette", ""]])
    func refusesCassetteOptionsThatCannotWork(_ arguments: [String]) {
        guard case .failure(let error) = ChatCommand.parse(arguments) else {
            Issue.record("\(arguments) was accepted")
            return
        }
        #expect(error.message.contains("cassette"))
    }

    @Test func noCassetteOptionsIsNoCassette() throws {
        #expect(try CassetteCommandLine().config().get() == nil)
        #expect(CassetteCommandLine().serverArguments.isEmpty)
    }
}

/// The cassette sits on the one HTTP seam: recording goes through whatever
/// `HTTPTransports.current` is (and so through any decorator installed there),
/// a replay never reaches it.
@Suite struct ModelCassetteSeamTests {
    /// Answers requests to `host` with one canned SSE stream and counts them;
    /// every other request (other tests run at the same time) passes through.
    final class CannedTransport: HTTPTransport {
        static let host = "cassette-seam.invalid"
        let inner: any HTTPTransport
        let seen = Mutex<[HTTPRequest]>([])
        init(inner: any HTTPTransport) { self.inner = inner }

        func start(_ request: HTTPRequest, sink: any HTTPResponseSink) -> HTTPRequestHandle {
            guard request.url.host == Self.host else { return inner.start(request, sink: sink) }
            seen.withLock { $0.append(request) }
            sink.head(ResponseHead(status: 200, headers: ["content-type": "text/event-stream", "x-request-id": "req_seam", "set-cookie": "c=1"]))
            sink.body(Data(#"data: {"choices":[{"index":0,"delta":{"content":"Through "}}]}"#.utf8 + Data("\n\n".utf8)))
            sink.body(Data(#"data: {"choices":[{"index":0,"delta":{"content":"the seam."},"finish_reason":"stop"}]}"#.utf8 + Data("\n\ndata: [DONE]\n\n".utf8)))
            sink.end(nil)
            return HTTPRequestHandle(cancel: {})
        }
    }

    @Test func recordingGoesThroughTheInstalledTransportAndAReplayNeverDoes() async throws {
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-seam-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let canned = CannedTransport(inner: HTTPTransports.current)
        let previous = HTTPTransports.current
        HTTPTransports.current = canned
        defer { HTTPTransports.current = previous }

        func ask(_ mode: CassetteMode) async throws -> [ProviderEvent] {
            var config = HTTPProviderConfiguration(
                baseURL: try #require(URL(string: "http://\(CannedTransport.host)/v1")), apiKey: "sk-seam-SECRET-0123456789", model: "m", timeoutSeconds: 5)
            config.cassette = try ModelCassette(file: path, path: path, mode: mode, pace: .fast, logger: nil)
            let result = await collect(OpenAIProvider(configuration: config).stream(ModelRequest(model: "", instructions: "hi", messages: [.user(text: "hi", images: [])])))
            #expect(result.error == nil)
            return result.events
        }
        let recorded = try await ask(.record)
        #expect(canned.seen.withLock { $0.count } == 1)
        #expect(recorded.contains(.textDelta("Through ")))
        let replayed = try await ask(.replay)
        #expect(canned.seen.withLock { $0.count } == 1, "a replay reached the transport")
        #expect(replayed == recorded)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!text.contains("sk-seam-SECRET") && !text.contains("set-cookie") && text.contains("req_seam"))
    }
}
