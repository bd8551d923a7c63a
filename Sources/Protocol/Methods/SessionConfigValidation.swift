/// A semantic problem in a `SessionConfig`: something that decodes but cannot work.
/// The server answers `invalidConfiguration` with the first problem's `path` as `data.field`.
public struct ConfigProblem: Sendable, Hashable, CustomStringConvertible {
    /// Where the problem is, JSON-path style: `tools[2].name`, `profiles.cases.planning.tools[0]`.
    public var path: String
    public var message: String

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { "\(path): \(message)" }
}

extension SessionConfig {
    /// Checks what the types cannot express. Regex syntax is not checked here
    /// (this module has no regex engine); the engine compiles patterns at create time.
    public func validate() -> [ConfigProblem] {
        var check = ConfigChecker(config: self)
        check.run()
        return check.problems
    }
}

/// Walks a config once, collecting problems in document order.
private struct ConfigChecker {
    let config: SessionConfig
    var problems: [ConfigProblem] = []

    init(config: SessionConfig) { self.config = config }

    mutating func add(_ path: String, _ message: String) {
        problems.append(ConfigProblem(path: path, message: message))
    }

    var caseNames: Set<String> { Set(config.profiles.map { Array($0.cases.keys) } ?? []) }
    var blockNames: Set<String> { Set(config.blocks.map { Array($0.keys) } ?? []) }

    /// Every tool name the model could be offered, and whether some built-in tool's
    /// name is left to the engine (then an unknown `toolChoice` name is not provably wrong).
    var offeredToolNames: (names: Set<String>, hasUnnamed: Bool) {
        var names = Set((config.tools ?? []).map(\.name))
        var unnamed = false
        var lists: [[ProfileTool]] = []
        if let p = config.profiles {
            lists.append(p.defaults?.tools ?? [])
            lists += p.cases.values.map { $0.tools ?? [] }
        }
        lists += (config.blocks ?? [:]).values.map { $0.tools ?? [] }
        for tool in lists.joined() {
            switch tool {
            case .named(let n): names.insert(n)
            case .handoff(let d), .consult(let d):
                if let n = d.name { names.insert(n) } else { unnamed = true }
            case .skills: names.insert("activate_skill")
            case .askUser: names.insert("ask_user")
            }
        }
        if config.askUser == true { names.insert("ask_user") }
        return (names, unnamed)
    }

    mutating func run() {
        checkLimits(config.limits, at: "limits")
        checkBudget(config.budget, at: "budget")
        checkCompaction(config.compaction, at: "compaction")
        checkTools()
        checkGuards()
        checkToolChoice(config.toolChoice, at: "toolChoice")
        checkEgress(config.egress, at: "egress")
        for (i, source) in (config.contextSources ?? []).enumerated() where source.name.isEmpty {
            add("contextSources[\(i)].name", "must not be empty")
        }
        if let model = config.model { checkModel(model, at: "model") }
        checkProfiles()
        checkBlocks()
        checkRouter()
        problems += config.mcpServerProblems()
    }

    mutating func checkLimits(_ limits: Limits?, at path: String) {
        guard let l = limits else { return }
        if let v = l.maxToolCalls, v <= 0 { add(path + ".maxToolCalls", "must be positive") }
        if let v = l.maxRoundTrips, v <= 0 { add(path + ".maxRoundTrips", "must be positive") }
        if let v = l.maxParallelToolCalls, v <= 0 { add(path + ".maxParallelToolCalls", "must be positive") }
        checkBounds(Limits.self, path, [
            ("wallClockSeconds", l.wallClockSeconds), ("toolTimeoutSeconds", l.toolTimeoutSeconds),
            ("confirmationTimeoutSeconds", l.confirmationTimeoutSeconds), ("askUserTimeoutSeconds", l.askUserTimeoutSeconds),
            ("parkedTTLSeconds", l.parkedTTLSeconds),
        ])
        checkBudget(l.budget, at: path)
    }

    mutating func checkCompaction(_ c: CompactionConfig?, at path: String) {
        guard let c else { return }
        checkBounds(CompactionConfig.self, path, [("threshold", c.threshold), ("keepLast", c.keepLast.map(Double.init))])
        if let m = c.model { checkModel(m, at: path + ".model") }
    }

    mutating func checkBudget(_ b: Budget?, at path: String) {
        guard let b else { return }
        checkBounds(Budget.self, path, [
            ("maxInputTokens", b.maxInputTokens.map(Double.init)), ("maxOutputTokens", b.maxOutputTokens.map(Double.init)),
            ("maxTotalTokens", b.maxTotalTokens.map(Double.init)), ("maxCostUSD", b.maxCostUSD),
        ])
    }


