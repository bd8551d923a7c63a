import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Checks a send or steer passes before anything changes (they read no session state).
enum PreFlight {
    /// Call-site limits (`options.limits`) get the same checks as the session's
    /// at create time: a zero or negative limit is a configuration error found in
    /// pre-flight, not a turn that starts and then fails against it.
    static func limitOverrides(_ limits: Limits?) throws {
        guard let limits, let problem = SessionConfig(limits: limits).validate().first else { return }
        throw RPCError.invalidConfiguration("options.\(problem.description)", field: "options.\(problem.path)")
    }

    /// Images are checked at the send boundary: a missing file or bad base64
    /// fails the send before anything changes.
    static func images(_ images: [ImageAttachment], provider: any ModelProvider) throws {
        for (index, image) in images.enumerated() {
            func fail(_ message: String, _ reason: String) -> RPCError {
                RPCError(.unreadableImageAttachment, "image \(index): \(message)", data: ["index": .int(index), "reason": .string(reason)])
            }
            if !provider.capabilities.supportsImages {
                throw fail("the model's provider does not accept images", "unsupportedByProvider")
            }
            switch image {
            case .path(let path):
                guard ImageLoading.mimeType(forPath: path) != nil else { throw fail("\(path) is not a PNG, JPEG, GIF or WebP file", "unsupportedType") }
                switch ImageLoading.check(path) {
                case nil: break
                case .unreadable?: throw fail("cannot read \(path)", "unreadablePath")
                case .notRegularFile?: throw fail("\(path) is not a regular file", "notRegularFile")
                case .tooLarge?: throw fail("\(path) is larger than \(ImageLoading.maximumFileBytes) bytes", "tooLarge")
                }
            case .url(let url):
                guard let u = URL(string: url), let scheme = u.scheme?.lowercased(), ["http", "https", "data"].contains(scheme) else {
                    throw fail("'\(url)' is not an http(s) or data URL", "invalidURL")
                }
            case .data(let base64, let mimeType):
                guard Data(base64Encoded: base64) != nil else { throw fail("data is not valid base64", "invalidBase64") }
                guard mimeType.hasPrefix("image/") else { throw fail("mimeType '\(mimeType)' is not an image type", "unsupportedType") }
            }
        }
    }

    /// Tool schemas that the provider cannot take as they are: never fatal.
    static func schemaWarnings(for profile: ResolvedProfile, provider: any ModelProvider) -> [SchemaWarning] {
        var warnings: [SchemaWarning] = []
        for tool in profile.clientTools {
            guard let schema = tool.inputSchema else { continue }
            do {
                _ = try JSONSchemaValidator(schema: schema)
            } catch {
                warnings.append(SchemaWarning(tool: tool.name, path: error.schemaPath, message: "the input schema cannot be used to check arguments: \(error.message)"))
            }
            if schema["type"]?.stringValue != "object" {
                warnings.append(SchemaWarning(tool: tool.name, path: "#/type", message: "tool input schemas should be objects; providers may reject others"))
            }
        }
        let adapted = provider.adaptTools(profile.modelToolDefinitions)
        warnings.append(contentsOf: adapted.warnings)
        return warnings
    }
}

/// Building the request of a round trip. Like the loop, it runs in the turn's
/// task on the session's actor (`session` is isolated).
extension TurnRunner {
    // MARK: Building a request

