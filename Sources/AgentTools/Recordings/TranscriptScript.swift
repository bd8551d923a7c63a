import AgentRPC
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

/// The optional first line of a transcript: how to start the server.
struct TranscriptHeader: Sendable {
    var description: String?
    /// The subcommand that serves: `serve` (agentrpc's protocol) or `acp`
    /// (the Agent Client Protocol front end).
    var command = "serve"
    /// Appended after the command.
    var args: [String] = []
    /// Added to (and overriding) the runner's own environment.
    var env: [String: String] = [:]
    var framing: Framing = .newline
    /// Default wait for each expectation in this file.
    var timeoutSeconds: Double?
}

/// Bytes a `sendRaw`/`sendBytes` step writes: text, or `{"base64": "..."}` for
/// bytes that are not valid UTF-8.
enum TranscriptStepKind: Sendable {
    case send(JSONValue)
    /// Several messages, each framed, written with one write (what arrives after what in one read).
    case sendTogether([JSONValue])
    case sendRaw([UInt8])
    case sendBytes([UInt8])
    case reply(JSONValue)
    case expect(JSONValue)
    case expectUnordered([JSONValue])
    case expectBatch([JSONValue])
    case closeStdin
    /// Sends the server a signal (`TERM`, `INT`, `HUP`).
    case signal(Int32)
    case expectExit(code: Int, withinSeconds: Double?)
    case expectStderr(String)
    case expectFile(FileExpectation)
    case comment
}

/// An `expectFile` step: the next lines of a JSON Lines file the server writes
/// (a `--dump-requests` or `--trace-file` file), each matched against a pattern.
struct FileExpectation: Sendable {
    /// As written; `$tmpdir` is expanded when the step runs.
    var path: String
    /// One pattern per line, in order.
    var lines: [JSONValue]
    /// More lines than `lines` may follow; they stay for the next `expectFile` step.
    /// Without it the file must hold no further complete line once these matched.
    var atLeast: Bool
}

struct TranscriptStep: Sendable {
    /// 1-based line in the file, for `file:line` in reports.
    var line: Int
    var kind: TranscriptStepKind
    /// Overrides the header/default wait for this step.
    var timeoutSeconds: Double?
    /// The step as written, shown in reports and traces.
    var text: String
}

/// A transcript file that failed to load, with the offending line.
struct TranscriptLoadError: Error, Sendable, CustomStringConvertible {
    var line: Int
    var message: String
    var description: String { "line \(line): \(message)" }
}

/// A parsed transcript file: header plus steps, validated before anything runs.
struct TranscriptScript: Sendable {
    var header = TranscriptHeader()
    var steps: [TranscriptStep] = []

    static let stepKeys: Set<String> = [
        "send", "sendTogether", "sendRaw", "sendBytes", "reply", "expect", "expectUnordered", "expectBatch",
        "closeStdin", "signal", "expectExit", "expectStderr", "expectFile",
    ]
    static let headerKeys: Set<String> = ["description", "command", "args", "env", "framing", "timeoutSeconds"]
    static let commands: Set<String> = ["serve", "acp"]

