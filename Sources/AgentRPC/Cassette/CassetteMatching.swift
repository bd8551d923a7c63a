import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Finds, for a request a cassette cannot answer, the recorded request nearest
/// to it and the first place they differ: what a person needs to see why a
/// test drifted.
enum CassetteMatching {
    /// A request as matched: provider, method, path, scrubbed body.
    struct Request: Sendable {
        var provider: String
        var method: String
        var path: String
        var body: JSONValue
        var canonicalBody: String

        init(provider: String, method: String, path: String, body: JSONValue) {
            self.provider = provider
            self.method = method
            self.path = path
            self.body = body
            self.canonicalBody = body.serializedString()
        }

        var key: String { CassetteExchange.key(provider: provider, method: method, path: path, canonicalBody: canonicalBody) }
    }

    /// Values shown in a difference are cut to this many characters.
    static let maximumShownCharacters = 200

    /// The index of the exchange nearest to `request`: the same provider first,
    /// then the same path, then the longest common prefix of the canonical
    /// bodies (the body that differs latest). Nil for an empty cassette.
    static func nearest(to request: Request, in exchanges: [CassetteExchange], canonical: [String]) -> Int? {
        var best: (index: Int, score: (Int, Int, Int))?
        let sent = Array(request.canonicalBody.utf8)
        for (i, exchange) in exchanges.enumerated() {
            let recorded = canonical[i].utf8
            var common = 0
            for (a, b) in zip(sent, recorded) {
                if a != b { break }
                common += 1
            }
            let score = (exchange.provider == request.provider ? 1 : 0, exchange.path == request.path ? 1 : 0, common)
            if let b = best, score <= b.score { continue }
            best = (i, score)
        }
        return best?.index
    }

    /// Where `sent` first differs from the recorded exchange, in the order the
    /// canonical form lists things (object keys sorted).
    static func difference(recorded: CassetteExchange, sent: Request) -> CassetteDifference {
        if recorded.provider != sent.provider {
            return CassetteDifference(part: "provider", pointer: "", recorded: shown(.string(recorded.provider)), sent: shown(.string(sent.provider)))
        }
        if recorded.path != sent.path || recorded.method != sent.method {
            return CassetteDifference(
                part: "path", pointer: "", recorded: shown(.string("\(recorded.method) \(recorded.path)")),
                sent: shown(.string("\(sent.method) \(sent.path)")))
        }
        let found = firstDifference(recorded.body, sent.body, pointer: "") ?? ("", recorded.body, sent.body)
        return CassetteDifference(part: "body", pointer: found.pointer, recorded: found.recorded.map(shown), sent: found.sent.map(shown))
    }

    /// The JSON Pointer of the first difference, with the values on each side
    /// there (nil where a side has no member or element); nil when equal.
    static func firstDifference(_ a: JSONValue, _ b: JSONValue, pointer: String, depth: Int = 0) -> (pointer: String, recorded: JSONValue?, sent: JSONValue?)? {
        // The parser bounds nesting; this bound keeps the walk safe on any value.
        guard depth < JSONValue.maximumNestingDepth else { return a == b ? nil : (pointer, a, b) }
        switch (a, b) {
        case (.object(let x), .object(let y)):
            for key in Set(x.keys).union(y.keys).sorted() {
                let here = pointer + "/" + escape(key)
                guard let u = x[key], let v = y[key] else { return (here, x[key], y[key]) }
                if let found = firstDifference(u, v, pointer: here, depth: depth + 1) { return found }
            }
            return nil
        case (.array(let x), .array(let y)):
            for i in 0..<max(x.count, y.count) {
                let here = pointer + "/" + String(i)
                guard i < x.count, i < y.count else { return (here, x.indices.contains(i) ? .some(x[i]) : .none, y.indices.contains(i) ? .some(y[i]) : .none) }
                if let found = firstDifference(x[i], y[i], pointer: here, depth: depth + 1) { return found }
            }
            return nil
        default:
            return a.serializedString() == b.serializedString() ? nil : (pointer, a, b)
        }
    }

    /// RFC 6901: `~` is `~0`, `/` is `~1`.
    static func escape(_ key: String) -> String {
        key.replacingScalars(of: "~", with: "~0").replacingScalars(of: "/", with: "~1")
    }

    static func shown(_ value: JSONValue) -> String {
        let text = value.serializedString()
        return text.count > maximumShownCharacters ? String(text.prefix(maximumShownCharacters)) + "…" : text
    }
}
