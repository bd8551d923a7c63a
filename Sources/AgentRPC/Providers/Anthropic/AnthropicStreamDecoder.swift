import AgentRPCProtocol
/// Decodes an Anthropic Messages stream.
///
/// * `text_delta` → `.textDelta`, `thinking_delta` → `.reasoningDelta`, as they arrive.
/// * `tool_use` blocks collect `input_json_delta` fragments; the call is emitted
///   complete at its `content_block_stop` (empty input → `{}`).
/// * A thinking block's signature (`signature_delta`s, or one given at its start)
///   is emitted as `.reasoningSignature` at the block's `content_block_stop`, so the
///   engine can send the thinking back. `redacted_thinking` blocks are dropped.
/// * Usage starts from `message_start.message.usage` and is overwritten field by
///   field by `message_delta.usage`; it is emitted once, just before `.end`.
/// * `ping`, unknown event names, unknown block and delta types (server tools,
///   compaction, fallback, citations…) are ignored.
///
/// Contract violations (`ProviderContractViolation`): a block index that is not
/// the next one (the `out-of-order-block-index` fixture: a block at index 1 with
/// no index 0), a delta or stop for a block that was never started, tool input
/// that is not valid JSON, and a `tool_use` block still open at `message_stop`.
/// When the stop reason is `max_tokens`, unparseable or unfinished tool input is
/// not a violation: the model was cut off. No call is produced from partial input,
/// and the round trip ends with `.maxTokens` (the engine then runs none of its
/// calls, as for OpenAI's `finish_reason: length`).
struct AnthropicStreamDecoder: ProviderStreamDecoder {
    enum BlockKind: Sendable, Equatable {
        case text, thinking, redactedThinking, ignored
        case toolUse(id: String, name: String)
    }

    struct Block: Sendable {
        var kind: BlockKind
        var json = ""
        /// A thinking block's signature, assembled from its `signature_delta`s.
        var signature = ""
        var stopped = false
    }

