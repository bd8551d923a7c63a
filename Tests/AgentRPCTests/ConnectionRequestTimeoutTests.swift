import AgentRPCProtocol
import Foundation
import Synchronization
import Testing
@testable import AgentRPC

/// A `Connection` on two pipes, with the test playing the client: a reader
/// thread collects what the server writes into an `Inbox` (never blocking the
/// task pool), and the test answers requests by id.
private final class ClientEnd: Sendable {
    let connection: Connection
    let inbox = Inbox()
    private let toServer: FileHandle
    private let pipes: [Pipe]

    init() throws {
        let piped = try PipedConnection()
        let output = piped.output
        connection = piped.connection
        toServer = piped.input.fileHandleForWriting
        pipes = [piped.input, output]
        let (stream, feed) = AsyncStream.makeStream(of: JSONValue.self)
        let inbox = self.inbox
        Task {
            for await v in stream { await inbox.add(v) }
            await inbox.close()
        }
        let reader = output.fileHandleForReading
        Thread {
            var parser = FrameParser(maxMessageBytes: 1 << 20)
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                parser.append(data)
                while let event = parser.next() {
                    if case .frame(let bytes) = event, let value = try? JSONValue.parse(bytes) { feed.yield(value) }
                }
            }
            feed.finish()
        }.start()
        try connection.start()
    }

    /// The `count`-th request (1-based) the server sent, waiting at most 5 seconds.
    func request(number count: Int) async throws -> JSONValue {
        try #require(await inbox.first(timeout: PipeServer.answerWaitSeconds) { $0["method"] == "tool/call" && $0["id"] == .int(count) })
    }

    /// The server's withdrawal of request `id`, waiting at most 5 seconds.
    func withdrawal(of id: JSONValue) async throws -> JSONValue {
        try #require(await inbox.first(timeout: PipeServer.answerWaitSeconds) { $0["method"] == "$/cancelRequest" && $0["params"]?["id"] == id })
    }

    func answer(_ id: JSONValue) throws {
        let message: JSONValue = ["jsonrpc": "2.0", "id": id, "result": ["outcome": "ok", "content": "fine"]]
        try toServer.write(contentsOf: Data(message.serialized() + [0x0A]))
    }
}

private struct TestTimedOut: Error {}

/// Runs `body`, failing with `TestTimedOut` after `seconds` (the body's task is
/// cancelled, which withdraws an outstanding request, so this always returns).
private func bounded<T: Sendable>(_ seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TestTimedOut()
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw TestTimedOut() }
        return first
    }
}

@Suite struct ConnectionRequestTimeoutTests {
    @Test func anUnansweredRequestTimesOutAndIsWithdrawn() async throws {
        let client = try ClientEnd()
        let connection = client.connection
        let outcome = try await bounded(5) { () -> OutgoingRequestError? in
            do {
                _ = try await connection.request("tool/call", ["x": 1], timeout: 0.05)
                return nil
            } catch let error as OutgoingRequestError {
                return error
            }
        }
        #expect(outcome == .timedOut(seconds: 0.05))
        let request = try await client.request(number: 1)
        _ = try await client.withdrawal(of: try #require(request["id"]))
        #expect(connection.pendingRequestCount == 0)
    }

    @Test func aZeroTimeoutStillTimesOut() async throws {
        let client = try ClientEnd()
        let connection = client.connection
        for _ in 0..<20 {
            await #expect(throws: OutgoingRequestError.timedOut(seconds: 0)) {
                _ = try await bounded(5) { try await connection.request("tool/call", [:], timeout: 0) }
            }
        }
        withExtendedLifetime(client) {}
    }

    /// Answered requests leave their (later) deadlines behind; a shorter timeout
    /// armed afterwards must still fire on time, not at the stale deadline.
    @Test func aShortTimeoutAfterLongOnesFiresOnTime() async throws {
        let client = try ClientEnd()
        let connection = client.connection
        for n in 1...3 {
            // Its own deadline is long on purpose; the test's wait for it is not
            // (once, under load, an answer that never came held this test 600 s).
            async let result = bounded(30) { try await connection.request("tool/call", [:], timeout: 600) }
            let request = try await client.request(number: n)
            try client.answer(try #require(request["id"]))
            #expect(try await result["outcome"] == "ok")
        }
        let start = ContinuousClock.now
        await #expect(throws: OutgoingRequestError.timedOut(seconds: 0.1)) {
            _ = try await bounded(5) { try await connection.request("tool/call", [:], timeout: 0.1) }
        }
        #expect(start.duration(to: .now) < .seconds(4))
    }
}
