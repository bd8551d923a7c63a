import Foundation
import Testing
@testable import AgentRPCProtocol

/// Encodes `value` with sorted keys and compares it with `json`; decodes `json`
/// and compares it with `value`. Numbers compare numerically (Foundation writes
/// `1.0` as `1`).
private func checkCoding<T: Codable & Equatable>(
    _ value: T, json expected: JSONValue, sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let encoded = try JSONValue.parse(Array(try encoder.encode(value)))
    #expect(encoded.numericallyEquals(expected), "encoded \(encoded)\nexpected \(expected)", sourceLocation: sourceLocation)
    // A type that builds its wire form directly (`JSONValueRepresentable`) builds its `Codable` form.
    if let direct = value as? any JSONValueRepresentable {
        #expect(direct.json.numericallyEquals(encoded), "built directly \(direct.json)", sourceLocation: sourceLocation)
    }
    let decoded = try decode(T.self, expected)
    #expect(decoded == value, "decoded \(decoded)", sourceLocation: sourceLocation)
}

private func decode<T: Decodable>(_ type: T.Type, _ json: JSONValue) throws -> T {
    try JSONDecoder().decode(type, from: Data(json.serializedString().utf8))
}

private func decode<T: Decodable>(_ type: T.Type, text: String) throws -> T {
    try JSONDecoder().decode(type, from: Data(text.utf8))
}

@Suite struct WireTypesTests {
    // MARK: Lifecycle

    @Test func initializeRoundTrips() throws {
        try checkCoding(
            InitializeParams(
                protocolVersion: 1, clientInfo: ClientInfo(name: "cli", version: "0.1"),
                capabilities: ClientCapabilities(tools: true, confirmations: .request, traces: false)),
            json: [
                "protocolVersion": 1, "clientInfo": ["name": "cli", "version": "0.1"],
                "capabilities": ["tools": true, "confirmations": "request", "traces": false],
            ])
        try checkCoding(InitializeParams(protocolVersion: 1), json: ["protocolVersion": 1])
        try checkCoding(
            InitializeResult(
                serverInfo: ServerInfo(version: "1.0.0"),
                capabilities: ServerCapabilities(providers: ["openai", "anthropic", "scripted"], store: true, maxMessageBytes: 16_777_216)),
            json: [
                "protocolVersion": 1, "serverInfo": ["name": "agentrpc", "version": "1.0.0"],
                "capabilities": [
                    "providers": ["openai", "anthropic", "scripted"], "transcriptMutation": true, "profiles": true,
                    "router": true, "structuredOutput": true, "store": true, "traces": true, "maxMessageBytes": 16_777_216,
                ],
            ])
        try checkCoding(NullResult(), json: nil)
        #expect(throws: DecodingError.self) { try decode(InitializeParams.self, ["capabilities": ["confirmations": "maybe"]]) }
    }

    // MARK: Session methods

    @Test func sendParamsAndTurnInput() throws {
        try checkCoding(
            SessionSendParams(
                sessionId: "s1",
                input: TurnInput(text: "look", images: [.path("/tmp/a.png"), .url("https://x/y.jpg"), .data(base64: "AAAA", mimeType: "image/png")]),
                options: TurnOptions(temperature: 0.5, toolChoice: .tool("search"), toolCallingMode: .required, limits: Limits(maxToolCalls: 3), model: "small")),
            json: [
                "sessionId": "s1",
                "input": [
                    "text": "look",
                    "images": [["path": "/tmp/a.png"], ["url": "https://x/y.jpg"], ["data": "AAAA", "mimeType": "image/png"]],
                ],
                "options": [
                    "temperature": 0.5, "toolChoice": ["tool": "search"], "toolCallingMode": "required",
                    "limits": ["maxToolCalls": 3], "model": "small",
                ],
            ])
        // A bare string is `{text}`; it encodes back as the object form.
        let bare = try decode(SessionSendParams.self, ["sessionId": "s1", "input": "hello"])
        #expect(bare.input == TurnInput(text: "hello"))
        #expect(bare.input.json == ["text": "hello"])
        #expect(throws: DecodingError.self) { try decode(TurnInput.self, ["text": "x", "images": [["path": "a", "url": "b"]]]) }
        #expect(throws: DecodingError.self) { try decode(TurnInput.self, ["images": []]) }
    }

    @Test func turnResultAndGenerate() throws {
        try checkCoding(
            TurnResult(
                turnId: "t1", message: TurnMessage(entryId: "e4", text: "Done."), stopReason: .finalAnswer,
                finalAnswer: ["title": "Cranes"], usage: Usage(inputTokens: 10, outputTokens: 5, cachedInputTokens: 2),
                roundTrips: 2, toolCalls: 1, revision: 7),
            json: [
                "turnId": "t1", "message": ["entryId": "e4", "text": "Done."], "stopReason": "finalAnswer",
                "finalAnswer": ["title": "Cranes"], "usage": ["inputTokens": 10, "outputTokens": 5, "cachedInputTokens": 2],
                "roundTrips": 2, "toolCalls": 1, "revision": 7,
            ])
        try checkCoding(
            TurnResult(
                turnId: "t \"2\"", message: TurnMessage(entryId: "e9", text: "é\n"), usage: Usage(contextTokens: 4, costUSD: 0.25),
                roundTrips: 1, toolCalls: 0, revision: 3),
            json: [
                "turnId": "t \"2\"", "message": ["entryId": "e9", "text": "é\n"], "stopReason": "completed",
                "usage": ["contextTokens": 4, "costUSD": 0.25], "roundTrips": 1, "toolCalls": 0, "revision": 3,
            ])
        try checkCoding(
            SessionGenerateParams(sessionId: "s", input: "json please", schema: ["type": "object"], strict: true),
            json: ["sessionId": "s", "input": ["text": "json please"], "schema": ["type": "object"], "strict": true])
        try checkCoding(
            SessionGenerateResult(value: ["a": [1, 2]], turnId: "t", usage: Usage(inputTokens: 1, outputTokens: 2)),
            json: ["value": ["a": [1, 2]], "turnId": "t", "usage": ["inputTokens": 1, "outputTokens": 2]])
    }

