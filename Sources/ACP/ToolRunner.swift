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

/// Runs the built-in tools of one call: through the editor (`fs/*`,
/// `terminal/*`) where the editor connected now declared it can, else in the
/// front end, on this machine, inside the session's roots. Nothing goes to an
/// editor that did not declare it.
struct ToolRunner: Sendable {
    let editor: Connection
    let session: ACPSession
    let callId: String
    /// What the editor may take per request, and a local command: the call's own bound.
    let timeout: Double

    private var capabilities: EditorCapabilities { session.editor }

    func run(_ tool: BuiltinTool, _ arguments: JSONValue) async throws -> ToolRun {
        // An edit the user was never asked about, because it could not apply, fails as it was found.
        if let problem = session.takeDoomed(callId) { return .failed(problem) }
        switch tool {
        case .readFile: return try await readFile(arguments)
        case .editFile, .writeFile: return try await apply(tool, arguments)
        case .runCommand:
            return capabilities.terminal ? try await runInTerminal(arguments) : try await runLocally(arguments)
        case .listFiles: return await WorkspaceTools(session: session).listFiles(arguments)
        case .search: return await WorkspaceTools(session: session).search(arguments)
        }
    }

    /// What the permission request shows: the change as a diff, or the command
    /// line. A change that cannot apply (`old_text` not found once, a path
    /// outside the workspace) is the failure: nothing is asked for it.
    func preview(_ tool: BuiltinTool, _ arguments: JSONValue) async throws -> Result<[JSONValue], ToolRunError> {
        switch tool {
        case .readFile, .listFiles, .search: return .success([])
        case .editFile, .writeFile:
            return try await plannedChange(tool, arguments).map { [$0.diff] }
        case .runCommand:
            var text = "$ " + ToolCallView.commandLine(arguments)
            if let cwd = arguments["cwd"]?.stringValue { text += "\n(in \(cwd))" }
            return .success([["type": "content", "content": ["type": "text", "text": .string(text)]]])
        }
    }

    private func path(_ arguments: JSONValue) -> Result<String, ToolRunError> {
        guard let raw = arguments["path"]?.stringValue, !raw.isEmpty else { return .failure(ToolRunError("path is required")) }
        guard let absolute = ACPPaths.resolve(raw, cwd: session.cwd, roots: session.roots) else {
            return .failure(ToolRunError("\(raw) is outside the workspace (\(session.roots.joined(separator: ", "))); only paths inside it can be used"))
        }
        return .success(absolute)
    }

    private func shown(_ absolute: String) -> String { ACPPaths.display(absolute, cwd: session.cwd) }

    // MARK: Reading and writing, wherever the files are

    /// A file's text: from the editor (unsaved changes included) when it reads
    /// files, else from disk. `missing` is what a file that is not there reads as
    /// (nil: a failure); through the editor any failure to read counts as missing.
    private func text(of absolute: String, line: Int? = nil, limit: Int? = nil, missing: String?? = nil) async throws -> Result<String?, ToolRunError> {
        if capabilities.readTextFile {
            var params: [String: JSONValue] = ["sessionId": .string(session.id), "path": .string(absolute)]
            if let line { params["line"] = .int(line) }
            if let limit { params["limit"] = .int(limit) }
            do {
                let answer = try await editor.request("fs/read_text_file", .object(params), timeout: timeout)
                guard let text = answer["content"]?.stringValue else { return .failure(ToolRunError("the editor's answer to fs/read_text_file had no content")) }
                return .success(text)
            } catch OutgoingRequestError.rpc(let error) {
                if let missing { return .success(missing) }
                return .failure(ToolRunError("cannot read \(shown(absolute)): \(error.message)"))
            }
        }
        guard let real = ACPPaths.onDisk(absolute, roots: session.roots) else {
            return .failure(ToolRunError("\(shown(absolute)) leads outside the workspace (a symbolic link); it is not read"))
        }
        return LocalFiles.read(real, shown: shown(absolute), line: line, limit: limit, missing: missing)
    }

    private func write(_ absolute: String, _ content: String) async throws -> Result<Void, ToolRunError> {
        if capabilities.writeTextFile {
            do {
                _ = try await editor.request("fs/write_text_file", ["sessionId": .string(session.id), "path": .string(absolute), "content": .string(content)], timeout: timeout)
                return .success(())
            } catch OutgoingRequestError.rpc(let error) {
                return .failure(ToolRunError("cannot write \(shown(absolute)): \(error.message)"))
            }
        }
        guard let real = ACPPaths.onDisk(absolute, roots: session.roots) else {
            return .failure(ToolRunError("\(shown(absolute)) leads outside the workspace (a symbolic link); it is not written"))
        }
        return LocalFiles.write(real, content, shown: shown(absolute))
    }

