import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One recorded request and its response: a line of a cassette file
/// (docs/testing.md, "The cassette file").
struct CassetteExchange: Sendable {
    /// The provider kind (`openai`, `anthropic`, `openai-responses`).
    var provider: String
    var method: String
    /// The URL path, without host or query.
    var path: String
    /// The body as sent, secrets scrubbed; a string when it was not JSON.
    var body: JSONValue
    var response: CassetteResponse
    /// The exchange's line in the file (1-based; the header is line 1).
    var line: Int = 0

    /// What requests are matched on: provider, method, path and the body in
    /// canonical form (compact, keys sorted).
    var key: String { Self.key(provider: provider, method: method, path: path, canonicalBody: body.serializedString()) }

    static func key(provider: String, method: String, path: String, canonicalBody: String) -> String {
        "\(provider) \(method) \(path)\n\(canonicalBody)"
    }
}

/// A recorded response: the head, the body as it arrived (chunk by chunk, with
/// the milliseconds since the request started) and how it ended.
struct CassetteResponse: Sendable {
    /// When the head arrived; nil when none did (the connection failed).
    var headMilliseconds: Int?
    var status: Int?
    /// The headers kept (`CassetteScrubber.keptHeader`), names lowercased.
    var headers: [String: String] = [:]
    var chunks: [Chunk] = []
    var end: End

    struct Chunk: Sendable {
        var milliseconds: Int
        var bytes: [UInt8]
    }

    struct End: Sendable {
        var milliseconds: Int
        var outcome: Outcome
    }

    enum Outcome: Sendable {
        /// The response ended normally.
        case complete
        /// The transport failed (the error as it was mapped, scrubbed).
        case failed(ProviderError)
        /// Our side stopped reading before the response ended (a cancel, a
        /// stream given up on): a replay waits there as the server did.
        case abandoned
    }

    var head: ResponseHead? { status.map { ResponseHead(status: $0, headers: headers) } }
}

/// A cassette's first line: `{"agentrpcCassette": {"formatVersion": 1, "agentrpcVersion": …, "providers": […]}}`.
struct CassetteHeader: Sendable, Equatable {
    static let formatVersion = 1
    var formatVersion = CassetteHeader.formatVersion
    var agentrpcVersion = Server.version
    /// The provider kinds of the exchanges, sorted.
    var providers: [String] = []

    var json: JSONValue {
        ["agentrpcCassette": [
            "formatVersion": .int(formatVersion), "agentrpcVersion": .string(agentrpcVersion),
            "providers": .array(providers.map(JSONValue.string)),
        ]]
    }

    init(providers: [String] = []) { self.providers = providers }

    init(_ value: JSONValue) throws(CassetteFormatError) {
        guard let h = value["agentrpcCassette"], h.objectValue != nil else {
            throw CassetteFormatError(line: 1, "the first line is not a cassette header ({\"agentrpcCassette\": {...}})")
        }
        guard let version = h["formatVersion"]?.intValue else { throw CassetteFormatError(line: 1, "the header has no formatVersion") }
        guard version <= Self.formatVersion, version >= 1 else {
            throw CassetteFormatError(line: 1, "format version \(version) is newer than this agentrpc reads (\(Self.formatVersion))")
        }
        formatVersion = version
        agentrpcVersion = h["agentrpcVersion"]?.stringValue ?? ""
        providers = (h["providers"]?.arrayValue ?? []).compactMap(\.stringValue)
    }
}

/// A cassette line that cannot be read.
struct CassetteFormatError: Error, CustomStringConvertible {
    var line: Int
    var message: String
    init(line: Int, _ message: String) {
        self.line = line
        self.message = message
    }
    var description: String { "line \(line): \(message)" }
}

// MARK: - Lines

extension CassetteExchange {
    /// The line's JSON: request first, then response (keys are written sorted).
    var json: JSONValue {
        var response: [String: JSONValue] = [:]
        if let ms = self.response.headMilliseconds { response["ms"] = .int(ms) }
        if let status = self.response.status { response["status"] = .int(status) }
        if !self.response.headers.isEmpty { response["headers"] = .object(self.response.headers.mapValues(JSONValue.string)) }
        response["chunks"] = .array(self.response.chunks.map { chunk in
            if let text = String(validating: chunk.bytes, as: UTF8.self) {
                return ["ms": .int(chunk.milliseconds), "text": .string(text)]
            }
            return ["ms": .int(chunk.milliseconds), "base64": .string(Data(chunk.bytes).base64EncodedString())]
        })
        var end: [String: JSONValue] = ["ms": .int(self.response.end.milliseconds)]
        switch self.response.end.outcome {
        case .complete: break
        case .abandoned: end["abandoned"] = true
        case .failed(let e):
            end["error"] = ["code": .string(e.code.rawValue), "safeDescription": .string(e.safeDescription), "unsafeMessage": .string(e.unsafeMessage)]
        }
        response["end"] = .object(end)
        return [
            "request": ["provider": .string(provider), "method": .string(method), "path": .string(path), "body": body],
            "response": .object(response),
        ]
    }

