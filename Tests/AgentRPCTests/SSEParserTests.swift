import Testing
@testable import AgentRPC

/// Feeds `chunks` through a fresh parser and flushes at EOF.
func parseSSE(_ chunks: [[UInt8]]) throws -> [SSEEvent] {
    var parser = SSEParser()
    var events: [SSEEvent] = []
    for chunk in chunks { events += try parser.feed(chunk) }
    events += parser.finish()
    return events
}

func parseSSE(_ text: String) throws -> [SSEEvent] {
    try parseSSE([Array(text.utf8)])
}

@Suite struct SSEParserTests {
    @Test func basicEventWithName() throws {
        let events = try parseSSE("event: ping\ndata: {\"a\":1}\n\n")
        #expect(events == [SSEEvent(event: "ping", data: "{\"a\":1}")])
    }

    @Test func allLineEndingsAreAccepted() throws {
        let lf = try parseSSE("data: a\n\ndata: b\n\n")
        let cr = try parseSSE("data: a\r\rdata: b\r\r")
        let crlf = try parseSSE("data: a\r\n\r\ndata: b\r\n\r\n")
        let expected = [SSEEvent(data: "a"), SSEEvent(data: "b")]
        #expect(lf == expected)
        #expect(cr == expected)
        #expect(crlf == expected)
    }

    @Test func crlfSplitAcrossChunksIsOneLineEnd() throws {
        // If the LF after a chunk-final CR were taken as a second line end, it
        // would dispatch the event early and the next data line would start a new one.
        let chunks: [[UInt8]] = [Array("data: a\r".utf8), Array("\ndata: b\r".utf8), Array("\n\r".utf8), Array("\n".utf8)]
        #expect(try parseSSE(chunks) == [SSEEvent(data: "a\nb")])
    }

    @Test func multiLineDataIsJoinedWithNewline() throws {
        let events = try parseSSE("data: first\ndata:second\ndata\ndata:  third\n\n")
        // "data" with no colon is an empty value; only one leading space is stripped.
        #expect(events == [SSEEvent(data: "first\nsecond\n\n third")])
    }

    @Test func commentsAreIgnored() throws {
        let events = try parseSSE(": keep-alive\n:\ndata: x\n: inside\n\n: trailing\n\n")
        #expect(events == [SSEEvent(data: "x")])
    }

    @Test func trailingSpacesInValuesAreKept() throws {
        let events = try parseSSE("event: delta  \ndata: {\"a\":1}   \n\n")
        #expect(events == [SSEEvent(event: "delta  ", data: "{\"a\":1}   ")])
    }

    @Test func eventWithoutDataIsNotDispatched() throws {
        #expect(try parseSSE("event: ping\n\ndata: x\n\n") == [SSEEvent(data: "x")])
    }

    @Test func idPersistsAndRetryIsIgnored() throws {
        let events = try parseSSE("id: 7\nretry: 100\ndata: a\n\ndata: b\n\n")
        #expect(events == [SSEEvent(data: "a", id: "7"), SSEEvent(data: "b", id: "7")])
    }

    @Test func utf8SplitAcrossChunks() throws {
        let text = "data: héllo 🌍 日本\n\n"
        let bytes = Array(text.utf8)
        let expected = [SSEEvent(data: "héllo 🌍 日本")]
        // Every split point, including inside the 4-byte emoji.
        for split in 1..<bytes.count {
            #expect(try parseSSE([Array(bytes[..<split]), Array(bytes[split...])]) == expected)
        }
        #expect(try parseSSE(bytes.map { [$0] }) == expected)
    }

    @Test func eofFlushesUnterminatedEvent() throws {
        #expect(try parseSSE("event: message_stop\ndata: {}") == [SSEEvent(event: "message_stop", data: "{}")])
        #expect(try parseSSE("data: {}\n") == [SSEEvent(data: "{}")])
        #expect(try parseSSE("data: {}\r") == [SSEEvent(data: "{}")])
        #expect(try parseSSE("") == [])
        #expect(try parseSSE("event: x\n") == [])
    }

    @Test func byteOrderMarkAtStartIsStripped() throws {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("data: a\n\n".utf8)
        #expect(try parseSSE([bytes]) == [SSEEvent(data: "a")])
    }

    @Test func aStreamOverItsTotalLimitIsRefusedEvenInSmallLines() throws {
        var parser = SSEParser(maximumStreamBytes: 40)
        let line = Array("data: 0123456789\n\n".utf8)  // 18 bytes
        #expect(try parser.feed(line).count == 1)
        #expect(try parser.feed(line).count == 1)
        #expect(throws: SSEParserError.self) { _ = try parser.feed(line) }
    }

