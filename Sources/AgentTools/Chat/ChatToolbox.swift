import AgentRPC
import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

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
            let seconds = LocalTime.seconds(of: now())
            return ToolCallResult(outcome: .ok, content: [
                "utc": .string(LocalTime.iso8601(seconds, local: false)),
                "local": .string(LocalTime.iso8601(seconds, local: true)),
                "timeZone": .string(LocalTime.zoneIdentifier()),
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

/// The user's local time as the C library knows it (`TZ`, else /etc/localtime): what
/// Foundation's `TimeZone.current` gave, which without FoundationInternationalization
/// is always GMT. Where the two read `TZ` differently (":Europe/Paris", which POSIX
/// allows and Foundation ignored; "GMT+3", which POSIX reads as three hours west and
/// Foundation as east), this follows POSIX, as the clock of every other program does.
enum LocalTime {
    /// Whole seconds since 1970 (a fraction dropped, as ISO8601DateFormatter did), kept
    /// where `time_t` and the calendar arithmetic cannot overflow.
    static func seconds(of date: Date) -> Int {
        let value = date.timeIntervalSince1970
        guard value.isFinite else { return 0 }
        return Int(max(-1e15, min(1e15, value)).rounded(.down))
    }

    /// "2026-11-28T07:05:09Z" (UTC), or with the local offset: "2026-11-28T12:35:09+05:30"
    /// ("Z" when the offset is zero), ISO8601DateFormatter's default format.
    static func iso8601(_ seconds: Int, local: Bool) -> String {
        var time = time_t(seconds)
        var parts = tm()
        let converted = local ? localtime_r(&time, &parts) : gmtime_r(&time, &parts)
        guard converted != nil else { return "" }
        let fields: [Int32] = [Int32(parts.tm_year) + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec]
        let date = String(cFormat: "%04d-%02d-%02dT%02d:%02d:%02d", fields[0], fields[1], fields[2], fields[3], fields[4], fields[5])
        let offset = local ? Int(parts.tm_gmtoff) : 0
        guard offset != 0 else { return date + "Z" }
        let minutes = Int32(clamping: abs(offset) / 60)
        return date + (offset < 0 ? "-" : "+") + String(cFormat: "%02d:%02d", minutes / 60, minutes % 60)
    }

    /// The zone's name: `TZ` (its leading ":" dropped, a path inside a zoneinfo
    /// directory named from there: "Europe/Paris"; empty means UTC), else what
    /// /etc/localtime links to inside zoneinfo, else /etc/timezone's line, else "UTC".
    static func zoneIdentifier(environment: String? = getenv("TZ").map { String(cString: $0) }) -> String {
        if var name = environment {
            if name.hasPrefix(":") { name.removeFirst() }
            if name.isEmpty { return "UTC" }
            return insideZoneinfo(name) ?? name
        }
        var target = [CChar](repeating: 0, count: 4096)
        let length = readlink("/etc/localtime", &target, target.count - 1)
        if length > 0, let name = insideZoneinfo(String(decoding: target[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)) {
            return name
        }
        if let bytes = FileBytes.read("/etc/timezone", upTo: 256),
           let line = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first?.trimmingWhitespace(), !line.isEmpty {
            return line
        }
        return "UTC"
    }

    /// The part of `path` after its last "zoneinfo" component ("/usr/share/zoneinfo/Etc/UTC"
    /// → "Etc/UTC"); nil when it has none.
    private static func insideZoneinfo(_ path: String) -> String? {
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        guard let last = components.lastIndex(of: "zoneinfo"), last + 1 < components.count else { return nil }
        return components[(last + 1)...].joined(separator: "/")
    }
}
