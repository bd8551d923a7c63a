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
import Synchronization

/// How much the server says on stderr. Quiet by default: stderr belongs to the
/// host program as much as to us.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    case off = 0, error, warning, info, debug, trace

    public init?(name: String) {
        switch name.lowercased() {
        case "off", "quiet", "none": self = .off
        case "error": self = .error
        case "warn", "warning": self = .warning
        case "info": self = .info
        case "debug": self = .debug
        case "trace": self = .trace
        default: return nil
        }
    }

    public var name: String {
        switch self {
        case .off: return "off"
        case .error: return "error"
        case .warning: return "warning"
        case .info: return "info"
        case .debug: return "debug"
        case .trace: return "trace"
        }
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Writes log lines to stderr from a thread of its own, through a bounded queue.
/// A host that never reads our stderr can fill the pipe; then lines are dropped
/// (and counted) instead of blocking the server.
public final class Logger: Sendable {
    public let level: LogLevel
    private let sink: ByteSinkThread?
    /// Where lines go when the system refused the writer thread: written by the
    /// logging thread itself. A host that stops reading stderr can then hold the
    /// server up, which beats a server that says nothing about why it fails.
    private let directFD: Int32?

    public init(level: LogLevel, fileDescriptor: Int32 = 2) {
        self.level = level
        guard level != .off else {
            sink = nil
            directFD = nil
            return
        }
        do {
            sink = try ByteSinkThread(fileDescriptor: fileDescriptor, name: "agentrpc.stderr", maxQueuedBytes: 1 << 20)
            directFD = nil
        } catch {
            sink = nil
            directFD = fileDescriptor
            _ = FileDescriptorOutput.write(fileDescriptor, Array("agentrpc[warning] \(error); log lines are written without it\n".utf8))
        }
    }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard level <= self.level, level != .off else { return }
        let line = Array("agentrpc[\(level.name)] \(message())\n".utf8)
        if let sink {
            sink.enqueue(line)
        } else if let directFD {
            _ = FileDescriptorOutput.write(directFD, line)
        }
    }

    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }
    public func warning(_ message: @autoclosure () -> String) { log(.warning, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func trace(_ message: @autoclosure () -> String) { log(.trace, message()) }

    /// Waits (bounded) until queued lines are written; used just before exit.
    public func flush(timeoutSeconds: Double = 0.2) { sink?.flush(timeoutSeconds: timeoutSeconds) }
}

/// The server's logger, for the few places no logger is handed to (a library
/// loaded lazily by a provider). Set when the engine starts.
enum ProcessLogger {
    static let current = Mutex<Logger?>(nil)
}

/// A dedicated thread that writes queued bytes to a file descriptor. Callers
/// never block on the descriptor: they append to the queue under a lock and
/// return. Everything queued while a write is in progress goes out in the next
/// single write, which is what makes many small frames cheap.
final class ByteSinkThread: @unchecked Sendable {
    // @unchecked: all mutable state is guarded by `condition`.
    // A condition, not a Mutex: the writer thread must block until bytes are
    // queued, and `flush` until they are written.
    // The state is guarded by `condition`, so the runtime's exclusivity
    // checks of these properties (two per queued frame) are left out.
    private let condition = ConditionLock()
    @exclusivity(unchecked) private var queue: [UInt8] = []
    /// The buffer of the chunk written last, emptied, kept to be the next
    /// `queue`: frames are appended into room that is already there instead
    /// of a fresh array growing (and copying itself) again after every write.
    @exclusivity(unchecked) private var spare: [UInt8] = []
    @exclusivity(unchecked) private var writing = false
    /// Bytes of the chunk being written (taken off `queue`, not yet all written).
    @exclusivity(unchecked) private var writingBytes = 0
    @exclusivity(unchecked) private var closed = false
    /// The writer is in its wait for bytes (`writerIsWaiting`).
    @exclusivity(unchecked) private var writerWaiting = false
    /// Frames are queued that a running batch of `TurnExecutor` will wake the writer for.
    @exclusivity(unchecked) private var wakeDeferred = false
    /// Threads in `flush`, waiting for the queue to be written.
    @exclusivity(unchecked) private var flushWaiters = 0
    /// Times the writer was signalled for queued bytes (tests and diagnostics).
    let wakeUps = Atomic<Int>(0)
    /// Chunks written, by the writer or by a batch's own thread (tests and diagnostics).
    let writes = Atomic<Int>(0)
    /// Times the writer thread came back from its wait, for work or not (tests).
    let writerWakes = Atomic<Int>(0)
    @exclusivity(unchecked) private var broken = false
    private let fd: Int32
    private let maxQueuedBytes: Int?
    private(set) var droppedBytes = 0
    /// Above this many pending bytes the sink is behind: producers that can
    /// wait (`waitForRoom`) should. Nothing is ever dropped for it.
    let backPressureBytes: Int?
    /// Waiters of `waitForRoom`, resumed once pending bytes fall to half the bound.
    private var roomWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter = 0
    /// The most bytes ever pending at once (queued plus being written).
    @exclusivity(unchecked) private(set) var peakPendingBytes = 0

    /// `AGENTRPC_TEST_KILL_AT_FRAME` (the client's output only): each enqueue is one frame.
    let killSwitch: TestKillSwitch?
    /// The writer thread closes `fd` when it ends (closed, or the descriptor broke):
    /// only it may, for a write of its may still be blocked on it, and the number,
    /// closed under it, could name another file by the next write.
    private let closesDescriptor: Bool

    /// Throws when the system refuses the writer thread: nothing queued could ever be written.
    init(
        fileDescriptor: Int32, name: String, maxQueuedBytes: Int?, backPressureBytes: Int? = nil,
        killSwitch: TestKillSwitch? = nil, closesDescriptor: Bool = false
    ) throws(OSThread.StartError) {
        self.killSwitch = killSwitch
        self.fd = fileDescriptor
        self.maxQueuedBytes = maxQueuedBytes
        self.backPressureBytes = backPressureBytes
        self.closesDescriptor = closesDescriptor
        try OSThread.start(name: name) { [self] in
            // A reader that is gone is `EPIPE` here, never SIGPIPE, whatever the process
            // does with the signal (a library's host may leave it fatal).
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            self.run()
            if self.closesDescriptor { closeDescriptor(self.fd) }
        }
    }

    /// Queues bytes; returns at once. False if the descriptor is broken (peer gone).
    @discardableResult
    func enqueue(_ bytes: [UInt8]) -> Bool {
        enqueue(byteCount: bytes.count) { $0.append(contentsOf: bytes) }
    }

    /// Queues `byteCount` bytes that `fill` appends to the queue under the lock,
    /// so a caller can frame a message straight into it without another copy.
    @discardableResult
    func enqueue(byteCount: Int, _ fill: (inout [UInt8]) -> Void) -> Bool {
        killSwitch?.beforeWrite()
        condition.lock()
        let (queued, wake) = enqueueLocked(byteCount: byteCount, fill)
        condition.unlock()
        if wake { signalWriter() }
        return queued
    }

    /// `enqueue` unless the sink is behind (`isBehind`): then nothing is
    /// queued and this returns false. The question and the frame take one
    /// lock (a streamed delta asks it at every delta).
    func enqueueUnlessBehind(_ fill: (inout [UInt8]) -> Void) -> Bool {
        condition.lock()
        if isBehindLocked {
            condition.unlock()
            return false
        }
        killSwitch?.beforeWrite()
        let wake = enqueueLocked(byteCount: 0, fill).wake
        condition.unlock()
        if wake { signalWriter() }
        return true
    }

    /// Appends under the lock; `wake` says whether the writer must be signalled,
    /// which the caller does after unlocking: signalled under the lock, the
    /// writer woke only to block again on the mutex the producer still held
    /// (two more futex calls and a context switch per wake-up).
    private func enqueueLocked(byteCount: Int, _ fill: (inout [UInt8]) -> Void) -> (queued: Bool, wake: Bool) {
        if broken || closed { return (false, false) }
        if let maxQueuedBytes, queue.count + byteCount > maxQueuedBytes {
            droppedBytes += byteCount
            return (true, false)
        }
        // The writer only waits when it found the queue empty and is not writing;
        // otherwise it will see these bytes without a wake-up (a futex call saved
        // per frame when events come faster than the pipe drains).
        let writerMayWait = queue.isEmpty && !writing
        fill(&queue)
        peakPendingBytes = max(peakPendingBytes, queue.count + writingBytes)
        guard writerMayWait || wakeDeferred else { return (true, false) }
        // A batch of `TurnExecutor` wakes the writer once, when it ends, for all
        // the frames it queued (a tool round trip queues six); past
        // `maxDeferredBytes` the writer is woken at once, so a long burst is
        // written while it is made. Any other caller wakes it now, for its
        // frame and for a batch's frames queued before it.
        if queue.count < Self.maxDeferredBytes, let batch = BatchThread.running {
            if !wakeDeferred {
                wakeDeferred = true
                batch.deferWake(of: self)
            }
            return (true, false)
        }
        wakeDeferred = false
        return (true, true)
    }

    /// The most bytes a batch queues before the writer is woken all the same.
    static let maxDeferredBytes = 64 * 1024

    /// Signals the writer (outside the lock) and counts it.
    private func signalWriter() {
        condition.signal()
        wakeUps.add(1, ordering: .relaxed)
    }

    /// Whether the writer thread waits for bytes (tests: a thread that starts
    /// late, or is between two writes, takes queued bytes without a wake-up).
    var writerIsWaiting: Bool {
        condition.lock()
        defer { condition.unlock() }
        return writerWaiting
    }

    /// Whether queued frames wait for a running batch's end to wake the writer (tests).
    var wakeIsDeferred: Bool {
        condition.lock()
        defer { condition.unlock() }
        return wakeDeferred
    }

    /// Called by a batch of `TurnExecutor` when it ends, for frames it queued
    /// that still wait: the batch's thread writes them itself when the writer is
    /// idle and the descriptor takes them without waiting, else wakes the writer.
    /// A round trip's frames then cost one `write` on the thread that made them,
    /// not a wake-up of the writer thread, its context switch and its wait (the
    /// wake-up alone was ~8 % of the server's CPU per tool round trip).
    func wakeIfDeferred() {
        condition.lock()
        guard wakeDeferred else { return condition.unlock() }
        wakeDeferred = false
        guard writesWithoutWaiting, !writing, !broken, !queue.isEmpty else {
            condition.unlock()
            return signalWriter()
        }
        // The writer thread waits while this write is under way: the bytes of
        // two writers never mix on the descriptor.
        var chunk = takeQueueLocked()
        condition.unlock()

        let written = Self.writeWithoutWaiting(fd, chunk)

        condition.lock()
        if written == nil { writesWithoutWaiting = false }
        let sent = written ?? 0
        if sent < chunk.count {
            // The rest goes first, by the writer thread, which also meets any
            // error the descriptor has (a write that would wait, or failed).
            queue.insert(contentsOf: chunk[sent...], at: 0)
        } else {
            writes.add(1, ordering: .relaxed)
        }
        endWriteLocked(keeping: &chunk)
        // Frames other threads queued meanwhile did not wake the writer (it
        // was "writing"); a flush may wait for this write; a close for its end.
        // Nothing else: the writer, asleep on the same condition, would only
        // wake to sleep again (two futex calls and a context switch).
        let wake = !queue.isEmpty
        let waiters = takeRoomWaitersLocked()
        if wake || closed || flushWaiters > 0 { condition.broadcast() }
        condition.unlock()
        for w in waiters { w.resume() }
        if wake { wakeUps.add(1, ordering: .relaxed) }
    }

    /// A descriptor that takes `pwritev2(…, RWF_NOWAIT)` (pipes and sockets on
    /// Linux 5.x and later): a write that never blocks, without setting
    /// `O_NONBLOCK` on a file description the host program shares. Off for
    /// good after a descriptor refuses the flag, or where the call is missing;
    /// off too unless SIGPIPE is ignored (the server ignores it before it makes
    /// its sinks): a batch runs on threads whose signal mask is not ours, and a
    /// reader gone would kill a host that left SIGPIPE fatal.
    @exclusivity(unchecked) private var writesWithoutWaiting = ByteSinkThread.pwritev2 != nil && ByteSinkThread.pipeSignalIgnored()

    private static func pipeSignalIgnored() -> Bool {
        #if os(Linux)
        var current = sigaction()
        guard sigaction(SIGPIPE, nil, &current) == 0 else { return false }
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
        #else
        return false
        #endif
    }

    private typealias PWriteV2Function = @convention(c) (Int32, UnsafePointer<iovec>, Int32, Int, Int32) -> Int
    private static let pwritev2 = cLibraryFunction("pwritev2", as: PWriteV2Function.self)
    /// `RWF_NOWAIT` from <linux/fs.h>.
    private static let noWait: Int32 = 0x8

    /// How many bytes of `bytes` went out at once (0: none without waiting, or
    /// an error the writer thread will meet again), nil if the descriptor does
    /// not take the flag.
    private static func writeWithoutWaiting(_ fd: Int32, _ bytes: [UInt8]) -> Int? {
        guard let pwritev2 else { return nil }
        return bytes.withUnsafeBytes { raw -> Int? in
            var vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress), iov_len: raw.count)
            while true {
                // Offset -1: the descriptor's own position, as `write` (pipes have none).
                let n = pwritev2(fd, &vector, 1, -1, noWait)
                if n >= 0 { return n }
                switch errno {
                case EINTR: continue
                case EOPNOTSUPP, EINVAL, ENOSYS, ESPIPE: return nil
                default: return 0
                }
            }
        }
    }

    var isBroken: Bool {
        condition.lock()
        defer { condition.unlock() }
        return broken
    }

    /// Whether more than `backPressureBytes` wait to be written (the reader is slow).
    var isBehind: Bool {
        condition.lock()
        defer { condition.unlock() }
        return isBehindLocked
    }

    private var isBehindLocked: Bool {
        guard let bound = backPressureBytes, !broken, !closed else { return false }
        return queue.count + writingBytes > bound
    }

    /// The peak, read under the lock.
    var peakPending: Int {
        condition.lock()
        defer { condition.unlock() }
        return peakPendingBytes
    }

    /// Suspends until at most half of `backPressureBytes` wait to be written,
    /// the descriptor breaks, or the calling task is cancelled.
    func waitForRoom() async {
        let id = makeWaiterID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                condition.lock()
                if !isBehindLocked || Task.isCancelled {
                    condition.unlock()
                    continuation.resume()
                    return
                }
                roomWaiters[id] = continuation
                condition.unlock()
            }
        } onCancel: {
            condition.lock()
            let waiter = roomWaiters.removeValue(forKey: id)
            condition.unlock()
            waiter?.resume()
        }
    }

    private func makeWaiterID() -> Int {
        condition.lock()
        defer { condition.unlock() }
        nextWaiter += 1
        return nextWaiter
    }

    /// Waiters to resume now that the queue drained to half the bound (or broke). Call under the lock.
    private func takeRoomWaitersLocked() -> [CheckedContinuation<Void, Never>] {
        guard !roomWaiters.isEmpty else { return [] }
        if !broken, !closed, let bound = backPressureBytes, queue.count + writingBytes > bound / 2 { return [] }
        let waiters = Array(roomWaiters.values)
        roomWaiters.removeAll()
        return waiters
    }

    /// Blocks the calling thread until the queue is written or the timeout passes.
    func flush(timeoutSeconds: Double) {
        let deadline = Date(timeIntervalSinceNow: timeoutSeconds)
        condition.lock()
        defer { condition.unlock() }
        // Frames of a batch that has not ended yet (this thread's, maybe) are written now.
        if wakeDeferred {
            wakeDeferred = false
            condition.signal()
        }
        flushWaiters += 1
        defer { flushWaiters -= 1 }
        while (!queue.isEmpty || writing) && !broken {
            if !condition.wait(until: deadline) { return }
        }
    }

    /// Stops the thread after the queue drains; `discardingQueued`: at once, with
    /// what is queued dropped (a chunk being written is still written, or fails).
    func close(discardingQueued: Bool = false) {
        condition.lock()
        closed = true
        if discardingQueued { queue.removeAll() }
        let waiters = takeRoomWaitersLocked()
        condition.broadcast()
        condition.unlock()
        for w in waiters { w.resume() }
    }

    private func run() {
        while true {
            condition.lock()
            // `writing` here is a batch's own write (`wakeIfDeferred`), never this thread's.
            while (queue.isEmpty && !closed) || writing {
                writerWaiting = true
                condition.wait()
                writerWakes.add(1, ordering: .relaxed)
            }
            writerWaiting = false
            if queue.isEmpty && closed {
                condition.unlock()
                return
            }
            var chunk = takeQueueLocked()
            condition.unlock()

            let ok = writeAll(chunk)
            writes.add(1, ordering: .relaxed)

            condition.lock()
            endWriteLocked(keeping: &chunk)
            if !ok {
                broken = true
                queue.removeAll()
            }
            let waiters = takeRoomWaitersLocked()
            condition.broadcast()
            condition.unlock()
            for w in waiters { w.resume() }
            if !ok { return }
        }
    }

    /// The largest buffer kept for the next queue.
    private static let spareCapacity = 1 << 20

    /// Takes everything queued as the chunk to write (the queue goes on in the
    /// spare buffer) and marks a write under way. Call under the lock.
    private func takeQueueLocked() -> [UInt8] {
        var chunk: [UInt8] = []
        swap(&chunk, &spare)
        swap(&chunk, &queue)
        writing = true
        writingBytes = chunk.count
        return chunk
    }

    /// Ends the write of a chunk taken by `takeQueueLocked`, whose buffer,
    /// emptied, becomes the spare one (unless a burst grew it past
    /// `spareCapacity`: not kept for ever). Call under the lock.
    private func endWriteLocked(keeping chunk: inout [UInt8]) {
        writing = false
        writingBytes = 0
        if chunk.capacity <= Self.spareCapacity { chunk.removeAll(keepingCapacity: true) } else { chunk = [] }
        swap(&spare, &chunk)
    }

    private func writeAll(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                guard let base = raw.baseAddress else { return true }
                let n = write(fd, base + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += n
            }
            return true
        }
    }
}

/// `close(2)`, for types whose own `close` hides it (a sink, a connection, an exporter).
func closeDescriptor(_ fd: Int32) { _ = close(fd) }
