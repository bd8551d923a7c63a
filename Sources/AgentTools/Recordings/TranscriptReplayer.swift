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

/// The outcome of replaying one transcript file.
struct TranscriptResult: Sendable {
    /// The transcript file as given.
    var path: String
    /// Steps that ran (comments not counted); on failure, including the failed one.
    var steps: Int
    /// nil when the transcript passed; otherwise a readable multi-line report
    /// starting with `path:line:`.
    var failureReport: String?
    /// Every step and server message in order, when the replayer is verbose.
    var trace: [String]

    var passed: Bool { failureReport == nil }
}

/// Replays recorded transcripts (`*.jsonl`, see docs/transcripts.md) against a
/// real server binary over stdio and reports the first divergence.
package struct TranscriptReplayer: Sendable {
    /// The server binary; it is started as `executable <header command> <header args...>`.
    package var executable: String
    /// Seconds each expectation waits unless the transcript says otherwise.
    var defaultTimeout: Double
    /// Collect a trace of every step and message in `TranscriptResult.trace`.
    package var verbose: Bool
    /// Options added after each transcript's own (`replay --model-cassette FILE`
    /// adds `--model-cassette FILE --cassette-mode replay`).
    var extraServerArguments: [String] = []

    /// How long the server gets to exit after the transcript closes its stdin.
    static let exitGraceSeconds = 2.0
    /// How many stderr lines a failure report shows.
    static let stderrTailLines = 20

    package init(executable: String, defaultTimeout: Double = 5, verbose: Bool = false) {
        self.executable = executable
        self.defaultTimeout = defaultTimeout
        self.verbose = verbose
    }

    /// Replays the transcript file at `path`. Never throws: problems with the
    /// file, the process or the conversation all end up in `failureReport`.
    ///
    /// Ignores SIGPIPE process-wide, so writing to a server that died is
    /// reported instead of killing the caller.
    func replay(fileAt path: String) async -> TranscriptResult {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            return TranscriptResult(path: path, steps: 0, failureReport: "\(path): cannot read the transcript: \(error.localizedDescriptionLikeFoundation)", trace: [])
        }
        return await replay(text: text, name: path)
    }

    /// Replays transcript text; `name` stands for the file in reports.
    func replay(text: String, name: String) async -> TranscriptResult {
        // The run blocks on pipes and conditions, so it gets its own thread
        // rather than holding a cooperative-pool thread for seconds.
        await withCheckedContinuation { (continuation: CheckedContinuation<TranscriptResult, Never>) in
            let run: @Sendable () -> Void = { [self] in
                continuation.resume(returning: replaySynchronously(text: text, name: name))
            }
            // Without a thread of its own the run holds the caller's thread instead;
            // it is bounded by its own deadlines either way.
            do { try OSThread.start(name: "transcript-replay", run) } catch { run() }
        }
    }

    func replaySynchronously(text: String, name: String) -> TranscriptResult {
        let script: TranscriptScript
        do {
            script = try TranscriptScript.parse(text)
        } catch {
            return TranscriptResult(path: name, steps: 0, failureReport: "\(name):\(error.line): \(error.message)", trace: [])
        }
        let run = TranscriptRun(
            name: name, script: script, executable: executable,
            defaultTimeout: script.header.timeoutSeconds ?? defaultTimeout, verbose: verbose, extraArguments: extraServerArguments)
        return run.run()
    }

    /// `agentrpc replay [--timeout S] [--verbose] [--server PATH] FILE_OR_DIR...`:
    /// replays each transcript (directories are searched for `*.jsonl`), prints
    /// `PASS path (N steps)` or `FAIL path` plus the report, then `N passed, M failed`.
    /// Returns 0 only if every transcript passed; 2 for usage errors.
    ///
    /// - Parameters:
    ///   - arguments: the words after `replay`.
    ///   - executable: the server to start, normally the running binary's own path.
    ///   - output: receives each line of output, without a trailing newline.
    package static func runCommandLine(arguments: [String], executable: String, output: (String) -> Void) async -> Int32 {
        let usage = "usage: agentrpc replay [--timeout SECONDS] [--verbose] [--server PATH] [--model-cassette FILE [--cassette-pace PACE]] FILE_OR_DIR..."
        var timeout = 5.0
        var cassette: [String] = []
        var pace: [String] = []
        var verbose = false
        var server = executable
        var inputs: [String] = []
        var i = 0
        while i < arguments.count {
            let argument = arguments[i]
            switch argument {
            case "--timeout":
                guard i + 1 < arguments.count, let seconds = Double(arguments[i + 1]), DurationBounds.positiveSeconds.contains(seconds) else {
                    output("--timeout \(DurationBounds.positiveSeconds.requirement)\n\(usage)")
                    return 2
                }
                timeout = seconds
                i += 1
            case "--server":
                guard i + 1 < arguments.count else {
                    output("--server needs the path of a server binary\n\(usage)")
                    return 2
                }
                server = arguments[i + 1]
                i += 1
            case "--model-cassette", "--cassette-pace":
                guard i + 1 < arguments.count, !arguments[i + 1].isEmpty else {
                    output("\(argument) needs a value\n\(usage)")
                    return 2
                }
                // The model's side of the conversation comes from the cassette, never the network.
                if argument == "--model-cassette" {
                    cassette = ["--model-cassette", arguments[i + 1], "--cassette-mode", "replay"]
                } else {
                    pace = ["--cassette-pace", arguments[i + 1]]
                }
                i += 1
            case "--verbose", "-v":
                verbose = true
            case "--help", "-h":
                output(usage)
                return 0
            default:
                if argument.hasPrefix("-") && argument != "-" {
                    output("unknown option \(argument)\n\(usage)")
                    return 2
                }
                inputs.append(argument)
            }
            i += 1
        }
        guard !inputs.isEmpty else {
            output(usage)
            return 2
        }
        var files: [String] = []
        for input in inputs {
            guard let kind = PathKind.of(input) else {
                output("no such file or directory: \(input)")
                return 2
            }
            if kind == .directory {
                let found = transcriptFiles(under: input)
                guard !found.isEmpty else {
                    output("no *.jsonl transcripts under \(input)")
                    return 2
                }
                files += found
            } else {
                files.append(input)
            }
        }

        if cassette.isEmpty && !pace.isEmpty {
            output("--cassette-pace needs --model-cassette FILE\n\(usage)")
            return 2
        }
        var replayer = TranscriptReplayer(executable: server, defaultTimeout: timeout, verbose: verbose)
        replayer.extraServerArguments = cassette + pace
        var passed = 0
        var failed = 0
        for file in files {
            let result = await replayer.replay(fileAt: file)
            if verbose { result.trace.forEach(output) }
            if let report = result.failureReport {
                failed += 1
                output("FAIL \(file)")
                output(report)
            } else {
                passed += 1
                output("PASS \(file) (\(result.steps) step\(result.steps == 1 ? "" : "s"))")
            }
        }
        output("\(passed) passed, \(failed) failed")
        return failed == 0 ? 0 : 1
    }

    /// `*.jsonl` files below `directory`, sorted so runs are reproducible.
    static func transcriptFiles(under directory: String) -> [String] {
        PathKind.entries(under: directory).filter { $0.hasSuffix(".jsonl") }.map(directory.appendingPathComponent).sorted()
    }
}

