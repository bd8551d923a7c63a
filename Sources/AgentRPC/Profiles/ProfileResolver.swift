import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Computes the active profile from the config and the session properties
/// (docs/protocol.md §11). Pure: the turn loop calls it before every round trip, so a
/// property change takes effect on the next request.
enum ProfileResolver {
    /// The profile name of a session without `profiles`, and the preferred fallback case.
    static let defaultProfileName = "default"

    // MARK: Selecting the case

    /// The case `profiles.selector` picks: the selector property's string value when it
    /// names a case, else the fallback case (see `fallbackCaseName`). Nil only when
    /// there are no cases.
    static func activeCaseName(_ profiles: Profiles, properties: [String: JSONValue]) -> String? {
        if let selector = profiles.selector, let value = properties[selector]?.stringValue, profiles.cases[value] != nil {
            return value
        }
        return fallbackCaseName(profiles)
    }

    /// The case used when the selector is absent, missing, not a string or names no
    /// case. `cases` is a JSON object, whose member order is not kept, so "the first
    /// case" is not defined: the case named `"default"` if there is one, else the
    /// alphabetically first name (Swift string order, i.e. by Unicode code points for ASCII names).
    static func fallbackCaseName(_ profiles: Profiles) -> String? {
        if profiles.cases[defaultProfileName] != nil { return defaultProfileName }
        return profiles.cases.keys.min()
    }

    /// The name `getState`, `requestStarted` and entries report: the active case, or
    /// `"default"` for a session without profiles. Never throws.
    static func activeProfileName(config: SessionConfig, properties: [String: JSONValue]) -> String {
        config.profiles.flatMap { activeCaseName($0, properties: properties) } ?? defaultProfileName
    }

    // MARK: Resolving

    /// Resolves the active profile.
    ///
    /// - A session without `profiles` is one profile named `"default"`: its instructions
    ///   are `config.instructions` (templates apply), its tools all of `config.tools`.
    /// - With profiles, list-valued settings (`instructions`, `tools`, `history`) come
    ///   from the case when it declares them (even as an empty list), else from
    ///   `defaults`; scalar options are merged field by field (case over defaults);
    ///   hooks accumulate (defaults' first). A case that declares no `tools` and whose
    ///   defaults declare none offers no client tools: with profiles, `config.tools` is
    ///   a catalog that cases pick from by name.
    /// - `activeSkills` names the activated skills; the instructions of those of kind
    ///   `instructions` that this profile offers are appended, in the profile's skill order.
    ///
    /// Throws `invalidConfiguration` (with `data.field`) for an unknown tool name, an
    /// unknown block, a handoff/consult to an unknown case, a block cycle, or no cases.
    static func resolve(
        config: SessionConfig, properties: [String: JSONValue], activeSkills: [String] = []
    ) throws -> ResolvedProfile {
        guard let profiles = config.profiles else {
            var builder = ProfileBuilder(config: config, properties: properties)
            builder.appendText(config.instructions ?? "")
            var tools = (config.tools ?? []).map(ResolvedTool.client)
            if config.askUser == true, !tools.contains(where: { $0.name == ResolvedTool.askUserName }) { tools.append(.askUser) }
            if config.offersPlan, !tools.contains(where: { $0.name == ResolvedTool.updatePlan.name }) { tools.append(.updatePlan) }
            return ResolvedProfile(
                name: defaultProfileName, instructions: builder.renderedInstructions,
                tools: tools, model: config.model,
                options: ProfileOptions(toolChoice: config.toolChoice), history: [], hooks: Hooks(),
                transcriptErrorPolicy: config.transcriptErrorPolicy, egress: config.egress)
        }
        guard let name = activeCaseName(profiles, properties: properties), let chosen = profiles.cases[name] else {
            throw RPCError.invalidConfiguration("profiles.cases must name at least one profile", field: "profiles.cases")
        }
        if let cycle = blockCycle(in: config.blocks ?? [:]) {
            throw RPCError.invalidConfiguration(
                "block cycle: \(cycle.joined(separator: " → "))", field: "blocks.\(cycle.first ?? "")")
        }
        let defaults = profiles.defaults ?? ProfileCase()
        let casePath = "profiles.cases.\(name)"

        var builder = ProfileBuilder(config: config, properties: properties)
        // Tools first, so the case's own list leads and block tools follow in inclusion order.
        if let tools = chosen.tools {
            try builder.addTools(tools, at: casePath + ".tools")
        } else if let tools = defaults.tools {
            try builder.addTools(tools, at: "profiles.defaults.tools")
        }
        if let items = chosen.instructions {
            try builder.addItems(items, at: casePath + ".instructions")
        } else if let items = defaults.instructions {
            try builder.addItems(items, at: "profiles.defaults.instructions")
        }
        builder.appendActiveSkills(activeSkills)
        // `askUser` on the session offers the question tool in every case, `builtinTools` the engine's others.
        if config.askUser == true { builder.offer(.askUser) }
        if config.offersPlan { builder.offer(.updatePlan) }

        let own = chosen.options ?? ProfileOptions()
        let shared = defaults.options ?? ProfileOptions()
        let options = ProfileOptions(
            temperature: own.temperature ?? shared.temperature,
            reasoningLevel: own.reasoningLevel ?? shared.reasoningLevel,
            maxOutputTokens: own.maxOutputTokens ?? shared.maxOutputTokens,
            toolCallingMode: own.toolCallingMode ?? shared.toolCallingMode,
            toolChoice: own.toolChoice ?? shared.toolChoice ?? config.toolChoice)

        return ResolvedProfile(
            name: name, instructions: builder.renderedInstructions, tools: builder.finishedTools(),
            model: chosen.model ?? defaults.model ?? config.model, options: options,
            history: chosen.history ?? defaults.history ?? [],
            hooks: accumulate(defaults.hooks, chosen.hooks),
            transcriptErrorPolicy: chosen.transcriptErrorPolicy ?? defaults.transcriptErrorPolicy ?? config.transcriptErrorPolicy,
            egress: chosen.egress ?? defaults.egress ?? config.egress)
    }

