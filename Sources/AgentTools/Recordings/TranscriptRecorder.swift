import AgentRPC
import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a live connection out as a replayable transcript (docs/transcripts.md).
///
/// Client messages become `send` steps (`reply` when they answer a server
/// request) and server messages become `expect` steps. Values that differ from
/// run to run are generalized: the first `sessionId`, `turnId`, `callId`, entry
/// id or server-request id the server sends is captured (`"$capture:sessionId1"`)
/// and every later occurrence of that value, in either direction, becomes a
/// reference (`"$ref:sessionId1"`); ISO-8601 timestamps become `"$timestamp"`.
///
/// Safe to call from any thread; each line is written (and so flushed) as one
/// unit, in call order.
package final class TranscriptRecorder: Sendable {
    private let state: Mutex<TranscriptRecorderState>

    /// Records into the file at `path`, replacing it. `args` are the server
    /// options a replay should start with (written into the header); `command`
    /// the subcommand that serves (nil: `serve`, the default of a replay).
    package convenience init(fileAt path: String, description: String? = nil, command: String? = nil, args: [String] = []) throws {
        // Open for the life of the process, as the FileHandle it replaces was.
        let fd = FileManager.default.createFile(atPath: path, contents: nil) ? open(path, O_WRONLY | O_CLOEXEC) : -1
        guard fd >= 0 else {
            throw CocoaError(.fileWriteNoPermission, userInfo: ["NSFilePath": path])
        }
        self.init(description: description, command: command, args: args) { line in
            // Writes go straight to the descriptor: each line is flushed.
            FileDescriptorOutput.write(fd, Array(line.utf8))
        }
    }

    /// Records by handing each finished line (newline included) to `writeLine`.
    package init(description: String? = nil, command: String? = nil, args: [String] = [], writeLine: @escaping @Sendable (String) -> Void) {
        state = Mutex(TranscriptRecorderState(description: description, command: command, args: args, writeLine: writeLine))
    }

    /// Tells the recorder which framing the connection settled on, so the header
    /// replays it the same way. Call before the first message to take effect.
    func connectionFraming(_ framing: Framing) {
        state.withLock { $0.framing = framing }
    }

    /// A message (or batch) the server read from the client.
    func clientSent(_ message: JSONValue) {
        state.withLock { $0.recordClient(message) }
    }

    /// A message (or batch) the server wrote to the client.
    package func serverSent(_ message: JSONValue) {
        state.withLock { $0.recordServer(message) }
    }

    /// A frame the server read that was not JSON; replayed as `sendRaw`.
    func serverReadMalformed(_ bytes: [UInt8]) {
        state.withLock { $0.recordMalformed(bytes) }
    }

    /// The client closed the server's stdin.
    func clientClosedInput() {
        state.withLock { $0.emit(["closeStdin": true]) }
    }

    /// The server is about to exit with `code`.
    package func serverExiting(code: Int32) {
        state.withLock { $0.emit(["expectExit": ["code": .int(Int(code))]]) }
    }
}

/// The recorder's mutable state, kept in the recorder's `Mutex`.
struct TranscriptRecorderState: Sendable {
    private let writeLine: @Sendable (String) -> Void
    private let description: String?
    private let command: String?
    private let args: [String]
    var framing: Framing = .newline
    private var headerWritten = false
    /// Captured value → capture name, for later `$ref:`s.
    private var captured: [JSONValue: String] = [:]
    /// Ids of requests the server sent → capture name, so replies refer to them.
    private var serverRequests: [JSONValue: String] = [:]
    private var counters: [String: Int] = [:]

    /// Member names whose values the server mints per run.
    private static let volatileKeys: [String: String] = [
        "sessionId": "sessionId", "turnId": "turnId", "callId": "callId",
        "entryId": "entryId", "firstChangedEntry": "entryId", "nextCursor": "cursor",
    ]

    /// Members whose values differ from machine to machine (or, like an
    /// idempotencyKey that spells the session and turn ids out, from run to run):
    /// kept as their type only.
    private static let machineKeys: [String: JSONValue] = [
        "storeDirectory": "$string", "pid": "$integer", "lockedBy": "$integer", "idempotencyKey": "$string",
    ]

    init(description: String?, command: String?, args: [String], writeLine: @escaping @Sendable (String) -> Void) {
        self.description = description
        self.command = command
        self.args = args
        self.writeLine = writeLine
    }

    mutating func emit(_ step: JSONValue) {
        if !headerWritten {
            headerWritten = true
            var header: [String: JSONValue] = [:]
            if let description { header["description"] = .string(description) }
            if let command { header["command"] = .string(command) }
            if !args.isEmpty { header["args"] = .array(args.map(JSONValue.string)) }
            if framing == .contentLength { header["framing"] = "content-length" }
            if !header.isEmpty { writeLine(JSONValue.object(["transcript": .object(header)]).serializedString() + "\n") }
        }
        writeLine(step.serializedString() + "\n")
    }

    mutating func recordMalformed(_ bytes: [UInt8]) {
        if let text = String(bytes: bytes, encoding: .utf8) {
            emit(["sendRaw": .string(text)])
        } else {
            emit(["sendRaw": ["base64": .string(Data(bytes).base64EncodedString())]])
        }
    }