/// Why a run stopped early.
struct TranscriptFailure: Error {
    var line: Int?
    var summary: String
    /// Titled blocks under the summary (expected / actual / ...).
    var sections: [(title: String, body: String)] = []
}

/// One replay of one script against one server process.
final class TranscriptRun {
    let name: String
    let script: TranscriptScript
    let executable: String
    let defaultTimeout: Double
    let verbose: Bool
    let extraArguments: [String]

    private var matcher = TranscriptMatcher()
    private var trace: [String] = []
    private var stepsRun = 0
    private var exited = false
    /// The directory `$tmpdir` names, made on first use and removed after the run.
    private var temporaryDirectory: String?
    /// Per file an `expectFile` step read (by expanded path): how many of its lines earlier steps consumed.
    private var fileCursors: [String: Int] = [:]

    /// The capture that holds the `$tmpdir` directory from the start.
    static let temporaryDirectoryCapture = "tmpdir"

    /// How often `expectFile` looks at its file again while waiting for lines.
    static let filePollInterval = 0.01

    init(name: String, script: TranscriptScript, executable: String, defaultTimeout: Double, verbose: Bool, extraArguments: [String] = []) {
        self.extraArguments = extraArguments
        self.name = name
        self.script = script
        self.executable = executable
        self.defaultTimeout = defaultTimeout
        self.verbose = verbose
    }

