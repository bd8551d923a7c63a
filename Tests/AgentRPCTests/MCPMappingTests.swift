import AgentRPCProtocol
import Foundation
import Testing

@testable import AgentRPC

/// The pure parts of the MCP client: tool names, result mapping, cutting, stored configs.
struct MCPMappingTests {
    @Test func namesArePrefixedAndLongOrOddNamesGetAStableHashSuffix() {
        #expect(MCPServerSet.exposedName(server: "kit", tool: "echo") == "mcp__kit__echo")
        let long = MCPServerSet.exposedName(server: "kit", tool: String(repeating: "a", count: 80))
        #expect(long.count == 64)
        #expect(long == MCPServerSet.exposedName(server: "kit", tool: String(repeating: "a", count: 80)))
        #expect(long != MCPServerSet.exposedName(server: "kit", tool: String(repeating: "a", count: 79)))
        let dotted = MCPServerSet.exposedName(server: "kit", tool: "files.read")
        #expect(dotted.hasPrefix("mcp__kit__files_read_") && dotted.count == "mcp__kit__files_read_".count + 8)
        #expect(dotted != MCPServerSet.exposedName(server: "kit", tool: "files_read"))
    }

    @Test func hintsAreReadWithTheSpecificationsDefaultsAndDecideWhoAsks() {
        func spec(readOnly: Bool?, destructive: Bool?, confirm: MCPConfirmPolicy = .hints) -> ToolSpec {
            MCPServerSet.toolSpec(
                MCPTool(name: "t", inputSchema: ["type": "object"], readOnlyHint: readOnly, destructiveHint: destructive),
                exposedName: "mcp__s__t", confirm: confirm)
        }
        // No hints: not read-only, destructive (the MCP defaults).
        #expect(spec(readOnly: nil, destructive: nil).annotations == ToolAnnotations(readOnly: false, destructive: true, idempotent: false))
        #expect(MCPServerSet.asksByHints(spec(readOnly: nil, destructive: nil).annotations))
        #expect(MCPServerSet.asksByHints(spec(readOnly: false, destructive: true).annotations))
        // Read-only is never destructive, whatever destructiveHint says.
        #expect(spec(readOnly: true, destructive: true).annotations == ToolAnnotations(readOnly: true, destructive: false, idempotent: false))
        #expect(!MCPServerSet.asksByHints(spec(readOnly: true, destructive: nil).annotations))
        #expect(!MCPServerSet.asksByHints(spec(readOnly: nil, destructive: false).annotations))
        // Under hints the confirmation is left to the verdict (an allow guard may lift it).
        #expect(spec(readOnly: nil, destructive: nil).confirmation == nil)
        #expect(spec(readOnly: true, destructive: nil, confirm: .always).confirmation == .always)
        #expect(spec(readOnly: nil, destructive: nil, confirm: .never).confirmation == .never)
    }

