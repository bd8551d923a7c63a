/// A JSON-RPC request id: an integer or a string. Each side numbers its own.
public enum RequestID: Hashable, Sendable, CustomStringConvertible {
    case int(Int)
    case string(String)

    public var json: JSONValue {
        switch self {
        case .int(let i): return .int(i)
        case .string(let s): return .string(s)
        }
    }

    public init?(json: JSONValue) {
        switch json {
        case .int(let i): self = .int(i)
        case .string(let s): self = .string(s)
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .int(let i): return String(i)
        case .string(let s): return "\"\(s)\""
        }
    }
}

/// One JSON-RPC 2.0 message, in either direction.
public enum Message: Sendable, Hashable {
    case request(id: RequestID, method: String, params: JSONValue?)
    case notification(method: String, params: JSONValue?)
    /// `id` is nil only for errors about messages whose id could not be recovered.
    case response(id: RequestID?, result: Result<JSONValue, RPCError>)

    public var json: JSONValue {
        var o: [String: JSONValue] = ["jsonrpc": "2.0"]
        switch self {
        case .request(let id, let method, let params):
            o["id"] = id.json
            o["method"] = .string(method)
            if let params { o["params"] = params }
        case .notification(let method, let params):
            o["method"] = .string(method)
            if let params { o["params"] = params }
        case .response(let id, let result):
            o["id"] = id?.json ?? .null
            switch result {
            case .success(let value): o["result"] = value
            case .failure(let error): o["error"] = error.json
            }
        }
        return .object(o)
    }

    public static func success(_ id: RequestID, _ result: JSONValue) -> Message {
        .response(id: id, result: .success(result))
    }
    public static func failure(_ id: RequestID?, _ error: RPCError) -> Message {
        .response(id: id, result: .failure(error))
    }
}

/// What one frame held: a single message or a batch, each element already
/// classified. Invalid elements carry the error to answer them with.
public enum IncomingFrame: Sendable {
    case single(DecodedMessage)
    case batch([DecodedMessage])
    /// An empty array: answered with one `invalidRequest` error, per JSON-RPC 2.0.
    case emptyBatch
}

/// A message read from the wire, or the reason it could not be one.
public enum DecodedMessage: Sendable {
    case message(Message)
    /// Not a valid JSON-RPC message; answer with `error` and `id` (if recovered).
    case invalid(id: RequestID?, error: RPCError)
}

extension Message {
    /// Classifies one parsed JSON value as a JSON-RPC message, recovering the id
    /// whenever the value carries one so the error can be answered with it.
    public static func decode(_ value: JSONValue) -> DecodedMessage {
        guard case .object(let o) = value else {
            return .invalid(id: nil, error: RPCError(.invalidRequest, "a JSON-RPC message must be an object"))
        }
        let rawID = o["id"]
        var id: RequestID? = nil
        if let rawID, !rawID.isNull {
            guard let parsed = RequestID(json: rawID) else {
                return .invalid(id: nil, error: RPCError(.invalidRequest, "id must be an integer or a string"))
            }
            id = parsed
        }
        // The id of a response is one of the *receiver's* request ids. An error
        // about a broken response must not carry it: the peer would take it for the
        // answer to its own request with that number. Such errors go out with id null.
        let isResponseShaped = o["method"] == nil && (o["result"] != nil || o["error"] != nil)
        let answerID = isResponseShaped ? nil : id
        guard o["jsonrpc"] == .string("2.0") else {
            return .invalid(id: answerID, error: RPCError(.invalidRequest, "\"jsonrpc\" must be \"2.0\""))
        }
        let params = o["params"]
        if let params {
            switch params {
            case .object, .array: break
            default:
                return .invalid(id: answerID, error: RPCError(.invalidRequest, "params must be an object or an array"))
            }
        }
        if let methodValue = o["method"] {
            guard let method = methodValue.stringValue else {
                return .invalid(id: id, error: RPCError(.invalidRequest, "method must be a string"))
            }
            if let id {
                return .message(.request(id: id, method: method, params: params))
            }
            if rawID != nil {
                // "id": null on a request is a legacy notification form we refuse:
                // the sender expects an answer it could never correlate.
                return .invalid(id: nil, error: RPCError(.invalidRequest, "request id must not be null"))
            }
            return .message(.notification(method: method, params: params))
        }
        // A response from the peer.
        if let result = o["result"] {
            guard o["error"] == nil else {
                return .invalid(id: nil, error: RPCError(.invalidRequest, "a response carries result or error, not both"))
            }
            return .message(.response(id: id, result: .success(result)))
        }
        if let errorValue = o["error"] {
            guard let error = RPCError(json: errorValue) else {
                return .invalid(id: nil, error: RPCError(.invalidRequest, "error must be an object with an integer code"))
            }
            return .message(.response(id: id, result: .failure(error)))
        }
        return .invalid(id: id, error: RPCError(.invalidRequest, "a message needs a method, a result or an error"))
    }

