import AgentRPC
import AgentRPCProtocol

/// A problem in a transcript's pattern or template itself (not a mismatch with
/// the server's output): an unknown placeholder, a bad regex, a misplaced `$absent`.
struct TranscriptPatternError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where in the pattern, e.g. `$.params.sessionId`.
    var path: String
    var message: String
    var description: String { "at \(path): \(message)" }
}

/// The first place where a message differs from its pattern.
struct TranscriptMismatch: Sendable, Hashable, CustomStringConvertible {
    /// JSON path of the difference, e.g. `$.error.data.kind`.
    var path: String
    /// One line: `expected "parseError", got "invalidRequest"`.
    var reason: String
    var description: String { "at \(path): \(reason)" }
}

/// What a string inside a pattern stands for.
///
/// A string is a placeholder when it starts with `$` followed by a letter;
/// `$$` escapes a literal leading `$`; anything else (including
/// `"$/cancelRequest"`) is a literal. Unknown names are errors so a typo such as
/// `"$strng"` cannot silently turn into a literal comparison.
enum TranscriptToken: Sendable, Hashable {
    case literal(String)
    case any, string, number, integer, bool, object, array, timestamp, absent
    case regex(String)
    case capture(String)
    case ref(String)

    static func parse(_ text: String) -> Result<TranscriptToken, TranscriptTokenProblem> {
        guard text.hasPrefix("$") else { return .success(.literal(text)) }
        let rest = text.dropFirst()
        if rest.hasPrefix("$") { return .success(.literal(String(rest))) }
        guard let first = rest.first, first.isLetter else { return .success(.literal(text)) }
        let name: Substring
        let argument: String?
        if let colon = rest.firstIndex(of: ":") {
            name = rest[..<colon]
            argument = String(rest[rest.index(after: colon)...])
        } else {
            name = rest
            argument = nil
        }
        switch (name, argument) {
        case ("any", nil): return .success(.any)
        case ("string", nil): return .success(.string)
        case ("number", nil): return .success(.number)
        case ("integer", nil): return .success(.integer)
        case ("bool", nil): return .success(.bool)
        case ("object", nil): return .success(.object)
        case ("array", nil): return .success(.array)
        case ("timestamp", nil): return .success(.timestamp)
        case ("absent", nil): return .success(.absent)
        case ("regex", let re?):
            do {
                _ = try Regex(re)
            } catch {
                return .failure(TranscriptTokenProblem(text: "invalid regex in \"\(text)\": \(error)"))
            }
            return .success(.regex(re))
        case ("capture", let n?) where !n.isEmpty: return .success(.capture(n))
        case ("ref", let n?) where !n.isEmpty: return .success(.ref(n))
        default:
            return .failure(TranscriptTokenProblem(text: "unknown placeholder \"\(text)\" (write \"$\(text)\" for a literal string starting with $)"))
        }
    }
}

/// Why a `$...` string is not a valid placeholder.
struct TranscriptTokenProblem: Error, Sendable {
    var text: String
}

/// One step into a JSON document, for readable paths like `$.result.items[2]`.
enum TranscriptPathComponent: Sendable, Hashable {
    case key(String)
    case index(Int)

    static func render(_ path: [TranscriptPathComponent]) -> String {
        var out = "$"
        for component in path {
            switch component {
            case .index(let i): out += "[\(i)]"
            case .key(let k):
                let plain = !k.isEmpty && k.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" } && !(k.first?.isNumber ?? false)
                out += plain ? ".\(k)" : "[\(JSONValue.string(k).serializedString())]"
            }
        }
        return out
    }
}

/// Matches server messages against transcript patterns and fills client
/// templates, carrying the values captured so far (`$capture:` / `$ref:`).
///
/// Matching is strict by default: objects must have exactly the pattern's keys
/// (unless `"$partial": true`), arrays the same length, and numbers compare by
/// value (`1` equals `1.0`). Captures made by a failed match are discarded.
struct TranscriptMatcher: Sendable {
    /// Values bound by `$capture:<name>` so far.
    private(set) var captures: [String: JSONValue]

    init(captures: [String: JSONValue] = [:]) {
        self.captures = captures
    }

    /// Checks `actual` against `pattern`; returns nil and commits new captures on
    /// success, or the first difference (in sorted-key, depth-first order).
    mutating func match(_ pattern: JSONValue, against actual: JSONValue) -> TranscriptMismatch? {
        var bindings = captures
        var path: [TranscriptPathComponent] = []
        if let mismatch = Self.walk(pattern, actual, &path, &bindings) { return mismatch }
        captures = bindings
        return nil
    }

