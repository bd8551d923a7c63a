import AgentRPCProtocol
import Synchronization

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
struct PrefixTracker: Sendable {
    /// The caller's promise about a request: its first `count` messages are the
    /// first `count` of `log`, which never change, and its entry ids are those
    /// of `log` too. Requests whose prefixes come from the same log are compared
    /// only after the shorter stable prefix, and the tracker keeps a reference to
    /// the log instead of a copy of the messages: a round trip at the end of a
    /// long turn then costs what it cost at its start.
    struct StablePrefix: Sendable {
        var log: MessageLog
        var count: Int

        init(log: MessageLog, count: Int) {
            self.log = log
            self.count = count
        }
    }

    /// A request as sent: the first `prefixCount` messages (and ids) are the
    /// log's, the rest are kept here.
    private struct Sent: Sendable {
        var instructions: String
        var tools: [ModelToolDefinition]
        var log: MessageLog?
        var prefixCount: Int
        var tail: [ModelMessage]
        var tailEntryIDs: [String]
        var count: Int

        init(instructions: String, tools: [ModelToolDefinition], messages: [ModelMessage], entryIDs: [String], stablePrefix: StablePrefix?) {
            self.instructions = instructions
            self.tools = tools
            log = stablePrefix?.log
            prefixCount = min(stablePrefix?.count ?? 0, messages.count)
            tail = Array(messages[prefixCount...])
            tailEntryIDs = entryIDs.count > prefixCount ? Array(entryIDs[prefixCount...]) : []
            count = messages.count
        }

        /// The messages and entry ids as sent (reads the log's prefix).
        var whole: (messages: [ModelMessage], entryIDs: [String]) {
            guard let log, prefixCount > 0 else { return (tail, tailEntryIDs) }
            let prefix = log.prefix(prefixCount)
            return (prefix.messages + tail, prefix.entryIDs + tailEntryIDs)
        }
    }

    private var lastByModel: [String: Sent] = [:]
    private var lastModel: String?

    init() {}

    /// Records a request and compares it with the previous one.
    ///
    /// `entryIDs` runs parallel to `messages`: the id of the transcript entry each
    /// message came from (`ModelHistory.messagesWithEntryIDs`). `firstChangedEntry` is
    /// the new request's entry at the first differing message, or, when the new history
    /// is a strict prefix of the old one (entries were removed at the end), the old
    /// request's entry at the first message that is gone. Nil for the other reasons
    /// and when `entryIDs` is shorter than `messages`.
    mutating func observe(
        model: String, instructions: String, tools: [ModelToolDefinition], messages: [ModelMessage], entryIDs: [String],
        stablePrefix: StablePrefix? = nil
    ) -> (reason: CacheInvalidationReason, firstChangedEntry: String?)? {
        let previousModel = lastModel
        let previous = lastByModel.removeValue(forKey: model)
        lastModel = model
        lastByModel[model] = Sent(instructions: instructions, tools: tools, messages: messages, entryIDs: entryIDs, stablePrefix: stablePrefix)

        if let previousModel, previousModel != model { return (.modelChanged, nil) }
        guard let previous else { return nil }
        if previous.instructions != instructions { return (.instructionsChanged, nil) }
        if previous.tools != tools { return (.toolsChanged, nil) }
        let common = min(previous.count, messages.count)
        if let log = previous.log, let now = stablePrefix, log === now.log, previous.prefixCount <= now.count {
            // The first `previous.prefixCount` messages are the same log's on both sides.
            let unchecked = min(previous.prefixCount, common)
            if let index = (unchecked..<common).first(where: { previous.tail[$0 - previous.prefixCount] != messages[$0] }) {
                return (.historyRewritten, index < entryIDs.count ? entryIDs[index] : nil)
            }
            if messages.count < previous.count {
                return (.historyRewritten, previous.tailEntryIDs.indices.contains(common - previous.prefixCount) ? previous.tailEntryIDs[common - previous.prefixCount] : nil)
            }
            return nil
        }
        let (sentMessages, sentEntryIDs) = previous.whole
        if let index = (0..<common).first(where: { sentMessages[$0] != messages[$0] }) {
            return (.historyRewritten, index < entryIDs.count ? entryIDs[index] : nil)
        }
        if messages.count < previous.count {
            return (.historyRewritten, common < sentEntryIDs.count ? sentEntryIDs[common] : nil)
        }
        return nil
    }

    /// Forgets everything (e.g. after a session is resumed into a fresh process).
    mutating func reset() {
        lastByModel = [:]
        lastModel = nil
    }
}

/// Messages built for the requests of one run of appends to a transcript
/// (`Transcript.appendRunStamp`): the request builder extends them in place and
/// rebuilds only their end, while `PrefixTracker` holds a reference rather than
/// a copy (a copy would have to be made again at every round trip, because the
/// builder could no longer extend messages the tracker shares). Only a session's
/// actor uses one; the lock is what lets it be `Sendable`.
final class MessageLog: Sendable {
    struct Contents {
        var messages: [ModelMessage] = []
        var entryIDs: [String] = []
    }

    private let contents = Mutex(Contents())

    init() {}

    func update<R: Sendable>(_ body: (inout Contents) -> R) -> R {
        contents.withLock { body(&$0) }
    }

    func prefix(_ count: Int) -> (messages: [ModelMessage], entryIDs: [String]) {
        contents.withLock { c in
            (Array(c.messages.prefix(count)), Array(c.entryIDs.prefix(count)))
        }
    }
}
