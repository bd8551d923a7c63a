import AgentRPCProtocol
import Foundation
import Testing

@testable import AgentRPC

/// A journal file is read a line at a time through one reused buffer
/// (`JournalFileLines`): it must give exactly the lines, torn tail and byte
/// counts that the same bytes give in memory (`JournalBufferLines`), wherever
/// the lines fall against the buffer, however `read` splits the file, and for
/// lines longer than the buffer.
@Suite struct JournalFileLinesTests {
    private struct Read: Equatable {
        var lines: [[UInt8]]
        var consumed: Int
        var rest: Int
    }

    private static func collect(_ source: inout some JournalLineSource) throws -> Read {
        var lines: [[UInt8]] = []
        while let line = try source.next() { lines.append(Array(line)) }
        return Read(lines: lines, consumed: source.consumed, rest: source.rest)
    }

    private static func inMemory(_ bytes: [UInt8]) throws -> Read {
        try bytes.withUnsafeBufferPointer { buffer in
            var source = JournalBufferLines(buffer)
            return try collect(&source)
        }
    }

    private static func temporaryDirectory() throws -> String {
        let dir = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-lines-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    private static func fromFile(_ bytes: [UInt8]) throws -> Read {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/j.jsonl"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        let fd = open(path, O_RDONLY)
        #expect(fd >= 0)
        defer { close(fd) }
        // With the file's size (a long line grows the buffer to the rest of
        // it), and with a size that is wrong either way (the file changed).
        var reads: [Read] = []
        for expectedSize in [bytes.count, 0, bytes.count / 3, bytes.count * 2 + 5] {
            #expect(lseek(fd, 0, SEEK_SET) == 0)
            var source = JournalFileLines(fd: fd, expectedSize: expectedSize)
            defer { source.release() }
            reads.append(try collect(&source))
        }
        #expect(Set(reads.map(\.consumed)).count == 1 && reads.dropFirst().allSatisfy { $0 == reads[0] })
        return reads[0]
    }

    /// Through a pipe, whose reads return whatever the writer has written so
    /// far: lines arrive cut at arbitrary places.
    private static func fromPipe(_ bytes: [UInt8], writes: Int) throws -> Read {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let (readEnd, writeEnd) = (ends[0], ends[1])
        let writer = Thread {
            var offset = 0
            while offset < bytes.count {
                let n = min(writes, bytes.count - offset)
                let written = bytes[offset..<offset + n].withUnsafeBytes { write(writeEnd, $0.baseAddress, n) }
                if written <= 0 { break }
                offset += written
            }
            close(writeEnd)
        }
        writer.start()
        defer { close(readEnd) }
        var source = JournalFileLines(fd: readEnd)
        defer { source.release() }
        return try collect(&source)
    }

    /// Lines of every length around the buffer's size, one several times
    /// longer than it, empty lines, and a torn tail longer than the buffer.
    private static func awkwardBytes() -> [UInt8] {
        let capacity = JournalFileLines.initialCapacity
        var bytes: [UInt8] = []
        var seed: UInt64 = 42
        func next() -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(seed >> 33)
        }
        for length in [0, 1, 0, capacity - 1, capacity, capacity + 1, 5 * capacity + 3, 2, 0] + (0..<300).map({ _ in next() % 900 }) {
            bytes += (0..<length).map { UInt8(0x61 + ($0 % 26)) }
            bytes.append(0x0A)
        }
        bytes += [UInt8](repeating: 0x7A, count: 3 * capacity + 7)
        return bytes
    }