    /// Parses one frame's bytes: malformed JSON is a `parseError` with `id: null`.
    public static func decodeFrame<Bytes: Collection>(_ bytes: Bytes) -> IncomingFrame where Bytes.Element == UInt8 {
        if let answer = readSuccessAnswer(bytes) { return .single(.message(answer)) }
        return decodeFrameFully(bytes)
    }

    /// `decodeFrame` without the direct reading of answers: the whole frame
    /// parsed into a `JSONValue`, then classified by `decode`.
    static func decodeFrameFully<Bytes: Collection>(_ bytes: Bytes) -> IncomingFrame where Bytes.Element == UInt8 {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes)
        } catch {
            return .single(.invalid(id: nil, error: RPCError(.parseError, "malformed JSON: \(error)")))
        }
        if case .array(let elements) = value {
            if elements.isEmpty { return .emptyBatch }
            return .batch(elements.map(decode))
        }
        return .single(decode(value))
    }

    /// A success answer, `{"jsonrpc":"2.0","id":…,"result":…}` with exactly
    /// those three members in any order, read straight from the bytes: the
    /// client's answer to each of the server's requests (one `tool/call` per
    /// tool call) without the envelope's dictionary and `decode`'s lookups. Only
    /// `result` is built as a value, by the same parser.
    ///
    /// It only recognises: any other frame (another member, a repeated one, a
    /// key with an escape or a non-ASCII byte, `"jsonrpc"` other than the exact
    /// string `"2.0"`, an id that is not an integer or a string, invalid JSON)
    /// gives nil, and `decodeFrameFully` classifies it, so errors and unusual
    /// frames are answered exactly as before (`MessageDirectReadingTests`).
    static func readSuccessAnswer<Bytes: Collection>(_ bytes: Bytes) -> Message? where Bytes.Element == UInt8 {
        let read = bytes.withContiguousStorageIfAvailable { buffer -> Message? in
            var parser = JSONTextParser(buffer, loneSurrogates: .reject)
            return try? readSuccessAnswer(&parser)
        }
        return read ?? nil
    }

    private struct Unrecognised: Error {}

    private static func readSuccessAnswer(_ p: inout JSONTextParser) throws -> Message? {
        let bytes = p.bytes
        p.skipWhitespace()
        guard p.index < bytes.count, bytes[p.index] == UInt8(ascii: "{") else { return nil }
        // The envelope counts toward the nesting bound, as in the full parse.
        try p.enter()
        p.index += 1
        var versionSeen = false
        var id: RequestID?
        var result: JSONValue?
        while true {
            p.skipWhitespace()
            let key = try rawKey(&p)
            p.skipWhitespace()
            guard p.index < bytes.count, bytes[p.index] == UInt8(ascii: ":") else { return nil }
            p.index += 1
            p.skipWhitespace()
            switch key {
            case .jsonrpc:
                guard !versionSeen, case .string("2.0") = try p.parseValue() else { return nil }
                versionSeen = true
            case .id:
                guard id == nil, let parsed = RequestID(json: try p.parseValue()) else { return nil }
                id = parsed
            case .result:
                guard result == nil else { return nil }
                result = try p.parseValue()
            }
            p.skipWhitespace()
            guard p.index < bytes.count else { return nil }
            if bytes[p.index] == UInt8(ascii: ",") {
                p.index += 1
                continue
            }
            guard bytes[p.index] == UInt8(ascii: "}") else { return nil }
            p.index += 1
            break
        }
        p.leave()
        p.skipWhitespace()
        guard p.index == bytes.count, versionSeen, let id, let result else { return nil }
        return .response(id: id, result: .success(result))
    }

    private enum AnswerKey { case jsonrpc, id, result }

    /// One of the three keys of a success answer, compared as bytes; any other
    /// key, or one with an escape, is not recognised.
    private static func rawKey(_ p: inout JSONTextParser) throws -> AnswerKey {
        let bytes = p.bytes
        guard p.index < bytes.count, bytes[p.index] == UInt8(ascii: "\"") else { throw Unrecognised() }
        let start = p.index + 1
        var end = start
        while end < bytes.count, bytes[end] != UInt8(ascii: "\"") {
            if bytes[end] == UInt8(ascii: "\\") { throw Unrecognised() }
            end += 1
        }
        guard end < bytes.count else { throw Unrecognised() }
        p.index = end + 1
        func matches(_ name: StaticString) -> Bool {
            guard end - start == name.utf8CodeUnitCount else { return false }
            let n = name.utf8Start
            for i in 0..<(end - start) where bytes[start + i] != n[i] { return false }
            return true
        }
        if matches("id") { return .id }
        if matches("result") { return .result }
        if matches("jsonrpc") { return .jsonrpc }
        throw Unrecognised()
    }
}