    /// Parses transcript text (JSON Lines). Blank lines are ignored.
    static func parse(_ text: String) throws(TranscriptLoadError) -> TranscriptScript {
        var script = TranscriptScript()
        var sawStep = false
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = index + 1
            let trimmed = rawLine.trimmingWhitespaceAndNewlines()
            if trimmed.isEmpty { continue }
            let value: JSONValue
            do {
                value = try JSONValue.parse(trimmed)
            } catch {
                throw TranscriptLoadError(line: line, message: "not valid JSON: \(error)")
            }
            guard case .object(let object) = value else {
                throw TranscriptLoadError(line: line, message: "each line must be a JSON object")
            }
            if let header = object["transcript"] {
                guard !sawStep, script.steps.isEmpty else {
                    throw TranscriptLoadError(line: line, message: "the \"transcript\" header must be the first line")
                }
                guard object.count == 1 else {
                    throw TranscriptLoadError(line: line, message: "the header line holds only \"transcript\"")
                }
                script.header = try parseHeader(header, line: line)
                sawStep = true
                continue
            }
            sawStep = true
            script.steps.append(try parseStep(object, line: line, text: trimmed))
        }
        return script
    }

    private static func parseHeader(_ value: JSONValue, line: Int) throws(TranscriptLoadError) -> TranscriptHeader {
        guard case .object(let o) = value else { throw TranscriptLoadError(line: line, message: "\"transcript\" must be an object") }
        if let unknown = Set(o.keys).subtracting(headerKeys).sorted().first {
            throw TranscriptLoadError(line: line, message: "unknown header field \"\(unknown)\" (known: \(headerKeys.sorted().joined(separator: ", ")))")
        }
        var header = TranscriptHeader()
        if let d = o["description"] {
            guard let s = d.stringValue else { throw TranscriptLoadError(line: line, message: "\"description\" must be a string") }
            header.description = s
        }
        if let c = o["command"] {
            guard let name = c.stringValue, commands.contains(name) else {
                throw TranscriptLoadError(line: line, message: "\"command\" must be one of \(commands.sorted().joined(separator: ", "))")
            }
            header.command = name
        }
        if let a = o["args"] {
            guard let list = a.arrayValue, case let strings = list.compactMap(\.stringValue), strings.count == list.count else {
                throw TranscriptLoadError(line: line, message: "\"args\" must be an array of strings")
            }
            header.args = strings
        }
        if let e = o["env"] {
            guard let members = e.objectValue else { throw TranscriptLoadError(line: line, message: "\"env\" must be an object of strings") }
            for (k, v) in members {
                guard let s = v.stringValue else { throw TranscriptLoadError(line: line, message: "\"env\".\(k) must be a string") }
                header.env[k] = s
            }
        }
        if let f = o["framing"] {
            switch f.stringValue {
            case "newline": header.framing = .newline
            case "content-length": header.framing = .contentLength
            default: throw TranscriptLoadError(line: line, message: "\"framing\" must be \"newline\" or \"content-length\"")
            }
        }
        if let t = o["timeoutSeconds"] {
            guard let seconds = t.numberValue, DurationBounds.positiveSeconds.contains(seconds) else { throw TranscriptLoadError(line: line, message: "\"timeoutSeconds\" \(DurationBounds.positiveSeconds.requirement)") }
            header.timeoutSeconds = seconds
        }
        return header
    }

    private static func parseStep(_ o: [String: JSONValue], line: Int, text: String) throws(TranscriptLoadError) -> TranscriptStep {
        let kinds = Set(o.keys).intersection(stepKeys)
        let extra = Set(o.keys).subtracting(stepKeys).subtracting(["comment", "timeoutSeconds"])
        if let unknown = extra.sorted().first {
            throw TranscriptLoadError(line: line, message: "unknown step field \"\(unknown)\" (steps: \(stepKeys.sorted().joined(separator: ", ")))")
        }
        guard kinds.count <= 1 else {
            throw TranscriptLoadError(line: line, message: "one step per line; found \(kinds.sorted().joined(separator: " and "))")
        }
        if let c = o["comment"], c.stringValue == nil {
            throw TranscriptLoadError(line: line, message: "\"comment\" must be a string")
        }
        var timeout: Double?
        if let t = o["timeoutSeconds"] {
            guard let seconds = t.numberValue, DurationBounds.positiveSeconds.contains(seconds) else { throw TranscriptLoadError(line: line, message: "\"timeoutSeconds\" \(DurationBounds.positiveSeconds.requirement)") }
            timeout = seconds
        }
        guard let key = kinds.first, let value = o[key] else {
            guard o["comment"] != nil else { throw TranscriptLoadError(line: line, message: "empty step") }
            return TranscriptStep(line: line, kind: .comment, timeoutSeconds: nil, text: text)
        }

        func pattern(_ p: JSONValue) throws(TranscriptLoadError) -> JSONValue {
            if let error = TranscriptMatcher.validatePattern(p) {
                throw TranscriptLoadError(line: line, message: "\(key) pattern \(error)")
            }
            return p
        }
        func template(_ t: JSONValue) throws(TranscriptLoadError) -> JSONValue {
            // Only the shape is checked here: $ref: values are filled in when the
            // step runs, since they come from earlier server messages.
            var path: [TranscriptPathComponent] = []
            if let error = validateTemplate(t, &path) {
                throw TranscriptLoadError(line: line, message: "\(key) \(error)")
            }
            return t
        }
        func bytes(_ b: JSONValue) throws(TranscriptLoadError) -> [UInt8] {
            if let s = b.stringValue { return Array(s.utf8) }
            if let encoded = b["base64"]?.stringValue, b.objectValue?.count == 1 {
                guard let data = Data(base64Encoded: encoded) else {
                    throw TranscriptLoadError(line: line, message: "\(key): \"base64\" is not valid base64")
                }
                return Array(data)
            }
            throw TranscriptLoadError(line: line, message: "\(key) takes a string or {\"base64\": \"...\"}")
        }
        func patternList(_ v: JSONValue) throws(TranscriptLoadError) -> [JSONValue] {
            guard let list = v.arrayValue, !list.isEmpty else {
                throw TranscriptLoadError(line: line, message: "\(key) takes a non-empty array of patterns")
            }
            var out: [JSONValue] = []
            for p in list { out.append(try pattern(p)) }
            return out
        }

        let kind: TranscriptStepKind
        switch key {
        case "send": kind = .send(try template(value))
        case "sendTogether":
            guard let list = value.arrayValue, !list.isEmpty else {
                throw TranscriptLoadError(line: line, message: "sendTogether takes a non-empty array of messages")
            }
            var messages: [JSONValue] = []
            for m in list { messages.append(try template(m)) }
            kind = .sendTogether(messages)
        case "signal":
            let names: [String: Int32] = ["TERM": SIGTERM, "INT": SIGINT, "HUP": SIGHUP]
            guard let name = value.stringValue, let number = names[name] else {
                throw TranscriptLoadError(line: line, message: "signal takes \"TERM\", \"INT\" or \"HUP\"")
            }
            kind = .signal(number)
        case "reply": kind = .reply(try template(value))
        case "sendRaw": kind = .sendRaw(try bytes(value))
        case "sendBytes": kind = .sendBytes(try bytes(value))
        case "expect": kind = .expect(try pattern(value))
        case "expectUnordered": kind = .expectUnordered(try patternList(value))
        case "expectBatch": kind = .expectBatch(try patternList(value))
        case "closeStdin":
            guard value == .bool(true) else { throw TranscriptLoadError(line: line, message: "write {\"closeStdin\": true}") }
            kind = .closeStdin
        case "expectExit":
            guard case .object(let e) = value else { throw TranscriptLoadError(line: line, message: "expectExit takes {\"code\": N, \"withinSeconds\": S}") }
            if let unknown = Set(e.keys).subtracting(["code", "withinSeconds"]).sorted().first {
                throw TranscriptLoadError(line: line, message: "unknown expectExit field \"\(unknown)\"")
            }
            var code = 0
            if let c = e["code"] {
                guard case .int(let n) = c else { throw TranscriptLoadError(line: line, message: "expectExit \"code\" must be an integer") }
                code = n
            }
            var within: Double?
            if let w = e["withinSeconds"] {
                guard let s = w.numberValue, DurationBounds.positiveSeconds.contains(s) else { throw TranscriptLoadError(line: line, message: "expectExit \"withinSeconds\" \(DurationBounds.positiveSeconds.requirement)") }
                within = s
            }
            kind = .expectExit(code: code, withinSeconds: within)
        case "expectStderr":
            guard let re = value.stringValue else { throw TranscriptLoadError(line: line, message: "expectStderr takes a regex string") }
            do {
                _ = try Regex(re)
            } catch {
                throw TranscriptLoadError(line: line, message: "expectStderr: invalid regex: \(error)")
            }
            kind = .expectStderr(re)
        case "expectFile":
            let usage = "expectFile takes {\"path\": \"...\", \"lines\": [PATTERN, ...], \"atLeast\": false}"
            guard case .object(let e) = value else { throw TranscriptLoadError(line: line, message: usage) }
            if let unknown = Set(e.keys).subtracting(["path", "lines", "atLeast"]).sorted().first {
                throw TranscriptLoadError(line: line, message: "unknown expectFile field \"\(unknown)\" (\(usage))")
            }
            guard let path = e["path"]?.stringValue, !path.isEmpty else {
                throw TranscriptLoadError(line: line, message: "expectFile needs a \"path\" string")
            }
            guard let list = e["lines"]?.arrayValue else {
                throw TranscriptLoadError(line: line, message: "expectFile needs \"lines\": an array of patterns, one per line (may be empty)")
            }
            var patterns: [JSONValue] = []
            for (i, p) in list.enumerated() {
                if let error = TranscriptMatcher.validatePattern(p) {
                    throw TranscriptLoadError(line: line, message: "expectFile lines[\(i)] pattern \(error)")
                }
                patterns.append(p)
            }
            var atLeast = false
            if let a = e["atLeast"] {
                guard case .bool(let flag) = a else { throw TranscriptLoadError(line: line, message: "expectFile \"atLeast\" must be a boolean") }
                atLeast = flag
            }
            kind = .expectFile(FileExpectation(path: path, lines: patterns, atLeast: atLeast))
        default:
            throw TranscriptLoadError(line: line, message: "unknown step \"\(key)\"")
        }
        return TranscriptStep(line: line, kind: kind, timeoutSeconds: timeout, text: text)
    }

    private static func validateTemplate(_ t: JSONValue, _ path: inout [TranscriptPathComponent]) -> TranscriptPatternError? {
        switch t {
        case .string(let s):
            switch TranscriptToken.parse(s) {
            case .success(.literal), .success(.ref): return nil
            case .failure(let problem): return TranscriptPatternError(path: TranscriptPathComponent.render(path), message: problem.text)
            case .success:
                return TranscriptPatternError(
                    path: TranscriptPathComponent.render(path),
                    message: "\"\(s)\" is only allowed in expectations; messages sent to the server may use $ref: and $$ only")
            }
        case .array(let elements):
            for (i, element) in elements.enumerated() {
                path.append(.index(i))
                if let error = validateTemplate(element, &path) { return error }
                path.removeLast()
            }
            return nil
        case .object(let members):
            for key in members.keys.sorted() {
                guard let value = members[key] else { continue }
                path.append(.key(key))
                if let error = validateTemplate(value, &path) { return error }
                path.removeLast()
            }
            return nil
        default:
            return nil
        }
    }
}

