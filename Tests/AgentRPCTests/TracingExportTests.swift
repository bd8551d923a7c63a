import AgentRPCProtocol
import Foundation
import Synchronization
import Testing

@testable import AgentRPC

private func temporaryTracePath() -> String {
    (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-trace-\(UUID().uuidString).jsonl")
}

/// The file's lines, each parsed; an unparseable line is recorded as an issue.
private func parsedLines(at path: String) throws -> [JSONValue] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    #expect(data.last == UInt8(ascii: "\n"), "the last line must be terminated")
    return data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast().compactMap { line in
        do {
            return try JSONValue.parse(line)
        } catch {
            Issue.record("line is not JSON: \(error): \(String(decoding: line, as: UTF8.self))")
            return nil
        }
    }
}

/// The single span inside one trace-file line.
private func onlySpan(_ line: JSONValue) -> JSONValue? {
    guard let spans = line["resourceSpans"]?.arrayValue?.first?["scopeSpans"]?.arrayValue?.first?["spans"]?.arrayValue,
        spans.count == 1
    else { return nil }
    return spans[0]
}

private func isLowercaseHex(_ s: String, length: Int) -> Bool {
    s.utf8.count == length && s.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
}

@Suite struct TracingExportTests {
    @Test func spanJSONFollowsTheOTLPEncoding() throws {
        let memory = InMemorySpanExporter()
        let clock = ManualTraceClock(start: 1_700_000_000_123_456_789)
        let tracer = Tracer(exporters: [memory], clock: clock)
        let root = tracer.startSpan(name: "chat.turn")
        let child = tracer.startSpan(
            name: "llm.completion", parent: root.context, kind: .client,
            attributes: ["s": "text", "i": .int(Int.max), "d": 0.5, "b": true, "neg": -3])
        clock.advance(by: 1_000)
        child.recordError("rate limited")
        child.end()
        root.end()

        let rootJSON = try #require(memory.spans.last).otlpJSON
        let childJSON = try #require(memory.spans.first).otlpJSON

        #expect(isLowercaseHex(childJSON["traceId"]?.stringValue ?? "", length: 32))
        #expect(isLowercaseHex(childJSON["spanId"]?.stringValue ?? "", length: 16))
        #expect(childJSON["parentSpanId"] == rootJSON["spanId"])
        #expect(childJSON["traceId"] == rootJSON["traceId"])
        #expect(rootJSON["parentSpanId"] == nil, "a root span has no parentSpanId member")
        #expect(childJSON["name"] == "llm.completion")
        #expect(childJSON["kind"] == .int(3))
        #expect(rootJSON["kind"] == .int(1))
        #expect(childJSON["startTimeUnixNano"] == "1700000000123456789")
        #expect(childJSON["endTimeUnixNano"] == "1700000000123457789")
        #expect(childJSON["status"] == ["code": 2, "message": "rate limited"])
        #expect(rootJSON["status"] == ["code": 1])
        // Sorted by key, each value under the member its kind calls for.
        #expect(childJSON["attributes"] == [
            ["key": "b", "value": ["boolValue": true]],
            ["key": "d", "value": ["doubleValue": 0.5]],
            ["key": "i", "value": ["intValue": "9223372036854775807"]],
            ["key": "neg", "value": ["intValue": "-3"]],
            ["key": "s", "value": ["stringValue": "text"]],
        ])
        #expect(Set(childJSON.objectValue?.keys.map { $0 } ?? []) == [
            "traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano", "attributes",
            "status",
        ])
    }

    @Test func nonFiniteDoublesUseTheProtobufSpellings() {
        #expect(OTLPJSON.anyValue(.double(.nan)) == ["doubleValue": "NaN"])
        #expect(OTLPJSON.anyValue(.double(.infinity)) == ["doubleValue": "Infinity"])
        #expect(OTLPJSON.anyValue(.double(-.infinity)) == ["doubleValue": "-Infinity"])
        #expect(OTLPJSON.anyValue(.double(2)) == ["doubleValue": .double(2)])
    }

    @Test func fileExporterWritesOneRequestPerLine() throws {
        let path = temporaryTracePath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try OTLPFileExporter(path: path, scopeVersion: "9.9.9")
        let tracer = Tracer(exporters: [file])
        let turn = tracer.startTurnSpan(sessionID: "s-1", turnID: "t-1")
        let agent = tracer.startAgentSpan(profile: "main", parent: turn.context)
        let tool = tracer.startToolSpan(name: "echo", callID: "c1", parent: agent.context)
        tool.setAttribute("text", "line\nbreak \"quoted\"")
        tool.end()
        agent.end()
        turn.end()
        tracer.close()

        let lines = try parsedLines(at: path)
        #expect(lines.count == 3)
        for line in lines {
            let resourceSpans = line["resourceSpans"]?.arrayValue ?? []
            #expect(resourceSpans.count == 1)
            #expect(resourceSpans.first?["resource"] == [
                "attributes": [["key": "service.name", "value": ["stringValue": "agentrpc"]]]
            ])
            let scopeSpans = resourceSpans.first?["scopeSpans"]?.arrayValue ?? []
            #expect(scopeSpans.count == 1)
            #expect(scopeSpans.first?["scope"] == ["name": "agentrpc", "version": "9.9.9"])
        }
        let spans = lines.compactMap(onlySpan)
        #expect(spans.map { $0["name"] } == ["tool.echo", "agent.main", "chat.turn"])
        #expect(spans.first?["attributes"]?.arrayValue?.contains(["key": "text", "value": ["stringValue": "line\nbreak \"quoted\""]]) == true)
        #expect(spans[0]["parentSpanId"] == spans[1]["spanId"])
        #expect(spans[1]["parentSpanId"] == spans[2]["spanId"])
    }

    @Test func fileExporterAppendsAndDropsAfterClose() throws {
        let path = temporaryTracePath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("{\"earlier\":true}\n".utf8).write(to: URL(fileURLWithPath: path))

        let file = try OTLPFileExporter(path: path)
        let tracer = Tracer(exporters: [file])
        tracer.startSpan(name: "kept").end()
        file.flush()
        #expect(try parsedLines(at: path).count == 2, "flush makes the line visible")
        file.close()
        file.close()
        tracer.startSpan(name: "late").end()

        let lines = try parsedLines(at: path)
        #expect(lines.first == ["earlier": true])
        #expect(lines.count == 2)
        #expect(lines.last.flatMap(onlySpan)?["name"] == "kept")
        #expect(file.droppedSpanCount == 1)
        #expect(file.writeError == nil)
    }

    @Test func fileExporterDropsWholeLinesWhenItsBufferIsFull() throws {
        let path = temporaryTracePath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        // Room for no line at all: every span is dropped, none half-written.
        let file = try OTLPFileExporter(path: path, maxBufferedBytes: 10)
        let tracer = Tracer(exporters: [file])
        for _ in 0..<3 { tracer.startSpan(name: "x").end() }
        file.close()
        #expect(file.droppedSpanCount == 3)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)).isEmpty)
    }

    @Test func fileExporterReportsAnUnopenablePath() {
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("no-such-dir-\(UUID().uuidString)/trace.jsonl")
        #expect(throws: TraceFileError.self) { try OTLPFileExporter(path: path) }
    }

    @Test func concurrentSpansEachGetAnIntactLine() async throws {
        let path = temporaryTracePath()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try OTLPFileExporter(path: path)
        let tracer = Tracer(exporters: [file], includesPayloads: true)
        let root = tracer.startTurnSpan(sessionID: "s", turnID: "t")
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<8 {
                group.addTask {
                    for i in 0..<200 {
                        let span = tracer.startToolSpan(name: "t\(t)", callID: "\(t)-\(i)", parent: root.context)
                        span.setPayload(SpanAttributeKey.toolOutput, String(repeating: "x", count: 500))
                        span.end()
                    }
                }
            }
        }
        root.end()
        tracer.close()

        let spans = try parsedLines(at: path).compactMap(onlySpan)
        #expect(spans.count == 8 * 200 + 1)
        #expect(Set(spans.compactMap { $0["spanId"]?.stringValue }).count == spans.count)
        #expect(spans.last?["name"] == "chat.turn")
        #expect(file.droppedSpanCount == 0)
    }

    @Test func clientExporterSendsTheSpanObject() throws {
        let received = Mutex<[JSONValue]>([])
        let tracer = Tracer(exporters: [ClientSpanExporter { span in received.withLock { $0.append(span) } }])
        let memory = InMemorySpanExporter()
        tracer.addExporter(memory)
        let span = tracer.startSpan(name: "router.classify", attributes: ["agentrpc.router.kind": "rules"])
        span.end()

        let sent = received.withLock { $0 }
        #expect(sent.count == 1)
        #expect(sent.first == memory.spans.first?.otlpJSON)
        #expect(sent.first?["name"] == "router.classify")
        // What the lead wraps it in: `{"span": <span>}` under `trace/span`.
        let params = TraceSpanParams(span: try #require(sent.first))
        #expect(params.span["spanId"] == .string(span.context.spanID.hex))
        #expect(TraceSpanNotification.name == "trace/span")
    }
}
