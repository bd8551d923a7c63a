import AgentRPCProtocol
import Foundation
import Synchronization

/// A match of a user-supplied pattern ran out of its time budget (or its
/// request was cancelled while it ran), and was stopped.
package struct RegexBudgetExceeded: Error, Sendable, Hashable {
    package var pattern: String
    /// True when the request was cancelled rather than the budget spent.
    package var cancelled = false
}

/// A user-supplied regular expression (egress rules, history redactions, router
/// rules, JSON Schema `pattern`/`patternProperties`), compiled once, whose every
/// match is bounded in time (docs/protocol.md, "Every limit and its default").
///
/// The bound is real, not abandonment: matching runs in ICU with
/// `.reportProgress`, which calls back into us every few thousand backtracking
/// steps; when the budget is spent (or the worker's job was cancelled) the
/// callback stops the match, and ICU returns at once. So a pattern like
/// `(a+)+$` on `"a"*29 + "!"` costs at most the budget.
///
/// `@unchecked Sendable` because `NSRegularExpression` carries no Sendable
/// annotation, yet it is immutable and matched from many threads (Foundation
/// checks out or clones the ICU matcher per match); this type never mutates it.
package final class BoundedRegex: @unchecked Sendable {
    /// How long one match of one pattern against one text may run.
    package static let matchBudgetSeconds = 0.25

    package let pattern: String
    private let regex: NSRegularExpression

    package init(_ pattern: String, options: NSRegularExpression.Options = []) throws {
        self.pattern = pattern
        self.regex = try NSRegularExpression(pattern: pattern, options: options)
    }

    /// Whether the pattern matches anywhere in `text` (unanchored).
    func firstMatch(in text: String) throws(RegexBudgetExceeded) -> Bool {
        var found = false
        try enumerate(in: text) { _, stop in
            found = true
            stop = true
        }
        return found
    }

    /// Where the pattern matches in `text` (UTF-16 offsets), the first `limit` matches.
    package func matchOffsets(in text: String, limit: Int) throws(RegexBudgetExceeded) -> [Int] {
        var offsets: [Int] = []
        try enumerate(in: text) { range, stop in
            offsets.append(range.location)
            if offsets.count >= limit { stop = true }
        }
        return offsets
    }

    /// `text` with every match replaced by `replacement`, taken literally.
    func replacingMatches(in text: String, withLiteral replacement: String) throws(RegexBudgetExceeded) -> String {
        var ranges: [Range<String.Index>] = []
        try enumerate(in: text) { range, _ in
            if let r = Range(range, in: text) { ranges.append(r) }
        }
        guard !ranges.isEmpty else { return text }
        var out = ""
        var rest = text.startIndex
        for r in ranges {
            out += text[rest..<r.lowerBound]
            out += replacement
            rest = r.upperBound
        }
        out += text[rest...]
        return out
    }

    private func enumerate(in text: String, _ body: (NSRange, inout Bool) -> Void) throws(RegexBudgetExceeded) {
        let deadline = ContinuousClock.now.advanced(by: .clampedSeconds(Self.matchBudgetSeconds))
        let cancellation = RegexWorkers.currentCancellation
        var exceeded = false
        var cancelled = false
        // Foundation declares the block escaping; it is only called during the enumeration.
        withoutActuallyEscaping(body) { body in
            regex.enumerateMatches(in: text, options: [.reportProgress], range: NSRange(location: 0, length: text.utf16.count)) { result, _, stop in
                if let result {
                    var shouldStop = false
                    body(result.range, &shouldStop)
                    if shouldStop { stop.pointee = true }
                    return
                }
                // A progress callback: the match is still running.
                if cancellation?.isCancelled == true {
                    cancelled = true
                    stop.pointee = true
                } else if ContinuousClock.now >= deadline {
                    exceeded = true
                    stop.pointee = true
                }
            }
        }
        if cancelled || exceeded { throw RegexBudgetExceeded(pattern: pattern, cancelled: cancelled) }
    }
}

/// Threads that run user-pattern matching, so a slow pattern never occupies the
/// cooperative executor that answers `getState`, `session/cancel`, `initialize`
/// and every other session's requests.
package enum RegexWorkers {
    /// Set while a job runs; cancelling the awaiting task sets it, and a running
    /// match sees it at its next progress callback.
    package final class Cancellation: Sendable {
        private let flag = Mutex<Bool>(false)
        package var isCancelled: Bool { flag.withLock { $0 } }
        func cancel() { flag.withLock { $0 = true } }
    }

    private static let threadKey = "agentrpc.regex.cancellation"

    /// The cancellation of the job running on this thread, if it is a worker.
    package static var currentCancellation: Cancellation? {
        Thread.current.threadDictionary[threadKey] as? Cancellation
    }

    /// How many workers run jobs at once. Two: one slow session does not hold up another's checks.
    static let threadCount = 2

    private static let pool = WorkerPool(threads: threadCount)

    /// Runs `job` on a worker thread and returns its result; cancelling the
    /// calling task stops a match in progress (it then throws
    /// `RegexBudgetExceeded` with `cancelled`, which the job handles or returns).
    package static func run<T: Sendable>(_ job: @escaping @Sendable () -> T) async -> T {
        let cancellation = Cancellation()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
                pool.submit {
                    Thread.current.threadDictionary[threadKey] = cancellation
                    defer { Thread.current.threadDictionary[threadKey] = nil }
                    continuation.resume(returning: job())
                }
            }
        } onCancel: {
            cancellation.cancel()
        }
    }

    /// A fixed set of threads taking jobs from one queue, first come first served.
    final class WorkerPool: @unchecked Sendable {
        // @unchecked: `jobs` and `started` are only touched under `condition`.
        // A condition, not a Mutex: an idle worker thread must block until a job comes.
        private let condition = NSCondition()
        private var jobs: [@Sendable () -> Void] = []
        private var started = false
        private let threads: Int

        init(threads: Int) { self.threads = threads }

        func submit(_ job: @escaping @Sendable () -> Void) {
            condition.lock()
            defer { condition.unlock() }
            jobs.append(job)
            if !started {
                started = true
                for i in 0..<threads {
                    let thread = Thread { [self] in work() }
                    thread.name = "agentrpc.regex.\(i)"
                    thread.start()
                }
            }
            condition.signal()
        }

        private func work() {
            while true {
                condition.lock()
                while jobs.isEmpty { condition.wait() }
                let job = jobs.removeFirst()
                condition.unlock()
                job()
            }
        }
    }
}
