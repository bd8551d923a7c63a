import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Anthropic Messages (`POST {baseURL}/messages`), streamed over SSE.
package struct AnthropicProvider: ModelProvider {
    /// The API version header value this code was written against.
    static let apiVersion = "2023-06-01"

    package let name: String
    package let configuration: HTTPProviderConfiguration
    package var capabilities: ProviderCapabilities { configuration.capabilities }
    /// The previous request's serialized messages, reused by the next (`bodyBytes(for:)`).
    let serializedMessages = SerializedMessageCache()

    package init(configuration: HTTPProviderConfiguration, name: String = "anthropic") {
        self.configuration = configuration
        self.name = name
    }

    /// The exact body that would be sent, without headers: safe for `--dump-requests`.
    package func requestBody(for request: ModelRequest) -> BuiltRequestBody {
        AnthropicRequestBuilder.build(request, configuration: configuration)
    }

    /// The bytes sent: `requestBody(for:).body.serialized()`, with the messages
    /// the previous request of this provider serialized reused.
    package func bodyBytes(for request: ModelRequest) -> [UInt8] {
        AnthropicRequestBuilder.encode(request, configuration: configuration, cache: serializedMessages)
    }

    func httpRequest(for request: ModelRequest) -> HTTPRequest {
        var auth = ["anthropic-version": Self.apiVersion]
        if let key = configuration.apiKey { auth["x-api-key"] = key }
        return configuration.post(path: "messages", accept: "text/event-stream", auth: auth, body: bodyBytes(for: request))
    }

    package func stream(_ request: ModelRequest) -> ProviderEventStream {
        configuration.stream(httpRequest(for: request), kind: .anthropic, decoder: AnthropicStreamDecoder.init(secrets:))
    }
}

extension AnthropicProvider {
    func wireBody(for request: ModelRequest) -> JSONValue? { requestBody(for: request).body }
    func optionWarnings(for request: ModelRequest) -> [OptionWarning] {
        configuration.optionWarnings(request.options, provider: .anthropic)
    }
}