    /// Defaults' actions run before the case's at every hook point.
    static func accumulate(_ defaults: Hooks?, _ own: Hooks?) -> Hooks {
        func join(_ a: [HookAction]?, _ b: [HookAction]?) -> [HookAction]? {
            if a == nil && b == nil { return nil }
            return (a ?? []) + (b ?? [])
        }
        let d = defaults ?? Hooks()
        let o = own ?? Hooks()
        return Hooks(
            onActivate: join(d.onActivate, o.onActivate), onDeactivate: join(d.onDeactivate, o.onDeactivate),
            onPrompt: join(d.onPrompt, o.onPrompt), onToolCall: join(d.onToolCall, o.onToolCall),
            onToolOutput: join(d.onToolOutput, o.onToolOutput), onResponse: join(d.onResponse, o.onResponse))
    }

    /// A block that includes itself, through nested `blocks` or `{block}` instruction items,
    /// whatever their conditions: a cycle is a config error even while a `when` hides it.
    /// Returns the path (`["a", "b", "a"]`), or nil. Unknown names are not followed.
    static func blockCycle(in blocks: [String: Block]) -> [String]? {
        func edges(_ name: String) -> [String] {
            guard let block = blocks[name] else { return [] }
            let fromItems = (block.instructions ?? []).compactMap { item -> String? in
                if case .block(let target, _) = item { return target }
                return nil
            }
            return fromItems + (block.blocks ?? [])
        }
        var done: Set<String> = []
        var path: [String] = []
        func visit(_ name: String) -> [String]? {
            if let start = path.firstIndex(of: name) { return Array(path[start...]) + [name] }
            guard !done.contains(name), blocks[name] != nil else { return nil }
            path.append(name)
            for next in edges(name) {
                if let cycle = visit(next) { return cycle }
            }
            path.removeLast()
            done.insert(name)
            return nil
        }
        for name in blocks.keys.sorted() {
            if let cycle = visit(name) { return cycle }
        }
        return nil
    }

