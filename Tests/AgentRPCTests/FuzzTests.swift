import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// Random and mutated frames through the real framer and dispatcher: the
/// server must neither crash nor hang, and must still answer afterwards.
@Suite struct FuzzTests {
    struct SeededGenerator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            var x = state
            x ^= x >> 33; x = x &* 0xff51afd7ed558ccd; x ^= x >> 33
            return x
        }
    }

    static let seeds: [String] = [
        #"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
        #"{"jsonrpc":"2.0","id":2,"method":"session/create","params":{"model":{"provider":"scripted","script":[{"text":["a","b"]}]}}}"#,
        #"{"jsonrpc":"2.0","id":3,"method":"session/getState","params":{"sessionId":"s-x"}}"#,
        #"{"jsonrpc":"2.0","id":"q","method":"session/list","params":{"limit":2}}"#,
        #"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":3}}"#,
        #"[{"jsonrpc":"2.0","id":5,"method":"session/list"},{"jsonrpc":"2.0","method":"x"}]"#,
        #"{"jsonrpc":"2.0","id":6,"method":"session/mutateTranscript","params":{"sessionId":"s","operations":[{"op":"set","entries":[]}]}}"#,
        #"{"jsonrpc":"2.0","id":7,"result":{"outcome":"ok","content":"x"}}"#,
    ]

    func mutate(_ seed: [UInt8], _ rng: inout SeededGenerator) -> [UInt8] {
        var bytes = seed
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            guard !bytes.isEmpty else { break }
            let i = Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<5, using: &rng) {
            case 0: bytes[i] = UInt8.random(in: 0x20...0x7E, using: &rng)
            case 1: bytes.remove(at: i)
            case 2: bytes.insert(Array("{}[]\",:0-e\\".utf8).randomElement(using: &rng) ?? 0x20, at: i)
            case 3: bytes = Array(bytes.prefix(i))
            default: bytes.insert(contentsOf: bytes[i..<min(bytes.count, i + 8)], at: i)
            }
        }
        // Newlines end frames; keep each mutated message one frame.
        return bytes.map { $0 == 0x0A || $0 == 0x0D ? 0x20 : $0 }
    }

    @Test func tenThousandRandomAndMutatedFrames() async throws {
        var options = ServerOptions()
        options.maxMessageBytes = 4096
        let pipe = try PipeServer(options: options)
        var rng = SeededGenerator(state: 0x5eed)
        pipe.send(["jsonrpc": "2.0", "id": 0, "method": "initialize", "params": ["protocolVersion": 1]])
        var batch: [UInt8] = []
        for n in 0..<10_000 {
            let frame: [UInt8]
            switch n % 10 {
            case 0: frame = (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }.map { $0 == 0x0A ? 0x41 : $0 }
            case 1: frame = Array(String(repeating: "[", count: 600).utf8)
            case 2: frame = Array(repeating: 0x61, count: 5000)  // over the size limit
            default: frame = mutate(Array(Self.seeds[Int.random(in: 0..<Self.seeds.count, using: &rng)].utf8), &rng)
            }
            batch += frame + [0x0A]
            if batch.count > 64 * 1024 {
                pipe.write(batch)
                batch = []
            }
        }
        pipe.write(batch)
        // Still alive and answering in order after all of it.
        pipe.send(["jsonrpc": "2.0", "id": 999_999, "method": "session/list"])
        let answer = await pipe.response(id: 999_999, timeout: 30)
        #expect(answer?["result"]?["data"] != nil, "the server stopped answering: \(String(describing: answer))")
        pipe.closeInput()
        let code = await pipe.exitCode.value
        #expect(code == 0)
    }
}