    /// Replaces `$ref:<name>` strings anywhere in a client message with the
    /// captured values and unescapes `$$`; other placeholders are refused.
    func substitute(_ template: JSONValue) throws(TranscriptPatternError) -> JSONValue {
        var path: [TranscriptPathComponent] = []
        return try substitute(template, &path)
    }

    private func substitute(_ template: JSONValue, _ path: inout [TranscriptPathComponent]) throws(TranscriptPatternError) -> JSONValue {
        switch template {
        case .string(let s):
            switch TranscriptToken.parse(s) {
            case .failure(let problem):
                throw TranscriptPatternError(path: TranscriptPathComponent.render(path), message: problem.text)
            case .success(.literal(let text)):
                return .string(text)
            case .success(.ref(let name)):
                guard let value = captures[name] else {
                    throw TranscriptPatternError(path: TranscriptPathComponent.render(path), message: "$ref:\(name) is not captured yet")
                }
                return value
            case .success:
                throw TranscriptPatternError(
                    path: TranscriptPathComponent.render(path),
                    message: "\"\(s)\" is only allowed in expectations; messages sent to the server may use $ref: and $$ only")
            }
        case .array(let elements):
            var out: [JSONValue] = []
            out.reserveCapacity(elements.count)
            for (i, element) in elements.enumerated() {
                path.append(.index(i))
                out.append(try substitute(element, &path))
                path.removeLast()
            }
            return .array(out)
        case .object(let members):
            var out: [String: JSONValue] = [:]
            for key in members.keys.sorted() {
                guard let value = members[key] else { continue }
                path.append(.key(key))
                out[key] = try substitute(value, &path)
                path.removeLast()
            }
            return .object(out)
        default:
            return template
        }
    }

    /// Checks a pattern for errors before anything runs, so a typo is reported
    /// with its line instead of as a confusing mismatch.
    static func validatePattern(_ pattern: JSONValue) -> TranscriptPatternError? {
        var path: [TranscriptPathComponent] = []
        return validate(pattern, &path, isMemberValue: false)
    }

    private static func validate(_ pattern: JSONValue, _ path: inout [TranscriptPathComponent], isMemberValue: Bool) -> TranscriptPatternError? {
        switch pattern {
        case .string(let s):
            switch TranscriptToken.parse(s) {
            case .failure(let problem):
                return TranscriptPatternError(path: TranscriptPathComponent.render(path), message: problem.text)
            case .success(.absent) where !isMemberValue:
                return TranscriptPatternError(path: TranscriptPathComponent.render(path), message: "$absent is only allowed as the value of an object member")
            default:
                return nil
            }
        case .array(let elements):
            for (i, element) in elements.enumerated() {
                path.append(.index(i))
                if let error = validate(element, &path, isMemberValue: false) { return error }
                path.removeLast()
            }
            return nil
        case .object(let members):
            for key in members.keys.sorted() {
                guard let value = members[key] else { continue }
                path.append(.key(key))
                if key == partialKey, value.boolValue == nil {
                    return TranscriptPatternError(path: TranscriptPathComponent.render(path), message: "\"$partial\" must be true or false")
                }
                if let error = validate(value, &path, isMemberValue: true) { return error }
                path.removeLast()
            }
            return nil
        default:
            return nil
        }
    }

    static let partialKey = "$partial"

