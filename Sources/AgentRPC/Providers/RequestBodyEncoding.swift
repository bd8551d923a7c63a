import AgentRPCProtocol
import Synchronization

/// The serialized inside of a request body's message array, as one provider
/// writes it message by message.
struct SerializedMessages: Sendable {
    /// The array's elements so far, compact with sorted keys, comma-separated.
    var bytes: [UInt8] = []
    /// Anthropic: the role of the last message, whose content array is still
    /// open (`{"content":[…` without `],"role":…}`), since the next message of
    /// the same role adds its blocks to it. Nil for the OpenAI APIs.
    var openRole: AnthropicRole?
}

/// Each provider instance's serialized messages of its previous request, so that
/// a round trip serializes only the messages that are new since then: building
/// and serializing the whole body made a long turn's round trips grow with the
/// history (Benchmarks/README.md, figure 10).
///
/// The messages are written in order into one buffer, and where each message's
/// bytes end is kept (with the Anthropic role left open there): a message's
/// bytes depend only on it and on what came before, so the buffer up to the
/// end of the longest prefix of unchanged messages is reused as it is, and only
/// the messages after it are converted and appended. What depends on what comes
/// after (the close of Anthropic's last merged message) and the rest of the
/// body (the system message, every other member) are written afresh for every
/// request. The bytes sent are those of `JSONValue.serialized()` of the whole
/// body (pinned by tests for every provider).
///
/// Reuse is decided by `==` on the messages, not by a hint from the engine, so a
/// history that was rewritten (egress redaction, a mutation, a rewind, a side
/// request's other messages through the same provider) reuses exactly the
/// messages that are still equal. Unchanged messages share their strings and
/// arrays with the previous request's, which `==` sees without reading them.
final class SerializedMessageCache: Sendable {
    private struct State {
        var messages: [ModelMessage] = []
        /// After each of `messages`: the length of `serialized.bytes` and the open role.
        var ends: [(count: Int, openRole: AnthropicRole?)] = []
        var serialized = SerializedMessages()
    }

    private let state = Mutex(State())
    /// The previous body's size: the next one is reserved at least that large.
    private let lastBodySize = Mutex<Int>(0)
    private let lastConverted = Mutex<Int>(0)
    /// How many messages the last `withSerialized` converted (the rest were reused).
    var lastConvertedCount: Int { lastConverted.withLock { $0 } }

    /// Calls `write` with the serialized `messages`, appending with `append` only
    /// those after the longest prefix equal to the previous call's messages.
    func withSerialized(
        _ messages: [ModelMessage], append: (ModelMessage, inout SerializedMessages) -> Void,
        _ write: (SerializedMessages) -> Void
    ) {
        state.withLock { s in
            let limit = min(s.messages.count, messages.count)
            var common = 0
            while common < limit, s.messages[common] == messages[common] { common += 1 }
            if common < s.messages.count {
                s.messages.removeSubrange(common...)
                s.ends.removeSubrange(common...)
                let end = s.ends.last ?? (0, nil)
                s.serialized.bytes.removeSubrange(end.count...)
                s.serialized.openRole = end.openRole
            }
            s.messages.reserveCapacity(messages.count)
            s.ends.reserveCapacity(messages.count)
            for message in messages[common...] {
                append(message, &s.serialized)
                s.messages.append(message)
                s.ends.append((s.serialized.bytes.count, s.serialized.openRole))
            }
            lastConverted.withLock { $0 = messages.count - common }
            write(s.serialized)
        }
    }

    /// `members` serialized exactly as `JSONValue.object(members).serialized()`
    /// does (compact, keys sorted the same way), except that the value of
    /// `spliced` is what `writeSpliced` appends.
    func serializeObject(_ members: [String: JSONValue], splicing spliced: String, _ writeSpliced: (inout [UInt8]) -> Void) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(max(lastBodySize.withLock { $0 }, 256))
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
        lastBodySize.withLock { $0 = out.count }
        return out
    }
}

extension SerializedMessages {
    /// Appends array elements that merge with nothing (the OpenAI APIs).
    mutating func append(elements: [JSONValue]) {
        for element in elements {
            if !bytes.isEmpty { bytes.append(UInt8(ascii: ",")) }
            element.serialize(into: &bytes)
        }
    }

    /// The whole array: `leading` (OpenAI chat's system message) first, then the
    /// elements, then the close of a message left open.
    func appendArray(leading: JSONValue? = nil, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        if let leading {
            leading.serialize(into: &out)
            if !bytes.isEmpty { out.append(UInt8(ascii: ",")) }
        }
        out.append(contentsOf: bytes)
        if let openRole { out.append(contentsOf: openRole.closingBytes) }
        out.append(UInt8(ascii: "]"))
    }
}