    private var blocks: [Block] = []
    private var stopReason: String?
    private var sawMessageDelta = false
    /// Anthropic's `input_tokens` leaves out the cache's reads and writes.
    private var usage = ModelUsage(cacheCountedApart: true)
    private var sawUsage = false
    /// Invalid tool input seen at a block stop; reported once the stop reason is
    /// known, since `max_tokens` changes what it means.
    private var pendingBadTool: (name: String, id: String, parseError: String)?
    private(set) var isComplete = false
    var unreportedUsage: ModelUsage? { isComplete || !sawUsage ? nil : usage }
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
        if !isComplete, readsCommonEventsFromBytes, let delta = Self.readTextDelta(event.data), blocks.indices.contains(delta.index) {
            Self.textEvents(kind: delta.kind, text: delta.text, into: &events)
        } else {
            events += try decodeEvent(event.owned)
        }
        stitcher.process(&events, from: start)
    }

    private mutating func decodeEvent(_ event: SSEEvent) throws -> [ProviderEvent] {
        if isComplete { return [] }
        let payload = try DecoderJSON.parsePayload(event.data, provider: "Anthropic")
        let type = payload["type"]?.stringValue ?? event.event ?? ""
        switch type {
        case "message_start":
            if let u = payload["message"]?["usage"], u.objectValue != nil { mergeUsage(u) }
            return []
        case "content_block_start":
            try startBlock(payload)
            return []
        case "content_block_delta":
            return try applyDelta(payload)
        case "content_block_stop":
            return try stopBlock(payload)
        case "message_delta":
            sawMessageDelta = true
            if let reason = payload["delta"]?["stop_reason"]?.stringValue { stopReason = reason }
            if let u = payload["usage"], u.objectValue != nil { mergeUsage(u) }
            try reportPendingBadTool()
            return []
        case "message_stop":
            return try complete()
        case "error":
            throw ProviderErrorMapper.mapInStream(payload, secrets: secrets)
        default:
            // `ping` and event types added after this was written.
            return []
        }
    }

    /// A stream whose `message_delta` gave the stop reason and then closed without
    /// `message_stop` is complete (as the official SDKs treat it); one that never
    /// said why it stopped is truncated.
    mutating func finish() throws -> [ProviderEvent] {
        stitcher.process(try finishStream())
    }

    private mutating func finishStream() throws -> [ProviderEvent] {
        if isComplete { return [] }
        try reportPendingBadTool()
        if stopReason != nil { return try complete() }
        throw ProviderError.truncated("no message_stop")
    }

    private mutating func startBlock(_ payload: JSONValue) throws {
        let index = payload["index"]?.intValue
        guard index == blocks.count else {
            throw ProviderContractViolation(
                "Anthropic stream: unexpected content block index \(index.map(String.init) ?? "missing") (expected \(blocks.count))")
        }
        let block = payload["content_block"]
        let kind: BlockKind
        switch block?["type"]?.stringValue {
        case "text"?: kind = .text
        case "thinking"?: kind = .thinking
        case "redacted_thinking"?: kind = .redactedThinking
        case "tool_use"?:
            let id = block?["id"]?.stringValue ?? ""
            let name = block?["name"]?.stringValue ?? ""
            guard !id.isEmpty, !name.isEmpty else {
                throw ProviderContractViolation("Anthropic stream: tool_use block \(blocks.count) has no id or name")
            }
            kind = .toolUse(id: id, name: name)
        default:
            // server_tool_use, *_tool_result, compaction, fallback…: not ours to run or show.
            kind = .ignored
        }
        var started = Block(kind: kind)
        if kind == .thinking { started.signature = block?["signature"]?.stringValue ?? "" }
        blocks.append(started)
    }

    private func blockIndex(_ payload: JSONValue, _ what: String) throws -> Int {
        guard let index = payload["index"]?.intValue, blocks.indices.contains(index) else {
            throw ProviderContractViolation(
                "Anthropic stream: \(what) for content block \(payload["index"].map { $0.description } ?? "missing") that was never started")
        }
        return index
    }

    private mutating func applyDelta(_ payload: JSONValue) throws -> [ProviderEvent] {
        let index = try blockIndex(payload, "content_block_delta")
        guard let delta = payload["delta"] else { return [] }
        switch delta["type"]?.stringValue {
        case "text_delta"?:
            var events: [ProviderEvent] = []
            Self.textEvents(kind: .text, text: delta["text"]?.stringValue, into: &events)
            return events
        case "thinking_delta"?:
            var events: [ProviderEvent] = []
            Self.textEvents(kind: .thinking, text: delta["thinking"]?.stringValue, into: &events)
            return events
        case "signature_delta"?:
            if blocks[index].kind == .thinking, let signature = delta["signature"]?.stringValue {
                blocks[index].signature += signature
            }
        case "input_json_delta"?:
            if case .toolUse = blocks[index].kind {
                blocks[index].json += delta["partial_json"]?.stringValue ?? ""
            }
        default:
            break
        }
        return []
    }

    /// What a `text_delta` or `thinking_delta` gives.
    private static func textEvents(kind: TextDelta.Kind, text: String?, into events: inout [ProviderEvent]) {
        guard let text, !text.isEmpty else { return }
        events.append(kind == .text ? .textDelta(text) : .reasoningDelta(text))
    }

    /// A `content_block_delta` of text or thinking, as read from its bytes.
    struct TextDelta {
        enum Kind { case text, thinking }
        var index: Int
        var kind: Kind
        var text: String?
    }

    /// The event nearly every event of a stream is (`{"type":"content_block_delta",
    /// "index":0,"delta":{"type":"text_delta","text":"…"}}`), read straight from its
    /// bytes; nil for anything else (another event or delta type, a member of an
    /// unexpected type, invalid JSON), which the decoder then reads from the
    /// parsed value as before. The caller checks the index names a started block.
    static func readTextDelta(_ data: UnsafeBufferPointer<UInt8>) -> TextDelta? {
        StreamChunkReader.read(data) { r throws(StreamChunkReader.Unrecognised) -> TextDelta in
            var isDelta = ReadOnce<Bool>(), index = ReadOnce<Int?>(), delta = ReadOnce<(TextDelta.Kind, String?)>()
            try r.enterObject()
            while let key = try r.nextKey() {
                switch key {
                case "type": try isDelta.set(try r.string(is: "content_block_delta"))
                case "index": try index.set(try r.intValue())
                case "delta": try delta.set(try readDelta(&r))
                default: try r.skip()
                }
            }
            guard isDelta.value == true, let index = index.value.flatMap({ $0 }), let (kind, text) = delta.value else {
                throw StreamChunkReader.Unrecognised()
            }
            return TextDelta(index: index, kind: kind, text: text)
        }
    }

    private static func readDelta(_ r: inout StreamChunkReader) throws(StreamChunkReader.Unrecognised) -> (TextDelta.Kind, String?) {
        // The type's position in ("text_delta", "thinking_delta"), nil for another.
        var type = ReadOnce<Int?>(), text = ReadOnce<String>(), thinking = ReadOnce<String>()
        try r.enterObject()
        while let key = try r.nextKey() {
            switch key {
            case "type": try type.set(try r.string(is: "text_delta", or: "thinking_delta"))
            case "text": try text.set(try r.stringOrNull())
            case "thinking": try thinking.set(try r.stringOrNull())
            default: try r.skip()
            }
        }
        switch type.value {
        case 0??: return (.text, text.value)
        case 1??: return (.thinking, thinking.value)
        default: throw StreamChunkReader.Unrecognised()
        }
    }

    private mutating func stopBlock(_ payload: JSONValue) throws -> [ProviderEvent] {
        let index = try blockIndex(payload, "content_block_stop")
        blocks[index].stopped = true
        if blocks[index].kind == .thinking {
            return blocks[index].signature.isEmpty ? [] : [.reasoningSignature(blocks[index].signature)]
        }
        guard case .toolUse(let id, let name) = blocks[index].kind else { return [] }
        let raw = blocks[index].json
        if raw.allSatisfy({ $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }) {
            return [.toolCall(ModelToolCall(id: id, name: name, argumentsJSON: "{}"))]
        }
        do {
            _ = try JSONValue.parse(raw)
        } catch {
            if pendingBadTool == nil { pendingBadTool = (name, id, error.description) }
            return []
        }
        return [.toolCall(ModelToolCall(id: id, name: name, argumentsJSON: raw))]
    }

    private func reportPendingBadTool() throws {
        guard let bad = pendingBadTool else { return }
        if Self.cutByTokenLimit(stopReason) { return }
        // Before message_delta the stop reason is unknown; wait for it.
        if !sawMessageDelta && !isComplete { return }
        throw ProviderContractViolation(
            "Anthropic stream: tool input for \(bad.name) (id \(bad.id)) is not valid JSON (\(bad.parseError))")
    }

    private mutating func complete() throws -> [ProviderEvent] {
        isComplete = true
        try reportPendingBadTool()
        for block in blocks where !block.stopped {
            if case .toolUse(let id, let name) = block.kind, !Self.cutByTokenLimit(stopReason) {
                throw ProviderContractViolation("Anthropic stream: tool_use block for \(name) (id \(id)) was never stopped")
            }
        }
        var events: [ProviderEvent] = []
        if sawUsage { events.append(.usage(usage)) }
        let hasToolCalls = blocks.contains { if case .toolUse = $0.kind { return true } else { return false } }
        events.append(.end(Self.mapStopReason(stopReason, hasToolCalls: hasToolCalls)))
        return events
    }

    private mutating func mergeUsage(_ u: JSONValue) {
        sawUsage = true
        if let v = u["input_tokens"]?.intValue { usage.inputTokens = v }
        if let v = u["output_tokens"]?.intValue { usage.outputTokens = v }
        if let v = u["cache_read_input_tokens"]?.intValue { usage.cachedInputTokens = v }
        if let v = u["cache_creation_input_tokens"]?.intValue { usage.cacheCreationInputTokens = v }
        if let v = u["output_tokens_details"]?["thinking_tokens"]?.intValue { usage.reasoningTokens = v }
    }

    static func cutByTokenLimit(_ reason: String?) -> Bool {
        reason == "max_tokens" || reason == "model_context_window_exceeded"
    }

    static func mapStopReason(_ reason: String?, hasToolCalls: Bool) -> ModelStopReason {
        switch reason {
        case "end_turn"?, "stop_sequence"?: return .endTurn
        case "tool_use"?: return .toolUse
        case "max_tokens"?, "model_context_window_exceeded"?: return .maxTokens
        case "refusal"?: return .refusal
        case nil: return hasToolCalls ? .toolUse : .endTurn
        case let other?: return .other(other)
        }
    }
}
