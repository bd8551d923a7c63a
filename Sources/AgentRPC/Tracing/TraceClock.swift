#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where span timestamps come from. Tests substitute a clock they step by hand.
protocol TraceClock: Sendable {
    /// Nanoseconds since the Unix epoch.
    func nowUnixNanos() -> UInt64
}

/// Wall-clock time that never runs backwards within the process.
///
/// The wall clock is read once, at creation; later readings add the monotonic
/// time elapsed since. A clock step (NTP, the user) therefore cannot produce a
/// span that ends before it starts, and durations keep nanosecond precision
/// (a `Date` near today only resolves about 240 ns).
struct SystemTraceClock: TraceClock {
    private let wallAnchorNanos: UInt64
    private let monotonicAnchorNanos: UInt64

    init() {
        monotonicAnchorNanos = Dispatching.monotonicNanoseconds()
        let seconds = Date().timeIntervalSince1970
        wallAnchorNanos = seconds > 0 ? UInt64(seconds * 1_000_000_000) : 0
    }

    func nowUnixNanos() -> UInt64 {
        let elapsed = Dispatching.monotonicNanoseconds() &- monotonicAnchorNanos
        return wallAnchorNanos &+ elapsed
    }
}
