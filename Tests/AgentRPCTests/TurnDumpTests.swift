import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// What recorded transcripts cannot see: the requests the engine sends to the
/// model, read back from `--dump-requests`. Each test runs real turns with the
/// scripted provider through an in-process server and checks the dump.
@Suite struct TurnDumpTests {
    // MARK: Instructions

    @Test func personaDirectivesInstructionsAndContextFormTheInstructions() async throws {
        let h = try TurnHarness(capabilities: ["contextSources": true])
        let session = try await h.createSession([
            "model": ["provider": "scripted", "script": [["text": ["ok"]]]],
            "role": ["persona": "You are Ada, a careful reviewer.", "directives": ["Cite line numbers.", "Be brief."]],
            "instructions": "Review the open file.",
            "contextSources": [["name": "editor", "description": "the open file"]],
        ])
        let sendID = h.send("session/send", ["sessionId": .string(session), "input": "Look at this"])
        let refresh = try #require(await h.serverRequest("context/refresh"))
        h.reply(to: refresh, ["values": ["editor": "main.swift:12 let x = 1"]])
        _ = try await h.result(of: sendID)

        let requests = try h.dumpedRequests()
        try #require(requests.count == 1)
        let instructions = try #require(requests[0]["request"]?["instructions"]?.stringValue)
        #expect(instructions == """
            You are Ada, a careful reviewer.

            Directives:
            - Cite line numbers.
            - Be brief.

            Review the open file.

            Context:
            ## editor
            main.swift:12 let x = 1
            """)
        #expect(requests[0]["request"]?["messages"] == [["role": "user", "text": "Look at this"]])
        #expect(requests[0]["sessionId"] == .string(session))
        #expect(requests[0]["roundTrip"] == 1)
    }

    // MARK: Egress

    @Test func redactionRewritesWhatIsSentButNotTheTranscript() async throws {
        let h = try TurnHarness()
        let session = try await h.createSession([
            "model": ["provider": "scripted", "script": [
                ["toolCalls": [["name": "lookup", "id": "c1", "arguments": ["who": "123-45-6789"]]]],
                ["text": ["done"]],
            ]],
            "tools": [["name": "lookup"]],
            "instructions": "Never repeat 987-65-4321.",
            "egress": ["redact": [["pattern": "\\d{3}-\\d{2}-\\d{4}", "replacement": "[ssn]"]]],
        ])
        let sendID = h.send("session/send", ["sessionId": .string(session), "input": "Who has ssn 123-45-6789?"])
        let call = try #require(await h.serverRequest("tool/call"))
        // The client sees the model's real arguments: redaction is for what leaves the machine.
        #expect(call["params"]?["arguments"] == ["who": "123-45-6789"])
        h.reply(to: call, ["outcome": "ok", "content": "123-45-6789 belongs to Bob"])
        _ = try await h.result(of: sendID)

        let requests = try h.dumpedRequests()
        try #require(requests.count == 2)
        let second = try #require(requests[1]["request"])
        #expect(second["instructions"] == "Never repeat [ssn].")
        #expect(second["messages"] == [
            ["role": "user", "text": "Who has ssn [ssn]?"],
            ["role": "assistant", "text": "", "toolCalls": [["id": "c1", "name": "lookup", "arguments": #"{"who":"[ssn]"}"#]]],
            ["role": "tool", "callId": "c1", "name": "lookup", "content": "[ssn] belongs to Bob", "isError": false],
        ])
        let dump = try String(contentsOfFile: h.dumpPath, encoding: .utf8)
        #expect(!dump.contains("123-45-6789"))

        let transcript = try await h.call("session/getTranscript", ["sessionId": .string(session)])
        let entries = try #require(transcript["entries"]?.arrayValue)
        #expect(entries.first?["text"] == "Who has ssn 123-45-6789?")
        #expect(entries.contains { $0["content"] == "123-45-6789 belongs to Bob" })
        #expect(transcript["instructions"] == "Never repeat 987-65-4321.")
    }

    @Test func aRefusedRequestIsNeverSent() async throws {
        let h = try TurnHarness()
        let session = try await h.createSession([
            "model": ["provider": "scripted", "script": [["text": ["unused"]]]],
            "egress": ["refuse": ["BEGIN PRIVATE KEY"]],
        ])
        let error = try await h.failure("session/send", ["sessionId": .string(session), "input": "-----BEGIN PRIVATE KEY-----"])
        #expect(error["data"]?["kind"] == "egressRefused")
        #expect(try h.dumpedRequests().isEmpty)
    }

    // MARK: Tools

    @Test func toolDefinitionsAndResultsAreFedBack() async throws {
        let h = try TurnHarness()
        let schema: JSONValue = ["type": "object", "properties": ["path": ["type": "string"]], "required": ["path"]]
        let session = try await h.createSession([
            "model": ["provider": "scripted", "script": [
                ["text": ["Reading."], "toolCalls": [
                    ["name": "read", "id": "c1", "arguments": ["path": "a.txt"]],
                    ["name": "stat", "id": "c2", "arguments": [:]],
                    ["name": "nope", "id": "c3", "arguments": [:]],
                ]],
                ["text": ["All read."]],
            ]],
            "tools": [["name": "read", "description": "Reads a file", "inputSchema": schema], ["name": "stat"]],
        ])
        let sendID = h.send("session/send", ["sessionId": .string(session), "input": "Read a.txt"])
        let read = try #require(await h.serverRequest("tool/call"))
        h.reply(to: read, ["outcome": "ok", "content": "hello"])
        let stat = try #require(await h.serverRequest("tool/call", after: [read]))
        h.reply(to: stat, ["outcome": "failed", "content": ["errno": 2]])
        _ = try await h.result(of: sendID)

        let requests = try h.dumpedRequests()
        try #require(requests.count == 2)
        let first = try #require(requests[0]["request"])
        // A tool without a schema is offered with an empty object schema.
        #expect(first["tools"] == [
            ["name": "read", "description": "Reads a file", "inputSchema": schema],
            ["name": "stat", "description": "", "inputSchema": ["type": "object", "properties": [:]]],
        ])
        #expect(first["toolChoice"] == "auto")
        #expect(first["messages"] == [["role": "user", "text": "Read a.txt"]])

        let second = try #require(requests[1]["request"])
        let messages = try #require(second["messages"]?.arrayValue)
        try #require(messages.count == 5)
        #expect(messages[1] == [
            "role": "assistant", "text": "Reading.",
            "toolCalls": [
                ["id": "c1", "name": "read", "arguments": #"{"path":"a.txt"}"#],
                ["id": "c2", "name": "stat", "arguments": "{}"],
                ["id": "c3", "name": "nope", "arguments": "{}"],
            ],
        ])
        #expect(messages[2] == ["role": "tool", "callId": "c1", "name": "read", "content": "hello", "isError": false])
        // Non-string content goes back as JSON text; any outcome but ok is an error result.
        #expect(messages[3] == ["role": "tool", "callId": "c2", "name": "stat", "content": #"{"errno":2}"#, "isError": true])
        #expect(messages[4]["callId"] == "c3")
        #expect(messages[4]["isError"] == true)
        #expect(messages[4]["content"]?.stringValue?.contains("Available tools: read, stat") == true)
        #expect(second["tools"] == first["tools"])
    }

    @Test func aForcedToolChoiceAppliesToTheFirstRoundTripOnly() async throws {
        let h = try TurnHarness()
        let session = try await h.createSession([
            "model": ["provider": "scripted", "script": [
                ["toolCalls": [["name": "search", "id": "c1", "arguments": ["q": "x"]]]],
                ["text": ["Found."]],
            ]],
            "tools": [["name": "search"]],
        ])
        let sendID = h.send("session/send", [
            "sessionId": .string(session), "input": "Find x",
            "options": ["toolChoice": ["tool": "search"], "temperature": 0.25, "maxOutputTokens": 300],
        ])
        let call = try #require(await h.serverRequest("tool/call"))
        h.reply(to: call, ["outcome": "ok", "content": "x"])
        _ = try await h.result(of: sendID)

        let requests = try h.dumpedRequests()
        try #require(requests.count == 2)
        #expect(requests[0]["request"]?["toolChoice"] == ["tool": "search"])
        #expect(requests[1]["request"]?["toolChoice"] == "auto")
        // Call-site options reach every request of the turn.
        for r in requests {
            #expect(r["request"]?["options"] == ["temperature": 0.25, "maxOutputTokens": 300])
        }
    }

    // MARK: Structured output

    @Test func generateSendsTheSchemaAndNoTools() async throws {
        let h = try TurnHarness()
        let schema: JSONValue = ["type": "object", "properties": ["n": ["type": "integer"]], "required": ["n"]]
        let session = try await h.createSession([
            "model": ["provider": "scripted", "script": [["text": [#"{"n": 3}"#]]]],
            "tools": [["name": "search"]],
        ])
        let result = try await h.call("session/generate", ["sessionId": .string(session), "input": "Count", "schema": schema])
        #expect(result["value"] == ["n": 3])
        let requests = try h.dumpedRequests()
        try #require(requests.count == 1)
        #expect(requests[0]["request"]?["responseSchema"] == schema)
        #expect(requests[0]["request"]?["tools"] == [])
        #expect(requests[0]["request"]?["toolChoice"] == "none")
    }

    // MARK: History

    @Test func imagesAndEarlierTurnsAreInTheHistory() async throws {
        let h = try TurnHarness()
        let session = try await h.createSession([
            "model": ["provider": "scripted", "script": [["reasoning": ["hm"], "text": ["A cat."]], ["text": ["Yes."]]]]
        ])
        let bytes = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        let png = bytes.base64EncodedString()
        let file = h.directory.appendingPathComponent("photo.jpg")
        try Data(repeating: 0xFF, count: 5).write(to: file)
        _ = try await h.call("session/send", [
            "sessionId": .string(session),
            "input": ["text": "What is it?", "images": [
                ["data": .string(png), "mimeType": "image/png"], ["url": "https://example.com/c.png"], ["path": .string(file.path)],
            ]],
        ])
        _ = try await h.call("session/send", ["sessionId": .string(session), "input": "Sure?"])
        let requests = try h.dumpedRequests()
        try #require(requests.count == 2)
        // Reasoning is shown to clients but not replayed to the model.
        #expect(requests[1]["request"]?["messages"] == [
            ["role": "user", "text": "What is it?", "images": [
                ["mimeType": "image/png", "bytes": 8], ["url": "https://example.com/c.png"], ["mimeType": "image/jpeg", "bytes": 5],
            ]],
            ["role": "assistant", "text": "A cat."],
            ["role": "user", "text": "Sure?"],
        ])
    }

    @Test func anInterruptedExchangeKeptByPreserveIsAnsweredSynthetically() async throws {
        let h = try TurnHarness()
        let session = try await h.createSession([
            "model": ["provider": "scripted", "script": [
                ["toolCalls": [["name": "t", "id": "c1", "arguments": [:]], ["name": "t", "id": "c2", "arguments": [:]]]],
                ["text": ["Next turn."]],
            ]],
            "tools": [["name": "t"]],
            "transcriptErrorPolicy": "preserve",
        ])
        let sendID = h.send("session/send", ["sessionId": .string(session), "input": "Go"])
        let first = try #require(await h.serverRequest("tool/call"))
        h.reply(to: first, ["outcome": "ok", "content": "one"])
        let second = try #require(await h.serverRequest("tool/call", after: [first]))
        h.replyError(to: second, code: -32000, message: "executor down")
        let failure = try await h.failure(of: sendID)
        #expect(failure["data"]?["kind"] == "toolExecutorError")

        _ = try await h.call("session/send", ["sessionId": .string(session), "input": "Again"])
        let requests = try h.dumpedRequests()
        try #require(requests.count == 2)
        let messages = try #require(requests[1]["request"]?["messages"]?.arrayValue)
        // Every call gets a result, so any provider sees a well-formed exchange.
        #expect(messages.count == 5)
        #expect(messages[2] == ["role": "tool", "callId": "c1", "name": "t", "content": "one", "isError": false])
        #expect(messages[3]["callId"] == "c2")
        #expect(messages[3]["isError"] == true)
        #expect(messages[4] == ["role": "user", "text": "Again"])
    }

    /// Requests are built incrementally (docs/protocol.md, "Prefix stability"):
    /// every way the transcript is rewritten between requests must show in the next one.
    @Test func theNextRequestFollowsEveryRewriteOfTheTranscript() async throws {
        let h = try TurnHarness()
        let session = try await h.createSession([
            "model": ["provider": "scripted", "script": [
                ["toolCalls": [["name": "lookup", "id": "c1", "arguments": ["q": 1]]]], ["text": ["one"]],
                ["toolCalls": [["name": "lookup", "id": "c2", "arguments": ["q": 2]]]],
                ["text": ["three"]], ["text": ["four"]],
            ]],
            "tools": [["name": "lookup"]],
            "transcriptErrorPolicy": "revert",
        ])
        let first = h.send("session/send", ["sessionId": .string(session), "input": "Go"])
        let call = try #require(await h.serverRequest("tool/call"))
        h.reply(to: call, ["outcome": "ok", "content": "first answer"])
        _ = try await h.result(of: first)

        // A client's edits of the first prompt and of a tool output.
        let entries = try #require(try await h.call("session/getTranscript", ["sessionId": .string(session)])["entries"]?.arrayValue)
        let prompt = try #require(entries.first { $0["type"] == "prompt" })
        let output = try #require(entries.first { $0["type"] == "toolOutput" })
        var editedPrompt = try #require(prompt.objectValue)
        editedPrompt["text"] = "Go on"
        var editedOutput = try #require(output.objectValue)
        editedOutput["content"] = "edited answer"
        _ = try await h.call("session/mutateTranscript", [
            "sessionId": .string(session), "operations": [
                ["op": "replace", "id": prompt["id"] ?? .null, "entry": .object(editedPrompt)],
                ["op": "replace", "id": output["id"] ?? .null, "entry": .object(editedOutput)],
            ],
        ])
        // A turn that fails after its first request: `revert` takes its entries out again.
        let second = h.send("session/send", ["sessionId": .string(session), "input": "Fails"])
        let failing = try #require(await h.serverRequest("tool/call", after: [call]))
        h.replyError(to: failing, code: -32000, message: "executor down")
        _ = try await h.failure(of: second)
        _ = try await h.call("session/send", ["sessionId": .string(session), "input": "Next"])
        // A client's removal of the last turn.
        let all = try #require(try await h.call("session/getTranscript", ["sessionId": .string(session)])["entries"]?.arrayValue)
        _ = try await h.call("session/mutateTranscript", [
            "sessionId": .string(session), "operations": [["op": "remove", "ids": .array(all.suffix(2).compactMap { $0["id"] })]],
        ])
        _ = try await h.call("session/send", ["sessionId": .string(session), "input": "Last"])

        let requests = try h.dumpedRequests()
        try #require(requests.count == 5)
        let history: [JSONValue] = [
            ["role": "user", "text": "Go on"],
            ["role": "assistant", "text": "", "toolCalls": [["id": "c1", "name": "lookup", "arguments": #"{"q":1}"#]]],
            ["role": "tool", "callId": "c1", "name": "lookup", "content": "edited answer", "isError": false],
            ["role": "assistant", "text": "one"],
        ]
        #expect(requests[2]["request"]?["messages"] == .array(history + [["role": "user", "text": "Fails"]]))
        #expect(requests[3]["request"]?["messages"] == .array(history + [["role": "user", "text": "Next"]]))
        #expect(requests[4]["request"]?["messages"] == .array(history + [["role": "user", "text": "Last"]]))
    }
}

/// Drives one in-process server: requests with ids, answers to the server's
/// own requests, and the dump file. Every wait is bounded.
final class TurnHarness {
    let pipe: PipeServer
    let dumpPath: String
    /// A fresh directory for this test's files, removed afterwards.
    let directory: URL
    private var nextID = 1

    init(capabilities: JSONValue = [:]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("turn-dump-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        dumpPath = directory.appendingPathComponent("requests.jsonl").path
        var options = ServerOptions()
        options.dumpRequestsPath = dumpPath
        options.environment = [:]
        pipe = try PipeServer(options: options)
        pipe.send(["jsonrpc": "2.0", "id": 0, "method": "initialize", "params": ["protocolVersion": 1, "capabilities": capabilities]])
    }

    deinit {
        pipe.closeInput()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Sends a request and returns its id without waiting.
    func send(_ method: String, _ params: JSONValue) -> Int {
        nextID += 1
        pipe.send(["jsonrpc": "2.0", "id": .int(nextID), "method": .string(method), "params": params])
        return nextID
    }

    /// The result of request `id`; a missing answer or an error fails the test.
    func result(of id: Int) async throws -> JSONValue {
        let answer = try #require(await pipe.response(id: id), "no answer to request \(id)")
        if let error = answer["error"] { Issue.record("request \(id) failed: \(error)") }
        return try #require(answer["result"])
    }

    /// The error of request `id`; a missing answer or a result fails the test.
    func failure(of id: Int) async throws -> JSONValue {
        let answer = try #require(await pipe.response(id: id), "no answer to request \(id)")
        return try #require(answer["error"], "request \(id) did not fail: \(answer)")
    }

    func call(_ method: String, _ params: JSONValue) async throws -> JSONValue { try await result(of: send(method, params)) }
    func failure(_ method: String, _ params: JSONValue) async throws -> JSONValue { try await failure(of: send(method, params)) }

    func createSession(_ config: JSONValue) async throws -> String {
        try #require(try await call("session/create", config)["sessionId"]?.stringValue)
    }

    /// The first request the server sent with `method` that is not among `handled`.
    func serverRequest(_ method: String, after handled: [JSONValue] = []) async -> JSONValue? {
        let seen = Set(handled.compactMap { $0["id"] })
        return await pipe.inbox.first(timeout: PipeServer.answerWaitSeconds) { message in
            guard message["method"] == .string(method), let id = message["id"] else { return false }
            return !seen.contains(id)
        }
    }

    func reply(to request: JSONValue, _ result: JSONValue) {
        pipe.send(["jsonrpc": "2.0", "id": request["id"] ?? .null, "result": result])
    }

    func replyError(to request: JSONValue, code: Int, message: String) {
        pipe.send(["jsonrpc": "2.0", "id": request["id"] ?? .null, "error": ["code": .int(code), "message": .string(message)]])
    }

    /// Every request dumped so far, one per provider round trip.
    func dumpedRequests() throws -> [JSONValue] {
        guard FileManager.default.fileExists(atPath: dumpPath) else { return [] }
        let text = try String(contentsOfFile: dumpPath, encoding: .utf8)
        return try text.split(separator: "\n").map { try JSONValue.parse(Array($0.utf8)) }
    }
}
