import AgentRPCProtocol
import Foundation
import Testing

@testable import AgentRPC

/// `ChildProcess.killLeftovers`: what a child left running in its process group is
/// gone when the call returns (`session/close` answers after it; the end-to-end test is
/// test_closing_the_session_stops_the_server_and_what_it_started).
@Suite struct ChildProcessTests {
    /// The first line the child writes on stdout, read within 10 s.
    private func firstLine(of child: ChildProcess) -> String? {
        var bytes: [UInt8] = []
        let deadline = ContinuousClock.now.advanced(by: .seconds(10))
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: child.stdoutFD, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { return nil }
            guard poller.revents != 0 else { continue }
            var byte: UInt8 = 0
            guard read(child.stdoutFD, &byte, 1) == 1 else { return nil }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }

    /// The leftover sleeps far longer than the test can take on a loaded machine (the whole
    /// suite at load 6 once took 75 s here, and a 30 s sleep had ended by itself).
    @Test func whatTheChildLeftInItsGroupIsGoneWhenKillLeftoversReturns() async throws {
        let child = try await ChildProcess.spawn(
            command: "/bin/sh", arguments: ["-c", "sleep 600 & echo $!"], environment: ["PATH": "/usr/bin:/bin"], directory: nil)
        let leftover = try #require(firstLine(of: child).flatMap { pid_t($0) })
        #expect(await child.waitForExit(seconds: 10))
        #expect(ProcessGroup.hasLiveMember(child.pid), "the shell's `sleep` is still running in its group")

        await child.killLeftovers()

        #expect(!ProcessGroup.hasLiveMember(child.pid))
        let state = (try? String(contentsOfFile: "/proc/\(leftover)/stat", encoding: .utf8))
            .flatMap { $0.split(separator: ")").last?.split(separator: " ").first }
        #expect(state == nil || state == "Z", "the leftover is gone or a zombie waiting for its new parent")
    }

    /// A descriptor agentrpc holds without close-on-exec (inherited from whoever started
    /// it, or opened so by a library) reaches neither the child nor what the child leaves
    /// running. Before, this test's own pipe stayed open in the leftover `sleep` of the
    /// test above, and a test in the same process that read another pipe to its end
    /// waited as long as that sleep ran (600 s: the whole suite stalled).
    @Test func aDescriptorWithoutCloseOnExecDoesNotReachTheChild() async throws {
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        // A number no shell uses for itself, and not close-on-exec (plain `F_DUPFD`).
        let inherited = unusedDescriptor(copying: fds[1])
        #expect(inherited >= 87)
        close(fds[1])
        let child = try await ChildProcess.spawn(
            command: "/bin/sh",
            arguments: ["-c", "if [ -e /proc/self/fd/\(inherited) ]; then echo leaked; else echo clean; fi; sleep 600 & echo $!"],
            environment: ["PATH": "/usr/bin:/bin"], directory: nil)
        #expect(firstLine(of: child) == "clean")
        let leftover = firstLine(of: child)
        #expect(leftover.flatMap { pid_t($0) } != nil)
        close(inherited)
        // Nothing else holds the write end: its reader sees the end of file at once,
        // while the leftover still runs.
        var poller = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, 10_000) == 1
        var byte: UInt8 = 0
        #expect(ready && read(fds[0], &byte, 1) == 0, "a child still holds the pipe's write end")
        close(fds[0])
        #expect(ProcessGroup.hasLiveMember(child.pid))
        await child.killLeftovers()
        #expect(!ProcessGroup.hasLiveMember(child.pid))
    }

    /// A child that never reads its stdin: writes queue and return at once (the
    /// writing thread is the child's own), past `MCPBounds.maxUnreadInputBytes`
    /// they are refused as `notReading`, and a stop is not held up by the write
    /// blocked on the full pipe. Before, the first write past the pipe's 64 KiB
    /// blocked its caller for as long as the child lived, and the stop waited on it.
    @Test func aChildThatDoesNotReadItsInputBlocksNoCaller() async throws {
        let child = try await ChildProcess.spawn(
            command: "/bin/sh", arguments: ["-c", "echo ready; exec sleep 600"], environment: ["PATH": "/usr/bin:/bin"], directory: nil)
        #expect(firstLine(of: child) == "ready")
        let message = [UInt8](repeating: 0x78, count: 1 << 20)
        var queued = 0
        var refusal: ChildProcess.InputRefusal?
        while refusal == nil && queued <= MCPBounds.maxUnreadInputBytes + 2 * message.count {
            do throws(ChildProcess.InputRefusal) {
                try child.write(message)
                queued += message.count
            } catch {
                refusal = error
            }
        }
        #expect(refusal == .notReading)
        #expect(queued >= MCPBounds.maxUnreadInputBytes)
        // stdin closed (sleep does not notice), SIGTERM after the grace: the blocked
        // write fails as the child ends, and its thread closes the descriptor.
        await child.stop(grace: 0.2)
        #expect(child.reap() != nil)
        #expect(throws: ChildProcess.InputRefusal.closed) { try child.write([0x0A]) }
    }

    @Test func aGroupWithNothingLeftIsNotWaitedFor() async throws {
        let child = try await ChildProcess.spawn(
            command: "/bin/sh", arguments: ["-c", "exit 0"], environment: ["PATH": "/usr/bin:/bin"], directory: nil)
        #expect(await child.waitForExit(seconds: 10))
        #expect(!ProcessGroup.hasLiveMember(child.pid))
        await child.killLeftovers()
    }
}

/// `SpawnedProcess` (the tools' children: `chat --local`'s model server, the transcript
/// tools' server) gives a child its three streams and no other descriptor, as
/// `ChildProcess` does for MCP servers.
@Suite struct SpawnedProcessDescriptorTests {
    @Test func aDescriptorWithoutCloseOnExecDoesNotReachTheChild() throws {
        var fds: [Int32] = [-1, -1]
        #expect(pipe(&fds) == 0)
        let inherited = unusedDescriptor(copying: fds[1])
        #expect(inherited >= 87)
        defer {
            close(inherited)
            close(fds[0])
            close(fds[1])
        }
        let run = try SpawnedProcess.output(
            "/bin/sh", arguments: ["-c", "if [ -e /proc/self/fd/\(inherited) ]; then echo leaked; else echo clean; fi"],
            environment: ["PATH": "/usr/bin:/bin"])
        #expect(run.status == 0)
        #expect(String(decoding: run.output, as: UTF8.self) == "clean\n")
    }
}

/// A copy of `fd` at the lowest free number from 87 up (not close-on-exec). Never
/// `dup2` to a fixed number here: with the suites in parallel that number may be
/// another test's open pipe, which `dup2` would silently close and replace (seen:
/// a `readToEnd` failing with EBADF in ConnectionOutputTests).
func unusedDescriptor(copying fd: Int32) -> Int32 {
    fcntl(fd, F_DUPFD, Int32(87))
}
