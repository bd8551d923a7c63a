import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where sessions are kept between processes. The engine only talks to this
/// protocol; `JournalStore` (one JSON Lines journal per session in a
/// directory) is the implementation, and a shared store could replace it.
protocol SessionStore: Sendable {
    /// Shown in `initialize` (`capabilities.storeDirectory`).
    var location: String { get }
    /// Starts the journal of a new session and locks it. `initial` is the
    /// state a fork starts from (nil: empty).
    func create(_ header: JournalHeader, config: SessionConfig, initial: TranscriptSnapshot?) throws -> any SessionJournal
    /// Loads a stored session and locks it (`sessionLocked` when another
    /// process holds it, `sessionNotFound` when it is not stored).
    func open(_ sessionID: String) throws -> (journal: any SessionJournal, contents: JournalContents)
    /// Reads a stored session without locking it (fork of a session loaded nowhere).
    func read(_ sessionID: String) throws -> JournalContents
    /// Up to `count` stored sessions after `after` in `session/list` order
    /// (newest-updated first) that pass `filter` and are not `excluded`: a
    /// page costs the same however many sessions are stored (`SessionIndex`).
    func page(after: ListPosition?, count: Int, filter: StoredSessionFilter, excluded: (String) -> Bool) -> [StoredSessionSummary]
    /// What `session/list` shows of one stored session.
    func summary(_ sessionID: String) throws -> StoredSessionSummary?
    /// Removes a stored session (`sessionLocked` when another process holds it).
    /// Returns whether there was one.
    func delete(_ sessionID: String) throws -> Bool
    /// Where a stored session's media files are (`MediaStore`).
    func mediaDirectory(_ sessionID: String) -> String
}

/// The open journal of one loaded session: it holds the session's lock until closed.
protocol SessionJournal: TranscriptJournal {
    /// Syncs and releases the lock.
    func close()
    /// Closes the journal of a session that is being unloaded, whose state is
    /// `final`: a journal with many records since its last snapshot is first
    /// rewritten as one, so the next load reads one line instead of replaying them.
    func close(final: Transcript)
}

/// The first line of a journal: the format version and how the session was created.
struct JournalHeader: Sendable, Equatable {
    static let formatVersion = 1
    var format: Int = JournalHeader.formatVersion
    var sessionID: String
    var createdAt: Date
    /// As stored: without secrets (see `SessionConfig.forStorage`).
    var config: JSONValue
    /// The session this one was forked from, if any.
    var forkedFrom: String?
}

/// A journal read back: the header, the state its records rebuild, and what
/// did not load.
struct JournalContents: Sendable {
    var header: JournalHeader
    var config: SessionConfig
    var transcript: Transcript
    /// Lines that did not load (a corrupt line and everything after it).
    var warnings: [JournalWarning] = []
    /// Bytes of a last line cut short by a crash (ignored, cut off before the next append).
    var tornBytes = 0
    /// The byte length of the part that loaded.
    var validLength = 0
    /// The journal's own byte length.
    var fileLength = 0
    /// Change records after the header or the last snapshot: what the next load replays.
    var recordsSinceSnapshot = 0
}

/// A part of a journal that did not load.
struct JournalWarning: Sendable, Equatable {
    var line: Int
    var message: String
}

/// What `session/list` shows of a stored session.
struct StoredSessionSummary: Sendable, Equatable {
    var sessionID: String
    var title: String?
    var userId: String?
    var model: String?
    var createdAt: Date
    var updatedAt: Date
    var revision: Int
    var entryCount: Int
    /// The process that has it loaded, when one has (nil: no one, or unknown).
    var lockedBy: Int32?
    var locked: Bool
}

extension SessionConfig {
    /// The configuration as it is written to disk: every inline model's
    /// `headers` (which may carry credentials) are dropped, wherever the model
    /// appears (session, profiles, router, hooks); the paths of what was dropped
    /// are returned so the caller can warn. Models named from the config file
    /// stay names, and `apiKeyEnv` is the name of a variable, never its value.
    func forStorage() throws -> (config: JSONValue, droppedHeaders: [String]) {
        var dropped: [String] = []
        func strip(_ value: JSONValue, _ path: String) -> JSONValue {
            switch value {
            case .object(var o):
                // An inline model configuration: it names its provider.
                if o["provider"]?.stringValue != nil, let headers = o["headers"]?.objectValue {
                    dropped += headers.keys.sorted().map { "\(path).headers.\($0)" }
                    o.removeValue(forKey: "headers")
                }
                // An MCP server: literal env and header values may be credentials; `${NAME}` references are not.
                if path.hasPrefix("mcpServers["), o["command"] != nil || o["url"] != nil {
                    for key in ["env", "headers"] {
                        guard var values = o[key]?.objectValue else { continue }
                        for (name, value) in values where !MCPSecrets.isReference(value.stringValue ?? "") {
                            dropped.append("\(path).\(key).\(name)")
                            values.removeValue(forKey: name)
                        }
                        o[key] = .object(values)
                    }
                }
                for (k, v) in o { o[k] = strip(v, path.isEmpty ? k : "\(path).\(k)") }
                return .object(o)
            case .array(let items):
                return .array(items.enumerated().map { strip($1, "\(path)[\($0)]") })
            default:
                return value
            }
        }
        let stored = strip(try JSONValue(encoding: self), "")
        return (stored, dropped)
    }

    /// The model name `session/list` shows: a configured name, or an inline model's id.
    var displayModel: String? {
        switch model {
        case .named(let name)?: return name
        case .inline(let m)?: return m.model ?? m.provider.rawValue
        case nil: return nil
        }
    }
}

/// Session ids that may name a file: letters, digits, `-` and `_`, at most
/// 128 characters, not starting with `-`. Anything else is refused before the
/// file system is touched.
enum SessionIDRule {
    static let maxLength = 128

    static func isPlain(_ id: String) -> Bool {
        guard !id.isEmpty, id.utf8.count <= maxLength, id.utf8.first != UInt8(ascii: "-") else { return false }
        return id.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == UInt8(ascii: "-") || b == UInt8(ascii: "_")
        }
    }

    static func check(_ id: String, field: String = "sessionId") throws {
        guard isPlain(id) else {
            let shown = id.count > 64 ? String(id.prefix(64)) + "…" : id
            throw RPCError.invalidParams(
                "'\(shown)' is not a session id (letters, digits, '-' and '_', at most \(maxLength) characters)", field: field)
        }
    }
}
