import AgentRPCProtocol

/// Builds the provider a model configuration names.
enum ProviderFactory {
    static func make(_ config: ModelConfig, environment: [String: String]) throws -> any ModelProvider {
        let capabilities = ProviderCapabilities(
            supportsToolChoice: config.supportsToolChoice ?? true, supportsImages: config.supportsImages ?? true,
            supportsReasoning: config.supportsReasoning ?? true, supportsParallelToolCalls: config.supportsParallelToolCalls ?? true,
            supportsStructuredOutput: config.supportsStructuredOutput ?? true, contextWindowTokens: config.contextWindowTokens)
        switch config.provider {
        case .scripted:
            return ScriptedProvider(script: config.script ?? [], capabilities: capabilities)
        case .openai, .anthropic:
            throw RPCError.invalidConfiguration("the \(config.provider.rawValue) provider is not available in this build", field: "model.provider")
        }
    }
}
