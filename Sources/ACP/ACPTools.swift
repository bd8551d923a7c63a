import AgentRPC
import AgentRPCProtocol

/// The tools `agentrpc acp` offers the model. They are declared to the engine
/// as ordinary client tools (so limits, guards, confirmations, undo records and
/// transcripts work as for any tool); when the engine asks the front end to run
/// one, the editor does the work through `fs/*` and `terminal/*`.
enum BuiltinTool: String, CaseIterable, Sendable, Hashable {
    case readFile = "read_file"
    case editFile = "edit_file"
    case writeFile = "write_file"
    case runCommand = "run_command"

    /// Whether the editor said it can do what the tool needs.
    func isSupported(by editor: EditorCapabilities) -> Bool {
        switch self {
        case .readFile: editor.readTextFile
        case .editFile: editor.readTextFile && editor.writeTextFile
        case .writeFile: editor.writeTextFile
        case .runCommand: editor.terminal
        }
    }

    /// The `session/create` tool declaration.
    func spec(needsPermission: Bool) -> JSONValue {
        var spec: [String: JSONValue] = ["name": .string(rawValue), "description": .string(description), "inputSchema": inputSchema]
        if needsPermission { spec["confirmation"] = "always" }
        spec["annotations"] = self == .readFile ? ["readOnly": true] : ["readOnly": false, "destructive": self != .runCommand ? false : true]
        return .object(spec)
    }

    var description: String {
        switch self {
        case .readFile: "Read a text file of the workspace (the editor's current text, unsaved changes included). `line` (1-based) and `limit` read part of it."
        case .editFile: "Replace `old_text` by `new_text` in a file. `old_text` must occur exactly once: include enough surrounding lines."
        case .writeFile: "Create a file, or replace all of its content."
        case .runCommand: "Run a program in the workspace and return its output and exit code. `command` is the program, `args` its arguments."
        }
    }

    var inputSchema: JSONValue {
        let path: JSONValue = ["type": "string", "description": "a path relative to the workspace root (or absolute, inside the workspace)"]
        switch self {
        case .readFile:
            return ["type": "object", "additionalProperties": false, "required": ["path"],
                    "properties": ["path": path, "line": ["type": "integer", "minimum": 1], "limit": ["type": "integer", "minimum": 1]]]
        case .editFile:
            return ["type": "object", "additionalProperties": false, "required": ["path", "old_text", "new_text"],
                    "properties": ["path": path, "old_text": ["type": "string", "minLength": 1], "new_text": ["type": "string"]]]
        case .writeFile:
            return ["type": "object", "additionalProperties": false, "required": ["path", "content"],
                    "properties": ["path": path, "content": ["type": "string"]]]
        case .runCommand:
            return ["type": "object", "additionalProperties": false, "required": ["command"],
                    "properties": ["command": ["type": "string", "minLength": 1],
                                   "args": ["type": "array", "items": ["type": "string"]],
                                   "cwd": ["type": "string", "description": "working directory, relative to the workspace root"]]]
        }
    }
}

/// What the editor said it can do in `initialize` (`clientCapabilities`).
struct EditorCapabilities: Sendable {
    var readTextFile = false
    var writeTextFile = false
    var terminal = false

    init() {}

    init(_ value: JSONValue?) {
        readTextFile = value?["fs"]?["readTextFile"]?.boolValue ?? false
        writeTextFile = value?["fs"]?["writeTextFile"]?.boolValue ?? false
        terminal = value?["terminal"]?.boolValue ?? false
    }
}

/// How a tool call looks in the editor: `tool_call` title, kind and locations.
struct ToolCallView: Sendable {
    var title: String
    var kind: String
    var locations: [JSONValue]