    /// The request for the next round trip, built from the active profile:
    /// its instructions, tools, options and history transforms (applied to a copy;
    /// the transcript itself never changes here).
    ///
    /// Without history transforms the messages come from `SessionCaches.history`, which
    /// converts only what was appended since the last request; `stablePrefix` then
    /// says which leading messages are known to be unchanged.
    ///
    /// `transformed`: the history after the profile's transforms
    /// (`transformedHistory`), when it has any. Building itself never waits: an
    /// async call costs the runtime two executor checks (~500 instructions) a
    /// round trip.
    func buildRequest(
        profile: ResolvedProfile, modelRef: ModelReference, provider: any ModelProvider, transformed: [TranscriptEntry]?, session: isolated AgentSession
    ) throws -> (request: ModelRequest, entryIDs: [String], stablePrefix: PrefixTracker.StablePrefix?) {
        let modelConfig = try session.context.catalog.resolve(modelRef, field: "model")
        var tools: [ModelToolDefinition] = []
        var choice: ModelToolChoice = .auto
        var responseSchema: JSONValue? = nil
        var responseStrict = false
        switch turn.mode {
        case .chat:
            switch turn.toolCallingMode(profile) {
            case .disallowed:
                tools = []
                if provider.capabilities.requiresToolsWithToolHistory {
                    // Define the tools the history used (choice `none` keeps the model from calling them).
                    var names: [String] = []
                    for entry in session.entries {
                        if case .toolCalls(let calls, _, _) = entry.content {
                            for c in calls where !names.contains(c.name) { names.append(c.name) }
                        }
                    }
                    let known = profile.modelToolDefinitions + (session.config.tools ?? []).map(\.modelDefinition)
                    let used = names.map { name in
                        known.first { $0.name == name } ?? ModelToolDefinition(name: name, description: "", inputSchema: ["type": "object"])
                    }
                    if !used.isEmpty {
                        tools = provider.adaptTools(used).tools
                        choice = .none
                    }
                }
            case .required:
                tools = provider.adaptTools(profile.modelToolDefinitions).tools
                choice = tools.isEmpty ? .auto : .required
            case .allowed:
                tools = provider.adaptTools(profile.modelToolDefinitions).tools
                // A forced tool choice applies to the first round trip; after the
                // model has called the tool it must be free to answer.
                if turn.roundTrips == 1 {
                    switch turn.toolChoice {
                    case .auto: choice = .auto
                    case .none: choice = .none
                    case .required: choice = .required
                    case .tool(let name): choice = .tool(name)
                    }
                }
            }
        case .generate(let schema, let strict):
            responseSchema = schema
            responseStrict = strict
            choice = .none
        }
        // Call site > case > defaults (the resolver already merged case over defaults).
        let options = GenerationOptions(
            temperature: turn.options.temperature ?? profile.options.temperature,
            maxOutputTokens: turn.options.maxOutputTokens ?? profile.options.maxOutputTokens,
            reasoningLevel: turn.options.reasoningLevel ?? profile.options.reasoningLevel)
        let messages: [ModelMessage], entryIDs: [String], stablePrefix: PrefixTracker.StablePrefix?
        if let transformed {
            (messages, entryIDs) = ModelHistory.messagesWithEntryIDs(from: transformed, media: session.media)
            stablePrefix = nil
        } else {
            let converted = session.caches.history.messages(
                for: session.transcript.entries, appendRunStamp: session.transcript.appendRunStamp, media: session.media)
            (messages, entryIDs, stablePrefix) = (converted.messages, converted.entryIDs, converted.stablePrefix)
        }
        var request = ModelRequest(
            model: modelConfig.model ?? modelConfig.provider.rawValue, instructions: session.instructionsText(profile: profile),
            messages: messages, tools: tools, toolChoice: choice, options: options,
            responseSchema: responseSchema)
        request.responseSchemaStrict = responseStrict
        return (request, entryIDs, stablePrefix)
    }

    /// The entries after the profile's history transforms (applied to a copy).
    func transformedHistory(profile: ResolvedProfile, session: isolated AgentSession) async throws -> [TranscriptEntry] {
        let history: [TranscriptEntry]
        if HistoryTransformer.usesPatterns(profile.history) {
            let transforms = profile.history, name = profile.name, current = session.entries
            let transformed = await RegexWorkers.run { Result { try HistoryTransformer.apply(transforms, to: current, profile: name) } }
            do {
                history = try transformed.get()
            } catch let error as RegexBudgetExceeded {
                throw error.turnError(field: "profiles.cases.\(profile.name).history")
            }
        } else {
            history = try HistoryTransformer.apply(profile.history, to: session.entries, profile: profile.name)
        }
        return history
    }

