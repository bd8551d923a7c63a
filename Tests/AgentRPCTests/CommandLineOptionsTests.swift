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
        #expect(scan(["--flag=yes"]) == ["problem: unknown option --flag"])
        #expect(scan(["stray"]) == ["problem: unexpected argument 'stray'"])
    }
}
