import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Ends the process when its polite exit (end of input, `exit`, a signal) has
/// not finished within a bound, whatever is stuck: a thread blocked on a lock,
/// every thread of the task pool blocked, a journal that never syncs. Each wait
/// of the polite exit has its own bound; this one is on the whole, so that a
/// host that sends one SIGTERM (or closes stdin) can rely on the process being
/// gone in time (docs/protocol.md, "Every limit and its default").
///
/// It shares nothing with the exit it watches: its own thread, started with the
/// server and idle until armed; armed by `sem_post` (no lock, no allocation, no
/// task, so it works from the reader thread, a signal handler or a task alike);
/// it sleeps on the monotonic clock; its last words are one `write(2)` to stderr,
/// left out if stderr cannot take them at once; then `_exit`. MCP servers need
/// nothing from it: their supervisors kill them when this process's lifeline
/// pipe closes, which `_exit` does (`ChildProcess`).
///
/// `@unchecked Sendable`: the semaphore is only used through `sem_post` and
/// `sem_wait`, which are safe from any thread; the rest is atomics and lets.
package final class ExitWatchdog: @unchecked Sendable {
    /// `timeout(1)`'s status: distinct from a polite exit's (0, 1), a usage
    /// error's (2) and a second signal's (128 + N).
    package static let status: Int32 = 124

    /// What started the exit.
    package enum Cause: Sendable, Equatable, CustomStringConvertible {
        case endOfInput
        case exit
        case signal(Int32)

        /// Its value in `armedCause` (0 is "not armed").
        var code: Int {
            switch self {
            case .endOfInput: return 1
            case .exit: return 2
            case .signal(let number): return 1000 + Int(number)
            }
        }

        init?(code: Int) {
            switch code {
            case 1: self = .endOfInput
            case 2: self = .exit
            case 1001...1064: self = .signal(Int32(code - 1000))
            default: return nil
            }
        }

        package var description: String {
            switch self {
            case .endOfInput: return "the end of input"
            case .exit: return "exit"
            case .signal(let number): return "signal \(number)"
            }
        }
    }

    /// How far the exit got, named in the last words to say where it stuck.
    package enum Stage: Int, Sendable, CustomStringConvertible {
        case notStarted = 0
        case stoppingTurns
        case closingSessions
        case answering
        case flushing
        case exiting

        package var description: String {
            switch self {
            case .notStarted: return "before the exit began its work"
            case .stoppingTurns: return "while running turns stopped and rolled back"
            case .closingSessions: return "while sessions were closed (MCP servers stopped, journals synced)"
            case .answering: return "while the last requests were answered"
            case .flushing: return "while queued output was written to the client"
            case .exiting: return "after the output was flushed, while the process exited"
            }
        }
    }

    package let boundSeconds: Double
    private let semaphore: UnsafeMutablePointer<sem_t>
    private let armedCause = Atomic<Int>(0)
    private let stage = Atomic<Int>(Stage.notStarted.rawValue)
    /// A child with no supervisor of its own, killed when the watchdog fires
    /// (`agentrpc acp`'s local model server); 0: none.
    private let unsupervisedChild = Atomic<Int32>(0)
    /// What ends the process; a test replaces it to watch the watchdog in process.
    private let end: @Sendable (String) -> Void

    /// Starts the watching thread; nothing happens until `arm`. Without `end`,
    /// firing writes `lastWords` to stderr and calls `_exit(124)`.
    /// Throws when the system refuses its thread: a process whose last resort
    /// cannot run must not start serving.
    package init(boundSeconds: Double, end: (@Sendable (String) -> Void)? = nil) throws(OSThread.StartError) {
        // A bound the clock arithmetic below can hold; the caller checks the range.
        self.boundSeconds = min(max(boundSeconds, 0.001), DurationBounds.maximumSeconds)
        semaphore = .allocate(capacity: 1)
        // Cannot fail with these arguments on Linux; if it did, `sem_wait` fails and `watch` returns.
        sem_init(semaphore, 0, 0)
        self.end = end ?? { line in
            Self.writeToStderrIfItTakesIt(line)
            _exit(Self.status)
        }
        // The thread holds the watchdog for the life of the process (it is the
        // process's last resort), so the semaphore is never freed under it.
        do {
            try OSThread.start(name: "agentrpc.exit-watchdog", stackSize: 256 * 1024) { [self] in watch() }
        } catch {
            sem_destroy(semaphore)
            semaphore.deallocate()
            throw error
        }
    }

    /// Starts the countdown; the first cause wins, later calls do nothing.
    package func arm(_ cause: Cause) {
        guard armedCause.compareExchange(expected: 0, desired: cause.code, ordering: .acquiringAndReleasing).exchanged else { return }
        sem_post(semaphore)
    }

    /// `pid` is killed (SIGKILL) when the watchdog fires, so that it does not
    /// outlive the process; nil once it is stopped (its pid may be reused).
    package func killsWhenFiring(_ pid: Int32?) {
        unsupervisedChild.store(pid ?? 0, ordering: .releasing)
    }

    /// Records how far the exit got.
    package func reached(_ stage: Stage) {
        self.stage.store(stage.rawValue, ordering: .releasing)
    }

    /// The cause the watchdog was armed with (nil: not armed).
    package var cause: Cause? { Cause(code: armedCause.load(ordering: .acquiring)) }

    /// The line written when the bound passes.
    package var lastWords: String {
        let cause = self.cause.map(\.description) ?? "an unknown cause"
        let stage = Stage(rawValue: self.stage.load(ordering: .acquiring)) ?? .notStarted
        return "agentrpc[error] the exit (\(cause)) did not finish within \(Self.seconds(boundSeconds)) s; it stuck \(stage); "
            + "ending the process with status \(Self.status)\n"
    }

    private func watch() {
        while sem_wait(semaphore) != 0 {
            // A semaphore that does not work: better no watchdog than one that fires unarmed.
            if errno != EINTR { return }
        }
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let whole = boundSeconds.rounded(.down)
        deadline.tv_sec += Int(whole)
        deadline.tv_nsec += Int((boundSeconds - whole) * 1e9)
        if deadline.tv_nsec >= 1_000_000_000 {
            deadline.tv_sec += 1
            deadline.tv_nsec -= 1_000_000_000
        }
        // Returns the error number itself; with a valid deadline only EINTR.
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nil) == EINTR {}
        let child = unsupervisedChild.load(ordering: .acquiring)
        if child > 0 { kill(child, SIGKILL) }
        end(lastWords)
    }

    /// One `write(2)` if stderr can take it now: a host that never reads our
    /// stderr must not keep the process alive through its last words.
    private static func writeToStderrIfItTakesIt(_ line: String) {
        var probe = pollfd(fd: 2, events: Int16(POLLOUT), revents: 0)
        guard poll(&probe, 1, 0) == 1, probe.revents & Int16(POLLOUT) != 0 else { return }
        let bytes = Array(line.utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    /// The test hook `AGENTRPC_TEST_EXIT_BOUND_SECONDS` (docs/testing.md): a
    /// small bound, so that a test of the watchdog waits little. nil: not set.
    package static func testBound(in environment: [String: String]) -> Result<Double?, CommandLineOptions.Problem> {
        guard let text = environment["AGENTRPC_TEST_EXIT_BOUND_SECONDS"] else { return .success(nil) }
        guard let seconds = Double(text), DurationBounds.positiveSeconds.contains(seconds) else {
            return .failure(CommandLineOptions.Problem(message: "AGENTRPC_TEST_EXIT_BOUND_SECONDS \(DurationBounds.positiveSeconds.requirement)"))
        }
        return .success(seconds)
    }

    /// Whether the test hook `AGENTRPC_TEST_HANG_AT_EXIT=1` is set (docs/testing.md).
    package static func hangsForTests(_ environment: [String: String]) -> Bool {
        environment["AGENTRPC_TEST_HANG_AT_EXIT"] == "1"
    }

    /// The test hook `AGENTRPC_TEST_HANG_AT_EXIT=1`: the calling thread blocks
    /// for good, as a thread that waits on a lock nobody releases, so that the
    /// watchdog has something real to end.
    package static func hangForTests() -> Never {
        let never = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
        sem_init(never, 0, 0)
        while true { sem_wait(never) }
    }
}
