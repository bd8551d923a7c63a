import AgentRPCProtocol
import Foundation
import Synchronization
@testable import AgentRPC

/// Messages read from a server, and waiters for the ones not seen yet.
actor Inbox {
    private(set) var messages: [JSONValue] = []
    private var waiters: [(id: Int, predicate: @Sendable (JSONValue) -> Bool, continuation: CheckedContinuation<JSONValue?, Never>)] = []
    private var nextWaiter = 0
    private var closed = false

    func add(_ message: JSONValue) {
        messages.append(message)
        let ready = waiters.filter { $0.predicate(message) }
        waiters.removeAll { w in ready.contains { $0.id == w.id } }
        for w in ready { w.continuation.resume(returning: message) }
    }

    func close() {
        closed = true
        for w in waiters { w.continuation.resume(returning: nil) }
        waiters.removeAll()
    }

    /// The first message (already here or still to come) matching `predicate`, or nil after `timeout`.
    func first(timeout: Double, where predicate: @escaping @Sendable (JSONValue) -> Bool) async -> JSONValue? {
        if let hit = messages.first(where: predicate) { return hit }
        if closed { return nil }
        let id = nextWaiter
        nextWaiter += 1
        let timer = Task { [weak self] in
            try? await Task.sleep(for: .seconds(timeout))
            await self?.expire(id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { c in waiters.append((id, predicate, c)) }
    }

    private func expire(_ id: Int) {
        guard let i = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: i).continuation.resume(returning: nil)
    }
}

/// A real `Server` wired to in-process pipes: the test writes frames to its
/// stdin and reads every frame it writes, with a timeout on every wait.
final class PipeServer: Sendable {
    let server: Server
    let inbox = Inbox()
    private let toServer: FileHandle
    /// The pipes own the descriptors the server uses; they must outlive it.
    private let pipes: [Pipe]
    let exitCode: Task<Int32, Never>
    /// The store directory this object made, removed with it.
    private let ownStore: String?

    /// The session store goes to a fresh temporary directory unless the test
    /// chose one (or `ephemeral`): tests never write to the user's home, and
    /// never leave a store behind in the temporary directory.
    init(options: ServerOptions = ServerOptions()) throws {
        var options = options
        if options.storeDirectory == nil && !options.ephemeral {
            let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-pipe-store-\(UUID().uuidString)")
            options.storeDirectory = directory
            ownStore = directory
        } else {
            ownStore = nil
        }
        let input = Pipe(), output = Pipe()
        server = try Server(
            options: options, inputFD: try ownedCopy(of: input.fileHandleForReading.fileDescriptor),
            outputFD: try ownedCopy(of: output.fileHandleForWriting.fileDescriptor), ownsDescriptors: true)
        toServer = input.fileHandleForWriting
        pipes = [input, output]
        let reader = output.fileHandleForReading
        let inbox = self.inbox
        // One ordered consumer keeps messages in arrival order.
        let (stream, feed) = AsyncStream.makeStream(of: JSONValue.self)
        Task {
            for await v in stream { await inbox.add(v) }
            await inbox.close()
        }
        let thread = Thread {
            var parser = FrameParser(maxMessageBytes: 1 << 30)
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                parser.append(data)
                while let e = parser.next() {
                    if case .frame(let bytes) = e, let v = try? JSONValue.parse(bytes) {
                        feed.yield(v)
                    }
                }
            }
            feed.finish()
        }
        thread.start()
        let s = server
        exitCode = Task { await s.run() }
    }

    deinit {
        if let ownStore { try? FileManager.default.removeItem(atPath: ownStore) }
    }

    func send(_ message: JSONValue) { write(message.serialized() + [0x0A]) }
    func write(_ bytes: [UInt8]) { try? toServer.write(contentsOf: Data(bytes)) }
    func closeInput() { try? toServer.close() }

    /// How long a test waits for an in-process server's answer or request before it
    /// fails. Only a failing test waits this long. Not 5 s: in `swift test --parallel`
    /// on a 2-core machine the test process's cooperative pool is two threads, which
    /// CPU-heavy tests (regex budgets, every recorded stream decoded) and blocking ones
    /// can hold for seconds, and the server's tasks wait for them (seen: 15 s).
    static let answerWaitSeconds: Double = 60

    func response(id: Int, timeout: Double = PipeServer.answerWaitSeconds) async -> JSONValue? {
        await inbox.first(timeout: timeout) { $0["id"] == .int(id) && $0["method"] == nil }
    }
}

/// A `Connection` on two fresh pipes, as a client would see the server: the
/// test writes `input`'s write end and reads `output`'s read end (not started).
struct PipedConnection {
    let connection: Connection
    let input = Pipe()
    let output = Pipe()

    init() throws {
        connection = try Connection(
            inputFD: try ownedCopy(of: input.fileHandleForReading.fileDescriptor),
            outputFD: try ownedCopy(of: output.fileHandleForWriting.fileDescriptor),
            maxMessageBytes: 1 << 20, logger: Logger(level: .off), ownsDescriptors: true)
    }
}

/// A copy of `fd` for a server or connection that owns it (`ownsDescriptors`):
/// its threads close it once done with it. Handed the pipe's own descriptor,
/// a reader still between two reads when the test's `Pipe` is released would
/// read on from whatever file the number names next (another test's pipe:
/// seen as an answer taken by a finished connection, the request it answered
/// timing out, 4–7 % of the time in a loop).
func ownedCopy(of fd: Int32) throws -> Int32 {
    let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
    guard copy >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EBADF) }
    return copy
}
