import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC
@testable import AgentTools

/// The parts of `agentrpc chat` that need no terminal: arguments, the model
/// choice, the session it creates, its tools and how it words things. The
/// terminal behaviour is tested through a pty in clients/python/tests/test_chat.py.
@Suite struct ChatTests {
    // MARK: Arguments

    @Test func parsesOptionsInBothSpellings() throws {
        let options = try ChatCommand.parse(["--model", "gpt", "--config=conf.json", "--session", "s.json"]).get()
        #expect(options == ChatCommand.Options(model: "gpt", configPath: "conf.json", sessionPath: "s.json"))
    }

    @Test(arguments: [["--model"], ["--verbose"], ["extra"]])
    func refusesBadArguments(_ arguments: [String]) {
        guard case .failure(let error) = ChatCommand.parse(arguments) else {
            Issue.record("\(arguments) was accepted")
            return
        }
        #expect(!error.message.isEmpty)
    }

    @Test func resumeTakesAnIdOnlyWhenOneFollows() throws {
        #expect(try ChatCommand.parse(["--resume"]).get().resume == "")
        #expect(try ChatCommand.parse(["--resume", "s-1"]).get().resume == "s-1")
        #expect(try ChatCommand.parse(["--resume=s-2"]).get().resume == "s-2")
        let listed = try ChatCommand.parse(["--resume", "--store", "dir"]).get()
        #expect(listed.resume == "" && listed.storePath == "dir")
        for clash in [["--resume", "s-1", "--local"], ["--model", "m", "--resume"], ["--resume", "--session", "s.json"]] {
            guard case .failure(let error) = ChatCommand.parse(clash) else {
                Issue.record("\(clash) was accepted")
                continue
            }
            #expect(error.message.contains("--resume continues a stored conversation"))
        }
    }

    // MARK: Model choice

    private func withConfig(_ json: String, _ body: (String) throws -> Void) throws {
        let path = NSTemporaryDirectory() + "chat-config-\(UUID().uuidString).json"
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        try body(path)
    }

    private let twoModels = #"{"models": {"a": {"provider": "scripted"}, "b": {"provider": "scripted"}}, "defaultModel": "b"}"#

    @Test func modelOptionWinsOverTheDefault() throws {
        try withConfig(twoModels) { path in
            let choice = try ChatCommand.chooseModel(options: .init(model: "a", configPath: path), session: SessionConfig(), environment: [:])
            #expect(choice.reference == .named("a"))
            #expect(!choice.isDemo)
            #expect(choice.banner.contains("not a language model"))
        }
    }

    @Test func configDefaultModelIsUsedWithoutAnOption() throws {
        try withConfig(twoModels) { path in
            let choice = try ChatCommand.chooseModel(options: .init(configPath: path), session: SessionConfig(), environment: [:])
            #expect(choice.reference == .named("b"))
        }
    }