    @Test func entriesOfOtherClientsDecodeWithTheirUnknownKeysSetAside() throws {
        let entry = try JSONValue.object([
            "name": "c", "url": "http://x/mcp", "disabled": true, "autoApprove": ["a"], "alwaysAllow": ["b"], "timeout": 60, "envFile": ".env",
        ]).decode(as: MCPServerEntry.self, rejectUnknownKeys: true)
        guard case .inline(let spec) = entry else {
            Issue.record("not inline")
            return
        }
        #expect(spec.transport == .http && spec.isDisabled && spec.approvedTools == ["a", "b"])
        #expect(spec.ignoredKeys == ["envFile", "timeout"])
        #expect(MCPServerSpec(name: "s", type: .streamableHTTP, url: "http://x").transport == .http)
        #expect(MCPServerSpec(name: "s", command: "x").transport == .stdio)
        var codex = MCPServerSpec(name: "s", command: "x")
        codex.enabled = false
        #expect(codex.isDisabled)
        // A wrong value of a known key still fails, naming it.
        #expect(throws: JSONDecodingFailure.self) {
            try JSONValue.object(["name": "c", "command": "x", "disabled": "yes"]).decode(as: MCPServerEntry.self, rejectUnknownKeys: true)
        }
        // The set-aside keys are not stored with the session.
        #expect(try !JSONValueEncoder().encode(spec).serializedString().contains("timeout"))
    }

    @Test func resultsMapToOutcomesAndContent() {
        let text = MCPToolOutput.outcome(of: ["content": [["type": "text", "text": "a"], ["type": "text", "text": "b"]]])
        #expect(text.0 == .ok && text.1 == "a\nb")
        let error = MCPToolOutput.outcome(of: ["content": [["type": "text", "text": "bad"]], "isError": true])
        #expect(error.0 == .failed && error.1 == "bad")
        let structured = MCPToolOutput.outcome(of: ["content": [["type": "text", "text": "{\"t\": 1}"]], "structuredContent": ["t": 1]])
        #expect(structured.1 == ["t": 1])
        let mixed = MCPToolOutput.outcome(of: ["content": [
            ["type": "image", "mimeType": "image/png", "data": "QUJD"],
            ["type": "resource", "resource": ["uri": "file:///a", "blob": "QUJDRA=="]],
            ["type": "resource_link", "uri": "file:///b", "name": "b", "extra": "dropped"],
        ]])
        // The image stays whole for the tool stage, which leaves its note in its place (ToolMediaTests).
        #expect(mixed.1.arrayValue?.first == ["type": "image", "mimeType": "image/png", "data": "QUJD"])
        #expect(ToolMedia.split(mixed.1).content == [
            ["type": "image", "mimeType": "image/png", "note": "4 bytes of base64 image data not shown"],
            ["type": "resource", "resource": ["uri": "file:///a", "blob": "8 bytes of base64 data not shown"]],
            ["type": "resource_link", "uri": "file:///b", "name": "b"],
        ])
    }

    @Test func outputOverTheLimitIsCutWithANote() {
        let cut = MCPToolOutput.cut(.string(String(repeating: "é", count: 10)), limit: 5)
        #expect(cut.stringValue?.hasSuffix("[output cut: 5 of 20 bytes shown]") == true)
        #expect(MCPToolOutput.cut("short", limit: 5) == "short")
    }

    @Test func literalEnvAndHeaderValuesAreNotStoredButReferencesAre() throws {
        let config = SessionConfig(mcpServers: [.inline(MCPServerSpec(
            name: "gh", command: "gh-mcp", env: ["TOKEN": "ghp_secret", "HOME_DIR": "${HOME}"]))])
        let (stored, dropped) = try config.forStorage()
        #expect(dropped == ["mcpServers[0].env.TOKEN"])
        #expect(stored["mcpServers"]?.arrayValue?.first?["env"] == ["HOME_DIR": "${HOME}"])
        #expect(!stored.serializedString().contains("ghp_secret"))
        #expect(MCPSecrets.expand("Bearer ${T}", environment: ["T": "x"]) == "Bearer x")
    }

    @Test func configProblemsNameTheClashAndBadSpecs() {
        let clash = SessionConfig(tools: [ToolSpec(name: "mcp__kit__echo")], mcpServers: [.named("kit")]).validate()
        #expect(clash.contains { $0.path == "tools[0].name" && $0.message.contains("mcp__kit__echo") && $0.message.contains("'kit'") })
        let bad = SessionConfig(mcpServers: [.inline(MCPServerSpec(name: "a__b")), .inline(MCPServerSpec(name: "h", type: .http, url: "ftp://x"))]).validate()
        #expect(bad.map(\.path).sorted() == ["mcpServers[0].command", "mcpServers[0].name", "mcpServers[1].url"])
        let headers = SessionConfig(mcpServers: [.inline(MCPServerSpec(
            name: "h", type: .http, url: "https://x/mcp", headers: ["Bad Name": "v", "X-Split": "a\r\nInjected: 1", "Authorization": "Bearer ${T}"]))]).validate()
        #expect(headers.map(\.path).sorted() == ["mcpServers[0].headers.Bad Name", "mcpServers[0].headers.X-Split"])
    }
}
