import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// What the HTTP providers share; each provider lives in its own folder
// (`OpenAI/OpenAIProvider.swift`, …).

extension HTTPProviderConfiguration {
    /// A JSON POST to `baseURL/path` with this configuration's headers and
    /// timeouts. `auth` holds the provider's own headers; an empty key is left
    /// out. A later header replaces an earlier one of the same name in any case.
    func post(path: String, accept: String, auth: [String: String], body: [UInt8]) -> HTTPRequest {
        var r = HTTPRequest(
            url: baseURL.appendingPathComponent(path), method: "POST", headers: [:], body: Data(body),
            connectTimeoutSeconds: connectTimeoutSeconds, idleTimeoutSeconds: timeoutSeconds)
        r.setHeader("Content-Type", "application/json")
        r.setHeader("Accept", accept)
        for (k, v) in auth.sorted(by: { $0.key < $1.key }) where !v.isEmpty { r.setHeader(k, v) }
        for (k, v) in headers.sorted(by: { $0.key < $1.key }) { r.setHeader(k, v) }
        return r
    }

    /// The `Authorization: Bearer` header of the OpenAI-style APIs (none without a key).
    var bearerAuth: [String: String] {
        apiKey.flatMap { $0.isEmpty ? nil : ["Authorization": "Bearer \($0)"] } ?? [:]
    }

    /// `request` sent by provider `kind` and its answer decoded into events: the
    /// stream through `decoder`, a whole JSON body through `wholeBody`, both
    /// given this configuration's secrets to scrub; through the cassette when
    /// one is bound.
    func stream(
        _ request: HTTPRequest, kind: ProviderKind, decoder: ([String]) -> some ProviderStreamDecoder,
        wholeBody: (@Sendable ([UInt8], [String]) throws -> [ProviderEvent])? = nil
    ) -> ProviderEventStream {
        let secrets = self.secrets
        var whole: HTTPStreamTransport.WholeBodyDecoder?
        if let wholeBody { whole = { body in try wholeBody(body, secrets) } }
        return HTTPStreamTransport.stream(
            request, decoder: decoder(secrets), wholeBodyDecoder: whole, secrets: secrets, cassette: cassetteBinding(kind))
    }
}
