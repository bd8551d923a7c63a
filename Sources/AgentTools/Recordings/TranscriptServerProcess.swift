import AgentRPC
import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One thing the server wrote on stdout.
enum TranscriptInbound: Sendable {
    case message(JSONValue)
    /// Not a JSON message (bad JSON, bad header, wrong framing): always a failure.
    case garbage(String)
}

/// The server under test: a child process whose stdout and stderr are read by
/// two dedicated threads doing blocking reads, so the pipes never fill and no
/// one polls. Waiters block on one condition with a deadline.
///
/// `@unchecked Sendable`: every mutable field is guarded by `condition`; `process`
/// is set under it by `start()`, which the driving thread calls before anything else.
final class TranscriptServerProcess: @unchecked Sendable {
    private let executable: String
    private let arguments: [String]
    private let environment: [String: String]
    private let expectedFraming: Framing
    private var process: SpawnedProcess?
    /// The parent's end of the child's stdin; -1 once closed (or before the start).
    private var stdinFD: Int32 = -1

    // A condition, not a Mutex: the replay driver and the reader threads are
    // plain threads, and the driver must block until the server writes or exits.
    private let condition = ConditionLock()
    private var inbox: [TranscriptInbound] = []
    private var stdoutClosed = false
    private var stderrClosed = false
    private var stderrBytes: [UInt8] = []
    private var exitStatus: Int32?
    private var exitedBySignal = false
    private var stdinClosed = false

    /// stderr is kept for reports; beyond this only the tail is kept.
    private static let stderrLimit = 256 * 1024

    init(executable: String, arguments: [String], environment: [String: String], framing: Framing) {
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
        expectedFraming = framing
    }

    /// Why the child could not be started.
    struct StartError: Error, CustomStringConvertible {
        var code: Int32
        /// The thread the system refused, when that was the failure (not the child's start).
        var thread: String?
        var description: String {
            let reason = String(cString: strerror(code))
            return thread.map { "cannot start the thread '\($0)': \(reason)" } ?? reason
        }
    }

    /// Starts the child and its readers. Writes to a dead child must return
    /// EPIPE instead of killing the runner, hence SIGPIPE is ignored.
    func start() throws(StartError) {
        signal(SIGPIPE, SIG_IGN)
        // Close-on-exec everywhere: the child gets its ends as 0, 1 and 2 only (dup2
        // clears the flag on those), never the parent's ends or another replay's pipes.
        var pipes: [[Int32]] = []
        for _ in 0..<3 {
            var fds: [Int32] = [-1, -1]
            guard closeOnExecPipe(&fds) else {
                let code = errno
                pipes.joined().forEach { close($0) }
                throw StartError(code: code)
            }
            pipes.append(fds)
        }
        let child: SpawnedProcess
        do {
            child = try SpawnedProcess.run(
                executable, arguments: arguments, environment: environment,
                standardInput: .descriptor(pipes[0][0]), standardOutput: .descriptor(pipes[1][1]),
                standardError: .descriptor(pipes[2][1]))
        } catch {
            pipes.joined().forEach { close($0) }
            throw StartError(code: error.code)
        }
        close(pipes[0][0])
        close(pipes[1][1])
        close(pipes[2][1])
        // Writes go through a non-blocking descriptor and poll() with a deadline,
        // so a server that stops reading stdin cannot hang the runner.
        let fd = pipes[0][1]
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        condition.lock()
        process = child
        stdinFD = fd
        condition.unlock()
        let stdoutFD = pipes[1][0]
        let stderrFD = pipes[2][0]
        // Each thread owns what it closes; a refused one leaves its descriptor (and
        // the ones of the threads not tried yet) to the failure path below.
        var ownerless = [stdoutFD, stderrFD]
        do throws(OSThread.StartError) {
            try OSThread.start(name: "replay-stdout") { [self] in
                readStdout(stdoutFD)
                close(stdoutFD)
            }
            ownerless.removeFirst()
            try OSThread.start(name: "replay-stderr") { [self] in
                readStderr(stderrFD)
                close(stderrFD)
            }
            ownerless.removeFirst()
            try OSThread.start(name: "replay-exit") { [self] in
                let status = child.waitForTermination()
                condition.lock()
                exitStatus = status
                exitedBySignal = child.terminatedBySignal
                condition.broadcast()
                condition.unlock()
            }
        } catch {
            // Nobody would read its output or see its end: the child goes at once,
            // is reaped here (SIGKILL: the wait is short), and the start fails.
            child.signal(SIGKILL)
            _ = child.waitForTermination()
            ownerless.forEach { close($0) }
            closeStdin()
            throw StartError(code: error.code, thread: error.name)
        }
    }

