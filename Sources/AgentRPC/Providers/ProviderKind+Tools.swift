import AgentRPCProtocol

extension ProviderKind {
    /// Whether this kind of provider is a language model (the scripted provider is
    /// not), for the tools that describe a model to a person (`agentrpc chat`).
    package var isLanguageModel: Bool { ProviderFactory.definition(for: self)?.isLanguageModel ?? true }
}
