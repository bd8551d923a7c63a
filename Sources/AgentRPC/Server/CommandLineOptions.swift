/// The options of a subcommand's command line, split the one way every
/// subcommand reads them: `--name value`, `--name=value`, or a flag alone.
package enum CommandLineOptions {
    /// `arguments` as (name, value) pairs, in order. A name in `flags` takes no
    /// value (given one, it is unknown); a name in `valued` takes what follows
    /// `=` or the next argument. Anything else is a message for the person.
    package static func scan(
        _ arguments: [String], flags: Set<String> = [], valued: Set<String>
    ) -> Result<[(name: String, value: String?)], Problem> {
        var out: [(name: String, value: String?)] = []
        var i = 0
        while i < arguments.count {
            var name = arguments[i]
            var value: String?
            if name.hasPrefix("--"), let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            i += 1
            if flags.contains(name) && value == nil {
                out.append((name, nil))
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
            out.append((name, value))
        }
        return .success(out)
    }

    /// Why a command line was refused.
    package struct Problem: Error {
        package var message: String
    }
}
