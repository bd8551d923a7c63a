import Testing
@testable import AgentRPCProtocol

@Suite struct FramingTests {
    func frames(_ input: [UInt8], chunk: Int, max: Int = 1 << 20) -> [FrameEvent] {
        var parser = FrameParser(maxMessageBytes: max)
        var out: [FrameEvent] = []
        var i = 0
        while i < input.count {
            parser.append(input[i..<min(input.count, i + chunk)])
            i += chunk
            while let e = parser.next() { out.append(e) }
        }
        while let e = parser.finish() { out.append(e) }
        return out
    }

    @Test func newlineFramesInAnyChunking() {
        let text = Array("{\"a\":1}\n\r\n{\"b\":2}\r\n  \n{\"c\":3}".utf8)
        let expected: [FrameEvent] = [.frame(Array("{\"a\":1}".utf8)), .frame(Array("{\"b\":2}".utf8)), .frame(Array("{\"c\":3}".utf8))]
        for chunk in [1, 2, 3, 7, 100] {
            #expect(frames(text, chunk: chunk) == expected)
        }
    }

    @Test func contentLengthIsDetectedFromTheFirstBytes() {
        let body1 = Array("{\"id\":1}".utf8), body2 = Array("{\"x\":\"\n\"}".utf8)
        let text = Framing.contentLength.frame(body1) + Array("content-length: \(body2.count)\r\nContent-Type: application/json\r\n\r\n".utf8) + body2
        for chunk in [1, 5, 1000] {
            var parser = FrameParser(maxMessageBytes: 100)
            var out: [FrameEvent] = []
            var i = 0
            while i < text.count {
                parser.append(text[i..<min(text.count, i + chunk)]); i += chunk
                while let e = parser.next() { out.append(e) }
            }
            #expect(parser.framing == .contentLength)
            #expect(out == [.frame(body1), .frame(body2)])
        }
    }

    @Test func oversizedLineIsSkippedWholeAndItsIdRecovered() {
        let big = "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"x\",\"params\":{\"p\":\"" + String(repeating: "a", count: 500) + "\"}}"
        let text = Array((big + "\n{\"ok\":true}\n").utf8)
        for chunk in [1, 16, 10_000] {
            let out = frames(text, chunk: chunk, max: 100)
            #expect(out == [.oversized(byteCount: big.utf8.count, id: .int(42)), .frame(Array("{\"ok\":true}".utf8))])
        }
    }

    @Test func oversizedHeaderFramedBodyIsSkipped() {
        let big = Array(("{\"params\":{\"id\":7},\"id\":\"abc\",\"pad\":\"" + String(repeating: "b", count: 300) + "\"}").utf8)
        let small = Array("{}".utf8)
        let text = Framing.contentLength.frame(big) + Framing.contentLength.frame(small)
        for chunk in [1, 33, 5000] {
            var parser = FrameParser(maxMessageBytes: 64)
            var out: [FrameEvent] = []
            var i = 0
            while i < text.count {
                parser.append(text[i..<min(text.count, i + chunk)]); i += chunk
                while let e = parser.next() { out.append(e) }
            }
            #expect(out == [.oversized(byteCount: big.count, id: .string("abc")), .frame(small)])
        }
    }

    @Test func malformedHeaderResynchronises() {
        let text = Array("Content-Length: nope\r\n\r\nContent-Length: 2\r\n\r\n{}".utf8)
        var parser = FrameParser(maxMessageBytes: 64)
        parser.append(text)
        var out: [FrameEvent] = []
        while let e = parser.next() { out.append(e) }
        #expect(out.count == 2)
        if case .malformedHeader = out.first {} else { Issue.record("expected malformedHeader, got \(out)") }
        #expect(out.last == .frame(Array("{}".utf8)))
    }

    @Test func lastLineWithoutNewlineIsDeliveredAtFinish() {
        #expect(frames(Array("{\"a\":1}".utf8), chunk: 3) == [.frame(Array("{\"a\":1}".utf8))])
    }

    // MARK: Content-Length out of step with the body (docs/protocol.md §13, "Framing and JSON")

    func lsp(_ body: String, declaring length: Int? = nil) -> [UInt8] {
        Array("Content-Length: \(length ?? body.utf8.count)\r\n\r\n\(body)".utf8)
    }

