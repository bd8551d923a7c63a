import AgentRPCProtocol

/// What a session derives once and keeps from turn to turn so that a round
/// trip does not redo it. None of it is journaled: a loaded session starts
/// without it and rebuilds it as its requests need it.
struct SessionCaches {
    /// Providers by model reference, each made once (a scripted one keeps its place).
    var providers = ProviderCache()
    /// Compiled tool input schemas by tool name (recompiled if a profile's schema differs).
    var inputValidators: [String: (schema: JSONValue, validator: JSONSchemaValidator)] = [:]
    /// The context sources' last good values, which the instructions carry;
    /// a failed refresh keeps them.
    var contextValues: [String: String] = [:]
    /// The transcript's messages, converted incrementally.
    var history = ModelHistoryCache()
    /// What was sent last per model (for `cacheInvalidated`), which the
    /// conversion's stable prefix lets skip comparing again.
    var prefix = PrefixTracker()
    /// What the last round trip's request held, for the next one's estimate.
    var contextMark: ContextMark?
    /// The profile resolved last and the properties it was resolved from (the
    /// config is the session's own and never changes): resolving is a pure
    /// function of the two, asked at every turn and round trip, and the
    /// properties rarely change between (`==` of an unchanged copy is quick).
    var resolvedProfile: (properties: [String: JSONValue], profile: ResolvedProfile)?

    /// A compiled validator for a tool's input schema, compiled once per schema.
    mutating func inputValidator(for tool: String, schema: JSONValue) throws -> JSONSchemaValidator {
        if let cached = inputValidators[tool], cached.schema == schema { return cached.validator }
        let validator = try JSONSchemaValidator(schema: schema)
        inputValidators[tool] = (schema, validator)
        return validator
    }
}

/// A session's transcript converted into provider messages, kept between
/// requests so that a round trip converts only the entries appended since the
/// previous one: rebuilding every message each round trip made the cost of a
/// round trip grow with the turn (Benchmarks/README.md, the 2,000-call turn).
///
/// The transcript stays the source of truth. The messages belong to one
/// `Transcript.appendRunStamp`; every rewrite of the entries (a client's
/// mutation, a rewind, a summary, a hook's edit, a failed turn's trim or
/// revert) takes a new stamp, and the next request converts the whole history
/// again. Within one stamp the entries only grow, and only the last group of
/// entries can still change (a `toolCalls` entry gains its outputs), so it is
/// converted again with the new entries (`ModelHistory.appendMessages`).
struct ModelHistoryCache {
    /// The messages of the transcript as `messages(for:)` last saw it.
    struct Conversion {
        var messages: [ModelMessage]
        /// Beside each message, the id of the entry it came from.
        var entryIDs: [String]
        /// The leading messages that stay the same for every later conversion
        /// with the same stamp (what `PrefixTracker` need not compare again).
        var stablePrefix: PrefixTracker.StablePrefix
    }

    private var stamp: Int?
    private var log = MessageLog()
    private var convertedEntries = 0
    /// How many messages the last conversion gave.
    private var convertedMessages = 0
    /// How many entries the last conversion converted (the rest it kept).
    private(set) var entriesConvertedLast = 0
    /// Where the last group began, and how many messages came before it.
    private var lastGroup = (entry: 0, messagesBefore: 0)
    /// Prompts with `{path}` images, oldest first: their files are read again for
    /// every request, as they were before this cache, so a changed file is sent
    /// as it is now.
    private var pathImagePrompts: [(entry: Int, message: Int)] = []

    /// `entries` and `appendRunStamp`: a transcript's (`Transcript`), passed
    /// apart because a whole transcript read from the session beside this
    /// cache would be copied (a retain and a release of each of its fields).
    /// `media`: where the tool outputs' images are read (`ModelHistory.appendMessages`).
    mutating func messages(for entries: [TranscriptEntry], appendRunStamp: Int, media: MediaStore? = nil) -> Conversion {
        if stamp != appendRunStamp || entries.count < convertedEntries {
            // A new log: the tracker may still hold the old one for what it sent.
            stamp = appendRunStamp
            log = MessageLog()
            lastGroup = (0, 0)
            pathImagePrompts.removeAll()
        } else {
            if entries.count > convertedEntries, !entries[convertedEntries].content.isToolOutput {
                // What was appended starts a new group, so the last one is closed:
                // only a tool output can join a group, and entries before it never
                // change within a stamp. Its messages stay; a tool round trip
                // converts its own two entries, not the previous exchange's again.
                lastGroup = (convertedEntries, convertedMessages)
            }
            pathImagePrompts.removeAll { $0.entry >= lastGroup.entry }
        }
        let reload = pathImagePrompts
        let start = lastGroup
        var group = lastGroup
        var newPathImagePrompts: [(entry: Int, message: Int)] = []
        let converted = log.update { contents in
            contents.messages.removeSubrange(start.messagesBefore...)
            contents.entryIDs.removeSubrange(start.messagesBefore...)
            for prompt in reload {
                guard case .prompt(let text, let images) = entries[prompt.entry].content else { continue }
                contents.messages[prompt.message] = .user(text: text, images: (images ?? []).compactMap(ImageLoading.load))
            }
            ModelHistory.appendMessages(of: entries, from: start.entry, to: &contents.messages, ids: &contents.entryIDs, media: media) { entry, messagesBefore in
                group = (entry, messagesBefore)
                if case .prompt(_, let images?) = entries[entry].content, images.contains(where: \.isPath) {
                    newPathImagePrompts.append((entry, messagesBefore))
                }
            }
            return (contents.messages, contents.entryIDs)
        }
        lastGroup = group
        pathImagePrompts += newPathImagePrompts
        entriesConvertedLast = entries.count - start.entry
        convertedEntries = entries.count
        convertedMessages = converted.0.count
        let stable = min(lastGroup.messagesBefore, pathImagePrompts.first?.message ?? .max)
        return Conversion(
            messages: converted.0, entryIDs: converted.1,
            stablePrefix: PrefixTracker.StablePrefix(log: log, count: stable))
    }
}

extension ImageAttachment {
    var isPath: Bool {
        if case .path = self { return true }
        return false
    }
}

extension TranscriptContent {
    /// A tool output: the one kind of entry that joins the group before it.
    var isToolOutput: Bool {
        if case .toolOutput = self { return true }
        return false
    }
}