    /// `$tmpdir` in args, env and `expectFile` paths names a fresh empty directory
    /// per replay, so transcripts can point a store or files somewhere private;
    /// `$transcriptdir` the directory of the transcript file, so it can name a
    /// configuration file committed beside it.
    private func expand(_ text: String) -> String {
        var text = text
        if text.contains("$transcriptdir") {
            let file = URL(fileURLWithPath: name, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
            text = text.replacingScalars(of: "$transcriptdir", with: file.deletingLastPathComponent().standardizedFileURL.path)
        }
        guard text.contains("$tmpdir") else { return text }
        if temporaryDirectory == nil {
            let path = systemTemporaryDirectory.appendingPathComponent("agentrpc-transcript-\(UUID().uuidString)")
            try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            temporaryDirectory = path
        }
        return text.replacingScalars(of: "$tmpdir", with: temporaryDirectory ?? systemTemporaryDirectory)
    }

    func run() -> TranscriptResult {
        defer {
            if let temporaryDirectory { try? FileManager.default.removeItem(atPath: temporaryDirectory) }
        }
        var environment = ProcessEnvironment.current()
        for (key, value) in script.header.env { environment[key] = expand(value) }
        // The server keeps sessions under $XDG_STATE_HOME by default: a replay gets
        // a private store, never the user's, and parallel replays never share one.
        if script.header.env["XDG_STATE_HOME"] == nil { environment["XDG_STATE_HOME"] = expand("$tmpdir/state") }
        let arguments = [script.header.command] + script.header.args.map(expand) + extraArguments
        // `$ref:tmpdir` is the directory `$tmpdir` names, as a whole value in the
        // messages: an ACP editor names its workspace (`cwd`) that way.
        if script.steps.contains(where: { $0.text.contains("\"$ref:\(Self.temporaryDirectoryCapture)\"") }) {
            matcher = TranscriptMatcher(captures: [Self.temporaryDirectoryCapture: .string(expand("$tmpdir"))])
        }

        let server = TranscriptServerProcess(
            executable: executable, arguments: arguments, environment: environment, framing: script.header.framing)
        do {
            try server.start()
        } catch {
            return result(TranscriptFailure(line: nil, summary: "cannot start \(executable): \(error)"), server: nil)
        }
        log("started \(executable) \(arguments.joined(separator: " ")) (pid \(server.processIdentifier))")
        do throws(TranscriptFailure) {
            for step in script.steps {
                if case .comment = step.kind {
                    log("# \(step.text)")
                    continue
                }
                stepsRun += 1
                do throws(TranscriptFailure) {
                    try perform(step, server)
                } catch var failure {
                    failure.line = failure.line ?? step.line
                    throw failure
                }
            }
            try finish(server)
        } catch {
            server.stop()
            return result(error, server: server)
        }
        return result(nil, server: server)
    }

    private func log(_ line: String) {
        if verbose { trace.append("  " + line) }
    }

    private func timeout(_ step: TranscriptStep) -> Double { step.timeoutSeconds ?? defaultTimeout }

    private func perform(_ step: TranscriptStep, _ server: TranscriptServerProcess) throws(TranscriptFailure) {
        let deadline = Date(timeIntervalSinceNow: timeout(step))
        let framing = script.header.framing
        switch step.kind {
        case .comment:
            return
        case .send(let template), .reply(let template):
            let message: JSONValue
            do {
                message = try matcher.substitute(template)
            } catch {
                throw TranscriptFailure(summary: "cannot build the message: \(error)")
            }
            log("-> \(message.serializedString())")
            try write(framing.frame(message.serialized()), server, deadline)
        case .sendTogether(let templates):
            var bytes: [UInt8] = []
            for template in templates {
                let message: JSONValue
                do {
                    message = try matcher.substitute(template)
                } catch {
                    throw TranscriptFailure(summary: "cannot build the message: \(error)")
                }
                log("-> (together) \(message.serializedString())")
                framing.frame(message.serialized(), into: &bytes)
            }
            try write(bytes, server, deadline)
        case .signal(let number):
            log("-> signal \(number)")
            server.send(signal: number)
        case .sendRaw(let body):
            log("-> raw \(String(decoding: body, as: UTF8.self))")
            try write(framing.frame(body), server, deadline)
        case .sendBytes(let bytes):
            log("-> bytes \(JSONValue.string(String(decoding: bytes, as: UTF8.self)).serializedString())")
            try write(bytes, server, deadline)
        case .expect(let pattern):
            let actual = try receive(server, deadline, step: step, expecting: [pattern])
            if let mismatch = matcher.match(pattern, against: actual) {
                throw TranscriptFailure(
                    summary: "expect: \(mismatch)",
                    sections: [("expected", TranscriptPrettyPrinter.format(pattern)), ("actual", TranscriptPrettyPrinter.format(actual))])
            }
        case .expectUnordered(let patterns):
            var actuals: [JSONValue] = []
            for _ in patterns {
                actuals.append(try receive(server, deadline, step: step, expecting: patterns, alreadyReceived: actuals))
            }
            try matchUnordered(patterns, actuals, what: "expectUnordered")
        case .expectBatch(let patterns):
            let actual = try receive(server, deadline, step: step, expecting: [.array(patterns)])
            guard case .array(let elements) = actual, elements.count == patterns.count else {
                throw TranscriptFailure(
                    summary: "expectBatch: expected a batch (array) of \(patterns.count) responses, got \(TranscriptMatcher.brief(actual))",
                    sections: [("actual", TranscriptPrettyPrinter.format(actual))])
            }
            try matchUnordered(patterns, elements, what: "expectBatch")
        case .closeStdin:
            log("-> close stdin")
            server.closeStdin()
        case .expectExit(let code, let within):
            let exitDeadline = Date(timeIntervalSinceNow: within ?? timeout(step))
            try checkExit(server, until: exitDeadline, code: code, seconds: within ?? timeout(step))
        case .expectStderr(let pattern):
            guard let regex = try? Regex(pattern) else { throw TranscriptFailure(summary: "expectStderr: invalid regex /\(pattern)/") }
            if !server.waitForStderr(matching: regex, until: deadline) {
                throw TranscriptFailure(summary: "expectStderr: nothing on stderr matched /\(pattern)/ within \(seconds(timeout(step)))")
            }
            log("stderr matched /\(pattern)/")
        case .expectFile(let expectation):
            try checkFile(expectation, until: deadline, seconds: timeout(step))
        }
    }

    /// Waits until the file has the expected number of complete lines past what
    /// earlier steps consumed, then matches them in order; without `atLeast`, no
    /// further complete line may be there yet.
    private func checkFile(_ expectation: FileExpectation, until deadline: Date, seconds limit: Double) throws(TranscriptFailure) {
        let path = expand(expectation.path)
        let shown = expectation.path == path ? path : "\(expectation.path) (\(path))"
        let start = fileCursors[path] ?? 0
        let wanted = expectation.lines.count
        var lines = Self.completeLines(ofFileAt: path)
        while (lines?.count ?? 0) < start + wanted && Date() < deadline {
            usleep(UInt32(Self.filePollInterval * 1_000_000))
            lines = Self.completeLines(ofFileAt: path)
        }
        guard let all = lines else {
            throw TranscriptFailure(summary: "expectFile: \(shown) does not exist after \(seconds(limit))")
        }
        let fresh = Array(all.dropFirst(start))
        func listing(_ texts: [String], from first: Int) -> String {
            texts.enumerated().map { "line \(first + $0.offset + 1): \($0.element)" }.joined(separator: "\n")
        }
        if fresh.count < wanted {
            throw TranscriptFailure(
                summary: "expectFile: \(shown) has \(fresh.count) new line\(fresh.count == 1 ? "" : "s") after \(seconds(limit)), expected \(expectation.atLeast ? "at least " : "")\(wanted)",
                sections: fresh.isEmpty ? [] : [("new lines", listing(fresh, from: start))])
        }
        for (i, pattern) in expectation.lines.enumerated() {
            let number = start + i + 1
            let actual: JSONValue
            do {
                actual = try JSONValue.parse(fresh[i])
            } catch {
                throw TranscriptFailure(summary: "expectFile: \(shown) line \(number) is not JSON: \(error)", sections: [("line \(number)", fresh[i])])
            }
            if let mismatch = matcher.match(pattern, against: actual) {
                throw TranscriptFailure(
                    summary: "expectFile: \(shown) line \(number) (pattern \(i + 1)): \(mismatch)",
                    sections: [("expected", TranscriptPrettyPrinter.format(pattern)), ("actual", TranscriptPrettyPrinter.format(actual))])
            }
        }
        if !expectation.atLeast && fresh.count > wanted {
            let extra = Array(fresh.dropFirst(wanted))
            throw TranscriptFailure(
                summary: "expectFile: \(shown) has \(extra.count) more line\(extra.count == 1 ? "" : "s") than the \(wanted) expected (add \"atLeast\": true to allow that)",
                sections: [("unexpected", listing(extra, from: start + wanted))])
        }
        fileCursors[path] = start + wanted
        log("file \(path): lines \(start + 1)-\(start + wanted) matched")
    }

    /// The file's complete lines (ended by a newline), blank ones left out; nil if
    /// it cannot be read. A last line still being written is not counted.
    static func completeLines(ofFileAt path: String) -> [String]? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        var lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        lines.removeLast()  // after the last newline: empty, or a line in progress
        return lines.map(String.init).filter { !$0.trimmingWhitespace().isEmpty }
    }

