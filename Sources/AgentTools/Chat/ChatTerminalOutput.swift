import AgentRPC
/// Writes the conversation for a person. It remembers whether the cursor is at
/// the start of a line, so a status line never lands glued to streamed text,
/// and styles text only when the output is a terminal that wants colour.
final class ChatTerminalOutput {
    /// What the last streamed text was, so switching between reasoning and the
    /// answer starts a new line.
    enum Stream {
        case none
        case reasoning
        case text
    }

    private let sink: (String) -> Void
    let styled: Bool
    private(set) var atLineStart = true
    private(set) var stream = Stream.none

    init(styled: Bool, sink: @escaping (String) -> Void) {
        self.styled = styled
        self.sink = sink
    }

    func write(_ text: String) {
        guard !text.isEmpty else { return }
        sink(text)
        atLineStart = text.hasSuffix("\n")
    }

    /// Streams part of the model's answer or reasoning.
    /// Reasoning is dimmed; without styles it is labelled instead.
    func stream(_ delta: String, as kind: Stream) {
        guard !delta.isEmpty else { return }
        if stream != kind {
            if stream != .none { endLine() }
            if kind == .reasoning && !styled { write("[reasoning] ") }
        }
        stream = kind
        sink(kind == .reasoning ? dim(delta) : delta)
        atLineStart = delta.hasSuffix("\n")
    }

    /// A line of its own, after whatever was streamed.
    func line(_ text: String) {
        endLine()
        write(text + "\n")
    }

    /// A status line, dimmed when styled.
    func note(_ text: String) { line(dim(text)) }

    /// Text that waits for an answer on the same line (prompts, questions).
    func ask(_ text: String) {
        endLine()
        write(text)
        atLineStart = false
        stream = .none
    }

    func endLine() {
        if !atLineStart { write("\n") }
        stream = .none
    }

    /// Forgets the cursor position: after the person pressed Enter the terminal
    /// itself moved to a new line.
    func personEndedLine() {
        atLineStart = true
        stream = .none
    }

    func dim(_ text: String) -> String { styled ? "\u{1B}[2m\(text)\u{1B}[22m" : text }
    func bold(_ text: String) -> String { styled ? "\u{1B}[1m\(text)\u{1B}[22m" : text }
}
