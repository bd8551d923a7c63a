import AgentRPCProtocol

/// The active profile as one round trip uses it: everything `ProfileResolver`
/// derived from the config and the session properties, before call-site options.
@dynamicMemberLookup
struct ResolvedProfile: Sendable, Equatable {
    /// What a profile is; read and written as the profile's own members
    /// (`profile.tools`).
    struct Fields: Sendable, Equatable {
        /// The active case, or `"default"` for a session without `profiles`.
        var name: String
        /// The rendered instructions (templates filled, conditional lines and blocks
        /// decided, active `instructions` skills appended). Persona and directives are not part of it.
        var instructions: String
        /// The tools offered to the model, deduplicated by name, in order: the case's
        /// own list, then the tools of the blocks its instructions included.
        var tools: [ResolvedTool]
        /// The case's model, else the defaults', else the session's (`SessionConfig.model`);
        /// the call site's `options.model` still wins over it.
        var model: ModelReference?
        /// Field by field: the case's own, else the defaults'; `toolChoice` finally falls
        /// back to the session's `toolChoice`. Call-site options are applied on top by the caller.
        var options: ProfileOptions
        /// The case's history transforms if it declares `history` (an empty list opts out
        /// of the defaults'), else the defaults'.
        var history: [HistoryTransform]
        /// Per hook point, the defaults' actions followed by the case's (both run).
        var hooks: Hooks
        /// The case's, else the defaults', else the session's.
        var transcriptErrorPolicy: TranscriptErrorPolicy?
        /// The case's, else the defaults', else the session's (no merging of rules).
        var egress: Egress?
    }

    /// The fields, in one box shared by the copies: a round trip hands the
    /// profile to several stages (the request, the tool stage, the turn), and
    /// a copy of nine fields was a retain and a release of each (~1.5k
    /// instructions a copy, four copies a round trip) where a box is one.
    private final class Box: @unchecked Sendable {
        // @unchecked: written only by the member setter below, while one value
        // alone refers to it; a shared box is never written.
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box

    init(
        name: String, instructions: String, tools: [ResolvedTool], model: ModelReference?, options: ProfileOptions,
        history: [HistoryTransform], hooks: Hooks, transcriptErrorPolicy: TranscriptErrorPolicy?, egress: Egress?
    ) {
        box = Box(Fields(
            name: name, instructions: instructions, tools: tools, model: model, options: options,
            history: history, hooks: hooks, transcriptErrorPolicy: transcriptErrorPolicy, egress: egress))
    }

    /// A member of the fields; writing one first gives this value a box of its
    /// own unless it is the box's only owner.
    subscript<Value>(dynamicMember member: WritableKeyPath<Fields, Value>) -> Value {
        get { box.fields[keyPath: member] }
        set {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
            box.fields[keyPath: member] = newValue
        }
    }

    static func == (a: ResolvedProfile, b: ResolvedProfile) -> Bool {
        a.box === b.box || a.box.fields == b.box.fields
    }

    /// The tool definitions the model sees, in order.
    var modelToolDefinitions: [ModelToolDefinition] { self.tools.map(\.modelDefinition) }

    /// The offered tool called `name`, if any (how the turn loop dispatches a call).
    func tool(named name: String) -> ResolvedTool? { self.tools.first { $0.name == name } }

    /// The profile as a read-only turn sees it (`options.readOnly`): client and MCP
    /// tools only when annotated `readOnly`; the engine's own tools, which change
    /// no file, stay.
    var onlyReading: ResolvedProfile {
        var copy = self
        copy.tools = self.tools.filter { tool in
            guard let spec = tool.clientSpec else { return true }
            return spec.annotations?.readOnly == true
        }
        return copy
    }

    /// The client tools offered (for schema checks, guards and `final` handling).
    var clientTools: [ToolSpec] { self.tools.compactMap(\.clientSpec) }

