import AgentRPC
import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The slash commands every ACP session offers (`available_commands_update`,
/// sent after the `session/new`, `session/load`, `session/resume` and
/// `session/fork` answers). A prompt whose text is `/name` (and perhaps an
/// argument) runs the command instead of a turn. Declared here once: adding a
/// command is one entry of `all`.
struct SlashCommand: Sendable {
    var name: String
    var description: String
    /// What the input after the name is for, when the command takes one.
    var hint: String?
    /// Runs it; answers what the editor is told (an agent message) and `_meta.agentrpc` of the prompt's answer.
    var run: @Sendable (_ context: SlashCommandContext, _ argument: String) async throws -> Outcome

    /// What the editor is told (an agent message), and `_meta.agentrpc` of the prompt's answer.
    typealias Outcome = (message: String, meta: [String: JSONValue])

    static let all: [SlashCommand] = [
        SlashCommand(name: "undo", description: "Undo the last turn: its messages go, and the files it changed get their old text back",
                     hint: nil, run: { context, _ in try await context.undoLastTurn() }),
        SlashCommand(name: "compact", description: "Summarize the conversation so far to make room in the context window (undo it with session/rewind)",
                     hint: "what the summary should keep (optional)", run: { context, argument in try await context.compact(instructions: argument) }),
    ]

    /// Its entry in `available_commands_update`'s list.
    var advertised: JSONValue {
        var o: [String: JSONValue] = ["name": .string(name), "description": .string(description)]
        if let hint { o["input"] = ["hint": .string(hint)] }
        return .object(o)
    }

    /// The command word of a prompt whose text is `/word ...`, and the text
    /// after it; nil for any other prompt.
    static func split(_ text: String) -> (word: String, argument: String)? {
        let trimmed = text.trimmingWhitespaceAndNewlines()
        guard trimmed.hasPrefix("/") else { return nil }
        let word = trimmed.dropFirst().prefix { !$0.isWhitespace }
        guard !word.isEmpty else { return nil }
        return (String(word), trimmed.dropFirst(1 + word.count).trimmingWhitespaceAndNewlines())
    }

    /// The built-in command a prompt asks for, and its argument; nil for any other prompt.
    static func parse(_ text: String) -> (SlashCommand, String)? {
        guard let (word, argument) = split(text), let command = all.first(where: { $0.name == word }) else { return nil }
        return (command, argument)
    }
}

/// What a slash command works with: the engine and the session.
struct SlashCommandContext: Sendable {
    let engine: EmbeddedServer
    let session: ACPSession

    /// `/undo`: `session/rewind` of the last turn with its undos (the files its
    /// edits changed get their old text back, through the editor or on disk).
    func undoLastTurn() async throws -> SlashCommand.Outcome {
        let transcript = try await engine.call(SessionGetTranscriptRequest.self, sessionId: session.id)
        guard let turnId = transcript["entries"]?.arrayValue?.last(where: { $0["turnId"]?.stringValue != nil })?["turnId"]?.stringValue else {
            return ("There is no turn to undo.", ["command": "undo"])
        }
        let result = try await engine.call(SessionRewindRequest.self, ["sessionId": .string(session.id), "turnId": .string(turnId), "undo": true])
        let removed = result["removedEntries"]?.arrayValue?.count ?? 0
        let undos = result["undos"]?.arrayValue ?? []
        let failed = undos.filter { $0["status"]?.stringValue != "undone" }
        var message = "Undid the last turn: \(removed) transcript entr\(removed == 1 ? "y" : "ies") removed"
        message += undos.isEmpty ? ", no file to restore." : ", \(undos.count - failed.count) of \(undos.count) edit\(undos.count == 1 ? "" : "s") undone."
        for failure in failed {
            message += "\nCould not undo \(failure["name"]?.stringValue ?? "a call"): \(failure["error"]?.stringValue ?? "it failed")."
        }
        return (message, ["command": "undo", "turnId": .string(turnId), "removedEntries": .int(removed), "undos": .array(undos)])
    }

    /// `/compact [instructions]`: `session/compact` of the whole conversation
    /// but its last entries; the prompt's cancel withdraws it (nothing changes).
    func compact(instructions: String) async throws -> SlashCommand.Outcome {
        var params: [String: JSONValue] = ["sessionId": .string(session.id)]
        if !instructions.isEmpty { params["instructions"] = .string(instructions) }
        let call = try await engine.start(SessionCompactRequest.self, .object(params))
        session.attach(call)
        let result: JSONValue
        do {
            result = try await call.result()
        } catch {
            // Not a failure for the person who asked: the conversation is short enough already.
            guard error.kind == .invalidParams, error.data["field"]?.stringValue == "keepLast" else { throw error }
            return ("There is nothing to compact yet: the conversation is no longer than the part a compaction keeps.",
                    ["command": "compact", "entriesRemoved": 0])
        }
        let removed = result["entriesRemoved"]?.intValue ?? 0
        let before = result["tokensBefore"]?.intValue ?? 0
        let after = result["tokensAfter"]?.intValue ?? 0
        var meta: [String: JSONValue] = ["command": "compact", "entriesRemoved": .int(removed), "tokensBefore": .int(before), "tokensAfter": .int(after)]
        if let entryId = result["entryId"] { meta["entryId"] = entryId }
        if let revision = result["revision"] { meta["revision"] = revision }
        return ("Compacted the conversation: \(removed) entr\(removed == 1 ? "y" : "ies") summarized, about \(before) tokens in context before and \(after) after.", meta)
    }
}
