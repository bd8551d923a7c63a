import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Decodes an OpenAI Chat Completions stream (`data:` chunks ending in
/// `data: [DONE]`), as sent by OpenAI and compatible servers (Ollama, llama.cpp,
/// vLLM, LM Studio, OpenRouter).
///
/// Text, reasoning and refusal deltas are emitted as they arrive. Tool calls are
/// emitted complete, from what was accumulated, when `[DONE]` arrives, followed by
/// the usage (if the server sent any) and `.end`.
///
/// Tool-call fragments are matched by `index`; when a server omits `index`, by
/// `id`; when both are missing, the fragment continues the latest call. A
/// fragment whose `index` matches a call with a *different* non-empty `id`
/// starts a new call (some compatible servers send every parallel call at index 0).
/// `id`, `type` and `name` are taken from the first fragment that carries them and
/// never concatenated, because llama.cpp repeats them in every chunk.
///
/// Stop reason: `stop`→endTurn, except that a `stop` after refusal text with no
/// content is `refusal` (OpenAI reports refusals only in the `refusal` field);
/// `tool_calls`/`function_call`→toolUse, `length`→maxTokens,
/// `content_filter`→contentFilter. No finish reason at all → toolUse if calls
/// were made, else endTurn.
struct OpenAIChatStreamDecoder: ProviderStreamDecoder {
    struct PartialCall: Sendable {
        var index: Int?
        var id = ""
        var name = ""
        var arguments = ""
    }

    private var calls: [PartialCall] = []
    private var finishReason: String?
    private var usage: ModelUsage?
    private var sawContent = false
    private var sawRefusal = false
    private(set) var isComplete = false
    var unreportedUsage: ModelUsage? { isComplete ? nil : usage }
    /// Scrubbed from in-stream error messages.
    private let secrets: [String]
    private var stitcher = SurrogateStitcher()

    /// Off only in tests, which decode every stream both ways and compare.
    private let readsCommonEventsFromBytes: Bool

    init(secrets: [String] = []) {
        self.init(secrets: secrets, readsCommonEventsFromBytes: true)
    }

    init(secrets: [String], readsCommonEventsFromBytes: Bool) {
        self.secrets = secrets
        self.readsCommonEventsFromBytes = readsCommonEventsFromBytes
    }

    mutating func decode(_ event: SSEEventBytes, into events: inout [ProviderEvent]) throws {
        let start = events.count
        // Only an object is read directly: never blank data or `[DONE]`.
        if !isComplete, readsCommonEventsFromBytes, let common = Self.readCommonChunk(event.data) {
            apply(common, into: &events)
        } else {
            events += try decodeEvent(event.owned)
        }
        stitcher.process(&events, from: start)
    }

    private mutating func decodeEvent(_ event: SSEEvent) throws -> [ProviderEvent] {
        if isComplete { return [] }
        // Per delta: a byte scan instead of Foundation's trimming, which costs
        // more than the rest of the chunk's handling.
        let data = event.data
        let utf8 = data.utf8
        guard let first = utf8.firstIndex(where: { !Self.isJSONSpace($0) }) else { return [] }
        if utf8[first] == UInt8(ascii: "[") {
            let trimmed = data.trimmingWhitespaceAndNewlines()
            if trimmed == "[DONE]" { return try complete() }
        }
        let chunk = try DecoderJSON.parsePayload(data, provider: "OpenAI")
        return try decode(chunk: chunk)
    }

    /// What the first choice of a chunk says, as the decoder reads it.
    struct ChoiceDelta {
        var content: String?
        var reasoningContent: String?
        var reasoning: String?
        var refusal: String?
        var finishReason: String?
    }

    /// The chunk nearly every event of a stream is (`{"id":…,"choices":[{"index":0,
    /// "delta":{"content":"…"},"finish_reason":null}]}`), read straight from its
    /// bytes; nil for anything else (an error, usage, tool-call fragments, more
    /// than one choice, a member of an unexpected type, invalid JSON), which
    /// `decode(chunk:)` then reads from the parsed value as before.
    static func readCommonChunk(_ data: UnsafeBufferPointer<UInt8>) -> ChoiceDelta? {
        // Read into one value in place: a choice copied out of each reading
        // function cost more than reading it.
        var choice = ChoiceDelta()
        let recognised = StreamChunkReader.read(data) { r throws(StreamChunkReader.Unrecognised) -> Bool in
            var sawChoice = false, sawChoices = false
            try r.enterObject()
            while let key = try r.nextKey() {
                switch key {
                case "choices":
                    try StreamChunkReader.firstTime(&sawChoices)
                    try r.enterArray()
                    while try r.nextElement() {
                        try StreamChunkReader.firstTime(&sawChoice)
                        try readChoice(&r, into: &choice)
                    }
                // Null is what the decoder ignores; anything else it acts on.
                case "error", "usage":
                    guard try r.skipNull() else { throw StreamChunkReader.Unrecognised() }
                default:
                    try r.skip()
                }
            }
            return true
        }
        return recognised == true ? choice : nil
    }

    /// The one choice of a common chunk: index 0, text members only.
    private static func readChoice(_ r: inout StreamChunkReader, into choice: inout ChoiceDelta) throws(StreamChunkReader.Unrecognised) {
        var index = ReadOnce<Int?>()
        var sawDelta = false, sawFinishReason = false
        try r.enterObject()
        while let key = try r.nextKey() {
            switch key {
            case "index": try index.set(try r.intValue())
            case "delta":
                try StreamChunkReader.firstTime(&sawDelta)
                try readDelta(&r, into: &choice)
            case "finish_reason":
                try StreamChunkReader.firstTime(&sawFinishReason)
                choice.finishReason = try r.stringOrNull()
            default: try r.skip()
            }
        }
        // The decoder reads the first choice whose index is 0 (a missing one counts as 0).
        guard (index.value.flatMap { $0 } ?? 0) == 0 else { throw StreamChunkReader.Unrecognised() }
    }

    /// A choice's `delta` object: its text members into `choice`.
    private static func readDelta(_ r: inout StreamChunkReader, into choice: inout ChoiceDelta) throws(StreamChunkReader.Unrecognised) {
        var sawContent = false, sawReasoningContent = false, sawReasoning = false, sawRefusal = false
        try r.enterObject()
        while let key = try r.nextKey() {
            switch key {
            case "content":
                try StreamChunkReader.firstTime(&sawContent)
                choice.content = try r.stringOrNull()
            case "reasoning_content":
                try StreamChunkReader.firstTime(&sawReasoningContent)
                choice.reasoningContent = try r.stringOrNull()
            case "reasoning":
                try StreamChunkReader.firstTime(&sawReasoning)
                choice.reasoning = try r.stringOrNull()
            case "refusal":
                try StreamChunkReader.firstTime(&sawRefusal)
                choice.refusal = try r.stringOrNull()
            case "tool_calls":
                guard try r.skipNull() else { throw StreamChunkReader.Unrecognised() }
            default: try r.skip()
            }
        }
    }

    /// The events and state of a choice's text members and finish reason.
    private mutating func apply(_ choice: ChoiceDelta, into events: inout [ProviderEvent]) {
        if let text = choice.content, !text.isEmpty {
            sawContent = true
            events.append(.textDelta(text))
        }
        if let text = choice.reasoningContent ?? choice.reasoning, !text.isEmpty {
            events.append(.reasoningDelta(text))
        }
        if let text = choice.refusal, !text.isEmpty {
            sawRefusal = true
            events.append(.refusalDelta(text))
        }
        if let reason = choice.finishReason { finishReason = reason }
    }

    /// A stream that gave its `finish_reason` and then closed without `[DONE]` is
    /// complete (as the official SDKs treat it); one that never said it finished is not.
    mutating func finish() throws -> [ProviderEvent] {
        stitcher.process(try finishStream())
    }

    private mutating func finishStream() throws -> [ProviderEvent] {
        if isComplete { return [] }
        if finishReason != nil { return try complete() }
        throw ProviderError.truncated("no [DONE]")
    }

    mutating func decode(chunk: JSONValue) throws -> [ProviderEvent] {
        if let error = chunk["error"], !error.isNull {
            throw ProviderErrorMapper.mapInStream(chunk, secrets: secrets)
        }
        if let u = chunk["usage"], u.objectValue != nil { usage = Self.usage(from: u) }
        // `n > 1` is not something we ask for; only the first choice is read.
        guard let choice = chunk["choices"]?.arrayValue?.first(where: { ($0["index"]?.intValue ?? 0) == 0 }) else {
            return []
        }
        let delta = choice["delta"]
        for fragment in delta?["tool_calls"]?.arrayValue ?? [] { accumulate(fragment) }
        var events: [ProviderEvent] = []
        apply(
            ChoiceDelta(
                content: delta?["content"]?.stringValue, reasoningContent: delta?["reasoning_content"]?.stringValue,
                reasoning: delta?["reasoning"]?.stringValue, refusal: delta?["refusal"]?.stringValue,
                finishReason: choice["finish_reason"]?.stringValue),
            into: &events)
        return events
    }

    static func isJSONSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 }

    private mutating func accumulate(_ fragment: JSONValue) {
        let index = fragment["index"]?.intValue
        let id = fragment["id"]?.stringValue ?? ""
        let function = fragment["function"]
        let name = function?["name"]?.stringValue ?? ""
        let arguments = Self.argumentsText(function?["arguments"])

        var slot: Int?
        if let index {
            slot = calls.lastIndex { $0.index == index }
            if let s = slot, !id.isEmpty, !calls[s].id.isEmpty, calls[s].id != id { slot = nil }
        } else if !id.isEmpty {
            slot = calls.lastIndex { $0.id == id }
        } else if !calls.isEmpty {
            slot = calls.count - 1
        }
        let position: Int
        if let slot {
            position = slot
        } else {
            calls.append(PartialCall(index: index))
            position = calls.count - 1
        }
        if calls[position].id.isEmpty { calls[position].id = id }
        if calls[position].name.isEmpty { calls[position].name = name }
        calls[position].arguments += arguments
    }

    /// Arguments are a string on the wire, but some servers send an object.
    static func argumentsText(_ value: JSONValue?) -> String {
        switch value {
        case .string(let s)?: return s
        case .object?, .array?: return value?.serializedString() ?? ""
        default: return ""
        }
    }

    private mutating func complete() throws -> [ProviderEvent] {
        isComplete = true
        var events: [ProviderEvent] = []
        for (n, call) in calls.enumerated() {
            guard !call.name.isEmpty else {
                throw ProviderContractViolation("OpenAI stream: tool call \(call.index.map(String.init) ?? "#\(n)") has no function name")
            }
            events.append(.toolCall(Self.finalized(call, position: n)))
        }
        if let usage { events.append(.usage(usage)) }
        events.append(.end(stopReason()))
        return events
    }

    static func finalized(_ call: PartialCall, position: Int) -> ModelToolCall {
        // Servers that omit ids still need a stable one to pair results with.
        let id = call.id.isEmpty ? "call_\(position)" : call.id
        let trimmed = call.arguments.trimmingWhitespaceAndNewlines()
        // A tool without parameters is often sent with no arguments at all.
        return ModelToolCall(id: id, name: call.name, argumentsJSON: trimmed.isEmpty ? "{}" : call.arguments)
    }

    private func stopReason() -> ModelStopReason {
        Self.mapFinishReason(finishReason, hasToolCalls: !calls.isEmpty, refusalOnly: sawRefusal && !sawContent)
    }

    static func mapFinishReason(_ reason: String?, hasToolCalls: Bool, refusalOnly: Bool) -> ModelStopReason {
        switch reason {
        case "stop"?, "end_turn"?: return refusalOnly ? .refusal : .endTurn
        case "tool_calls"?, "function_call"?: return .toolUse
        case "length"?: return .maxTokens
        case "content_filter"?: return .contentFilter
        case nil: return hasToolCalls ? .toolUse : (refusalOnly ? .refusal : .endTurn)
        case let other?: return .other(other)
        }
    }

    static func usage(from u: JSONValue) -> ModelUsage {
        ModelUsage(
            inputTokens: u["prompt_tokens"]?.intValue ?? 0,
            outputTokens: u["completion_tokens"]?.intValue ?? 0,
            cachedInputTokens: u["prompt_tokens_details"]?["cached_tokens"]?.intValue,
            reasoningTokens: u["completion_tokens_details"]?["reasoning_tokens"]?.intValue
        )
    }

    /// Decodes a non-streaming Chat Completions response (used when tools are
    /// not streamed, `streamTools: false`, or a server ignored `stream: true`)
    /// into the same events a stream would have produced.
    static func decodeResponse(_ body: [UInt8], secrets: [String] = []) throws -> [ProviderEvent] {
        let value: JSONValue
        do {
            value = try JSONValue.parse(body)
        } catch {
            throw ProviderContractViolation("OpenAI response is not valid JSON (\(error.description))")
        }
        if let error = value["error"], !error.isNull {
            throw ProviderErrorMapper.mapInStream(value, secrets: secrets)
        }
        guard let choice = value["choices"]?.arrayValue?.first, let message = choice["message"] else {
            throw ProviderContractViolation("OpenAI response has no choices[0].message")
        }
        var events: [ProviderEvent] = []
        let reasoning = message["reasoning_content"]?.stringValue ?? message["reasoning"]?.stringValue ?? ""
        if !reasoning.isEmpty { events.append(.reasoningDelta(reasoning)) }
        let content = message["content"]?.stringValue ?? ""
        if !content.isEmpty { events.append(.textDelta(content)) }
        let refusal = message["refusal"]?.stringValue ?? ""
        if !refusal.isEmpty { events.append(.refusalDelta(refusal)) }
        let rawCalls = message["tool_calls"]?.arrayValue ?? []
        for (n, raw) in rawCalls.enumerated() {
            let name = raw["function"]?["name"]?.stringValue ?? ""
            guard !name.isEmpty else { throw ProviderContractViolation("OpenAI response: tool call #\(n) has no function name") }
            let call = PartialCall(
                index: n, id: raw["id"]?.stringValue ?? "", name: name,
                arguments: argumentsText(raw["function"]?["arguments"]))
            events.append(.toolCall(finalized(call, position: n)))
        }
        if let u = value["usage"], u.objectValue != nil { events.append(.usage(usage(from: u))) }
        events.append(.end(mapFinishReason(
            choice["finish_reason"]?.stringValue, hasToolCalls: !rawCalls.isEmpty,
            refusalOnly: !refusal.isEmpty && content.isEmpty)))
        return events
    }
}
