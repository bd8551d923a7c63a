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
}