    @Test func oversizedLineIsRefused() {
        var parser = SSEParser(maximumBufferedBytes: 16)
        #expect(throws: SSEParserError.self) {
            _ = try parser.feed(Array("data: 0123456789012345678901234".utf8))
        }
    }

    /// The events a parser lends out (`feed(_:each:)`, what the HTTP transport
    /// uses), made owned.
    static func lent(_ parser: inout SSEParser, _ chunk: [UInt8]) -> Result<[SSEEvent], SSEParserError> {
        var events: [SSEEvent] = []
        do {
            try chunk.withUnsafeBufferPointer { try parser.feed($0) { events.append($0.owned) } }
            return .success(events)
        } catch let error as SSEParserError {
            return .failure(error)
        } catch {
            Issue.record("unexpected \(error)")
            return .failure(SSEParserError(message: "\(error)"))
        }
    }

    /// Lines read in place (whole in a chunk), collected across chunks, or
    /// byte by byte (data, arrays and strings are parsed in runs between line
    /// ends, any other sequence byte by byte); events lent as bytes or returned
    /// as strings: all give the same events, and refuse at the same point with
    /// the same error, whatever the chunking and the limits.
    @Test func inPlaceCollectedAndLentEventsAgree() {
        var random = SplitMix64(state: 35)
        let pieces: [[UInt8]] = [
            Array("data: ".utf8), Array("event: x".utf8), Array("event:".utf8), Array("id: 7".utf8), Array(": note".utf8),
            [0x0D], [0x0A], [0x0D, 0x0A], Array("abc".utf8), Array("é".utf8), [0xC3, 0x28], [0xEF, 0xBB, 0xBF],
            Array("data:0123456789".utf8), Array(#"data: {"choices":[{"index":0,"delta":{"content":" t1"}}]}"#.utf8),
        ]
        for round in 0..<600 {
            var stream: [UInt8] = []
            for _ in 0..<Int.random(in: 0..<60, using: &random) { stream += pieces[Int.random(in: 0..<pieces.count, using: &random)] }
            let limits = round % 2 == 0
                ? (buffered: 16 * 1024 * 1024, total: SSEParser.defaultMaximumStreamBytes)
                : (buffered: Int.random(in: 1...60, using: &random), total: Int.random(in: 1...400, using: &random))
            var whole = SSEParser(maximumBufferedBytes: limits.buffered, maximumStreamBytes: limits.total)
            var lender = SSEParser(maximumBufferedBytes: limits.buffered, maximumStreamBytes: limits.total)
            var bytes = SSEParser(maximumBufferedBytes: limits.buffered, maximumStreamBytes: limits.total)
            // Chunks from one byte to the whole stream, so lines end inside and across them.
            let size = [1, 7, 64, stream.count + 1][round % 4]
            var start = 0
            var failed = false
            while start < stream.count {
                let end = min(stream.count, start + Int.random(in: 1...max(1, size), using: &random))
                let chunk = Array(stream[start..<end])
                start = end
                let a = Result { () throws(SSEParserError) in try whole.feed(chunk) }
                let b = Self.lent(&lender, chunk)
                let c = Result { () throws(SSEParserError) in try bytes.feed(chunk.lazy.map { $0 }) }
                #expect(a == b && a == c, "round \(round): \(stream)")
                if case .failure = a {
                    failed = true
                    break
                }
            }
            guard !failed else { continue }
            var finished: [SSEEvent] = []
            lender.finish { finished.append($0.owned) }
            let expected = whole.finish()
            #expect(finished == expected && bytes.finish() == expected, "round \(round): \(stream)")
        }
    }

    /// A chunk is parsed whole before its events go out: one that breaks a
    /// limit hands out none of them (what the transport relied on when the
    /// parser returned an array).
    @Test func aChunkOverALimitLendsNoneOfItsEvents() {
        var parser = SSEParser(maximumBufferedBytes: 16)
        var lent = 0
        #expect(throws: SSEParserError.self) {
            try Array("data: a\n\ndata: b\n\ndata: 0123456789012345678901234".utf8).withUnsafeBufferPointer {
                try parser.feed($0) { _ in lent += 1 }
            }
        }
        #expect(lent == 0)
    }

    /// The data is lent as it arrived; strings are made (and invalid UTF-8
    /// repaired) only when asked for.
    @Test func lentDataIsTheBytesAsReceived() throws {
        var parser = SSEParser()
        var seen: [([UInt8], String, String?)] = []
        let bytes: [UInt8] = Array("event: delta\ndata: a".utf8) + [0xC3, 0x28] + Array("\ndata: b\n\n".utf8)
        try bytes.withUnsafeBufferPointer { try parser.feed($0) { seen.append((Array($0.data), $0.dataText, $0.event)) } }
        #expect(seen.count == 1)
        #expect(seen.first?.0 == Array("a".utf8) + [0xC3, 0x28] + Array("\nb".utf8))
        #expect(seen.first?.1 == "a\u{FFFD}(\nb")
        #expect(seen.first?.2 == "delta")
    }

    /// The line end is found eight bytes at a time: the first CR or LF from
    /// any start, wherever it falls in a word, or the end.
    @Test func theLineEndIsTheFirstCROrLF() {
        var random = SplitMix64(state: 7)
        for _ in 0..<300 {
            let count = Int.random(in: 0..<40, using: &random)
            let bytes: [UInt8] = (0..<count).map { _ in
                switch Int.random(in: 0..<20, using: &random) {
                case 0: 0x0A
                case 1: 0x0D
                case 2: 0x8A
                case 3: 0x0B
                default: UInt8.random(in: 0x20...0xFF, using: &random)
                }
            }
            bytes.withUnsafeBufferPointer { buffer in
                for start in 0...count {
                    let expected = buffer[start...].firstIndex { $0 == 0x0A || $0 == 0x0D } ?? count
                    #expect(SSEParser.lineEnd(in: buffer, from: start) == expected, "\(bytes) from \(start)")
                }
            }
        }
    }
}