    // MARK: Conditions and templates

    /// Evaluates a `when` condition. `{"tool": name}` holds only when `toolName` is that
    /// name (hooks fire for a tool call); instructions pass nil, so it is false there.
    ///
    /// A property test holds when all its given tests hold:
    /// - `exists: true` — the property is present and not null (`false`: absent or null);
    /// - `equals` — JSON equality with `1 == 1.0`; `equals: null` holds for a null or absent property;
    /// - `contains` — a string property contains the string as a substring, or an
    ///   array property has an element equal to the value; false for other types;
    /// - no test given — the property is present and not null.
    ///
    /// `all: []` is true and `any: []` is false.
    static func condition(_ condition: Condition, properties: [String: JSONValue], toolName: String? = nil) -> Bool {
        switch condition {
        case .property(let test): return holds(test, value: properties[test.property])
        case .not(let inner): return !Self.condition(inner, properties: properties, toolName: toolName)
        case .all(let list): return list.allSatisfy { Self.condition($0, properties: properties, toolName: toolName) }
        case .any(let list): return list.contains { Self.condition($0, properties: properties, toolName: toolName) }
        case .tool(let name): return toolName == name
        }
    }

    private static func holds(_ test: PropertyCondition, value: JSONValue?) -> Bool {
        let present = value.map { !$0.isNull } ?? false
        if let exists = test.exists, exists != present { return false }
        if let expected = test.equals {
            if expected.isNull {
                if present { return false }
            } else {
                guard let value, value.numericallyEquals(expected) else { return false }
            }
        }
        if let needle = test.contains {
            guard let value, contains(value, needle) else { return false }
        }
        if test.exists == nil && test.equals == nil && test.contains == nil { return present }
        return true
    }

    private static func contains(_ haystack: JSONValue, _ needle: JSONValue) -> Bool {
        switch haystack {
        case .string(let text):
            guard let fragment = needle.stringValue else { return false }
            return fragment.isEmpty || text.containsScalars(fragment)
        case .array(let elements):
            return elements.contains { $0.numericallyEquals(needle) }
        default:
            return false
        }
    }

    /// Fills `{{name}}` templates in one line: strings render raw, other values as
    /// compact JSON. Returns nil when a named property is absent or null, so the
    /// caller leaves the whole line out. Whitespace inside the braces is ignored;
    /// `{{}}` and an unclosed `{{` stay as literal text.
    static func renderLine(_ line: String, properties: [String: JSONValue]) -> String? {
        guard line.contains("{{") else { return line }
        var out = ""
        var rest = line[...]
        while let open = rest.firstRange(of: "{{"), let close = rest[open.upperBound...].firstRange(of: "}}") {
            let key = rest[open.upperBound..<close.lowerBound].trimmingWhitespace()
            out += rest[..<open.lowerBound]
            if key.isEmpty {
                out += rest[open.lowerBound..<close.upperBound]
            } else {
                guard let value = properties[key], !value.isNull else { return nil }
                out += value.stringValue ?? value.serializedString()
            }
            rest = rest[close.upperBound...]
        }
        return out + rest
    }
}

/// Accumulates one resolution: instruction lines, tools (deduplicated by name) and skills.
private struct ProfileBuilder {
    let config: SessionConfig
    let properties: [String: JSONValue]
    var lines: [String] = []
    var tools: [ResolvedTool] = []
    var toolNames: Set<String> = []
    /// Every skill the profile offers, first declaration of a name wins.
    var skills: [Skill] = []
    /// Where `activate_skill` sits in `tools` (at the first `skills` entry met).
    var skillToolIndex: Int?
    /// Blocks already expanded: a block reached twice (a diamond) contributes once.
    var included: Set<String> = []
    /// Blocks being expanded, to report a cycle instead of recursing forever.
    var expanding: [String] = []

    init(config: SessionConfig, properties: [String: JSONValue]) {
        self.config = config
        self.properties = properties
    }

    var renderedInstructions: String { lines.joined(separator: "\n") }