    init(name: String, arguments: JSONValue, cwd: String) {
        let path = arguments["path"]?.stringValue
        let absolute = path.map { ACPPaths.normalize($0.hasPrefix("/") ? $0 : cwd + "/" + $0) }
        let shown = absolute.map { ACPPaths.display($0, cwd: cwd) } ?? "?"
        locations = absolute.map { p -> [JSONValue] in
            var location: [String: JSONValue] = ["path": .string(p)]
            if let line = arguments["line"]?.intValue, line >= 0 { location["line"] = .int(line) }
            return [.object(location)]
        } ?? []
        switch BuiltinTool(rawValue: name) {
        case .readFile?:
            title = "Read \(shown)"
            kind = "read"
        case .editFile?:
            title = "Edit \(shown)"
            kind = "edit"
        case .writeFile?:
            title = "Write \(shown)"
            kind = "edit"
        case .runCommand?:
            title = "Run `\(Self.commandLine(arguments))`"
            kind = "execute"
        case nil:
            // An MCP server's tool reaches the model as mcp__<server>__<tool>.
            let parts = name.split(separator: "__", omittingEmptySubsequences: false).map(String.init)
            if parts.count >= 3, parts[0] == "mcp" {
                let tool = parts.dropFirst(2).joined(separator: "__")
                title = "\(tool) (\(parts[1]))"
                kind = Self.kind(ofToolNamed: tool)
            } else {
                title = name
                kind = Self.kind(ofToolNamed: name)
            }
        }
    }

    static func commandLine(_ arguments: JSONValue) -> String {
        let words = [arguments["command"]?.stringValue ?? ""] + (arguments["args"]?.arrayValue ?? []).compactMap(\.stringValue)
        return String(words.joined(separator: " ").prefix(200))
    }

    /// A guess from the name for tools the front end does not know (MCP's, the
    /// engine's own): only an icon in the editor depends on it.
    static func kind(ofToolNamed name: String) -> String {
        let n = name.lowercased()
        func has(_ words: [String]) -> Bool { words.contains { n.contains($0) } }
        if has(["search", "grep", "find", "query"]) { return "search" }
        if has(["fetch", "http", "url", "download", "browse"]) { return "fetch" }
        if has(["delete", "remove"]) { return "delete" }
        if has(["move", "rename"]) { return "move" }
        if has(["write", "edit", "create", "update", "patch"]) { return "edit" }
        if has(["run", "exec", "shell", "command", "bash"]) { return "execute" }
        if has(["read", "get", "list", "show", "view"]) { return "read" }
        if has(["think", "plan", "handoff"]) { return "think" }
        return "other"
    }
}

/// What running a tool produced: the `tool/call` answer for the engine, and
/// what the editor shows beside it (a diff, a terminal).
struct ToolRun: Sendable {
    var outcome: String
    var content: JSONValue
    var undo: JSONValue?
    var display: [JSONValue] = []

    var answer: JSONValue {
        var o: [String: JSONValue] = ["outcome": .string(outcome), "content": content]
        if let undo { o["undo"] = undo }
        return .object(o)
    }

    static func failed(_ message: String) -> ToolRun { ToolRun(outcome: "failed", content: .string(message)) }
}

/// Runs the built-in tools by asking the editor.
struct ToolRunner: Sendable {
    let editor: Connection
    let session: ACPSession
    let callId: String
    /// What the editor may take per request: the call's own bound.
    let timeout: Double

    /// Bytes of command output the editor keeps for us.
    static let outputByteLimit = 64 * 1024

    func run(_ tool: BuiltinTool, _ arguments: JSONValue) async throws -> ToolRun {
        switch tool {
        case .readFile: return try await readFile(arguments)
        case .editFile: return try await editFile(arguments)
        case .writeFile: return try await writeFile(arguments)
        case .runCommand: return try await runCommand(arguments)
        }
    }

