import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A model cassette (docs/testing.md): the HTTP exchanges of model providers,
/// recorded to a JSON Lines file and answered from it. It sits on the one
/// entry point of every provider request (`HTTPStreamTransport.stream`), which
/// asks it for each request how to serve it (`route`).
///
/// Matching: provider kind, method, URL path and the body in canonical form
/// (keys sorted, secrets scrubbed). Nothing in the bodies agentrpc sends is
/// volatile (no ids, dates or nonces), so nothing is left out of the key.
/// Equal requests are answered in recorded order, each exchange once.
package final class ModelCassette: Sendable, Hashable {
    /// The path as configured (what errors name).
    let file: String
    /// The absolute path.
    let path: String
    let mode: CassetteMode
    let pace: CassettePace
    private let logger: Logger?
    private let state: Mutex<State>

    private struct State {
        var exchanges: [CassetteExchange] = []
        /// Each exchange's canonical body, in the order of `exchanges`.
        var canonical: [String] = []
        /// Matching key → indices into `exchanges`, in recorded order.
        var byKey: [String: [Int]] = [:]
        /// Matching key → how many of its exchanges were answered.
        var used: [String: Int] = [:]
        var header = CassetteHeader()
        /// The file's next line number.
        var nextLine = 2
        /// Whether the file ends without a newline (a hand-edited last line).
        var needsNewline = false
    }

    /// How to serve one request.
    enum Route: Sendable {
        case replay(CassetteExchange)
        /// Send it and record it under this match.
        case record(CassetteMatching.Request)
        case miss(ProviderError)
    }

    /// Opens (replay, auto) or starts (record) the cassette at `path`. A torn
    /// last line is left out with a warning; in `auto` it is cut off the file
    /// before anything is appended.
    init(file: String, path: String, mode: CassetteMode, pace: CassettePace, logger: Logger?) throws {
        self.file = file
        self.path = path
        self.mode = mode
        self.pace = pace
        self.logger = logger
        var s = State()
        let exists = FileManager.default.fileExists(atPath: path)
        if mode == .record || (mode == .auto && !exists) {
            try Self.writeWhole(path, header: s.header, exchanges: [])
        } else {
            guard exists else {
                throw RPCError.invalidConfiguration("model cassette \(file) does not exist (record it with mode record or auto)", field: "modelCassette.path")
            }
            let contents: CassetteContents
            do {
                contents = try CassetteContents.read(path: path)
            } catch {
                throw RPCError.invalidConfiguration("model cassette \(file): \(error)", field: "modelCassette.path")
            }
            if let torn = contents.tornLine {
                logger?.warning("model cassette \(file): line \(torn) is incomplete (a run killed while recording?); it is left out")
                if mode == .auto { try Self.cutTornLine(path, keeping: contents.intactBytes) }
            }
            s.header = contents.header
            for exchange in contents.exchanges { Self.add(exchange, to: &s) }
            s.nextLine = (contents.exchanges.last?.line ?? 1) + 1
            if let size = try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int, size > 0 {
                s.needsNewline = Self.lastByte(path, size: size) != UInt8(ascii: "\n")
            }
        }
        state = Mutex(s)
    }

    package static func == (a: ModelCassette, b: ModelCassette) -> Bool { a === b }
    package func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    private static func add(_ exchange: CassetteExchange, to s: inout State) {
        let canonical = exchange.body.serializedString()
        s.byKey[CassetteExchange.key(provider: exchange.provider, method: exchange.method, path: exchange.path, canonicalBody: canonical), default: []]
            .append(s.exchanges.count)
        s.exchanges.append(exchange)
        s.canonical.append(canonical)
    }

    func warn(_ message: String) { logger?.warning("model cassette \(file): \(message)") }

    // MARK: Serving

    /// Decides how `request` (of provider kind `provider`) is served: from the
    /// cassette, live and recorded, or not at all (`cassetteMiss`).
    func route(provider: String, request http: HTTPRequest, secrets: [String]) -> Route {
        let request = Self.matchable(provider: provider, http, secrets: secrets)
        if mode == .record { return .record(request) }
        let key = request.key
        let found: Result<CassetteExchange, ProviderError> = state.withLock { s in
            let candidates = s.byKey[key] ?? []
            let used = s.used[key] ?? 0
            if used < candidates.count {
                s.used[key] = used + 1
                return .success(s.exchanges[candidates[used]])
            }
            return .failure(miss(request, candidates: candidates, in: s))
        }
        switch found {
        case .success(let exchange):
            return .replay(exchange)
        case .failure(let error):
            if mode == .auto { return .record(request) }
            logger?.info("model cassette \(file): \(error.safeDescription)")
            return .miss(error)
        }
    }

    private func miss(_ request: CassetteMatching.Request, candidates: [Int], in s: State) -> ProviderError {
        let sent = CassetteRequestRef(provider: request.provider, path: request.path)
        var info = CassetteMiss(file: file, reason: candidates.isEmpty ? .noMatch : .exhausted, request: sent)
        let nearestIndex = candidates.last ?? CassetteMatching.nearest(to: request, in: s.exchanges, canonical: s.canonical)
        var where_ = ""
        if let i = nearestIndex {
            let recorded = s.exchanges[i]
            info.nearest = CassetteRequestRef(provider: recorded.provider, path: recorded.path, line: recorded.line)
            if candidates.isEmpty {
                let difference = CassetteMatching.difference(recorded: recorded, sent: request)
                info.difference = difference
                where_ = "; the nearest recorded request (line \(recorded.line)) differs at \(difference.part)"
                    + (difference.pointer.isEmpty ? "" : " \(difference.pointer)")
            } else {
                where_ = "; all \(candidates.count) equal recorded requests were already answered"
            }
        }
        let description = "The model cassette \(file) has no recorded answer for this \(request.provider) request (\(request.method) \(request.path))\(where_)."
        var error = ProviderError(code: .cassetteMiss, safeDescription: description)
        error.cassette = info
        return error
    }

    /// The request as matched and stored: its body scrubbed, parsed when JSON.
    static func matchable(provider: String, _ request: HTTPRequest, secrets: [String]) -> CassetteMatching.Request {
        let raw = String(decoding: request.body, as: UTF8.self)
        let text = CassetteScrubber.scrub(raw, secrets: secrets)
        let body = raw.isEmpty ? JSONValue.null : ((try? JSONValue.parse(text)) ?? .string(text))
        return CassetteMatching.Request(provider: provider, method: request.method, path: request.url.path, body: body)
    }

    // MARK: Writing

    /// Adds a recorded exchange and appends it to the file (the whole file is
    /// rewritten when the exchange's provider is new to the header).
    func append(_ exchange: CassetteExchange) {
        state.withLock { s in
            var exchange = exchange
            exchange.line = s.nextLine
            s.nextLine += 1
            Self.add(exchange, to: &s)
            // Recorded now for a request answered live: it counts as used in this run.
            let key = exchange.key
            s.used[key] = (s.byKey[key] ?? []).count
            do {
                if !s.header.providers.contains(exchange.provider) {
                    s.header.providers = (s.header.providers + [exchange.provider]).sorted()
                    try Self.writeWhole(path, header: s.header, exchanges: s.exchanges)
                } else {
                    var line: [UInt8] = s.needsNewline ? [UInt8(ascii: "\n")] : []
                    exchange.json.serialize(into: &line)
                    line.append(UInt8(ascii: "\n"))
                    try Self.appendBytes(path, line)
                }
                s.needsNewline = false
            } catch {
                logger?.error("model cassette \(file): cannot write: \(error)")
            }
        }
    }

    private static func writeWhole(_ path: String, header: CassetteHeader, exchanges: [CassetteExchange]) throws {
        var bytes: [UInt8] = []
        header.json.serialize(into: &bytes)
        bytes.append(UInt8(ascii: "\n"))
        for exchange in exchanges {
            exchange.json.serialize(into: &bytes)
            bytes.append(UInt8(ascii: "\n"))
        }
        let directory = path.deletingLastPathComponent
        if !directory.isEmpty { try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        // A new file beside the old, renamed over it: a reader never sees half of either.
        let temporary = path + ".tmp-\(getpid())"
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: temporary))
            if rename(temporary, path) != 0 { throw CassetteWriteError("cannot replace \(path): \(String(cString: strerror(errno)))") }
        } catch {
            unlink(temporary)
            throw RPCError.invalidConfiguration("model cassette \(path) cannot be written: \(error)", field: "modelCassette.path")
        }
    }

    private static func appendBytes(_ path: String, _ bytes: [UInt8]) throws {
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw CassetteWriteError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let n = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw CassetteWriteError("cannot write \(path): \(String(cString: strerror(errno)))") }
            written += n
        }
    }

    private static func cutTornLine(_ path: String, keeping size: Int) throws {
        guard truncate(path, off_t(size)) == 0 else {
            throw RPCError.invalidConfiguration("model cassette \(path): cannot cut its torn last line: \(String(cString: strerror(errno)))", field: "modelCassette.path")
        }
    }

    private static func lastByte(_ path: String, size: Int) -> UInt8? {
        FileBytes.byte(path, at: size - 1)
    }
}

