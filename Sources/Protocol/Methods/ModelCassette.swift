// Model cassettes (docs/testing.md): a provider's HTTP traffic recorded once and
// replayed offline. The configuration is given to `serve` (`--model-cassette`),
// in agentrpc.json (`modelCassette`) or per session (`session/create`); a request
// the cassette cannot answer fails with the provider error `cassetteMiss`.

/// Where a session's (or the server's) model traffic is recorded or replayed from.
public struct ModelCassetteConfig: Codable, Sendable, Hashable {
    /// The cassette file (JSON Lines). Relative paths are relative to the server's
    /// working directory (in agentrpc.json: to the file's directory).
    public var path: String
    /// Default `replay`: nothing goes to the network.
    public var mode: CassetteMode?
    /// Default `fast`.
    public var pace: CassettePace?

    public init(path: String, mode: CassetteMode? = nil, pace: CassettePace? = nil) {
        self.path = path
        self.mode = mode
        self.pace = pace
    }
}

/// What a cassette does with each provider request.
public enum CassetteMode: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    /// Every request is sent for real and its response written to a new cassette.
    case record
    /// Every request is answered from the cassette; nothing goes to the network.
    case replay
    /// Answered from the cassette when it holds the exchange, else sent for real and recorded.
    case auto
}

/// How fast a replayed response arrives.
public enum CassettePace: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    /// As fast as possible.
    case fast
    /// At the recorded pace, chunk by chunk (timeouts and cancellation can be tested).
    case recorded
}

/// `data.provider.cassette` of a `cassetteMiss`: why the cassette had no answer,
/// and the recorded request nearest to the one sent.
public struct CassetteMiss: Codable, Sendable, Hashable {
    /// The cassette file, as configured.
    public var file: String
    public var reason: CassetteMissReason
    /// The request that found no answer.
    public var request: CassetteRequestRef
    /// The recorded request nearest to it; absent when the cassette holds none.
    public var nearest: CassetteRequestRef?
    /// Where the sent request first differs from `nearest`; absent for `exhausted`.
    public var difference: CassetteDifference?

    public init(file: String, reason: CassetteMissReason, request: CassetteRequestRef, nearest: CassetteRequestRef? = nil, difference: CassetteDifference? = nil) {
        self.file = file
        self.reason = reason
        self.request = request
        self.nearest = nearest
        self.difference = difference
    }
}

/// Why a cassette had no answer.
public enum CassetteMissReason: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    /// No recorded request equals the one sent.
    case noMatch
    /// Equal requests were recorded, and every one of them was already answered.
    case exhausted
}

/// A request, by what a cassette matches on (the body aside).
public struct CassetteRequestRef: Codable, Sendable, Hashable {
    /// The provider kind (`openai`, `anthropic`, `openai-responses`).
    public var provider: String
    /// The URL path (`/v1/chat/completions`).
    public var path: String
    /// Its line in the cassette file (recorded requests only).
    public var line: Int?

    public init(provider: String, path: String, line: Int? = nil) {
        self.provider = provider
        self.path = path
        self.line = line
    }
}

/// The first place two requests differ.
public struct CassetteDifference: Codable, Sendable, Hashable {
    /// `provider`, `path` or `body`.
    public var part: String
    /// JSON Pointer into the body (`/messages/1/content`); `""` for the whole body or another part.
    public var pointer: String
    /// The recorded and the sent value there, as compact JSON (cut to 200 characters); absent where one side has nothing.
    public var recorded: String?
    public var sent: String?

    public init(part: String, pointer: String, recorded: String?, sent: String?) {
        self.part = part
        self.pointer = pointer
        self.recorded = recorded
        self.sent = sent
    }
}
