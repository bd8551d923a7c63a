import AgentRPC
import AgentRPCProtocol
import Foundation

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
    var run: @Sendable (_ context: SlashCommandContext, _ argument: String) async throws -> (message: String, meta: [String: JSONValue])

    static let all: [SlashCommand] = [
        SlashCommand(name: "undo", description: "Undo the last turn: its messages go, and the files it changed get their old text back",
                     hint: nil, run: { context, _ in try await context.undoLastTurn() }),
    ]

    /// `available_commands_update`'s list.
    static var advertised: JSONValue {
        .array(all.map { command in
            var o: [String: JSONValue] = ["name": .string(command.name), "description": .string(command.description)]
            if let hint = command.hint { o["input"] = ["hint": .string(hint)] }
            return .object(o)
        })
    }

    /// The command a prompt asks for, and its argument; nil for any other prompt
    /// (an unknown `/word` goes to the model as it is).
    static func parse(_ text: String) -> (SlashCommand, String)? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix("/") else { return nil }
        let word = trimmed.dropFirst().prefix { !$0.isWhitespace }
        guard let command = all.first(where: { $0.name == word }) else { return nil }
        let argument = trimmed.dropFirst(1 + word.count).trimmingCharacters(in: .whitespacesAndNewlines)
        return (command, argument)
    }
}

/// What a slash command works with: the engine and the session.
struct SlashCommandContext: Sendable {
    let engine: EmbeddedServer
    let session: ACPSession

    /// `/undo`: `session/rewind` of the last turn with its undos (the files its
    /// edits changed get their old text back, through the editor or on disk).
    func undoLastTurn() async throws -> (message: String, meta: [String: JSONValue]) {
        let transcript = try await engine.call("session/getTranscript", ["sessionId": .string(session.id)])
        guard let turnId = transcript["entries"]?.arrayValue?.last(where: { $0["turnId"]?.stringValue != nil })?["turnId"]?.stringValue else {
            return ("There is no turn to undo.", ["command": "undo"])
        }
        let result = try await engine.call("session/rewind", ["sessionId": .string(session.id), "turnId": .string(turnId), "undo": true])
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
}