    private func write(_ bytes: [UInt8], _ server: TranscriptServerProcess, _ deadline: Date) throws(TranscriptFailure) {
        do {
            try server.write(bytes, until: deadline)
        } catch {
            throw TranscriptFailure(summary: "cannot write to the server: \(error)\(exitNote(server))")
        }
    }

    /// The next server message, or a failure saying why none came.
    private func receive(
        _ server: TranscriptServerProcess, _ deadline: Date, step: TranscriptStep,
        expecting patterns: [JSONValue], alreadyReceived: [JSONValue] = []
    ) throws(TranscriptFailure) -> JSONValue {
        // Built only on failure: pretty-printing every pattern of every step adds up.
        func sections() -> [(title: String, body: String)] {
            var out: [(title: String, body: String)] = []
            out.append((patterns.count == 1 ? "expected" : "expected (any order)", patterns.map { TranscriptPrettyPrinter.format($0) }.joined(separator: "\n")))
            if !alreadyReceived.isEmpty {
                out.append(("received so far", alreadyReceived.map { TranscriptPrettyPrinter.format($0) }.joined(separator: "\n")))
            }
            return out
        }
        switch server.next(until: deadline) {
        case .inbound(.message(let message)):
            log("<- \(message.serializedString())")
            return message
        case .inbound(.garbage(let description)):
            throw TranscriptFailure(summary: "the server wrote \(description)", sections: sections())
        case .closed:
            throw TranscriptFailure(summary: "the server closed stdout before the expected message\(exitNote(server))", sections: sections())
        case .timedOut:
            throw TranscriptFailure(summary: "no message from the server within \(seconds(timeout(step)))\(exitNote(server))", sections: sections())
        }
    }

