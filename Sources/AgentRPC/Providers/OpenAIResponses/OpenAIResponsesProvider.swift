import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// OpenAI Responses (`POST {baseURL}/responses`), streamed over SSE.
package struct OpenAIResponsesProvider: ModelProvider {
    package let name: String
    package let configuration: HTTPProviderConfiguration
    let settings: OpenAIResponsesSettings
    package var capabilities: ProviderCapabilities { configuration.capabilities }
    /// The previous request's serialized input items, reused by the next (`bodyBytes(for:)`).
    let serializedMessages = SerializedMessageCache()

    package init(configuration: HTTPProviderConfiguration, settings: OpenAIResponsesSettings = OpenAIResponsesSettings(), name: String = "openai-responses") {
        self.configuration = configuration
        self.settings = settings
        self.name = name
    }

    /// The exact body that would be sent, without headers: safe for `--dump-requests`.
    package func requestBody(for request: ModelRequest) -> BuiltRequestBody {
        OpenAIResponsesRequestBuilder.build(request, configuration: configuration, settings: settings)
    }

    /// The bytes sent: `requestBody(for:).body.serialized()`, with the items
    /// the previous request of this provider serialized reused.
    package func bodyBytes(for request: ModelRequest) -> [UInt8] {
        OpenAIResponsesRequestBuilder.encode(request, configuration: configuration, settings: settings, cache: serializedMessages)
    }

    func httpRequest(for request: ModelRequest) -> HTTPRequest {
        configuration.post(
            path: "responses", accept: "text/event-stream",
            auth: configuration.bearerAuth,
            body: bodyBytes(for: request))
    }

    package func stream(_ request: ModelRequest) -> ProviderEventStream {
        configuration.stream(
            httpRequest(for: request), kind: .openaiResponses, decoder: OpenAIResponsesStreamDecoder.init(secrets:),
            wholeBody: OpenAIResponsesStreamDecoder.decodeResponse)
    }

    func adaptTools(_ tools: [ModelToolDefinition]) -> (tools: [ModelToolDefinition], warnings: [SchemaWarning]) {
        let adapted = adaptToolSchemas(tools, strict: configuration.strictTools)
        return (adapted.tools, adapted.warnings)
    }
}

extension OpenAIResponsesProvider {
    func wireBody(for request: ModelRequest) -> JSONValue? { requestBody(for: request).body }
    func optionWarnings(for request: ModelRequest) -> [OptionWarning] {
        configuration.optionWarnings(request.options, provider: .openaiResponses)
    }
}