    @Test func smallSessionMessages() throws {
        try checkCoding(SessionHandle(sessionId: "s", revision: 0, activeProfile: "brainstorm"), json: ["sessionId": "s", "revision": 0, "activeProfile": "brainstorm"])
        try checkCoding(SessionResumeParams(sessionId: "s", rollback: true), json: ["sessionId": "s", "rollback": true])
        try checkCoding(SessionForkParams(sessionId: "s", atEntryId: "e2"), json: ["sessionId": "s", "atEntryId": "e2"])
        try checkCoding(
            SessionResumeResult(
                sessionId: "s", revision: 4, activeProfile: "default",
                interruptedTurn: InterruptedTurn(turnId: "t", undo: [UndoRecordInfo(callId: "c", name: "rm", undo: ["path": "a"])], undoOutcome: .committed),
                warnings: [ContextDiagnostic(source: "journal", message: "m")]),
            json: [
                "sessionId": "s", "revision": 4, "activeProfile": "default",
                "interruptedTurn": ["turnId": "t", "undo": [["callId": "c", "name": "rm", "undo": ["path": "a"]]], "undoOutcome": "committed"],
                "warnings": [["source": "journal", "message": "m"]],
            ])
        try checkCoding(SessionCancelResult(wasRunning: true), json: ["wasRunning": true])
        try checkCoding(SessionConfirmParams(sessionId: "s", callId: "c1", decision: .deny, reason: "no"), json: ["sessionId": "s", "callId": "c1", "decision": "deny", "reason": "no"])
        try checkCoding(Empty(), json: [:])
        try checkCoding(
            SetPropertiesParams(sessionId: "s", set: ["mode": "planning", "summary": nil], remove: ["x"]),
            json: ["sessionId": "s", "set": ["mode": "planning", "summary": nil], "remove": ["x"]])
        try checkCoding(
            SessionListResult(data: [SessionSummary(sessionId: "s", title: "T", createdAt: "2025-01-01T00:00:00Z", revision: 3, entryCount: 4, isRunning: false, loaded: true)], nextCursor: "c"),
            json: [
                "data": [["sessionId": "s", "title": "T", "createdAt": "2025-01-01T00:00:00Z", "revision": 3, "entryCount": 4, "isRunning": false, "loaded": true, "locked": false]],
                "nextCursor": "c",
            ])
        try checkCoding(SessionListParams(), json: [:])
    }

    @Test func sessionState() throws {
        try checkCoding(
            SessionState(
                sessionId: "s", isRunning: true, turnId: "t2", currentText: "Hel",
                activeToolCalls: [ToolCallRecord(callId: "c1", name: "search", arguments: ["q": "x"])],
                pendingConfirmation: PendingConfirmation(callId: "c2", name: "rm", arguments: [:], reason: "destructive"),
                lastUsageReport: Usage(inputTokens: 3, outputTokens: 1),
                lastSchemaWarnings: [SchemaWarning(tool: "search", path: "/properties/q/format", message: "dropped")],
                lastContextDiagnostics: [ContextDiagnostic(source: "clock", message: "timed out")],
                activeProfile: "planning", properties: ["mode": "planning"], revision: 5, entryCount: 6,
                usageTotals: Usage(inputTokens: 30, outputTokens: 9)),
            json: [
                "sessionId": "s", "isRunning": true, "turnId": "t2", "currentText": "Hel",
                "activeToolCalls": [["callId": "c1", "name": "search", "arguments": ["q": "x"]]],
                "pendingConfirmation": ["callId": "c2", "name": "rm", "arguments": [:], "reason": "destructive"],
                "lastUsageReport": ["inputTokens": 3, "outputTokens": 1],
                "lastSchemaWarnings": [["tool": "search", "path": "/properties/q/format", "message": "dropped"]],
                "lastContextDiagnostics": [["source": "clock", "message": "timed out"]],
                "activeProfile": "planning", "properties": ["mode": "planning"], "revision": 5, "entryCount": 6,
                "usageTotals": ["inputTokens": 30, "outputTokens": 9],
            ])
    }

    // MARK: Transcript

    @Test func transcriptEntriesOfEveryType() throws {
        try checkCoding(
            TranscriptEntry(id: "e1", turnId: "t1", .prompt(text: "hi", images: [.url("u")])),
            json: ["id": "e1", "turnId": "t1", "type": "prompt", "text": "hi", "images": [["url": "u"]]])
        try checkCoding(
            TranscriptEntry(id: "e2", .response(text: "yo", profile: "brainstorm", incomplete: true)),
            json: ["id": "e2", "type": "response", "text": "yo", "profile": "brainstorm", "incomplete": true])
        try checkCoding(TranscriptEntry(id: "e3", .response(text: "ok", profile: nil, incomplete: false)), json: ["id": "e3", "type": "response", "text": "ok"])
        try checkCoding(
            TranscriptEntry(id: "e4", .response(text: "Once upon", profile: nil, incomplete: true, stopReason: .maxTokens)),
            json: ["id": "e4", "type": "response", "text": "Once upon", "incomplete": true, "stopReason": "maxTokens"])
        try checkCoding(TranscriptEntry(id: "e4", .reasoning(text: "hmm", profile: nil)), json: ["id": "e4", "type": "reasoning", "text": "hmm"])
        try checkCoding(
            TranscriptEntry(id: "e5", .reasoning(text: "hmm", profile: "p", signature: "sig")),
            json: ["id": "e5", "type": "reasoning", "text": "hmm", "profile": "p", "signature": "sig"])
        try checkCoding(
            TranscriptEntry(id: "e5", .toolCalls(calls: [ToolCallRecord(callId: "c1", name: "f", arguments: ["x": 1])], profile: "p", text: nil)),
            json: ["id": "e5", "type": "toolCalls", "calls": [["callId": "c1", "name": "f", "arguments": ["x": 1]]], "profile": "p"])
        try checkCoding(
            TranscriptEntry(id: "e6", .toolOutput(callId: "c1", name: "f", outcome: .conflict, content: "stale", profile: nil)),
            json: ["id": "e6", "type": "toolOutput", "callId": "c1", "name": "f", "outcome": "conflict", "content": "stale"])
        try checkCoding(
            TranscriptEntry(id: "e7", .toolOutput(callId: "c1", name: "f", outcome: .ok, content: nil, profile: nil)),
            json: ["id": "e7", "type": "toolOutput", "callId": "c1", "name": "f", "outcome": "ok", "content": nil])
        let entry = TranscriptEntry(id: "e8", .prompt(text: "x", images: nil))
        #expect(entry.json == ["id": "e8", "type": "prompt", "text": "x"])
        #expect(entry.type == .prompt)
    }