    @Test func aFileGivesTheLinesItsBytesGive() throws {
        for bytes in [[], Array("x".utf8), Array("\n".utf8), Array("\n\n".utf8), Array("a\nb".utf8), Array("a\nb\n".utf8), Self.awkwardBytes()] {
            let expected = try Self.inMemory(bytes)
            #expect(expected.consumed + expected.rest == bytes.count)
            #expect(try Self.fromFile(bytes) == expected, "\(bytes.count) bytes")
        }
        // The in-memory lines are the bytes split at their newlines.
        let awkward = Self.awkwardBytes()
        let split = awkward.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init)
        #expect(try Self.inMemory(awkward).lines == Array(split.dropLast()))
        #expect(try Self.inMemory(awkward).rest == split.last?.count)
    }

    @Test func readsThatStopAnywhereGiveTheSameLines() throws {
        let bytes = Self.awkwardBytes()
        let expected = try Self.inMemory(bytes)
        for writes in [1 << 20, 4096, 997, 1] where writes > 1 || bytes.count < 2_000_000 {
            #expect(try Self.fromPipe(bytes, writes: writes) == expected, "writes of \(writes)")
        }
    }

    /// The whole load, from a file and from the same bytes, across a snapshot
    /// line longer than the buffer, a line that does not load and a torn tail.
    @Test func loadingAFileIsLoadingItsBytes() throws {
        let at = Date(timeIntervalSince1970: 1_700_000_000.5)
        var bytes = JournalCodec.headerLine(JournalHeader(sessionID: "s-lines", createdAt: at, config: [:]))
        var state = Transcript(properties: [:], createdAt: at)
        var number = 0
        func turn(_ text: String) throws -> [UInt8] {
            number += 1
            let id = "t-\(number)"
            var lines = try JournalCodec.line(for: .turnStarted(turnId: id, number: number), at: at)
            for entry in [TranscriptEntry(id: "e\(2 * number - 1)", turnId: id, .prompt(text: text, images: nil)),
                          TranscriptEntry(id: "e\(2 * number)", turnId: id, .response(text: text + "!", profile: "default", incomplete: false))]
            {
                let change = TranscriptChange.entryAppended(entry, nextEntryNumber: Int(entry.id.dropFirst())! + 1)
                try state.replay(change, at: at)
                lines += try JournalCodec.line(for: change, at: at)
            }
            let end = TurnEnd(turnId: id, status: .completed, stopReason: .completed, usage: Usage(inputTokens: 3, outputTokens: 4), undo: .none)
            try state.replay(.turnEnded(end), at: at)
            return lines + (try JournalCodec.line(for: .turnEnded(end), at: at))
        }
        for i in 0..<400 { bytes += try turn("question \(i) " + String(repeating: "x", count: i % 97)) }
        let snapshot = try JournalCodec.snapshotLine(state, at: at)
        #expect(snapshot.count > JournalFileLines.initialCapacity)
        bytes += snapshot
        for i in 0..<300 { bytes += try turn("after \(i)") }
        let good = bytes
        bytes += Array(#"{"type":"turnStarted","at":1,"turnId":"t-x","number":"#.utf8) + [0x0A]
        for i in 0..<5 { bytes += try turn("never \(i)") }
        bytes += Array(#"{"type":"turnStarted","at":1,"turnI"#.utf8)

        for journal in [good, bytes] {
            let dir = try Self.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let path = dir + "/s-lines.jsonl"
            #expect(FileManager.default.createFile(atPath: path, contents: Data(journal)))
            let fromFile = try JournalStore.loadFile(path).contents
            let fromBytes = try JournalCodec.load(journal)
            #expect(fromFile.transcript.entries == fromBytes.transcript.entries)
            #expect(fromFile.transcript.entries.count == 1400)
            #expect(fromFile.transcript.revision == fromBytes.transcript.revision)
            #expect(fromFile.transcript.updatedAt == fromBytes.transcript.updatedAt)
            #expect(fromFile.warnings == fromBytes.warnings)
            #expect(fromFile.tornBytes == fromBytes.tornBytes)
            #expect(fromFile.validLength == fromBytes.validLength)
            #expect(fromFile.fileLength == journal.count && fromBytes.fileLength == journal.count)
            #expect(fromFile.recordsSinceSnapshot == fromBytes.recordsSinceSnapshot)
            #expect(fromFile.recordsSinceSnapshot == 300 * 4)
            if journal.count > good.count {
                #expect(fromFile.warnings.map(\.line) == [1 + 400 * 4 + 1 + 300 * 4 + 1])
                #expect(fromFile.warnings.first?.message.contains("the 20 line(s) after it were not loaded") == true)
                #expect(fromFile.validLength == good.count && fromFile.tornBytes == 35)
            } else {
                #expect(fromFile.warnings.isEmpty && fromFile.validLength == good.count && fromFile.tornBytes == 0)
            }
        }
    }

    /// A journal that cannot be read is a typed error, not a torn journal: a
    /// missing file is `storeUnavailable` with its errno (`invalidParams` for
    /// `sessions import`), and anything but a regular file (here a directory,
    /// which opens but does not read) is `journalUnreadable` without a read.
    @Test func aFileThatDoesNotReadIsAnError() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let missing = dir + "/missing.jsonl"
        #expect {
            _ = try JournalStore.loadFile(missing)
        } throws: { error in
            guard let error = error as? RPCError else { return false }
            return error.data["kind"] == "storeUnavailable" && error.message.hasPrefix("cannot read \(missing)") && error.data["errno"] == .int(Int(ENOENT))
        }
        #expect {
            _ = try JournalStore.loadFile(dir)
        } throws: { error in
            guard let error = error as? RPCError else { return false }
            return error.data["kind"] == "journalUnreadable" && error.message == "\(dir) is not a regular file"
        }
        let store = JournalStore(directory: dir + "/store", logger: Logger(level: .off))
        #expect {
            _ = try store.importSession(from: missing)
        } throws: { error in
            guard let error = error as? RPCError else { return false }
            return error.data["kind"] == "invalidParams" && error.message == "cannot read \(missing)"
        }
        #expect {
            _ = try store.importSession(from: dir)
        } throws: { error in
            (error as? RPCError)?.data["kind"] == "journalUnreadable"
        }
    }
}
