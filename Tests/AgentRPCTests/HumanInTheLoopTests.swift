import AgentRPCProtocol
import Foundation
import Testing

@testable import AgentRPC

@Suite struct ApprovalRuleMatcherTests {
    let rule = ApprovalRule(id: "r1", tool: "write", arguments: ["path": "src/*", "force": false])

    @Test func matchesTheToolAndEveryListedArgument() {
        #expect(ApprovalRuleMatcher.matches(rule, tool: "write", arguments: ["path": "src/a.swift", "force": false, "extra": 1]))
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "move", arguments: ["path": "src/a.swift", "force": false]))
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "write", arguments: ["path": "Package.swift", "force": false]))
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "write", arguments: ["path": "src/a.swift", "force": true]))
        // A listed argument that is missing, or not a string under a glob, never matches.
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "write", arguments: ["path": "src/a.swift"]))
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "write", arguments: ["path": 5, "force": false]))
        #expect(!ApprovalRuleMatcher.matches(rule, tool: "write", arguments: "src/a.swift"))
    }

    @Test func aRuleWithoutPatternsApprovesEveryCallOfItsTool() {
        let any = ApprovalRule(id: "r2", tool: "read")
        #expect(ApprovalRuleMatcher.matches(any, tool: "read", arguments: ["anything": [1, 2]]))
        #expect(ApprovalRuleMatcher.matches(any, tool: "read", arguments: .null))
        #expect(!ApprovalRuleMatcher.matches(any, tool: "reader", arguments: [:]))
    }

    @Test func overlongValuesNeverMatchAGlob() {
        let star = ApprovalRule(id: "r3", tool: "t", arguments: ["s": "*"])
        let long = String(repeating: "a", count: ApprovalRule.maxMatchedValueLength + 1)
        #expect(ApprovalRuleMatcher.matches(star, tool: "t", arguments: ["s": .string(String(long.dropLast()))]))
        #expect(!ApprovalRuleMatcher.matches(star, tool: "t", arguments: ["s": .string(long)]))
    }

    @Test func patternBoundsAreChecked() {
        #expect(ApprovalRuleMatcher.problem(in: nil) == nil)
        #expect(ApprovalRuleMatcher.problem(in: ["a": "x*"]) == nil)
        let long = String(repeating: "*", count: ApprovalRule.maxPatternLength + 1)
        #expect(ApprovalRuleMatcher.problem(in: ["a": .string(long)])?.path == ".a")
        var many: [String: JSONValue] = [:]
        for i in 0...ApprovalRule.maxPatternCount { many["k\(i)"] = "v" }
        #expect(ApprovalRuleMatcher.problem(in: many)?.path == "")
    }
}

@Suite struct BoundedGlobTests {
    @Test func globsMatchAsShellGlobs() {
        #expect(BoundedGlob.matches("src/*.swift", "src/a.swift", budget: 1000) == true)
        #expect(BoundedGlob.matches("a?c", "abc", budget: 1000) == true)
        #expect(BoundedGlob.matches("a?c", "ac", budget: 1000) == false)
        #expect(BoundedGlob.matches("*", "", budget: 1000) == true)
        #expect(BoundedGlob.matches("", "x", budget: 1000) == false)
    }

    @Test func aPathologicalPatternRunsOutOfBudgetInsteadOfMatching() {
        // After the star, each retry rescans the literal: |pattern|·|text| steps,
        // which the budget cuts short.
        let pattern = "*" + String(repeating: "a", count: 200) + "b"
        let text = String(repeating: "a", count: 4000)
        #expect(BoundedGlob.matches(pattern, text, budget: 10_000) == nil)
        #expect(BoundedGlob.matches("*b", "aaab", budget: 10_000) == true)
    }
}
