/// The options of a subcommand's command line, split the one way every
/// subcommand reads them: `--name value`, `--name=value`, or a flag alone.
package enum CommandLineOptions {
    /// `arguments` as (name, value) pairs, in order. A name in `flags` takes no
    /// value: `--flag=value` is refused, not read as the flag (so
    /// `--ephemeral=false` cannot turn the store off); a name in `valued` takes
    /// what follows `=` or the next argument. Anything else is a message for
    /// the person.
    package static func scan(
        _ arguments: [String], flags: Set<String> = [], valued: Set<String>
    ) -> Result<[(name: String, value: String?)], Problem> {
        scan(arguments, flags: flags, valued: valued, rules: Rules(positionals: false, endingFlags: []))
            .map(\.options)
    }

    /// The options and, apart, the positional arguments (every argument that
    /// does not start with `--`: `-x` too, as a session id may start with `-`),
    /// for subcommands that take both (`serve`, `schema`, `sessions`).
    /// `endingFlags`: a flag among these ends the scan where it stands, the
    /// arguments after it unread (`sessions --help` shows the usage whatever follows).
    package static func scanWithPositionals(
        _ arguments: [String], flags: Set<String> = [], valued: Set<String>, endingFlags: Set<String> = []
    ) -> Result<Scanned, Problem> {
        scan(arguments, flags: flags, valued: valued, rules: Rules(positionals: true, endingFlags: endingFlags))
    }

    /// What a command line holds: its options in order, and its positional arguments in order.
    package struct Scanned {
        package var options: [(name: String, value: String?)] = []
        package var positionals: [String] = []

        /// The last value given for each valued option (a later one wins).
        package var values: [String: String] {
            var out: [String: String] = [:]
            for (name, value) in options { if let value { out[name] = value } }
            return out
        }

        /// The flags given.
        package var flags: Set<String> { Set(options.filter { $0.value == nil }.map(\.name)) }
    }

    /// Why a command line was refused.
    package struct Problem: Error {
        package var message: String
    }

    private struct Rules {
        var positionals: Bool
        var endingFlags: Set<String>
    }

    private static func scan(_ arguments: [String], flags: Set<String>, valued: Set<String>, rules: Rules) -> Result<Scanned, Problem> {
        var out = Scanned()
        var i = 0
        while i < arguments.count {
            var name = arguments[i]
            i += 1
            if rules.positionals && !name.hasPrefix("--") {
                out.positionals.append(name)
                continue
            }
            var value: String?
            if name.hasPrefix("--"), let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if flags.contains(name) {
                // `serve` and `sessions` once read `--flag=value` as the flag, whatever the value.
                guard value == nil else { return .failure(Problem(message: "option \(name) takes no value")) }
                out.options.append((name, nil))
                if rules.endingFlags.contains(name) { break }
                continue
            }
            guard valued.contains(name) else {
                return .failure(Problem(message: name.hasPrefix("-") ? "unknown option \(name)" : "unexpected argument '\(name)'"))
            }
            if value == nil {
                guard i < arguments.count else { return .failure(Problem(message: "option \(name) needs a value")) }
                value = arguments[i]
                i += 1
            }
            out.options.append((name, value))
        }
        return .success(out)
    }
}