    /// Splits events into their kinds for easy comparison (reasons are prose).
    func kinds(_ events: [FrameEvent]) -> [String] {
        events.map { event in
            switch event {
            case .frame(let b): return "frame " + String(decoding: b, as: UTF8.self)
            case .oversized(let n, let id): return "oversized \(n) \(id.map(String.init(describing:)) ?? "nil")"
            case .malformedHeader: return "malformed"
            case .desynchronized(_, let id): return "desync \(id.map(String.init(describing:)) ?? "nil")"
            }
        }
    }

    @Test func overstatedLengthIsAnsweredOnceAndTheNextFramesAreRead() {
        let a = #"{"jsonrpc":"2.0","id":1,"method":"session/list"}"#
        let b = #"{"jsonrpc":"2.0","id":2,"method":"session/list"}"#
        let c = #"{"jsonrpc":"2.0","id":3,"method":"session/list"}"#
        let text = lsp(a, declaring: a.utf8.count + 40) + lsp(b) + lsp(c)
        for chunk in [1, 7, 64, 10_000] {
            #expect(kinds(frames(text, chunk: chunk)) == ["desync 1", "frame " + b, "frame " + c], "chunk \(chunk)")
        }
    }

    @Test func overstatedLengthBeyondTheLimitDoesNotSwallowTheNextFrames() {
        let a = #"{"jsonrpc":"2.0","id":"x","method":"session/list"}"#
        let b = #"{"id":2}"#
        let text = lsp(a, declaring: 1_000_000) + lsp(b)
        for chunk in [1, 9, 10_000] {
            #expect(kinds(frames(text, chunk: chunk, max: 4096)) == ["desync \"x\"", "frame " + b], "chunk \(chunk)")
        }
    }

    @Test func understatedLengthIsAnsweredOnceAndTheNextFramesAreRead() {
        // The first 20 bytes are the frame (malformed JSON, answered as such);
        // the rest of the body, up to the next header, is not answered again.
        let a = #"{"jsonrpc":"2.0","id":1,"method":"x","params":{"url":"http://example.com:80/a"}}"#
        let b = #"{"id":2}"#
        let text = lsp(a, declaring: 20) + lsp(b)
        for chunk in [1, 5, 10_000] {
            #expect(kinds(frames(text, chunk: chunk)) == ["frame " + String(a.prefix(20)), "frame " + b], "chunk \(chunk)")
        }
    }

    @Test func aNewlineFramedMessageAfterContentLengthFramingIsServed() {
        let a = #"{"id":1}"#, line = #"{"id":2,"method":"session/list"}"#, c = #"{"id":3}"#
        let text = lsp(a) + Array((line + "\n").utf8) + lsp(c) + Array((line + "\r\n").utf8)
        for chunk in [1, 4, 10_000] {
            #expect(kinds(frames(text, chunk: chunk)) == ["frame " + a, "frame " + line, "frame " + c, "frame " + line], "chunk \(chunk)")
        }
        // Without its newline it is served at the next header, or at end of input.
        #expect(kinds(frames(lsp(a) + Array(line.utf8) + lsp(c) + Array(line.utf8), chunk: 3)) == ["frame " + a, "frame " + line, "frame " + c, "frame " + line])
    }

    @Test func bytesOutsideAnyFrameAreAnsweredOncePerGap() {
        let a = #"{"id":1}"#, b = #"{"id":2}"#
        let text = lsp(a) + Array("hello\nworld\n".utf8) + lsp(b) + Array("again".utf8)
        for chunk in [1, 6, 10_000] {
            #expect(kinds(frames(text, chunk: chunk)) == ["frame " + a, "malformed", "frame " + b, "malformed"], "chunk \(chunk)")
        }
    }

    @Test func inputEndingInsideABodyIsAnsweredOnce() {
        let a = #"{"jsonrpc":"2.0","id":7,"method":"session/list"}"#
        #expect(kinds(frames(lsp(a, declaring: 500), chunk: 10)) == ["desync 7"])
    }

    @Test func aHeaderLineNeverAppearsInValidJSON() {
        // The text of a header inside a JSON string is not a header (no raw line break).
        let a = #"{"id":1,"params":{"h":"Content-Length: 12\r\n\r\nx"}}"#
        #expect(kinds(frames(lsp(a) + lsp(a), chunk: 3)) == ["frame " + a, "frame " + a])
    }
}
