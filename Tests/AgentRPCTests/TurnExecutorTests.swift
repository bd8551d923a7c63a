import AgentRPCProtocol
import Foundation
import Synchronization
import Testing

@testable import AgentRPC

/// `TurnExecutor`: the frames a batch of a turn's jobs queues wake the writer
/// once, when the batch ends; frames queued anywhere else wake it at once; an
/// answer's continuation runs on the reader thread that settled it, never
/// nested in another batch and never longer than `inlineJobs` jobs there.
/// In process, on pipes: the sink's own counters (`wakeUps`, `writes`) say
/// what the writer thread was asked to do, not a clock.
@Suite struct TurnExecutorTests {
    /// A sink writing into a pipe whose other end the test reads.
    final class PipeSink: Sendable {
        let sink: ByteSinkThread
        let pipe = Pipe()

        init() throws {
            // As the server does before it makes its sinks: a batch writes
            // its frames itself only where a reader gone cannot kill the process.
            signal(SIGPIPE, SIG_IGN)
            #if os(Linux)
            // Room for a burst past `maxDeferredBytes` without a reader (F_SETPIPE_SZ).
            _ = fcntl(pipe.fileHandleForWriting.fileDescriptor, 1031, 1 << 20)
            #endif
            // The sink writes a copy of the write end and closes it itself, when its
            // thread ends: the pipe's own end is closed when this object goes, and a
            // write of the thread's after that would land in whatever file took the
            // number meanwhile (another test's, with the suites in parallel).
            sink = try ByteSinkThread(
                fileDescriptor: dup(pipe.fileHandleForWriting.fileDescriptor), name: "test.sink", maxQueuedBytes: nil,
                closesDescriptor: true)
            // Counted from a writer asleep on its empty queue: a writer thread that
            // starts late finds the first frames queued and writes them without a
            // wake-up (seen in a clean-clone CI run with the suites in parallel).
            let deadline = ContinuousClock.now + .seconds(5)
            while !sink.writerIsWaiting, ContinuousClock.now < deadline { sched_yield() }
        }

        deinit { sink.close() }

        /// Everything written so far (the sink flushed first, bounded).
        func written() -> [UInt8] {
            sink.flush(timeoutSeconds: 5)
            var bytes: [UInt8] = []
            let fd = pipe.fileHandleForReading.fileDescriptor
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                bytes += buffer[0..<n]
            }
            return bytes
        }

        /// Fills the pipe with page-sized writes that never block (one each
        /// while `poll` says there is room), then reads `leavingFreePages`
        /// pages back out; returns the bytes left in it.
        func fill(leavingFreePages: Int) -> [UInt8] {
            let writeEnd = pipe.fileHandleForWriting.fileDescriptor
            let page = [UInt8](repeating: UInt8(ascii: "f"), count: 4096)
            var filled = 0
            while true {
                var room = pollfd(fd: writeEnd, events: Int16(POLLOUT), revents: 0)
                guard poll(&room, 1, 0) == 1 else { break }
                guard page.withUnsafeBytes({ write(writeEnd, $0.baseAddress, $0.count) }) == page.count else { break }
                filled += 1
            }
            var buffer = [UInt8](repeating: 0, count: 4096)
            for _ in 0..<leavingFreePages {
                _ = buffer.withUnsafeMutableBytes { read(pipe.fileHandleForReading.fileDescriptor, $0.baseAddress, $0.count) }
            }
            return [UInt8](repeating: UInt8(ascii: "f"), count: (filled - leavingFreePages) * 4096)
        }

