/// The context windows of OpenAI's models, from each model's page
/// (https://platform.openai.com/docs/models/<id>, "Context window"). Both
/// OpenAI APIs serve the same models, so the list lives beside their folders.
/// GPT-5's 400,000 counts its output: its input stops at 272,000, where the
/// provider answers `contextLengthExceeded` and an automatic compaction runs
/// (docs/protocol.md, "Compaction").
enum OpenAIModelWindows {
    static let byModel: [String: Int] = [
        "gpt-4-turbo": 128_000, "gpt-4o": 128_000, "gpt-4o-mini": 128_000,
        "gpt-4.1": 1_047_576, "gpt-4.1-mini": 1_047_576, "gpt-4.1-nano": 1_047_576,
        "o1": 200_000, "o3": 200_000, "o3-mini": 200_000, "o4-mini": 200_000,
        "gpt-5": 400_000, "gpt-5-mini": 400_000, "gpt-5-nano": 400_000,
    ]
}
