import AgentRPCProtocol
import Foundation
import Synchronization
import Testing

@testable import AgentRPC

/// A client that stops reading stdout in the middle of a long turn, then reads
/// again (docs/protocol.md, "Every limit and its default"): the server must
/// neither drop a delta nor the answer, and must not buffer the whole turn.
/// Driven through the built binary; nothing here waits on a clock except the
/// bounds that keep a broken server from hanging the test.
@Suite struct SlowReaderTests {
    static let deltaCount = 100_000

    struct Outcome: Sendable {
        var messages: [JSONValue]
        var stderr: String
        var status: Int32
    }

    @Test func aClientThatStopsReadingGetsEveryDeltaAndTheAnswer() async throws {
        let server = try #require(CommittedTranscriptTests.builtServer, "cannot find the built agentrpc binary next to the tests")
        let deltas = (0..<Self.deltaCount).map { "w\($0) " }
        let outcome = try await Self.runWithoutReading(server: server, deltas: deltas, until: "answered session/send 3")
        #expect(outcome.status == 0, "stderr: \(outcome.stderr.suffix(2000))")

        let expected = deltas.joined()
        let answer = try #require(outcome.messages.first { $0["id"] == .int(3) && $0["method"] == nil }, "the send was never answered")
        #expect(answer["result"]?["message"]?["text"]?.stringValue == expected, "the final answer is not the whole text")

        let events = outcome.messages.filter { $0["method"] == .string("session/event") }
        let seqs = events.compactMap { $0["params"]?["seq"]?.intValue }
        #expect(seqs == Array(1...seqs.count), "events were lost or reordered")
        let textDeltas = events.compactMap { e -> String? in
            e["params"]?["event"]?["type"] == .string("textDelta") ? e["params"]?["event"]?["delta"]?.stringValue : nil
        }
        #expect(textDeltas.joined() == expected, "text deltas were dropped or changed")
        // The client was behind: deltas were merged into fewer, larger events.
        #expect(textDeltas.count < Self.deltaCount)

        // The output queue stayed bounded (without back-pressure it held the whole turn, ~13 MB).
        let peakLine = try #require(outcome.stderr.split(separator: "\n").first { $0.contains("output queue peak") }, "no peak in the log")
        let peak = try #require(peakLine.split(separator: " ").compactMap { Int($0) }.first)
        #expect(peak < 8 * Connection.defaultOutputQueueBytes, "peak \(peak) bytes")
    }

    @Test func aTurnWhoseHeldTextReachesTheBoundWaitsForTheClient() async throws {
        let server = try #require(CommittedTranscriptTests.builtServer, "cannot find the built agentrpc binary next to the tests")
        // 4 MB of text, four times the output queue's bound: the turn cannot
        // finish while the client reads nothing. Closing stdin then cancels it.
        let deltas = (0..<40_000).map { "\($0) " + String(repeating: "x", count: 94) + "\n" }
        let outcome = try await Self.runWithoutReading(
            server: server, deltas: deltas, until: "the turn waits for it", then: "the running turn is stopped (shutdown)")
        #expect(outcome.status == 0, "stderr: \(outcome.stderr.suffix(2000))")
        let answer = try #require(outcome.messages.first { $0["id"] == .int(3) && $0["method"] == nil }, "the send was never answered")
        #expect(answer["error"]?["data"]?["kind"] == .string("cancelled"))
        #expect(answer["error"]?["data"]?["source"] == .string("shutdown"))
        let partial = try #require(answer["error"]?["data"]?["partialText"]?.stringValue)
        #expect(partial.utf8.count < deltas.joined().utf8.count, "the turn ran to its end instead of waiting")
        let textDeltas = outcome.messages.compactMap { e -> String? in
            e["params"]?["event"]?["type"] == .string("textDelta") ? e["params"]?["event"]?["delta"]?.stringValue : nil
        }
        #expect(textDeltas.joined() == partial, "the client did not get every delta of the partial text")
        let peakLine = try #require(outcome.stderr.split(separator: "\n").first { $0.contains("output queue peak") }, "no peak in the log")
        let peak = try #require(peakLine.split(separator: " ").compactMap { Int($0) }.first)
        #expect(peak < 8 * Connection.defaultOutputQueueBytes, "peak \(peak) bytes")
    }

