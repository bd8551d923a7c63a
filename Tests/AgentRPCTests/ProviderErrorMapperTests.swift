import Foundation
import AgentRPCProtocol
import Testing
@testable import AgentRPC

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite struct ProviderErrorMapperTests {
    func map(_ status: Int, _ body: String, headers: [String: String] = [:]) -> ProviderError {
        ProviderErrorMapper.map(status: status, headers: headers, body: Array(body.utf8))
    }

    static func openAI(_ type: String, _ code: String) -> String {
        #"{"error":{"message":"server says no","type":"\#(type)","param":null,"code":\#(code)}}"#
    }
    static func anthropic(_ type: String) -> String {
        #"{"type":"error","error":{"type":"\#(type)","message":"server says no"}}"#
    }

    @Test func statusTable() {
        let table: [(Int, String, ProviderErrorCode)] = [
            (400, Self.openAI("invalid_request_error", "null"), .badRequest),
            (400, Self.openAI("invalid_request_error", #""context_length_exceeded""#), .contextLengthExceeded),
            (400, #"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#, .contextLengthExceeded),
            (400, Self.openAI("invalid_request_error", #""content_filter""#), .contentFiltered),
            (401, Self.openAI("invalid_request_error", #""invalid_api_key""#), .authUserInvalid),
            (401, Self.anthropic("authentication_error"), .authUserInvalid),
            (401, Self.openAI("invalid_request_error", #""token_expired""#), .authExpired),
            (402, "{}", .quotaExceeded),
            (403, Self.anthropic("permission_error"), .entitlementRequired),
            (404, Self.openAI("invalid_request_error", #""model_not_found""#), .modelUnavailable),
            (404, Self.anthropic("not_found_error"), .modelUnavailable),
            (408, "", .network),
            (413, Self.anthropic("request_too_large"), .badRequest),
            (429, Self.openAI("requests", #""rate_limit_exceeded""#), .rateLimited),
            (429, Self.openAI("insufficient_quota", #""insufficient_quota""#), .quotaExceeded),
            (429, Self.anthropic("rate_limit_error"), .rateLimited),
            (500, Self.anthropic("api_error"), .internalError),
            (502, "<html>bad gateway</html>", .providerUnavailable),
            (503, "", .serviceUnavailable),
            (529, Self.anthropic("overloaded_error"), .serviceUnavailable),
            (400, #"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}"#, .contextLengthExceeded),
            (418, "teapot", .badRequest),
            (599, "", .providerError),
        ]
        for (status, body, code) in table {
            let e = map(status, body)
            #expect(e.code == code, "HTTP \(status) \(body)")
            #expect(e.httpStatus == status)
        }
    }

    @Test func safeDescriptionIsOursAndUnsafeMessageIsTheServers() {
        let e = map(429, Self.anthropic("rate_limit_error"))
        #expect(e.unsafeMessage == "server says no")
        #expect(!e.safeDescription.contains("server says no"))
        #expect(e.safeDescription.contains("429"))
        // An unparseable body is kept (truncated) as the unsafe message.
        #expect(map(502, "<html>bad gateway</html>").unsafeMessage == "<html>bad gateway</html>")
    }

    @Test func retryAfterHeaders() throws {
        #expect(map(429, "", headers: ["retry-after-ms": "1500"]).retryAfterSeconds == 1.5)
        #expect(map(429, "", headers: ["Retry-After": "7"]).retryAfterSeconds == 7)
        // retry-after-ms wins when both are present.
        #expect(map(429, "", headers: ["Retry-After": "7", "Retry-After-Ms": "250"]).retryAfterSeconds == 0.25)
        #expect(map(429, "", headers: ["retry-after": "soon"]).retryAfterSeconds == nil)
        #expect(map(429, "", headers: ["retry-after": "-3"]).retryAfterSeconds == nil)
        #expect(map(429, "").retryAfterSeconds == nil)

        let now = try #require(ProviderErrorMapper.parseHTTPDate("Sun, 06 Nov 1994 08:49:37 GMT"))
        let later = ProviderErrorMapper.retryAfterSeconds(headers: ["retry-after": "Sun, 06 Nov 1994 08:50:07 GMT"], now: now)
        #expect(later == 30)
        let past = ProviderErrorMapper.retryAfterSeconds(headers: ["retry-after": "Sun, 06 Nov 1994 08:49:00 GMT"], now: now)
        #expect(past == 0)
        let rfc850 = ProviderErrorMapper.retryAfterSeconds(headers: ["retry-after": "Sunday, 06-Nov-94 08:49:47 GMT"], now: now)
        #expect(rfc850 == 10)

        let e = map(429, Self.anthropic("rate_limit_error"), headers: ["retry-after": "12"])
        #expect(e.retryGuidance == RetryGuidance(kind: .retryWithBackoff, afterSeconds: 12))
    }

    @Test func apiKeysNeverReachTheMessage() {
        let key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
        let body = #"{"error":{"message":"Incorrect API key provided: \#(key). You can find your API key at https://platform.openai.com.","type":"invalid_request_error","code":"invalid_api_key"}}"#
        let e = ProviderErrorMapper.map(status: 401, headers: [:], body: Array(body.utf8), secrets: [key])
        #expect(!e.unsafeMessage.contains("abcdefghij"))
        #expect(!e.safeDescription.contains("sk-"))
        #expect(e.unsafeMessage.contains("[REDACTED]"))
        // A masked echo (as OpenAI really sends) and a key we were not told about are redacted too.
        let masked = ProviderErrorMapper.scrub("Incorrect API key provided: sk-proj-****************************6789.", secrets: [])
        #expect(masked == "Incorrect API key provided: [REDACTED]")
        #expect(ProviderErrorMapper.scrub("key sk-ant-api03-XYZxyz123456 bad", secrets: []) == "key [REDACTED] bad")
        #expect(ProviderErrorMapper.scrub("task-list is fine", secrets: []) == "task-list is fine")
        // A secret that is not key-shaped is scrubbed because we were told about it.
        #expect(ProviderErrorMapper.scrub("token hunter2token rejected", secrets: ["hunter2token"]) == "token [REDACTED] rejected")
    }

    @Test func transportFailuresAreNetwork() {
        let e = ProviderErrorMapper.map(transportError: URLError(.cannotConnectToHost))
        #expect(e.code == .network)
        #expect(e.isRetryable)
    }

    @Test func configurationNeverPrintsTheKey() throws {
        let key = "sk-test-0123456789abcdef"
        let config = HTTPProviderConfiguration(
            baseURL: try #require(URL(string: "https://api.example.com/v1")), apiKey: key, model: "m",
            headers: ["x-api-key": "other-secret-value"])
        #expect(!config.description.contains(key))
        var dumped = ""
        dump(config, to: &dumped)
        #expect(!dumped.contains(key))
        #expect(!dumped.contains("other-secret-value"))
        #expect(!String(reflecting: config).contains(key))
        #expect(config.secrets.contains(key))
        #expect(config.secrets.contains("other-secret-value"))
    }
}

@Suite struct ProviderRetryPolicyTests {
    @Test func aHintUpTo120SecondsIsTakenAsIsLongerOnesFallBackToBackoff() {
        #expect(ProviderRetryPolicy.delay(attempt: 1, hint: 100) == 100)
        #expect(ProviderRetryPolicy.delay(attempt: 1, hint: 0) == 0)
        for attempt in 1...20 {
            let d = ProviderRetryPolicy.delay(attempt: attempt, hint: 500)
            #expect(d > 0 && d <= ProviderRetryPolicy.maxBackoff * 1.2)
        }
        #expect(ProviderRetryPolicy.delay(attempt: 1, hint: .nan) <= 0.6)
    }

    @Test func xShouldRetryFalseTurnsRetriesOffAndQuotaNeedsTheUser() {
        let busy = ProviderErrorMapper.map(status: 503, headers: ["X-Should-Retry": "false"], body: [])
        #expect(busy.retryGuidance.kind == .none)
        let quota = ProviderErrorMapper.map(
            status: 429, headers: [:], body: Array(#"{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}"#.utf8))
        #expect(quota.code == .quotaExceeded && quota.requiresUserAction && !quota.isRetryable)
        let limited = ProviderErrorMapper.map(status: 429, headers: [:], body: [])
        #expect(limited.retryGuidance == RetryGuidance(kind: .retryWithBackoff, afterSeconds: nil))
    }
}
