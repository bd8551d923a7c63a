import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The reasoning items of one Responses round trip, kept so they can be sent
/// back in later requests. With `store: false` OpenAI keeps nothing between
/// requests: a reasoning model only sees its earlier reasoning if the client
/// returns the items' `encrypted_content`.
///
/// The engine keeps a round trip's reasoning as one transcript entry whose
/// `signature` seals it; for this provider that signature is this value,
/// encoded as JSON under one marker key, so no other provider mistakes it for
/// its own seal (see the Anthropic request builder).
struct OpenAIResponsesReasoningCarrier: Sendable, Hashable {
    struct Item: Sendable, Hashable {
        /// The item id (`rs_…`). Kept for reference; not sent back, because with
        /// `store: false` the id names nothing on the server.
        var id: String
        /// The summary parts, in order.
        var summary: [String]
        var encryptedContent: String
    }

    var items: [Item]

    static let markerKey = "openaiResponsesReasoning"

    init(items: [Item]) {
        self.items = items
    }

    /// The transcript form: `{"openaiResponsesReasoning":[{"id","summary":[…],"encrypted_content"}]}`.
    var signature: String {
        let list: [JSONValue] = items.map { item in
            ["id": .string(item.id), "summary": .array(item.summary.map { .string($0) }),
             "encrypted_content": .string(item.encryptedContent)]
        }
        return JSONValue.object([Self.markerKey: .array(list)]).serializedString()
    }

    /// Reads a signature written by `signature`; nil for anything else (an
    /// Anthropic thinking signature, a damaged value).
    init?(signature: String) {
        // Cheap test first: Anthropic signatures are base64 and never start with `{`.
        guard signature.utf8.first == UInt8(ascii: "{"),
              let value = try? JSONValue.parse(signature),
              let list = value[Self.markerKey]?.arrayValue
        else { return nil }
        var items: [Item] = []
        for raw in list {
            guard let encrypted = raw["encrypted_content"]?.stringValue else { return nil }
            let summary = (raw["summary"]?.arrayValue ?? []).compactMap(\.stringValue)
            items.append(Item(id: raw["id"]?.stringValue ?? "", summary: summary, encryptedContent: encrypted))
        }
        self.items = items
    }

    /// True when `signature` is one of ours, whether or not it can be used.
    static func isCarrier(_ signature: String) -> Bool {
        OpenAIResponsesReasoningCarrier(signature: signature) != nil
    }
}

/// Decodes an OpenAI Responses API stream (`POST /v1/responses` with
/// `stream: true`): SSE events whose `data` is a JSON object with a `type`.
///
/// * `response.output_text.delta` → `.textDelta`, `response.refusal.delta` →
///   `.refusalDelta`, `response.reasoning_summary_text.delta` (and
///   `response.reasoning_text.delta`, raw reasoning from compatible servers) →
///   `.reasoningDelta`, as they arrive. Consecutive summary parts are separated
///   by a blank line.
/// * Function calls: `response.output_item.added` opens a call (its item `id`
///   and the `call_id` the tool result must name), `response.function_call_arguments.delta`
///   events (matched by `item_id`, else `output_index`) append argument
///   fragments, `…arguments.done` and `response.output_item.done` replace them
///   with the final text. Calls are emitted complete at the terminal event, with
///   `call_id` as their id.
/// * Reasoning items that carry `encrypted_content` (asked for with `include:
///   ["reasoning.encrypted_content"]`) are emitted as one `.reasoningSignature`
///   (`OpenAIResponsesReasoningCarrier`) at the terminal event.
/// * An item that reaches `response.output_item.done` without having streamed
///   its text (a server that sends whole items only) has its text emitted then;
///   a stream with no item events at all is read from the terminal event's
///   `response.output`, as a whole (non-streamed) Response object is.
/// * Terminal events: `response.completed` (stop `toolUse` with calls, `refusal`
///   when the only output was a refusal, else `endTurn`) and `response.incomplete`
///   (`incomplete_details.reason` `max_output_tokens` → `maxTokens`,
///   `content_filter` → `contentFilter`). Usage comes from the terminal
///   `response.usage`; a response without usage reports none.
/// * `response.failed` and `error` events throw a `ProviderError`, mapped like
///   HTTP errors by their `code`.
/// * Everything else (`response.created`, `…in_progress`, content part and
///   annotation events, hosted tool events, events added later) is ignored.
///
/// A stream that closes before a terminal event is `streamTruncated`. A call
/// whose arguments `response.incomplete` cut off (an item done with status
/// `incomplete`, never done, or not valid JSON) is dropped: no call is produced
/// from partial arguments, and the round trip ends `maxTokens` (the engine then
/// runs none of its calls, as for the other providers).
struct OpenAIResponsesStreamDecoder: ProviderStreamDecoder {
    struct PartialCall: Sendable {
        var itemId: String
        var outputIndex: Int?
        var callId = ""
        var name = ""
        var arguments = ""
        var finished = false
    }