    /// `refuse` stops the request before anything is sent; `redact` rewrites what
    /// is sent, never the transcript. The patterns are the client's, so they run on
    /// a regex worker with a budget per match; one that runs past it stops the
    /// request (`regexBudgetExceeded`): nothing unchecked is sent.
    /// Returns whether redaction rules ran (the messages may have been rewritten).
    /// `egress`: the rules that apply (`egressRules`).
    @discardableResult
    func applyEgress(_ egress: Egress, to request: inout ModelRequest, profile: ResolvedProfile, session: isolated AgentSession) async throws -> Bool {
        // A profile inherits the session's rules; name the profile only when it has its own.
        let field = profile.egress == nil || profile.egress == session.config.egress ? "egress" : "profiles.cases.\(profile.name).egress"
        let unfiltered = request
        let filtered = await RegexWorkers.run { Result { try Self.filtered(unfiltered, by: egress) } }
        do {
            request = try filtered.get()
        } catch let error as RegexBudgetExceeded {
            throw error.turnError(field: field)
        }
        return !(egress.redact ?? []).isEmpty
    }

    /// The egress rules of a request under `profile`: its own, else the session's.
    func egressRules(profile: ResolvedProfile, session: isolated AgentSession) -> Egress? {
        profile.egress ?? session.config.egress
    }

    private static func filtered(_ request: ModelRequest, by egress: Egress) throws -> ModelRequest {
        let texts = request.outgoingTexts
        for pattern in egress.refuse ?? [] {
            guard let regex = try? BoundedRegex(pattern) else { continue }
            for text in texts where try regex.firstMatch(in: text) {
                throw RPCError(.egressRefused, "the request matches a refused pattern and was not sent", data: ["rule": .string(pattern)])
            }
        }
        let redactions = (egress.redact ?? []).compactMap { r -> (BoundedRegex, String)? in
            guard let regex = try? BoundedRegex(r.pattern) else { return nil }
            return (regex, r.replacement)
        }
        guard !redactions.isEmpty else { return request }
        var out = request
        var failure: RegexBudgetExceeded?
        out.rewriteTexts { text in
            guard failure == nil else { return text }
            var result = text
            do throws(RegexBudgetExceeded) {
                for (regex, replacement) in redactions {
                    result = try regex.replacingMatches(in: result, withLiteral: replacement)
                }
            } catch {
                failure = error
            }
            return result
        }
        if let failure { throw failure }
        return out
    }
}

/// A session's providers by model reference, each created once: a scripted
/// provider keeps its place in the script across turns.
struct ProviderCache {
    private var providers: [(reference: ModelReference, provider: any ModelProvider)] = []
    /// Where in `providers` the provider used last is.
    private var lastIndex: Int?
    /// The provider used last (steering's images are checked against it).
    var last: (reference: ModelReference, provider: any ModelProvider)? { lastIndex.map { providers[$0] } }

    /// The provider for `reference`, made by `make` the first time.
    mutating func provider(for reference: ModelReference, make: () throws -> any ModelProvider) rethrows -> any ModelProvider {
        // Looked up every round trip: an inline scripted model's reference holds its
        // whole script, so hashing it each time would cost more than the round trip.
        // The same reference is usually a copy sharing storage, which `==` sees at once.
        // Compared where it is kept: the last pair bound to a local would be a copy.
        if let lastIndex, providers[lastIndex].reference == reference { return providers[lastIndex].provider }
        if let index = providers.firstIndex(where: { $0.reference == reference }) {
            lastIndex = index
            return providers[index].provider
        }
        let made = try make()
        providers.append((reference, made))
        lastIndex = providers.count - 1
        return made
    }
}

