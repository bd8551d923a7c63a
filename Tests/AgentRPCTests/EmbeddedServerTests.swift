import AgentRPC
import AgentRPCProtocol
import Foundation
import Synchronization
import Testing

/// The embedding API a second front end (`agentrpc acp`) uses: methods called
/// by name, notifications and server→client requests through the host's channel.
@Suite struct EmbeddedServerTests {
    /// A host channel: records notifications, answers `tool/call` by a closure.
    final class Host: ClientChannel {
        let notifications = Mutex<[JSONValue]>([])
        let answer: @Sendable (String, JSONValue) async throws -> JSONValue
        let arrived = AsyncStream.makeStream(of: String.self)

        init(answer: @escaping @Sendable (String, JSONValue) async throws -> JSONValue) { self.answer = answer }

        func notify(_ method: String, _ params: JSONValue) {
            notifications.withLock { $0.append(params["event"] ?? .null) }
            if let type = params["event"]?["type"]?.stringValue { arrived.continuation.yield(type) }
        }

        func request(_ method: String, _ params: JSONValue, timeout: Double) async throws -> JSONValue {
            try await answer(method, params)
        }

        var eventTypes: [String] { notifications.withLock { $0.compactMap { $0["type"]?.stringValue } } }

        /// Waits (bounded) for an event of `type`.
        func waitFor(_ type: String) async throws {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask { for await t in self.arrived.stream where t == type { return true }; return false }
                group.addTask { try await Task.sleep(for: .seconds(10)); return false }
                let found = try await group.next() ?? false
                group.cancelAll()
                #expect(found, "no \(type) event within 10 s")
            }
        }
    }

    static func server(_ host: Host) async throws -> EmbeddedServer {
        var options = ServerOptions()
        options.ephemeral = true
        options.configPath = nil
        options.environment = [:]
        return try await EmbeddedServer(options: options, channel: host, logger: Logger(level: .off), client: ClientCapabilities(tools: true))
    }

    @Test func callsMethodsByNameAndRoutesToolCallsToTheHost() async throws {
        let host = Host { method, params in
            #expect(method == "tool/call")
            return ["outcome": "ok", "content": .string("looked up \(params["arguments"]?["q"]?.stringValue ?? "")")]
        }
        let server = try await Self.server(host)
        let created = try await server.call("session/create", [
            "model": ["provider": "scripted", "script": [
                ["toolCalls": [["name": "lookup", "arguments": ["q": "x"], "id": "call_1"]]],
                ["text": ["Done."]],
            ]],
            "tools": [["name": "lookup", "inputSchema": ["type": "object"]]],
        ])
        let id = try #require(created["sessionId"]?.stringValue)
        let result = try await server.call("session/send", ["sessionId": .string(id), "input": "Look"])
        #expect(result["message"]?["text"] == "Done.")
        #expect(host.eventTypes.contains("toolCallFinished"))
        let transcript = try await server.call("session/getTranscript", ["sessionId": .string(id)])
        #expect(transcript["entries"]?.arrayValue?.contains { $0["content"] == "looked up x" } == true)
        await server.shutdown(reason: "test", graceSeconds: 1)
    }

    @Test func errorsAreTheMethodsOwnAndCancelEndsARunningTurn() async throws {
        let host = Host { _, _ in .object([:]) }
        let server = try await Self.server(host)
        await #expect(throws: RPCError.self) { _ = try await server.call("session/send", ["sessionId": "s-none", "input": "x"]) }
        await #expect(throws: RPCError.self) { _ = try await server.call("no/such") }
        let created = try await server.call("session/create", ["model": ["provider": "scripted", "script": [["text": ["Part"], "stall": true]]]])
        let id = try #require(created["sessionId"]?.stringValue)
        let turn = try await server.start("session/send", ["sessionId": .string(id), "input": "Go"])
        try await host.waitFor("textDelta")
        turn.cancel()
        do {
            _ = try await turn.result()
            Issue.record("a cancelled turn answered a result")
        } catch {
            #expect(error.code == .cancelled)
        }
        #expect(host.eventTypes.last == "turnEnded")
        await server.shutdown(reason: "test", graceSeconds: 1)
    }
}