    func finishedTools() -> [ResolvedTool] {
        var out = tools
        if let index = skillToolIndex { out[index] = .activateSkill(skills: skills) }
        return out
    }

    mutating func appendText(_ text: String) {
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            if let rendered = ProfileResolver.renderLine(String(line), properties: properties) { lines.append(rendered) }
        }
    }

    mutating func addItems(_ items: [InstructionItem], at path: String) throws {
        for (index, item) in items.enumerated() {
            if let when = item.condition, !ProfileResolver.condition(when, properties: properties) { continue }
            switch item {
            case .plain(let text), .text(let text, _):
                appendText(text)
            case .block(let name, _):
                try include(block: name, at: "\(path)[\(index)].block")
            }
        }
    }

    /// A block's own tools, then its instructions (which may include blocks), then its nested `blocks`.
    mutating func include(block name: String, at path: String) throws {
        if expanding.contains(name) {
            throw RPCError.invalidConfiguration(
                "block cycle: \((expanding + [name]).joined(separator: " → "))", field: path)
        }
        guard !included.contains(name) else { return }
        guard let block = config.blocks?[name] else {
            throw RPCError.invalidConfiguration("unknown block '\(name)'", field: path)
        }
        included.insert(name)
        expanding.append(name)
        defer { expanding.removeLast() }
        try addTools(block.tools ?? [], at: "blocks.\(name).tools")
        try addItems(block.instructions ?? [], at: "blocks.\(name).instructions")
        for (index, nested) in (block.blocks ?? []).enumerated() {
            try include(block: nested, at: "blocks.\(name).blocks[\(index)]")
        }
    }

    mutating func addTools(_ list: [ProfileTool], at path: String) throws {
        let cases = config.profiles?.cases ?? [:]
        for (index, tool) in list.enumerated() {
            let field = "\(path)[\(index)]"
            switch tool {
            case .named(let name):
                guard let spec = (config.tools ?? []).first(where: { $0.name == name }) else {
                    throw RPCError.invalidConfiguration("unknown tool '\(name)' (declare it in tools)", field: field)
                }
                offer(.client(spec))
            case .handoff(let d):
                guard let target = cases[d.profile] else {
                    throw RPCError.invalidConfiguration("handoff to unknown profile case '\(d.profile)'", field: field + ".handoff")
                }
                let description = d.description
                    ?? "Hand the conversation over to the '\(d.profile)' profile, which continues from here and writes the answer."
                    + (target.description.map { " It does this: \($0)" } ?? "")
                offer(.handoff(target: d.profile, name: d.name ?? "handoff_to_\(d.profile)", description: description))
            case .consult(let d):
                guard let target = cases[d.profile] else {
                    throw RPCError.invalidConfiguration("consult of unknown profile case '\(d.profile)'", field: field + ".consult")
                }
                let description = d.description
                    ?? "Ask the '\(d.profile)' profile a question; it answers in a separate conversation and its answer comes back as this tool's output."
                    + (target.description.map { " It does this: \($0)" } ?? "")
                offer(.consult(profile: d.profile, name: d.name ?? "consult_\(d.profile)", description: description))
            case .askUser:
                offer(.askUser)
            case .skills(let list):
                if skillToolIndex == nil {
                    guard !toolNames.contains(ResolvedTool.activateSkillName) else { continue }
                    skillToolIndex = tools.count
                    offer(.activateSkill(skills: []))
                }
                for skill in list where !skills.contains(where: { $0.name == skill.name }) {
                    skills.append(skill)
                }
            }
        }
    }

    /// The first tool of a name wins; later ones are dropped.
    mutating func offer(_ tool: ResolvedTool) {
        guard toolNames.insert(tool.name).inserted else { return }
        tools.append(tool)
    }

    mutating func appendActiveSkills(_ active: [String]) {
        for skill in skills where active.contains(skill.name) {
            if let text = skill.instructions { appendText(text) }
        }
    }
}

extension SessionConfig {
    /// Whether the session names `update_plan` among its built-in tools.
    var offersPlan: Bool { builtinTools?.contains(.updatePlan) == true }
}
