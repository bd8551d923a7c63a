import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Everything agentrpc knows about one kind of provider, declared once in the
/// provider's own folder and listed in `ProviderFactory.definitions`: nothing
/// outside those declarations branches on the provider kind.
protocol ProviderDefinition: Sendable {
    /// The `provider` value of a model configuration.
    static var kind: ProviderKind { get }
    /// Capabilities assumed where the model configuration says nothing.
    static var defaultCapabilities: ProviderCapabilities { get }
    /// False for the scripted provider, which plays a fixed script: the chat says
    /// so, and the start-up check of a file's model options skips it.
    static var isLanguageModel: Bool { get }
    /// agentrpc's own settings in a model's `options` that this provider reads.
    static var settings: [String: ModelSetting] { get }
    /// Request body members agentrpc writes itself, which no option may replace.
    static var protectedKeys: Set<String> { get }
    /// How the common generation options map onto this provider's API.
    static var optionRules: GenerationOptionRules { get }
    /// The model an API key in the environment brings, named as in the catalog.
    static func environmentModel(_ environment: [String: String]) -> (name: String, config: ModelConfig)?
    /// The context windows of this provider's well-known models, by model id
    /// (a dated id such as `gpt-4o-2024-08-06` takes its model's). A model
    /// not listed has no known window: none is guessed.
    static var contextWindows: [String: Int] { get }
    /// Builds the provider for `config` with the merged `capabilities`; an HTTP
    /// provider's requests go through `cassette` when there is one (docs/testing.md).
    static func make(_ config: ModelConfig, environment: [String: String], capabilities: ProviderCapabilities, cassette: ModelCassette?) throws -> any ModelProvider
}

extension ProviderDefinition {
    static var isLanguageModel: Bool { true }
    static var settings: [String: ModelSetting] { [:] }
    static var protectedKeys: Set<String> { protectedBodyKeys }
    static var optionRules: GenerationOptionRules { GenerationOptionRules() }
    static func environmentModel(_ environment: [String: String]) -> (name: String, config: ModelConfig)? { nil }
    static var contextWindows: [String: Int] { [:] }

    /// The window of `model` from `contextWindows`: its id as listed, or the
    /// listed id followed by a date (`-20250929`, `-2024-08-06`) or `-latest`.
    static func contextWindowTokens(model: String) -> Int? {
        if let window = contextWindows[model] { return window }
        let utf8 = Array(model.utf8)
        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        // The suffixes as patterns: `d` a digit, anything else itself.
        for suffix in ["-dddddddd", "-dddd-dd-dd", "-latest"] {
            let pattern = Array(suffix.utf8)
            guard utf8.count > pattern.count else { continue }
            let tail = utf8.suffix(pattern.count)
            let matches = zip(tail, pattern).allSatisfy { b, p in p == UInt8(ascii: "d") ? isDigit(b) : b == p }
            if matches { return contextWindows[String(decoding: utf8.dropLast(pattern.count), as: UTF8.self)] }
        }
        return nil
    }
}

/// One of agentrpc's settings in a model's `options`: the values it takes.
struct ModelSetting: Sendable {
    let check: @Sendable (JSONValue) -> Bool
    /// Said in the warning for a value `check` refuses.
    let expected: String

    static let boolean = ModelSetting(check: { $0.boolValue != nil }, expected: "true or false")
}

/// How a provider takes the common generation options (docs/protocol.md, "Model options").
struct GenerationOptionRules: Sendable {
    var temperatureRange: ClosedRange<Double> = 0...2
    /// What happens when `maxOutputTokens` is out of range, for the warning.
    var outOfRangeMaxOutputTokens = "not sent"
    /// Nil when the API takes stop sequences; otherwise the warning for leaving them out.
    var stopRefusal: String?
    var takesSeed = false
    /// Reads a reasoning level into `out` (default: sent as given); `supportsReasoning`
    /// is the model's capability.
    var reasoning: (@Sendable (_ level: String, _ supportsReasoning: Bool, _ out: inout ResolvedGenerationOptions) -> Void)?
}