    /// `TranscriptEntry(json:)` (the journal's fast path) reads exactly what the
    /// Codable decoder reads, and refuses what it refuses.
    @Test func directEntryDecodingAgreesWithCodable() throws {
        let entries: [TranscriptEntry] = [
            TranscriptEntry(id: "e1", turnId: "t1", .prompt(text: "hi é 😀", images: [.url("u")])),
            TranscriptEntry(id: "e2", .prompt(text: "", images: nil)),
            TranscriptEntry(id: "e3", turnId: "t1", .response(text: "yo", profile: "brainstorm", incomplete: true, stopReason: .maxTokens)),
            TranscriptEntry(id: "e4", .response(text: "ok", profile: nil, incomplete: false)),
            TranscriptEntry(id: "e5", .reasoning(text: "hmm", profile: "p", signature: "sig")),
            TranscriptEntry(id: "e6", .reasoning(text: "hmm", profile: nil)),
            TranscriptEntry(id: "e7", .toolCalls(calls: [ToolCallRecord(callId: "c1", name: "f", arguments: ["x": 1]), ToolCallRecord(callId: "c2", name: "g", arguments: nil)], profile: "p", text: "calling")),
            TranscriptEntry(id: "e8", .toolCalls(calls: [], profile: nil, text: nil)),
            TranscriptEntry(id: "e9", .toolOutput(callId: "c1", name: "f", outcome: .conflict, content: ["a": [1, 2.5, "s"]], profile: "p", approvedArguments: ["x": 2])),
            TranscriptEntry(id: "e10", .toolOutput(callId: "c1", name: "f", outcome: .ok, content: nil, profile: nil)),
            TranscriptEntry(id: "e11", .toolOutput(
                callId: "c1", name: "f", outcome: .ok, content: "shot", profile: nil,
                media: [MediaReference(type: .image, mimeType: "image/png", sha256: Self.digest, size: 3), MediaReference(type: .audio, mimeType: "audio/wav", sha256: Self.digest, size: 0)])),
        ]
        for entry in entries {
            #expect(try TranscriptEntry(json: entry.json) == entry)
            #expect(try TranscriptEntry(json: entry.json) == entry.json.decode(as: TranscriptEntry.self))
        }
        // `null` stands for an absent optional member, unknown members are ignored.
        let withNulls: JSONValue = ["id": "e1", "turnId": nil, "type": "response", "text": "t", "profile": nil, "incomplete": nil, "stopReason": nil, "extra": 1]
        #expect(try TranscriptEntry(json: withNulls) == withNulls.decode(as: TranscriptEntry.self))
        let refused: [JSONValue] = [
            ["id": "e1", "type": "system", "text": "x"],
            ["type": "prompt", "text": "x"],
            ["id": "e1", "type": "prompt"],
            ["id": 1, "type": "prompt", "text": "x"],
            ["id": "e1", "type": "response", "text": "x", "incomplete": "yes"],
            ["id": "e1", "type": "response", "text": "x", "stopReason": "bored"],
            ["id": "e1", "type": "toolCalls", "calls": [["callId": "c"]]],
            ["id": "e1", "type": "toolOutput", "callId": "c", "name": "f", "outcome": "maybe", "content": 1],
            ["id": "e1", "type": "toolOutput", "callId": "c", "name": "f", "outcome": "ok"],
            // A media reference names a file: only a SHA-256 in hexadecimal may, and a size is never negative.
            ["id": "e1", "type": "toolOutput", "callId": "c", "name": "f", "outcome": "ok", "content": 1,
             "media": [["type": "image", "mimeType": "image/png", "sha256": "../../etc/passwd", "size": 1]]],
            ["id": "e1", "type": "toolOutput", "callId": "c", "name": "f", "outcome": "ok", "content": 1,
             "media": [["type": "image", "mimeType": "image/png", "sha256": .string(Self.digest), "size": -1]]],
            ["id": "e1", "type": "toolOutput", "callId": "c", "name": "f", "outcome": "ok", "content": 1,
             "media": [["type": "video", "mimeType": "video/mp4", "sha256": .string(Self.digest), "size": 1]]],
            ["id": "e1", "type": "toolOutput", "callId": "c", "name": "f", "outcome": "ok", "content": 1, "media": "all"],
            "e1",
        ]
        for value in refused {
            #expect(throws: (any Error).self) { try TranscriptEntry(json: value) }
            #expect(throws: (any Error).self) { try value.decode(as: TranscriptEntry.self) }
        }
        let usage = Usage(inputTokens: 1, outputTokens: 2, cachedInputTokens: 3, reasoningTokens: 4)
        #expect(try Usage(json: usage.json) == usage)
        #expect(try Usage(json: ["inputTokens": 5, "outputTokens": nil]) == Usage(inputTokens: 5))
        #expect(throws: (any Error).self) { try Usage(json: ["inputTokens": "5"]) }
        #expect(throws: (any Error).self) { try JSONValue.object(["inputTokens": "5"]).decode(as: Usage.self) }
    }

    static let digest = String(repeating: "0123456789abcdef", count: 4)