    @Test func unknownModelIsAnError() throws {
        try withConfig(twoModels) { path in
            #expect(throws: RPCError.self) {
                try ChatCommand.chooseModel(options: .init(model: "zzz", configPath: path), session: SessionConfig(), environment: [:])
            }
        }
    }

    @Test func noModelAnywhereMeansTheAnnouncedDemo() throws {
        try withConfig(#"{"models": {"a": {"provider": "scripted"}}}"#) { path in
            let choice = try ChatCommand.chooseModel(options: .init(configPath: path), session: SessionConfig(), environment: [:])
            #expect(choice.isDemo)
            #expect(choice.reference == .inline(ChatDemoScript.model))
            #expect(choice.banner.contains("No model configured"))
            #expect(choice.banner.contains("not a language model"))
        }
    }

    @Test func anAPIKeyInTheEnvironmentIsAModelNotTheDemo() throws {
        try withConfig(#"{"models": {}}"#) { path in
            let choice = try ChatCommand.chooseModel(
                options: .init(configPath: path), session: SessionConfig(), environment: ["ANTHROPIC_API_KEY": "k"])
            #expect(!choice.isDemo)
            #expect(choice.reference == .named("anthropic"))
            #expect(choice.banner.contains("from the environment"))
        }
    }

    // MARK: Session

    @Test func sessionGetsTheToolsAndModelButKeepsItsOwn() {
        let base = SessionConfig(instructions: "Be brief.", tools: [ToolSpec(name: "list_notes", description: "mine")])
        let config = ChatCommand.sessionConfig(base: base, model: "m")
        #expect(config.model == "m")
        #expect(config.instructions == "Be brief.")
        #expect(config.tools?.map(\.name) == ["list_notes", "current_time", "write_note"])
        #expect(config.tools?.first?.description == "mine")
        #expect(config.store == true)
        #expect(config.tools?.first { $0.name == "write_note" }?.confirmation == .always)
    }

    @Test func meterShowsWhatIsKnown() {
        #expect(ChatFormatting.meter(contextTokens: 1500, window: 4000, costUSD: 0.0039) == "(context: 1,500 of 4,000 tokens (38%) · cost so far: $0.0039)")
        #expect(ChatFormatting.meter(contextTokens: 1_234_567, window: nil, costUSD: 12.5) == "(context: 1,234,567 tokens · cost so far: $12.50)")
        #expect(ChatFormatting.meter(contextTokens: nil, window: 4000, costUSD: nil) == nil)
        // A reading far past the window is shown, not a trap.
        #expect(ChatFormatting.meter(contextTokens: Int.max, window: 1, costUSD: nil)?.hasSuffix("(999999%))") == true)
        #expect(ChatFormatting.compaction(entriesRemoved: 1, tokensBefore: 3900, tokensAfter: 800) == "1 entry summarized, context about 3,900 → 800 tokens")
    }

    @Test func demoScriptUsesOnlyTheChatsTools() {
        let offered = Set(ChatToolbox.specs.map(\.name))
        let called = ChatDemoScript.items.flatMap { $0.toolCalls ?? [] }.map(\.name)
        #expect(called == [ChatToolbox.currentTime, ChatToolbox.writeNote])
        #expect(called.allSatisfy(offered.contains))
    }

    // MARK: Tools

    @Test func writeNoteReturnsAnUndoTokenThatRemovesIt() {
        var toolbox = ChatToolbox()
        let result = toolbox.call(name: "write_note", arguments: ["text": "milk"], callId: "c1")
        #expect(result.outcome == .ok)
        #expect(toolbox.notes.map(\.text) == ["milk"])
        let listed = toolbox.call(name: "list_notes", arguments: [:], callId: "c2")
        #expect(listed.content == [["id": 1, "text": "milk"]])
        guard let token = result.undo else {
            Issue.record("write_note returned no undo token")
            return
        }
        #expect(toolbox.undo(name: "write_note", token: token)?.text == "milk")
        #expect(toolbox.notes.isEmpty)
        #expect(toolbox.undo(name: "write_note", token: token) == nil)
    }

    @Test func rewindingATurnRemovesOnlyItsNotes() {
        var toolbox = ChatToolbox()
        _ = toolbox.call(name: "write_note", arguments: ["text": "kept"], callId: "old")
        _ = toolbox.call(name: "write_note", arguments: ["text": "gone"], callId: "new")
        #expect(toolbox.removeNotes(writtenBy: ["new"]).map(\.text) == ["gone"])
        #expect(toolbox.notes.map(\.text) == ["kept"])
    }

    @Test func currentTimeReportsTheClock() {
        var toolbox = ChatToolbox()
        toolbox.now = { Date(timeIntervalSince1970: 0) }
        let result = toolbox.call(name: "current_time", arguments: [:], callId: "c")
        #expect(result.outcome == .ok)
        #expect(result.content["utc"] == "1970-01-01T00:00:00Z")
    }

    /// current_time's text is what ISO8601DateFormatter wrote, in UTC and (the test's
    /// time zone as the C library and Foundation both read it) locally.
    @Test func currentTimeIsFormattedAsISO8601DateFormatterDid() {
        let utc = ISO8601DateFormatter()
        let local = ISO8601DateFormatter()
        local.timeZone = TimeZone.current
        for seconds in [0, 1, 59, 951_782_400, 1_790_000_000.7, -1, -86_400.5, 4_102_444_799, -2_208_988_800] as [Double] {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(LocalTime.iso8601(LocalTime.seconds(of: date), local: false) == utc.string(from: date), "\(seconds)")
            #expect(LocalTime.iso8601(LocalTime.seconds(of: date), local: true) == local.string(from: date), "\(seconds)")
        }
        #expect(LocalTime.seconds(of: Date(timeIntervalSince1970: .infinity)) == 0)
        #expect(LocalTime.seconds(of: Date(timeIntervalSince1970: 1e300)) == 1_000_000_000_000_000)
    }

    @Test func theZoneIsNamedFromTZOrTheLocaltimeLink() {
        #expect(LocalTime.zoneIdentifier(environment: "Europe/Paris") == "Europe/Paris")
        #expect(LocalTime.zoneIdentifier(environment: ":Asia/Kolkata") == "Asia/Kolkata")
        #expect(LocalTime.zoneIdentifier(environment: "/usr/share/zoneinfo/America/New_York") == "America/New_York")
        #expect(LocalTime.zoneIdentifier(environment: "EST5EDT") == "EST5EDT")
        #expect(LocalTime.zoneIdentifier(environment: "") == "UTC")
        #expect(LocalTime.zoneIdentifier(environment: ":") == "UTC")
        // Without TZ: the link's name, as Foundation read it (the test runs without TZ).
        if getenv("TZ") == nil {
            #expect(LocalTime.zoneIdentifier(environment: nil) == TimeZone.current.identifier)
        }
    }

    @Test func badOrUnknownCallsFailAsValues() {
        var toolbox = ChatToolbox()
        #expect(toolbox.call(name: "write_note", arguments: ["text": ""], callId: "c").outcome == .failed)
        #expect(toolbox.call(name: "rm_rf", arguments: [:], callId: "c").outcome == .failed)
        #expect(toolbox.notes.isEmpty)
    }

    // MARK: Wording

    @Test func confirmationQuestionShowsTheCallAsSent() {
        #expect(ChatFormatting.confirmationQuestion("write_note", ["text": "hi"], reason: nil) == #"Allow write_note({"text":"hi"})? [y/N] "#)
        #expect(ChatFormatting.isApproval(" Yes "))
        #expect(!ChatFormatting.isApproval(""))
        #expect(!ChatFormatting.isApproval("yep"))
    }

    @Test func providerErrorsShowKindCodeAndDescription() {
        let provider: JSONValue = [
            "code": "quotaExceeded", "safeDescription": "You are out of quota.", "requiresUserAction": false,
            "retryGuidance": ["kind": "retryWithBackoff", "afterSeconds": 1],
        ]
        let error = RPCError(.providerError, "the provider failed", data: ["provider": provider])
        let text = ChatFormatting.error(error)
        #expect(text.hasPrefix("error [providerError]: the provider failed"))
        #expect(text.contains("provider code quotaExceeded"))
        #expect(text.contains("You are out of quota."))
    }

    @Test func entriesAreOneShortLine() {
        let long = String(repeating: "word ", count: 100)
        let line = ChatFormatting.entry(TranscriptEntry(id: "e1", .prompt(text: "two\nlines " + long, images: nil)))
        #expect(line.hasPrefix("e1 prompt: two ⏎ lines word"))
        #expect(!line.contains("\n"))
        #expect(line.hasSuffix("…"))
        let output = ChatFormatting.entry(TranscriptEntry(id: "e4", .toolOutput(callId: "c", name: "t", outcome: .denied, content: "no", profile: nil)))
        #expect(output == "e4 toolOutput: t denied: no")
    }

    @Test func summaryTellsReportedUsageFromNone() {
        #expect(ChatFormatting.turnSummary(usage: nil, roundTrips: 1, toolCalls: 0) == "(usage: not reported by the provider · 1 round trip)")
        let usage = Usage(inputTokens: 10, outputTokens: 2, cachedInputTokens: 4)
        #expect(ChatFormatting.turnSummary(usage: usage, roundTrips: 2, toolCalls: 1) == "(usage: 10 in, 2 out, 4 cached tokens · 2 round trips · 1 tool call)")
    }

    // MARK: Output

    @Test func statusLinesNeverGlueToStreamedText() {
        var written = ""
        let out = ChatTerminalOutput(styled: false) { written += $0 }
        out.stream("thinking", as: .reasoning)
        out.stream("Hel", as: .text)
        out.stream("lo", as: .text)
        out.line("→ tool()")
        out.ask("you> ")
        out.line("after")
        #expect(written == "[reasoning] thinking\nHello\n→ tool()\nyou> \nafter\n")
    }
}
