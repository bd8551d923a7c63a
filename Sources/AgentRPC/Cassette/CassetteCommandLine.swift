import AgentRPCProtocol

/// The model cassette options of `serve`, `chat` and `acp`
/// (`--model-cassette FILE --cassette-mode MODE --cassette-pace PACE`), read
/// the same way by each.
package struct CassetteCommandLine: Sendable, Equatable {
    package static let options: Set<String> = ["--model-cassette", "--cassette-mode", "--cassette-pace"]
    package static let usage = "[--model-cassette FILE [--cassette-mode record|replay|auto] [--cassette-pace fast|recorded]]"

    package var path: String?
    package var mode: CassetteMode?
    package var pace: CassettePace?

    package init() {}

    /// Takes one of `options` and its value; a message for the person when the value is wrong.
    package mutating func take(_ name: String, _ value: String) -> String? {
        switch name {
        case "--model-cassette":
            guard !value.isEmpty else { return "--model-cassette needs a file" }
            path = value
        case "--cassette-mode":
            guard let m = CassetteMode(rawValue: value) else { return "--cassette-mode is record, replay or auto" }
            mode = m
        case "--cassette-pace":
            guard let p = CassettePace(rawValue: value) else { return "--cassette-pace is fast or recorded" }
            pace = p
        default:
            return "unknown option \(name)"
        }
        return nil
    }

    /// The configuration the options give; a message when a mode or pace came without a file.
    package func config() -> Result<ModelCassetteConfig?, CassetteUsageError> {
        guard let path else {
            if mode != nil || pace != nil { return .failure(CassetteUsageError(message: "--cassette-mode and --cassette-pace need --model-cassette FILE")) }
            return .success(nil)
        }
        return .success(ModelCassetteConfig(path: path, mode: mode, pace: pace))
    }

    /// The same options, for a server started as a child (`chat`).
    package var serverArguments: [String] {
        guard let path else { return [] }
        return ["--model-cassette", path] + (mode.map { ["--cassette-mode", $0.rawValue] } ?? []) + (pace.map { ["--cassette-pace", $0.rawValue] } ?? [])
    }
}

/// A model cassette option that cannot work.
package struct CassetteUsageError: Error, Sendable, Equatable {
    package var message: String
}