extension RegexBudgetExceeded {
    /// What the turn fails with: a cancellation stays a cancellation.
    func turnError(field: String) -> any Error {
        if cancelled { return CancellationError() }
        return RPCError(
            .regexBudgetExceeded,
            "the pattern at \(field) took longer than its budget of \(Int(BoundedRegex.matchBudgetSeconds * 1000)) ms per match; the request was not sent",
            data: ["pattern": .string(String(pattern.prefix(200))), "field": .string(field)])
    }
}

extension ToolSpec {
    var modelDefinition: ModelToolDefinition {
        ModelToolDefinition(name: name, description: description ?? "", inputSchema: inputSchema ?? ["type": "object", "properties": [:]])
    }
}

extension ModelRequest {
    /// Every piece of text that would leave the machine.
    var outgoingTexts: [String] {
        var out = [instructions]
        for m in messages {
            switch m {
            case .user(let text, _): out.append(text)
            case .assistant(let text, let calls, let reasoning, let signature):
                // Only signed reasoning is sent (see AnthropicRequestBuilder).
                if let reasoning, signature != nil { out.append(reasoning) }
                out.append(text)
                out.append(contentsOf: calls.map(\.argumentsJSON))
            case .toolResult(_, _, let content, _, _): out.append(content)
            case .toolResultImages: break
            }
        }
        return out
    }

    mutating func rewriteTexts(_ f: (String) -> String) {
        instructions = f(instructions)
        messages = messages.map { m in
            switch m {
            case .user(let text, let images): return .user(text: f(text), images: images)
            case .assistant(let text, let calls, let reasoning, let signature):
                // A signature seals its exact text: rewritten reasoning loses it (and is then not sent).
                let rewritten = reasoning.map(f)
                return .assistant(
                    text: f(text), toolCalls: calls.map { ModelToolCall(id: $0.id, name: $0.name, argumentsJSON: f($0.argumentsJSON)) },
                    reasoning: rewritten, reasoningSignature: rewritten == reasoning ? signature : nil)
            case .toolResult(let callId, let name, let content, let isError, let images):
                return .toolResult(callId: callId, name: name, content: f(content), isError: isError, images: images)
            case .toolResultImages:
                return m
            }
        }
    }
}

/// Turns transcript entries into provider messages.
enum ModelHistory {
    /// Arguments that were not valid JSON are kept as the model's raw text (a
    /// JSON string); they go back to the model as that text, not quoted again.
    static func argumentsText(_ arguments: JSONValue) -> String {
        if case .string(let raw) = arguments { return raw }
        return arguments.serializedString()
    }

    /// `media`: where the images of the entries' tool outputs are (nil: none is sent).
    static func messages(from entries: [TranscriptEntry], media: MediaStore? = nil) -> [ModelMessage] {
        messagesWithEntryIDs(from: entries, media: media).messages
    }

    /// The messages, and beside each the id of the entry it came from (for
    /// `cacheInvalidated.firstChangedEntry`).
    static func messagesWithEntryIDs(from entries: [TranscriptEntry], media: MediaStore? = nil) -> (messages: [ModelMessage], entryIDs: [String]) {
        var out: [ModelMessage] = []
        var ids: [String] = []
        appendMessages(of: entries, from: 0, to: &out, ids: &ids, media: media)
        return (out, ids)
    }