    mutating func recordClient(_ message: JSONValue) {
        switch message {
        case .array(let elements):
            emit(["send": .array(elements.map { clientRoot($0) })])
        case .object(let o) where o["method"] == nil && o["id"].map({ serverRequests[$0] != nil }) == true:
            emit(["reply": clientRoot(message)])
        default:
            emit(["send": clientRoot(message)])
        }
    }

    /// A top-level client message: its own request id stays literal (the client
    /// chose it); a reply's id refers to the server's request.
    private mutating func clientRoot(_ message: JSONValue) -> JSONValue {
        guard case .object(let o) = message else { return client(message, key: nil, siblingsHaveType: false) }
        var out: [String: JSONValue] = [:]
        for (key, value) in o {
            if key == "id" {
                if o["method"] == nil, let name = serverRequests[value] {
                    out[key] = .string("$ref:\(name)")
                } else {
                    out[key] = escapeLiteral(value)
                }
            } else {
                out[key] = client(value, key: key, siblingsHaveType: false)
            }
        }
        return .object(out)
    }

    private mutating func client(_ value: JSONValue, key: String?, siblingsHaveType: Bool) -> JSONValue {
        switch value {
        case .object(let o):
            let hasType = o["type"] != nil
            var out: [String: JSONValue] = [:]
            for (k, v) in o { out[k] = client(v, key: k, siblingsHaveType: hasType) }
            return .object(out)
        case .array(let elements):
            return .array(elements.map { client($0, key: nil, siblingsHaveType: false) })
        case .string:
            if let name = captured[value] { return .string("$ref:\(name)") }
            return escapeLiteral(value)
        case .int:
            if Self.volatileBase(key, siblingsHaveType) != nil, let name = captured[value] { return .string("$ref:\(name)") }
            return value
        default:
            return value
        }
    }

    mutating func recordServer(_ message: JSONValue) {
        if case .array(let elements) = message, !elements.isEmpty {
            emit(["expectBatch": .array(elements.map { serverRoot($0) })])
        } else {
            emit(["expect": serverRoot(message)])
        }
    }

    private mutating func serverRoot(_ message: JSONValue) -> JSONValue {
        guard case .object(let o) = message else { return server(message, key: nil, siblingsHaveType: false) }
        var out: [String: JSONValue] = [:]
        // Sorted so captures are made in the order the matcher visits members.
        for key in o.keys.sorted() {
            guard let value = o[key] else { continue }
            if key == "id" {
                if let method = o["method"]?.stringValue, value.isNull == false {
                    let name = newName(Self.camelCase(method) + "Request")
                    serverRequests[value] = name
                    out[key] = .string("$capture:\(name)")
                } else {
                    // The answer to a client request carries the client's own id.
                    out[key] = escapeLiteral(value)
                }
            } else if key == "params", o["method"]?.stringValue == "$/cancelRequest", case .object(var params) = value,
                let id = params["id"], let name = serverRequests[id]
            {
                params["id"] = .string("$ref:\(name)")
                out[key] = .object(params)
            } else {
                out[key] = server(value, key: key, siblingsHaveType: false)
            }
        }
        return .object(out)
    }

    private mutating func server(_ value: JSONValue, key: String?, siblingsHaveType: Bool) -> JSONValue {
        switch value {
        case .object(let o):
            let hasType = o["type"] != nil
            var out: [String: JSONValue] = [:]
            for k in o.keys.sorted() {
                guard let v = o[k] else { continue }
                out[k] = server(v, key: k, siblingsHaveType: hasType)
            }
            return .object(out)
        case .array(let elements):
            return .array(elements.map { server($0, key: nil, siblingsHaveType: false) })
        case .string, .int:
            if let key, let pattern = Self.machineKeys[key] { return pattern }
            if let name = captured[value], value.stringValue != nil || Self.volatileBase(key, siblingsHaveType) != nil {
                return .string("$ref:\(name)")
            }
            if let base = Self.volatileBase(key, siblingsHaveType) {
                let name = newName(base)
                captured[value] = name
                return .string("$capture:\(name)")
            }
            if let text = value.stringValue, TranscriptMatcher.isISO8601Timestamp(text) { return "$timestamp" }
            return escapeLiteral(value)
        default:
            return value
        }
    }

    /// The capture family for a member, or nil when its value is stable.
    /// An `id` beside a `type` is a transcript entry's id.
    private static func volatileBase(_ key: String?, _ siblingsHaveType: Bool) -> String? {
        guard let key else { return nil }
        if key == "id" { return siblingsHaveType ? "entryId" : nil }
        return volatileKeys[key]
    }

    private mutating func newName(_ base: String) -> String {
        let n = (counters[base] ?? 0) + 1
        counters[base] = n
        return "\(base)\(n)"
    }

    /// `tool/call` → `toolCall`.
    static func camelCase(_ method: String) -> String {
        let parts = method.split(whereSeparator: { !$0.isLetter && !$0.isNumber })
        guard let first = parts.first else { return "server" }
        return first.prefix(1).lowercased() + first.dropFirst() + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    /// A string the matcher would read as a placeholder gets its `$` doubled.
    private mutating func escapeLiteral(_ value: JSONValue) -> JSONValue {
        guard case .string(let s) = value, s.hasPrefix("$") else { return value }
        let second = s.dropFirst().first
        if second == "$" || (second?.isLetter ?? false) { return .string("$" + s) }
        return value
    }
}
