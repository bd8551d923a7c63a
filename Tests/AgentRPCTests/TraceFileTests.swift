import AgentRPCProtocol
import Foundation
import Testing

@testable import AgentRPC
@testable import AgentTools

/// Tracing end to end through the built `agentrpc` binary: a routed turn with a
/// handoff and two client tool calls, read back from `--trace-file` and from the
/// `trace/span` notifications of a client that asked for them (docs/protocol.md §12).
@Suite struct TraceFileTests {
    /// One finished span, from an OTLP/JSON line or a `trace/span` notification.
    struct Span {
        var name: String
        var traceID: String
        var spanID: String
        var parentID: String?
        var start: UInt64
        var attributes: [String: JSONValue]
        var statusCode: Int?

        init?(otlp span: JSONValue) {
            guard let name = span["name"]?.stringValue, let trace = span["traceId"]?.stringValue,
                let id = span["spanId"]?.stringValue, let start = span["startTimeUnixNano"]?.stringValue.flatMap(UInt64.init)
            else { return nil }
            self.name = name
            traceID = trace
            spanID = id
            parentID = span["parentSpanId"]?.stringValue
            self.start = start
            statusCode = span["status"]?["code"]?.intValue
            var attributes: [String: JSONValue] = [:]
            for attribute in span["attributes"]?.arrayValue ?? [] {
                guard let key = attribute["key"]?.stringValue, case .object(let value)? = attribute["value"], let first = value.first else { continue }
                // OTLP writes 64-bit integers as strings: compare them as numbers.
                if first.key == "intValue", let n = first.value.stringValue.flatMap(Int.init) {
                    attributes[key] = .int(n)
                } else {
                    attributes[key] = first.value
                }
            }
            self.attributes = attributes
        }
    }

    /// The session of every test: an `llm` router picks agent `a`, which calls
    /// `t1`, then hands off to `b`, which calls `t2` and answers.
    static let config: JSONValue = [
        "tools": [["name": "t1"], ["name": "t2"]],
        "profiles": [
            "selector": "agent",
            "cases": [
                "a": [
                    "description": "Starts.", "tools": ["t1", ["handoff": "b"]],
                    "model": ["provider": "scripted", "model": "model-a", "script": [
                        ["toolCalls": [["id": "c1", "name": "t1", "arguments": ["x": 1]]], "usage": ["inputTokens": 10, "outputTokens": 4]],
                        ["toolCalls": [["id": "c2", "name": "handoff_to_b", "arguments": ["reason": "b knows"]]]],
                    ]],
                ],
                "b": [
                    "description": "Finishes.", "tools": ["t2"],
                    "model": ["provider": "scripted", "model": "model-b", "script": [
                        ["toolCalls": [["id": "c3", "name": "t2"]]],
                        ["text": ["done"], "usage": ["inputTokens": 30, "outputTokens": 6]],
                    ]],
                ],
            ],
        ],
        "router": [
            "kind": "llm",
            "model": ["provider": "scripted", "model": "classifier", "script": [
                ["toolCalls": [["id": "r1", "name": "select_agent", "arguments": ["agent": "a"]]], "usage": ["inputTokens": 5, "outputTokens": 1]]
            ]],
        ],
    ]

    /// Runs the turn against the built binary and returns every span in the
    /// trace file, and the `trace/span` notifications when the client asked.
    static func runTurn(extraArguments: [String] = [], clientTraces: Bool) async throws -> (file: [Span], notified: [Span]) {
        let server = try #require(CommittedTranscriptTests.builtServer, "cannot find the built agentrpc binary next to the tests")
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-trace-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tracePath = (directory as NSString).appendingPathComponent("trace.jsonl")
        let capabilities: JSONValue = ["tools": true, "traces": .bool(clientTraces)]
        let (conversation, result) = try await BinaryConversation.run(
            executable: server, arguments: ["serve", "--trace-file", tracePath, "--store", directory + "/store"] + extraArguments
        ) { client in
            _ = try client.request("initialize", ["protocolVersion": 1, "clientInfo": ["name": "trace-test", "version": "1"], "capabilities": capabilities])
            let created = try client.request("session/create", config)
            return try client.request("session/send", ["sessionId": created["result"]?["sessionId"] ?? .null, "input": "go"]) { call in
                ["outcome": "ok", "content": .string("output of \(call["params"]?["name"]?.stringValue ?? "?")")]
            }
        }
        #expect(result["result"]?["stopReason"] == "completed", "\(result)")
        let text = try String(contentsOfFile: tracePath, encoding: .utf8)
        let file = text.split(separator: "\n").compactMap { line -> Span? in
            guard let value = try? JSONValue.parse(String(line)) else {
                Issue.record("a trace line is not JSON: \(line.prefix(200))")
                return nil
            }
            let spans = value["resourceSpans"]?.arrayValue?.first?["scopeSpans"]?.arrayValue?.first?["spans"]?.arrayValue ?? []
            #expect(spans.count == 1, "one span per line")
            return spans.first.flatMap(Span.init(otlp:))
        }
        let notified = conversation.notifications
            .filter { $0["method"] == "trace/span" }
            .compactMap { $0["params"]?["span"].flatMap(Span.init(otlp:)) }
        return (file, notified)
    }

