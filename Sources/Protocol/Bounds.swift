/// A numeric range a wire field accepts. Declared once per field, it gives both
/// the schema keywords (`minimum`/`exclusiveMinimum`/`maximum`) and the check the
/// server applies, so the two cannot drift (docs/protocol.md, "Limits").
public struct NumericBounds: Sendable, Hashable {
    public var lowerBound: Double
    /// True when `lowerBound` itself is refused (`> 0` rather than `>= 0`).
    public var excludesLowerBound: Bool
    public var upperBound: Double
    /// The unit named in messages ("seconds", "milliseconds"), or nil.
    public var unit: String?

    public init(lowerBound: Double, excludesLowerBound: Bool, upperBound: Double, unit: String? = nil) {
        self.lowerBound = lowerBound
        self.excludesLowerBound = excludesLowerBound
        self.upperBound = upperBound
        self.unit = unit
    }

    /// False for NaN and infinities too.
    public func contains(_ value: Double) -> Bool {
        value.isFinite && (excludesLowerBound ? value > lowerBound : value >= lowerBound) && value <= upperBound
    }

    public func contains(_ value: Int) -> Bool { contains(Double(value)) }

    /// What an out-of-range value is told: "must be > 0 and <= 2592000 seconds".
    public var requirement: String {
        let lower = (excludesLowerBound ? "> " : ">= ") + Self.format(lowerBound)
        return "must be \(lower) and <= \(Self.format(upperBound))" + (unit.map { " " + $0 } ?? "")
    }

    /// The JSON Schema keywords that state this range.
    public var schemaKeywords: [String: JSONValue] {
        [
            excludesLowerBound ? "exclusiveMinimum" : "minimum": Self.number(lowerBound),
            "maximum": Self.number(upperBound),
        ]
    }

    private static func number(_ v: Double) -> JSONValue {
        v == v.rounded() && abs(v) < 9.0e15 ? .int(Int(v)) : .double(v)
    }

    private static func format(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 9.0e15 ? String(Int(v)) : String(v)
    }
}

/// The ranges every duration in the protocol, the configuration file and the
/// command line accepts. Thirty days is far beyond any real turn, tool or model
/// call, and far below anything a clock or a conversion could overflow on.
public enum DurationBounds {
    /// The longest duration any field accepts: 30 days.
    public static let maximumSeconds: Double = 30 * 24 * 60 * 60
    /// Timeouts and limits: more than zero, at most 30 days.
    public static let positiveSeconds = NumericBounds(lowerBound: 0, excludesLowerBound: true, upperBound: maximumSeconds, unit: "seconds")
    /// Delays and hints, where zero means "none": 0 to 30 days.
    public static let nonNegativeSeconds = NumericBounds(lowerBound: 0, excludesLowerBound: false, upperBound: maximumSeconds, unit: "seconds")
    /// Millisecond delays: 0 to 30 days.
    public static let nonNegativeMilliseconds = NumericBounds(lowerBound: 0, excludesLowerBound: false, upperBound: maximumSeconds * 1000, unit: "milliseconds")
}

/// The ranges of the token and cost limits (`limits`, `budget`): well above
/// any real conversation, well below any count a sum could overflow on or a
/// JSON number could not hold exactly.
public enum BudgetBounds {
    /// More than zero, at most 10^15 tokens.
    public static let tokens = NumericBounds(lowerBound: 0, excludesLowerBound: true, upperBound: 1e15, unit: "tokens")
    /// More than zero, at most a billion dollars.
    public static let costUSD = NumericBounds(lowerBound: 0, excludesLowerBound: true, upperBound: 1e9, unit: "US dollars")
    /// Entries kept verbatim after a summary (compaction's `keepLast`): 0 to a million.
    public static let keepLast = NumericBounds(lowerBound: 0, excludesLowerBound: false, upperBound: 1_000_000, unit: "entries")
}

/// A wire type whose numeric properties have ranges: the schema generator adds
/// each range's keywords to the property's schema (docs/protocol.md, "Limits").
public protocol JSONSchemaBounded {
    /// Bounds by coding key.
    static var jsonSchemaBounds: [String: NumericBounds] { get }
}

extension Duration {
    /// `seconds` as a `Duration`, clamped to 0...`DurationBounds.maximumSeconds`
    /// (NaN is 0). The one conversion from a number of seconds that came from
    /// input: `Duration.seconds(Double)` and the clocks trap on values far out of range.
    public static func clampedSeconds(_ seconds: Double) -> Duration {
        guard seconds > 0 else { return .zero }
        let s = Swift.min(seconds, DurationBounds.maximumSeconds)
        let whole = s.rounded(.down)
        return .seconds(Int64(whole)) + .nanoseconds(Int64(((s - whole) * 1e9).rounded(.down)))
    }

    /// `milliseconds` as a `Duration`, clamped the same way.
    public static func clampedMilliseconds(_ milliseconds: Int) -> Duration {
        clampedSeconds(Double(milliseconds) / 1000)
    }