    /// A tool output's media: references on the entry (no data), the data on
    /// `toolCallFinished` in MCP's block form.
    @Test func mediaOnTheWire() throws {
        try checkCoding(
            TranscriptEntry(id: "e1", .toolOutput(
                callId: "c", name: "f", outcome: .ok, content: "x", profile: nil,
                media: [MediaReference(type: .image, mimeType: "image/png", sha256: Self.digest, size: 3)])),
            json: ["id": "e1", "type": "toolOutput", "callId": "c", "name": "f", "outcome": "ok", "content": "x",
                   "media": [["type": "image", "mimeType": "image/png", "sha256": .string(Self.digest), "size": 3]]])
        let finished = SessionEvent.toolCallFinished(
            callId: "c", name: "f", outcome: .ok, content: "x", media: [MediaContent(type: .image, mimeType: "image/png", data: "AAEC")])
        #expect(finished.json["media"] == [["type": "image", "mimeType": "image/png", "data": "AAEC"]])
        #expect(MediaContent(block: ["type": "image", "mimeType": "image/png", "data": "AAEC"]) == MediaContent(type: .image, mimeType: "image/png", data: "AAEC"))
        for notMedia: JSONValue in [["type": "text", "text": "x"], ["type": "image", "mimeType": "image/png"], ["type": "image", "data": "x"], "image", ["type": "video", "mimeType": "v", "data": "x"]] {
            #expect(MediaContent(block: notMedia) == nil)
        }
    }

    @Test func unknownEntryTypeFails() {
        #expect(throws: DecodingError.self) { try decode(TranscriptEntry.self, ["id": "e1", "type": "system", "text": "x"]) }
        #expect(throws: DecodingError.self) { try decode(TranscriptEntry.self, ["id": "e1", "type": "toolOutput", "callId": "c", "name": "f", "outcome": "maybe", "content": 1]) }
        #expect(throws: DecodingError.self) { try decode(TranscriptEntry.self, ["type": "prompt", "text": "x"]) }
    }

    @Test func transcriptOperationsDistinguishNullFromAbsent() throws {
        try checkCoding(TranscriptOperation.truncateAfter(id: nil), json: ["op": "truncateAfter", "id": nil])
        try checkCoding(TranscriptOperation.truncateAfter(id: "e2"), json: ["op": "truncateAfter", "id": "e2"])
        try checkCoding(TranscriptOperation.insert(after: nil, entries: []), json: ["op": "insert", "after": nil, "entries": []])
        try checkCoding(TranscriptOperation.remove(ids: ["a", "b"]), json: ["op": "remove", "ids": ["a", "b"]])
        let prompt = TranscriptEntry(id: "n1", .prompt(text: "p", images: nil))
        try checkCoding(
            TranscriptOperation.replace(id: "e1", entry: prompt),
            json: ["op": "replace", "id": "e1", "entry": ["id": "n1", "type": "prompt", "text": "p"]])
        try checkCoding(TranscriptOperation.set(entries: [prompt]), json: ["op": "set", "entries": [["id": "n1", "type": "prompt", "text": "p"]]])
        #expect(throws: DecodingError.self) { try decode(TranscriptOperation.self, ["op": "truncateAfter"]) }
        #expect(throws: DecodingError.self) { try decode(TranscriptOperation.self, ["op": "insert", "entries": []]) }
        #expect(throws: DecodingError.self) { try decode(TranscriptOperation.self, ["op": "shuffle"]) }
        try checkCoding(
            MutateTranscriptParams(sessionId: "s", expectedRevision: 4, operations: [.truncateAfter(id: nil)]),
            json: ["sessionId": "s", "expectedRevision": 4, "operations": [["op": "truncateAfter", "id": nil]]])
    }

    // MARK: Server → client

    @Test func serverRequests() throws {
        try checkCoding(
            ToolCallParams(sessionId: "s", turnId: "t", callId: "c", name: "write", arguments: ["path": "a"], revision: 3, idempotencyKey: "s/t/1/c"),
            json: ["sessionId": "s", "turnId": "t", "callId": "c", "name": "write", "arguments": ["path": "a"], "revision": 3, "idempotencyKey": "s/t/1/c"])
        try checkCoding(
            ToolCallResult(outcome: .ok, content: "written", undo: ["restore": "old"]),
            json: ["outcome": "ok", "content": "written", "undo": ["restore": "old"]])
        try checkCoding(
            ToolUndoParams(sessionId: "s", turnId: "t", callId: "c", name: "write", undo: ["restore": "old"]),
            json: ["sessionId": "s", "turnId": "t", "callId": "c", "name": "write", "undo": ["restore": "old"]])
        try checkCoding(
            ConfirmationRequestParams(sessionId: "s", turnId: "t", callId: "c", name: "rm", arguments: [:], reason: "guard"),
            json: ["sessionId": "s", "turnId": "t", "callId": "c", "name": "rm", "arguments": [:], "reason": "guard"])
        try checkCoding(ConfirmationRequestResult(decision: .approve), json: ["decision": "approve"])
        try checkCoding(
            HookCallParams(sessionId: "s", turnId: "t", hook: .onToolCall, profile: "p", payload: ["name": "rm"]),
            json: ["sessionId": "s", "turnId": "t", "hook": "onToolCall", "profile": "p", "payload": ["name": "rm"]])
        try checkCoding(
            HookCallResult(set: ["a": 1], veto: true, reason: "nope", history: [.remove(ids: ["e1"])]),
            json: ["set": ["a": 1], "veto": true, "reason": "nope", "history": [["op": "remove", "ids": ["e1"]]]])
        try checkCoding(
            ContextRefreshParams(sessionId: "s", turnId: "t", sources: ["clock"]),
            json: ["sessionId": "s", "turnId": "t", "sources": ["clock"]])
        try checkCoding(ContextRefreshResult(values: ["clock": "noon"]), json: ["values": ["clock": "noon"]])
        try checkCoding(CancelRequestParams(id: .int(7)), json: ["id": 7])
        try checkCoding(CancelRequestParams(id: .string("a")), json: ["id": "a"])
        try checkCoding(TraceSpanParams(span: ["name": "chat.turn"]), json: ["span": ["name": "chat.turn"]])
    }

    // MARK: Events

