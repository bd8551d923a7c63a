import Testing

@testable import AgentRPCProtocol

/// `JSONTextParser.skipValue` reads past a value without building it: it must
/// accept exactly what `parseValue` accepts and stop where it stops, or a
/// decoder that skips members would take a chunk the full parse refuses.
@Suite struct JSONSkipValueTests {
    static let texts: [String] = [
        #"null"#, #"true"#, #"false"#, #"nul"#, #"tru"#, #"0"#, #"-12.5e3"#, #"01"#, #"1."#, #"-"#, #"1e"#,
        #""""#, #""plain ascii id chatcmpl-ABfw031mOJeYCSHe4yI2ZjOA6kMJL""#, #""é and ☃""#, #""esc \" \\ \/ \n \u00e9""#,
        #""\ud83d\ude00""#, #""\ud83d""#, #""\ude00 x""#, #""\x""#, #""\u12G4""#, #""unterminated"#, "\"tab\there\"",
        "\"\u{7F}\"", #"{}"#, #"[]"#, #"{"a":1,"b":[1,2,{"c":null}],"d":{"e":"f"}}"#, #"{"a":1,}"#, #"[1,]"#, #"[1 2]"#,
        #"{"a" 1}"#, #"{1:2}"#, #"{"a":1"#, #"["#, #"{"k\u0065y":"v"}"#, #"{"é":"v"}"#, #"[[[[[[[[]]]]]]]]"#, "",
        String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
    ]

    @Test(arguments: [JSONValue.LoneSurrogates.reject, .mark])
    func skipAcceptsWhatParseAcceptsAndStopsWhereItStops(_ mode: JSONValue.LoneSurrogates) {
        for text in Self.texts {
            // A byte after the value shows where each stopped.
            for bytes in [Array(text.utf8), Array(text.utf8) + [UInt8(ascii: ",")], Array(text.utf8) + [0xC3]] {
                bytes.withUnsafeBufferPointer { buffer in
                    var parsing = JSONTextParser(buffer, loneSurrogates: mode)
                    let parsed = (try? parsing.parseValue()) != nil
                    var skipping = JSONTextParser(buffer, loneSurrogates: mode)
                    let skipped = (try? skipping.skipValue()) != nil
                    #expect(parsed == skipped, "\(text): parsed \(parsed), skipped \(skipped)")
                    if parsed && skipped { #expect(parsing.index == skipping.index, "\(text)") }
                    #expect(skipping.depth == parsing.depth || !parsed, "\(text)")
                }
            }
        }
    }

    /// `plainString` (eight bytes at a time) takes a string exactly when a
    /// byte-by-byte scan finds its closing quote before a backslash, a control
    /// character or a non-ASCII byte, wherever in the eight that byte is.
    @Test func plainStringsAreWhatAByteByByteScanFinds() {
        func scan(_ bytes: [UInt8]) -> (content: [UInt8], end: Int)? {
            for i in 1..<bytes.count {
                let b = bytes[i]
                if b == UInt8(ascii: "\"") { return (Array(bytes[1..<i]), i + 1) }
                if b == UInt8(ascii: "\\") || b < 0x20 || b >= 0x80 { return nil }
            }
            return nil
        }
        let odd: [UInt8] = [0x00, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F, 0x80, 0xA2, 0xC3, 0xDC, 0xFF]
        for length in 0...26 {
            for position in 0..<max(length, 1) {
                for byte in odd {
                    var content = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    if length > 0 { content[position] = byte }
                    for text in [[0x22] + content + [0x22] + Array("tail!".utf8), [0x22] + content] {
                        text.withUnsafeBufferPointer { buffer in
                            var parser = JSONTextParser(buffer, loneSurrogates: .reject)
                            let plain = parser.plainString().map(Array.init)
                            let expected = scan(text)
                            #expect(plain == expected?.content, "\(text)")
                            #expect(parser.index == (expected?.end ?? 0), "\(text)")
                        }
                    }
                }
            }
        }
    }

    /// Invalid UTF-8 inside a skipped string is refused as the parse refuses it.
    @Test func invalidUTF8InASkippedStringIsRefused() {
        for bad: [UInt8] in [[0xFF], [0xC3], [0xED, 0xA0, 0x80], [0x00], [0x1F]] {
            let bytes = Array(#"{"a":"x"#.utf8) + bad + Array(#"y"}"#.utf8)
            bytes.withUnsafeBufferPointer { buffer in
                var skipping = JSONTextParser(buffer, loneSurrogates: .mark)
                #expect((try? skipping.skipValue()) == nil, "\(bad)")
            }
        }
    }
}
