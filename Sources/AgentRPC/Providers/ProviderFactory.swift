import AgentRPCProtocol
import Foundation

/// Builds the provider a model configuration names, reading its API key from
/// the environment variable the configuration names (never from the config
/// itself, so keys stay out of files, transcripts and dumps).
enum ProviderFactory {
    static let openAIDefaultBaseURL = "https://api.openai.com/v1"
    static let anthropicDefaultBaseURL = "https://api.anthropic.com/v1"

    static func make(_ config: ModelConfig, environment: [String: String]) throws -> any ModelProvider {
        let defaults: ProviderCapabilities
        switch config.provider {
        case .scripted:
            defaults = ProviderCapabilities()
        case .openai:
            defaults = ProviderCapabilities(supportsReasoning: false)
        case .openaiResponses:
            // The API of OpenAI's reasoning models; a model that does not reason sets `supportsReasoning: false`.
            defaults = ProviderCapabilities()
        case .anthropic:
            // Anthropic's Messages API has no response-format option here.
            defaults = ProviderCapabilities(supportsStructuredOutput: false)
        }
        var capabilities = ProviderCapabilities(
            supportsToolChoice: config.supportsToolChoice ?? defaults.supportsToolChoice,
            supportsImages: config.supportsImages ?? defaults.supportsImages,
            supportsReasoning: config.supportsReasoning ?? defaults.supportsReasoning,
            supportsParallelToolCalls: config.supportsParallelToolCalls ?? defaults.supportsParallelToolCalls,
            supportsStructuredOutput: config.supportsStructuredOutput ?? defaults.supportsStructuredOutput,
            contextWindowTokens: config.contextWindowTokens ?? defaults.contextWindowTokens)
        capabilities.requiresToolsWithToolHistory = config.provider == .anthropic
        switch config.provider {
        case .scripted:
            return ScriptedProvider(script: config.script ?? [], capabilities: capabilities)
        case .openai:
            let http = try httpConfiguration(config, environment: environment, capabilities: capabilities,
                                             defaultBaseURL: environment["OPENAI_BASE_URL"] ?? openAIDefaultBaseURL,
                                             officialBaseURL: openAIDefaultBaseURL, defaultKeyEnv: "OPENAI_API_KEY")
            return OpenAIProvider(configuration: http)
        case .openaiResponses:
            let http = try httpConfiguration(config, environment: environment, capabilities: capabilities,
                                             defaultBaseURL: environment["OPENAI_BASE_URL"] ?? openAIDefaultBaseURL,
                                             officialBaseURL: openAIDefaultBaseURL, defaultKeyEnv: "OPENAI_API_KEY")
            return OpenAIResponsesProvider(configuration: http, settings: OpenAIResponsesSettings(options: http.modelOptions.settings))
        case .anthropic:
            let http = try httpConfiguration(config, environment: environment, capabilities: capabilities,
                                             defaultBaseURL: anthropicDefaultBaseURL,
                                             officialBaseURL: anthropicDefaultBaseURL, defaultKeyEnv: "ANTHROPIC_API_KEY")
            return AnthropicProvider(configuration: http)
        }
    }

    /// A model's `options`, read for its provider.
    static func modelOptions(_ config: ModelConfig) -> ModelOptions {
        let protectedKeys = config.provider == .openaiResponses ? OpenAIResponsesRequestBuilder.protectedKeys : protectedBodyKeys
        return ModelOptions(config.options ?? [:], provider: config.provider, protectedKeys: protectedKeys)
    }

    private static func httpConfiguration(
        _ config: ModelConfig, environment: [String: String], capabilities: ProviderCapabilities,
        defaultBaseURL: String, officialBaseURL: String, defaultKeyEnv: String
    ) throws -> HTTPProviderConfiguration {
        guard let model = config.model, !model.isEmpty else {
            throw RPCError.invalidConfiguration("a \(config.provider.rawValue) model needs \"model\" (the provider's model id)", field: "model.model")
        }
        let base = config.baseURL ?? defaultBaseURL
        guard let url = URL(string: base), let scheme = url.scheme, scheme == "http" || scheme == "https" else {
            throw RPCError.invalidConfiguration("baseURL '\(base)' is not an http(s) URL", field: "model.baseURL")
        }
        let keyEnv = config.apiKeyEnv ?? defaultKeyEnv
        let key = environment[keyEnv].flatMap { $0.isEmpty ? nil : $0 }
        // The official endpoints always need a key; a local compatible server may not.
        if key == nil && (config.apiKeyEnv != nil || base == officialBaseURL) {
            throw RPCError.invalidConfiguration(
                "the \(config.provider.rawValue) model '\(model)' needs an API key: set the environment variable \(keyEnv)",
                field: "model.apiKeyEnv")
        }
        let options = modelOptions(config)
        var http = HTTPProviderConfiguration(
            baseURL: url, apiKey: key, model: model, headers: config.headers ?? [:],
            timeoutSeconds: min(config.timeoutSeconds ?? 600, DurationBounds.maximumSeconds),
            streamTools: options.settings["streamTools"]?.boolValue ?? true,
            strictTools: options.settings["strictTools"]?.boolValue ?? false,
            useMaxCompletionTokens: options.settings["useMaxCompletionTokens"]?.boolValue ?? false,
            capabilities: capabilities)
        http.modelOptions = options
        if let connect = config.connectTimeoutSeconds { http.connectTimeoutSeconds = connect }
        return http
    }
}

extension OpenAIProvider {
    public func adaptTools(_ tools: [ModelToolDefinition]) -> (tools: [ModelToolDefinition], warnings: [SchemaWarning]) {
        let adapted = adaptToolSchemas(tools, strict: configuration.strictTools)
        return (adapted.tools, adapted.warnings)
    }
}

extension AnthropicProvider {
    public func adaptTools(_ tools: [ModelToolDefinition]) -> (tools: [ModelToolDefinition], warnings: [SchemaWarning]) {
        let adapted = adaptToolSchemas(tools, strict: false)
        return (adapted.tools, adapted.warnings)
    }
}
