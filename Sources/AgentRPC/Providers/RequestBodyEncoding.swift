import AgentRPCProtocol
import Synchronization

/// One message's share of a request body's message array, serialized.
struct SerializedMessage: Sendable {
    /// The message it was made from: a later request reuses `json` while its
    /// message at the same index is still equal to this one.
    var message: ModelMessage
    /// Anthropic: the role whose content the blocks join (consecutive messages of
    /// one role are merged). Nil for the OpenAI APIs, where nothing is merged.
    var role: AnthropicRole?
    /// The message's array elements (Anthropic: content blocks), comma-separated,
    /// compact with sorted keys; empty when the message adds none.
    var json: [UInt8]
}

/// Each provider instance's serialized messages of its previous request, so that
/// a round trip serializes only the messages that are new since then: building
/// and serializing the whole body made a long turn's round trips grow with the
/// history (Benchmarks/README.md, figure 10).
///
/// Only what a message alone decides is kept: its elements. Everything that
/// depends on neighbours or position (the system message, Anthropic's merging of
/// consecutive same-role messages into one, the separators) is written afresh
/// for every request from these pieces, and the other members of the body are
/// built and serialized as before. The bytes sent are those of
/// `JSONValue.serialized()` of the whole body (pinned by tests for every provider).
///
/// Reuse is decided by `==` on the messages, not by a hint from the engine, so a
/// history that was rewritten (egress redaction, a mutation, a rewind, another
/// session's request through the same provider) reuses exactly the messages
/// that are still equal. Unchanged messages share their strings and arrays with
/// the previous request's, which `==` sees without reading the contents.
final class SerializedMessageCache: Sendable {
    private let previous = Mutex<[SerializedMessage]>([])
    /// The previous body's size: the next one is reserved at least that large.
    private let lastBodySize = Atomic<Int>(0)
    private let lastConverted = Atomic<Int>(0)
    /// How many messages the last `withSerialized` converted (the rest were reused).
    var lastConvertedCount: Int { lastConverted.load(ordering: .relaxed) }

    /// Calls `write` with the serialized form of every one of `messages`,
    /// converting only those after the longest prefix equal to the previous call's.
    func withSerialized(
        _ messages: [ModelMessage], convert: (ModelMessage) -> SerializedMessage, _ write: ([SerializedMessage]) -> Void
    ) {
        previous.withLock { kept in
            let limit = min(kept.count, messages.count)
            var common = 0
            while common < limit, kept[common].message == messages[common] { common += 1 }
            kept.removeSubrange(common...)
            kept.reserveCapacity(messages.count)
            for message in messages[common...] { kept.append(convert(message)) }
            lastConverted.store(messages.count - common, ordering: .relaxed)
            write(kept)
        }
    }

    /// `members` serialized exactly as `JSONValue.object(members).serialized()`
    /// does (compact, keys sorted the same way), except that the value of
    /// `spliced` is what `writeSpliced` appends.
    func serializeObject(_ members: [String: JSONValue], splicing spliced: String, _ writeSpliced: (inout [UInt8]) -> Void) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(max(lastBodySize.load(ordering: .relaxed), 256))
        var allMembers = members
        allMembers[spliced] = .null  // only for its place in the order
        out.append(UInt8(ascii: "{"))
        var first = true
        for (key, value) in allMembers.sorted(by: { $0.key < $1.key }) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            JSONValue.string(key).serialize(into: &out)
            out.append(UInt8(ascii: ":"))
            if key == spliced { writeSpliced(&out) } else { value.serialize(into: &out) }
        }
        out.append(UInt8(ascii: "}"))
        lastBodySize.store(out.count, ordering: .relaxed)
        return out
    }
}

extension SerializedMessage {
    /// `elements` as the inside of a JSON array: compact, comma-separated.
    init(message: ModelMessage, role: AnthropicRole? = nil, elements: [JSONValue]) {
        var json: [UInt8] = []
        for (i, element) in elements.enumerated() {
            if i > 0 { json.append(UInt8(ascii: ",")) }
            element.serialize(into: &json)
        }
        self.init(message: message, role: role, json: json)
    }
}

/// Appends a JSON array of the messages' elements, in order, each message's
/// elements as they are (the OpenAI APIs, where a message merges with none).
/// `leading` (OpenAI chat's system message) goes first.
func appendElementArray(_ messages: [SerializedMessage], leading: JSONValue? = nil, into out: inout [UInt8]) {
    out.append(UInt8(ascii: "["))
    var first = true
    if let leading {
        leading.serialize(into: &out)
        first = false
    }
    for message in messages where !message.json.isEmpty {
        if !first { out.append(UInt8(ascii: ",")) }
        first = false
        out.append(contentsOf: message.json)
    }
    out.append(UInt8(ascii: "]"))
}