    private static func walk(
        _ pattern: JSONValue, _ actual: JSONValue,
        _ path: inout [TranscriptPathComponent], _ bindings: inout [String: JSONValue]
    ) -> TranscriptMismatch? {
        func fail(_ reason: String) -> TranscriptMismatch {
            TranscriptMismatch(path: TranscriptPathComponent.render(path), reason: reason)
        }
        switch pattern {
        case .string(let s):
            let token: TranscriptToken
            switch TranscriptToken.parse(s) {
            case .failure(let problem): return fail("invalid pattern: \(problem.text)")
            case .success(let t): token = t
            }
            switch token {
            case .literal(let text):
                return actual == .string(text) ? nil : fail("expected \(brief(.string(text))), got \(brief(actual))")
            case .any:
                return nil
            case .absent:
                return fail("$absent is only allowed as the value of an object member")
            case .string:
                return actual.stringValue != nil ? nil : fail("expected a string, got \(brief(actual))")
            case .number:
                return actual.numberValue != nil ? nil : fail("expected a number, got \(brief(actual))")
            case .integer:
                return actual.intValue != nil ? nil : fail("expected an integer, got \(brief(actual))")
            case .bool:
                return actual.boolValue != nil ? nil : fail("expected a boolean, got \(brief(actual))")
            case .object:
                return actual.objectValue != nil ? nil : fail("expected an object, got \(brief(actual))")
            case .array:
                return actual.arrayValue != nil ? nil : fail("expected an array, got \(brief(actual))")
            case .timestamp:
                if let text = actual.stringValue, isISO8601Timestamp(text) { return nil }
                return fail("expected an ISO-8601 timestamp, got \(brief(actual))")
            case .regex(let re):
                guard let text = actual.stringValue else { return fail("expected a string matching /\(re)/, got \(brief(actual))") }
                guard let regex = try? Regex(re) else { return fail("invalid pattern: bad regex /\(re)/") }
                return (try? regex.wholeMatch(in: text)) != nil ? nil : fail("expected a string matching /\(re)/, got \(brief(actual))")
            case .capture(let name):
                bindings[name] = actual
                return nil
            case .ref(let name):
                guard let bound = bindings[name] else { return fail("$ref:\(name) is not captured yet (got \(brief(actual)))") }
                return bound.numericallyEquals(actual) ? nil : fail("expected $ref:\(name) = \(brief(bound)), got \(brief(actual))")
            }
        case .object(let expected):
            guard case .object(let got) = actual else { return fail("expected an object, got \(brief(actual))") }
            let partial = expected[partialKey]?.boolValue ?? false
            var keys = Set(expected.keys)
            keys.remove(partialKey)
            if !partial { keys.formUnion(got.keys) }
            for key in keys.sorted() {
                path.append(.key(key))
                defer { path.removeLast() }
                let patternValue = expected[key]
                let isAbsent = patternValue.map { if case .string(let s) = $0, case .success(.absent) = TranscriptToken.parse(s) { true } else { false } } ?? false
                switch (patternValue, got[key]) {
                case (nil, let value?):
                    return fail("unexpected member (value \(brief(value)))")
                case (_?, nil) where isAbsent:
                    continue
                case (let p?, nil):
                    return fail("missing (expected \(describe(p)))")
                case (_?, let value?) where isAbsent:
                    return fail("expected no such member, got \(brief(value))")
                case (let p?, let value?):
                    if let mismatch = walk(p, value, &path, &bindings) { return mismatch }
                case (nil, nil):
                    continue
                }
            }
            return nil
        case .array(let expected):
            guard case .array(let got) = actual else { return fail("expected an array, got \(brief(actual))") }
            guard expected.count == got.count else {
                return fail("expected \(expected.count) element\(expected.count == 1 ? "" : "s"), got \(got.count): \(brief(actual))")
            }
            for (i, (p, value)) in zip(expected, got).enumerated() {
                path.append(.index(i))
                defer { path.removeLast() }
                if let mismatch = walk(p, value, &path, &bindings) { return mismatch }
            }
            return nil
        case .int, .double:
            guard actual.numberValue != nil else { return fail("expected \(brief(pattern)), got \(brief(actual))") }
            return pattern.numericallyEquals(actual) ? nil : fail("expected \(brief(pattern)), got \(brief(actual))")
        case .null, .bool:
            return pattern == actual ? nil : fail("expected \(brief(pattern)), got \(brief(actual))")
        }
    }

    /// What a pattern asks for, in words, for "missing" reports.
    private static func describe(_ pattern: JSONValue) -> String {
        if case .string(let s) = pattern, case .success(let token) = TranscriptToken.parse(s) {
            switch token {
            case .literal: break
            case .any, .capture: return "any value"
            default: return s
            }
        }
        return brief(pattern)
    }

    /// Compact JSON cut to one readable line.
    static func brief(_ value: JSONValue) -> String {
        let text = value.serializedString()
        return text.count > 80 ? String(text.prefix(77)) + "..." : text
    }

    /// ISO-8601 date-time, as servers write it: `2024-05-01T12:00:00Z`, with
    /// optional fractional seconds and a `Z` or `±hh:mm` offset.
    static func isISO8601Timestamp(_ text: String) -> Bool {
        let re = #/\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})/#
        return (try? re.wholeMatch(in: text)) != nil
    }
}
