import AgentRPC
import AgentRPCProtocol

/// The tools `agentrpc acp` offers the model. They are declared to the engine
/// as ordinary client tools (so limits, guards, confirmations, undo records and
/// transcripts work as for any tool); when the engine asks the front end to run
/// one, the editor does the work through `fs/*` and `terminal/*` where it said
/// it can, and the front end does it itself in the workspace where it did not.
/// `list_files` and `search` always run in the front end.
enum BuiltinTool: String, CaseIterable, Sendable, Hashable {
    case readFile = "read_file"
    case editFile = "edit_file"
    case writeFile = "write_file"
    case runCommand = "run_command"
    case listFiles = "list_files"
    case search

    /// Tools that only read: they never ask, and a read-only session keeps them.
    var isReadOnly: Bool { self == .readFile || self == .listFiles || self == .search }

    /// Changes to files: what `auto-edit` lets through without asking.
    var isEdit: Bool { self == .editFile || self == .writeFile }

    /// The `session/create` tool declaration.
    func spec(needsPermission: Bool) -> JSONValue {
        var spec: [String: JSONValue] = ["name": .string(rawValue), "description": .string(description), "inputSchema": inputSchema]
        if needsPermission { spec["confirmation"] = "always" }
        spec["annotations"] = isReadOnly ? ["readOnly": true] : ["readOnly": false, "destructive": .bool(self == .runCommand)]
        return .object(spec)
    }

    var description: String {
        switch self {
        case .readFile: "Read a text file of the workspace (in an editor, its current text with unsaved changes). `line` (1-based) and `limit` read part of it."
        case .editFile: "Replace `old_text` by `new_text` in a file. `old_text` must occur exactly once: include enough surrounding lines."
        case .writeFile: "Create a file, or replace all of its content."
        case .runCommand: "Run a program in the workspace and return its output and exit code. `command` is the program, `args` its arguments; a whole command line in `command` (no `args`) runs through /bin/sh."
        case .listFiles: "List the workspace's files (those .gitignore leaves out are not listed). `pattern` is a glob (`*.swift` at any depth, `src/**/*.ts` from `path`); `path` a directory to list."
        case .search: "Search the workspace's files for a regular expression; answers `path:line: text` per matching line (files .gitignore leaves out are not searched). `glob` narrows the files, `path` the directory."
        }
    }

    var inputSchema: JSONValue {
        let path: JSONValue = ["type": "string", "description": "a path relative to the workspace root (or absolute, inside the workspace)"]
        let directory: JSONValue = ["type": "string", "description": "a directory relative to the workspace root (default: the root)"]
        let limit: JSONValue = ["type": "integer", "minimum": 1]
        switch self {
        case .readFile:
            return ["type": "object", "additionalProperties": false, "required": ["path"],
                    "properties": ["path": path, "line": ["type": "integer", "minimum": 1], "limit": limit]]
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
        case .listFiles:
            return ["type": "object", "additionalProperties": false,
                    "properties": ["pattern": ["type": "string", "description": "a glob, e.g. *.py or src/**/*.ts"], "path": directory, "limit": limit]]
        case .search:
            return ["type": "object", "additionalProperties": false, "required": ["pattern"],
                    "properties": ["pattern": ["type": "string", "minLength": 1, "description": "a regular expression (ICU syntax), matched per line"],
                                   "glob": ["type": "string", "description": "only files matching this glob, e.g. *.swift"],
                                   "ignore_case": ["type": "boolean"], "path": directory, "limit": limit]]
        }
    }
}

/// What the editor said it can do in `initialize` (`clientCapabilities`).
struct EditorCapabilities: Sendable {
    var readTextFile = false
    var writeTextFile = false
    var terminal = false
    /// `elicitation.form` (ACP's unstable `elicitation/create`): MCP servers' forms are shown.
    var elicitationForm = false

    init() {}

    init(_ value: JSONValue?) {
        readTextFile = value?["fs"]?["readTextFile"]?.boolValue ?? false
        writeTextFile = value?["fs"]?["writeTextFile"]?.boolValue ?? false
        terminal = value?["terminal"]?.boolValue ?? false
        elicitationForm = value?["elicitation"]?["form"]?.objectValue != nil
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
        case .listFiles?:
            title = "List " + (arguments["pattern"]?.stringValue ?? "files") + (arguments["path"]?.stringValue.map { " in \($0)" } ?? "")
            kind = "search"
        case .search?:
            title = "Search " + (arguments["pattern"]?.stringValue.map { "`\($0)`" } ?? "") + (arguments["glob"]?.stringValue.map { " in \($0)" } ?? "")
            kind = "search"
        case nil:
            // An MCP server's tool reaches the model as mcp__<server>__<tool>.
            let parts = name.split(separator: "__", omittingEmptySubsequences: false).map(String.init)
            if parts.count >= 3, parts[0] == "mcp" {
                let tool = parts.dropFirst(2).joined(separator: "__")
                title = "\(tool) (\(parts[1]))"
                kind = Self.kind(ofToolNamed: tool)
            } else if name == ACPConfiguration.planTool {
                title = "Update the plan"
                kind = "think"
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