    /// Finds a one-to-one assignment of messages to patterns, trying captures
    /// tentatively so a wrong pairing cannot leave bindings behind.
    private func matchUnordered(_ patterns: [JSONValue], _ actuals: [JSONValue], what: String) throws(TranscriptFailure) {
        func assign(_ index: Int, _ used: Set<Int>, _ matcher: TranscriptMatcher) -> TranscriptMatcher? {
            guard index < patterns.count else { return matcher }
            for (j, actual) in actuals.enumerated() where !used.contains(j) {
                var attempt = matcher
                if attempt.match(patterns[index], against: actual) == nil,
                   let done = assign(index + 1, used.union([j]), attempt) {
                    return done
                }
            }
            return nil
        }
        if let matched = assign(0, [], matcher) {
            matcher = matched
            return
        }
        // Explain with the first pattern that matches nothing on its own.
        var sections: [(title: String, body: String)] = []
        var summary = "\(what): no one-to-one match between the \(patterns.count) patterns and the messages received"
        for (i, pattern) in patterns.enumerated() {
            var reasons: [String] = []
            for (j, actual) in actuals.enumerated() {
                var attempt = matcher
                if let mismatch = attempt.match(pattern, against: actual) {
                    reasons.append("message \(j + 1): \(mismatch)")
                } else {
                    reasons = []
                    break
                }
            }
            if !reasons.isEmpty {
                summary = "\(what): pattern \(i + 1) matches none of the messages"
                sections.append(("pattern \(i + 1)", TranscriptPrettyPrinter.format(pattern)))
                sections.append(("differences", reasons.joined(separator: "\n")))
                break
            }
        }
        sections.append(("received", actuals.enumerated().map { "message \($0.offset + 1): " + TranscriptPrettyPrinter.format($0.element) }.joined(separator: "\n")))
        throw TranscriptFailure(summary: summary, sections: sections)
    }

