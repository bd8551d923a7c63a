#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How to reach one HTTP model provider. Built by the caller from `agentrpc.json`
/// and the environment: `apiKey` is already resolved. The key is never part of a
/// description, a mirror (`dump`) or a request body; it goes only into headers.
package struct HTTPProviderConfiguration: Sendable, Hashable {
    /// Endpoint prefix; the provider appends `chat/completions` (OpenAI) or
    /// `messages` (Anthropic). E.g. `https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1`, `https://api.anthropic.com/v1`.
    package var baseURL: URL
    package var apiKey: String?
    /// Used when a `ModelRequest` leaves `model` empty.
    package var model: String
    /// Extra request headers (e.g. `anthropic-beta`, OpenRouter's `HTTP-Referer`).
    package var headers: [String: String]
    /// Idle timeout: the longest wait for the next bytes of a response.
    package var timeoutSeconds: Double
    /// The longest wait for a connection to open (over https including the TLS
    /// handshake; on platforms where https goes through URLSession, its own applies).
    var connectTimeoutSeconds: Double = Self.defaultConnectTimeoutSeconds
    static let defaultConnectTimeoutSeconds = 10.0
    /// OpenAI: when false, requests that carry tools are sent with `stream: false`
    /// and the whole JSON response is decoded (for servers whose streamed tool
    /// calls are broken). Anthropic always streams.
    var streamTools: Bool
    /// OpenAI: send tools (and the response schema) with `strict: true`, after
    /// down-converting their schemas to the strict subset.
    var strictTools: Bool
    /// OpenAI: send `max_completion_tokens` instead of `max_tokens` (reasoning models).
    var useMaxCompletionTokens: Bool
    /// Anthropic requires `max_tokens`; this is used when neither the request
    /// nor the model's options set one.
    var defaultMaxOutputTokens: Int
    package var capabilities: ProviderCapabilities
    /// The model's `options`: its default generation options and the keys passed through.
    var modelOptions = ModelOptions()
    /// Records or replays this provider's HTTP exchanges (docs/testing.md).
    package var cassette: ModelCassette?

    package init(
        baseURL: URL, apiKey: String?, model: String, headers: [String: String] = [:], timeoutSeconds: Double = 600,
        streamTools: Bool = true, strictTools: Bool = false, useMaxCompletionTokens: Bool = false,
        defaultMaxOutputTokens: Int = 4096, capabilities: ProviderCapabilities = ProviderCapabilities()
    ) {
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.model = model
        self.headers = headers
        self.timeoutSeconds = timeoutSeconds
        self.streamTools = streamTools
        self.strictTools = strictTools
        self.useMaxCompletionTokens = useMaxCompletionTokens
        self.defaultMaxOutputTokens = defaultMaxOutputTokens
        self.capabilities = capabilities
    }

    /// Values that must never be printed: the key and any header that may carry one.
    var secrets: [String] {
        var s: [String] = []
        if let apiKey, !apiKey.isEmpty { s.append(apiKey) }
        for (name, value) in headers where Self.isSensitiveHeader(name) { s.append(value) }
        return s
    }

    static func isSensitiveHeader(_ name: String) -> Bool {
        let n = name.lowercased()
        return n == "authorization" || n == "x-api-key" || n == "api-key" || n.containsScalars("token") || n.containsScalars("secret")
            || n.containsScalars("key")
    }
}

extension HTTPProviderConfiguration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    package var description: String {
        let headerNames = headers.keys.sorted().joined(separator: ",")
        return "HTTPProviderConfiguration(baseURL: \(baseURL.absoluteString), model: \(model), apiKey: \(apiKey == nil ? "none" : "[REDACTED]"), headers: [\(headerNames)])"
    }
    package var debugDescription: String { description }
    /// `dump()` and debuggers see this instead of the stored key.
    package var customMirror: Mirror {
        Mirror(self, children: ["baseURL": baseURL, "model": model, "apiKey": apiKey == nil ? "none" : "[REDACTED]",
                                "headers": headers.keys.sorted()], displayStyle: .struct)
    }
}
