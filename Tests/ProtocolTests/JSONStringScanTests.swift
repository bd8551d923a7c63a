import Foundation
import Testing

@testable import AgentRPCProtocol

/// Strings are scanned eight bytes at a time until a quote, a backslash or a
/// control character: whatever byte ends the scan, wherever it falls in a
/// word, a string parses as Foundation's parser reads it, and a control
/// character or invalid UTF-8 is refused wherever it is.
@Suite struct JSONStringScanTests {
    @Test func everyStopByteAtEveryPositionParsesAsFoundationReadsIt() throws {
        let plain = Array("abcdefghijklmnopqrstuvwxyz0123".utf8)
        let inserts: [[UInt8]] = [
            Array(#"\""#.utf8), Array(#"\\"#.utf8), Array(#"\n"#.utf8), Array(#"\u00e9"#.utf8), Array(#"\ud83d\ude00"#.utf8),
            Array("é".utf8), Array("😀".utf8), Array("\u{7F}".utf8), [0x20], Array("~".utf8), Array("!#".utf8),
        ]
        for length in 0..<plain.count {
            for insert in inserts {
                for at in 0...length {
                    let body = Array(plain[..<at]) + insert + Array(plain[at..<length])
                    let text = [UInt8(ascii: "\"")] + body + [UInt8(ascii: "\"")]
                    let ours = try JSONValue.parse(String(decoding: text, as: UTF8.self))
                    let theirs = try JSONSerialization.jsonObject(with: Data(text), options: .fragmentsAllowed) as? String
                    #expect(ours == .string(theirs ?? "<not a string>"), "\(String(decoding: text, as: UTF8.self))")
                }
            }
        }
    }

    @Test func aControlCharacterOrInvalidUTF8IsRefusedWhereverItIs() {
        let plain = Array("abcdefghijklmnopqrstuvwxyz".utf8)
        for bad: [UInt8] in [[0x00], [0x01], [0x0A], [0x1F], [0xFF], [0xC3], [0xED, 0xA0, 0x80]] {
            for at in 0...plain.count {
                let text = [UInt8(ascii: "\"")] + Array(plain[..<at]) + bad + Array(plain[at...]) + [UInt8(ascii: "\"")]
                let parsed = text.withUnsafeBufferPointer { buffer -> Bool in
                    var parser = JSONTextParser(buffer, loneSurrogates: .reject)
                    return (try? parser.parseString()) != nil
                }
                #expect(!parsed, "\(bad) at \(at)")
            }
        }
    }

    /// The writer tests eight bytes at a time as well: every byte that needs
    /// an escape, at every position of strings around a word's length, is
    /// escaped as one byte at a time would, and the text parses back.
    @Test func everyByteToEscapeAtEveryPositionIsWrittenAsOneByteAtATimeWould() throws {
        // The plain writer JSONStageTests holds every writer to.
        func reference(_ s: String) -> [UInt8] {
            var out: [UInt8] = []
            JSONStageTests.referenceString(s, into: &out)
            return out
        }
        let plain = Array("abcdefghijklmnopqrstuvwxyz0123".utf8)
        let inserts: [[UInt8]] = (0..<0x20).map { [UInt8($0)] } + [[0x22], [0x5C], [0x21], [0x23], [0x5B], [0x5D], [0x7F], Array("é".utf8), Array("😀".utf8), [0x22, 0x5C, 0x0A]]
        for length in 0..<20 {
            for insert in inserts {
                for at in 0...length {
                    let string = String(decoding: Array(plain[..<at]) + insert + Array(plain[at..<length]), as: UTF8.self)
                    let written = JSONValue.string(string).serialized()
                    #expect(written == reference(string), "\(Array(string.utf8))")
                    #expect(try JSONValue.parse(written) == .string(string))
                }
            }
        }
    }
}
