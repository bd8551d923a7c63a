import AgentRPCProtocol

/// The `acp` section of `agentrpc.json` (docs/acp.md, "Configuration"):
///
/// ```json
/// "acp": {"model": "claude", "instructions": "...",
///         "tools": ["read_file", "edit_file", "write_file", "run_command", "list_files", "search"],
///         "permissions": ["edit_file", "write_file", "run_command"],
///         "session": {"limits": {...}, "profiles": {...}, "guards": [...]}}
/// ```
struct ACPConfiguration: Sendable {
    /// The model ACP sessions start with (else the file's `defaultModel`).
    var model: String?
    /// Replaces the default system prompt.
    var instructions: String?
    /// The built-in tools offered (through the editor where it can, else run by the front end).
    var tools: [BuiltinTool] = BuiltinTool.allCases
    /// Whether the engine's `update_plan` is offered (its plan becomes ACP `plan` updates).
    var offersPlan = true
    static let planTool = BuiltinToolName.updatePlan.rawValue

    /// The built-in tools that ask the user before they run.
    var permissions: Set<BuiltinTool> = [.editFile, .writeFile, .runCommand]
    /// The base of every ACP session's `session/create` params (limits,
    /// profiles, guards, role, ...); the front end adds model, tools and instructions.
    var session: [String: JSONValue] = [:]

    static let keys: Set<String> = ["model", "instructions", "tools", "permissions", "session"]
    /// `session/create` members the front end sets itself.
    static let reservedSessionKeys: Set<String> = ["userId", "store"]

    /// Reads the section; a mistake is an error naming `acp.<field>`.
    init(section: JSONValue?) throws {
        guard let section, !section.isNull else { return }
        guard let o = section.objectValue else { throw Self.problem("acp", "must be an object") }
        if let unknown = Set(o.keys).subtracting(Self.keys).sorted().first {
            throw Self.problem("acp.\(unknown)", "is not a member of the acp section (known: \(Self.keys.sorted().joined(separator: ", ")))")
        }
        if let m = o["model"] {
            guard let name = m.stringValue else { throw Self.problem("acp.model", "must be a model name") }
            model = name
        }
        if let i = o["instructions"] {
            guard let text = i.stringValue else { throw Self.problem("acp.instructions", "must be a string") }
            instructions = text
        }
        if let t = o["tools"] {
            // The engine's `update_plan` is named beside the front end's tools.
            let names = t.arrayValue?.compactMap(\.stringValue) ?? []
            offersPlan = names.contains(Self.planTool)
            tools = try Self.toolList(.array((t.arrayValue ?? []).filter { $0.stringValue != Self.planTool }), field: "acp.tools")
        }
        if let p = o["permissions"] {
            let asking = try Self.toolList(p, field: "acp.permissions")
            if let index = asking.firstIndex(where: \.isReadOnly) {
                throw Self.problem("acp.permissions[\(index)]", "names \(asking[index].rawValue), which only reads and never asks")
            }
            permissions = Set(asking)
        }
        if let s = o["session"] {
            guard let members = s.objectValue else { throw Self.problem("acp.session", "must be an object (session/create params)") }
            if let reserved = Set(members.keys).intersection(Self.reservedSessionKeys).sorted().first {
                throw Self.problem("acp.session.\(reserved)", "is set by the ACP front end")
            }
            session = members
        }
    }

    private static func toolList(_ value: JSONValue, field: String) throws -> [BuiltinTool] {
        guard let items = value.arrayValue else { throw problem(field, "must be an array of tool names") }
        return try items.enumerated().map { index, item in
            guard let name = item.stringValue, let tool = BuiltinTool(rawValue: name) else {
                throw problem("\(field)[\(index)]", "must be one of \((BuiltinTool.allCases.map(\.rawValue) + [planTool]).joined(separator: ", "))")
            }
            return tool
        }
    }

    private static func problem(_ field: String, _ message: String) -> RPCError {
        RPCError.invalidConfiguration("\(field) \(message)", field: field)
    }

    /// The profile cases of `session.profiles` and the property that selects
    /// them: the session's `profile` option (nil without a selector).
    var profiles: OptionCatalog.Profiles? {
        guard let profiles = session["profiles"]?.objectValue, let selector = profiles["selector"]?.stringValue,
              let cases = profiles["cases"]?.objectValue, !cases.isEmpty else { return nil }
        var descriptions: [String: String] = [:]
        for (name, body) in cases {
            if let d = body["description"]?.stringValue { descriptions[name] = d }
        }
        return OptionCatalog.Profiles(selector: selector, cases: cases.keys.sorted(), descriptions: descriptions)
    }

    /// The instructions every ACP session starts from, naming only the tools offered.
    static func defaultInstructions(tools: [BuiltinTool], plan: Bool) -> String {
        var lines = [
            "You are a coding agent working inside the user's editor, on the project in its workspace.",
            "Paths are relative to the workspace root. Look before you change: read a file before you edit it.",
        ]
        if tools.contains(.listFiles) { lines.append("list_files lists the workspace's files; search finds a regular expression in them.") }
        if tools.contains(.search) && !tools.contains(.listFiles) { lines.append("search finds a regular expression in the workspace's files.") }
        if tools.contains(.readFile) { lines.append("read_file reads a file (in an editor, its current text with unsaved changes).") }
        if tools.contains(.editFile) { lines.append("edit_file replaces old_text by new_text; old_text must match exactly once, so include enough context.") }
        if tools.contains(.writeFile) { lines.append("write_file creates a file or replaces all of its content.") }
        if tools.contains(.runCommand) { lines.append("run_command runs a program (build, tests, git) and returns its output and exit code.") }
        if plan { lines.append("For a task of several steps, keep a plan with update_plan and update it as steps are done.") }
        lines.append("The user may decline an edit or a command; then do not try to get around it. Keep answers short and say what you changed.")
        return lines.joined(separator: "\n")
    }
}
