import AgentRPCProtocol
import Testing

@testable import AgentRPC

/// Decodes a `SessionConfig` from JSON text, as `session/create` would.
private func config(_ text: String) throws -> SessionConfig {
    try JSONValue.parse(text).decode(as: SessionConfig.self)
}

private func resolve(_ c: SessionConfig, _ properties: [String: JSONValue], skills: [String] = []) throws -> ResolvedProfile {
    try ProfileResolver.resolve(config: c, properties: properties, activeSkills: skills)
}

/// The `data.field` of an `invalidConfiguration` error thrown by `body`.
private func configErrorField(_ body: () throws -> Void) -> (field: String?, message: String)? {
    do {
        try body()
        return nil
    } catch let error as RPCError {
        #expect(error.kind == .invalidConfiguration)
        return (error.data["field"]?.stringValue, error.message)
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

/// The three-mode example of docs/protocol.md §11: brainstorm → planning → reviewing.
private let threeModes = #"""
    {
      "model": "session-model",
      "instructions": "Not used: the session has profiles.",
      "tools": [
        {"name": "generate_title", "description": "Suggest a title.",
         "inputSchema": {"type": "object", "properties": {"topic": {"type": "string"}}}},
        {"name": "write_plan"},
        {"name": "read_file", "annotations": {"readOnly": true}},
        {"name": "fold_diagram"},
        {"name": "submit_review", "final": true}
      ],
      "toolChoice": "auto",
      "transcriptErrorPolicy": "keepCompleted",
      "egress": {"refuse": ["SECRET"]},
      "properties": {"mode": "brainstorm", "summary": null},
      "profiles": {
        "selector": "mode",
        "defaults": {
          "options": {"temperature": 0.2, "maxOutputTokens": 1024, "reasoningLevel": "low"},
          "history": [{"rollingWindow": {"messages": 50}}],
          "hooks": {"onResponse": [{"set": {"answered": true}}], "onPrompt": [{"client": true}]}
        },
        "cases": {
          "brainstorm": {
            "instructions": [
              "You are a brainstorming partner.",
              {"block": "origamiExpert", "when": {"property": "techniques", "contains": "origami"}},
              "Summary: {{summary}}",
              {"text": "The user is a beginner.", "when": {"property": "level", "equals": "beginner"}}
            ],
            "tools": ["generate_title", {"handoff": "planning", "name": "pass_baton", "description": "Hand over to planning."}],
            "model": "pcc",
            "options": {"temperature": 1, "reasoningLevel": "deep", "maxOutputTokens": 2048, "toolCallingMode": "allowed"},
            "history": [{"rollingWindow": {"entries": 10}}, {"dropCompletedToolCalls": true}],
            "hooks": {
              "onToolCall": [{"when": {"tool": "generate_title"}, "set": {"titled": true}}],
              "onResponse": [{"remove": ["draft"]}]
            },
            "transcriptErrorPolicy": "preserve"
          },
          "planning": {
            "description": "Turns ideas into a step-by-step plan.",
            "instructions": ["You turn ideas into plans.\nPlan for {{deadline}}.\nKeep it short."],
            "tools": ["write_plan", {"consult": "reviewing"}, {"handoff": "reviewing"}],
            "options": {"temperature": 0.5}
          },
          "reviewing": {
            "description": "Reviews a plan.",
            "instructions": ["You review plans.", {"block": "checklist"}],
            "tools": ["submit_review", {"skills": [
              {"name": "security", "description": "Security review", "instructions": "Check for secrets."},
              {"name": "tone", "prompt": "Check the tone."}
            ]}],
            "options": {"toolCallingMode": "required"},
            "history": [],
            "egress": {"redact": [{"pattern": "\\d{16}", "replacement": "[card]"}]}
          }
        }
      },
      "blocks": {
        "origamiExpert": {"instructions": ["You know origami folds."], "tools": ["fold_diagram"], "blocks": ["paperTypes"]},
        "paperTypes": {"instructions": ["Kami, washi and foil."], "tools": ["read_file", "fold_diagram"]},
        "checklist": {
          "instructions": [
            "Checklist:",
            {"text": "- the deadline {{deadline}} is realistic", "when": {"property": "deadline", "exists": true}},
            "- steps are ordered"
          ],
          "tools": ["read_file"]
        }
      }
    }
    """#

@Suite struct ProfileResolverTests {
    // MARK: The three-mode example

    @Test func brainstormWithNothingSetLeavesConditionalPartsOut() throws {
        let c = try config(threeModes)
        #expect(c.validate().isEmpty)
        let p = try resolve(c, ["mode": "brainstorm", "summary": nil])
        #expect(p.name == "brainstorm")
        // The block's `when` fails, the null summary drops its line, the level test fails.
        #expect(p.instructions == "You are a brainstorming partner.")
        #expect(p.tools.map(\.name) == ["generate_title", "pass_baton"])
        #expect(p.tools[1] == .handoff(target: "planning", name: "pass_baton", description: "Hand over to planning."))
        #expect(p.model == .named("pcc"))
        #expect(p.options == ProfileOptions(temperature: 1, reasoningLevel: "deep", maxOutputTokens: 2048, toolCallingMode: .allowed, toolChoice: .auto))
        #expect(p.history == [.rollingWindow(RollingWindow(entries: 10)), .dropCompletedToolCalls])
        #expect(p.transcriptErrorPolicy == .preserve)
        #expect(p.egress == Egress(refuse: ["SECRET"]))
    }

    @Test func brainstormBlocksAndLinesAppearAsPropertiesChange() throws {
        let c = try config(threeModes)
        let p = try resolve(c, [
            "mode": "brainstorm", "techniques": ["kirigami", "origami"], "summary": "We like cranes.", "level": "beginner",
        ])
        #expect(p.instructions == """
            You are a brainstorming partner.
            You know origami folds.
            Kami, washi and foil.
            Summary: We like cranes.
            The user is a beginner.
            """)
        // Block tools follow the case's, deduplicated by name in first-seen order.
        #expect(p.tools.map(\.name) == ["generate_title", "pass_baton", "fold_diagram", "read_file"])
        #expect(p.tools[3] == .client(ToolSpec(name: "read_file", annotations: ToolAnnotations(readOnly: true))))

        // A string property matches `contains` by substring.
        let text = try resolve(c, ["mode": "brainstorm", "techniques": "origami and paper cutting"])
        #expect(text.instructions.contains("You know origami folds."))

        // Dropping the property removes the block's lines and tools again.
        let without = try resolve(c, ["mode": "brainstorm", "techniques": ["kirigami"], "summary": "S"])
        #expect(without.instructions == "You are a brainstorming partner.\nSummary: S")
        #expect(without.tools.map(\.name) == ["generate_title", "pass_baton"])
    }

    @Test func planningTemplatesDropOnlyTheirOwnLine() throws {
        let c = try config(threeModes)
        let p = try resolve(c, ["mode": "planning"])
        #expect(p.name == "planning")
        #expect(p.instructions == "You turn ideas into plans.\nKeep it short.")
        let dated = try resolve(c, ["mode": "planning", "deadline": "Friday"])
        #expect(dated.instructions == "You turn ideas into plans.\nPlan for Friday.\nKeep it short.")
        let numeric = try resolve(c, ["mode": "planning", "deadline": 3])
        #expect(numeric.instructions == "You turn ideas into plans.\nPlan for 3.\nKeep it short.")
    }

    @Test func planningTakesDefaultsWhereItSaysNothing() throws {
        let p = try resolve(try config(threeModes), ["mode": "planning"])
        #expect(p.options == ProfileOptions(temperature: 0.5, reasoningLevel: "low", maxOutputTokens: 1024, toolChoice: .auto))
        #expect(p.history == [.rollingWindow(RollingWindow(messages: 50))])
        #expect(p.model == .named("session-model"))
        #expect(p.transcriptErrorPolicy == .keepCompleted)
        #expect(p.hooks == Hooks(onPrompt: [HookAction(.client)], onResponse: [HookAction(.set(["answered": true]))]))
    }

    @Test func planningDelegationToolsGetDefaultNamesAndDescriptions() throws {
        let p = try resolve(try config(threeModes), ["mode": "planning"])
        #expect(p.tools.map(\.name) == ["write_plan", "consult_reviewing", "handoff_to_reviewing"])
        guard case .consult(let profile, _, let consultText) = p.tools[1], case .handoff(let target, _, let handoffText) = p.tools[2] else {
            Issue.record("unexpected tools \(p.tools)")
            return
        }
        #expect(profile == "reviewing" && target == "reviewing")
        // The target case's description tells the model what it is handing to.
        #expect(consultText.contains("'reviewing'") && consultText.contains("Reviews a plan."))
        #expect(handoffText.contains("'reviewing'") && handoffText.contains("Reviews a plan."))
    }

    @Test func reviewingSkillsBlocksAndOverrides() throws {
        let c = try config(threeModes)
        let p = try resolve(c, ["mode": "reviewing"])
        #expect(p.instructions == "You review plans.\nChecklist:\n- steps are ordered")
        #expect(p.tools.map(\.name) == ["submit_review", "activate_skill", "read_file"])
        #expect(p.tools[0].clientSpec?.final == true)
        #expect(p.clientTools.map(\.name) == ["submit_review", "read_file"])
        #expect(p.history.isEmpty, "an explicit empty history opts out of the defaults'")
        #expect(p.options.toolCallingMode == .required)
        #expect(p.options.temperature == 0.2)
        #expect(p.egress == Egress(redact: [Redaction(pattern: #"\d{16}"#, replacement: "[card]")]))

        let withDeadline = try resolve(c, ["mode": "reviewing", "deadline": "May 1"])
        #expect(withDeadline.instructions == "You review plans.\nChecklist:\n- the deadline May 1 is realistic\n- steps are ordered")
    }

    @Test func activeInstructionSkillsJoinTheInstructions() throws {
        let c = try config(threeModes)
        let active = try resolve(c, ["mode": "reviewing"], skills: ["security"])
        #expect(active.instructions.hasSuffix("- steps are ordered\nCheck for secrets."))
        // A prompt skill is returned as tool output, never added to the instructions.
        let prompt = try resolve(c, ["mode": "reviewing"], skills: ["tone"])
        #expect(prompt.instructions == "You review plans.\nChecklist:\n- steps are ordered")
        // Skills of another profile do nothing here.
        let other = try resolve(c, ["mode": "planning"], skills: ["security"])
        #expect(!other.instructions.contains("Check for secrets."))
    }

    @Test func hooksAccumulateDefaultsFirst() throws {
        let p = try resolve(try config(threeModes), ["mode": "brainstorm"])
        #expect(p.hooks.onResponse == [HookAction(.set(["answered": true])), HookAction(.remove(["draft"]))])
        #expect(p.hooks.onPrompt == [HookAction(.client)])
        #expect(p.hooks.onToolCall == [HookAction(when: .tool("generate_title"), .set(["titled": true]))])
        #expect(p.hooks.onActivate == nil)
    }

    // MARK: Selecting the case

    @Test func selectorFallsBackDeterministically() throws {
        let c = try config(threeModes)
        // No "default" case: the alphabetically first one.
        for properties: [String: JSONValue] in [[:], ["mode": "nonsense"], ["mode": 5], ["mode": nil], ["mode": ["planning"]]] {
            #expect(try resolve(c, properties).name == "brainstorm", "\(properties)")
        }
        #expect(ProfileResolver.activeProfileName(config: c, properties: ["mode": "reviewing"]) == "reviewing")

        var withDefault = c
        withDefault.profiles?.cases["default"] = ProfileCase(instructions: [.plain("Fallback.")])
        #expect(try resolve(withDefault, ["mode": "nonsense"]).name == "default")
        #expect(try resolve(withDefault, ["mode": "nonsense"]).instructions == "Fallback.")
        #expect(try resolve(withDefault, ["mode": "planning"]).name == "planning")

        var noSelector = c
        noSelector.profiles?.selector = nil
        #expect(try resolve(noSelector, ["mode": "planning"]).name == "brainstorm")
    }

    @Test func fallbackIgnoresDeclarationOrder() throws {
        let a = try config(#"{"profiles": {"cases": {"zeta": {}, "alpha": {}, "mid": {}}}}"#)
        let b = try config(#"{"profiles": {"cases": {"mid": {}, "zeta": {}, "alpha": {}}}}"#)
        #expect(try resolve(a, [:]).name == "alpha")
        #expect(try resolve(b, [:]).name == "alpha")
    }

    // MARK: Sessions without profiles

    @Test func sessionWithoutProfilesIsTheDefaultProfile() throws {
        let c = try config(#"""
            {"model": "m", "instructions": "Be brief.\nUser: {{user}}\nDone.",
             "tools": [{"name": "a"}, {"name": "b", "final": true}], "toolChoice": "required",
             "transcriptErrorPolicy": "revert", "egress": {"refuse": ["x"]}}
            """#)
        let p = try resolve(c, [:])
        #expect(p.name == "default")
        #expect(p.instructions == "Be brief.\nDone.")
        #expect(p.tools == [.client(ToolSpec(name: "a")), .client(ToolSpec(name: "b", final: true))])
        #expect(p.model == .named("m"))
        #expect(p.options == ProfileOptions(toolChoice: .required))
        #expect(p.history.isEmpty)
        #expect(p.hooks == Hooks())
        #expect(p.transcriptErrorPolicy == .revert)
        #expect(p.egress == Egress(refuse: ["x"]))
        #expect(try resolve(c, ["user": "Ann"]).instructions == "Be brief.\nUser: Ann\nDone.")
        #expect(try resolve(SessionConfig(), [:]).instructions == "")
        #expect(ProfileResolver.activeProfileName(config: c, properties: [:]) == "default")
    }

    // MARK: Lists: case over defaults

    @Test func caseListsReplaceDefaultsAndEmptyListsOptOut() throws {
        let c = try config(#"""
            {"tools": [{"name": "search"}, {"name": "save"}],
             "profiles": {"selector": "m",
               "defaults": {"instructions": ["Shared."], "tools": ["search"]},
               "cases": {"inherit": {}, "own": {"instructions": ["Own."], "tools": ["save"]}, "none": {"tools": [], "instructions": []}}}}
            """#)
        let inherit = try resolve(c, ["m": "inherit"])
        #expect(inherit.instructions == "Shared.")
        #expect(inherit.tools.map(\.name) == ["search"])
        let own = try resolve(c, ["m": "own"])
        #expect(own.instructions == "Own.")
        #expect(own.tools.map(\.name) == ["save"])
        let none = try resolve(c, ["m": "none"])
        #expect(none.instructions == "")
        #expect(none.tools.isEmpty)
    }

    @Test func caseWithoutToolsOffersNoClientTools() throws {
        let c = try config(#"{"tools": [{"name": "search"}], "profiles": {"cases": {"chat": {"instructions": ["Hi."]}}}}"#)
        #expect(try resolve(c, [:]).tools.isEmpty)
    }

    @Test func optionsMergeFieldByField() throws {
        let c = try config(#"""
            {"toolChoice": "none", "profiles": {
               "defaults": {"options": {"temperature": 0.1, "toolCallingMode": "disallowed", "toolChoice": {"tool": "x"}}},
               "cases": {"a": {"options": {"maxOutputTokens": 10}}}}}
            """#)
        #expect(try resolve(c, [:]).options == ProfileOptions(temperature: 0.1, maxOutputTokens: 10, toolCallingMode: .disallowed, toolChoice: .tool("x")))
        let noDefaults = try config(#"{"toolChoice": "none", "profiles": {"cases": {"a": {"model": "x"}}}}"#)
        let p = try resolve(noDefaults, [:])
        #expect(p.options == ProfileOptions(toolChoice: ToolChoice.none))
        #expect(p.model == .named("x"))
    }

    // MARK: Blocks

    @Test func blockIncludedTwiceContributesOnce() throws {
        let c = try config(#"""
            {"tools": [{"name": "t"}], "profiles": {"cases": {"a": {"instructions": [{"block": "left"}, {"block": "right"}, {"block": "shared"}]}}},
             "blocks": {"left": {"instructions": ["L"], "blocks": ["shared"]},
                        "right": {"instructions": ["R", {"block": "shared"}]},
                        "shared": {"instructions": ["S"], "tools": ["t"]}}}
            """#)
        let p = try resolve(c, [:])
        #expect(p.instructions == "L\nS\nR")
        #expect(p.tools.map(\.name) == ["t"])
    }

    @Test func nestedBlocksComeAfterTheBlocksOwnInstructions() throws {
        let c = try config(#"""
            {"profiles": {"cases": {"a": {"instructions": ["start", {"block": "outer"}, "end"]}}},
             "blocks": {"outer": {"instructions": ["outer 1", {"block": "inner", "when": {"property": "deep", "equals": true}}, "outer 2"], "blocks": ["tail"]},
                        "inner": {"instructions": ["inner"]}, "tail": {"instructions": ["tail"]}}}
            """#)
        #expect(try resolve(c, [:]).instructions == "start\nouter 1\nouter 2\ntail\nend")
        #expect(try resolve(c, ["deep": true]).instructions == "start\nouter 1\ninner\nouter 2\ntail\nend")
    }

    @Test func blockCyclesAreErrorsEvenBehindAFalseCondition() throws {
        let nested = try config(#"""
            {"profiles": {"cases": {"a": {"instructions": [{"block": "x"}]}}},
             "blocks": {"x": {"blocks": ["y"]}, "y": {"blocks": ["x"]}}}
            """#)
        let found = configErrorField { _ = try resolve(nested, [:]) }
        #expect(found?.field == "blocks.x")
        #expect(found?.message == "block cycle: x → y → x")

        // A cycle through instruction items, never reached with these properties.
        let latent = try config(#"""
            {"profiles": {"cases": {"a": {"instructions": ["hi", {"block": "x", "when": {"property": "on", "exists": true}}]}}},
             "blocks": {"x": {"instructions": [{"block": "x", "when": {"property": "on", "exists": true}}]}}}
            """#)
        #expect(configErrorField { _ = try resolve(latent, [:]) }?.message == "block cycle: x → x")
        // session/create catches it too (validation used to follow only nested `blocks`).
        #expect(latent.validate().map(\.path) == ["blocks.x"])
        #expect(ProfileResolver.blockCycle(in: latent.blocks ?? [:]) == ["x", "x"])
        #expect(ProfileResolver.blockCycle(in: try config(threeModes).blocks ?? [:]) == nil)
    }

    // MARK: Errors

    @Test func unknownNamesAreErrorsThatSayWhere() throws {
        let unknownTool = try config(#"{"tools": [{"name": "a"}], "profiles": {"cases": {"p": {"tools": ["a", "nope"]}}}}"#)
        let tool = configErrorField { _ = try resolve(unknownTool, [:]) }
        #expect(tool?.field == "profiles.cases.p.tools[1]")
        #expect(tool?.message.contains("'nope'") == true)

        let inBlock = try config(#"""
            {"profiles": {"cases": {"p": {"instructions": [{"block": "b", "when": {"property": "x", "exists": true}}]}}},
             "blocks": {"b": {"tools": ["ghost"]}}}
            """#)
        #expect(try resolve(inBlock, [:]).tools.isEmpty, "a block left out does not check its tools")
        #expect(configErrorField { _ = try resolve(inBlock, ["x": 1]) }?.field == "blocks.b.tools[0]")

        let unknownBlock = try config(#"{"profiles": {"cases": {"p": {"instructions": ["a", {"block": "missing"}]}}}}"#)
        let block = configErrorField { _ = try resolve(unknownBlock, [:]) }
        #expect(block?.field == "profiles.cases.p.instructions[1].block")
        #expect(block?.message.contains("'missing'") == true)

        let handoff = try config(#"{"profiles": {"cases": {"p": {"tools": [{"handoff": "elsewhere"}]}}}}"#)
        #expect(configErrorField { _ = try resolve(handoff, [:]) }?.field == "profiles.cases.p.tools[0].handoff")
        let consult = try config(#"{"profiles": {"cases": {"p": {"tools": [{"consult": "elsewhere"}]}}}}"#)
        #expect(configErrorField { _ = try resolve(consult, [:]) }?.field == "profiles.cases.p.tools[0].consult")

        let empty = try config(#"{"profiles": {"cases": {}}}"#)
        #expect(configErrorField { _ = try resolve(empty, [:]) }?.field == "profiles.cases")
    }

    // MARK: Tools

    @Test func toolsAreDeduplicatedByNameFirstWins() throws {
        let c = try config(#"""
            {"tools": [{"name": "a"}, {"name": "b"}],
             "profiles": {"cases": {"p": {
               "tools": ["a", {"handoff": "q", "name": "a"}, {"skills": [{"name": "s1", "prompt": "x"}]}, "b", "a",
                         {"skills": [{"name": "s2", "instructions": "two"}, {"name": "s1", "instructions": "shadowed"}]}],
               "instructions": [{"block": "k"}]},
               "q": {}}},
             "blocks": {"k": {"tools": ["b", {"skills": [{"name": "s3", "prompt": "three"}]}]}}}
            """#)
        let p = try resolve(c, [:], skills: ["s1", "s2"])
        #expect(p.tools.map(\.name) == ["a", "activate_skill", "b"])
        #expect(p.tools[1] == .activateSkill(skills: [
            Skill(name: "s1", prompt: "x"), Skill(name: "s2", instructions: "two"), Skill(name: "s3", prompt: "three"),
        ]))
        // s1 is the prompt skill declared first; the later s1 with instructions is shadowed.
        #expect(p.instructions == "two")
        #expect(p.tool(named: "b") == .client(ToolSpec(name: "b")))
        #expect(p.tool(named: "zzz") == nil)
        #expect(p.skills.map(\.name) == ["s1", "s2", "s3"])
        #expect(try resolve(c, ["x": 1]).skills.count == 3)
        #expect(try resolve(try config(threeModes), ["mode": "planning"]).skills.isEmpty)
    }

    @Test func builtInToolDefinitions() throws {
        let handoff = ResolvedTool.handoff(target: "planning", name: "pass_baton", description: "Go.").modelDefinition
        #expect(handoff.name == "pass_baton")
        #expect(handoff.description == "Go.")
        #expect(handoff.inputSchema == [
            "type": "object", "properties": ["reason": ["type": "string", "description": "Why the conversation is handed over (optional)."]],
            "additionalProperties": false,
        ])
        let consult = ResolvedTool.consult(profile: "titles", name: "consult_titles", description: "Ask.").modelDefinition
        #expect(consult.inputSchema["required"] == ["question"])
        #expect(consult.inputSchema["properties"]?["question"]?["type"] == "string")

        let skills = ResolvedTool.activateSkill(skills: [Skill(name: "a", description: "Alpha", prompt: "p"), Skill(name: "b", instructions: "i")])
        let def = skills.modelDefinition
        #expect(def.name == "activate_skill")
        #expect(def.inputSchema["properties"]?["name"]?["enum"] == ["a", "b"])
        #expect(def.inputSchema["required"] == ["name"])
        #expect(def.description.hasSuffix("- a: Alpha\n- b"))

        // A client tool without a schema takes any object; `final` rides on the spec.
        let client = ResolvedTool.client(ToolSpec(name: "done", description: "Finish.", final: true))
        #expect(client.modelDefinition == ModelToolDefinition(name: "done", description: "Finish.", inputSchema: ["type": "object", "properties": [:]]))
        #expect(client.clientSpec?.final == true)
        #expect(skills.clientSpec == nil)

        let p = try resolve(try config(threeModes), ["mode": "planning"])
        #expect(p.modelToolDefinitions.map(\.name) == ["write_plan", "consult_reviewing", "handoff_to_reviewing"])
    }

    // MARK: Conditions

    @Test func propertyConditions() {
        func check(_ json: String, _ properties: [String: JSONValue], tool: String? = nil) throws -> Bool {
            ProfileResolver.condition(try JSONValue.parse(json).decode(as: Condition.self), properties: properties, toolName: tool)
        }
        let props: [String: JSONValue] = [
            "n": 1, "d": 1.5, "s": "hello world", "list": [1, "two", ["x": 1]], "null": nil, "flag": false,
            "obj": ["a": 1],
        ]
        let cases: [(String, Bool)] = [
            (#"{"property": "n", "equals": 1.0}"#, true),
            (#"{"property": "n", "equals": 2}"#, false),
            (#"{"property": "n", "equals": "1"}"#, false),
            (#"{"property": "obj", "equals": {"a": 1.0}}"#, true),
            (#"{"property": "null", "equals": null}"#, true),
            (#"{"property": "missing", "equals": null}"#, true),
            (#"{"property": "n", "equals": null}"#, false),
            (#"{"property": "s", "contains": "lo wo"}"#, true),
            (#"{"property": "s", "contains": "bye"}"#, false),
            (#"{"property": "s", "contains": ""}"#, true),
            (#"{"property": "s", "contains": 1}"#, false),
            (#"{"property": "list", "contains": 1.0}"#, true),
            (#"{"property": "list", "contains": "two"}"#, true),
            (#"{"property": "list", "contains": {"x": 1}}"#, true),
            (#"{"property": "list", "contains": "tw"}"#, false),
            (#"{"property": "n", "contains": 1}"#, false),
            (#"{"property": "missing", "contains": "x"}"#, false),
            (#"{"property": "n", "exists": true}"#, true),
            (#"{"property": "null", "exists": true}"#, false),
            (#"{"property": "null", "exists": false}"#, true),
            (#"{"property": "missing", "exists": false}"#, true),
            (#"{"property": "flag", "exists": true}"#, true),
            (#"{"property": "flag"}"#, true),
            (#"{"property": "null"}"#, false),
            (#"{"property": "missing"}"#, false),
            (#"{"property": "n", "exists": true, "equals": 2}"#, false),
            (#"{"not": {"property": "missing"}}"#, true),
            (#"{"all": [{"property": "n"}, {"property": "s", "contains": "hello"}]}"#, true),
            (#"{"all": [{"property": "n"}, {"property": "missing"}]}"#, false),
            (#"{"any": [{"property": "missing"}, {"property": "d", "equals": 1.5}]}"#, true),
            (#"{"any": [{"property": "missing"}, {"property": "null"}]}"#, false),
            (#"{"all": []}"#, true),
            (#"{"any": []}"#, false),
            (#"{"tool": "save"}"#, false),
        ]
        for (json, expected) in cases {
            #expect((try? check(json, props)) == expected, "\(json)")
        }
        #expect((try? check(#"{"tool": "save"}"#, [:], tool: "save")) == true)
        #expect((try? check(#"{"tool": "save"}"#, [:], tool: "load")) == false)
        #expect((try? check(#"{"all": [{"tool": "save"}, {"property": "n"}]}"#, props, tool: "save")) == true)
    }

    @Test func toolConditionsAreFalseInInstructions() throws {
        let c = try config(#"""
            {"profiles": {"cases": {"a": {"instructions": [{"text": "never", "when": {"tool": "x"}}, {"text": "always", "when": {"not": {"tool": "x"}}}]}}}}
            """#)
        #expect(try resolve(c, [:]).instructions == "always")
    }

    // MARK: Templates

    @Test func templateRendering() {
        let props: [String: JSONValue] = ["s": "text", "n": 2, "b": true, "o": ["z": 1, "a": [1, 2]], "null": nil, "d": 0.5]
        #expect(ProfileResolver.renderLine("plain", properties: props) == "plain")
        #expect(ProfileResolver.renderLine("{{s}} and {{ n }} and {{b}}", properties: props) == "text and 2 and true")
        #expect(ProfileResolver.renderLine("o={{o}} d={{d}}", properties: props) == #"o={"a":[1,2],"z":1} d=0.5"#)
        #expect(ProfileResolver.renderLine("x {{missing}} y", properties: props) == nil)
        #expect(ProfileResolver.renderLine("{{s}} then {{null}}", properties: props) == nil)
        #expect(ProfileResolver.renderLine("empty {{}} stays", properties: props) == "empty {{}} stays")
        #expect(ProfileResolver.renderLine("open {{s and more", properties: props) == "open {{s and more")
        #expect(ProfileResolver.renderLine("{{s}}}", properties: props) == "text}")
        // A value that looks like a template is not expanded again.
        #expect(ProfileResolver.renderLine("{{t}}", properties: ["t": "{{s}}"]) == "{{s}}")
    }

    @Test func linesOfOneItemAreJudgedSeparately() throws {
        let c = try config(#"""
            {"profiles": {"cases": {"a": {"instructions": ["one\r\n{{gone}}\n\nthree {{here}}", {"text": "{{gone}}", "when": {"all": []}}, "last"]}}}}
            """#)
        // Blank lines are kept, CRLF becomes LF, each templated line stands alone.
        #expect(try resolve(c, ["here": "!"]).instructions == "one\n\nthree !\nlast")
    }
}

/// `ResolvedProfile` keeps its fields in one box its copies share: a copy
/// written to gets a box of its own, and the one it came from is unchanged.
@Suite struct ResolvedProfileCopyTests {
    @Test func aCopyWrittenToLeavesTheOriginalAsItWas() throws {
        let original = try resolve(try config(threeModes), ["mode": "planning"])
        var copy = original
        #expect(copy == original)
        copy.name = "changed"
        copy.tools = []
        copy.instructions += " more"
        #expect(original.name == "planning")
        #expect(!original.tools.isEmpty)
        #expect(!original.instructions.hasSuffix(" more"))
        #expect(copy != original)
        #expect(copy.name == "changed" && copy.tools.isEmpty && copy.instructions.hasSuffix(" more"))

        var same = original
        same.name = original.name
        #expect(same == original, "equal fields in another box are equal")
        let readOnly = original.onlyReading
        #expect(original.tools.count >= readOnly.tools.count)
        #expect(try resolve(try config(threeModes), ["mode": "planning"]).tools == original.tools)
    }
}

