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

/// A child process started for an MCP server, with pipes on its stdin, stdout
/// and stderr. `pid` is a small supervisor (a fork of agentrpc that runs no
/// Swift code of ours beyond a loop of system calls) that leads the process
/// group the server runs in: stopping it reaches anything the server started,
/// and when agentrpc dies (even by `kill -9`) the supervisor kills the whole
/// group, so neither the server nor its own children outlive us. The
/// supervisor exits as the server did (the same status or signal).
package final class ChildProcess: Sendable {
    /// The supervisor's pid, which is also the process group's id.
    package let pid: pid_t
    /// Our ends: write to `stdin`, read `stdout` and `stderr`.
    package let stdoutFD: Int32
    package let stderrFD: Int32
    /// Writes the child's stdin on a thread of its own, which owns the descriptor:
    /// a server that stops reading blocks that thread only, never a caller (a
    /// task of the pool blocked on a full pipe held up every session, and a stop
    /// waited behind it for ever).
    private let input: ByteSinkThread
    private let exitStatus = Mutex<Int32?>(nil)
    /// A pidfd of the supervisor (`pidfd_open`, Linux 5.3), readable once it has
    /// ended, which is when the server has; -1 where the kernel has none.
    private let endFD: Int32

    fileprivate init(pid: pid_t, stdinFD: Int32, stdoutFD: Int32, stderrFD: Int32) throws(OSThread.StartError) {
        self.pid = pid
        self.stdoutFD = stdoutFD
        self.stderrFD = stderrFD
        // Opened before anyone can reap the supervisor (only this object does), so it
        // names that process and no later one with the same number.
        endFD = ChildSpawner.openEndDescriptor(pid)
        do {
            input = try ByteSinkThread(
                fileDescriptor: stdinFD, name: "agentrpc-child-in", maxQueuedBytes: nil,
                backPressureBytes: MCPBounds.maxUnreadInputBytes, closesDescriptor: true)
        } catch {
            if endFD >= 0 { close(endFD) }
            throw error
        }
    }

    deinit {
        if endFD >= 0 { close(endFD) }
    }

    /// What `waitForOutput` saw first.
    package enum OutputWait: Equatable {
        /// The descriptor has bytes, or its end of file.
        case readable
        /// The server ended while its output stays open (something it started holds it).
        case serverEnded
    }

    /// Blocks until `fd` (the child's stdout) can be read without blocking, or the
    /// server has ended: a process it left running may hold its output open, and
    /// then no end of file ever comes. Without a pidfd the end is looked for once
    /// a second.
    package func waitForOutput(on fd: Int32) -> OutputWait {
        while true {
            var watched = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: endFD, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&watched, endFD >= 0 ? 2 : 1, endFD >= 0 ? -1 : 1000)
            if ready < 0 {
                if errno == EINTR { continue }
                // Let the read report what is wrong with the descriptor.
                return .readable
            }
            if watched[0].revents != 0 { return .readable }
            if endFD >= 0 ? watched[1].revents != 0 : reap() != nil {
                // What the server wrote before it ended is read first; its end of file
                // (nothing else holding the pipe) is the usual end, not this one.
                var last = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                return poll(&last, 1, 0) > 0 ? .readable : .serverEnded
            }
        }
    }

    package struct SpawnError: Error, CustomStringConvertible {
        package var description: String
        package init(description: String) { self.description = description }
    }

    /// Starts `command` (a path, or a name looked up on `PATH` of `environment`).
    package static func spawn(command: String, arguments: [String], environment: [String: String], directory: String?) async throws -> ChildProcess {
        guard let path = resolve(command, path: environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin") else {
            throw SpawnError(description: "cannot find '\(command)' (not a path to an executable, and not on PATH)")
        }
        if let directory {
            var info = stat()
            guard stat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
                throw SpawnError(description: "the working directory '\(directory)' does not exist")
            }
        }
        let plan = SpawnPlan(path: path, arguments: [command] + arguments, environment: environment, directory: directory)
        return try await ChildSpawner.shared.spawn(plan)
    }

    private static func resolve(_ command: String, path: String) -> String? {
        if command.containsScalars("/") { return access(command, X_OK) == 0 ? command : nil }
        for dir in path.split(separator: ":") where !dir.isEmpty {
            let candidate = "\(dir)/\(command)"
            var info = stat()
            if access(candidate, X_OK) == 0, stat(candidate, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG { return candidate }
        }
        return nil
    }

    /// Why `write` did not queue a message.
    enum InputRefusal: Error, Equatable {
        /// Closed by us, or the child's end is gone.
        case closed
        /// More than `MCPBounds.maxUnreadInputBytes` wait unread: the child is not reading.
        case notReading
    }

    /// Queues all of `bytes` for the child's stdin and returns at once: they go
    /// out whole and in order.
    func write(_ bytes: [UInt8]) throws(InputRefusal) {
        if input.isBehind { throw .notReading }
        guard input.enqueue(bytes) else { throw .closed }
    }

    /// Closes the child's stdin: the polite way to ask a stdio server to exit.
    /// What is queued and not yet written is dropped; the descriptor is closed
    /// once no write is in progress (one blocked on a child that does not read
    /// ends when the child does).
    package func closeStdin() {
        input.close(discardingQueued: true)
    }

    /// The exit status once reaped (without waiting).
    package func reap() -> Int32? {
        exitStatus.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            let r = waitpid(pid, &raw, WNOHANG)
            if r == pid {
                status = raw
            } else if r < 0 && errno == ECHILD {
                status = -1
            }
            return status
        }
    }

    /// Waits up to `seconds` for the child to exit; true when it did.
    package func waitForExit(seconds: Double) async -> Bool {
        let deadline = ContinuousClock.now.advanced(by: .clampedSeconds(seconds))
        while reap() == nil {
            if ContinuousClock.now >= deadline { return false }
            // Exit is not an event we can await portably; 20 ms steps within a bounded wait.
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    /// Sends `signal` to the child's process group (and the child itself).
    package func signal(_ number: Int32) {
        guard reap() == nil else { return }
        _ = kill(-pid, number)
        _ = kill(pid, number)
    }

    /// Close stdin, wait; SIGTERM, wait; SIGKILL, reap. Bounded by twice `grace`
    /// plus five seconds. Then whatever the server started and left behind in
    /// its process group is killed.
    package func stop(grace: Double) async {
        closeStdin()
        if await waitForExit(seconds: grace) {
            await killLeftovers()
        } else {
            await terminate(grace: grace)
        }
    }

    /// SIGTERM to the group; SIGKILL when it has not ended within `grace`
    /// (then at most five more seconds for the reap); then whatever is left in
    /// the group. Bounded by `grace` plus five seconds.
    package func terminate(grace: Double) async {
        signal(SIGTERM)
        if await !waitForExit(seconds: grace) {
            signal(SIGKILL)
            _ = await waitForExit(seconds: 5)
        }
        await killLeftovers()
    }

    /// Kills what the child started and left in its process group, and waits (at
    /// most `MCPBounds.leftoverKillWaitSeconds`) until it is gone: SIGKILL is
    /// delivered asynchronously, and a caller that says "stopped" (`session/close`)
    /// must not leave those processes running a few milliseconds longer. The group's
    /// id stays taken while a member is left in it, so this reaches only what the
    /// child left behind (ESRCH when nothing is, the usual case: no wait at all).
    package func killLeftovers() async {
        guard kill(-pid, SIGKILL) == 0 else { return }
        let deadline = ContinuousClock.now.advanced(by: .clampedSeconds(MCPBounds.leftoverKillWaitSeconds))
        while ProcessGroup.hasLiveMember(pid), ContinuousClock.now < deadline {
            // The end of another process is not an event we can await: 2 ms steps within a short bound.
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    /// The exit code once reaped, when the child exited (not killed by a signal).
    package var exitCode: Int32? {
        guard let raw = reap(), raw != -1, raw & 0x7f == 0 else { return nil }
        return (raw >> 8) & 0xff
    }

    /// The signal that ended the child, once reaped, when one did.
    package var exitSignal: Int32? {
        guard let raw = reap(), raw != -1, raw & 0x7f != 0 else { return nil }
        return raw & 0x7f
    }

    package var exitDescription: String {
        guard let raw = reap() else { return "still running" }
        if raw == -1 { return "exited" }
        let signalled = raw & 0x7f
        if signalled == 0 { return "exited with status \((raw >> 8) & 0xff)" }
        return "killed by signal \(signalled)"
    }
}

/// Whether any process of a group still runs.
enum ProcessGroup {
    /// True while a member of group `id` is alive. `kill(-id, 0)` also counts zombies,
    /// which a killed leftover is until its new parent reaps it (and stays, under a
    /// parent that never does); on Linux those are told apart in `/proc`.
    static func hasLiveMember(_ id: pid_t) -> Bool {
        guard kill(-id, 0) == 0 else { return false }
        #if os(Linux)
        guard let directory = opendir("/proc") else { return true }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let member = pid_t(name), let stat = processStat(member) else { continue }
            if stat.group == id, stat.state != UInt8(ascii: "Z") { return true }
        }
        return false
        #else
        return true
        #endif
    }

    #if os(Linux)
    /// The state letter and process group of `/proc/<pid>/stat` (fields 3 and 5; the
    /// command name in field 2 may hold spaces and parentheses, so fields are counted
    /// after its last `)`).
    private static func processStat(_ process: pid_t) -> (state: UInt8, group: pid_t)? {
        let fd = open("/proc/\(process)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0, let close = buffer[..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = buffer[(close + 1)..<count].split(separator: UInt8(ascii: " "))
        guard fields.count >= 3, let state = fields[0].first,
              let group = pid_t(String(decoding: fields[2], as: UTF8.self)) else { return nil }
        return (state, group)
    }
    #endif
}

/// What one fork needs, prepared before it as C strings, so the child runs only
/// async-signal-safe calls between `fork` and `execve`.
struct SpawnPlan: Sendable {
    var path: String
    var arguments: [String]
    var environment: [String: String]
    var directory: String?
}

/// Forks every MCP server from one thread that lives as long as the process.
/// Each fork is a supervisor that forks the server and watches the lifeline:
/// a pipe whose write end only agentrpc holds, so its end is agentrpc's end,
/// however it comes. The server also gets `PR_SET_PDEATHSIG` (SIGKILL) for the
/// supervisor, which is single-threaded (the signal fires when the *thread*
/// that forked exits).
///
/// `@unchecked Sendable`: `jobs` and `started` are only touched under `condition`.
final class ChildSpawner: @unchecked Sendable {
    static let shared = ChildSpawner()

    private struct Job: Sendable {
        var plan: SpawnPlan
        var done: @Sendable (Result<ChildProcess, ChildProcess.SpawnError>) -> Void
    }
    // A condition, not a Mutex: the spawner thread must block until a job comes.
    private let condition = ConditionLock()
    private var jobs: [Job] = []

    /// Whether the spawner thread runs; started with the first spawn, and tried
    /// again by the next one if the system refused it.
    private var started = false

    private init() {}

    private func work() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.done(Self.forkAndExec(job.plan))
        }
    }

    func spawn(_ plan: SpawnPlan) async throws -> ChildProcess {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ChildProcess, any Error>) in
            condition.lock()
            if !started {
                do {
                    try OSThread.start(name: "agentrpc-mcp-spawner") { [self] in work() }
                    started = true
                } catch {
                    condition.unlock()
                    continuation.resume(throwing: ChildProcess.SpawnError(description: "\(error)"))
                    return
                }
            }
            jobs.append(Job(plan: plan, done: { continuation.resume(with: $0.mapError { $0 as any Error }) }))
            condition.signal()
            condition.unlock()
        }
    }

    /// `prctl` is variadic in C, which Swift cannot call; its fixed-argument form is
    /// looked up once and called through a plain C function pointer.
    private typealias PrctlFunction = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
    /// From <linux/prctl.h>.
    private static let prSetPdeathsig: Int32 = 1
    private static let prctl = cLibraryFunction("prctl", as: PrctlFunction.self)
    /// The lifeline's read end (each supervisor watches it) and write end (only
    /// agentrpc holds it, never closed); close-on-exec, so no server inherits either.
    private static let lifeline: (read: Int32, write: Int32)? = {
        var fds: [Int32] = [-1, -1]
        guard closeOnExecPipe(&fds) else { return nil }
        return (fds[0], fds[1])
    }()
    /// `syscall`, variadic in C like `prctl`, for `close_range` (Linux 5.9), which
    /// closes a child's inherited descriptors in two calls instead of one per
    /// possible descriptor (the limit may be a million).
    private typealias SyscallFunction = @convention(c) (Int, UInt, UInt, UInt) -> Int
    private static let syscall = cLibraryFunction("syscall", as: SyscallFunction.self)
    /// `__NR_close_range`, the same on every Linux architecture (a syscall added after 4.19).
    private static let closeRangeNumber = 436
    /// `__NR_pidfd_open`, likewise.
    private static let pidfdOpenNumber = 434

    /// A pidfd of `pid` (close-on-exec, as pidfds always are), or -1.
    static func openEndDescriptor(_ pid: pid_t) -> Int32 {
        guard let syscall else { return -1 }
        let fd = syscall(pidfdOpenNumber, UInt(bitPattern: Int(pid)), 0, 0)
        return fd >= 0 && fd <= Int(Int32.max) ? Int32(fd) : -1
    }
    /// How many descriptors a child may have open (the fallback without `close_range` closes each).
    private static let descriptorLimit: Int32 = {
        let n = sysconf(Int32(_SC_OPEN_MAX))
        return n > 0 ? Int32(min(n, 1 << 20)) : 1024
    }()

    /// Closes every descriptor from `first` on but `kept`: `close_range` around it,
    /// else one `close` per possible descriptor. Async-signal-safe (run between
    /// `fork` and `execve`): no allocation, no lock.
    private static func closeDescriptors(
        from first: Int32, keeping kept: Int32, syscall: SyscallFunction?, closeRange: Int, limit: Int32
    ) {
        if let syscall {
            let below = kept > first ? syscall(closeRange, UInt(first), UInt(kept - 1), 0) : 0
            let above = syscall(closeRange, UInt(max(kept + 1, first)), UInt(UInt32.max), 0)
            if below == 0 && above == 0 { return }
        }
        var fd = first
        while fd < limit {
            if fd != kept { _ = close(fd) }
            fd += 1
        }
    }

    private static func forkAndExec(_ plan: SpawnPlan) -> Result<ChildProcess, ChildProcess.SpawnError> {
        func fail(_ what: String) -> Result<ChildProcess, ChildProcess.SpawnError> {
            .failure(ChildProcess.SpawnError(description: "\(what): \(String(cString: strerror(errno)))"))
        }
        var stdinPipe: [Int32] = [-1, -1], stdoutPipe: [Int32] = [-1, -1], stderrPipe: [Int32] = [-1, -1], errorPipe: [Int32] = [-1, -1]
        // Close-on-exec everywhere: no other server (or later child) may inherit our ends,
        // or closing a server's stdin would never reach it as end of file.
        for i in 0..<4 {
            let ok: Bool
            switch i {
            case 0: ok = closeOnExecPipe(&stdinPipe)
            case 1: ok = closeOnExecPipe(&stdoutPipe)
            case 2: ok = closeOnExecPipe(&stderrPipe)
            default: ok = closeOnExecPipe(&errorPipe)
            }
            if !ok {
                for fd in stdinPipe + stdoutPipe + stderrPipe + errorPipe where fd >= 0 { close(fd) }
                return fail("cannot create a pipe")
            }
        }
        guard let path = strdup(plan.path) else { return fail("out of memory") }
        let directory = plan.directory.flatMap { strdup($0) }
        let argv = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: plan.arguments.count + 1)
        for (i, a) in plan.arguments.enumerated() { argv[i] = strdup(a) }
        argv[plan.arguments.count] = nil
        let envList = plan.environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let envp = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: envList.count + 1)
        for (i, e) in envList.enumerated() { envp[i] = strdup(e) }
        envp[envList.count] = nil
        defer {
            free(path)
            if let directory { free(directory) }
            for i in 0..<plan.arguments.count { free(argv[i]) }
            argv.deallocate()
            for i in 0..<envList.count { free(envp[i]) }
            envp.deallocate()
        }
        guard let lifeline = Self.lifeline else { return fail("cannot create the lifeline pipe") }
        let descriptorLimit = Self.descriptorLimit
        let syscall = Self.syscall
        let closeRangeNumber = Self.closeRangeNumber
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        let parent = getpid()
        let prctl = Self.prctl
        let prSetPdeathsig = Self.prSetPdeathsig
        let (inRead, inWrite, outRead, outWrite, errRead, errWrite, reportRead, reportWrite) =
            (stdinPipe[0], stdinPipe[1], stdoutPipe[0], stdoutPipe[1], stderrPipe[0], stderrPipe[1], errorPipe[0], errorPipe[1])

        let pid = fork()
        if pid == 0 {
            // The supervisor: only async-signal-safe calls from here on. It leads the
            // group, and ignores SIGTERM, SIGINT, SIGHUP and SIGPIPE as agentrpc does.
            _ = setpgid(0, 0)
            let supervisor = getpid()
            if getppid() != parent { _exit(127) }
            let server = fork()
            if server < 0 {
                var code = errno
                _ = Glibc.write(reportWrite, &code, MemoryLayout<Int32>.size)
                _exit(127)
            }
            if server > 0 {
                // Nothing of agentrpc's stays open here (its stdout, other servers' pipes,
                // the report pipe: agentrpc reads that to its end), only the lifeline.
                closeDescriptors(from: 0, keeping: lifeline.read, syscall: syscall, closeRange: closeRangeNumber, limit: descriptorLimit)
                while true {
                    var watch = pollfd(fd: lifeline.read, events: Int16(POLLIN), revents: 0)
                    if poll(&watch, 1, 100) > 0 {
                        // agentrpc is gone: the group goes too, this process with it.
                        _ = kill(0, SIGKILL)
                        _exit(137)
                    }
                    var status: Int32 = 0
                    let ended = waitpid(server, &status, WNOHANG)
                    if ended == server {
                        let signalled = status & 0x7f
                        if signalled == 0 { _exit((status >> 8) & 0xff) }
                        // End the same way, so agentrpc reports how the server ended.
                        _ = Glibc.signal(signalled, SIG_DFL)
                        _ = sigprocmask(SIG_SETMASK, &emptyMask, nil)
                        _ = kill(supervisor, signalled)
                        _exit(128 + signalled)
                    }
                    if ended < 0 && errno != EINTR { _exit(127) }
                }
            }
            // The server.
            if let prctl {
                _ = prctl(prSetPdeathsig, UInt(SIGKILL), 0, 0, 0)
                // The supervisor may have died before the line above: then no signal comes.
                if getppid() != supervisor { _exit(127) }
            }
            _ = dup2(inRead, 0)
            _ = dup2(outWrite, 1)
            _ = dup2(errWrite, 2)
            // Only the three streams reach the server: close-on-exec covers agentrpc's own
            // descriptors, not those it inherited or a library opened without the flag. One
            // of those in a server (or in what it leaves running) would hold, say, another
            // server's stdin open, whose end of file would then never come. The report pipe
            // stays: it closes at the exec (close-on-exec), or carries the exec's errno.
            closeDescriptors(from: 3, keeping: reportWrite, syscall: syscall, closeRange: closeRangeNumber, limit: descriptorLimit)
            // agentrpc ignores SIGPIPE, SIGTERM, SIGINT and SIGHUP; ignored signals survive exec.
            var signalNumber: Int32 = 1
            while signalNumber < 32 {
                if signalNumber != SIGKILL && signalNumber != SIGSTOP { _ = Glibc.signal(signalNumber, SIG_DFL) }
                signalNumber += 1
            }
            _ = sigprocmask(SIG_SETMASK, &emptyMask, nil)
            if let directory, chdir(directory) != 0 {
                var code = errno
                _ = Glibc.write(reportWrite, &code, MemoryLayout<Int32>.size)
                _exit(127)
            }
            _ = execve(path, argv, envp)
            var code = errno
            _ = Glibc.write(reportWrite, &code, MemoryLayout<Int32>.size)
            _exit(127)
        }
        close(inRead)
        close(outWrite)
        close(errWrite)
        close(reportWrite)
        if pid < 0 {
            for fd in [inWrite, outRead, errRead, reportRead] { close(fd) }
            return fail("cannot fork")
        }
        // The report pipe closes on a successful exec (close-on-exec) and carries
        // errno on a failed one.
        var code: Int32 = 0
        var n: Int
        repeat { n = read(reportRead, &code, MemoryLayout<Int32>.size) } while n < 0 && errno == EINTR
        close(reportRead)
        if n == MemoryLayout<Int32>.size {
            // The supervisor exits once the server's exec failed.
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
            for fd in [inWrite, outRead, errRead] { close(fd) }
            errno = code
            return fail("cannot start \(plan.path)")
        }
        do {
            return .success(try ChildProcess(pid: pid, stdinFD: inWrite, stdoutFD: outRead, stderrFD: errRead))
        } catch {
            // No thread to write its input: the child is not kept.
            _ = kill(-pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
            for fd in [inWrite, outRead, errRead] { close(fd) }
            return .failure(ChildProcess.SpawnError(description: "cannot start the thread that writes to the server: \(error)"))
        }
    }
}