struct CassetteWriteError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The cassettes one server has open, by absolute path: sessions naming the
/// same file share one cassette (one order of answers, one writer).
final class ModelCassettes: Sendable {
    /// Distinct cassette files one server may have open.
    static let maximumOpen = 256

    private let table = Mutex<[String: ModelCassette]>([:])
    private let logger: Logger?

    init(logger: Logger?) { self.logger = logger }

    /// The cassette `config` names; a relative path is taken from `directory`
    /// (default: the working directory).
    func cassette(_ config: ModelCassetteConfig, relativeTo directory: String? = nil) throws -> ModelCassette {
        guard !config.path.isEmpty else { throw RPCError.invalidConfiguration("modelCassette.path is empty", field: "modelCassette.path") }
        var absolute = config.path
        if !absolute.hasPrefix("/") {
            absolute = (directory ?? FileManager.default.currentDirectoryPath) + "/" + absolute
        }
        absolute = absolute.resolvingPathLikeFoundation
        let mode = config.mode ?? .replay
        let pace = config.pace ?? .fast
        return try table.withLock { table in
            if let existing = table[absolute] {
                guard existing.mode == mode, existing.pace == pace else {
                    throw RPCError.invalidConfiguration(
                        "model cassette \(config.path) is already open with mode \(existing.mode.rawValue), pace \(existing.pace.rawValue)",
                        field: "modelCassette.mode")
                }
                return existing
            }
            guard table.count < Self.maximumOpen else {
                throw RPCError.invalidConfiguration("more than \(Self.maximumOpen) model cassettes are open", field: "modelCassette.path")
            }
            let made = try ModelCassette(file: config.path, path: absolute, mode: mode, pace: pace, logger: logger)
            table[absolute] = made
            return made
        }
    }
}

/// A cassette as one provider uses it: the cassette and the provider kind its
/// requests are matched under.
struct CassetteBinding: Sendable {
    var cassette: ModelCassette
    var provider: String
}

extension HTTPProviderConfiguration {
    /// This configuration's cassette, bound to the provider kind that sends.
    func cassetteBinding(_ kind: ProviderKind) -> CassetteBinding? {
        cassette.map { CassetteBinding(cassette: $0, provider: kind.rawValue) }
    }
}
