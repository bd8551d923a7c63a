import AgentRPCProtocol

/// Remembers what was sent last, per model, and says why a new request's cacheable
/// prefix differs from it (docs/protocol.md §11, "Prefix stability"): the engine turns a
/// non-nil answer into a `cacheInvalidated` event.
///
/// A request keeps the prefix when it goes to the same model as the last request,
/// with the same instructions and tools, and the previous messages are a prefix of
/// its own (the history only grew). Otherwise the reason is, by priority:
/// `modelChanged` (the last request, of any model, went to another model),
/// `instructionsChanged`, `toolsChanged` (order counts: providers cache tools in
/// order), `historyRewritten` (with the first entry whose message differs).
/// The first request of a session reports nothing: there is no cache to lose.
public struct PrefixTracker: Sendable {
    private struct Sent: Sendable {
        var instructions: String
        var tools: [ModelToolDefinition]
        var messages: [ModelMessage]
        var entryIDs: [String]
    }

    private var lastByModel: [String: Sent] = [:]
    private var lastModel: String?

    public init() {}

    /// Records a request and compares it with the previous one.
    ///
    /// `entryIDs` runs parallel to `messages`: the id of the transcript entry each
    /// message came from (`ModelHistory.messagesWithEntryIDs`). `firstChangedEntry` is
    /// the new request's entry at the first differing message, or, when the new history
    /// is a strict prefix of the old one (entries were removed at the end), the old
    /// request's entry at the first message that is gone. Nil for the other reasons
    /// and when `entryIDs` is shorter than `messages`.
    public mutating func observe(
        model: String, instructions: String, tools: [ModelToolDefinition], messages: [ModelMessage], entryIDs: [String]
    ) -> (reason: CacheInvalidationReason, firstChangedEntry: String?)? {
        let previousModel = lastModel
        let previous = lastByModel[model]
        lastModel = model
        lastByModel[model] = Sent(instructions: instructions, tools: tools, messages: messages, entryIDs: entryIDs)

        if let previousModel, previousModel != model { return (.modelChanged, nil) }
        guard let previous else { return nil }
        if previous.instructions != instructions { return (.instructionsChanged, nil) }
        if previous.tools != tools { return (.toolsChanged, nil) }
        let common = min(previous.messages.count, messages.count)
        if let index = (0..<common).first(where: { previous.messages[$0] != messages[$0] }) {
            return (.historyRewritten, index < entryIDs.count ? entryIDs[index] : nil)
        }
        if messages.count < previous.messages.count {
            return (.historyRewritten, common < previous.entryIDs.count ? previous.entryIDs[common] : nil)
        }
        return nil
    }

    /// Forgets everything (e.g. after a session is resumed into a fresh process).
    public mutating func reset() {
        lastByModel = [:]
        lastModel = nil
    }
}