/// Indented JSON with sorted keys, for failure reports.
enum TranscriptPrettyPrinter {
    static func format(_ value: JSONValue, indent: String = "") -> String {
        var out = ""
        write(value, indent: indent, into: &out)
        return out
    }

    /// One-line JSON with a space after `:` and `,`, easier to read than the wire form.
    static func inline(_ value: JSONValue) -> String {
        switch value {
        case .array(let elements):
            return "[" + elements.map(inline).joined(separator: ", ") + "]"
        case .object(let members):
            return "{" + members.keys.sorted().map { JSONValue.string($0).serializedString() + ": " + (members[$0].map(inline) ?? "null") }.joined(separator: ", ") + "}"
        default:
            return value.serializedString()
        }
    }

    /// Containers whose compact form fits in this many characters stay on one line.
    static let inlineWidth = 60

    private static func write(_ value: JSONValue, indent: String, into out: inout String) {
        let inner = indent + "  "
        let compact = inline(value)
        if compact.count <= inlineWidth {
            out += compact
            return
        }
        switch value {
        case .array(let elements) where !elements.isEmpty:
            out += "[\n"
            for (i, element) in elements.enumerated() {
                out += inner
                write(element, indent: inner, into: &out)
                out += i == elements.count - 1 ? "\n" : ",\n"
            }
            out += indent + "]"
        case .object(let members) where !members.isEmpty:
            out += "{\n"
            let keys = members.keys.sorted()
            for (i, key) in keys.enumerated() {
                out += inner + JSONValue.string(key).serializedString() + ": "
                if let member = members[key] { write(member, indent: inner, into: &out) }
                out += i == keys.count - 1 ? "\n" : ",\n"
            }
            out += indent + "}"
        default:
            out += compact
        }
    }
}