    var processIdentifier: Int32 { process?.processIdentifier ?? -1 }

    // MARK: Readers

    private static func readChunks(_ fd: Int32, _ body: (ArraySlice<UInt8>) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            if n == 0 { return }
            body(buffer[0..<n])
        }
    }

    private func readStdout(_ fd: Int32) {
        var parser = FrameParser(maxMessageBytes: Int(Int32.max))
        var framingChecked = false
        func deliver(_ event: FrameEvent) {
            let item: TranscriptInbound
            switch event {
            case .frame(let body):
                if !framingChecked, let detected = parser.framing {
                    framingChecked = true
                    if detected != expectedFraming {
                        enqueue(.garbage("the server answered in \(detected.rawValue) framing; this transcript uses \(expectedFraming.rawValue)"))
                    }
                }
                do {
                    item = .message(try JSONValue.parse(body))
                } catch {
                    item = .garbage("not JSON (\(error)): \(String(decoding: body.prefix(500), as: UTF8.self))")
                }
            case .oversized(let count, _):
                item = .garbage("an oversized frame of \(count) bytes")
            case .malformedHeader(let reason):
                item = .garbage("a malformed Content-Length header: \(reason)")
            case .desynchronized(let reason, _):
                item = .garbage("a Content-Length frame out of step: \(reason)")
            }
            enqueue(item)
        }
        Self.readChunks(fd) { chunk in
            parser.append(chunk)
            while let event = parser.next() { deliver(event) }
        }
        while let event = parser.finish() { deliver(event) }
        condition.lock()
        stdoutClosed = true
        condition.broadcast()
        condition.unlock()
    }

    private func enqueue(_ item: TranscriptInbound) {
        condition.lock()
        inbox.append(item)
        condition.broadcast()
        condition.unlock()
    }

    private func readStderr(_ fd: Int32) {
        Self.readChunks(fd) { chunk in
            condition.lock()
            stderrBytes.append(contentsOf: chunk)
            if stderrBytes.count > Self.stderrLimit {
                stderrBytes.removeFirst(stderrBytes.count - Self.stderrLimit / 2)
            }
            condition.broadcast()
            condition.unlock()
        }
        condition.lock()
        stderrClosed = true
        condition.broadcast()
        condition.unlock()
    }

    // MARK: Waiting

    enum Next {
        case inbound(TranscriptInbound)
        /// stdout ended and everything was consumed.
        case closed
        case timedOut
    }

    /// The next thing the server wrote, waiting until `deadline`.
    func next(until deadline: Date) -> Next {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if !inbox.isEmpty { return .inbound(inbox.removeFirst()) }
            if stdoutClosed { return .closed }
            if !condition.wait(until: deadline) {
                if !inbox.isEmpty { return .inbound(inbox.removeFirst()) }
                return stdoutClosed ? .closed : .timedOut
            }
        }
    }

    /// Everything received but not consumed yet.
    func drainInbox() -> [TranscriptInbound] {
        condition.lock()
        defer { condition.unlock() }
        let items = inbox
        inbox.removeAll()
        return items
    }

    /// Waits until the process exited and its stdout is fully read. Returns the
    /// exit status (a signal number when `bySignal`), or nil on timeout.
    func waitForExit(until deadline: Date) -> (status: Int32, bySignal: Bool)? {
        condition.lock()
        defer { condition.unlock() }
        while exitStatus == nil || !stdoutClosed {
            if !condition.wait(until: deadline) { break }
        }
        guard let status = exitStatus, stdoutClosed else { return nil }
        return (status, exitedBySignal)
    }

    /// Exit status if the process has already ended.
    var exitState: (status: Int32, bySignal: Bool)? {
        condition.lock()
        defer { condition.unlock() }
        return exitStatus.map { ($0, exitedBySignal) }
    }

    /// Waits until stderr contains a match for `regex` (searched anywhere).
    func waitForStderr(matching regex: Regex<AnyRegexOutput>, until deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while true {
            let text = String(decoding: stderrBytes, as: UTF8.self)
            if (try? regex.firstMatch(in: text)) != nil { return true }
            if stderrClosed { return false }
            if !condition.wait(until: deadline) {
                let final = String(decoding: stderrBytes, as: UTF8.self)
                return (try? regex.firstMatch(in: final)) != nil
            }
        }
    }

    /// The last `count` lines the server wrote to stderr.
    func stderrTail(lines count: Int) -> [String] {
        condition.lock()
        let text = String(decoding: stderrBytes, as: UTF8.self)
        condition.unlock()
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
        return Array(lines.suffix(count))
    }

    // MARK: Writing and stopping

    enum WriteError: Error, CustomStringConvertible {
        case stdinClosed
        case brokenPipe(Int32)
        case timedOut
        var description: String {
            switch self {
            case .stdinClosed: return "stdin is already closed"
            case .brokenPipe(let code): return "the server's stdin is closed (\(String(cString: strerror(code))))"
            case .timedOut: return "the server stopped reading its stdin (write timed out)"
            }
        }
    }

    /// Writes all bytes, waiting for pipe space with poll() until `deadline`.
    func write(_ bytes: [UInt8], until deadline: Date) throws(WriteError) {
        condition.lock()
        let closed = stdinClosed
        let fd = stdinFD
        condition.unlock()
        if closed || fd < 0 { throw .stdinClosed }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                systemWrite(fd, raw.baseAddress.map { $0 + offset }, raw.count - offset)
            }
            if n >= 0 {
                offset += n
                continue
            }
            let code = errno
            if code == EINTR { continue }
            guard code == EAGAIN || code == EWOULDBLOCK else { throw .brokenPipe(code) }
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { throw .timedOut }
            var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            _ = poll(&pfd, 1, Int32(min(remaining * 1000, Double(Int32.max)).rounded(.up)))
        }
    }

    /// Sends the child a signal, if it is still running.
    func send(signal number: Int32) {
        process?.signal(number)
    }

    func closeStdin() {
        condition.lock()
        let fd = stdinClosed ? -1 : stdinFD
        stdinClosed = true
        stdinFD = -1
        condition.unlock()
        if fd >= 0 { close(fd) }
    }

    /// Ends the child: SIGTERM, then SIGKILL if it has not exited within a grace
    /// period, then waits briefly for its output to be read.
    func stop() {
        closeStdin()
        guard exitState == nil else { return }
        process?.signal(SIGTERM)
        if waitForExit(until: Date(timeIntervalSinceNow: 0.5)) == nil {
            process?.signal(SIGKILL)
            _ = waitForExit(until: Date(timeIntervalSinceNow: 2))
        }
    }

    /// Waits (bounded) for stderr to end so reports show the server's last words.
    func waitForStderrEnd(until deadline: Date) {
        condition.lock()
        defer { condition.unlock() }
        while !stderrClosed {
            if !condition.wait(until: deadline) { return }
        }
    }
}

/// The libc `write`, named apart from `TranscriptServerProcess.write`.
private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    #if canImport(Darwin)
    return Darwin.write(fd, buffer, count)
    #elseif canImport(Musl)
    return Musl.write(fd, buffer, count)
    #else
    return Glibc.write(fd, buffer, count)
    #endif
}