    private var calls: [PartialCall] = []
    private var reasoningItems: [OpenAIResponsesReasoningCarrier.Item] = []
    /// Items whose text (or reasoning) already streamed as deltas.
    private var streamedItems: Set<String> = []
    /// The item `streamedItems` was last told of.
    private var lastStreamedItem: String?
    /// The reasoning part the last reasoning delta belonged to, for separators.
    private var lastReasoningPart: (item: String, index: Int)?
    private var sawText = false
    private var sawRefusal = false
    /// Any output item event seen; when none was, the terminal event's `output` is read instead.
    private var sawItemEvents = false
    private(set) var isComplete = false
    private let secrets: [String]
    private var stitcher = SurrogateStitcher()

    static let providerLabel = "OpenAI Responses"

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
        // Only an object is read directly: never empty data or `[DONE]`.
        if !isComplete, readsCommonEventsFromBytes, let text = Self.readTextDelta(event.data) {
            textDelta(text.delta, itemId: text.itemId, into: &events)
        } else {
            events += try decodeEvent(event.owned)
        }
        stitcher.process(&events, from: start)
    }

    private mutating func decodeEvent(_ event: SSEEvent) throws -> [ProviderEvent] {
        if isComplete { return [] }
        // Some proxies end Responses streams the Chat Completions way; the terminal event decides.
        if event.data.isEmpty || event.data == "[DONE]" { return [] }
        let payload = try DecoderJSON.parsePayload(event.data, provider: Self.providerLabel)
        let type = payload["type"]?.stringValue ?? event.event ?? ""
        switch type {
        case "response.output_text.delta":
            var events: [ProviderEvent] = []
            textDelta(payload["delta"]?.stringValue, itemId: payload["item_id"]?.stringValue, into: &events)
            return events
        case "response.refusal.delta":
            guard let delta = payload["delta"]?.stringValue, !delta.isEmpty else { return [] }
            markStreamed(payload)
            sawRefusal = true
            return [.refusalDelta(delta)]
        case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
            guard let delta = payload["delta"]?.stringValue, !delta.isEmpty else { return [] }
            markStreamed(payload)
            let part = payload["summary_index"]?.intValue ?? payload["content_index"]?.intValue ?? 0
            return reasoning(delta, item: payload["item_id"]?.stringValue ?? "", part: part)
        case "response.output_item.added":
            sawItemEvents = true
            if let item = payload["item"], item["type"]?.stringValue == "function_call" {
                let slot = callSlot(itemId: item["id"]?.stringValue ?? "", outputIndex: payload["output_index"]?.intValue)
                update(slot, with: item)
            }
            return []
        case "response.function_call_arguments.delta":
            sawItemEvents = true
            let slot = callSlot(itemId: payload["item_id"]?.stringValue ?? "", outputIndex: payload["output_index"]?.intValue)
            calls[slot].arguments += payload["delta"]?.stringValue ?? ""
            return []
        case "response.function_call_arguments.done":
            let slot = callSlot(itemId: payload["item_id"]?.stringValue ?? "", outputIndex: payload["output_index"]?.intValue)
            if let arguments = payload["arguments"]?.stringValue { calls[slot].arguments = arguments }
            if calls[slot].name.isEmpty, let name = payload["name"]?.stringValue { calls[slot].name = name }
            return []
        case "response.output_item.done":
            guard let item = payload["item"] else { return [] }
            return itemDone(item, outputIndex: payload["output_index"]?.intValue)
        case "response.completed", "response.incomplete":
            return try complete(response: payload["response"] ?? [:], incomplete: type == "response.incomplete")
        case "response.failed":
            throw Self.failure(payload["response"]?["error"], secrets: secrets)
        case "error":
            throw Self.mapError(payload, secrets: secrets)
        default:
            return []
        }
    }

    mutating func finish() throws -> [ProviderEvent] {
        stitcher.process(try finishStream())
    }

    private mutating func finishStream() throws -> [ProviderEvent] {
        if isComplete { return [] }
        throw ProviderError.truncated("no response.completed")
    }

    private mutating func textDelta(_ delta: String?, itemId: String?, into events: inout [ProviderEvent]) {
        guard let delta, !delta.isEmpty else { return }
        markStreamed(itemId: itemId)
        sawText = true
        events.append(.textDelta(delta))
    }

    /// A `response.output_text.delta` event's text and item id, as read from its bytes.
    struct TextDelta {
        var delta: String?
        var itemId: String?
    }

    /// The event nearly every event of a stream is (`{"type":"response.output_text.delta",
    /// "item_id":"msg_…","output_index":0,"content_index":0,"delta":"…"}`), read
    /// straight from its bytes; nil for anything else (another event type, a
    /// member of an unexpected type, invalid JSON), which the decoder then reads
    /// from the parsed value as before.
    static func readTextDelta(_ data: UnsafeBufferPointer<UInt8>) -> TextDelta? {
        StreamChunkReader.read(data) { r throws(StreamChunkReader.Unrecognised) -> TextDelta in
            var isDelta = ReadOnce<Bool>(), delta = ReadOnce<String>(), itemId = ReadOnce<String>()
            try r.enterObject()
            while let key = try r.nextKey() {
                switch key {
                case "type": try isDelta.set(try r.string(is: "response.output_text.delta"))
                case "delta": try delta.set(try r.stringOrNull())
                case "item_id": try itemId.set(try r.stringOrNull())
                default: try r.skip()
                }
            }
            guard isDelta.value == true else { throw StreamChunkReader.Unrecognised() }
            return TextDelta(delta: delta.value, itemId: itemId.value)
        }
    }

    // MARK: - Items

    private mutating func markStreamed(_ payload: JSONValue) {
        markStreamed(itemId: payload["item_id"]?.stringValue)
    }

    private mutating func markStreamed(itemId: String?) {
        sawItemEvents = true
        // A delta without an item id (a lax compatible server) marks every item as
        // streamed, so no finished item repeats text already shown.
        let id = itemId ?? ""
        // Every delta of an item names it: the set is told once, not hashed per delta.
        guard id != lastStreamedItem else { return }
        lastStreamedItem = id
        streamedItems.insert(id)
    }

    private mutating func reasoning(_ delta: String, item: String, part: Int) -> [ProviderEvent] {
        var events: [ProviderEvent] = []
        if let last = lastReasoningPart, last.item != item || last.index != part {
            // Summary parts are separate paragraphs; run together they would read as one.
            events.append(.reasoningDelta("\n\n"))
        }
        lastReasoningPart = (item, part)
        events.append(.reasoningDelta(delta))
        return events
    }

    /// The call an event is about: by item id, else by output index, else a new one
    /// (a server that skipped `output_item.added`; the name must come later).
    private mutating func callSlot(itemId: String, outputIndex: Int?) -> Int {
        if !itemId.isEmpty, let i = calls.lastIndex(where: { $0.itemId == itemId }) { return i }
        if let outputIndex, let i = calls.lastIndex(where: { $0.outputIndex == outputIndex && (itemId.isEmpty || $0.itemId.isEmpty) }) {
            if calls[i].itemId.isEmpty { calls[i].itemId = itemId }
            return i
        }
        calls.append(PartialCall(itemId: itemId, outputIndex: outputIndex))
        return calls.count - 1
    }

    private mutating func update(_ slot: Int, with item: JSONValue) {
        if let callId = item["call_id"]?.stringValue, !callId.isEmpty { calls[slot].callId = callId }
        if let name = item["name"]?.stringValue, !name.isEmpty { calls[slot].name = name }
        // `added` carries "" (or nothing); `done` carries the whole, authoritative text.
        if let arguments = item["arguments"]?.stringValue, !arguments.isEmpty { calls[slot].arguments = arguments }
    }

    mutating func itemDone(_ item: JSONValue, outputIndex: Int?) -> [ProviderEvent] {
        sawItemEvents = true
        let id = item["id"]?.stringValue ?? ""
        let streamed = streamedItems.contains(id) || streamedItems.contains("")
        switch item["type"]?.stringValue {
        case "function_call"?:
            let slot = callSlot(itemId: id, outputIndex: outputIndex)
            update(slot, with: item)
            // An item cut by the token limit is done with status `incomplete`.
            calls[slot].finished = item["status"]?.stringValue != "incomplete"
            return []
        case "reasoning"?:
            let summary = (item["summary"]?.arrayValue ?? []).compactMap { $0["text"]?.stringValue }
            if let encrypted = item["encrypted_content"]?.stringValue, !encrypted.isEmpty {
                reasoningItems.append(.init(id: id, summary: summary, encryptedContent: encrypted))
            }
            guard !streamed else { return [] }
            var events: [ProviderEvent] = []
            let parts = summary.isEmpty ? (item["content"]?.arrayValue ?? []).compactMap { $0["text"]?.stringValue } : summary
            for (n, text) in parts.enumerated() where !text.isEmpty {
                events += reasoning(text, item: id, part: n)
            }
            return events
        case "message"?:
            guard !streamed else { return [] }
            var events: [ProviderEvent] = []
            for part in item["content"]?.arrayValue ?? [] {
                switch part["type"]?.stringValue {
                case "output_text"?:
                    if let text = part["text"]?.stringValue, !text.isEmpty {
                        sawText = true
                        events.append(.textDelta(text))
                    }
                case "refusal"?:
                    if let text = part["refusal"]?.stringValue, !text.isEmpty {
                        sawRefusal = true
                        events.append(.refusalDelta(text))
                    }
                default:
                    break
                }
            }
            return events
        default:
            // Hosted tools (web search, file search…) run at OpenAI; nothing for us to do.
            return []
        }
    }

    // MARK: - The end

    mutating func complete(response: JSONValue, incomplete: Bool) throws -> [ProviderEvent] {
        isComplete = true
        let reason = response["incomplete_details"]?["reason"]?.stringValue
        let isIncomplete = incomplete || response["status"]?.stringValue == "incomplete"
        var events: [ProviderEvent] = []
        if !sawItemEvents {
            // Nothing streamed (a whole Response object, or a server that only sends
            // the terminal event): its `output` is the reply.
            for (n, item) in (response["output"]?.arrayValue ?? []).enumerated() { events += itemDone(item, outputIndex: n) }
        }
        for (n, call) in calls.enumerated() {
            guard !call.name.isEmpty else {
                throw ProviderContractViolation("\(Self.providerLabel) stream: function call \(call.itemId.isEmpty ? "#\(n)" : call.itemId) has no name")
            }
            let id = !call.callId.isEmpty ? call.callId : (!call.itemId.isEmpty ? call.itemId : "call_\(n)")
            let trimmed = call.arguments.trimmingWhitespaceAndNewlines()
            let arguments = trimmed.isEmpty ? "{}" : call.arguments
            // A call the token limit cut off is dropped, as the other decoders drop
            // partial input: the round trip ends `maxTokens` and the engine runs none.
            if isIncomplete, !call.finished || (try? JSONValue.parse(arguments)) == nil { continue }
            events.append(.toolCall(ModelToolCall(id: id, name: call.name, argumentsJSON: arguments)))
        }
        if !reasoningItems.isEmpty {
            events.append(.reasoningSignature(OpenAIResponsesReasoningCarrier(items: reasoningItems).signature))
        }
        if let usage = response["usage"], usage.objectValue != nil { events.append(.usage(Self.usage(from: usage))) }
        events.append(.end(stopReason(incomplete: isIncomplete, reason: reason)))
        return events
    }

    private func stopReason(incomplete: Bool, reason: String?) -> ModelStopReason {
        if incomplete {
            switch reason {
            case "max_output_tokens"?: return .maxTokens
            case "content_filter"?: return .contentFilter
            case let other?: return .other(other)
            case nil: return .other("incomplete")
            }
        }
        if !calls.isEmpty { return .toolUse }
        return sawRefusal && !sawText ? .refusal : .endTurn
    }

    static func usage(from u: JSONValue) -> ModelUsage {
        ModelUsage(
            inputTokens: u["input_tokens"]?.intValue ?? 0,
            outputTokens: u["output_tokens"]?.intValue ?? 0,
            cachedInputTokens: u["input_tokens_details"]?["cached_tokens"]?.intValue,
            reasoningTokens: u["output_tokens_details"]?["reasoning_tokens"]?.intValue)
    }

    // MARK: - Errors

    /// `response.failed` carries `response.error` `{code, message}`.
    static func failure(_ error: JSONValue?, secrets: [String]) -> ProviderError {
        guard let error, error.objectValue != nil else {
            return ProviderError(code: .providerError, safeDescription: ProviderErrorMapper.safeDescription(.providerError, status: nil))
        }
        return mapError(["error": error], secrets: secrets)
    }

    /// Maps an error payload (`error` event, `response.error`) like an HTTP error
    /// body, refined by the Responses-specific codes the shared mapper does not know.
    static func mapError(_ payload: JSONValue, secrets: [String]) -> ProviderError {
        var mapped = ProviderErrorMapper.mapInStream(payload, secrets: secrets)
        let code = (payload["error"] ?? payload)["code"]?.stringValue
        if mapped.code == .providerError, let refined = code.flatMap(refinedCode) {
            mapped.code = refined
            mapped.safeDescription = ProviderErrorMapper.safeDescription(refined, status: nil)
        }
        return mapped
    }

    /// `ResponseError.code` values: the image and prompt codes are the request's
    /// fault; the policy codes are the content filter.
    static func refinedCode(_ code: String) -> ProviderErrorCode? {
        switch code {
        case "bio_policy", "image_content_policy_violation": return .contentFiltered
        case "invalid_prompt", "data_residency_mismatch": return .badRequest
        case "vector_store_timeout": return .serviceUnavailable
        // invalid_image, image_too_large, failed_to_download_image, …
        default: return code.containsScalars("image") ? .badRequest : nil
        }
    }

    // MARK: - Whole responses

    /// Decodes a non-streamed Response object (a server that ignored
    /// `stream: true`) into the events its stream would have produced.
    static func decodeResponse(_ body: [UInt8], secrets: [String] = []) throws -> [ProviderEvent] {
        let value: JSONValue
        do {
            value = try JSONValue.parse(body)
        } catch {
            throw ProviderContractViolation("\(providerLabel) response is not valid JSON (\(error.description))")
        }
        if let error = value["error"], !error.isNull {
            throw value["output"] == nil ? mapError(value, secrets: secrets) : failure(error, secrets: secrets)
        }
        if value["status"]?.stringValue == "failed" { throw failure(nil, secrets: secrets) }
        guard value["output"]?.arrayValue != nil else {
            throw ProviderContractViolation("\(providerLabel) response has no output")
        }
        var decoder = OpenAIResponsesStreamDecoder(secrets: secrets)
        return try decoder.complete(response: value, incomplete: false)
    }
}
