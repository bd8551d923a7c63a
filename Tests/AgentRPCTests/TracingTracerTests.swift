import AgentRPCProtocol
import Foundation
import Synchronization
import Testing

@testable import AgentRPC

/// A clock the test moves by hand, so span times are exact.
final class ManualTraceClock: TraceClock {
    private let now: Mutex<UInt64>
    init(start: UInt64 = 1_700_000_000_000_000_000) { now = Mutex(start) }
    func nowUnixNanos() -> UInt64 { now.withLock { $0 } }
    func advance(by nanos: UInt64) { now.withLock { $0 += nanos } }
}

/// Counts how often a payload closure runs, to prove it is skipped.
private final class EvaluationCounter: Sendable {
    private let count = Mutex(0)
    func text(_ s: String) -> String {
        count.withLock { $0 += 1 }
        return s
    }
    var value: Int { count.withLock { $0 } }
}

@Suite struct TracingTracerTests {
    /// Drives the tracer the way the turn loop will: router, first agent (one
    /// completion, a handoff), second agent (completion, two tools, completion).
    @Test func turnWithHandoffAndTwoToolCallsFormsOneTree() throws {
        let clock = ManualTraceClock()
        let memory = InMemorySpanExporter()
        let tracer = Tracer(exporters: [memory], clock: clock)

        let turn = tracer.startTurnSpan(sessionID: "s-1", turnID: "t-1")
        clock.advance(by: 10)
        let router = tracer.startRouterSpan(parent: turn.context, routerKind: "llm")
        let routerCall = tracer.startCompletionSpan(provider: "scripted", model: "small", parent: router.context)
        clock.advance(by: 5)
        routerCall.recordUsage(Usage(inputTokens: 12, outputTokens: 3))
        routerCall.end()
        router.setAttribute(SpanAttributeKey.profile, "triage")
        router.end()

        let triage = tracer.startAgentSpan(profile: "triage", parent: turn.context)
        let triageCall = tracer.startCompletionSpan(provider: "scripted", model: "big", parent: triage.context)
        clock.advance(by: 100)
        triageCall.recordUsage(Usage(inputTokens: 50, outputTokens: 7, cachedInputTokens: 40))
        triageCall.end()
        triage.end()

        let billing = tracer.startAgentSpan(profile: "billing", parent: turn.context)
        let call1 = tracer.startCompletionSpan(provider: "scripted", model: "big", parent: billing.context)
        clock.advance(by: 100)
        call1.recordUsage(Usage(inputTokens: 80, outputTokens: 20))
        call1.end()
        let lookup = tracer.startToolSpan(name: "lookup_invoice", callID: "c1", parent: billing.context)
        let email = tracer.startToolSpan(name: "send_email", callID: "c2", parent: billing.context)
        clock.advance(by: 30)
        lookup.recordToolOutcome(.ok)
        lookup.end()
        email.recordToolOutcome(.failed)
        email.end()
        let call2 = tracer.startCompletionSpan(provider: "scripted", model: "big", parent: billing.context)
        clock.advance(by: 50)
        call2.recordUsage(Usage(inputTokens: 120, outputTokens: 9))
        call2.end()
        billing.end()
        turn.setAttribute(SpanAttributeKey.turnStatus, "completed")
        clock.advance(by: 1)
        turn.end()

        let spans = memory.spans
        #expect(spans.map(\.name) == [
            "llm.completion", "router.classify", "llm.completion", "agent.triage", "llm.completion",
            "tool.lookup_invoice", "tool.send_email", "llm.completion", "agent.billing", "chat.turn",
        ])
        let root = try #require(spans.last)
        #expect(root.parentSpanID == nil)
        #expect(Set(spans.map(\.context.traceID)) == [root.context.traceID])
        #expect(Set(spans.map(\.context.spanID)).count == spans.count)

        func parent(_ span: FinishedSpan) -> String? {
            spans.first { $0.context.spanID == span.parentSpanID }?.name
        }
        #expect(spans.map(parent) == [
            "router.classify", "chat.turn", "agent.triage", "chat.turn", "agent.billing",
            "agent.billing", "agent.billing", "agent.billing", "chat.turn", nil,
        ])

        #expect(spans.map(\.kind) == [.client, .internal, .client, .internal, .client, .client, .client, .client, .internal, .internal])
        #expect(root.attributes == ["session.id": "s-1", "turn.id": "t-1", "turn.status": "completed"])
        #expect(root.startTimeUnixNano == 1_700_000_000_000_000_000)
        #expect(root.endTimeUnixNano == 1_700_000_000_000_000_296)
        #expect(spans[0].attributes == [
            "gen_ai.system": "scripted", "gen_ai.request.model": "small",
            "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 3,
        ])
        #expect(spans[0].endTimeUnixNano - spans[0].startTimeUnixNano == 5)
        #expect(spans[1].attributes == ["agentrpc.router.kind": "llm", "agentrpc.profile": "triage"])
        #expect(spans[2].attributes["gen_ai.usage.cached_input_tokens"] == 40)
        #expect(spans[3].attributes == ["agentrpc.profile": "triage"])
        #expect(spans[5].attributes == ["tool.name": "lookup_invoice", "tool.call_id": "c1", "tool.outcome": "ok"])
        #expect(spans[5].status == .ok)
        #expect(spans[6].attributes["tool.outcome"] == "failed")
        #expect(spans[6].status == .error(message: "tool outcome: failed"))
        #expect(spans.filter { $0.status != .ok }.count == 1)
    }

    @Test func separateTurnsGetSeparateTraces() {
        let memory = InMemorySpanExporter()
        let tracer = Tracer(exporters: [memory])
        tracer.startTurnSpan(sessionID: "s", turnID: "t-1").end()
        tracer.startTurnSpan(sessionID: "s", turnID: "t-2").end()
        let ids = memory.spans.map(\.context.traceID)
        #expect(ids.count == 2)
        #expect(ids[0] != ids[1])
    }

    @Test func payloadsAreLeftOutByDefault() {
        let memory = InMemorySpanExporter()
        let tracer = Tracer(exporters: [memory])
        #expect(tracer.includesPayloads == false)
        let counter = EvaluationCounter()

        let span = tracer.startSpan(
            name: "tool.read", kind: .client,
            attributes: ["tool.name": "read", "tool.arguments": #"{"path":"/etc/passwd"}"#])
        span.setAttribute(SpanAttributeKey.toolOutput, "secret contents")
        span.setAttributes([SpanAttributeKey.prompt: "hello", SpanAttributeKey.toolCallID: "c9"])
        span.setPayload(SpanAttributeKey.completion, counter.text("model text"))
        span.end()

        #expect(memory.spans.first?.attributes == ["tool.name": "read", "tool.call_id": "c9"])
        #expect(counter.value == 0, "payload text must not even be computed")
        #expect(!tracer.admits(key: SpanAttributeKey.prompt))
        #expect(tracer.admits(key: SpanAttributeKey.toolName))
    }

    @Test func payloadsAreKeptWhenEnabled() {
        let memory = InMemorySpanExporter()
        let tracer = Tracer(exporters: [memory], includesPayloads: true)
        let counter = EvaluationCounter()

        let span = tracer.startSpan(name: "tool.read", kind: .client, attributes: ["tool.arguments": #"{"path":"a"}"#])
        span.setAttribute(SpanAttributeKey.toolOutput, "contents")
        span.setPayload(SpanAttributeKey.prompt, counter.text("hello"))
        span.end()

        #expect(memory.spans.first?.attributes == [
            "tool.arguments": #"{"path":"a"}"#, "tool.output": "contents", "gen_ai.prompt": "hello",
        ])
        #expect(counter.value == 1)
    }

    @Test func longPayloadsAreCutOnACharacterBoundary() {
        let memory = InMemorySpanExporter()
        let tracer = Tracer(exporters: [memory], includesPayloads: true, payloadByteLimit: 10)
        let span = tracer.startSpan(name: "x")
        // "é" is two UTF-8 bytes: 4 of them fill 8 bytes, a 5th would make 10, a 6th 12.
        span.setPayload(SpanAttributeKey.toolOutput, String(repeating: "é", count: 8))
        span.setPayload(SpanAttributeKey.prompt, "short")
        // The cap is for content only; metadata is never cut.
        span.setAttribute(SpanAttributeKey.toolName, .string(String(repeating: "n", count: 50)))
        span.end()

        let attributes = memory.spans.first?.attributes ?? [:]
        #expect(attributes["tool.output"] == .string("ééééé…[truncated 6 bytes]"))
        #expect(attributes["gen_ai.prompt"] == "short")
        #expect(attributes["tool.name"] == .string(String(repeating: "n", count: 50)))
    }

    @Test func endIsIdempotentAndFreezesTheSpan() {
        let clock = ManualTraceClock()
        let memory = InMemorySpanExporter()
        let tracer = Tracer(exporters: [memory], clock: clock)
        let span = tracer.startSpan(name: "agent.a", attributes: ["a": 1])
        clock.advance(by: 7)
        #expect(span.end())
        clock.advance(by: 7)
        span.setAttribute("b", 2)
        span.setAttributes(["c": 3])
        span.recordError("late")
        #expect(!span.end(status: .error("again")))
        #expect(span.isEnded)

        #expect(memory.spans.count == 1)
        let finished = memory.spans.first
        #expect(finished?.attributes == ["a": 1])
        #expect(finished?.status == .ok)
        #expect(finished?.endTimeUnixNano == 1_700_000_000_000_000_007)
    }

    @Test func statusComesFromRecordedErrorUnlessGivenExplicitly() {
        let memory = InMemorySpanExporter()
        let tracer = Tracer(exporters: [memory])
        let failed = tracer.startSpan(name: "failed")
        failed.recordError("provider returned 500")
        failed.recordError("second error")
        failed.end()
        let cancelled = tracer.startSpan(name: "cancelled")
        cancelled.end(status: .error("cancelled"))
        let overridden = tracer.startSpan(name: "recovered")
        overridden.recordError("first attempt failed")
        overridden.end(status: .ok)
        let plain = tracer.startSpan(name: "plain")
        plain.end()

        #expect(memory.spans.map(\.status) == [
            .error(message: "provider returned 500"), .error(message: "cancelled"), .ok, .ok,
        ])
    }

    @Test func endTimeNeverPrecedesStartTime() {
        // A clock that runs backwards (a test clock, a broken one) still yields a valid span.
        final class BackwardsClock: TraceClock {
            let next = Mutex<UInt64>(1000)
            func nowUnixNanos() -> UInt64 { next.withLock { n in defer { n -= 100 }; return n } }
        }
        let memory = InMemorySpanExporter()
        let tracer = Tracer(exporters: [memory], clock: BackwardsClock())
        tracer.startSpan(name: "x").end()
        #expect(memory.spans.first?.startTimeUnixNano == 1000)
        #expect(memory.spans.first?.endTimeUnixNano == 1000)
    }

    @Test func systemClockIsNearWallTimeAndMonotonic() {
        let clock = SystemTraceClock()
        let wall = UInt64(Date().timeIntervalSince1970 * 1_000_000_000)
        let a = clock.nowUnixNanos()
        let b = clock.nowUnixNanos()
        #expect(b >= a)
        // Within a minute of the wall clock: catches a seconds/nanoseconds mix-up.
        #expect(a > wall - 60_000_000_000 && a < wall + 60_000_000_000)
    }

    @Test func exportersCanBeAddedAndRemoved() {
        let first = InMemorySpanExporter()
        let second = InMemorySpanExporter()
        let tracer = Tracer()
        #expect(!tracer.hasExporters)
        tracer.startSpan(name: "unseen").end()
        let registration = tracer.addExporter(first)
        tracer.addExporter(second)
        #expect(tracer.hasExporters)
        tracer.startSpan(name: "both").end()
        tracer.removeExporter(registration)
        tracer.startSpan(name: "second only").end()

        #expect(first.spans.map(\.name) == ["both"])
        #expect(second.spans.map(\.name) == ["both", "second only"])
    }

    @Test func idsAreRandomNonZeroAndRoundTripThroughHex() throws {
        var traceIDs = Set<TraceID>()
        var spanIDs = Set<SpanID>()
        for _ in 0..<1000 {
            let t = TraceID.random()
            let s = SpanID.random()
            #expect(t.high != 0 || t.low != 0)
            #expect(s.value != 0)
            #expect(TraceID(hex: t.hex) == t)
            #expect(SpanID(hex: s.hex) == s)
            traceIDs.insert(t)
            spanIDs.insert(s)
        }
        #expect(traceIDs.count == 1000)
        #expect(spanIDs.count == 1000)
        #expect(TraceID(high: 1, low: 0xABC).hex == "0000000000000001" + "0000000000000abc")
        #expect(SpanID(hex: "00000000000000FF") == SpanID(255))
        #expect(SpanID(hex: "ff") == nil)
        #expect(SpanID(hex: "000000000000000g") == nil)
        #expect(TraceID(hex: String(repeating: "0", count: 31)) == nil)
    }

    /// Many tasks start, annotate and end spans at once, some of them on one
    /// shared span; every span must come out exactly once with its attributes.
    @Test func concurrentUseFromManyTasks() async throws {
        let memory = InMemorySpanExporter()
        let tracer = Tracer(exporters: [memory])
        let root = tracer.startTurnSpan(sessionID: "s", turnID: "t")
        let shared = tracer.startAgentSpan(profile: "shared", parent: root.context)
        let tasks = 16
        let perTask = 100

        await withTaskGroup(of: Void.self) { group in
            for t in 0..<tasks {
                group.addTask {
                    for i in 0..<perTask {
                        let span = tracer.startToolSpan(name: "t\(t)", callID: "\(t)-\(i)", parent: shared.context)
                        span.setAttribute("index", .int(i))
                        shared.setAttribute("seen.\(t).\(i)", true)
                        span.recordToolOutcome(.ok)
                        // Racing ends: exactly one of the two may export.
                        async let a = span.end()
                        async let b = span.end()
                        let (endedA, endedB) = await (a, b)
                        #expect(endedA != endedB)
                    }
                }
            }
        }
        shared.end()
        root.end()

        let spans = memory.spans
        #expect(spans.count == tasks * perTask + 2)
        #expect(Set(spans.map(\.context.spanID)).count == spans.count)
        let tools = spans.filter { $0.name.hasPrefix("tool.") }
        #expect(tools.allSatisfy { $0.parentSpanID == shared.context.spanID && $0.context.traceID == root.context.traceID })
        #expect(Set(tools.compactMap { $0.attributes["tool.call_id"] }).count == tasks * perTask)
        let sharedSpan = try #require(memory.span(named: "agent.shared"))
        #expect(sharedSpan.attributes.count == tasks * perTask + 1)
    }
}
