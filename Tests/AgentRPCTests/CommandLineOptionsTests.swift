import Testing

@testable import AgentRPC

@Suite struct CommandLineOptionsTests {
    /// The pairs as `name=value` lines, or the problem's message.
    private func scan(_ arguments: [String]) -> [String] {
        switch CommandLineOptions.scan(arguments, flags: ["--flag"], valued: ["--name"]) {
        case .success(let pairs): return pairs.map { "\($0.name)=\($0.value ?? "nil")" }
        case .failure(let problem): return ["problem: " + problem.message]
        }
    }

    @Test func valuesFollowTheNameOrItsEqualsSignAndFlagsStandAlone() {
        #expect(scan(["--name", "a", "--flag", "--name=b=c", "--name="]) == ["--name=a", "--flag=nil", "--name=b=c", "--name="])
    }

    @Test func whatCannotBeReadIsNamed() {
        #expect(scan(["--name"]) == ["problem: option --name needs a value"])
        #expect(scan(["--other", "x"]) == ["problem: unknown option --other"])
        #expect(scan(["--flag=yes"]) == ["problem: option --flag takes no value"])
        #expect(scan(["--flag="]) == ["problem: option --flag takes no value"])
        #expect(scan(["stray"]) == ["problem: unexpected argument 'stray'"])
    }

    /// `scanWithPositionals` as lines: positionals, then pairs, or the problem.
    private func scanBoth(_ arguments: [String], ending: Set<String> = []) -> [String] {
        switch CommandLineOptions.scanWithPositionals(arguments, flags: ["--flag", "--help"], valued: ["--name"], endingFlags: ending) {
        case .success(let scanned): return scanned.positionals.map { "positional \($0)" } + scanned.options.map { "\($0.name)=\($0.value ?? "nil")" }
        case .failure(let problem): return ["problem: " + problem.message]
        }
    }

    @Test func everyArgumentNotStartingWithTwoDashesIsPositionalInOrder() {
        // `-x` too: a session id may start with a dash.
        #expect(scanBoth(["show", "--name", "v", "-x", "--flag", "last"])
            == ["positional show", "positional -x", "positional last", "--name=v", "--flag=nil"])
        // What follows a valued option is its value, whatever it looks like.
        #expect(scanBoth(["--name", "-x", "--name", "--flag"]) == ["--name=-x", "--name=--flag"])
    }

    @Test func optionProblemsAreTheSameWithPositionals() {
        #expect(scanBoth(["stray", "--other"]) == ["problem: unknown option --other"])
        #expect(scanBoth(["--name"]) == ["problem: option --name needs a value"])
        #expect(scanBoth(["--flag=yes"]) == ["problem: option --flag takes no value"])
    }

    @Test func anEndingFlagStopsTheScan() {
        #expect(scanBoth(["a", "--help", "--other", "b"], ending: ["--help"]) == ["positional a", "--help=nil"])
        #expect(scanBoth(["--other", "--help"], ending: ["--help"]) == ["problem: unknown option --other"])
    }

    @Test func theLastValueOfAnOptionWins() throws {
        let scanned = try CommandLineOptions.scanWithPositionals(["--name", "a", "--flag", "--name=b"], flags: ["--flag"], valued: ["--name"]).get()
        #expect(scanned.values == ["--name": "b"])
        #expect(scanned.flags == ["--flag"])
    }
}
