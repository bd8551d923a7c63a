import AgentRPCProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Something went wrong while driving the server; the benchmark stops with it.
struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Monotonic nanoseconds: cheap enough to read around every line.
@inline(__always)
func nowNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// The release server under test: spawned with `posix_spawn` (so the spawn cost
/// in the cold-start figure is the kernel's, not Foundation's) and driven over
/// two pipes with blocking reads and writes, one thread, no polling.
final class ServerProcess {
    let pid: pid_t
    private var toServer: Int32
    private let fromServer: Int32
    /// Bytes read but not yet handed out as lines: `buffer[start..<end]`.
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    /// Where the search for the next newline resumes (no byte is scanned twice).
    private var scanned = 0
    private var exited = false

    init(binary: String, arguments: [String] = [], environment extra: [String: String] = [:]) throws {
        var input: [Int32] = [0, 0]
        var output: [Int32] = [0, 0]
        guard pipe(&input) == 0, pipe(&output) == 0 else {
            throw BenchError("pipe failed: errno \(errno)")
        }
        // Close-on-exec everywhere: the child gets only the dup2'd copies below.
        // (This program is single-threaded, so nothing can fork in between.)
        for fd in input + output { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on the target, so only these three survive exec.
        posix_spawn_file_actions_adddup2(&actions, input[0], 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)

        let argv = ([binary] + arguments).map { strdup($0) } + [nil]
        let environment = ProcessInfo.processInfo.environment.merging(extra) { _, added in added }
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        var child: pid_t = 0
        let rc = posix_spawn(&child, binary, &actions, nil, argv, envp)
        close(input[0])
        close(output[1])
        guard rc == 0 else {
            close(input[1])
            close(output[0])
            throw BenchError("cannot start \(binary): \(String(cString: strerror(rc)))")
        }
        pid = child
        toServer = input[1]
        fromServer = output[0]
        buffer = [UInt8](repeating: 0, count: 1 << 20)
    }

    deinit {
        if !exited {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        if toServer >= 0 { close(toServer) }
        close(fromServer)
    }

    // MARK: Writing

    func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(toServer, base + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw BenchError("write to the server failed: errno \(errno)")
                }
                offset += n
            }
        }
    }

    /// Writes one newline-framed message.
    func send(_ message: JSONValue) throws {
        var bytes = message.serialized()
        bytes.append(0x0A)
        try write(bytes)
    }

    /// Writes a request and returns its id.
    func sendRequest(id: Int, method: String, params: JSONValue) throws {
        try send(["jsonrpc": "2.0", "id": .int(id), "method": .string(method), "params": params])
    }

    // MARK: Reading

    /// Blocks until a whole line is available and hands it to `body` (valid only
    /// during the call). Nil at end of output.
    func withNextLine<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) throws -> R? {
        while true {
            if scanned < end {
                let found: Int? = buffer.withUnsafeBufferPointer { buf in
                    guard let base = buf.baseAddress,
                        let hit = memchr(base + scanned, 0x0A, end - scanned)
                    else { return nil }
                    return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
                }
                if let newline = found {
                    let lineStart = start
                    start = newline + 1
                    scanned = start
                    return try buffer.withUnsafeBufferPointer { buf in
                        try body(UnsafeBufferPointer(rebasing: buf[lineStart..<newline]))
                    }
                }
                scanned = end
            }
            // Make room: move the partial line to the front, grow if one line fills the buffer.
            if start > 0 {
                let pending = end - start
                if pending > 0 {
                    buffer.withUnsafeMutableBufferPointer { buf in
                        guard let base = buf.baseAddress else { return }
                        memmove(base, base + start, pending)
                    }
                }
                scanned -= start
                end = pending
                start = 0
            }
            if end == buffer.count { buffer.append(contentsOf: [UInt8](repeating: 0, count: buffer.count)) }
            let n = buffer.withUnsafeMutableBufferPointer { buf -> Int in
                guard let base = buf.baseAddress else { return -1 }
                return read(fromServer, base + end, buf.count - end)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw BenchError("read from the server failed: errno \(errno)")
            }
            if n == 0 { return nil }
            end += n
        }
    }

    /// Reads lines until the answer to request `id` arrives, passing every other
    /// line to `other`. Throws on a JSON-RPC error answer.
    @discardableResult
    func awaitResult(id: Int, other: (UnsafeBufferPointer<UInt8>) throws -> Void = { _ in }) throws -> JSONValue {
        while true {
            let answer: JSONValue?? = try withNextLine { line -> JSONValue? in
                if !LineKind.isEvent(line) {
                    let message = try JSONValue.parse(line)
                    if message["method"] == nil, message["id"] == .int(id) { return message }
                }
                try other(line)
                return nil
            }
            guard let answer else { throw BenchError("the server closed its output while request \(id) was pending") }
            guard let message = answer else { continue }
            if let error = message["error"] { throw BenchError("request \(id) failed: \(error)") }
            return message["result"] ?? .null
        }
    }

    // MARK: Lifecycle

    /// `initialize`, as every benchmark starts.
    func initialize(id: Int = 1) throws {
        try sendRequest(id: id, method: "initialize", params: [
            "protocolVersion": 1, "clientInfo": ["name": "agentrpc-bench", "version": "1"],
        ])
        try awaitResult(id: id)
    }

    /// Closes the server's stdin (the client is gone) and reaps it. Returns its exit status.
    @discardableResult
    func finish() -> Int32 {
        if toServer >= 0 {
            close(toServer)
            toServer = -1
        }
        // Drain whatever it still writes so it never blocks on a full pipe.
        while (try? withNextLine { _ in () }) != nil {}
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        exited = true
        return status
    }

    /// Current and peak resident set size from `/proc/<pid>/status`, in KiB, and
    /// the anonymous (private, not file-backed) part of the current one.
    func memory() throws -> (rssKiB: Int, peakKiB: Int, anonKiB: Int) {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else {
            throw BenchError("cannot read /proc/\(pid)/status")
        }
        var rss = -1
        var hwm = -1
        var anon = -1
        for line in text.split(separator: "\n") {
            if line.hasPrefix("RssAnon:") { anon = Self.kibValue(line) }
            if line.hasPrefix("VmRSS:") { rss = Self.kibValue(line) }
            if line.hasPrefix("VmHWM:") { hwm = Self.kibValue(line) }
        }
        guard rss >= 0, hwm >= 0 else { throw BenchError("no VmRSS/VmHWM in /proc/\(pid)/status") }
        return (rss, hwm, anon)
    }

    /// CPU time the server has used so far, all threads, in nanoseconds: the
    /// kernel's CPU-time clock of the whole process (`clock_getcpuclockid`),
    /// which keeps the time of threads that have already exited. Unlike wall
    /// time it does not grow when other processes compete for the CPUs.
    ///
    /// Summing `/proc/<pid>/task/*/schedstat` instead misses every thread
    /// that ended before the second reading: a server that parses each
    /// response on a thread of its own then looks cheaper than it is.
    func cpuNanos() throws -> UInt64 {
        var clock = clockid_t()
        var ts = timespec()
        if clock_getcpuclockid(pid, &clock) == 0, clock_gettime(clock, &ts) == 0 {
            return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
        }
        let dir = "/proc/\(pid)/task"
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: dir) else {
            throw BenchError("cannot list \(dir)")
        }
        var total: UInt64 = 0
        for task in tasks {
            guard let text = try? String(contentsOfFile: "\(dir)/\(task)/schedstat", encoding: .utf8),
                let first = text.split(separator: " ").first, let ns = UInt64(first)
            else { continue }
            total += ns
        }
        return total
    }

    private static func kibValue(_ line: Substring) -> Int {
        line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int($0) } ?? -1
    }
}

