#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `pipe2(fds, O_CLOEXEC)`: both ends close-on-exec from the start, so a child that
/// another thread spawns meanwhile cannot inherit them (a child holding a write end
/// keeps its reader from ever seeing the end of file). False, with errno set, when no
/// pipe was made.
package func closeOnExecPipe(_ fds: inout [Int32]) -> Bool {
    guard let pipe2 = pipe2Function else {
        errno = ENOSYS
        return false
    }
    return fds.count >= 2 && pipe2(&fds, O_CLOEXEC) == 0
}

/// `pipe2` needs `_GNU_SOURCE`, which the Glibc module is not built with: looked up once.
private typealias Pipe2Function = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
private let pipe2Function = cLibraryFunction("pipe2", as: Pipe2Function.self)

/// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34): looked up once, as it is
/// not declared everywhere the Glibc module is built; nil where the C library lacks it.
private typealias AddCloseFromFunction = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
private let addCloseFromFunction = cLibraryFunction("posix_spawn_file_actions_addclosefrom_np", as: AddCloseFromFunction.self)

/// A child process started with `posix_spawn` and waited for synchronously: what the
/// tools around the engine used Foundation's `Process` for (which loads ICU with
/// Foundation). The child gets a process group of its own, as `Process` gave it, so the
/// terminal's Ctrl-C reaches only the program the person runs (`agentrpc chat` cancels
/// the turn; its server and a local model server go on); and default signal handling
/// with an empty signal mask (the server ignores SIGPIPE; its children must not
/// inherit that — `Process` passed ignored signals on).
package final class SpawnedProcess: @unchecked Sendable {
    // @unchecked: `exit` is only touched under `lock`.
    /// Where a standard stream of the child goes.
    package enum Stream: Sendable {
        /// The server's own stream.
        case inherit
        /// /dev/null.
        case null
        /// This open descriptor (the caller keeps and closes it).
        case descriptor(Int32)
    }

    /// Why a child could not be started.
    package struct SpawnError: Error, CustomStringConvertible, Sendable {
        package var path: String
        package var code: Int32
        package var description: String { "\(path): \(String(cString: strerror(code)))" }
    }

    package let processIdentifier: pid_t
    private let lock = ConditionLock()
    private var exit: Int32?
    private var endedBySignal = false

    private init(pid: pid_t) { processIdentifier = pid }

    /// Starts `path` (no PATH search) with `arguments` and exactly `environment`.
    package static func run(
        _ path: String, arguments: [String], environment: [String: String],
        standardInput: Stream = .inherit, standardOutput: Stream = .inherit, standardError: Stream = .inherit
    ) throws(SpawnError) -> SpawnedProcess {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (stream, target) in [(standardInput, Int32(0)), (standardOutput, 1), (standardError, 2)] {
            switch stream {
            case .inherit: break
            case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let fd): posix_spawn_file_actions_adddup2(&actions, fd, target)
            }
        }
        // Only the three streams reach the child (as for MCP servers): a descriptor of
        // ours without close-on-exec, in a child or what it leaves running, would keep
        // a pipe we read from its end of file.
        if let addCloseFrom = addCloseFromFunction { _ = addCloseFrom(&actions, 3) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var signals = sigset_t()
        sigemptyset(&signals)
        posix_spawnattr_setsigmask(&attributes, &signals)
        sigfillset(&signals)
        posix_spawnattr_setsigdefault(&attributes, &signals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid = pid_t()
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard result == 0 else { throw SpawnError(path: path, code: result) }
        return SpawnedProcess(pid: pid)
    }

    /// Runs `path` to its end with its output collected (read before waiting: a full
    /// pipe would block the child forever).
    package static func output(
        _ path: String, arguments: [String], environment: [String: String], standardInput: Stream = .null
    ) throws(SpawnError) -> (status: Int32, output: [UInt8]) {
        var fds: [Int32] = [-1, -1]
        guard closeOnExecPipe(&fds) else { throw SpawnError(path: path, code: errno) }
        let child: SpawnedProcess
        do {
            child = try run(path, arguments: arguments, environment: environment, standardInput: standardInput, standardOutput: .descriptor(fds[1]))
        } catch {
            close(fds[0])
            close(fds[1])
            throw error
        }
        close(fds[1])
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            output.append(contentsOf: buffer[..<n])
        }
        close(fds[0])
        return (child.waitUntilExit(), output)
    }

    /// The exit status, or the number of the signal that ended it; nil while it runs.
    package var terminationStatus: Int32? {
        lock.lock()
        defer { lock.unlock() }
        if exit == nil { reap(blocking: false) }
        return exit
    }

    package var isRunning: Bool { terminationStatus == nil }

    /// Waits for the child's end; returns `terminationStatus`.
    @discardableResult
    package func waitUntilExit() -> Int32 {
        lock.lock()
        defer { lock.unlock() }
        while exit == nil { reap(blocking: true) }
        return exit ?? 0
    }

    /// Whether a signal ended the child (`terminationStatus` is then its number): what
    /// `Process.terminationReason == .uncaughtSignal` says.
    package var terminatedBySignal: Bool {
        lock.lock()
        defer { lock.unlock() }
        return endedBySignal
    }

    /// Waits for the child's end without holding the lock while it runs, so `signal(_:)`
    /// from another thread is not blocked meanwhile (what `waitUntilExit` does); the child
    /// is only reaped afterwards, under the lock, so its pid cannot be reused by then.
    /// For one waiting thread, as `Process.terminationHandler` had.
    @discardableResult
    package func waitForTermination() -> Int32 {
        var info = siginfo_t()
        while waitid(P_PID, id_t(processIdentifier), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
        return waitUntilExit()
    }

    /// Sends `number` (SIGTERM by default) unless the child was already reaped.
    package func signal(_ number: Int32 = SIGTERM) {
        lock.lock()
        defer { lock.unlock() }
        if exit == nil { _ = kill(processIdentifier, number) }
    }

    /// Calls waitpid once; the lock is held.
    private func reap(blocking: Bool) {
        var status: Int32 = 0
        let result = waitpid(processIdentifier, &status, blocking ? 0 : WNOHANG)
        if result == processIdentifier {
            // The wait status's layout (<sys/wait.h>): signal number in the low 7 bits, exit status above.
            let signal = status & 0x7F
            exit = signal == 0 ? (status >> 8) & 0xFF : signal
            endedBySignal = signal != 0
        } else if result < 0 && errno != EINTR {
            exit = -1
        }
    }
}