    /// Converts `entries[start...]` and appends the messages to `out` (and their
    /// entries' ids to `ids`). `start` must be where a group begins: an entry
    /// other than a `toolOutput` that answers the `toolCalls` entry before it.
    /// `groupStarts` is called with the index of each group's first entry and
    /// the number of messages before it. A group's messages depend only on its
    /// own entries and the one before it (signed reasoning); only the last group
    /// can still change when entries are appended (a `toolCalls` entry gains its
    /// outputs), which is what `ModelHistoryCache` relies on.
    ///
    /// A tool output's images go on its message, and again, after the last
    /// output of its group, in one `toolResultImages` message (for an API
    /// whose tool results take text only); `media` is where they are read.
    static func appendMessages(
        of entries: [TranscriptEntry], from start: Int, to out: inout [ModelMessage], ids: inout [String], media: MediaStore? = nil,
        groupStarts: (_ entry: Int, _ messagesBefore: Int) -> Void = { _, _ in }
    ) {
        func add(_ m: ModelMessage, _ id: String) {
            out.append(m)
            ids.append(id)
        }
        var index = start
        while index < entries.count {
            groupStarts(index, out.count)
            let entry = entries[index]
            index += 1
            // Signed reasoning (Anthropic thinking) goes back on the assistant message
            // right after it: the engine appends it just before its tool calls or
            // response. Unsigned reasoning is never sent back.
            var reasoning: (text: String, signature: String)?
            if index > 1, case .reasoning(let text, _, let signature?) = entries[index - 2].content {
                reasoning = (text, signature)
            }
            switch entry.content {
            case .prompt(let text, let images):
                add(.user(text: text, images: (images ?? []).compactMap(ImageLoading.load)), entry.id)
            case .response(let text, _, _, _):
                add(.assistant(text: text, toolCalls: [], reasoning: reasoning?.text, reasoningSignature: reasoning?.signature), entry.id)
            case .reasoning:
                // Replayed with the assistant message that follows it (above).
                continue
            case .toolCalls(let calls, _, let text):
                add(.assistant(
                    text: text ?? "",
                    toolCalls: calls.map { ModelToolCall(id: $0.callId, name: $0.name, argumentsJSON: Self.argumentsText($0.arguments)) },
                    reasoning: reasoning?.text, reasoningSignature: reasoning?.signature), entry.id)
                // Outputs follow their calls; a call without one (an interrupted
                // turn kept under `preserve`) gets a synthetic failure so every
                // provider sees a well-formed exchange.
                var answered: [String] = []
                var groupImages: [ModelImage] = []
                var lastOutputID = entry.id
                while index < entries.count,
                    case .toolOutput(let callId, let name, let outcome, let content, _, let approved, let references) = entries[index].content
                {
                    let images = ToolMedia.images(references, store: media)
                    groupImages += images
                    lastOutputID = entries[index].id
                    add(.toolResult(
                        callId: callId, name: name, content: Self.toolResultText(content, approvedArguments: approved), isError: outcome != .ok,
                        images: images), entries[index].id)
                    answered.append(callId)
                    index += 1
                }
                // Outputs usually answer every call in the calls' order: then no
                // set of them is needed to find the unanswered ones.
                if !answered.elementsEqual(calls.lazy.map(\.callId)) {
                    let answeredSet = Set(answered)
                    for call in calls where !answeredSet.contains(call.callId) {
                        add(.toolResult(callId: call.callId, name: call.name, content: "The call did not run: the turn ended before it was executed.", isError: true), entry.id)
                    }
                }
                if !groupImages.isEmpty { add(.toolResultImages(groupImages), lastOutputID) }
            case .toolOutput(let callId, let name, let outcome, let content, _, let approved, let references):
                let images = ToolMedia.images(references, store: media)
                add(.toolResult(
                    callId: callId, name: name, content: Self.toolResultText(content, approvedArguments: approved), isError: outcome != .ok,
                    images: images), entry.id)
                if !images.isEmpty { add(.toolResultImages(images), entry.id) }
            case .summary(let text):
                add(.user(text: Self.summaryText(text), images: []), entry.id)
            }
        }
    }

    /// How a compaction's summary reaches the model: as the user's note of
    /// what came before, since no provider has a message kind for it.
    static func summaryText(_ summary: String) -> String {
        "[Summary of the conversation so far]\n\n" + summary
    }

    /// What the model reads for a tool output. When the user edited the arguments
    /// before approving, the model is told what actually ran, or it would reason
    /// about a call that never happened.
    static func toolResultText(_ content: JSONValue, approvedArguments: JSONValue?) -> String {
        let text = content.stringValue ?? content.serializedString()
        guard let approvedArguments else { return text }
        return "The user edited the arguments before approving; the call ran with \(approvedArguments.serializedString()).\n\(text)"
    }
}
