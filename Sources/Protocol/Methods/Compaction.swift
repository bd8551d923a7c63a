// `session/compact` and what compaction reports (docs/protocol.md, "Compaction").

/// `session/compact`: the entries before the kept tail are summarized by the
/// model and replaced by one `summary` entry, as one transcript revision.
public enum SessionCompactRequest: RPCMethod {
    public static let name = "session/compact"
    public static let direction = MethodDirection.clientToServer
    public typealias Params = SessionCompactParams
    public typealias Result = SessionCompactResult
}

/// `session/compact` params.
public struct SessionCompactParams: Codable, Sendable, Hashable {
    public var sessionId: String
    /// Entries kept verbatim after the summary (default: `compaction.keepLast`, else 6).
    public var keepLast: Int?
    /// Added to the summary request's instructions (what to keep, what to stress).
    public var instructions: String?
    /// `true`: answer the summary and the token figures, change nothing.
    public var preview: Bool?

    public init(sessionId: String, keepLast: Int? = nil, instructions: String? = nil, preview: Bool? = nil) {
        self.sessionId = sessionId
        self.keepLast = keepLast
        self.instructions = instructions
        self.preview = preview
    }
}

extension SessionCompactParams: JSONSchemaBounded {
    public static let jsonSchemaBounds: [String: NumericBounds] = ["keepLast": BudgetBounds.keepLast]
}

/// `session/compact` result.
public struct SessionCompactResult: Codable, Sendable, Hashable {
    /// The summary the model wrote.
    public var summary: String
    /// How many entries the summary replaces.
    public var entriesRemoved: Int
    /// The context before and after, in tokens: the last round trip's reading
    /// (or an estimate) before, minus the removed entries plus the summary after.
    public var tokensBefore: Int
    public var tokensAfter: Int
    /// The transcript's revision after the compaction (unchanged by a preview).
    public var revision: Int
    /// The `summary` entry; absent in a preview.
    public var entryId: String?
    /// Set on a preview's answer.
    public var preview: Bool?

    public init(
        summary: String, entriesRemoved: Int, tokensBefore: Int, tokensAfter: Int, revision: Int, entryId: String? = nil, preview: Bool? = nil
    ) {
        self.summary = summary
        self.entriesRemoved = entriesRemoved
        self.tokensBefore = tokensBefore
        self.tokensAfter = tokensAfter
        self.revision = revision
        self.entryId = entryId
        self.preview = preview
    }
}

/// What started a compaction.
public enum CompactionTrigger: String, Codable, Sendable, Hashable, JSONSchemaStringEnum {
    /// `session/compact` (or `/compact` in the chat and in `agentrpc acp`).
    case manual
    /// Before a round trip whose context would pass `compaction.threshold` of the window.
    case threshold
    /// The provider answered `contextLengthExceeded`; the round trip is retried once.
    case overflow
}