    private func readFile(_ arguments: JSONValue) async throws -> ToolRun {
        let absolute: String
        switch path(arguments) {
        case .success(let p): absolute = p
        case .failure(let e): return .failed(e.message)
        }
        switch try await text(of: absolute, line: arguments["line"]?.intValue, limit: arguments["limit"]?.intValue) {
        case .success(let text): return ToolRun(outcome: "ok", content: .string(text ?? ""))
        case .failure(let e): return .failed(e.message)
        }
    }

    // MARK: Edits

    /// A change to one file: its old text (nil: a new file) and its new one.
    struct Change: Sendable {
        var path: String
        var oldText: String?
        var newText: String

        var diff: JSONValue {
            ["type": "diff", "path": .string(path), "oldText": oldText.map(JSONValue.string) ?? .null, "newText": .string(newText)]
        }
    }

    /// Reads the file and computes what the call would write; a problem the
    /// model should hear about is a `.failure`.
    func plannedChange(_ tool: BuiltinTool, _ arguments: JSONValue) async throws -> Result<Change, ToolRunError> {
        let absolute: String
        switch path(arguments) {
        case .success(let p): absolute = p
        case .failure(let e): return .failure(e)
        }
        let shown = shown(absolute)
        if tool == .writeFile {
            guard let content = arguments["content"]?.stringValue else { return .failure(ToolRunError("content is required")) }
            // The old text, for the diff and undo; an editor that cannot read files shows it as a new file.
            let old: String?
            if capabilities.writeTextFile && !capabilities.readTextFile {
                old = nil
            } else {
                switch try await text(of: absolute, missing: .some(nil)) {
                case .success(let text): old = text
                case .failure(let e): return .failure(e)
                }
            }
            return .success(Change(path: absolute, oldText: old, newText: content))
        }
        guard let oldText = arguments["old_text"]?.stringValue, !oldText.isEmpty, let newText = arguments["new_text"]?.stringValue else {
            return .failure(ToolRunError("old_text (not empty) and new_text are required"))
        }
        let current: String
        switch try await text(of: absolute) {
        case .success(let text?): current = text
        case .success(nil): return .failure(ToolRunError("cannot read \(shown)"))
        case .failure(let e): return .failure(e)
        }
        let matches = current.ranges(of: oldText)
        guard matches.count == 1, let only = matches.first else {
            return .failure(ToolRunError(matches.isEmpty
                ? "old_text does not occur in \(shown); read the file and copy the text exactly"
                : "old_text occurs \(matches.count) times in \(shown); include more surrounding text so it matches once"))
        }
        var updated = current
        updated.replaceSubrange(only, with: newText)
        return .success(Change(path: absolute, oldText: current, newText: updated))
    }

    private func apply(_ tool: BuiltinTool, _ arguments: JSONValue) async throws -> ToolRun {
        let change: Change
        switch try await plannedChange(tool, arguments) {
        case .success(let c): change = c
        case .failure(let e): return .failed(e.message)
        }
        // The user approved a diff: the file must still be what it showed.
        if let approved = session.takeApprovedChange(callId), approved != change.oldText {
            return .failed("\(shown(change.path)) changed after the user approved this edit; read it again and redo the edit")
        }
        // The editor shows the change while it is written, and keeps it in the call.
        session.addDisplay(callId: callId, change.diff)
        editor.notify("session/update", ["sessionId": .string(session.id), "update": [
            "sessionUpdate": "tool_call_update", "toolCallId": .string(callId), "status": "in_progress", "content": .array(session.display(callId: callId)),
        ]])
        if case .failure(let e) = try await write(change.path, change.newText) { return .failed(e.message) }
        let summary = change.oldText == nil ? "Created \(shown(change.path))." : "Wrote \(shown(change.path))."
        return ToolRun(outcome: "ok", content: .string(summary),
                       undo: ["path": .string(change.path), "oldText": change.oldText.map(JSONValue.string) ?? .null])
    }

    /// `tool/undo` of an edit: the old text goes back; a file the call created is
    /// removed (emptied through an editor: ACP cannot delete files).
    func undo(_ record: JSONValue) async throws {
        guard let path = record["path"]?.stringValue, ACPPaths.resolve(path, cwd: session.cwd, roots: session.roots) != nil else {
            throw OutgoingRequestError.rpc(RPCError(.invalidParams, "the undo record names no path inside the workspace"))
        }
        let old = record["oldText"]?.stringValue
        if old == nil && !capabilities.writeTextFile {
            guard let real = ACPPaths.onDisk(path, roots: session.roots) else {
                throw OutgoingRequestError.rpc(RPCError(.invalidParams, "\(shown(path)) leads outside the workspace"))
            }
            if case .failure(let e) = LocalFiles.remove(real, shown: shown(path)) { throw OutgoingRequestError.rpc(RPCError(.toolExecutorError, e.message)) }
            return
        }
        if case .failure(let e) = try await write(path, old ?? "") {
            throw OutgoingRequestError.rpc(RPCError(.toolExecutorError, e.message))
        }
    }