/// Builds the provider a model configuration names, reading its API key from
/// the environment variable the configuration names (never from the config
/// itself, so keys stay out of files, transcripts and dumps).
enum ProviderFactory {
    /// Every provider; adding one is its folder and a line here.
    static let definitions: [any ProviderDefinition.Type] = [
        OpenAIProviderDefinition.self,
        OpenAIResponsesProviderDefinition.self,
        AnthropicProviderDefinition.self,
        ScriptedProviderDefinition.self,
    ]

    private static let byKind: [ProviderKind: any ProviderDefinition.Type] = {
        var map: [ProviderKind: any ProviderDefinition.Type] = [:]
        for d in definitions where map[d.kind] == nil { map[d.kind] = d }
        return map
    }()

    /// The declaration of `kind`; a test checks that every kind has one.
    static func definition(for kind: ProviderKind) -> (any ProviderDefinition.Type)? { byKind[kind] }

    /// `cassette`, when given, records or replays the HTTP providers' exchanges.
    static func make(_ config: ModelConfig, environment: [String: String], cassette: ModelCassette? = nil) throws -> any ModelProvider {
        guard let definition = definition(for: config.provider) else {
            throw RPCError.invalidConfiguration("no provider implements '\(config.provider.rawValue)'", field: "model.provider")
        }
        return try definition.make(config, environment: environment, capabilities: capabilities(config, definition: definition), cassette: cassette)
    }

    /// What a model can do: its configuration's overrides over its provider's
    /// defaults; its window from the configuration, else from the provider's
    /// list of well-known models.
    static func capabilities(_ config: ModelConfig) -> ProviderCapabilities? {
        definition(for: config.provider).map { capabilities(config, definition: $0) }
    }

    private static func capabilities(_ config: ModelConfig, definition: any ProviderDefinition.Type) -> ProviderCapabilities {
        let defaults = definition.defaultCapabilities
        var capabilities = ProviderCapabilities(
            supportsToolChoice: config.supportsToolChoice ?? defaults.supportsToolChoice,
            supportsImages: config.supportsImages ?? defaults.supportsImages,
            supportsReasoning: config.supportsReasoning ?? defaults.supportsReasoning,
            supportsParallelToolCalls: config.supportsParallelToolCalls ?? defaults.supportsParallelToolCalls,
            supportsStructuredOutput: config.supportsStructuredOutput ?? defaults.supportsStructuredOutput,
            contextWindowTokens: config.contextWindowTokens ?? config.model.flatMap(definition.contextWindowTokens(model:)) ?? defaults.contextWindowTokens)
        capabilities.requiresToolsWithToolHistory = defaults.requiresToolsWithToolHistory
        capabilities.pricing = config.pricing
        return capabilities
    }

    /// A model's `options`, read for its provider.
    static func modelOptions(_ config: ModelConfig) -> ModelOptions {
        let protectedKeys = definition(for: config.provider)?.protectedKeys ?? protectedBodyKeys
        return ModelOptions(config.options ?? [:], provider: config.provider, protectedKeys: protectedKeys)
    }

    /// The configuration of an HTTP provider: model id, base URL, API key from
    /// the environment, timeouts and the options it reads.
    static func httpConfiguration(
        _ config: ModelConfig, environment: [String: String], capabilities: ProviderCapabilities,
        defaultBaseURL: String, officialBaseURL: String, defaultKeyEnv: String, cassette: ModelCassette?
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
        // The official endpoints always need a key; a local compatible server may not,
        // nor does a cassette that answers every request from its recording.
        if key == nil && (config.apiKeyEnv != nil || base == officialBaseURL) && cassette?.mode != .replay {
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
        http.cassette = cassette
        if let connect = config.connectTimeoutSeconds { http.connectTimeoutSeconds = connect }
        return http
    }
}
