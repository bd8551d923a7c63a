import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `provider: "anthropic"`: Anthropic's Messages API.
enum AnthropicProviderDefinition: ProviderDefinition {
    static let kind = ProviderKind.anthropic
    static let defaultBaseURL = "https://api.anthropic.com/v1"
    /// No response-format option here; tool history needs the tools defined.
    static let defaultCapabilities: ProviderCapabilities = {
        var c = ProviderCapabilities(supportsStructuredOutput: false)
        c.requiresToolsWithToolHistory = true
        return c
    }()
    static let optionRules = GenerationOptionRules(
        temperatureRange: 0...1, outOfRangeMaxOutputTokens: "the default is sent",
        reasoning: { level, _, out in
            if let n = Int(level), !(AnthropicRequestBuilder.minimumThinkingBudget...ModelOptions.maximumOutputTokens).contains(n) {
                out.warnings.append(OptionWarning(
                    key: "reasoningLevel",
                    message: "a thinking budget of \(n) tokens is not between \(AnthropicRequestBuilder.minimumThinkingBudget) and \(ModelOptions.maximumOutputTokens); thinking stays off"))
            } else {
                out.reasoningLevel = level
                if AnthropicRequestBuilder.thinkingBudget(level) != nil, out.temperature != nil {
                    out.temperature = nil
                    out.warnings.append(OptionWarning(key: "temperature", message: "not sent with extended thinking, which takes only the default"))
                }
            }
        })

    /// `ANTHROPIC_API_KEY` brings a model named `anthropic` (`ANTHROPIC_MODEL`,
    /// default claude-sonnet-4-5).
    static func environmentModel(_ environment: [String: String]) -> (name: String, config: ModelConfig)? {
        guard !(environment["ANTHROPIC_API_KEY"] ?? "").isEmpty else { return nil }
        return ("anthropic", ModelConfig(provider: .anthropic, model: environment["ANTHROPIC_MODEL"] ?? "claude-sonnet-4-5"))
    }

    /// From Anthropic's model overview (https://docs.anthropic.com/en/docs/about-claude/models/overview,
    /// "Context window"): 200K tokens for every Claude 3 and 4 model. Sonnet 4
    /// and 4.5 take 1M only with the `context-1m` beta header, so a plain request
    /// has 200K; a model configured with that header sets `contextWindowTokens`.
    static let contextWindows: [String: Int] = [
        "claude-3-haiku": 200_000, "claude-3-opus": 200_000, "claude-3-5-haiku": 200_000, "claude-3-5-sonnet": 200_000,
        "claude-3-7-sonnet": 200_000, "claude-sonnet-4": 200_000, "claude-sonnet-4-0": 200_000, "claude-opus-4": 200_000,
        "claude-opus-4-0": 200_000, "claude-opus-4-1": 200_000, "claude-sonnet-4-5": 200_000, "claude-haiku-4-5": 200_000,
        "claude-opus-4-5": 200_000,
    ]

    static func make(_ config: ModelConfig, environment: [String: String], capabilities: ProviderCapabilities, cassette: ModelCassette?) throws -> any ModelProvider {
        let http = try ProviderFactory.httpConfiguration(
            config, environment: environment, capabilities: capabilities,
            defaultBaseURL: defaultBaseURL, officialBaseURL: defaultBaseURL, defaultKeyEnv: "ANTHROPIC_API_KEY", cassette: cassette)
        return AnthropicProvider(configuration: http)
    }
}

extension AnthropicProvider {
    func adaptTools(_ tools: [ModelToolDefinition]) -> (tools: [ModelToolDefinition], warnings: [SchemaWarning]) {
        let adapted = adaptToolSchemas(tools, strict: false)
        return (adapted.tools, adapted.warnings)
    }
}