    @Test func theSpanTreeOfARoutedTurnWithAHandoff() async throws {
        let (spans, notified) = try await Self.runTurn(clientTraces: false)
        #expect(notified.isEmpty, "no trace/span without capabilities.traces")
        let byName = Dictionary(grouping: spans, by: \.name)
        #expect(Set(byName.keys) == ["chat.turn", "router.classify", "agent.a", "agent.b", "llm.completion", "tool.t1", "tool.handoff_to_b", "tool.t2"])

        let root = try #require(byName["chat.turn"]?.first)
        #expect(byName["chat.turn"]?.count == 1)
        #expect(root.parentID == nil)
        #expect(spans.allSatisfy { $0.traceID == root.traceID }, "one trace per turn")
        #expect(root.attributes["turn.status"] == "completed")
        #expect(root.attributes["session.id"]?.stringValue?.hasPrefix("s-") == true)
        // The turn's usage adds up the router's and every round trip's.
        #expect(root.attributes["gen_ai.usage.input_tokens"] == 45)
        #expect(root.attributes["gen_ai.usage.output_tokens"] == 11)

        let router = try #require(byName["router.classify"]?.first)
        #expect(router.parentID == root.spanID)
        #expect(router.attributes["agentrpc.router.kind"] == "llm")
        #expect(router.attributes["agentrpc.profile"] == "a")

        let agentA = try #require(byName["agent.a"]?.first)
        let agentB = try #require(byName["agent.b"]?.first)
        #expect(agentA.parentID == root.spanID && agentB.parentID == root.spanID)
        #expect(agentA.start < agentB.start)
        #expect(agentA.attributes["agentrpc.profile"] == "a")

        // Model calls: the classifier's under the router, then two per agent, in order.
        let completions = (byName["llm.completion"] ?? []).sorted { $0.start < $1.start }
        #expect(completions.map(\.parentID) == [router.spanID, agentA.spanID, agentA.spanID, agentB.spanID, agentB.spanID])
        #expect(completions.map { $0.attributes["gen_ai.request.model"]?.stringValue } == ["classifier", "model-a", "model-a", "model-b", "model-b"])
        #expect(completions.allSatisfy { $0.attributes["gen_ai.system"] == "scripted" })
        #expect(completions.map { $0.attributes["gen_ai.usage.input_tokens"]?.intValue } == [5, 10, nil, nil, 30])
        #expect(completions.map { $0.attributes["gen_ai.usage.output_tokens"]?.intValue } == [1, 4, nil, nil, 6])

        // Tools: each under the agent that called it, handoff included.
        #expect(byName["tool.t1"]?.map(\.parentID) == [agentA.spanID])
        #expect(byName["tool.handoff_to_b"]?.map(\.parentID) == [agentA.spanID])
        #expect(byName["tool.t2"]?.map(\.parentID) == [agentB.spanID])
        let t1 = try #require(byName["tool.t1"]?.first)
        #expect(t1.attributes["tool.call_id"] == "c1")
        #expect(t1.attributes["tool.outcome"] == "ok")
        #expect(spans.allSatisfy { $0.statusCode == 1 })

        // Without --trace-payloads no content is recorded anywhere.
        let payloadKeys: Set<String> = ["gen_ai.prompt", "gen_ai.completion", "tool.arguments", "tool.output"]
        #expect(spans.allSatisfy { payloadKeys.isDisjoint(with: $0.attributes.keys) })
    }

