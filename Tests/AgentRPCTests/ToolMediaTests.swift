import AgentRPCProtocol
import Foundation
import Testing

@testable import AgentRPC

/// Images and audio in tool results (docs/protocol.md, "Images in tool
/// results"): taken out of the content, kept by digest, sent in each
/// provider's shape or left as the note.
@Suite struct ToolMediaTests {
    static let pixel: [UInt8] = Array(Data(base64Encoded: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==") ?? Data())
    static var pixelBlock: JSONValue { ["type": "image", "mimeType": "image/png", "data": .string(Data(pixel).base64EncodedString())] }

    /// FIPS 180-4's examples, and the same digest however the bytes are fed.
    @Test func sha256MatchesTheStandardsExamples() {
        #expect(SHA256.hex([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(SHA256.hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        var pieces = SHA256()
        var offset = 0
        for size in [1, 63, 64, 65, 127, 1000] {
            pieces.update(Array(million[offset..<offset + size]))
            offset += size
        }
        pieces.update(Array(million[offset...]))
        #expect(pieces.finalize() == { var h = SHA256(); h.update(million); return h.finalize() }())
    }

    @Test func mediaBlocksAreTakenOutAndTheirNotesStay() {
        let note: JSONValue = ["type": "image", "mimeType": "image/png", "note": .string("\(Self.pixelBlock["data"]?.stringValue?.utf8.count ?? 0) bytes of base64 image data not shown")]
        let (content, media) = ToolMedia.split([["type": "text", "text": "a"], Self.pixelBlock])
        #expect(content == [["type": "text", "text": "a"], note])
        #expect(media == [MediaContent(block: Self.pixelBlock)].compactMap { $0 })
        // MCP's form beside structured content.
        let (structured, inside) = ToolMedia.split(["structuredContent": ["x": 1], "content": [Self.pixelBlock]])
        #expect(structured == ["structuredContent": ["x": 1], "content": [note]] && inside.count == 1)
        // Text, objects without a content array, and malformed blocks are left as they are.
        for plain: JSONValue in ["text", ["a": 1], [["type": "image", "mimeType": "image/png"]], [1, 2], ["content": "x"]] {
            let (same, none) = ToolMedia.split(plain)
            #expect(same == plain && none.isEmpty)
        }
    }

    /// An MCP result's image survives the output bound: it is not what the bound is for.
    @Test func anMCPResultsImageIsKeptWholeBesideACutText() {
        let big = String(repeating: "x", count: MCPBounds.maxToolOutputBytes + 10)
        let (outcome, content) = MCPToolOutput.outcome(of: ["content": [["type": "text", "text": .string(big)], Self.pixelBlock]])
        #expect(outcome == .ok)
        let (shown, media) = ToolMedia.split(content)
        #expect(media.count == 1)
        #expect(shown.arrayValue?.first?.stringValue?.contains("[output cut:") == true)
        let (_, small) = MCPToolOutput.outcome(of: ["content": [["type": "text", "text": "see"], Self.pixelBlock]])
        #expect(small == [["type": "text", "text": "see"], Self.pixelBlock])
    }

    @Test func aStoreKeepsBytesByDigestOnDiskOrInMemoryAndCopiesThem() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("media-\(UUID().uuidString)").path
        defer { MediaStore.remove(directory: directory) }
        let disk = MediaStore(directory: directory)
        let block = try #require(MediaContent(block: Self.pixelBlock))
        let reference = try #require(try disk.keep(block))
        #expect(reference == MediaReference(type: .image, mimeType: "image/png", sha256: SHA256.hex(Self.pixel), size: Self.pixel.count))
        #expect(FileManager.default.contents(atPath: directory + "/" + reference.sha256) == Data(Self.pixel))
        #expect(disk.bytes(of: reference) == Self.pixel)
        // Kept twice, stored once.
        #expect(try disk.keep(block) == reference)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == [reference.sha256])
        let memory = MediaStore(directory: nil)
        #expect(memory.bytes(of: reference) == nil)
        try memory.copy([reference], from: disk)
        #expect(memory.bytes(of: reference) == Self.pixel)
        // Not base64: nothing is kept.
        #expect(try memory.keep(MediaContent(type: .image, mimeType: "image/png", data: "%%%")) == nil)
        MediaStore.remove(directory: directory)
        #expect(!FileManager.default.fileExists(atPath: directory))
        #expect(disk.bytes(of: reference) == nil)
    }

    /// `has` looks without reading (a file of the named size); an import's
    /// `keep(_:digest:)` keeps only bytes whose SHA-256 is the one named.
    @Test func aStoreSaysWhatItHasAndKeepsOnlyBytesOfTheirDigest() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("media-\(UUID().uuidString)").path
        defer { MediaStore.remove(directory: directory) }
        let disk = MediaStore(directory: directory)
        let digest = SHA256.hex(Self.pixel)
        let reference = MediaReference(type: .image, mimeType: "image/png", sha256: digest, size: Self.pixel.count)
        #expect(!disk.has(reference))
        #expect(try !disk.keep(Self.pixel + [0], digest: digest))
        #expect(!disk.has(reference) && !FileManager.default.fileExists(atPath: directory + "/" + digest))
        #expect(try disk.keep(Self.pixel, digest: digest))
        #expect(disk.has(reference) && disk.bytes(of: reference) == Self.pixel)
        // A file of another size is not the one named.
        #expect(!disk.has(MediaReference(type: .image, mimeType: "image/png", sha256: digest, size: Self.pixel.count + 1)))
    }

