import Foundation
import Testing

@testable import AgentRPCProtocol

/// `Message.decodeFrame` reads a success answer (`{"jsonrpc","id","result"}`,
/// the client's answer to every `tool/call`) straight from the bytes and
/// leaves every other frame to the full parse. Both ways, every frame the
/// committed transcripts send and every unusual one must classify the same.
@Suite struct MessageDirectReadingTests {
    /// Plain success answers, which the reader takes: member order,
    /// whitespace, escapes in the result, a repeated member inside the result
    /// (the last wins, as in the full parse), nesting up to the bound.
    static let answers: [String] = [
        #"{"jsonrpc":"2.0","id":1,"result":{"outcome":"ok","content":"ok"}}"#,
        #"{"result":{"outcome":"ok","content":"ok"},"id":7,"jsonrpc":"2.0"}"#,
        #"{"id":"s-1","jsonrpc":"2.0","result":null}"#,
        " \n{ \"jsonrpc\" : \"2.0\" ,\t\"id\" : 3 , \"result\" : [1, {\"a\": \"\\u00e9\"}] } \r\n",
        #"{"jsonrpc":"2.0","id":1,"result":{"outcome":"ok","content":"esc \" \\ \n \ud83d\ude00 é"}}"#,
        #"{"jsonrpc":"2.0","id":1,"result":{"outcome":"ok","content":"ok","content":"last"}}"#,
        #"{"jsonrpc":"2.0","id":-0,"result":{}}"#,
        #"{"jsonrpc":"2\u002e0","id":1,"result":{}}"#,
        #"{"jsonrpc":"2.0","id":1,"result":{"outcome":"ok","content":{"a":[1,2.5,true,null]},"undo":{"k":"v"}}}"#,
        #"{"jsonrpc":"2.0","id":1,"result":"#
            + String(repeating: "[", count: JSONValue.maximumNestingDepth - 1) + String(repeating: "]", count: JSONValue.maximumNestingDepth - 1) + "}",
    ]

    /// Everything else goes to the full parse: repeated, extra or escaped
    /// members, wrong types, error answers, requests, batches, too deep,
    /// invalid JSON.
    static let others: [String] = [
        #"{"jsonrpc":"2.0","id":1,"result":{"outcome":"ok","content":"lone \ud83d"}}"#,
        #"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#,
        #"{"jsonrpc":"2.0","id":1,"result":1,"result":2}"#,
        #"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"result":{}}"#,
        #"{"jsonrpc":"2.0","id":1,"result":{},"extra":true}"#,
        #"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
        #"{"jsonrpc":"2.0","id":1,"result":{},"method":"x"}"#,
        #"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"tool failed","data":{"x":1}}}"#,
        #"{"jsonrpc":"2.0","id":1,"error":{"code":"nope","message":"m"}}"#,
        #"{"jsonrpc":"2.0","id":null,"result":{}}"#,
        #"{"jsonrpc":"2.0","id":1.5,"result":{}}"#,
        #"{"jsonrpc":"2.0","id":1.0,"result":{}}"#,
        #"{"jsonrpc":"2.0","id":1e2,"result":{}}"#,
        #"{"jsonrpc":"2.0","id":99999999999999999999,"result":{}}"#,
        #"{"jsonrpc":"2.0","id":true,"result":{}}"#,
        #"{"jsonrpc":"2.0","id":{},"result":{}}"#,
        #"{"jsonrpc":"2.0","result":{}}"#,
        #"{"jsonrpc":"2.0","id":1}"#,
        #"{"id":1,"result":{}}"#,
        #"{"jsonrpc":"2.1","id":1,"result":{}}"#,
        #"{"jsonrpc":2,"id":1,"result":{}}"#,
        #"{"json\u0072pc":"2.0","id":1,"result":{}}"#,
        #"{"jsonrpc":"2.0","\u0069d":1,"result":{}}"#,
        #"{"jsonrpc":"2.0","id":1,"résult":{}}"#,
        #"{"jsonrpc":"2.0","id":1,"result":{}} x"#,
        #"{"jsonrpc":"2.0","id":1,"result":{}"#,
        #"{"jsonrpc":"2.0","id":1,"result":}"#,
        #"{"jsonrpc":"2.0","id":1,"result":{},}"#,
        #"{"jsonrpc":"2.0","id":1 "result":{}}"#,
        #"{"jsonrpc":"2.0","id":1,"result":{"outcome":"ok","content":"ok"}"#,
        #"{"jsonrpc":"2.0","id":2,"method":"session/send","params":{"sessionId":"s","input":"hi"}}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}"#,
        #"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]"#,
        #"[]"#, #"{}"#, #"null"#, #""#, #"   "#, #"{"#, "\u{FEFF}{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
        #"{"jsonrpc":"2.0","id":1,"result":{"outcome":"ok","content":"ok"}}"# + "\u{0}",
        #"{"jsonrpc":"2.0","id":1,"result":"#
            + String(repeating: "[", count: JSONValue.maximumNestingDepth) + String(repeating: "]", count: JSONValue.maximumNestingDepth) + "}",
    ]

    /// Every frame the committed transcripts send (`send`, `reply`, `sendRaw`).
    static func transcriptFrames() throws -> [String] {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Transcripts")
        guard let walker = FileManager.default.enumerator(atPath: directory.path) else { return [] }
        var frames: [String] = []
        for case let path as String in walker where path.hasSuffix(".jsonl") {
            let text = try String(contentsOfFile: directory.appendingPathComponent(path).path, encoding: .utf8)
            for line in text.split(separator: "\n") {
                guard case .object(let step)? = try? JSONValue.parse(String(line)) else { continue }
                for key in ["send", "reply"] { if let frame = step[key] { frames.append(frame.serializedString()) } }
                if case .string(let raw)? = step["sendRaw"] { frames.append(raw) }
            }
        }
        return frames
    }

    @Test func bothWaysClassifyEveryFrameAlike() throws {
        let transcripts = try Self.transcriptFrames()
        #expect(transcripts.count > 1000)
        var recognised = 0
        for frame in Self.answers + Self.others + transcripts {
            let bytes = Array(frame.utf8)
            let direct = Message.decodeFrame(bytes)
            let full = Message.decodeFrameFully(bytes)
            #expect(Self.same(direct, full), "\(frame.prefix(300)): \(direct) vs \(full)")
            if Message.readSuccessAnswer(bytes) != nil { recognised += 1 }
        }
        // The direct reader did run: every plain answer in the transcripts is one.
        #expect(recognised > 150)
    }

    /// Which frames the reader takes (the rest go to the full parse).
    @Test func recognisesOnlyPlainSuccessAnswers() {
        for frame in Self.answers { #expect(Message.readSuccessAnswer(Array(frame.utf8)) != nil, "\(frame.prefix(200))") }
        for frame in Self.others { #expect(Message.readSuccessAnswer(Array(frame.utf8)) == nil, "\(frame.prefix(200))") }
    }

    static func same(_ a: IncomingFrame, _ b: IncomingFrame) -> Bool {
        switch (a, b) {
        case (.single(let x), .single(let y)): return same(x, y)
        case (.batch(let xs), .batch(let ys)): return xs.count == ys.count && zip(xs, ys).allSatisfy { same($0, $1) }
        case (.emptyBatch, .emptyBatch): return true
        default: return false
        }
    }

    static func same(_ a: DecodedMessage, _ b: DecodedMessage) -> Bool {
        switch (a, b) {
        case (.message(let x), .message(let y)): return x == y
        case (.invalid(let i, let e), .invalid(let j, let f)): return i == j && e == f
        default: return false
        }
    }
}
