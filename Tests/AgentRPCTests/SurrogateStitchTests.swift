import Testing
import AgentRPCProtocol
@testable import AgentRPC

/// Surrogate pairs split across streamed deltas (docs/protocol.md, "Providers").
@Suite struct SurrogateStitchTests {
    @Test func strictParsingStillRejectsALoneSurrogate() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(#""A\ud83d""#) }
        #expect(throws: JSONParseError.self) { try JSONValue.parse(#""\ude00B""#) }
    }

    @Test func markedParsingKeepsALoneSurrogateAsAMarker() throws {
        let value = try JSONValue.parse(#""A\ud83d""#, loneSurrogates: .mark)
        let last = try #require(value.stringValue?.unicodeScalars.last)
        #expect(JSONValue.loneSurrogate(in: last) == 0xD83D)
        // A real pair in one document is still one scalar.
        #expect(try JSONValue.parse(#""\ud83d\ude00""#, loneSurrogates: .mark).stringValue == "😀")
        // A high surrogate followed by a non-low escape: both halves parsed on their own.
        let mixed = try JSONValue.parse(#""\ud83d\u0041""#, loneSurrogates: .mark).stringValue
        #expect(mixed?.unicodeScalars.count == 2 && mixed?.hasSuffix("A") == true)
    }

    @Test func openAIChatRejoinsAPairSplitAcrossChunks() throws {
        let chunks = [
            #"data: {"choices":[{"index":0,"delta":{"content":"A\ud83d"}}]}"# + "\n\n",
            #"data: {"choices":[{"index":0,"delta":{"content":"\ude00B"}}]}"# + "\n\n",
            #"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"# + "\n\ndata: [DONE]\n\n",
        ]
        var decoder = OpenAIChatStreamDecoder()
        let events = try decoder.decodeAll(chunks: chunks.map { Array($0.utf8) })
        let text = events.compactMap { if case .textDelta(let t) = $0 { t } else { nil } }.joined()
        #expect(text == "A😀B")
    }

    @Test func aTrulyLoneSurrogateBecomesReplacementCharacter() {
        var stitcher = SurrogateStitcher()
        let high = "A" + String(Character(Unicode.Scalar(JSONValue.loneSurrogateMarkerBase + 0x3D)!))
        let low = String(Character(Unicode.Scalar(JSONValue.loneSurrogateMarkerBase + 0x600)!)) + "B"
        #expect(stitcher.process([.textDelta(high)]) == [.textDelta("A")])
        #expect(stitcher.process([.textDelta("C")]) == [.textDelta("\u{FFFD}C")])
        #expect(stitcher.process([.textDelta(low)]) == [.textDelta("\u{FFFD}B")])
        #expect(stitcher.process([.textDelta(high), .end(.endTurn)]) == [.textDelta("A"), .textDelta("\u{FFFD}"), .end(.endTurn)])
    }
}
