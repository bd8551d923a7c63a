import Foundation
import Synchronization
import Testing

@testable import AgentRPC

/// The watchdog in process, its `_exit` replaced by a recorder. The binary's
/// behaviour (status 124, stderr, MCP servers gone) is pinned end to end by
/// `Tests/Transcripts/foundation/exit-watchdog-*.jsonl` and
/// `test_an_exit_the_watchdog_ends_takes_every_server_and_what_it_started_with_it`.
@Suite struct ExitWatchdogTests {
    /// Arms a watchdog with a short bound and returns its last words (nil: it did not fire in time).
    private func lastWords(arm: (ExitWatchdog) -> Void) async throws -> String? {
        let (words, said) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingOldest(1))
        let watchdog = try ExitWatchdog(boundSeconds: 0.05) { said.yield($0) }
        arm(watchdog)
        defer { said.finish() }
        return await first(of: words)
    }

    /// The first element of `stream`, or nil when none comes within 30 seconds.
    private func first<T: Sendable>(of stream: AsyncStream<T>) async -> T? {
        await withTaskGroup(of: T?.self) { group in
            group.addTask { for await element in stream { return element }; return nil }
            group.addTask { try? await Task.sleep(for: .seconds(30)); return nil }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    @Test func theFirstCauseWinsAndTheLastWordsSayWhereTheExitStuck() async throws {
        let line = try await lastWords { watchdog in
            watchdog.arm(.signal(15))
            watchdog.arm(.exit)
            watchdog.reached(.stoppingTurns)
            watchdog.reached(.flushing)
        }
        #expect(line == "agentrpc[error] the exit (signal 15) did not finish within 0.05 s; it stuck while queued output "
            + "was written to the client; ending the process with status 124\n")
    }

    @Test func anExitThatNeverBeganItsWorkIsNamed() async throws {
        let line = try await lastWords { $0.arm(.endOfInput) }
        #expect(line?.contains("the exit (the end of input) did not finish") == true)
        #expect(line?.contains("before the exit began its work") == true)
    }

    @Test func firingKillsTheChildWithoutASupervisor() async throws {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["600"]
        let (ended, end) = AsyncStream.makeStream(of: Int32.self, bufferingPolicy: .bufferingOldest(1))
        child.terminationHandler = { end.yield($0.terminationReason == .uncaughtSignal ? $0.terminationStatus : -1) }
        try child.run()
        defer { if child.isRunning { kill(child.processIdentifier, SIGKILL) } }
        let line = try await lastWords { watchdog in
            watchdog.killsWhenFiring(child.processIdentifier)
            watchdog.arm(.exit)
        }
        #expect(line != nil)
        defer { end.finish() }
        #expect(await first(of: ended) == SIGKILL)
    }

    @Test func causesSurviveTheirAtomicCode() {
        for cause in [ExitWatchdog.Cause.endOfInput, .exit, .signal(1), .signal(15), .signal(64)] {
            #expect(ExitWatchdog.Cause(code: cause.code) == cause)
        }
        #expect(ExitWatchdog.Cause(code: 0) == nil)
    }

    @Test func theBoundIsTheTwoWaitsAndTheSlackUnlessSet() {
        var options = ServerOptions()
        #expect(options.exitBoundSeconds == 10 + 10 + ServerOptions.exitSlackSeconds)
        options.flushTimeoutSeconds = 3
        #expect(options.exitBoundSeconds == 10 + 3 + ServerOptions.exitSlackSeconds)
        options.exitBoundSeconds = 1.5
        #expect(options.exitBoundSeconds == 1.5)
        #expect(!options.exitWatchdog)
    }
}