    /// What the editor shows when asking permission: the change as a diff, or
    /// the command line. Nothing when the file cannot be read in time.
    func preview(_ tool: BuiltinTool, _ arguments: JSONValue) async -> [JSONValue] {
        switch tool {
        case .readFile: return []
        case .editFile, .writeFile:
            guard case .success(let change)? = try? await plannedChange(tool, arguments) else { return [] }
            return [change.diff]
        case .runCommand:
            var text = "$ " + ToolCallView.commandLine(arguments)
            if let cwd = arguments["cwd"]?.stringValue { text += "\n(in \(cwd))" }
            return [["type": "content", "content": ["type": "text", "text": .string(text)]]]
        }
    }

    private func path(_ arguments: JSONValue) -> Result<String, ToolRunError> {
        guard let raw = arguments["path"]?.stringValue, !raw.isEmpty else { return .failure(ToolRunError("path is required")) }
        guard let absolute = ACPPaths.resolve(raw, cwd: session.cwd, roots: session.roots) else {
            return .failure(ToolRunError("\(raw) is outside the workspace (\(session.roots.joined(separator: ", "))); only paths inside it can be used"))
        }
        return .success(absolute)
    }

    private func readFile(_ arguments: JSONValue) async throws -> ToolRun {
        let absolute: String
        switch path(arguments) {
        case .success(let p): absolute = p
        case .failure(let e): return .failed(e.message)
        }
        var params: [String: JSONValue] = ["sessionId": .string(session.id), "path": .string(absolute)]
        if let line = arguments["line"]?.intValue { params["line"] = .int(line) }
        if let limit = arguments["limit"]?.intValue { params["limit"] = .int(limit) }
        do {
            let answer = try await editor.request("fs/read_text_file", .object(params), timeout: timeout)
            guard let text = answer["content"]?.stringValue else { return .failed("the editor's answer to fs/read_text_file had no content") }
            return ToolRun(outcome: "ok", content: .string(text))
        } catch OutgoingRequestError.rpc(let error) {
            return .failed("cannot read \(ACPPaths.display(absolute, cwd: session.cwd)): \(error.message)")
        }
    }

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
        let shown = ACPPaths.display(absolute, cwd: session.cwd)
        var old: String?
        if tool == .editFile || session.editor.readTextFile {
            do {
                let answer = try await editor.request("fs/read_text_file", ["sessionId": .string(session.id), "path": .string(absolute)], timeout: timeout)
                old = answer["content"]?.stringValue
            } catch OutgoingRequestError.rpc(let error) {
                // A file that cannot be read is a new file for write_file, a mistake for edit_file.
                if tool == .editFile { return .failure(ToolRunError("cannot read \(shown): \(error.message)")) }
            }
        }
        if tool == .writeFile {
            guard let content = arguments["content"]?.stringValue else { return .failure(ToolRunError("content is required")) }
            return .success(Change(path: absolute, oldText: old, newText: content))
        }
        guard let text = old else { return .failure(ToolRunError("cannot read \(shown)")) }
        guard let oldText = arguments["old_text"]?.stringValue, !oldText.isEmpty, let newText = arguments["new_text"]?.stringValue else {
            return .failure(ToolRunError("old_text (not empty) and new_text are required"))
        }
        let matches = text.ranges(of: oldText)
        guard matches.count == 1, let only = matches.first else {
            return .failure(ToolRunError(matches.isEmpty
                ? "old_text does not occur in \(shown); read the file and copy the text exactly"
                : "old_text occurs \(matches.count) times in \(shown); include more surrounding text so it matches once"))
        }
        var updated = text
        updated.replaceSubrange(only, with: newText)
        return .success(Change(path: absolute, oldText: text, newText: updated))
    }

    private func editFile(_ arguments: JSONValue) async throws -> ToolRun {
        try await apply(.editFile, arguments)
    }

    private func writeFile(_ arguments: JSONValue) async throws -> ToolRun {
        try await apply(.writeFile, arguments)
    }

    private func apply(_ tool: BuiltinTool, _ arguments: JSONValue) async throws -> ToolRun {
        let change: Change
        switch try await plannedChange(tool, arguments) {
        case .success(let c): change = c
        case .failure(let e): return .failed(e.message)
        }
        // The editor shows the change while it is written, and keeps it in the call.
        session.addDisplay(callId: callId, change.diff)
        editor.notify("session/update", ["sessionId": .string(session.id), "update": [
            "sessionUpdate": "tool_call_update", "toolCallId": .string(callId), "status": "in_progress", "content": .array(session.display(callId: callId)),
        ]])
        let shown = ACPPaths.display(change.path, cwd: session.cwd)
        do {
            _ = try await editor.request("fs/write_text_file", ["sessionId": .string(session.id), "path": .string(change.path), "content": .string(change.newText)], timeout: timeout)
        } catch OutgoingRequestError.rpc(let error) {
            return .failed("cannot write \(shown): \(error.message)")
        }
        let summary = change.oldText == nil ? "Created \(shown)." : "Wrote \(shown)."
        return ToolRun(outcome: "ok", content: .string(summary),
                       undo: ["path": .string(change.path), "oldText": change.oldText.map(JSONValue.string) ?? .null])
    }

    private func runCommand(_ arguments: JSONValue) async throws -> ToolRun {
        guard let command = arguments["command"]?.stringValue, !command.isEmpty else { return .failed("command is required") }
        var workingDirectory = session.cwd
        if let raw = arguments["cwd"]?.stringValue {
            guard let resolved = ACPPaths.resolve(raw, cwd: session.cwd, roots: session.roots) else {
                return .failed("cwd \(raw) is outside the workspace; commands run inside it")
            }
            workingDirectory = resolved
        }
        let args = (arguments["args"]?.arrayValue ?? []).compactMap(\.stringValue)
        let created: JSONValue
        do {
            created = try await editor.request("terminal/create", [
                "sessionId": .string(session.id), "command": .string(command), "args": .array(args.map(JSONValue.string)),
                "cwd": .string(workingDirectory), "outputByteLimit": .int(Self.outputByteLimit),
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
        let release: @Sendable () -> Void = {
            Task { _ = try? await editor.request("terminal/release", ids, timeout: 10) }
        }
        // Leave room within the call's bound to kill the command and read its output.
        let budget = max(0.1, timeout - min(5, timeout * 0.2))
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
        var text = "$ " + ToolCallView.commandLine(arguments) + "\n"
        if output?["truncated"]?.boolValue == true { text += "[earlier output was cut: only the last \(Self.outputByteLimit) bytes are kept]\n" }
        text += output?["output"]?.stringValue ?? ""
        if !text.hasSuffix("\n") { text += "\n" }
        let status = exit ?? output?["exitStatus"]
        let code = status?["exitCode"]?.intValue
        if timedOut {
            text += "[the command did not finish within \(Int(budget)) s and was killed]"
            return ToolRun(outcome: "failed", content: .string(text))
        }
        if let signal = status?["signal"]?.stringValue {
            text += "[killed by signal \(signal)]"
            return ToolRun(outcome: "failed", content: .string(text))
        }
        text += "[exit code \(code.map(String.init) ?? "unknown")]"
        return ToolRun(outcome: code == 0 ? "ok" : "failed", content: .string(text))
    }

    /// `tool/undo` of an edit: the old text goes back (a file the call created
    /// is emptied: ACP has no way to delete a file).
    func undo(_ record: JSONValue) async throws {
        guard let path = record["path"]?.stringValue, ACPPaths.resolve(path, cwd: session.cwd, roots: session.roots) != nil else {
            throw OutgoingRequestError.rpc(RPCError(.invalidParams, "the undo record names no path inside the workspace"))
        }
        let text = record["oldText"]?.stringValue ?? ""
        _ = try await editor.request("fs/write_text_file", ["sessionId": .string(session.id), "path": .string(path), "content": .string(text)], timeout: timeout)
    }
}

/// A problem with a tool call that the model hears about as a `failed` output.
struct ToolRunError: Error, Sendable {
    var message: String
    init(_ message: String) { self.message = message }
}