        /// Reads until `expected.count` bytes came (bounded), as a client reading on would.
        func drain(expecting expected: [UInt8]) -> [UInt8] {
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            let fd = pipe.fileHandleForReading.fileDescriptor
            let deadline = ContinuousClock.now + .seconds(5)
            while bytes.count < expected.count, ContinuousClock.now < deadline {
                var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 100) == 1 else { continue }
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n <= 0 { break }
                bytes += buffer[0..<n]
            }
            return bytes
        }

        /// Waits (bounded) until the sink made `count` writes.
        func waitForWrites(_ count: Int) async -> Int {
            let deadline = ContinuousClock.now + .seconds(5)
            while sink.writes.load(ordering: .relaxed) < count, ContinuousClock.now < deadline { await Task.yield() }
            return sink.writes.load(ordering: .relaxed)
        }

        /// Waits (bounded) until the writer was woken `count` times.
        func waitForWakeUps(_ count: Int) async -> Int {
            let deadline = ContinuousClock.now + .seconds(5)
            while sink.wakeUps.load(ordering: .relaxed) < count, ContinuousClock.now < deadline { await Task.yield() }
            return sink.wakeUps.load(ordering: .relaxed)
        }
    }

    static func frame(_ n: Int) -> [UInt8] { Array("{\"n\":\(n)}\n".utf8) }

    /// The frames of a batch go out in one write when it ends, made by the
    /// batch's own thread: the writer thread is not woken (a pipe takes them
    /// without waiting).
    @Test func theFramesOfOneBatchAreWrittenByItsThreadWhenItEnds() async throws {
        let out = try PipeSink()
        let sink = out.sink
        let inside = await Task(executorPreference: TurnExecutor.shared) { () -> (wakeUps: Int, deferred: Bool) in
            for n in 0..<6 { sink.enqueue(Self.frame(n)) }
            return (sink.wakeUps.load(ordering: .relaxed), sink.wakeIsDeferred)
        }.value
        #expect(inside.wakeUps == 0, "the writer was woken while the batch was still queueing")
        #expect(inside.deferred)
        #expect(await out.waitForWrites(1) == 1, "six frames of one batch, one write")
        #expect(out.written() == (0..<6).flatMap(Self.frame))
        let wakeUps = sink.wakeUps.load(ordering: .relaxed)
        #expect(wakeUps == 0, "the writer thread was woken for frames the batch could write")
        // The writer sleeps through the batch's write: the next frame from
        // outside a batch is the first thing that wakes it.
        sink.enqueue(Self.frame(6))
        #expect(await out.waitForWrites(2) == 2)
        let writerWakes = sink.writerWakes.load(ordering: .relaxed)
        #expect(writerWakes == 1, "the writer thread woke for the batch's own write")
    }

    @Test func aBatchThatThrowsStillWritesItsFrames() async throws {
        struct Failed: Error {}
        let out = try PipeSink()
        let sink = out.sink
        let task = Task(executorPreference: TurnExecutor.shared) { () throws -> Void in
            sink.enqueue(Self.frame(1))
            throw Failed()
        }
        await #expect(throws: Failed.self) { try await task.value }
        #expect(await out.waitForWrites(1) == 1)
        #expect(out.written() == Self.frame(1))
    }

    /// A pipe with no room: the batch does not wait for the reader, it wakes
    /// the writer thread, which writes the frames once there is room (a batch
    /// that waited for room would wake nobody before the test reads).
    @Test func aFullPipeLeavesTheBatchsFramesToTheWriter() async throws {
        let out = try PipeSink()
        let sink = out.sink
        let filler = out.fill(leavingFreePages: 0)
        await Task(executorPreference: TurnExecutor.shared) {
            for n in 0..<3 { sink.enqueue(Self.frame(n)) }
        }.value
        #expect(await out.waitForWakeUps(1) == 1)
        #expect(out.drain(expecting: filler + (0..<3).flatMap(Self.frame)) == filler + (0..<3).flatMap(Self.frame))
    }

    /// Room for part of the batch's frames: what fits goes now, the rest, in
    /// order after it, by the writer thread.
    @Test func aPipeWithRoomForPartOfTheFramesGetsTheRestInOrder() async throws {
        let out = try PipeSink()
        let sink = out.sink
        let filler = out.fill(leavingFreePages: 1)
        // Three pages of frames, one page of room.
        let frames = (0..<12).map { n in Array(String(repeating: "\(n % 10)", count: 1023).utf8) + [0x0A] }
        await Task(executorPreference: TurnExecutor.shared) {
            for frame in frames { sink.enqueue(frame) }
        }.value
        #expect(await out.waitForWakeUps(1) == 1)
        let expected = filler + frames.flatMap { $0 }
        #expect(out.drain(expecting: expected) == expected)
    }

    /// A descriptor that refuses a write without waiting (a regular file here)
    /// gets the batch's frames through the writer thread, as before.
    @Test func aFileGetsTheBatchsFramesThroughTheWriter() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("turn-executor-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        let sink = try ByteSinkThread(fileDescriptor: fd, name: "test.file", maxQueuedBytes: nil, closesDescriptor: true)
        defer { sink.close() }
        for round in 0..<2 {
            // From an idle writer (one still writing takes new frames without a wake-up).
            sink.flush(timeoutSeconds: 5)
            await Task(executorPreference: TurnExecutor.shared) {
                for n in 0..<3 { sink.enqueue(Self.frame(10 * round + n)) }
            }.value
            let deadline = ContinuousClock.now + .seconds(5)
            while sink.wakeUps.load(ordering: .relaxed) < round + 1, ContinuousClock.now < deadline { await Task.yield() }
            let wakeUps = sink.wakeUps.load(ordering: .relaxed)
            #expect(wakeUps == round + 1)
        }
        sink.flush(timeoutSeconds: 5)
        let written = try #require(FileManager.default.contents(atPath: path))
        #expect(Array(written) == [0, 1, 2, 10, 11, 12].flatMap(Self.frame))
    }

    @Test func aFrameQueuedOutsideABatchWakesTheWriterAtOnce() async throws {
        let out = try PipeSink()
        out.sink.enqueue(Self.frame(1))
        // Counted when signalled, before `enqueue` returns: no wait needed.
        let wakeUps = out.sink.wakeUps.load(ordering: .relaxed)
        #expect(wakeUps == 1)
        #expect(out.written() == Self.frame(1))
    }

    /// Another thread's frame is not held back by a batch that has not ended:
    /// it wakes the writer for both.
    @Test func aBatchStillRunningDoesNotHoldBackAnotherThreadsFrame() async throws {
        let out = try PipeSink()
        let sink = out.sink
        let queued = Latch(), release = Latch()
        let batch = Task(executorPreference: TurnExecutor.shared) { () -> Bool in
            sink.enqueue(Self.frame(1))
            queued.open()
            // The batch stays open (bounded) while the test queues from its own thread.
            return release.wait(seconds: 5)
        }
        #expect(queued.wait(seconds: 5))
        #expect(sink.wakeIsDeferred)
        sink.enqueue(Self.frame(2))
        let wakeUps = sink.wakeUps.load(ordering: .relaxed)
        #expect(wakeUps == 1)
        #expect(out.written() == Self.frame(1) + Self.frame(2), "written while the batch still runs")
        release.open()
        #expect(await batch.value)
    }

    /// Past `maxDeferredBytes` a batch wakes the writer without waiting for its end.
    @Test func aLongBurstIsWrittenWhileTheBatchRuns() async throws {
        let out = try PipeSink()
        let sink = out.sink
        let line = [UInt8](repeating: UInt8(ascii: "x"), count: 1023) + [0x0A]
        let wakeUps = await Task(executorPreference: TurnExecutor.shared) { () -> Int in
            for _ in 0...(ByteSinkThread.maxDeferredBytes / line.count) { sink.enqueue(line) }
            return sink.wakeUps.load(ordering: .relaxed)
        }.value
        #expect(wakeUps == 1)
        #expect(out.written().count == (ByteSinkThread.maxDeferredBytes / line.count + 1) * line.count)
    }

    @Test func flushInsideABatchWritesItsFramesWithoutWaitingForTheEnd() async throws {
        let out = try PipeSink()
        let sink = out.sink
        let pending = await Task(executorPreference: TurnExecutor.shared) { () -> Bool in
            sink.enqueue(Self.frame(1))
            let start = ContinuousClock.now
            sink.flush(timeoutSeconds: 30)
            // A flush that waited for its own batch's end would wait the whole 30 s.
            return ContinuousClock.now - start < .seconds(20) && !sink.wakeIsDeferred
        }.value
        #expect(pending)
        #expect(out.written() == Self.frame(1))
    }

    // MARK: The answer's continuation

    @Test func anAnswersContinuationRunsOnTheReaderThread() async throws {
        let client = try PipeClient()
        let connection = client.connection
        let task = Task(executorPreference: TurnExecutor.shared) { () throws -> (answering: Bool, result: JSONValue) in
            let result = try await connection.request("tool/call", ["x": 1], timeout: 10)
            return (BatchThread.current?.answering == true, result)
        }
        try client.answerNextRequest(with: ["ok": true])
        let (answering, result) = try await task.value
        #expect(result == ["ok": true])
        #expect(answering, "the continuation ran on a pool thread, not on the reader that settled the answer")
    }

    @Test func theReaderHandsALongBatchToThePool() async throws {
        let client = try PipeClient()
        let connection = client.connection
        let task = Task(executorPreference: TurnExecutor.shared) { () throws -> (first: Bool, last: Bool) in
            _ = try await connection.request("tool/call", ["x": 1], timeout: 10)
            let first = BatchThread.current?.answering == true
            // Each yield is one more job of the batch.
            for _ in 0..<(2 * TurnExecutor.inlineJobs) { await Task.yield() }
            return (first, BatchThread.current?.answering == true)
        }
        try client.answerNextRequest(with: ["ok": true])
        let (first, last) = try await task.value
        #expect(first)
        #expect(!last, "the reader ran more than \(TurnExecutor.inlineJobs) jobs of one batch")
    }

    /// Many short-lived connections, one after another: each answer reaches the
    /// connection that asked. With the pipes' own descriptors handed over, a
    /// finished connection's reader, between two reads when the test released
    /// its pipes, read the next connection's input (the same numbers) and took
    /// its answer: 4–7 % of the requests timed out. Each connection now owns
    /// copies its threads close (`ownsDescriptors`).
    @Test func eachAnswerReachesTheConnectionThatAsked() async throws {
        var timedOut = 0
        for _ in 0..<200 {
            let client = try PipeClient()
            let connection = client.connection
            let task = Task(executorPreference: TurnExecutor.shared) { () throws -> Bool in
                _ = try await connection.request("tool/call", ["x": 1], timeout: 5)
                // A batch long enough to be handed to the pool, as above: the reader reads on sooner.
                for _ in 0..<(2 * TurnExecutor.inlineJobs) { await Task.yield() }
                return true
            }
            try client.answerNextRequest(with: ["ok": true])
            do { _ = try await task.value } catch OutgoingRequestError.timedOut { timedOut += 1 }
        }
        #expect(timedOut == 0, "answers taken by another connection's reader")
    }

    @Test func aContinuationResumedInsideABatchIsNotRunNestedInIt() async throws {
        final class Parked: Sendable {
            let continuation = Mutex<CheckedContinuation<Void, Never>?>(nil)
            let ran = Atomic<Bool>(false)
        }
        let parked = Parked()
        let waiting = Task(executorPreference: TurnExecutor.shared) {
            await withCheckedContinuation { continuation in parked.continuation.withLock { $0 = continuation } }
            parked.ran.store(true, ordering: .releasing)
        }
        let deadline = ContinuousClock.now + .seconds(5)
        while parked.continuation.withLock({ $0 == nil }), ContinuousClock.now < deadline { await Task.yield() }
        let continuation = try #require(parked.continuation.withLock { $0 })
        let ranDuringResume = await Task(executorPreference: TurnExecutor.shared) { () -> Bool in
            TurnExecutor.runningAnswers { continuation.resume() }
            return parked.ran.load(ordering: .acquiring)
        }.value
        #expect(!ranDuringResume, "the resumed job ran nested inside the running one")
        await waiting.value
        let ranAtLast = parked.ran.load(ordering: .acquiring)
        #expect(ranAtLast)
    }
}