    // MARK: Commands

    /// The directory a command runs in: `cwd` of the call, inside the roots; else the workspace root.
    private func workingDirectory(_ arguments: JSONValue) -> Result<String, ToolRunError> {
        guard let raw = arguments["cwd"]?.stringValue else { return .success(session.cwd) }
        guard let resolved = ACPPaths.resolve(raw, cwd: session.cwd, roots: session.roots) else {
            return .failure(ToolRunError("cwd \(raw) is outside the workspace; commands run inside it"))
        }
        return .success(resolved)
    }

    /// What the model reads of a command: its line, its output, how it ended.
    private func report(_ arguments: JSONValue, output: String, truncated: Bool, exitCode: Int?, signal: String?, timedOut: Bool, budget: Double) -> ToolRun {
        var text = "$ " + ToolCallView.commandLine(arguments) + "\n"
        if truncated { text += "[earlier output was cut: only the last \(ACPToolBounds.commandOutputBytes) bytes are kept]\n" }
        text += output
        if !text.hasSuffix("\n") { text += "\n" }
        if timedOut {
            text += "[the command did not finish within \(Int(budget)) s and was killed]"
            return ToolRun(outcome: "failed", content: .string(text))
        }
        if let signal {
            text += "[killed by signal \(signal)]"
            return ToolRun(outcome: "failed", content: .string(text))
        }
        text += "[exit code \(exitCode.map(String.init) ?? "unknown")]"
        return ToolRun(outcome: exitCode == 0 ? "ok" : "failed", content: .string(text))
    }

    /// Leaves room within the call's bound to kill the command and read its output.
    private var commandBudget: Double { max(0.1, timeout - min(5, timeout * 0.2)) }

    private func runLocally(_ arguments: JSONValue) async throws -> ToolRun {
        guard let command = arguments["command"]?.stringValue, !command.isEmpty else { return .failed("command is required") }
        let directory: String
        switch workingDirectory(arguments) {
        case .success(let d): directory = d
        case .failure(let e): return .failed(e.message)
        }
        guard let real = ACPPaths.onDisk(directory, roots: session.roots) else {
            return .failed("cwd \(shown(directory)) leads outside the workspace; commands run inside it")
        }
        let args = (arguments["args"]?.arrayValue ?? []).compactMap(\.stringValue)
        let ending: LocalCommand.Ending
        do {
            ending = try await LocalCommand.run(command: command, args: args, directory: real, seconds: commandBudget)
        } catch let error as ChildProcess.SpawnError {
            return .failed("cannot run \(command): \(error.description)")
        }
        return report(arguments, output: ending.output, truncated: ending.truncated, exitCode: ending.exitCode.map(Int.init),
                      signal: ending.signal.map { "\($0)" }, timedOut: ending.timedOut, budget: commandBudget)
    }

