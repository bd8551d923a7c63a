import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// What `Connection` writes is exactly what `Message` serializes to, whichever
/// path built the bytes (the event hot path writes its envelope by hand).
@Suite struct ConnectionOutputTests {
    @Test func notifyWritesTheSameBytesAsASerializedNotification() throws {
        let pipe = Pipe()
        let connection = try Connection(
            inputFD: -1, outputFD: pipe.fileHandleForWriting.fileDescriptor, maxMessageBytes: 1 << 20, logger: Logger(level: .off))
        let params: JSONValue = [
            "sessionId": "s-1", "turnId": "t-1", "seq": 7,
            "event": ["type": "textDelta", "delta": "a \"quoted\"\nline é"],
        ]
        connection.notify("session/event", params)
        connection.notify("x/é\"", [:])
        connection.flush(timeoutSeconds: 5)
        try pipe.fileHandleForWriting.close()
        let written = try #require(try pipe.fileHandleForReading.readToEnd())

        var expected = Message.notification(method: "session/event", params: params).json.serialized()
        expected.append(0x0A)
        expected += Message.notification(method: "x/é\"", params: [:]).json.serialized()
        expected.append(0x0A)
        #expect(Array(written) == expected)
    }

    /// A request of the server's (`tool/call`) goes out as its `Message`
    /// serializes, and so does the withdrawal at its timeout.
    @Test func aRequestWritesTheSameBytesAsASerializedRequest() async throws {
        let pipe = Pipe()
        let connection = try Connection(
            inputFD: -1, outputFD: pipe.fileHandleForWriting.fileDescriptor, maxMessageBytes: 1 << 20, logger: Logger(level: .off))
        let params: JSONValue = ["sessionId": "s-1", "turnId": "t-1", "callId": "c \"1\"", "name": "é", "arguments": ["b": [1, nil], "a": 2.5], "revision": 4]
        // No answer comes: at its (zero) timeout the request is withdrawn.
        await #expect(throws: OutgoingRequestError.timedOut(seconds: 0)) { try await connection.request("tool/call", params, timeout: 0) }
        connection.flush(timeoutSeconds: 5)
        try pipe.fileHandleForWriting.close()
        let written = try #require(try pipe.fileHandleForReading.readToEnd())

        var expected = Message.request(id: .int(1), method: "tool/call", params: params).json.serialized()
        expected.append(0x0A)
        expected += Message.notification(method: "$/cancelRequest", params: ["id": 1]).json.serialized()
        expected.append(0x0A)
        #expect(Array(written) == expected)
    }

    /// A notification whose params are written as bytes (the delta hot path)
    /// is framed as the same params sent as a value would be, in either framing.
    @Test(arguments: [Framing.newline, .contentLength])
    func paramsWrittenAsBytesGoOutAsTheirValue(framing: Framing) throws {
        let pipe = Pipe()
        let connection = try Connection(
            inputFD: -1, outputFD: pipe.fileHandleForWriting.fileDescriptor, maxMessageBytes: 1 << 20, logger: Logger(level: .off),
            framing: framing)
        let params: JSONValue = ["event": ["delta": "é \"x\"\n", "type": "textDelta"], "seq": 3, "sessionId": "s-1"]
        connection.notify("session/event", writingParams: { params.serialize(into: &$0) }, params: { params })
        connection.notify("session/event", params)
        connection.flush(timeoutSeconds: 5)
        try pipe.fileHandleForWriting.close()
        let written = try #require(try pipe.fileHandleForReading.readToEnd())

        let one = framing.frame(Message.notification(method: "session/event", params: params).json.serialized())
        #expect(Array(written) == one + one)
    }
}