/// A one-shot gate a thread waits on, bounded.
private final class Latch: Sendable {
    private let state = Mutex(false)
    private let condition = ConditionLock()

    func open() {
        condition.lock()
        state.withLock { $0 = true }
        condition.broadcast()
        condition.unlock()
    }

    /// False when `seconds` passed first.
    func wait(seconds: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while !state.withLock({ $0 }) {
            if !condition.wait(until: deadline) { return state.withLock { $0 } }
        }
        return true
    }
}

/// A `Connection` on two pipes; the test answers the server's requests.
private final class PipeClient: Sendable {
    let connection: Connection
    private let toServer: FileHandle
    private let fromServer: FileHandle
    private let pipes: [Pipe]

    init() throws {
        let piped = try PipedConnection()
        connection = piped.connection
        toServer = piped.input.fileHandleForWriting
        fromServer = piped.output.fileHandleForReading
        pipes = [piped.input, piped.output]
        try connection.start()
    }

    struct NoRequest: Error {}

    /// Reads the server's next request (waiting at most 5 s for each read) and answers it.
    func answerNextRequest(with result: JSONValue) throws {
        var parser = FrameParser(maxMessageBytes: 1 << 20)
        while true {
            var ready = pollfd(fd: fromServer.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 5000) == 1 else { throw NoRequest() }
            let data = fromServer.availableData
            if data.isEmpty { throw NoRequest() }
            parser.append(data)
            while let event = parser.next() {
                guard case .frame(let bytes) = event, let value = try? JSONValue.parse(bytes), let id = value["id"], value["method"] != nil else { continue }
                let answer: JSONValue = ["jsonrpc": "2.0", "id": id, "result": result]
                try toServer.write(contentsOf: Data(answer.serialized() + [0x0A]))
                return
            }
        }
    }
}
