import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// A match of a user-supplied pattern ran out of its time budget (or its
/// request was cancelled while it ran), and was stopped.
package struct RegexBudgetExceeded: Error, Sendable, Hashable {
    package var pattern: String
    /// True when the request was cancelled rather than the budget spent.
    package var cancelled = false
}

/// A pattern that is not a valid regular expression (ICU's syntax), or one that could
/// not be compiled because ICU could not be loaded.
package enum RegexCompileError: Error, CustomStringConvertible, Sendable, Equatable {
    /// ICU refused the pattern; `reason` is ICU's name of the error.
    case invalid(pattern: String, reason: String)
    case unavailable(ICUUnavailable)

    package var description: String {
        switch self {
        case .invalid(_, let reason): "invalid pattern (\(reason))"
        case .unavailable(let problem): problem.message
        }
    }
}

/// A user-supplied regular expression (egress rules, history redactions, router
/// rules, JSON Schema `pattern`/`patternProperties`), compiled once, whose every
/// match is bounded in time (docs/protocol.md, "Every limit and its default").
///
/// The bound is real, not abandonment: matching runs in ICU (its C API, loaded at
/// the first pattern: `ICU`) with a progress callback that ICU calls every few
/// thousand backtracking steps; when the budget is spent (or the worker's job was
/// cancelled) the callback stops the match, and ICU returns at once. So a pattern
/// like `(a+)+$` on `"a"*29 + "!"` costs at most the budget. ICU's syntax and
/// semantics are those `NSRegularExpression` gave (it is the same ICU, called the
/// same way: UTF-16 text, the same flags, matches reported at grapheme boundaries).
///
/// `@unchecked Sendable`: the compiled pattern is never matched itself, only
/// cloned (each match runs on its own clone, which ICU allows from any thread);
/// `spare`, a clone kept for the next match, is guarded by its mutex.
package final class BoundedRegex: @unchecked Sendable {
    /// How long one match of one pattern against one text may run.
    package static let matchBudgetSeconds = 0.25

    /// ICU's flags, named as `NSRegularExpression.Options` named them.
    package struct Options: OptionSet, Sendable {
        package let rawValue: UInt32
        package init(rawValue: UInt32) { self.rawValue = rawValue }
        /// UREGEX_CASE_INSENSITIVE.
        package static let caseInsensitive = Options(rawValue: 2)
        /// UREGEX_MULTILINE: `^` and `$` match at line boundaries.
        package static let anchorsMatchLines = Options(rawValue: 8)
    }

    package let pattern: String
    private let icu: ICU
    private let compiled: OpaquePointer
    private let spare = Mutex<Matcher?>(nil)

    /// A clone of the compiled pattern, used by one match at a time.
    private struct Matcher: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    package init(_ pattern: String, options: Options = []) throws(RegexCompileError) {
        self.pattern = pattern
        let icu: ICU
        switch ICU.shared {
        case .failure(let problem): throw .unavailable(problem)
        case .success(let library): icu = library
        }
        self.icu = icu
        // A terminating 0 after the pattern: ICU refuses a null pointer even for an empty one.
        let units = Array(pattern.utf16) + [0]
        guard units.count < Int32.max else { throw .invalid(pattern: pattern, reason: "U_REGEX_PATTERN_TOO_BIG") }
        var status: ICU.ErrorCode = 0
        let regex = units.withUnsafeBufferPointer { icu.regexOpen($0.baseAddress, Int32($0.count - 1), options.rawValue, nil, &status) }
        guard let regex, status <= 0 else {
            if let regex { icu.regexClose(regex) }
            throw .invalid(pattern: pattern, reason: icu.name(of: status))
        }
        compiled = regex
    }

    /// What a configuration check says of `pattern`: nil when it compiles.
    package static func problem(with pattern: String) -> String? {
        do throws(RegexCompileError) {
            _ = try BoundedRegex(pattern)
            return nil
        } catch {
            switch error {
            case .invalid: return "'\(pattern)' is not a valid regular expression"
            case .unavailable(let problem): return "'\(pattern)' cannot be checked: \(problem.message)"
            }
        }
    }

    deinit {
        spare.withLock { if let matcher = $0 { icu.regexClose(matcher.pointer) } }
        icu.regexClose(compiled)
    }

    /// Whether the pattern matches anywhere in `text` (unanchored).
    func firstMatch(in text: String) throws(RegexBudgetExceeded) -> Bool {
        var found = false
        try enumerate(in: text) { _, _, stop in
            found = true
            stop = true
        }
        return found
    }

    /// Where the pattern matches in `text` (UTF-16 offsets), the first `limit` matches.
    package func matchOffsets(in text: String, limit: Int) throws(RegexBudgetExceeded) -> [Int] {
        var offsets: [Int] = []
        try enumerate(in: text) { start, _, stop in
            offsets.append(start)
            if offsets.count >= limit { stop = true }
        }
        return offsets
    }

    /// `text` with every match replaced by `replacement`, taken literally. A match that
    /// starts or ends inside a Character (a grapheme cluster such as "\r\n") is left
    /// alone, as it always was.
    func replacingMatches(in text: String, withLiteral replacement: String) throws(RegexBudgetExceeded) -> String {
        var ranges: [Range<String.Index>] = []
        let utf16 = text.utf16
        try enumerate(in: text) { start, end, _ in
            guard let lower = String.Index(utf16.index(utf16.startIndex, offsetBy: start), within: text),
                  let upper = String.Index(utf16.index(utf16.startIndex, offsetBy: end), within: text) else { return }
            ranges.append(lower..<upper)
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

    /// What the progress callbacks see: when to stop, and why it stopped.
    private final class Progress {
        let deadline: ContinuousClock.Instant
        let cancellation: RegexWorkers.Cancellation?
        var exceeded = false
        var cancelled = false
        init(deadline: ContinuousClock.Instant, cancellation: RegexWorkers.Cancellation?) {
            self.deadline = deadline
            self.cancellation = cancellation
        }

        /// 1 to go on, 0 to stop the match.
        func keepGoing() -> Int8 {
            if cancellation?.isCancelled == true {
                cancelled = true
                return 0
            }
            if ContinuousClock.now >= deadline {
                exceeded = true
                return 0
            }
            return 1
        }
    }

    /// Calls `body` with each match's UTF-16 bounds, left to right, until it sets `stop`.
    private func enumerate(in text: String, _ body: (Int, Int, inout Bool) -> Void) throws(RegexBudgetExceeded) {
        let progress = Progress(
            deadline: ContinuousClock.now.advanced(by: .clampedSeconds(Self.matchBudgetSeconds)), cancellation: RegexWorkers.currentCancellation)
        // A terminating 0 after the text: ICU refuses a null pointer even for an empty text.
        let units = Array(text.utf16) + [0]
        let length = units.count - 1
        guard length < Int32.max else { throw RegexBudgetExceeded(pattern: pattern) }
        var status: ICU.ErrorCode = 0
        guard let matcher = spare.withLock({ m -> Matcher? in defer { m = nil }; return m })?.pointer ?? icu.regexClone(compiled, &status), status <= 0 else {
            return
        }
        defer {
            var ignored: ICU.ErrorCode = 0
            icu.regexSetMatchCallback(matcher, nil, nil, &ignored)
            icu.regexSetFindProgressCallback(matcher, nil, nil, &ignored)
            let kept = spare.withLock { m -> Bool in
                guard m == nil else { return false }
                m = Matcher(pointer: matcher)
                return true
            }
            if !kept { icu.regexClose(matcher) }
        }
        withExtendedLifetime(progress) {
            units.withUnsafeBufferPointer { buffer in
                let context = UnsafeRawPointer(Unmanaged.passUnretained(progress).toOpaque())
                icu.regexSetText(matcher, buffer.baseAddress, Int32(length), &status)
                icu.regexSetMatchCallback(matcher, { context, _ in
                    guard let context else { return 1 }
                    return Unmanaged<Progress>.fromOpaque(context).takeUnretainedValue().keepGoing()
                }, context, &status)
                icu.regexSetFindProgressCallback(matcher, { context, _ in
                    guard let context else { return 1 }
                    return Unmanaged<Progress>.fromOpaque(context).takeUnretainedValue().keepGoing()
                }, context, &status)
                guard status <= 0 else { return }
                var stop = false
                while !stop && icu.regexFindNext(matcher, &status) != 0 && status <= 0 {
                    let start = icu.regexStart(matcher, 0, &status)
                    let end = icu.regexEnd(matcher, 0, &status)
                    guard status <= 0, start >= 0, end >= start else { break }
                    body(Int(start), Int(end), &stop)
                }
            }
        }
        if progress.cancelled || progress.exceeded { throw RegexBudgetExceeded(pattern: pattern, cancelled: progress.cancelled) }
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

    /// The cancellation of the job running on this thread, if it is a worker.
    @TaskLocal private static var jobCancellation: Cancellation?

    /// The cancellation of the job running on this thread, if it is a worker.
    package static var currentCancellation: Cancellation? { jobCancellation }

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
                    continuation.resume(returning: $jobCancellation.withValue(cancellation) { job() })
                }
            }
        } onCancel: {
            cancellation.cancel()
        }
    }

    /// A fixed set of threads taking jobs from one queue, first come first served.
    final class WorkerPool: @unchecked Sendable {
        // @unchecked: `jobs` and `running` are only touched under `condition`.
        // A condition, not a Mutex: an idle worker thread must block until a job comes.
        private let condition = ConditionLock()
        private var jobs: [@Sendable () -> Void] = []
        /// Workers started so far; started with the first job, and any the system
        /// refused are tried again with the next.
        private var running = 0
        private let threads: Int

        init(threads: Int) { self.threads = threads }

        func submit(_ job: @escaping @Sendable () -> Void) {
            condition.lock()
            while running < threads {
                do {
                    try OSThread.start(name: "agentrpc.regex.\(running)") { [self] in work() }
                    running += 1
                } catch {
                    break
                }
            }
            guard running > 0 else {
                // No worker at all: the job runs here. Its bound still holds (ICU's
                // callback stops the match when the budget is spent); only the
                // caller's thread is held for it.
                condition.unlock()
                job()
                return
            }
            jobs.append(job)
            condition.signal()
            condition.unlock()
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