    private func checkExit(_ server: TranscriptServerProcess, until deadline: Date, code: Int, seconds limit: Double) throws(TranscriptFailure) {
        guard let (status, bySignal) = server.waitForExit(until: deadline) else {
            throw TranscriptFailure(summary: "the server did not exit within \(seconds(limit)) (killed)")
        }
        exited = true
        log("exited with \(bySignal ? "signal" : "code") \(status)")
        let leftovers = server.drainInbox()
        if !leftovers.isEmpty {
            throw TranscriptFailure(
                summary: "the server wrote \(leftovers.count) unexpected message\(leftovers.count == 1 ? "" : "s") before exiting",
                sections: [("unexpected", describe(leftovers))])
        }
        if bySignal {
            throw TranscriptFailure(summary: "the server was killed by signal \(status) (expected exit code \(code))")
        }
        if Int(status) != code {
            throw TranscriptFailure(summary: "the server exited with code \(status), expected \(code)")
        }
    }

    /// End of the script: close stdin, require a clean exit and no extra output.
    private func finish(_ server: TranscriptServerProcess) throws(TranscriptFailure) {
        guard !exited else {
            server.closeStdin()
            let leftovers = server.drainInbox()
            if !leftovers.isEmpty {
                throw TranscriptFailure(summary: "unexpected messages at the end", sections: [("unexpected", describe(leftovers))])
            }
            return
        }
        server.closeStdin()
        log("-> close stdin (end of transcript)")
        guard let (status, bySignal) = server.waitForExit(until: Date(timeIntervalSinceNow: TranscriptReplayer.exitGraceSeconds)) else {
            let leftovers = server.drainInbox()
            throw TranscriptFailure(
                summary: "the server did not exit within \(seconds(TranscriptReplayer.exitGraceSeconds)) after the transcript closed its stdin (killed)",
                sections: leftovers.isEmpty ? [] : [("unexpected", describe(leftovers))])
        }
        log("exited with \(bySignal ? "signal" : "code") \(status)")
        let leftovers = server.drainInbox()
        if !leftovers.isEmpty {
            throw TranscriptFailure(
                summary: "unexpected message\(leftovers.count == 1 ? "" : "s") at the end of the transcript (\(leftovers.count))",
                sections: [("unexpected", describe(leftovers))])
        }
        if bySignal {
            throw TranscriptFailure(summary: "the server was killed by signal \(status) after its stdin closed")
        }
        if status != 0 {
            throw TranscriptFailure(summary: "the server exited with code \(status) after its stdin closed (add an expectExit step if that is intended)")
        }
    }

    private func describe(_ items: [TranscriptInbound]) -> String {
        items.map { item in
            switch item {
            case .message(let m): return TranscriptPrettyPrinter.format(m)
            case .garbage(let text): return text
            }
        }.joined(separator: "\n")
    }

    private func exitNote(_ server: TranscriptServerProcess) -> String {
        guard let (status, bySignal) = server.exitState else { return "" }
        return bySignal ? " (the server was killed by signal \(status))" : " (the server exited with code \(status))"
    }

    private func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    private func result(_ error: (any Error)?, server: TranscriptServerProcess?) -> TranscriptResult {
        guard let error else {
            return TranscriptResult(path: name, steps: stepsRun, failureReport: nil, trace: trace)
        }
        let failure = error as? TranscriptFailure ?? TranscriptFailure(summary: "\(error)")
        var report = failure.line.map { "\(name):\($0): " } ?? "\(name): "
        report += failure.summary
        for section in failure.sections {
            report += "\n  \(section.title):\n" + indent(section.body, by: "    ")
        }
        if let server {
            server.waitForStderrEnd(until: Date(timeIntervalSinceNow: 0.5))
            let tail = server.stderrTail(lines: TranscriptReplayer.stderrTailLines)
            if tail.isEmpty {
                report += "\n  server stderr: (empty)"
            } else {
                report += "\n  server stderr (last \(tail.count == 1 ? "line" : "\(tail.count) lines")):\n" + tail.map { "    | " + $0 }.joined(separator: "\n")
            }
        }
        return TranscriptResult(path: name, steps: stepsRun, failureReport: report, trace: trace)
    }

    private func indent(_ text: String, by prefix: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { prefix + $0 }.joined(separator: "\n")
    }
}
