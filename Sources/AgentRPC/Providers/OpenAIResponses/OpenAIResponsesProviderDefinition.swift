import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `provider: "openai-responses"`: the OpenAI Responses API (`POST /v1/responses`),
/// the API of OpenAI's reasoning models. It lives at OpenAI's host and takes
/// OpenAI's key and base-URL variables.
enum OpenAIResponsesProviderDefinition: ProviderDefinition {
    static let kind = ProviderKind.openaiResponses
    static let defaultBaseURL = "https://api.openai.com/v1"
    /// A model that does not reason sets `supportsReasoning: false`.
    static let defaultCapabilities = ProviderCapabilities()
    static let settings: [String: ModelSetting] = [
        "strictTools": .boolean, "store": .boolean,
        "reasoningSummary": ModelSetting(check: { $0.stringValue != nil || $0 == .bool(false) || $0 == .null }, expected: "a string, false or null"),
    ]
    static var protectedKeys: Set<String> { OpenAIResponsesRequestBuilder.protectedKeys }
    static let optionRules = GenerationOptionRules(
        stopRefusal: "the Responses API has no stop sequences; not sent",
        reasoning: { level, supportsReasoning, out in
            if supportsReasoning {
                out.reasoningLevel = level
            } else {
                out.warnings.append(OptionWarning(key: "reasoningLevel", message: "the model is configured with supportsReasoning: false; not sent"))
            }
        })

    /// OpenAI's models, as for Chat Completions (`OpenAIModelWindows`).
    static let contextWindows: [String: Int] = OpenAIModelWindows.byModel

    static func make(_ config: ModelConfig, environment: [String: String], capabilities: ProviderCapabilities, cassette: ModelCassette?) throws -> any ModelProvider {
        let http = try ProviderFactory.httpConfiguration(
            config, environment: environment, capabilities: capabilities,
            defaultBaseURL: environment["OPENAI_BASE_URL"] ?? defaultBaseURL, officialBaseURL: defaultBaseURL, defaultKeyEnv: "OPENAI_API_KEY", cassette: cassette)
        return OpenAIResponsesProvider(configuration: http, settings: OpenAIResponsesSettings(options: http.modelOptions.settings))
    }
}