    /// Sends a turn of `deltas` and reads nothing until the server logs
    /// `needle`, then closes stdin and reads everything (once the server has
    /// logged `stopped`, if given).
    static func runWithoutReading(server: String, deltas: [String], until needle: String, then stopped: String? = nil) async throws -> Outcome {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result { try runBlocking(server: server, deltas: deltas, until: needle, then: stopped) })
            }.start()
        }
    }

    struct Failure: Error, CustomStringConvertible { var description: String }

    static func runBlocking(server: String, deltas: [String], until needle: String, then stopped: String?) throws -> Outcome {
        // `SpawnedProcess`, not Foundation's `Process`: that one learns of the exit
        // through a socket its child inherits, and under `swift test --parallel` a
        // wait for it once never returned though the server had ended.
        let input = Pipe(), output = Pipe(), errors = Pipe()
        let process = try SpawnedProcess.run(
            server, arguments: ["serve", "--log-level", "debug"], environment: ProcessInfo.processInfo.environment,
            standardInput: .descriptor(input.fileHandleForReading.fileDescriptor),
            standardOutput: .descriptor(output.fileHandleForWriting.fileDescriptor),
            standardError: .descriptor(errors.fileHandleForWriting.fileDescriptor))
        // The child's ends are the child's only: its output ends when it does.
        try input.fileHandleForReading.close()
        try output.fileHandleForWriting.close()
        try errors.fileHandleForWriting.close()
        func stop() { if process.isRunning { kill(process.processIdentifier, SIGTERM) } }

        // stderr is read all along (the log is how the test knows the turn ended).
        let log = Mutex<[UInt8]>([])
        let logChanged = NSCondition()
        let stderrDone = DispatchSemaphore(value: 0)
        Thread {
            let handle = errors.fileHandleForReading
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                log.withLock { $0 += Array(data) }
                logChanged.lock(); logChanged.broadcast(); logChanged.unlock()
            }
            logChanged.lock(); logChanged.broadcast(); logChanged.unlock()
            stderrDone.signal()
        }.start()
        func logText() -> String { String(decoding: log.withLock { $0 }, as: UTF8.self) }

        // Whatever goes wrong, nothing waits past this: the server is stopped, and its pipes end.
        let watchdog = DispatchWorkItem { stop() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 180, execute: watchdog)
        defer { watchdog.cancel() }

        var parser = FrameParser(maxMessageBytes: Int(Int32.max), framing: .newline)
        var messages: [JSONValue] = []
        func take(_ bytes: Data) throws {
            parser.append(bytes)
            while let event = parser.next() {
                guard case .frame(let body) = event else { throw Failure(description: "not a frame: \(event)") }
                messages.append(try JSONValue.parse(body))
            }
        }
        func write(_ message: JSONValue) throws {
            try input.fileHandleForWriting.write(contentsOf: Data(message.serialized() + [0x0A]))
        }

        try write(["jsonrpc": "2.0", "id": 1, "method": "initialize", "params": ["protocolVersion": 1]])
        try write([
            "jsonrpc": "2.0", "id": 2, "method": "session/create",
            "params": ["model": ["provider": "scripted", "script": [["text": .array(deltas.map { .string($0) })]]]],
        ])
        // Read until the session exists, as any client does.
        while !messages.contains(where: { $0["id"] == .int(2) }) {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { throw Failure(description: "the server ended before creating the session: \(logText().suffix(2000))") }
            try take(data)
        }
        let create = try #require(messages.first { $0["id"] == .int(2) })
        let sessionID = try #require(create["result"]?["sessionId"]?.stringValue, "create failed: \(create)")

        // The turn, and from here on not a byte read until the server has answered it.
        try write(["jsonrpc": "2.0", "id": 3, "method": "session/send", "params": ["sessionId": .string(sessionID), "input": "go"]])
        let deadline = Date(timeIntervalSinceNow: 120)
        func waitForLog(_ text: String) throws {
            logChanged.lock()
            defer { logChanged.unlock() }
            while !logText().contains(text) {
                if !logChanged.wait(until: deadline) {
                    stop()
                    throw Failure(description: "never logged \(text); stderr: \(logText().suffix(2000))")
                }
            }
        }
        try waitForLog(needle)
        // The client is done: it closes stdin, then reads everything (bounded by the watchdog).
        try input.fileHandleForWriting.close()
        // Not a byte read until the server has stopped the turn, if asked: read at once,
        // the client would let the turn run on, and a loaded machine may let it finish
        // before the server has taken in the end of its input.
        if let stopped { try waitForLog(stopped) }
        try take((try? output.fileHandleForReading.readToEnd()) ?? Data())
        while let event = parser.finish() {
            if case .frame(let body) = event { messages.append(try JSONValue.parse(body)) }
        }
        let status = process.waitUntilExit()
        _ = stderrDone.wait(timeout: .now() + 10)
        return Outcome(messages: messages, stderr: logText(), status: status)
    }
}
