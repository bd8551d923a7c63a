import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where the MCP runners read the time they count restarts in and schedule a
/// failed server's next try by (seconds on a monotonic clock). Only decisions
/// read it; the short restart backoffs are real sleeps.
///
/// `AGENTRPC_TEST_MCP_CLOCK_FILE` names a file holding a number of seconds
/// added to the clock, re-read at each reading: tests move a ten-minute
/// session along without waiting ten minutes.
struct MCPClock: Sendable {
    private let start = ContinuousClock.now
    private let offsetFile: String?

    init(offsetFile: String? = nil) {
        self.offsetFile = offsetFile
    }

    init(environment: [String: String]) {
        self.init(offsetFile: environment["AGENTRPC_TEST_MCP_CLOCK_FILE"])
    }

    func now() -> Double {
        (ContinuousClock.now - start).secondsValue + offset
    }

    private var offset: Double {
        guard let offsetFile, let data = FileManager.default.contents(atPath: offsetFile),
              let text = String(data: data.prefix(64), encoding: .utf8),
              let seconds = Double(text.trimmingWhitespaceAndNewlines()), seconds.isFinite
        else { return 0 }
        return seconds
    }
}
