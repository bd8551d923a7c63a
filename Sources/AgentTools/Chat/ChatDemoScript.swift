import AgentRPC
import AgentRPCProtocol

/// What the chat runs when no model is configured: the offline scripted
/// provider with a short fixed script, so a first run shows streaming, tool
/// calls and a confirmation without an API key. It is never passed off as a
/// language model: the banner says so, and so does the chat once it runs out.
enum ChatDemoScript {
    static let banner = """
        No model configured — using the built-in offline scripted provider (a fixed demo script, not a language model). \
        Configure a model in agentrpc.json (see README).
        """

    static let ended = """
        The offline demo script has ended: there is no language model behind this chat, so nothing more will be said. \
        Configure a model in agentrpc.json (see README) and start `agentrpc chat --model NAME`; /exit leaves.
        """

    /// One item per provider round trip. Turn 1 greets; turn 2 reads the clock,
    /// writes a note (which asks the person first) and closes. No usage is
    /// scripted: made-up token counts would only mislead.
    static let items: [ScriptItem] = [
        ScriptItem(text: [
            "Hello! ", "I am the offline demo script of agentrpc chat — ", "not a language model: ",
            "I say the same few lines whatever you type. ",
            "Send another message and I will use two tools: one reads the clock, ",
            "the other writes a note and asks for your permission first.",
        ]),
        ScriptItem(
            text: ["First, ", "the clock."],
            toolCalls: [ScriptToolCall(name: ChatToolbox.currentTime, arguments: [:])]),
        ScriptItem(
            text: ["Now a note. ", "Writing one needs your approval, so you will be asked."],
            toolCalls: [ScriptToolCall(name: ChatToolbox.writeNote, arguments: ["text": "Tried the agentrpc offline demo."])]),
        ScriptItem(text: [
            "That is the whole demo: ", "text streamed as it arrived, a tool ran, ",
            "and a second one asked for your permission. ",
            "Try /transcript to see the conversation, /undo to take this turn back. ",
            "For real answers, configure a model in agentrpc.json (see README).",
        ]),
    ]

    static var model: ModelConfig { ModelConfig(provider: .scripted, script: items) }
}