    /// This duration in seconds, as a `Double`.
    public var secondsValue: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

extension Int {
    /// `value` rounded toward zero and clamped to `Int`'s range (NaN is 0):
    /// `Int(Double)` traps on anything out of range.
    public init(saturating value: Double) {
        if value.isNaN {
            self = 0
        } else if value >= 9.2e18 {
            self = .max
        } else if value <= -9.2e18 {
            self = .min
        } else {
            self = Int(value.rounded(.towardZero))
        }
    }
}

extension Int {
    /// `self + other`, stuck at `Int.max`/`Int.min` instead of trapping.
    public func addingSaturating(_ other: Int) -> Int {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}

/// The bounds of the MCP client (docs/protocol.md, "MCP tool servers"): everything
/// a server sends or takes is bounded here, so a hostile or broken one costs a
/// known amount of memory and time.
public enum MCPBounds {
    /// How long a turn waits for a server that is still starting, unless the server says otherwise.
    public static let defaultStartupTimeoutSeconds: Double = 30
    /// The range `startupTimeoutSeconds` accepts.
    public static let startupTimeoutSeconds = NumericBounds(lowerBound: 0, excludesLowerBound: true, upperBound: 600, unit: "seconds")
    /// The longest wait for an answer to `initialize`, `tools/list` or `ping`.
    public static let requestTimeoutSeconds: Double = 30
    /// The most MCP servers one session may name.
    public static let maxServersPerSession = 32
    /// The longest server name (the model's tool names are cut to 64 characters).
    public static let maxServerNameLength = 32
    /// The most `tools/list` pages read per listing (an endless cursor chain stops here).
    public static let maxToolPages = 50
    /// The most tools taken from one server; the rest are left out with a note.
    public static let maxToolsPerServer = 512
    /// The largest message a server may send; a larger one is skipped whole and the
    /// call it answered ends with a note to the model.
    public static let maxMessageBytes = 16 * 1024 * 1024
    /// The most the `Mcp-Param-*` headers of one `tools/call` may hold together
    /// (a modern HTTP server's `x-mcp-header` arguments, encoded): a longer call is not sent.
    public static let maxParamHeaderBytes = 8 * 1024
    /// Tool output longer than this (UTF-8 bytes) is cut, with a note to the model.
    public static let maxToolOutputBytes = 1024 * 1024
    /// How often a crashed server is started again within `restartWindowSeconds`
    /// before it is marked failed.
    public static let maxRestarts = 3
    /// The window the restarts are counted in.
    public static let restartWindowSeconds: Double = 60
    /// The first restart backoff; it doubles per restart within the window.
    public static let restartBackoffSeconds: Double = 0.5
    /// After a failure, a turn that starts this much later tries the server again;
    /// the wait doubles per failure, up to `maxRetryBackoffSeconds`, and is reset once it is ready.
    public static let retryBackoffSeconds: Double = 10
    public static let maxRetryBackoffSeconds: Double = 600
    /// The stderr lines kept per server (for `mcpServerStatus` and `session/getState`).
    public static let stderrLinesKept = 20
    /// The longest stderr line kept (longer lines are cut).
    public static let stderrLineBytes = 2048
    /// The recent protocol problems kept per server.
    public static let problemsKept = 10
    /// The shortest gap between two re-listings a `list_changed` storm causes.
    public static let relistIntervalSeconds: Double = 0.25
    /// Stopping a stdio server: after stdin closes, how long it may take to exit
    /// before SIGTERM, and after SIGTERM before SIGKILL.
    public static let stopGraceSeconds: Double = 2
    /// After SIGKILL to what a stopped server left in its process group, how long the
    /// stop waits for those processes to be gone (the kernel ends them asynchronously;
    /// zombies are not waited for, so the bound is reached only when the machine is starved).
    public static let leftoverKillWaitSeconds: Double = 1
    /// The longest tool name an `autoApprove` entry may hold.
    public static let maxToolNameLength = 256
    /// The most bytes kept waiting for a stdio server that does not read its input
    /// (a thread writes them; nothing else waits on the pipe): a message that finds
    /// more waiting is not sent, and the request it carried fails at once.
    public static let maxUnreadInputBytes = 16 * 1024 * 1024
    /// The longest SSE stream read for one HTTP request.
    public static let maxResponseBytes = 16 * 1024 * 1024
}

/// The bounds of the tools `agentrpc acp` runs itself in the workspace
/// (docs/acp.md, "Tools"): what one call may read, print or take in time.
public enum ACPToolBounds {
    /// The most a local `read_file` returns, in UTF-8 bytes (the rest is named, with `line`/`limit` to read it).
    public static let maxReadBytes = 256 * 1024
    /// The largest file `edit_file` and `write_file` work on locally.
    public static let maxEditedFileBytes = 8 * 1024 * 1024
    /// The command output kept, in bytes: the last ones (as the editor's `outputByteLimit`).
    public static let commandOutputBytes = 64 * 1024
    /// How long a cancelled or timed-out command has after SIGTERM before SIGKILL.
    public static let commandKillGraceSeconds = 0.5
    /// `list_files`: the paths returned by default, and at most (`limit`).
    public static let defaultListedFiles = 500
    public static let maxListedFiles = 5000
    /// `list_files` and `search`: directory entries looked at per call, and the time a walk may take.
    public static let maxWalkedEntries = 200_000
    public static let walkSeconds = 10.0
    /// `search`: the matching lines returned by default, and at most (`limit`).
    public static let defaultSearchMatches = 100
    public static let maxSearchMatches = 1000
    /// `search`: files larger than this are not searched (named in the answer).
    public static let maxSearchedFileBytes = 2 * 1024 * 1024
    /// `search`: the longest matching line shown, in characters.
    public static let shownLineCharacters = 240
    /// `.gitignore` files read above the walked directory, up to the repository's root.
    public static let maxIgnoreAncestors = 32
    /// How long `session/new`, `load`, `resume` and `fork` wait for the session's MCP
    /// servers to be ready or failed, so the answer names those that failed (a server
    /// that exits at once fails after its restarts, about 3.5 s).
    public static let mcpSettleSeconds = 10.0
}