    /// Checks values against the ranges `T` declares for its schema, so the schema
    /// and the server agree.
    mutating func checkBounds<T: JSONSchemaBounded>(_: T.Type, _ path: String, _ values: [(String, Double?)]) {
        for (name, value) in values {
            guard let v = value, let bounds = T.jsonSchemaBounds[name], !bounds.contains(v) else { continue }
            add(path + "." + name, bounds.requirement)
        }
    }

    mutating func checkTools() {
        var seen: Set<String> = []
        for (i, tool) in (config.tools ?? []).enumerated() {
            if tool.name.isEmpty { add("tools[\(i)].name", "must not be empty") }
            if !seen.insert(tool.name).inserted { add("tools[\(i)].name", "duplicate tool name '\(tool.name)'") }
            if let schema = tool.inputSchema, schema.objectValue == nil, schema.boolValue == nil {
                add("tools[\(i)].inputSchema", "must be a JSON Schema object")
            }
        }
    }

    mutating func checkGuards() {
        for (i, g) in (config.guards ?? []).enumerated() {
            for (j, a) in (g.match.annotations ?? []).enumerated() where !ToolAnnotations.names.contains(a) {
                add("guards[\(i)].match.annotations[\(j)]", "unknown annotation '\(a)' (expected one of \(ToolAnnotations.names.joined(separator: ", ")))")
            }
        }
    }

    mutating func checkToolChoice(_ choice: ToolChoice?, at path: String) {
        guard let choice else { return }
        let offered = offeredToolNames
        switch choice {
        case .required where offered.names.isEmpty && !offered.hasUnnamed:
            add(path, "toolChoice \"required\" needs at least one tool")
        case .tool(let name) where !offered.names.contains(name) && !offered.hasUnnamed:
            add(path, "toolChoice names tool '\(name)', which is not declared")
        default:
            break
        }
    }

    mutating func checkEgress(_ egress: Egress?, at path: String) {
        guard let e = egress else { return }
        for (i, r) in (e.refuse ?? []).enumerated() where r.isEmpty {
            add("\(path).refuse[\(i)]", "must not be empty")
        }
        for (i, r) in (e.redact ?? []).enumerated() where r.pattern.isEmpty {
            add("\(path).redact[\(i)].pattern", "must not be empty")
        }
    }

    mutating func checkModel(_ model: ModelReference, at path: String) {
        switch model {
        case .named(let name):
            if name.isEmpty { add(path, "must not be empty") }
        case .inline(let m):
            checkBounds(ModelConfig.self, path, [("timeoutSeconds", m.timeoutSeconds)])
            if let w = m.contextWindowTokens, w <= 0 { add(path + ".contextWindowTokens", "must be positive") }
            if let p = m.pricing {
                checkBounds(Pricing.self, path + ".pricing", [
                    ("inputPerMTok", p.inputPerMTok), ("outputPerMTok", p.outputPerMTok),
                    ("cacheReadPerMTok", p.cacheReadPerMTok), ("cacheWritePerMTok", p.cacheWritePerMTok),
                ])
            }
            if !m.provider.takesScript, m.script != nil { add(path + ".script", "only the scripted provider takes a script") }
            for (i, item) in (m.script ?? []).enumerated() {
                checkBounds(ScriptItem.self, "\(path).script[\(i)]", [("delayMs", item.delayMs.map(Double.init))])
                checkBounds(ScriptError.self, "\(path).script[\(i)].error", [("afterSeconds", item.error?.afterSeconds)])
            }
        }
    }

    mutating func checkProfiles() {
        guard let p = config.profiles else { return }
        if p.cases.isEmpty {
            add("profiles.cases", p.selector != nil ? "a selector needs at least one case" : "must not be empty")
        }
        if let s = p.selector, s.isEmpty { add("profiles.selector", "must not be empty") }
        if let d = p.defaults { checkCase(d, at: "profiles.defaults") }
        for name in p.cases.keys.sorted() {
            if let c = p.cases[name] { checkCase(c, at: "profiles.cases.\(name)") }
        }
    }

    mutating func checkCase(_ c: ProfileCase, at path: String) {
        checkInstructions(c.instructions, at: path + ".instructions")
        checkProfileTools(c.tools, at: path + ".tools")
        if let m = c.model { checkModel(m, at: path + ".model") }
        if let o = c.options {
            if let t = o.maxOutputTokens, t <= 0 { add(path + ".options.maxOutputTokens", "must be positive") }
            checkToolChoice(o.toolChoice, at: path + ".options.toolChoice")
        }
        for (i, h) in (c.history ?? []).enumerated() {
            checkHistory(h, at: "\(path).history[\(i)]")
        }
        if let hooks = c.hooks {
            for hook in HookName.allCases {
                for (i, action) in (hooks[hook] ?? []).enumerated() {
                    checkHookAction(action, at: "\(path).hooks.\(hook.rawValue)[\(i)]")
                }
            }
        }
        checkEgress(c.egress, at: path + ".egress")
    }