    /// What a fork copies and an export carries: the media of the entries and
    /// of those an undoable compaction removed, each digest once.
    @Test func aSessionNeedsTheMediaOfItsEntriesAndOfItsUndoableCompactions() {
        func output(_ id: String, _ sha: Character) -> TranscriptEntry {
            TranscriptEntry(id: id, .toolOutput(callId: "c" + id, name: "shot", outcome: .ok, content: "s", profile: nil, media: [
                MediaReference(type: .image, mimeType: "image/png", sha256: String(repeating: sha, count: 64), size: 1),
            ]))
        }
        let needed = ToolMedia.needed(
            entries: [output("e1", "a"), output("e2", "b"), output("e3", "a")],
            compactions: [CompactionRecord(summaryID: "e0", removed: [output("e-1", "c"), output("e-2", "b")])])
        #expect(needed.map(\.sha256) == ["a", "b", "c"].map { String(repeating: $0, count: 64) })
        #expect(ToolMedia.missingNote(needed).hasPrefix("3 image(s) or audio clip(s) its tool results name are not in the store (image/png sha256 aaaaaaaaaaaa…"))
    }

    /// A tool output's images go on its result and again after the round
    /// trip's results; the store is where they are read.
    @Test func historyCarriesTheImagesOnTheResultAndAfterTheGroup() throws {
        let store = MediaStore(directory: nil)
        let block = try #require(MediaContent(block: Self.pixelBlock))
        let reference = try #require(try store.keep(block))
        let entries = [
            TranscriptEntry(id: "e1", .toolCalls(calls: [ToolCallRecord(callId: "c1", name: "shot", arguments: [:]), ToolCallRecord(callId: "c2", name: "x", arguments: [:])], profile: nil, text: nil)),
            TranscriptEntry(id: "e2", .toolOutput(callId: "c1", name: "shot", outcome: .ok, content: "s", profile: nil, media: [reference])),
            TranscriptEntry(id: "e3", .toolOutput(callId: "c2", name: "x", outcome: .ok, content: "t", profile: nil)),
        ]
        let image = ModelImage.data(bytes: Self.pixel, mimeType: "image/png")
        let (messages, ids) = ModelHistory.messagesWithEntryIDs(from: entries, media: store)
        #expect(messages.dropFirst() == [
            .toolResult(callId: "c1", name: "shot", content: "s", isError: false, images: [image]),
            .toolResult(callId: "c2", name: "x", content: "t", isError: false),
            .toolResultImages([image]),
        ])
        #expect(ids == ["e1", "e2", "e3", "e3"])
        // Without the store (or without the bytes), only the text goes.
        #expect(ModelHistory.messages(from: entries).count == 3)
    }
}
