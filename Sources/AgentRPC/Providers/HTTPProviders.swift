import AgentRPCProtocol
import Foundation

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
}