    @Test func payloadsOnlyWithTracePayloads() async throws {
        let (spans, _) = try await Self.runTurn(extraArguments: ["--trace-payloads"], clientTraces: false)
        let root = try #require(spans.first { $0.name == "chat.turn" })
        #expect(root.attributes["gen_ai.prompt"] == "go")
        let t1 = try #require(spans.first { $0.name == "tool.t1" })
        #expect(t1.attributes["tool.arguments"] == #"{"x":1}"#)
        #expect(t1.attributes["tool.output"] == "output of t1")
        let handoff = try #require(spans.first { $0.name == "tool.handoff_to_b" })
        #expect(handoff.attributes["tool.output"]?.stringValue?.hasPrefix("Handed off to b.") == true)
        let completions = spans.filter { $0.name == "llm.completion" }.sorted { $0.start < $1.start }
        #expect(completions.last?.attributes["gen_ai.completion"] == "done")
        // The request a model call carried: the last one saw the handoff's output.
        let lastPrompt = try #require(completions.last?.attributes["gen_ai.prompt"]?.stringValue)
        let request = try JSONValue.parse(lastPrompt)
        #expect(request["model"] == "model-b")
        #expect(request["messages"]?.arrayValue?.count == 7)
        let classifierPrompt = try #require(completions.first?.attributes["gen_ai.prompt"]?.stringValue)
        #expect(try JSONValue.parse(classifierPrompt)["tools"]?.arrayValue?.first?["name"] == "select_agent")
    }

    @Test func clientsThatAskGetTraceSpanNotifications() async throws {
        let (file, notified) = try await Self.runTurn(clientTraces: true)
        #expect(notified.count == file.count)
        #expect(Set(notified.map(\.spanID)) == Set(file.map(\.spanID)))
        #expect(notified.map(\.name).last == "chat.turn", "the root ends last")
    }
}

/// A synchronous client conversation with a server process, run on its own
/// thread (it blocks on pipes), with every wait bounded. Used by one thread at
/// a time: the conversation's while it runs, the test's after it ended.
final class BinaryConversation: @unchecked Sendable {
    let process: TranscriptServerProcess
    private var nextID = 1
    /// Every notification received, in order.
    private(set) var notifications: [JSONValue] = []
    static let timeout = 10.0

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private init(process: TranscriptServerProcess) {
        self.process = process
    }

    /// Starts `executable arguments...`, runs `body`, then closes stdin and waits
    /// for a clean exit. `body` runs on a thread of its own, so it reports
    /// problems by throwing, not with `#expect`.
    static func run<T: Sendable>(
        executable: String, arguments: [String], _ body: @escaping @Sendable (BinaryConversation) throws -> T
    ) async throws -> (BinaryConversation, T) {
        let outcome: Result<(BinaryConversation, T), any Error> = await withCheckedContinuation { continuation in
            Thread {
                let process = TranscriptServerProcess(executable: executable, arguments: arguments, environment: ProcessInfo.processInfo.environment, framing: .newline)
                let conversation = BinaryConversation(process: process)
                do {
                    try process.start()
                    let value = try body(conversation)
                    process.closeStdin()
                    guard let (status, _) = process.waitForExit(until: Date(timeIntervalSinceNow: timeout)) else {
                        throw Failure(description: "the server did not exit")
                    }
                    if status != 0 { throw Failure(description: "the server exited with \(status): \(process.stderrTail(lines: 10).joined(separator: "\n"))") }
                    continuation.resume(returning: .success((conversation, value)))
                } catch {
                    process.stop()
                    continuation.resume(returning: .failure(error))
                }
            }.start()
        }
        return try outcome.get()
    }

    /// Sends a request and returns its answer; server requests in between are
    /// answered with `answer` (notifications are kept).
    func request(_ method: String, _ params: JSONValue, answer: (JSONValue) -> JSONValue = { _ in [:] }) throws -> JSONValue {
        let id = nextID
        nextID += 1
        let message: JSONValue = ["jsonrpc": "2.0", "id": .int(id), "method": .string(method), "params": params]
        let deadline = Date(timeIntervalSinceNow: Self.timeout)
        do {
            try process.write(message.serialized() + [0x0A], until: deadline)
        } catch {
            throw Failure(description: "cannot write \(method): \(error)")
        }
        while true {
            switch process.next(until: deadline) {
            case .inbound(.message(let m)):
                if m["method"] != nil, let serverID = m["id"] {
                    let reply: JSONValue = ["jsonrpc": "2.0", "id": serverID, "result": answer(m)]
                    try? process.write(reply.serialized() + [0x0A], until: deadline)
                } else if m["method"] != nil {
                    notifications.append(m)
                } else if m["id"] == .int(id) {
                    return m
                }
            case .inbound(.garbage(let text)):
                throw Failure(description: "the server wrote \(text)")
            case .closed:
                throw Failure(description: "the server closed stdout before answering \(method)")
            case .timedOut:
                throw Failure(description: "no answer to \(method) within \(Self.timeout) s")
            }
        }
    }
}