    init(_ value: JSONValue, line: Int) throws(CassetteFormatError) {
        func fail(_ message: String) -> CassetteFormatError { CassetteFormatError(line: line, message) }
        guard let request = value["request"], let response = value["response"] else { throw fail("an exchange needs \"request\" and \"response\"") }
        guard let provider = request["provider"]?.stringValue, let path = request["path"]?.stringValue else {
            throw fail("request needs \"provider\" and \"path\"")
        }
        self.provider = provider
        self.path = path
        self.method = request["method"]?.stringValue ?? "POST"
        self.body = request["body"] ?? .null
        self.line = line
        // Times and the status come from a file a person may edit: each is checked
        // here, so a replay never computes with a value that could trap.
        func milliseconds(_ value: JSONValue?, _ field: String) throws(CassetteFormatError) -> Int? {
            guard let value else { return nil }
            guard let ms = value.intValue, DurationBounds.nonNegativeMilliseconds.contains(ms) else {
                throw fail("\(field) is milliseconds after the request started: a whole number from 0 to \(Int(DurationBounds.nonNegativeMilliseconds.upperBound))")
            }
            return ms
        }
        var chunks: [CassetteResponse.Chunk] = []
        for (i, chunk) in (response["chunks"]?.arrayValue ?? []).enumerated() {
            let ms = try milliseconds(chunk["ms"], "response.chunks[\(i)].ms") ?? 0
            if let text = chunk["text"]?.stringValue {
                chunks.append(.init(milliseconds: ms, bytes: Array(text.utf8)))
            } else if let b64 = chunk["base64"]?.stringValue, let data = Data(base64Encoded: b64) {
                chunks.append(.init(milliseconds: ms, bytes: Array(data)))
            } else {
                throw fail("response.chunks[\(i)] needs \"text\" or \"base64\"")
            }
        }
        let endValue = response["end"] ?? [:]
        let outcome: CassetteResponse.Outcome
        if let error = endValue["error"] {
            let code = error["code"]?.stringValue.flatMap(ProviderErrorCode.init(rawValue:)) ?? .network
            outcome = .failed(ProviderError(
                code: code, safeDescription: error["safeDescription"]?.stringValue ?? "",
                unsafeMessage: error["unsafeMessage"]?.stringValue ?? ""))
        } else if endValue["abandoned"]?.boolValue == true {
            outcome = .abandoned
        } else {
            outcome = .complete
        }
        var headers: [String: String] = [:]
        for (name, v) in response["headers"]?.objectValue ?? [:] {
            if let s = v.stringValue { headers[name.lowercased()] = s }
        }
        var status: Int?
        if let value = response["status"] {
            guard let s = value.intValue, (100...599).contains(s) else { throw fail("response.status is an HTTP status: a whole number from 100 to 599") }
            status = s
        }
        self.response = CassetteResponse(
            headMilliseconds: try milliseconds(response["ms"], "response.ms"), status: status, headers: headers, chunks: chunks,
            end: .init(milliseconds: try milliseconds(endValue["ms"], "response.end.ms") ?? chunks.last?.milliseconds ?? 0, outcome: outcome))
    }
}

/// A cassette file as read: the header, the exchanges, and how many bytes of
/// the file are intact (a torn last line, from a run killed while writing, is
/// left out and reported).
struct CassetteContents: Sendable {
    /// A bound on what is read into memory.
    static let maximumFileBytes = 1 << 30

    var header: CassetteHeader
    var exchanges: [CassetteExchange]
    var intactBytes: Int
    /// The torn last line's number, when there was one.
    var tornLine: Int?

    static func read(path: String) throws -> CassetteContents {
        guard let data = FileBytes.read(path, upTo: maximumFileBytes + 1) else { throw CassetteFormatError(line: 0, "cannot read \(path)") }
        guard data.count <= maximumFileBytes else { throw CassetteFormatError(line: 0, "\(path) is larger than \(maximumFileBytes) bytes") }
        return try parse(data)
    }

    static func parse(_ bytes: [UInt8]) throws(CassetteFormatError) -> CassetteContents {
        var header: CassetteHeader?
        var exchanges: [CassetteExchange] = []
        var start = 0
        var lineNumber = 0
        var intact = 0
        var torn: Int?
        while start < bytes.count {
            lineNumber += 1
            let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n"))
            let end = newline ?? bytes.count
            let line = bytes[start..<end]
            let next = newline.map { $0 + 1 } ?? bytes.count
            defer { start = next }
            if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\t") }) {
                intact = next
                continue
            }
            let value: JSONValue
            do {
                value = try JSONValue.parse(line)
            } catch {
                // Only the last line may be torn (written when the run was killed).
                if newline == nil {
                    torn = lineNumber
                    break
                }
                throw CassetteFormatError(line: lineNumber, "not JSON: \(error)")
            }
            if header == nil {
                header = try CassetteHeader(value)
            } else {
                exchanges.append(try CassetteExchange(value, line: lineNumber))
            }
            intact = next
        }
        guard let header else {
            if torn != nil { return CassetteContents(header: CassetteHeader(), exchanges: [], intactBytes: 0, tornLine: torn) }
            throw CassetteFormatError(line: 1, "the file is empty (a cassette starts with its header line)")
        }
        return CassetteContents(header: header, exchanges: exchanges, intactBytes: intact, tornLine: torn)
    }
}