    @Test func sessionEventJSON() throws {
        let cases: [(SessionEvent, JSONValue)] = [
            (.textDelta("Hel"), ["type": "textDelta", "delta": "Hel"]),
            (.turnStarted(input: "hi"), ["type": "turnStarted", "input": ["text": "hi"]]),
            (.profileActivated(profile: "planning", previous: "brainstorm"), ["type": "profileActivated", "profile": "planning", "previous": "brainstorm"]),
            (.requestStarted(roundTrip: 1, profile: "p", provider: "scripted", model: "m"),
             ["type": "requestStarted", "roundTrip": 1, "profile": "p", "provider": "scripted", "model": "m"]),
            (.toolCallStarted(callId: "c", name: "f", arguments: ["x": 1]), ["type": "toolCallStarted", "callId": "c", "name": "f", "arguments": ["x": 1]]),
            (.confirmationResolved(callId: "c", decision: .deny, source: .timeout),
             ["type": "confirmationResolved", "callId": "c", "decision": "deny", "source": "timeout"]),
            (.toolCallFinished(callId: "c", name: "f", outcome: .denied, content: "declined"),
             ["type": "toolCallFinished", "callId": "c", "name": "f", "outcome": "denied", "content": "declined"]),
            (.entryAppended(TranscriptEntry(id: "e1", turnId: "t", .response(text: "x", profile: nil, incomplete: false))),
             ["type": "entryAppended", "entry": ["id": "e1", "turnId": "t", "type": "response", "text": "x"]]),
            (.propertiesChanged(set: ["mode": "planning"], removed: ["summary"]),
             ["type": "propertiesChanged", "set": ["mode": "planning"], "removed": ["summary"]]),
            (.hookFired(hook: .onResponse, profile: "p"), ["type": "hookFired", "hook": "onResponse", "profile": "p"]),
            (.usage(Usage(inputTokens: 5, outputTokens: 6, reasoningTokens: 2)),
             ["type": "usage", "inputTokens": 5, "outputTokens": 6, "reasoningTokens": 2]),
            (.schemaWarnings([SchemaWarning(tool: "f", path: "/x", message: "m")]),
             ["type": "schemaWarnings", "warnings": [["tool": "f", "path": "/x", "message": "m"]]]),
            (.contextDiagnostics([ContextDiagnostic(source: "s", message: "m")]),
             ["type": "contextDiagnostics", "diagnostics": [["source": "s", "message": "m"]]]),
            (.cacheInvalidated(reason: .toolsChanged, firstChangedEntry: nil), ["type": "cacheInvalidated", "reason": "toolsChanged"]),
            (.retrying(attempt: 1, afterSeconds: 0.5, error: RPCError(.providerError, "rate limited")),
             ["type": "retrying", "attempt": 1, "afterSeconds": 0.5,
              "error": ["code": -32050, "message": "rate limited", "data": ["kind": "providerError"]]]),
            (.turnEnded(status: .cancelled, undo: .rolledBack, error: RPCError(.cancelled, "cancelled", data: ["partialText": "Hel"])),
             ["type": "turnEnded", "status": "cancelled", "undo": "rolledBack",
              "error": ["code": -32800, "message": "cancelled", "data": ["kind": "cancelled", "partialText": "Hel"]]]),
            (.turnEnded(status: .completed, undo: .committed, error: nil), ["type": "turnEnded", "status": "completed", "undo": "committed"]),
            (.turnEnded(status: .completed, undo: .none, error: nil, stopReason: .maxTokens),
             ["type": "turnEnded", "status": "completed", "undo": "none", "stopReason": "maxTokens"]),
        ]
        for (event, expected) in cases {
            #expect(event.json == expected)
            #expect(expected["type"]?.stringValue == event.type)
            #expect(try decode(SessionEvent.self, expected) == event)
        }
        let params = SessionEventParams(sessionId: "s", turnId: "t", seq: 9, event: .reasoningDelta("r"))
        #expect(params.json == ["sessionId": "s", "turnId": "t", "seq": 9, "event": ["type": "reasoningDelta", "delta": "r"]])
        try checkCoding(params, json: params.json)
        #expect(throws: DecodingError.self) { try decode(SessionEvent.self, ["type": "mystery"]) }
    }

    // MARK: Errors

    @Test func errorObjectMirrorsRPCError() throws {
        let provider = ProviderErrorInfo(code: .rateLimited, httpStatus: 429, retryAfter: 2, safeDescription: "slow down", unsafeMessage: "429 Too Many")
        #expect(provider.retryGuidance == RetryGuidance(kind: .retryWithBackoff, afterSeconds: 2))
        #expect(provider.isRetryable && !provider.requiresUserAction)
        #expect(ProviderErrorCode.authExpired.retryGuidanceKind == .refreshAuthThenRetry)
        #expect(ProviderErrorCode.entitlementRequired.requiresUserAction)
        #expect(ProviderErrorCode.contentFiltered.retryGuidanceKind == .none)
        try checkCoding(
            provider,
            json: [
                "code": "rateLimited", "httpStatus": 429, "retryGuidance": ["kind": "retryWithBackoff", "afterSeconds": 2],
                "isRetryable": true, "requiresUserAction": false, "safeDescription": "slow down", "unsafeMessage": "429 Too Many",
            ])
        let error = RPCError(.maxToolCallsExceeded, "too many", data: ["limit": 3, "turnId": "t"])
        let object = ErrorObject(error)
        try checkCoding(object, json: error.json)
        #expect(object.rpcError == error)
        #expect(throws: DecodingError.self) { try decode(ErrorObject.self, ["code": 1, "message": "m", "data": [:]]) }
    }

    // MARK: SessionConfig

