import AgentRPCProtocol

/// An MCP server's prompt as the slash command `/server:prompt` (the server's
/// agentrpc name, which has no spaces). Running it fetches the prompt
/// (`session/getPrompt`) with the arguments the text after the command gives,
/// and its messages are the turn's input.
struct PromptCommand: Sendable, Hashable {
    let server: String
    let prompt: String
    let summary: String
    let arguments: [Argument]

    struct Argument: Sendable, Hashable {
        var name: String
        var required: Bool
    }

    /// nil for a prompt no one could type as a command (a name with spaces, or none).
    init?(server: String, shownServer: String, prompt: JSONValue) {
        guard let name = prompt["name"]?.stringValue, !name.isEmpty, !name.contains(where: \.isWhitespace) else { return nil }
        self.server = server
        self.prompt = name
        let what = [prompt["title"]?.stringValue, prompt["description"]?.stringValue].compactMap { $0 }.filter { !$0.isEmpty }
        summary = (what.isEmpty ? "The prompt '\(name)'" : what.joined(separator: ": ")) + " (MCP server '\(shownServer)')"
        arguments = (prompt["arguments"]?.arrayValue ?? []).compactMap { argument in
            guard let n = argument["name"]?.stringValue, !n.isEmpty else { return nil }
            return Argument(name: n, required: argument["required"]?.boolValue ?? false)
        }
    }

    var name: String { "\(server):\(prompt)" }

    /// `available_commands_update`'s entry: the input hint says how the text maps onto the arguments.
    var advertised: JSONValue {
        var o: [String: JSONValue] = ["name": .string(name), "description": .string(summary)]
        if let hint { o["input"] = ["hint": .string(hint)] }
        return .object(o)
    }

    /// The argument's name for a prompt with one, else the `name=…` words (optional ones in brackets).
    private var hint: String? {
        if arguments.count == 1, let only = arguments.first { return only.name }
        guard !arguments.isEmpty else { return nil }
        return words
    }

    /// The arguments the text after the command gives, or what the user must be
    /// told instead. Text whose every word is `name=value` (a value with spaces
    /// in double quotes) names the arguments (for a prompt with one argument,
    /// only when the name is its argument's); any other text is all the value of
    /// the prompt's only argument, or of its only required one.
    func arguments(from text: String) -> Result<[String: String], Refusal> {
        var given: [String: String] = [:]
        if !text.isEmpty {
            let declared = Set(arguments.map(\.name))
            if let pairs = Self.pairs(text), arguments.count > 1 || pairs.allSatisfy({ declared.contains($0.name) }) {
                for pair in pairs {
                    guard declared.contains(pair.name) else {
                        return .failure(Refusal("/\(name) has no argument named \(pair.name)." + usage))
                    }
                    guard given.updateValue(pair.value, forKey: pair.name) == nil else {
                        return .failure(Refusal("/\(name) was given \(pair.name) twice." + usage))
                    }
                }
            } else if let target = wholeTextArgument {
                given[target.name] = text
            } else if arguments.isEmpty {
                return .failure(Refusal("/\(name) takes no arguments."))
            } else {
                return .failure(Refusal("/\(name) takes its arguments as name=value (a value with spaces in double quotes)." + usage))
            }
        }
        let missing = arguments.filter { $0.required && given[$0.name] == nil }
        guard missing.isEmpty else {
            return .failure(Refusal("/\(name) needs \(missing.map(\.name).joined(separator: ", "))." + usage))
        }
        return .success(given)
    }

    /// What the user is told instead of a turn.
    struct Refusal: Error, Sendable {
        let message: String
        init(_ message: String) { self.message = message }
    }

    /// The argument the whole text goes to: the only one, or the only required one.
    private var wholeTextArgument: Argument? {
        if arguments.count == 1 { return arguments.first }
        let required = arguments.filter(\.required)
        return required.count == 1 ? required.first : nil
    }

    private var usage: String { arguments.isEmpty ? "" : " Usage: /\(name) \(words)" }

    private var words: String { arguments.map { $0.required ? "\($0.name)=…" : "[\($0.name)=…]" }.joined(separator: " ") }

    /// The text as `name=value` words (double quotes group, `\"` is a quote
    /// inside them); nil when a word has no `=` or a quote is left open.
    static func pairs(_ text: String) -> [(name: String, value: String)]? {
        var words: [String] = []
        var word = ""
        var inWord = false
        var quoted = false
        var escaped = false
        for c in text {
            if escaped {
                word.append(c)
                escaped = false
            } else if quoted && c == "\\" {
                escaped = true
            } else if c == "\"" {
                quoted.toggle()
                inWord = true
            } else if c.isWhitespace && !quoted {
                if inWord { words.append(word) }
                word = ""
                inWord = false
            } else {
                word.append(c)
                inWord = true
            }
        }
        guard !quoted else { return nil }
        if inWord { words.append(word) }
        var pairs: [(name: String, value: String)] = []
        for w in words {
            guard let equals = w.firstIndex(of: "="), equals != w.startIndex else { return nil }
            pairs.append((String(w[..<equals]), String(w[w.index(after: equals)...])))
        }
        return pairs
    }

    /// A fetched prompt's messages as one turn input: agentrpc's turn takes one
    /// user message, so they are sent together, in order. A user's text is as
    /// it is; an assistant message is marked as one; an embedded text resource is
    /// a `<context uri>` block, as in a prompt from the editor; a link is named;
    /// binary content is the note `session/getPrompt` has for it.
    static func turnText(_ messages: [JSONValue]) -> String {
        let onlyUser = messages.allSatisfy { $0["role"]?.stringValue == "user" }
        return messages.map { message -> String in
            let text = Self.text(of: message["content"] ?? .null)
            guard !onlyUser else { return text }
            return "[\(message["role"]?.stringValue ?? "user")]\n\(text)"
        }.joined(separator: "\n\n")
    }

    private static func text(of content: JSONValue) -> String {
        switch content["type"]?.stringValue {
        case "text":
            return content["text"]?.stringValue ?? ""
        case "resource":
            let uri = content["resource"]?["uri"]?.stringValue ?? ""
            let body = content["resource"]?["text"]?.stringValue ?? content["resource"]?["blob"]?.stringValue ?? ""
            return "<context uri=\"\(uri)\">\n\(body)\n</context>"
        case "resource_link":
            let uri = content["uri"]?.stringValue ?? ""
            return "[@\(content["name"]?.stringValue ?? uri)](\(uri))"
        case let type:
            let note = content["note"]?.stringValue ?? "content of type \(type ?? "?") not shown"
            return "[\(note)]"
        }
    }
}
