import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The media lines of an exported session (`agentrpc sessions export`,
/// docs/protocol.md "Durable sessions"): after its first line and its
/// snapshot, one `{"type":"media","sha256":"…","data":"<base64>"}` line per
/// image or audio clip its tool results name, so that the file alone is the
/// whole conversation. A journal in a store never holds one.
enum SessionExport {
    static let mediaType = "media"
    private static let mediaPrefix = Array(#"{"type":"media","#.utf8)

    /// One media line, newline included.
    static func mediaLine(sha256: String, bytes: [UInt8]) -> [UInt8] {
        var line = mediaPrefix
        line += Array(#""sha256":""#.utf8) + Array(sha256.utf8)
        // Base64 needs no JSON escaping.
        line += Array(#"","data":""#.utf8) + Array(Data(bytes).base64EncodedString().utf8) + Array("\"}\n".utf8)
        return line
    }

    static func isMediaLine(_ line: UnsafeBufferPointer<UInt8>) -> Bool {
        line.count >= mediaPrefix.count && line.prefix(mediaPrefix.count).elementsEqual(mediaPrefix)
    }

    /// A media line's digest and decoded bytes; throws `journalUnreadable`
    /// naming the line when it is not one (as an import reports it).
    static func decodeMediaLine(_ line: UnsafeBufferPointer<UInt8>, number: Int) throws -> (sha256: String, bytes: [UInt8]) {
        func bad(_ why: String) -> RPCError { RPCError(.journalUnreadable, "line \(number) (media): \(why)", data: ["line": .int(number)]) }
        // Base64 is 4 characters per 3 bytes: a longer line is refused before it is parsed.
        guard line.count / 4 * 3 <= MediaStore.maximumBytes + 256 else { throw bad("larger than \(MediaStore.maximumBytes) bytes") }
        guard let value = try? JSONValue.parse(line), let sha256 = value["sha256"]?.stringValue, let text = value["data"]?.stringValue else {
            throw bad("not an object with sha256 and data")
        }
        guard MediaReference.isDigest(sha256) else { throw bad("sha256 is not 64 hexadecimal digits") }
        guard let data = Data(base64Encoded: text), data.count <= MediaStore.maximumBytes else {
            throw bad("data is not base64 of at most \(MediaStore.maximumBytes) bytes")
        }
        return (sha256, [UInt8](data))
    }

    /// The lines of an exported session as `JournalCodec.load` reads them:
    /// the journal's lines go on, and each media line is decoded, checked
    /// against its SHA-256 and written to `media` as it is read, so that no
    /// more than one is in memory at a time.
    struct Lines<Base: JournalLineSource>: JournalLineSource {
        var base: Base
        let media: MediaStore
        /// The digests kept so far.
        private(set) var kept: Set<String> = []
        private var number = 0

        init(_ base: Base, media: MediaStore) {
            self.base = base
            self.media = media
        }

        var consumed: Int { base.consumed }
        var rest: Int { base.rest }

        mutating func next() throws -> UnsafeBufferPointer<UInt8>? {
            while let line = try base.next() {
                number += 1
                guard SessionExport.isMediaLine(line) else { return line }
                let (sha256, bytes) = try SessionExport.decodeMediaLine(line, number: number)
                guard try media.keep(bytes, digest: sha256) else {
                    throw RPCError(.journalUnreadable, "line \(number) (media): its data's SHA-256 is not \(sha256) (the file was changed or cut)", data: [
                        "line": .int(number), "sha256": .string(sha256),
                    ])
                }
                kept.insert(sha256)
            }
            return nil
        }
    }
}
