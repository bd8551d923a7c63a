import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `provider: "scripted"`: plays the model configuration's `script`; no network.
enum ScriptedProviderDefinition: ProviderDefinition {
    static let kind = ProviderKind.scripted
    static let defaultCapabilities = ProviderCapabilities()
    static let isLanguageModel = false

    static func make(_ config: ModelConfig, environment: [String: String], capabilities: ProviderCapabilities, cassette: ModelCassette?) throws -> any ModelProvider {
        ScriptedProvider(script: config.script ?? [], capabilities: capabilities)
    }
}
