import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The images and audio clips of a tool's result (docs/protocol.md, "Images in
/// tool results"): taken out of its content, where a note stays in their place,
/// kept beside the journal (`MediaStore`), and sent to the model where its API
/// takes them.
enum ToolMedia {
    /// `content` with each media block of a content array (the whole output, or
    /// its `content` member: MCP's form beside structured content) replaced by
    /// its note, and the blocks taken out, in order. Anything else is returned
    /// as it is: only arrays are looked into, so a text output costs nothing.
    static func split(_ content: JSONValue) -> (content: JSONValue, media: [MediaContent]) {
        switch content {
        case .array(let items):
            guard let (shown, media) = splitBlocks(items) else { return (content, []) }
            return (.array(shown), media)
        case .object(var members):
            guard case .array(let items)? = members["content"], let (shown, media) = splitBlocks(items) else { return (content, []) }
            members["content"] = .array(shown)
            return (.object(members), media)
        default:
            return (content, [])
        }
    }

    private static func splitBlocks(_ items: [JSONValue]) -> ([JSONValue], [MediaContent])? {
        guard items.contains(where: { MediaContent(block: $0) != nil }) else { return nil }
        var shown: [JSONValue] = []
        var media: [MediaContent] = []
        shown.reserveCapacity(items.count)
        for item in items {
            if let block = MediaContent(block: item) {
                media.append(block)
                // The note a provider without images reads, as MCP output always had it.
                shown.append(MCPToolOutput.shown(item))
            } else {
                shown.append(item)
            }
        }
        return (shown, media)
    }

    /// The images `references` name, read from `store`, as sent to a model;
    /// audio (no provider here takes it in a tool result) and bytes no longer
    /// there are left out: the output's notes still say what they were.
    static func images(_ references: [MediaReference]?, store: MediaStore?) -> [ModelImage] {
        guard let references, !references.isEmpty, let store else { return [] }
        return references.compactMap { reference in
            guard reference.type == .image, let bytes = store.bytes(of: reference) else { return nil }
            return .data(bytes: bytes, mimeType: reference.mimeType)
        }
    }
}

extension Array where Element == TranscriptEntry {
    /// The media the entries name, in order.
    var mediaReferences: [MediaReference] {
        flatMap { entry -> [MediaReference] in
            if case .toolOutput(_, _, _, _, _, _, let media?) = entry.content { return media }
            return []
        }
    }
}

extension ToolMedia {
    /// The media a session needs to be whole, each digest once: what its
    /// entries name, and what the entries of a compaction that can still be
    /// undone name (undoing it brings them back). What a fork copies, an
    /// export carries and a resume checks.
    static func needed(entries: [TranscriptEntry], compactions: [CompactionRecord]) -> [MediaReference] {
        var seen = Set<String>()
        return (entries.mediaReferences + compactions.flatMap(\.removed.mediaReferences)).filter { seen.insert($0.sha256).inserted }
    }

    /// What a session whose media `missing` are not in its store is told
    /// (a `session/resume` warning, an import's): which, and what the model gets instead.
    static func missingNote(_ missing: [MediaReference]) -> String {
        let shown = missing.prefix(5).map { "\($0.mimeType) sha256 \($0.sha256.prefix(12))…" }.joined(separator: ", ")
        let more = missing.count > 5 ? " and \(missing.count - 5) more" : ""
        return "\(missing.count) image(s) or audio clip(s) its tool results name are not in the store (\(shown)\(more)): the model gets their notes in their place"
    }
}

extension TranscriptSnapshot {
    var mediaReferences: [MediaReference] { ToolMedia.needed(entries: entries, compactions: compactions) }
}

extension Transcript {
    var mediaReferences: [MediaReference] { ToolMedia.needed(entries: entries, compactions: compactions) }
}

extension AgentSession {
    /// The reference a `session/getMedia` asks for: one that the session's
    /// tool results name (its entries, or an undoable compaction's).
    func mediaReference(sha256: String) throws -> MediaReference {
        guard MediaReference.isDigest(sha256) else {
            throw RPCError.invalidParams("sha256 must be 64 lowercase hexadecimal digits", field: "sha256")
        }
        guard let reference = transcript.mediaReferences.first(where: { $0.sha256 == sha256 }) else {
            throw RPCError.invalidParams("no tool result of this session names media with sha256 \(sha256)", field: "sha256")
        }
        return reference
    }
}

extension ToolMedia {
    /// `session/getMedia`'s answer: `reference`'s bytes from `store`, as the
    /// live `toolCallFinished.media` carried them.
    static func content(_ reference: MediaReference, store: MediaStore) throws -> MediaContent {
        guard let bytes = store.bytes(of: reference) else {
            throw RPCError.invalidParams(
                "the \(reference.type.rawValue) with sha256 \(reference.sha256) is not in the store (removed, or imported with --allow-missing-media): its note in the output is all that is left",
                field: "sha256")
        }
        return MediaContent(type: reference.type, mimeType: reference.mimeType, data: Data(bytes).base64EncodedString())
    }
}