/// Cheap classification of server lines without a full JSON parse: at 100,000
/// events per turn the client must not become the bottleneck it measures.
/// The needles are exact compact-JSON fragments, which is how the server writes.
enum LineKind {
    private static let eventMethod = Array(#""method":"session/event""#.utf8)
    private static let textDelta = Array(#""type":"textDelta""#.utf8)
    private static let toolCall = Array(#""method":"tool/call""#.utf8)

    static func isEvent(_ line: UnsafeBufferPointer<UInt8>) -> Bool { contains(line, eventMethod) }
    static func isTextDelta(_ line: UnsafeBufferPointer<UInt8>) -> Bool { contains(line, textDelta) }
    static func isToolCall(_ line: UnsafeBufferPointer<UInt8>) -> Bool { contains(line, toolCall) }

    static func contains(_ line: UnsafeBufferPointer<UInt8>, _ needle: [UInt8]) -> Bool {
        guard let base = line.baseAddress, line.count >= needle.count else { return false }
        return needle.withUnsafeBufferPointer { n in
            guard let nb = n.baseAddress, let first = n.first else { return true }
            // memmem is a GNU extension Swift does not import: memchr for the
            // first byte, memcmp for the rest.
            var from = 0
            let last = line.count - n.count
            while from <= last {
                guard let hit = memchr(base + from, Int32(first), last - from + 1) else { return false }
                let at = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
                if memcmp(base + at, nb, n.count) == 0 { return true }
                from = at + 1
            }
            return false
        }
    }
}
