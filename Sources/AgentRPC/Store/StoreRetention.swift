import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `agentrpc.json` `store: {maxAgeDays, maxSessions}`: stored sessions last
/// updated more than `maxAgeDays` ago, and those past the `maxSessions` most
/// recently updated, are removed when a server starts, in the background. A
/// session loaded here or in another process is never touched.
struct StoreRetention: Codable, Sendable, Equatable {
    var maxAgeDays: Int?
    var maxSessions: Int?

    static let maxDays = 100_000

    /// The first value out of range, if any.
    var problem: (field: String, message: String)? {
        if let d = maxAgeDays, d < 1 || d > Self.maxDays { return ("store.maxAgeDays", "must be between 1 and \(Self.maxDays)") }
        if let n = maxSessions, n < 1 { return ("store.maxSessions", "must be at least 1") }
        return nil
    }

    /// At server start, on a background thread: removes the temporary files
    /// a crash left (`JournalStore.removeLeftoverTemporaries`), reads the store's index (so
    /// the first `session/list` does not wait for the journals to be checked),
    /// then prunes by `retention` if there is one. `isLoaded` says whether this
    /// process has a session loaded. Logs what it removed and skipped.
    static func startAtLaunch(_ retention: StoreRetention?, on store: JournalStore, logger: Logger, isLoaded: @escaping @Sendable (String) -> Bool) {
        // A store directory that does not exist yet has nothing to read or prune.
        guard FileManager.default.fileExists(atPath: store.directory) else { return }
        Dispatching.async(utility: true) {
            store.removeLeftoverTemporaries()
            store.index.refresh()
            if let retention, retention.maxAgeDays != nil || retention.maxSessions != nil {
                retention.run(on: store, logger: logger, isLoaded: isLoaded)
            }
        }
    }

    @discardableResult
    func run(on store: JournalStore, logger: Logger, isLoaded: (String) -> Bool) -> JournalStore.PruneReport {
        let cutoff = maxAgeDays.map { Date().addingTimeInterval(-Double($0) * 86_400) }
        let started = Dispatching.monotonicNanoseconds()
        let report = store.prune(olderThan: cutoff, keepNewest: maxSessions, dryRun: false, excluded: isLoaded)
        let ms = Double(Dispatching.monotonicNanoseconds() - started) / 1e6
        var rules: [String] = []
        if let d = maxAgeDays { rules.append("older than \(d) days") }
        if let n = maxSessions { rules.append("beyond the newest \(n)") }
        logger.info("store retention (\(rules.joined(separator: ", "))): removed \(report.removed.count) session(s), skipped \(report.skipped.count) loaded, in \(String(cFormat: "%.0f", ms)) ms")
        for id in report.removed { logger.debug("store retention: removed \(id)") }
        for (id, pid) in report.skipped { logger.info("store retention: skipped \(id), loaded" + (pid.map { " by pid \($0)" } ?? "")) }
        return report
    }
}
