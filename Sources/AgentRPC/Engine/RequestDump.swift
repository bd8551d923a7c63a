import AgentRPCProtocol
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
import Synchronization

/// Appends every provider request as one JSON line (`--dump-requests FILE`), so
/// users and tests can see exactly what a model received. Requests carry no
/// secrets by construction (keys live inside provider instances).
///
/// A line is `{sessionId, turnId, purpose, roundTrip, profile, provider, request}`;
/// `purpose` tells the turn's own round trips (`turn`) from the engine's side
/// requests: the `llm` router's classification (`router`), a consulted profile's
/// answer (`consult`) and a `summarizeHistory` hook (`summary`). Side requests
/// carry the number of the round trip they happened before or during (0 before
/// the first).
final class RequestDumper: Sendable {
    /// The file, open for writing at its end; the lock keeps lines whole.
    private let file: Mutex<Int32>

    init(path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o666)
        guard fd >= 0 else {
            let exists = access(path, F_OK) == 0
            throw RPCError.invalidConfiguration("cannot \(exists ? "open" : "create") --dump-requests file \(path)")
        }
        _ = lseek(fd, 0, SEEK_END)
        file = Mutex(fd)
    }

    deinit { file.withLock { _ = close($0) } }

    /// Why the engine sent a request.
    enum Purpose: String {
        case turn, router, consult, summary, compaction
    }

    /// `body` is the exact JSON body an HTTP provider sends (it never holds a key:
    /// credentials travel in headers only).
    func dump(
        sessionId: String, turnId: String?, purpose: Purpose, roundTrip: Int, profile: String, provider: String, request: ModelRequest,
        body: JSONValue? = nil
    ) {
        // A request outside any turn (`session/compact`) names none.
        var members: [String: JSONValue] = [
            "sessionId": .string(sessionId), "purpose": .string(purpose.rawValue), "roundTrip": .int(roundTrip),
            "profile": .string(profile), "provider": .string(provider), "request": request.dumpJSON,
        ]
        if let turnId { members["turnId"] = .string(turnId) }
        if let body { members["body"] = body }
        let line = JSONValue.object(members)
        var bytes = line.serialized()
        bytes.append(0x0A)
        file.withLock { _ = FileDescriptorOutput.write($0, bytes) }
    }
}

extension ModelRequest {
    /// A provider-neutral JSON form of the request, for dumps and traces.
    var dumpJSON: JSONValue {
        var o: [String: JSONValue] = [
            "model": .string(model),
            "instructions": .string(instructions),
            "messages": .array(messages.map(\.dumpJSON)),
            "tools": .array(tools.map { ["name": .string($0.name), "description": .string($0.description), "inputSchema": $0.inputSchema] }),
            "toolChoice": toolChoice.dumpJSON,
            "options": options.dumpJSON,
        ]
        if let responseSchema { o["responseSchema"] = responseSchema }
        return .object(o)
    }
}

extension ModelToolChoice {
    var dumpJSON: JSONValue {
        switch self {
        case .auto: return "auto"
        case .none: return "none"
        case .required: return "required"
        case .tool(let name): return ["tool": .string(name)]
        }
    }
}

extension GenerationOptions {
    var dumpJSON: JSONValue {
        var o = extra
        if let temperature { o["temperature"] = .double(temperature) }
        if let maxOutputTokens { o["maxOutputTokens"] = .int(maxOutputTokens) }
        if let reasoningLevel { o["reasoningLevel"] = .string(reasoningLevel) }
        return .object(o)
    }
}

extension ModelMessage {
    var dumpJSON: JSONValue {
        switch self {
        case .user(let text, let images):
            var o: [String: JSONValue] = ["role": "user", "text": .string(text)]
            if !images.isEmpty { o["images"] = .array(images.map(\.dumpJSON)) }
            return .object(o)
        case .assistant(let text, let calls, let reasoning, let signature):
            var o: [String: JSONValue] = ["role": "assistant", "text": .string(text)]
            if !calls.isEmpty {
                o["toolCalls"] = .array(calls.map { ["id": .string($0.id), "name": .string($0.name), "arguments": .string($0.argumentsJSON)] })
            }
            if let reasoning { o["reasoning"] = .string(reasoning) }
            if let signature { o["reasoningSignature"] = .string(signature) }
            return .object(o)
        case .toolResult(let callId, let name, let content, let isError, let images):
            var o: [String: JSONValue] = ["role": "tool", "callId": .string(callId), "name": .string(name), "content": .string(content), "isError": .bool(isError)]
            if !images.isEmpty { o["images"] = .array(images.map(\.dumpJSON)) }
            return .object(o)
        case .toolResultImages(let images):
            return ["role": "toolResultImages", "images": .array(images.map(\.dumpJSON))]
        }
    }
}

extension ModelImage {
    /// An image in a dump: its size, not its bytes.
    var dumpJSON: JSONValue {
        switch self {
        case .data(let bytes, let mime): return ["mimeType": .string(mime), "bytes": .int(bytes.count)]
        case .url(let url): return ["url": .string(url)]
        }
    }
}
