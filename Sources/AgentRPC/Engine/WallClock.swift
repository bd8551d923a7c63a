import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// The engine's calendar time: the `at` of journal records, a session's
/// `createdAt`, and how long a turn has been parked (`limits.parkedTTLSeconds`).
///
/// The test hook `AGENTRPC_TEST_CLOCK_OFFSET_SECONDS=S` (docs/testing.md) sets
/// it S seconds ahead of the system's for the whole process, so a test runs a
/// second process "two days later" without waiting two days.
enum WallClock {
    /// Milliseconds added to the system's time; 0 unless a test set it.
    private static let offsetMillis = Atomic<Int64>(0)

    static func now() -> Date {
        let offset = offsetMillis.load(ordering: .relaxed)
        return offset == 0 ? Date() : Date(timeIntervalSinceNow: Double(offset) / 1000)
    }

    /// Reads the hook from the environment; a value that is not a number of
    /// seconds from 0 to 10 years is an error (the server does not start).
    static func configure(environment: [String: String]) throws {
        guard let text = environment["AGENTRPC_TEST_CLOCK_OFFSET_SECONDS"] else { return }
        guard let seconds = Double(text), seconds.isFinite, seconds >= 0, seconds <= 315_360_000 else {
            throw RPCError.invalidConfiguration(
                "AGENTRPC_TEST_CLOCK_OFFSET_SECONDS must be a number of seconds from 0 to 315360000", field: "AGENTRPC_TEST_CLOCK_OFFSET_SECONDS")
        }
        offsetMillis.store(Int64(seconds * 1000), ordering: .relaxed)
    }
}