    static let threeModes = #"""
    {
      "model": {"provider": "scripted", "script": [
          {"text": ["Hel", "lo"], "usage": {"inputTokens": 10, "outputTokens": 2}},
          {"toolCalls": [{"name": "pass_baton", "arguments": {"summary": "cranes"}, "id": "call-1"}], "reasoning": ["think"]},
          {"error": {"code": "rateLimited", "afterSeconds": 1, "httpStatus": 429}, "delayMs": 50},
          {"stall": true, "text": ["never"]}
      ], "supportsImages": false, "contextWindowTokens": 128000},
      "role": {"persona": "You are a patient origami teacher.", "directives": ["Be brief.", "Ask before folding."]},
      "tools": [
        {"name": "generate_title", "description": "Names the model.", "inputSchema": {"type": "object", "properties": {"idea": {"type": "string"}}}},
        {"name": "save_plan", "annotations": {"destructive": true, "idempotent": false}, "confirmation": "always"},
        {"name": "submit_review", "final": true, "inputSchema": {"type": "object"}},
        {"name": "read_file", "annotations": {"readOnly": true}}
      ],
      "guards": [
        {"match": {"annotations": ["destructive"]}, "verdict": "confirm", "reason": "changes files"},
        {"match": {"name": "rm_*"}, "verdict": "deny"}
      ],
      "limits": {"maxToolCalls": 20, "maxRoundTrips": 10, "wallClockSeconds": 120.5, "toolTimeoutSeconds": 30, "confirmationTimeoutSeconds": 60},
      "toolChoice": "auto",
      "transcriptErrorPolicy": "keepCompleted",
      "egress": {"refuse": ["sk-[A-Za-z0-9]{20,}"], "redact": [{"pattern": "\\d{16}", "replacement": "[card]"}]},
      "contextSources": [{"name": "clock", "description": "Local time"}],
      "properties": {"mode": "brainstorm", "summary": null, "techniques": ["origami"]},
      "profiles": {
        "selector": "mode",
        "defaults": {
          "options": {"temperature": 0.7, "maxOutputTokens": 1024},
          "history": [{"rollingWindow": {"messages": 100, "evenPairs": true}}],
          "hooks": {"onResponse": [{"summarizeHistory": {"threshold": 40, "keepLast": 10, "model": "small", "into": "summary"}}]}
        },
        "cases": {
          "brainstorm": {
            "description": "Collects ideas.",
            "instructions": [
              "You brainstorm origami models.",
              {"block": "origamiExpert", "when": {"property": "techniques", "contains": "origami"}},
              {"text": "Summary: {{summary}}", "when": {"not": {"property": "summary", "equals": null}}}
            ],
            "tools": ["generate_title", {"handoff": "planning", "name": "pass_baton", "description": "Hand over to planning."},
                      {"consult": "reviewing", "name": "ask_reviewer"},
                      {"skills": [{"name": "crease", "description": "Crease patterns", "prompt": "Use valley folds."}]}],
            "model": "pcc",
            "options": {"temperature": 1, "reasoningLevel": "deep", "maxOutputTokens": 2048, "toolCallingMode": "allowed"},
            "history": [{"rollingWindow": {"entries": 10}}, {"dropCompletedToolCalls": true}],
            "hooks": {
              "onToolCall": [{"when": {"tool": "generate_title"}, "set": {"titled": true}}, {"client": true}],
              "onResponse": [{"when": {"all": [{"property": "titled", "exists": true}, {"any": [{"property": "mode", "equals": "brainstorm"}]}]},
                              "then": [{"remove": ["draft"]}]}]
            },
            "transcriptErrorPolicy": "preserve",
            "egress": {"refuse": ["password"]}
          },
          "planning": {
            "description": "Turns ideas into a folding plan.",
            "instructions": ["Plan the folds step by step."],
            "tools": ["save_plan", "read_file", {"handoff": "reviewing", "name": "to_review"}],
            "model": {"provider": "openai", "model": "gpt-4.1-mini", "baseURL": "http://localhost:11434/v1", "apiKeyEnv": "OPENAI_API_KEY",
                      "headers": {"X-Team": "folds"}, "timeoutSeconds": 30, "options": {"top_p": 0.9}},
            "options": {"toolChoice": {"tool": "save_plan"}},
            "history": [{"keepToolRecords": true}, {"redact": {"pattern": "secret", "replacement": "***"}}],
            "hooks": {"onActivate": [{"set": {"stage": "plan"}}], "onDeactivate": [{"remove": ["stage"]}]}
          },
          "reviewing": {
            "description": "Reviews the plan and submits a verdict.",
            "instructions": [{"block": "reviewChecklist"}],
            "tools": ["submit_review"],
            "options": {"toolCallingMode": "required"},
            "history": [{"ownTurnsOnly": true}]
          }
        }
      },
      "blocks": {
        "origamiExpert": {"instructions": ["You know every base fold."], "tools": ["read_file"], "blocks": ["safety"]},
        "safety": {"instructions": ["Never suggest cutting paper."]},
        "reviewChecklist": {"instructions": ["Check symmetry.", "Check fold count."], "blocks": ["safety"]}
      },
      "router": {"kind": "rules", "rules": [{"pattern": "^plan\\b", "profile": "planning"}, {"pattern": "review", "profile": "reviewing"}]},
      "store": true, "userId": "u-42", "title": "Paper cranes"
    }
    """#

    @Test func bigConfigDecodesAndValidates() throws {
        let config = try decode(SessionConfig.self, text: Self.threeModes)
        #expect(config.validate() == [])
        guard case .inline(let model) = config.model else {
            Issue.record("expected an inline model")
            return
        }
        #expect(model.provider == .scripted)
        #expect(model.script?.count == 4)
        #expect(model.script?[1].toolCalls?.first == ScriptToolCall(name: "pass_baton", arguments: ["summary": "cranes"], id: "call-1"))
        #expect(model.script?[2].error == ScriptError(code: .rateLimited, afterSeconds: 1, httpStatus: 429))
        #expect(model.script?[3].stall == true)
        #expect(config.limits?.effectiveWallClockSeconds == 120.5)
        #expect(config.properties?["summary"] == .null)
        let profiles = try #require(config.profiles)
        #expect(profiles.selector == "mode")
        #expect(Set(profiles.cases.keys) == ["brainstorm", "planning", "reviewing"])
        let brainstorm = try #require(profiles.cases["brainstorm"])
        #expect(brainstorm.instructions?[1] == .block("origamiExpert", when: .property(PropertyCondition(property: "techniques", contains: "origami"))))
        #expect(brainstorm.instructions?[2] == .text("Summary: {{summary}}", when: .not(.property(PropertyCondition(property: "summary", equals: .null)))))
        #expect(brainstorm.tools?[1] == .handoff(DelegationTool(profile: "planning", name: "pass_baton", description: "Hand over to planning.")))
        #expect(brainstorm.model == .named("pcc"))
        #expect(brainstorm.history == [.rollingWindow(RollingWindow(entries: 10)), .dropCompletedToolCalls])
        #expect(brainstorm.hooks?.onToolCall?[0] == HookAction(when: .tool("generate_title"), .set(["titled": true])))
        #expect(brainstorm.hooks?.onToolCall?[1] == HookAction(.client))
        #expect(profiles.cases["planning"]?.options?.toolChoice == .tool("save_plan"))
        #expect(profiles.defaults?.hooks?[.onResponse]?.first?.action
            == .summarizeHistory(SummarizeHistory(threshold: 40, keepLast: 10, model: "small", into: "summary")))
        #expect(config.router?.rules?.count == 2)

        // Round trip: what we encode decodes to the same config.
        let encoded = try JSONEncoder().encode(config)
        #expect(try JSONDecoder().decode(SessionConfig.self, from: encoded) == config)
    }

    @Test func configUnionsRejectBadShapes() {
        #expect(throws: DecodingError.self) { try decode(ToolChoice.self, "sometimes") }
        #expect(throws: DecodingError.self) { try decode(HistoryTransform.self, ["dropCompletedToolCalls": false]) }
        #expect(throws: DecodingError.self) { try decode(HistoryTransform.self, ["keepToolRecords": true, "ownTurnsOnly": true]) }
        #expect(throws: DecodingError.self) { try decode(HookAction.self, ["when": ["tool": "x"]]) }
        #expect(throws: DecodingError.self) { try decode(HookAction.self, ["set": [:], "remove": []]) }
        #expect(throws: DecodingError.self) { try decode(Condition.self, ["not": ["tool": "a"], "all": []]) }
        #expect(throws: DecodingError.self) { try decode(InstructionItem.self, ["text": "a", "block": "b"]) }
        #expect(throws: DecodingError.self) { try decode(ProfileTool.self, ["name": "x"]) }
        #expect(throws: DecodingError.self) { try decode(ModelReference.self, ["provider": "gemini"]) }
        #expect(throws: DecodingError.self) { try decode(SessionConfig.self, ["guards": [["match": [:], "verdict": "maybe"]]]) }
    }

    @Test func validateReportsSemanticProblems() throws {
        let config = try decode(SessionConfig.self, [
            "tools": [["name": "a"], ["name": "a"], ["name": ""]],
            "limits": ["maxToolCalls": 0, "wallClockSeconds": -1],
            "toolChoice": ["tool": "missing"],
            "guards": [["match": ["annotations": ["sparkly"]], "verdict": "deny"]],
            "egress": ["refuse": [""], "redact": [["pattern": "", "replacement": "x"]]],
            "profiles": [
                "selector": "mode",
                "cases": [
                    "one": [
                        "instructions": [["block": "nowhere"]],
                        "tools": [["handoff": "ghost", "name": "go"], ["consult": "one", "name": "self"], "undeclared"],
                        "history": [["rollingWindow": ["entries": 5, "tokens": 100]]],
                    ],
                ],
            ],
            "blocks": ["loop": ["blocks": ["loop"]], "dangling": ["blocks": ["void"]]],
            "router": ["kind": "rules", "rules": [["pattern": "", "profile": "ghost"]]],
        ])
        let paths = Set(config.validate().map(\.path))
        let expected: Set<String> = [
            "limits.maxToolCalls", "limits.wallClockSeconds", "tools[1].name", "tools[2].name", "guards[0].match.annotations[0]",
            "toolChoice", "egress.refuse[0]", "egress.redact[0].pattern", "profiles.cases.one.instructions[0].block",
            "profiles.cases.one.tools[0].handoff", "profiles.cases.one.tools[2]", "profiles.cases.one.history[0].rollingWindow",
            "blocks.loop", "blocks.dangling.blocks[0]", "router.rules[0].pattern", "router.rules[0].profile",
        ]
        #expect(paths == expected, "missing \(expected.subtracting(paths)), extra \(paths.subtracting(expected))")

        let required = SessionConfig(model: "m", toolChoice: .required)
        #expect(required.validate().map(\.path) == ["toolChoice"])
        let emptyCases = SessionConfig(profiles: Profiles(selector: "mode", cases: [:]))
        #expect(emptyCases.validate().map(\.path) == ["profiles.cases"])
        #expect(SessionConfig(model: "m").validate().isEmpty)
        #expect(SessionConfig(tools: [ToolSpec(name: "t")], toolChoice: .tool("t")).validate().isEmpty)
    }

    @Test func limitsDefaultsAndMerge() {
        let base = Limits(maxToolCalls: 5)
        #expect(base.effectiveMaxToolCalls == 5)
        #expect(base.effectiveMaxRoundTrips == 32)
        #expect(Limits().effectiveWallClockSeconds == 600)
        #expect(Limits().effectiveToolTimeoutSeconds == 300)
        #expect(Limits().effectiveConfirmationTimeoutSeconds == 600)
        #expect(base.merged(with: Limits(maxRoundTrips: 2)) == Limits(maxToolCalls: 5, maxRoundTrips: 2))
    }

    // MARK: Registry

    @Test func registryHasNoDuplicates() {
        #expect(MethodRegistry.duplicateNames() == [])
        #expect(MethodRegistry.requests.count == 31)
        #expect(MethodRegistry.notifications.count == 6)
        #expect(MethodRegistry.request(named: "session/send", direction: .clientToServer) == SessionSendRequest.self)
        #expect(MethodRegistry.request(named: "tool/call", direction: .clientToServer) == nil)
        #expect(MethodRegistry.notification(named: "session/cancel", direction: .clientToServer) == SessionCancelNotification.self)
    }
}

@Suite struct HandBuiltWireFormTests {
    @Test func toolCallParamsJSONEqualsItsCodableForm() throws {
        let params = ToolCallParams(
            sessionId: "s-1", turnId: "t-1", callId: "c1", name: "get", arguments: ["q": 1, "x": [true, nil]], revision: 7,
            idempotencyKey: ToolCallParams.idempotencyKey(sessionId: "s-1", turnId: "t-1", roundTrip: 2, callId: "c1"))
        #expect(params.json == (try JSONValue(encoding: params)))
        #expect(try params.json.decode(as: ToolCallParams.self) == params)
        #expect(params.idempotencyKey == "s-1/t-1/2/c1")
        // The parts are copied as bytes: empty, multi-byte, long and non-native
        // (a substring made a string, a string built by appends) parts alike.
        let long = String(repeating: "é🙂", count: 40)
        for (session, turn, roundTrip, call) in [
            ("", "", 0, ""), ("s-é", "t-🙂", -3, "call_ü"), (long, String(long.dropFirst(3)), Int.max, "c"),
            (String("xx-s-1-yy".dropFirst(3).dropLast(3)), "t" + String(repeating: "1", count: 30), Int.min, "c" + "\u{301}"),
        ] {
            #expect(ToolCallParams.idempotencyKey(sessionId: session, turnId: turn, roundTrip: roundTrip, callId: call)
                == "\(session)/\(turn)/\(roundTrip)/\(call)")
        }
        // Written directly, with and without a second send's members, it is `json`'s text.
        for sent in [params, ToolCallParams(
            sessionId: "s \"2\"", turnId: "t-2", callId: "c2", name: "put", arguments: "x", revision: 0, idempotencyKey: "k", attempt: 3, inDoubt: true)] {
            var bytes: [UInt8] = []
            sent.write(into: &bytes)
            #expect(bytes == sent.json.serialized(), "\(String(decoding: bytes, as: UTF8.self))")
        }
    }

    /// `ToolCallResult(json:)` reads what the Codable decoder reads, and fails
    /// with its words on what it rejects.
    @Test func toolCallResultReadDirectlyAgreesWithCodable() {
        let answers: [JSONValue] = [
            ["outcome": "ok", "content": "written"],
            ["outcome": "failed", "content": ["a": [1, 2.5, nil]], "undo": ["restore": "old"]],
            ["outcome": "denied", "content": nil, "undo": nil],
            ["outcome": "conflict", "content": "", "extra": true],
            ["content": "no outcome"],
            ["outcome": "ok"],
            ["outcome": "maybe", "content": "x"],
            ["outcome": 1, "content": "x"],
            ["undo": 3, "zeta": [1], "content": ["nested": ["outcome": "ok"]], "outcome": "denied", "alpha": nil, "é": "x"],
            ["outcome": "ok", "content": nil, "undo": false],
            ["Outcome": "ok", "content": "x"],
            "not an object",
            [],
        ]
        for answer in answers {
            let direct = Result { () throws(JSONDecodingFailure) in try ToolCallResult(json: answer) }
            let codable = Result { () throws(JSONDecodingFailure) in try answer.decode(as: ToolCallResult.self) }
            #expect(direct == codable, "\(answer)")
        }
    }
}

@Suite struct HumanInTheLoopWireTests {
    @Test func confirmDecisionsCarryEditedArgumentsAndRules() throws {
        try checkCoding(
            SessionConfirmParams(sessionId: "s", callId: "c", decision: .approveForSession, arguments: ["cmd": "ls"], rule: ApprovalScope(arguments: ["cmd": "l*"])),
            json: ["sessionId": "s", "callId": "c", "decision": "approveForSession", "arguments": ["cmd": "ls"], "rule": ["arguments": ["cmd": "l*"]]])
        try checkCoding(
            ConfirmationRequestResult(decision: .denyAndStop, reason: "no"), json: ["decision": "denyAndStop", "reason": "no"])
        // An unchanged `{}` answer: old clients see the same result as before.
        try checkCoding(SessionConfirmResult(), json: [:])
    }

    @Test func steeringQueueAndRewindParams() throws {
        try checkCoding(
            SessionSteerParams(sessionId: "s", input: "more", expectedTurnId: "t1"),
            json: ["sessionId": "s", "input": ["text": "more"], "expectedTurnId": "t1"])
        try checkCoding(SessionSendParams(sessionId: "s", input: "hi", queue: true), json: ["sessionId": "s", "input": ["text": "hi"], "queue": true])
        try checkCoding(SessionCancelResult(wasRunning: true), json: ["wasRunning": true])
        try checkCoding(SessionRewindParams(sessionId: "s", turnId: "t2", undo: true), json: ["sessionId": "s", "turnId": "t2", "undo": true])
        try checkCoding(
            RewindUndo(turnId: "t", callId: "c", name: "w", status: .failed, error: "gone"),
            json: ["turnId": "t", "callId": "c", "name": "w", "status": "failed", "error": "gone"])
    }

    @Test func newEventsAndEntryFieldsRoundTrip() throws {
        try checkCoding(
            SessionEvent.steeringApplied(entryId: "e4", input: "b too"),
            json: ["type": "steeringApplied", "entryId": "e4", "input": ["text": "b too"]])
        try checkCoding(
            SessionEvent.approvalRulesChanged(rules: [ApprovalRule(id: "r1", tool: "w", arguments: ["p": "src/*"])]),
            json: ["type": "approvalRulesChanged", "rules": [["id": "r1", "tool": "w", "arguments": ["p": "src/*"]]]])
        try checkCoding(
            TranscriptEntry(id: "e3", .toolOutput(callId: "c", name: "run", outcome: .ok, content: "ok", profile: nil, approvedArguments: ["cmd": "ls"])),
            json: ["id": "e3", "type": "toolOutput", "callId": "c", "name": "run", "outcome": "ok", "content": "ok", "approvedArguments": ["cmd": "ls"]])
        try checkCoding(ProfileTool.askUser, json: ["askUser": true])
        #expect(throws: DecodingError.self) { try decode(ProfileTool.self, ["askUser": false]) }
    }
}
