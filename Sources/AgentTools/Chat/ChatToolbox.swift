import AgentRPC
import AgentRPCProtocol
import Foundation

/// The harmless tools the chat offers the model and runs itself: the chat is
/// the protocol client, so every `tool/call` lands here.
struct ChatToolbox {
    /// One note written by `write_note`, kept in memory for this chat only.
    struct Note: Equatable {
        var id: Int
        var text: String
        /// The call that wrote it, so rewinding a turn can find its notes.
        var callId: String
    }

    private(set) var notes: [Note] = []
    private var nextNoteID = 1
    /// Overridable clock, so tests of the toolbox need not depend on the time.
    var now: () -> Date = { Date() }

    static let currentTime = "current_time"
    static let writeNote = "write_note"
    static let listNotes = "list_notes"

    /// The tool definitions sent with `session/create`.
    static var specs: [ToolSpec] {
        let noArguments: JSONValue = ["type": "object", "properties": [:], "additionalProperties": false]
        return [
            ToolSpec(
                name: currentTime, description: "The current date and time (UTC and the user's local time zone).",
                inputSchema: noArguments, annotations: ToolAnnotations(readOnly: true, destructive: false, idempotent: true)),
            ToolSpec(
                name: writeNote, description: "Save a short note for the user. The user is asked to allow it first.",
                inputSchema: [
                    "type": "object",
                    "properties": ["text": ["type": "string", "minLength": 1, "description": "The note's text."]],
                    "required": ["text"], "additionalProperties": false,
                ],
                confirmation: .always, annotations: ToolAnnotations(readOnly: false, destructive: false, idempotent: false)),
            ToolSpec(
                name: listNotes, description: "The notes saved so far in this chat.",
                inputSchema: noArguments, annotations: ToolAnnotations(readOnly: true, destructive: false, idempotent: true)),
        ]
    }

    /// Runs one call. Outcomes other than `ok` are answers for the model, never errors.
    mutating func call(name: String, arguments: JSONValue, callId: String) -> ToolCallResult {
        switch name {
        case Self.currentTime:
            let date = now()
            let utc = ISO8601DateFormatter()
            let local = ISO8601DateFormatter()
            local.timeZone = TimeZone.current
            return ToolCallResult(outcome: .ok, content: [
                "utc": .string(utc.string(from: date)),
                "local": .string(local.string(from: date)),
                "timeZone": .string(TimeZone.current.identifier),
            ])
        case Self.writeNote:
            guard let text = arguments["text"]?.stringValue, !text.isEmpty else {
                return ToolCallResult(outcome: .failed, content: "write_note needs a non-empty \"text\" string.")
            }
            let note = Note(id: nextNoteID, text: text, callId: callId)
            nextNoteID += 1
            notes.append(note)
            return ToolCallResult(
                outcome: .ok, content: ["saved": true, "noteId": .int(note.id)], undo: ["noteId": .int(note.id)])
        case Self.listNotes:
            return ToolCallResult(outcome: .ok, content: .array(notes.map { ["id": .int($0.id), "text": .string($0.text)] }))
        default:
            return ToolCallResult(outcome: .failed, content: .string("This chat does not implement a tool named '\(name)'."))
        }
    }

    /// Honours a `tool/undo` token from `write_note`; returns the note it removed.
    mutating func undo(name: String, token: JSONValue) -> Note? {
        guard name == Self.writeNote, let id = token["noteId"]?.intValue else { return nil }
        guard let index = notes.firstIndex(where: { $0.id == id }) else { return nil }
        return notes.remove(at: index)
    }

    /// Removes the notes written by the given calls (a rewound turn); returns them.
    mutating func removeNotes(writtenBy callIds: Set<String>) -> [Note] {
        let removed = notes.filter { callIds.contains($0.callId) }
        notes.removeAll { callIds.contains($0.callId) }
        return removed
    }
}