    mutating func checkInstructions(_ items: [InstructionItem]?, at path: String) {
        for (i, item) in (items ?? []).enumerated() {
            if case .block(let name, _) = item, !blockNames.contains(name) {
                add("\(path)[\(i)].block", "unknown block '\(name)'")
            }
        }
    }

    mutating func checkProfileTools(_ tools: [ProfileTool]?, at path: String) {
        for (i, tool) in (tools ?? []).enumerated() {
            switch tool {
            case .named(let name):
                if !(config.tools ?? []).contains(where: { $0.name == name }) {
                    add("\(path)[\(i)]", "unknown tool '\(name)' (declare it in tools)")
                }
            case .handoff(let d) where !caseNames.contains(d.profile):
                add("\(path)[\(i)].handoff", "unknown profile case '\(d.profile)'")
            case .consult(let d) where !caseNames.contains(d.profile):
                add("\(path)[\(i)].consult", "unknown profile case '\(d.profile)'")
            case .skills(let skills):
                for (j, s) in skills.enumerated() where s.prompt == nil && s.instructions == nil {
                    add("\(path)[\(i)].skills[\(j)]", "a skill needs a prompt or instructions")
                }
            default:
                break
            }
        }
    }

    mutating func checkHistory(_ transform: HistoryTransform, at path: String) {
        switch transform {
        case .rollingWindow(let w):
            let given = [w.entries, w.messages, w.tokens].compactMap { $0 }
            if given.count != 1 {
                add(path + ".rollingWindow", "give exactly one of entries, messages, tokens")
            } else if given.contains(where: { $0 <= 0 }) {
                add(path + ".rollingWindow", "the window size must be positive")
            }
        case .redact(let r) where r.pattern.isEmpty:
            add(path + ".redact.pattern", "must not be empty")
        default:
            break
        }
    }

    mutating func checkHookAction(_ action: HookAction, at path: String) {
        switch action.action {
        case .summarizeHistory(let s):
            if let t = s.threshold, t <= 0 { add(path + ".summarizeHistory.threshold", "must be positive") }
            if let k = s.keepLast, k < 0 { add(path + ".summarizeHistory.keepLast", "must not be negative") }
            if let m = s.model { checkModel(m, at: path + ".summarizeHistory.model") }
        case .then(let nested):
            for (i, a) in nested.enumerated() { checkHookAction(a, at: "\(path).then[\(i)]") }
        default:
            break
        }
    }

    mutating func checkBlocks() {
        guard let blocks = config.blocks else { return }
        for name in blocks.keys.sorted() {
            guard let b = blocks[name] else { continue }
            let path = "blocks.\(name)"
            checkInstructions(b.instructions, at: path + ".instructions")
            checkProfileTools(b.tools, at: path + ".tools")
            for (i, ref) in (b.blocks ?? []).enumerated() where blocks[ref] == nil {
                add("\(path).blocks[\(i)]", "unknown block '\(ref)'")
            }
        }
        // A cycle would make block expansion loop; report each block that reaches itself.
        for name in blocks.keys.sorted() where reaches(name, from: name, in: blocks) {
            add("blocks.\(name)", "block includes itself (directly or through other blocks)")
        }
    }

    /// A block includes another through its nested `blocks` and through `{block}`
    /// instruction items (whatever their `when`: a hidden cycle is still a cycle).
    func reaches(_ target: String, from start: String, in blocks: [String: Block]) -> Bool {
        func includes(_ name: String) -> [String] {
            guard let block = blocks[name] else { return [] }
            let fromItems = (block.instructions ?? []).compactMap { item -> String? in
                if case .block(let included, _) = item { return included }
                return nil
            }
            return (block.blocks ?? []) + fromItems
        }
        var stack = includes(start)
        var seen: Set<String> = []
        while let next = stack.popLast() {
            if next == target { return true }
            guard seen.insert(next).inserted else { continue }
            stack += includes(next)
        }
        return false
    }

    mutating func checkRouter() {
        guard let r = config.router else { return }
        if config.profiles == nil { add("router", "a router needs profiles.cases to route between") }
        if let m = r.model { checkModel(m, at: "router.model") }
        switch r.kind {
        case .rules:
            if (r.rules ?? []).isEmpty { add("router.rules", "a rules router needs at least one rule") }
        case .llm:
            if r.rules != nil { add("router.rules", "only a rules router takes rules") }
        }
        for (i, rule) in (r.rules ?? []).enumerated() {
            if rule.pattern.isEmpty { add("router.rules[\(i)].pattern", "must not be empty") }
            if config.profiles != nil, !caseNames.contains(rule.profile) {
                add("router.rules[\(i)].profile", "unknown profile case '\(rule.profile)'")
            }
        }
    }
}
