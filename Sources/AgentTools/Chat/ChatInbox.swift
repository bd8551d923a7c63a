import AgentRPC
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Something the chat loop has to react to.
enum ChatInput: Sendable {
    /// One line the person typed (without its line break).
    case line(String)
    /// Ctrl-D at the start of a line, or the end of piped input.
    case endOfInput
    /// Ctrl-C (SIGINT).
    case interrupt
    case server(TranscriptInbound)
    /// The server's stdout ended: it exited or crashed.
    case serverClosed
}

/// The one queue every producer (stdin, the server, SIGINT) feeds and the chat
/// loop drains, so the loop is single-threaded and never polls.
///
/// `@unchecked Sendable`: `items` is guarded by `condition`.
final class ChatInbox: @unchecked Sendable {
    // A condition, not a Mutex: the chat loop runs on its own thread and must
    // block until input arrives (Synchronization has no way to sleep a thread).
    private let condition = ConditionLock()
    private var items: [ChatInput] = []

    func post(_ input: ChatInput) {
        condition.lock()
        items.append(input)
        condition.signal()
        condition.unlock()
    }

    /// The oldest input, waiting until `deadline` (nil: as long as it takes —
    /// the chat waits for a person, who may take a while).
    func take(until deadline: Date?) -> ChatInput? {
        condition.lock()
        defer { condition.unlock() }
        while items.isEmpty {
            if let deadline {
                if !condition.wait(until: deadline) && items.isEmpty { return nil }
            } else {
                condition.wait()
            }
        }
        return items.removeFirst()
    }
}

/// Feeds the inbox from stdin, SIGINT and the server's output.
enum ChatInputSources {
    /// Reads stdin on a dedicated thread with blocking reads and posts one
    /// `.line` per line. Works the same through a terminal (canonical mode hands
    /// over a line at a time) and with piped input.
    static func startReadingLines(from fd: Int32, into inbox: ChatInbox) throws(OSThread.StartError) {
        try OSThread.start(name: "chat-input") {
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                pending.append(contentsOf: buffer[0..<n])
                while let newline = pending.firstIndex(of: 0x0A) {
                    inbox.post(.line(decodeLine(pending[..<newline])))
                    pending.removeSubrange(...newline)
                }
            }
            if !pending.isEmpty { inbox.post(.line(decodeLine(pending[...]))) }
            inbox.post(.endOfInput)
        }
    }

    private static func decodeLine(_ bytes: ArraySlice<UInt8>) -> String {
        var line = String(decoding: bytes, as: UTF8.self)
        if line.hasSuffix("\r") { line.removeLast() }
        return line
    }

    /// Turns SIGINT into `.interrupt` instead of ending the process. The default
    /// action is switched off so the signal source alone sees the signal.
    static func catchInterrupts(into inbox: ChatInbox) -> SignalSource {
        SignalSource(SIGINT) { _ in inbox.post(.interrupt) }
    }

    /// Forwards everything the server writes; posts `.serverClosed` once its stdout ends.
    static func startForwarding(_ server: TranscriptServerProcess, into inbox: ChatInbox) throws(OSThread.StartError) {
        try OSThread.start(name: "chat-server") {
            while true {
                // A finite deadline: NSCondition on Linux traps on `.distantFuture`.
                switch server.next(until: Date(timeIntervalSinceNow: 3600)) {
                case .inbound(let item): inbox.post(.server(item))
                case .closed:
                    inbox.post(.serverClosed)
                    return
                case .timedOut: continue
                }
            }
        }
    }
}