    /// The skills `activate_skill` offers (empty when the profile has none).
    var skills: [Skill] {
        for tool in self.tools { if case .activateSkill(let skills) = tool { return skills } }
        return []
    }
}

/// One tool a profile offers: a client tool, or a built-in orchestration tool the engine runs itself.
enum ResolvedTool: Sendable, Hashable {
    /// A `SessionConfig.tools` entry, executed by the client (`tool/call`). A `final`
    /// tool is one of these too: its `ToolSpec.final` says so.
    case client(ToolSpec)
    /// Baton-pass: calling it sets the selector to `target`.
    case handoff(target: String, name: String, description: String)
    /// Phone-a-friend: calling it asks a child session running `profile`.
    case consult(profile: String, name: String, description: String)
    /// `activate_skill` over every skill the profile offers.
    case activateSkill(skills: [Skill])
    /// `ask_user`: the engine asks the client's user (`user/ask`); the answer is the output.
    case askUser
    /// `update_plan`: the model keeps the session's plan (`SessionConfig.builtinTools`).
    case updatePlan

    /// The name of the built-in skill tool.
    static let activateSkillName = "activate_skill"
    /// The name of the built-in question tool.
    static let askUserName = "ask_user"

    /// The name the model calls the tool by.
    var name: String {
        switch self {
        case .client(let spec): return spec.name
        case .handoff(_, let name, _), .consult(_, let name, _): return name
        case .activateSkill: return Self.activateSkillName
        case .askUser: return Self.askUserName
        case .updatePlan: return BuiltinToolName.updatePlan.rawValue
        }
    }

    /// The client tool's spec; nil for built-in tools.
    var clientSpec: ToolSpec? {
        if case .client(let spec) = self { return spec }
        return nil
    }

    /// The definition sent to the provider.
    var modelDefinition: ModelToolDefinition {
        switch self {
        case .client(let spec):
            return spec.modelDefinition
        case .handoff(_, let name, let description):
            return ModelToolDefinition(name: name, description: description, inputSchema: [
                "type": "object",
                "properties": ["reason": ["type": "string", "description": "Why the conversation is handed over (optional)."]],
                "additionalProperties": false,
            ])
        case .consult(_, let name, let description):
            return ModelToolDefinition(name: name, description: description, inputSchema: [
                "type": "object",
                "properties": ["question": ["type": "string", "description": "The question to ask; include all context it needs."]],
                "required": ["question"],
                "additionalProperties": false,
            ])
        case .askUser:
            return ModelToolDefinition(
                name: Self.askUserName,
                description: "Ask the user a question when you cannot go on without their answer. The answer comes back as this tool's output.",
                inputSchema: [
                    "type": "object",
                    "properties": [
                        "question": ["type": "string", "description": "The question, complete enough to answer without other context."],
                        "options": ["type": "array", "items": ["type": "string"], "description": "Suggested answers (optional); the user may still answer freely."],
                    ],
                    "required": ["question"],
                    "additionalProperties": false,
                ])
        case .updatePlan:
            let entry: JSONValue = [
                "type": "object", "additionalProperties": false, "required": ["content", "priority", "status"],
                "properties": [
                    "content": ["type": "string", "minLength": 1, "description": "What the step does, in a line."],
                    "priority": ["type": "string", "enum": .array(PlanEntryPriority.allCases.map { .string($0.rawValue) })],
                    "status": ["type": "string", "enum": .array(PlanEntryStatus.allCases.map { .string($0.rawValue) })],
                ],
            ]
            return ModelToolDefinition(
                name: BuiltinToolName.updatePlan.rawValue,
                description: "Keep a plan of a task of several steps: call it with the whole plan when you make it and whenever a step's status changes. Each call replaces the plan.",
                inputSchema: [
                    "type": "object", "additionalProperties": false, "required": ["entries"],
                    "properties": ["entries": ["type": "array", "items": entry, "maxItems": .int(PlanEntry.maxEntries)]],
                ])
        case .activateSkill(let skills):
            let list = skills.map { skill in
                "- \(skill.name)" + (skill.description.map { ": \($0)" } ?? "")
            }.joined(separator: "\n")
            return ModelToolDefinition(
                name: Self.activateSkillName,
                description: "Activate a skill when the task calls for it. Available skills:\n" + list,
                inputSchema: [
                    "type": "object",
                    "properties": ["name": ["type": "string", "enum": .array(skills.map { .string($0.name) })]],
                    "required": ["name"],
                    "additionalProperties": false,
                ])
        }
    }
}
