import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `provider: "openai"`: OpenAI Chat Completions and compatible servers.
enum OpenAIProviderDefinition: ProviderDefinition {
    static let kind = ProviderKind.openai
    static let defaultBaseURL = "https://api.openai.com/v1"
    static let defaultCapabilities = ProviderCapabilities(supportsReasoning: false)
    static let settings: [String: ModelSetting] = ["streamTools": .boolean, "strictTools": .boolean, "useMaxCompletionTokens": .boolean]
    static let optionRules = GenerationOptionRules(takesSeed: true)

    /// `OPENAI_API_KEY` (or `OPENAI_BASE_URL`) brings a model named `openai`
    /// (`OPENAI_MODEL`, default gpt-4o-mini).
    static func environmentModel(_ environment: [String: String]) -> (name: String, config: ModelConfig)? {
        func has(_ key: String) -> Bool { !(environment[key] ?? "").isEmpty }
        guard has("OPENAI_API_KEY") || has("OPENAI_BASE_URL") else { return nil }
        return ("openai", ModelConfig(provider: .openai, model: environment["OPENAI_MODEL"] ?? "gpt-4o-mini"))
    }

    /// OpenAI's models (`OpenAIModelWindows`); a compatible server's own
    /// models are not among them and stay unknown.
    static let contextWindows: [String: Int] = OpenAIModelWindows.byModel

    static func make(_ config: ModelConfig, environment: [String: String], capabilities: ProviderCapabilities, cassette: ModelCassette?) throws -> any ModelProvider {
        let http = try ProviderFactory.httpConfiguration(
            config, environment: environment, capabilities: capabilities,
            defaultBaseURL: environment["OPENAI_BASE_URL"] ?? defaultBaseURL, officialBaseURL: defaultBaseURL, defaultKeyEnv: "OPENAI_API_KEY", cassette: cassette)
        return OpenAIProvider(configuration: http)
    }
}

extension OpenAIProvider {
    func adaptTools(_ tools: [ModelToolDefinition]) -> (tools: [ModelToolDefinition], warnings: [SchemaWarning]) {
        let adapted = adaptToolSchemas(tools, strict: configuration.strictTools)
        return (adapted.tools, adapted.warnings)
    }
}