    private func runInTerminal(_ arguments: JSONValue) async throws -> ToolRun {
        guard let command = arguments["command"]?.stringValue, !command.isEmpty else { return .failed("command is required") }
        let workingDirectory: String
        switch self.workingDirectory(arguments) {
        case .success(let d): workingDirectory = d
        case .failure(let e): return .failed(e.message)
        }
        let args = (arguments["args"]?.arrayValue ?? []).compactMap(\.stringValue)
        let created: JSONValue
        do {
            created = try await editor.request("terminal/create", [
                "sessionId": .string(session.id), "command": .string(command), "args": .array(args.map(JSONValue.string)),
                "cwd": .string(workingDirectory), "outputByteLimit": .int(ACPToolBounds.commandOutputBytes),
            ], timeout: timeout)
        } catch OutgoingRequestError.rpc(let error) {
            return .failed("the editor could not start \(command): \(error.message)")
        }
        guard let terminalId = created["terminalId"]?.stringValue else { return .failed("the editor's answer to terminal/create had no terminalId") }
        let terminal: JSONValue = ["type": "terminal", "terminalId": .string(terminalId)]
        session.addDisplay(callId: callId, terminal)
        editor.notify("session/update", ["sessionId": .string(session.id), "update": [
            "sessionUpdate": "tool_call_update", "toolCallId": .string(callId), "status": "in_progress", "content": .array(session.display(callId: callId)),
        ]])
        let ids: JSONValue = ["sessionId": .string(session.id), "terminalId": .string(terminalId)]
        let editor = self.editor
        // The terminal is ours until released: released whatever happens, even
        // when this call is cancelled (then from a task of its own, bounded).
        // Started at once (`Task.immediate`): the request is queued before the
        // call's result, so the editor hears of the release before the call's
        // last update, whichever thread runs the turn on.
        let release: @Sendable () -> Void = {
            Task.immediate { _ = try? await editor.request("terminal/release", ids, timeout: 10) }
        }
        let budget = commandBudget
        var exit: JSONValue?
        var timedOut = false
        do {
            exit = try await editor.request("terminal/wait_for_exit", ids, timeout: budget)
        } catch OutgoingRequestError.timedOut {
            timedOut = true
            _ = try? await editor.request("terminal/kill", ids, timeout: 5)
        } catch OutgoingRequestError.rpc(let error) {
            release()
            return .failed("the editor could not wait for \(command): \(error.message)")
        } catch {
            Task {
                _ = try? await editor.request("terminal/kill", ids, timeout: 5)
                release()
            }
            throw error
        }
        let output = try? await editor.request("terminal/output", ids, timeout: 5)
        release()
        let status = exit ?? output?["exitStatus"]
        return report(arguments, output: output?["output"]?.stringValue ?? "", truncated: output?["truncated"]?.boolValue == true,
                      exitCode: status?["exitCode"]?.intValue, signal: status?["signal"]?.stringValue, timedOut: timedOut, budget: budget)
    }
}

/// A problem with a tool call that the model hears about as a `failed` output.
struct ToolRunError: Error, Sendable {
    var message: String
    init(_ message: String) { self.message = message }
}

/// The file tools on this machine's disk, for an editor that does not do files.
/// Paths come already resolved to their real path inside the session's roots.
enum LocalFiles {
    static func read(_ path: String, shown: String, line: Int?, limit: Int?, missing: String??) -> Result<String?, ToolRunError> {
        guard let kind = PathKind.of(path) else {
            if let missing { return .success(missing) }
            return .failure(ToolRunError("cannot read \(shown): there is no such file"))
        }
        if kind == .directory { return .failure(ToolRunError("\(shown) is a directory; list_files lists it")) }
        var info = stat()
        guard stat(path, &info) == 0, let data = FileManager.default.contents(atPath: path) else {
            return .failure(ToolRunError("cannot read \(shown): permission denied or not a regular file"))
        }
        let size = Int(info.st_size)
        if size > ACPToolBounds.maxEditedFileBytes && line == nil && limit == nil {
            return .failure(ToolRunError("\(shown) is \(size) bytes; read part of it with line and limit"))
        }
        if data.prefix(8192).contains(0) { return .failure(ToolRunError("\(shown) is a binary file")) }
        let text = String(decoding: data, as: UTF8.self)
        guard line != nil || limit != nil || text.utf8.count > ACPToolBounds.maxReadBytes else { return .success(text) }
        // Part of it: `line` (1-based) and `limit` lines, and never more than the bound.
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let first = max(1, line ?? 1)
        guard first <= lines.count else { return .success("") }
        let count = max(0, min(limit ?? lines.count, lines.count - first + 1))
        var out = ""
        var taken = 0
        for part in lines[(first - 1)..<(first - 1 + count)] {
            if out.utf8.count + part.utf8.count + 1 > ACPToolBounds.maxReadBytes {
                out += "[cut at \(ACPToolBounds.maxReadBytes) bytes: read on from line \(first + taken) with line and limit]"
                return .success(out)
            }
            out += part
            taken += 1
            if first - 1 + taken < lines.count { out += "\n" }
        }
        return .success(out)
    }

    static func write(_ path: String, _ content: String, shown: String) -> Result<Void, ToolRunError> {
        let directory = path.deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            // In place, not by rename: the file keeps its mode (an executable script stays one).
            try Data(content.utf8).write(to: URL(fileURLWithPath: path))
            return .success(())
        } catch {
            return .failure(ToolRunError("cannot write \(shown): \(error.localizedDescriptionLikeFoundation)"))
        }
    }

    static func remove(_ path: String, shown: String) -> Result<Void, ToolRunError> {
        guard FileManager.default.fileExists(atPath: path) else { return .success(()) }
        do {
            try FileManager.default.removeItem(atPath: path)
            return .success(())
        } catch {
            return .failure(ToolRunError("cannot remove \(shown): \(error.localizedDescriptionLikeFoundation)"))
        }
    }
}
