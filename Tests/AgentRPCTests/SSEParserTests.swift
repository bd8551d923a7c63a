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

    /// Data, arrays and strings are parsed in runs between line ends, any other
    /// sequence byte by byte: both must give the same events and refuse at the
    /// same point with the same error, whatever the chunking and the limits.
    @Test func contiguousAndByteByBytePathsAgree() {
        var random = SplitMix64(state: 18)
        let pieces: [[UInt8]] = [
            Array("data: ".utf8), Array("event: x".utf8), Array("id: 7".utf8), Array(": note".utf8),
            [0x0D], [0x0A], [0x0D, 0x0A], Array("abc".utf8), Array("é".utf8), [0xEF, 0xBB, 0xBF], Array("data:0123456789".utf8),
        ]
        for round in 0..<400 {
            var stream: [UInt8] = []
            for _ in 0..<Int.random(in: 0..<40, using: &random) { stream += pieces[Int.random(in: 0..<pieces.count, using: &random)] }
            let limits = round % 2 == 0
                ? (buffered: 16 * 1024 * 1024, total: SSEParser.defaultMaximumStreamBytes)
                : (buffered: Int.random(in: 1...30, using: &random), total: Int.random(in: 1...200, using: &random))
            var runs = SSEParser(maximumBufferedBytes: limits.buffered, maximumStreamBytes: limits.total)
            var bytes = SSEParser(maximumBufferedBytes: limits.buffered, maximumStreamBytes: limits.total)
            var start = 0
            while start < stream.count {
                let end = min(stream.count, start + Int.random(in: 1...12, using: &random))
                let chunk = Array(stream[start..<end])
                start = end
                let a = Result { () throws(SSEParserError) in try runs.feed(chunk) }
                let b = Result { () throws(SSEParserError) in try bytes.feed(chunk.lazy.map { $0 }) }
                #expect(a == b, "round \(round): \(stream)")
                if case .failure = a { break }
            }
            #expect(runs.finish() == bytes.finish(), "round \(round): \(stream)")
        }
    }
}

