import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// OpenAI Chat Completions (`POST {baseURL}/chat/completions`), streamed over SSE.
/// Works with any compatible server: OpenAI, Ollama `/v1`, llama.cpp, vLLM,
/// LM Studio, OpenRouter.
package struct OpenAIProvider: ModelProvider {
    package let name: String
    package let configuration: HTTPProviderConfiguration
    package var capabilities: ProviderCapabilities { configuration.capabilities }
    /// The previous request's serialized messages, reused by the next (`bodyBytes(for:)`).
    let serializedMessages = SerializedMessageCache()

    /// `name` is what events report (`"openai"` unless the caller names the profile's provider otherwise).
    package init(configuration: HTTPProviderConfiguration, name: String = "openai") {
        self.configuration = configuration
        self.name = name
    }

    /// Whether this request is sent with `stream: true`.
    func streams(_ request: ModelRequest) -> Bool {
        configuration.streamTools || request.tools.isEmpty
    }

    /// The exact body that would be sent, without headers: safe for `--dump-requests`.
    package func requestBody(for request: ModelRequest) -> BuiltRequestBody {
        OpenAIRequestBuilder.build(request, configuration: configuration, stream: streams(request))
    }

    /// The bytes sent: `requestBody(for:).body.serialized()`, with the messages
    /// the previous request of this provider serialized reused.
    package func bodyBytes(for request: ModelRequest) -> [UInt8] {
        OpenAIRequestBuilder.encode(request, configuration: configuration, stream: streams(request), cache: serializedMessages)
    }

    func httpRequest(for request: ModelRequest) -> HTTPRequest {
        configuration.post(
            path: "chat/completions", accept: streams(request) ? "text/event-stream" : "application/json",
            auth: configuration.bearerAuth,
            body: bodyBytes(for: request))
    }

    package func stream(_ request: ModelRequest) -> ProviderEventStream {
        configuration.stream(
            httpRequest(for: request), kind: .openai, decoder: OpenAIChatStreamDecoder.init(secrets:),
            wholeBody: OpenAIChatStreamDecoder.decodeResponse)
    }
}

extension OpenAIProvider {
    func wireBody(for request: ModelRequest) -> JSONValue? { requestBody(for: request).body }
    func optionWarnings(for request: ModelRequest) -> [OptionWarning] {
        configuration.optionWarnings(request.options, provider: .openai)
    }
}
