import AgentRPCProtocol
import Synchronization

/// A deterministic, offline provider for tests, demos and recorded transcripts
/// (docs/protocol.md §15). Each provider call consumes the next script item; keys of an
/// item combine in a fixed order: delay, reasoning, text, refusal, tool calls,
/// usage, then error or stall. When the script runs out it fails with a
/// `providerError` (code `badRequest`) instead of inventing text; but when the
/// item it ran out after was an error, that error is met again, so the engine's
/// automatic retries of a scripted `rateLimited` end in `rateLimited`.
final class ScriptedProvider: ModelProvider {
    let name = "scripted"
    let capabilities: ProviderCapabilities
    private let script: [ScriptItem]
    private let cursor = Mutex(0)

    init(script: [ScriptItem], capabilities: ProviderCapabilities = ProviderCapabilities()) {
        self.script = script
        self.capabilities = capabilities
    }

    /// Script items consumed so far.
    var consumed: Int { cursor.withLock { $0 } }

    /// Goes on from item `position` (a parked turn's session, loaded again).
    func seek(to position: Int) {
        cursor.withLock { $0 = max(0, position) }
    }

    func stream(_ request: ModelRequest) -> ProviderEventStream {
        let item: ScriptItem? = cursor.withLock { index in
            guard index < script.count else {
                // A retry of a final error item must show that error, not
                // "no script item left", which would hide what was scripted.
                if let last = script.last?.error { return ScriptItem(error: last) }
                return nil
            }
            defer { index += 1 }
            return script[index]
        }
        let callBase = cursor.withLock { $0 }
        let (stream, continuation) = ProviderEventStream.makeStream()
        guard let item else {
            // badRequest, not a transient code: asking again cannot help, so the
            // engine must not retry it (a transient code cost seconds of backoff).
            continuation.finish(throwing: ProviderError(
                code: .badRequest, safeDescription: "the scripted provider has no script item left for this request",
                unsafeMessage: "script exhausted after \(script.count) items"))
            return stream
        }
        if item.delayMs == nil && item.stall != true {
            // Synchronous fast path: everything is known now, so yield it all at once.
            Self.emit(item, callBase: callBase, into: continuation)
            return stream
        }
        let task = Task {
            if let delay = item.delayMs, delay > 0 {
                do { try await Task.sleep(for: .clampedMilliseconds(delay)) } catch {
                    continuation.finish(throwing: CancellationError())
                    return
                }
            }
            if item.stall == true {
                for chunk in item.reasoning ?? [] { continuation.yield(.reasoningDelta(chunk)) }
                for chunk in item.text ?? [] { continuation.yield(.textDelta(chunk)) }
                // Never finishes on its own: only cancellation (or a timeout) ends it.
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(3600))
                }
                continuation.finish(throwing: CancellationError())
                return
            }
            Self.emit(item, callBase: callBase, into: continuation)
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    static func stopReason(_ item: ScriptItem, hasCalls: Bool) -> ModelStopReason {
        switch item.stopReason {
        case .maxTokens?: return .maxTokens
        case .contentFilter?: return .contentFilter
        case .refusal?: return .refusal
        case .completed?, .finalAnswer?, nil:
            // As OpenAI reports it: a refusal with no other text ends as a refusal.
            if !(item.refusal ?? []).isEmpty && (item.text ?? []).isEmpty && !hasCalls { return .refusal }
            return hasCalls ? .toolUse : .endTurn
        }
    }

    private static func emit(_ item: ScriptItem, callBase: Int, into continuation: ProviderEventStream.Continuation) {
        // One batch: the consumer takes the whole item at once.
        var events: [ProviderEvent] = []
        events.reserveCapacity((item.reasoning?.count ?? 0) + (item.text?.count ?? 0) + (item.refusal?.count ?? 0) + (item.toolCalls?.count ?? 0) + 2)
        for chunk in item.reasoning ?? [] { events.append(.reasoningDelta(chunk)) }
        for chunk in item.text ?? [] { events.append(.textDelta(chunk)) }
        for chunk in item.refusal ?? [] { events.append(.refusalDelta(chunk)) }
        let calls = item.toolCalls ?? []
        for (i, call) in calls.enumerated() {
            let id = call.id ?? "call_\(callBase)_\(i + 1)"
            let arguments = call.argumentsText ?? (call.arguments ?? [:]).serializedString()
            events.append(.toolCall(ModelToolCall(id: id, name: call.name, argumentsJSON: arguments)))
        }
        if let u = item.usage {
            events.append(.usage(ModelUsage(
                inputTokens: u.inputTokens ?? 0, outputTokens: u.outputTokens ?? 0,
                cachedInputTokens: u.cachedInputTokens, reasoningTokens: u.reasoningTokens)))
        }
        if let e = item.error {
            let code = e.code
            continuation.yield(contentsOf: events)
            continuation.finish(throwing: ProviderError(
                code: code, httpStatus: e.httpStatus, retryAfterSeconds: e.afterSeconds,
                safeDescription: "the scripted provider reported \(code.rawValue)",
                unsafeMessage: e.message ?? ""))
            return
        }
        events.append(.end(stopReason(item, hasCalls: !calls.isEmpty)))
        continuation.yield(contentsOf: events)
        continuation.finish()
    }
}
