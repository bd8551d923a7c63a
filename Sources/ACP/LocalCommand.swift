import AgentRPC
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

/// `run_command` for an editor without terminals: the command runs as a child
/// of this process, through the supervisor the MCP client starts its servers
/// with (`ChildProcess`): it leads its own process group, so a timeout or a
/// cancel ends everything the command started, and when agentrpc dies (even by
/// `kill -9`) the supervisor takes the group with it.
enum LocalCommand {
    struct Ending: Sendable {
        /// The last `ACPToolBounds.commandOutputBytes` of stdout and stderr, as they came.
        var output: String
        /// Whether earlier output was dropped.
        var truncated: Bool
        var exitCode: Int32?
        var signal: Int32?
        var timedOut: Bool
    }

    /// What runs: the program and its arguments. A command line given whole in
    /// `command` (no `args`, and spaces or shell syntax in it) runs through
    /// `/bin/sh -c`, as a terminal would run it.
    static func argv(command: String, args: [String]) -> (program: String, arguments: [String]) {
        let shellish = command.contains { " \t|&;<>()$`\\\"'*?[]{}~\n".contains($0) }
        if args.isEmpty && shellish { return ("/bin/sh", ["-c", command]) }
        return (command, args)
    }

    /// Runs to its end, or until `seconds` pass (then it is killed, and
    /// `timedOut`). Cancelling the calling task kills the group (SIGTERM, then
    /// SIGKILL after `ACPToolBounds.commandKillGraceSeconds`) and throws
    /// `CancellationError`. A command that cannot start throws `ChildProcess.SpawnError`.
    static func run(command: String, args: [String], directory: String, seconds: Double,
                    environment: [String: String] = ProcessEnvironment.current()) async throws -> Ending {
        let (program, arguments) = argv(command: command, args: args)
        let child = try await ChildProcess.spawn(command: program, arguments: arguments, environment: environment, directory: directory)
        child.closeStdin()
        let output = OutputTail(limit: ACPToolBounds.commandOutputBytes)
        do {
            try output.read(child.stdoutFD, name: "acp-command-stdout")
        } catch {
            Glibc.close(child.stderrFD)
            throw await stopUnread(child, error)
        }
        do {
            try output.read(child.stderrFD, name: "acp-command-stderr")
        } catch {
            throw await stopUnread(child, error)
        }
        let deadline = ContinuousClock.now.advanced(by: .clampedSeconds(seconds))
        var timedOut = false
        while child.reap() == nil {
            if Task.isCancelled {
                // Not in this task: it is cancelled, and a cancelled task's sleeps return at once.
                await Task { await child.terminate(grace: ACPToolBounds.commandKillGraceSeconds) }.value
                throw CancellationError()
            }
            if ContinuousClock.now >= deadline {
                timedOut = true
                await Task { await child.terminate(grace: ACPToolBounds.commandKillGraceSeconds) }.value
                break
            }
            // The end of a child is not an event we can await portably: 20 ms steps within a bounded wait.
            try? await Task.sleep(for: .milliseconds(20))
        }
        // What the command left running in its group may hold the output open: it
        // gets a second to finish writing, then it goes too.
        if await !output.waitForEnd(seconds: 1) {
            await child.killLeftovers()
            _ = await output.waitForEnd(seconds: 1)
        }
        await child.killLeftovers()
        let (text, truncated) = output.text
        return Ending(output: text, truncated: truncated, exitCode: child.exitCode, signal: child.exitSignal, timedOut: timedOut)
    }
}

extension LocalCommand {
    /// A command whose output cannot be read is not run: its group is ended, and
    /// the refused thread is told as a command that cannot start.
    fileprivate static func stopUnread(_ child: ChildProcess, _ error: OSThread.StartError) async -> ChildProcess.SpawnError {
        await child.terminate(grace: ACPToolBounds.commandKillGraceSeconds)
        await child.killLeftovers()
        return ChildProcess.SpawnError(description: "\(error)")
    }
}

/// The tail of a child's output, read from its pipes by one thread each.
private final class OutputTail: Sendable {
    private struct State {
        var bytes: [UInt8] = []
        var dropped = false
        var open = 0
    }
    private let limit: Int
    private let state = Mutex(State())

    init(limit: Int) { self.limit = limit }

    /// Reads `fd` to its end on a thread of its own, which closes it. When the
    /// system refuses the thread, `fd` is closed here and the error thrown.
    func read(_ fd: Int32, name: String) throws(OSThread.StartError) {
        state.withLock { $0.open += 1 }
        do {
            try OSThread.start(name: name) { [self] in drain(fd) }
        } catch {
            state.withLock { $0.open -= 1 }
            Glibc.close(fd)
            throw error
        }
    }

    private func drain(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            append(buffer[0..<n])
        }
        Glibc.close(fd)
        state.withLock { $0.open -= 1 }
    }

    private func append(_ chunk: ArraySlice<UInt8>) {
        state.withLock { s in
            s.bytes.append(contentsOf: chunk)
            // Keep at most twice the limit between trims, so trimming stays rare.
            if s.bytes.count > 2 * limit {
                s.bytes.removeFirst(s.bytes.count - limit)
                s.dropped = true
            }
        }
    }

    /// Waits (bounded) until both pipes reached their end.
    func waitForEnd(seconds: Double) async -> Bool {
        let deadline = ContinuousClock.now.advanced(by: .clampedSeconds(seconds))
        while state.withLock({ $0.open > 0 }) {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    var text: (String, Bool) {
        state.withLock { s in
            let kept = s.bytes.suffix(limit)
            return (String(decoding: kept, as: UTF8.self), s.dropped || kept.count < s.bytes.count)
        }
    }
}
