import AgentRPCProtocol
import Foundation

/// Turns what a provider sent back (HTTP status, headers, body; an in-stream
/// error payload; a transport failure) into a typed `ProviderError`.
///
/// Classification works on status codes and machine-readable `type`/`code`
/// fields. Server prose only goes to `unsafeMessage`, after known secrets and
/// anything that looks like an API key have been scrubbed from it.
///
/// 401 policy: `authUserInvalid` (the key is wrong; a user must fix it), unless
/// the error code says the credential *expired* (`token_expired`,
/// `expired_token`, `expired_api_key`, `invalid_token_expired`), which is
/// `authExpired` so a client can refresh and retry.
enum ProviderErrorMapper {
    /// Longest server message we keep; the rest is cut off.
    static let maximumMessageLength = 2_000

    /// Maps a non-2xx HTTP response. `headers` are matched case-insensitively.
    /// `secrets` (the API key) are scrubbed from the server's message.
    static func map(
        status: Int, headers: [String: String], body: [UInt8], secrets: [String] = [], now: Date = Date()
    ) -> ProviderError {
        let info = ErrorBody(parsing: body)
        var code = classify(status: status, info: info)
        // Some servers answer 200 with an error body only on the stream; for an
        // HTTP error we always trust the status unless a code refines it.
        if code == .providerError, let byType = info.flatMap({ classify(errorType: $0.type, code: $0.code) }) {
            code = byType
        }
        let message = info?.message ?? String(decoding: body.prefix(maximumMessageLength), as: UTF8.self)
        var error = ProviderError(
            code: code,
            httpStatus: status,
            retryAfterSeconds: retryAfterSeconds(headers: headers, now: now),
            safeDescription: safeDescription(code, status: status),
            unsafeMessage: scrub(message, secrets: secrets)
        )
        error.shouldRetry = shouldRetry(headers: headers)
        return error
    }

    /// Maps an error payload that arrived inside a 200 stream: OpenAI's
    /// `{"error": {...}}` chunk or Anthropic's `event: error`. There is no status,
    /// so the error `type`/`code` decide; unknown ones are `providerError`.
    static func mapInStream(_ payload: JSONValue, secrets: [String] = []) -> ProviderError {
        let info = ErrorBody(payload)
        var code = info.flatMap { classify(errorType: $0.type, code: $0.code) } ?? .providerError
        // OpenAI-compatible servers sometimes put an HTTP-like status in `code`.
        if code == .providerError, let status = info?.code.flatMap({ Int($0) }), status >= 400 {
            code = classify(status: status, info: info)
        }
        return ProviderError(
            code: code,
            safeDescription: safeDescription(code, status: nil),
            // The event was parsed with lone surrogates marked (see `SurrogateStitcher`).
            unsafeMessage: scrub(SurrogateStitcher.resolved(info?.message ?? ""), secrets: secrets)
        )
    }

    /// Maps a transport failure (DNS, connection refused, reset, idle timeout) to
    /// `network`. The system's text (which may hold the URL, and with it a key
    /// put in a query string) goes through the same scrubber as server prose.
    static func map(transportError error: any Error, secrets: [String] = []) -> ProviderError {
        // A replayed cassette's recorded failure is already mapped (and scrubbed).
        if let replayed = error as? ProviderError { return replayed }
        var detail = "transport error"
        if let urlError = error as? URLError {
            detail = "URLError \(urlError.code.rawValue)"
        } else if let plain = error as? HTTPTransportError {
            detail = plain.kind.rawValue
        }
        return ProviderError(
            code: .network,
            safeDescription: "The connection to the model provider failed (\(detail)).",
            unsafeMessage: scrub(String(describing: error), secrets: secrets)
        )
    }

    // MARK: - Classification

    static func classify(status: Int, info: ErrorBody?) -> ProviderErrorCode {
        let refined = info.flatMap { classify(errorType: $0.type, code: $0.code) }
        let contextLength = refined == .contextLengthExceeded || info?.mentionsContextLength == true
        switch status {
        case 400, 413, 422:
            if contextLength { return .contextLengthExceeded }
            if refined == .contentFiltered { return .contentFiltered }
            return .badRequest
        case 401:
            return refined == .authExpired ? .authExpired : .authUserInvalid
        case 402:
            return .quotaExceeded
        case 403:
            if refined == .contentFiltered { return .contentFiltered }
            return .entitlementRequired
        case 404:
            return .modelUnavailable
        case 408:
            return .network
        case 429:
            return refined == .quotaExceeded ? .quotaExceeded : .rateLimited
        case 500:
            return .internalError
        case 502, 504:
            return .providerUnavailable
        case 503, 529:
            return .serviceUnavailable
        case 400..<500:
            if contextLength { return .contextLengthExceeded }
            return .badRequest
        default:
            return .providerError
        }
    }

    /// Classification by the provider's own error `type`/`code`, `nil` when unknown.
    static func classify(errorType: String?, code: String?) -> ProviderErrorCode? {
        for key in [code, errorType].compactMap({ $0?.lowercased() }) {
            switch key {
            case "context_length_exceeded", "exceed_context_size_error", "string_above_max_length":
                return .contextLengthExceeded
            case "content_filter", "content_policy_violation", "content_filtered":
                return .contentFiltered
            case "insufficient_quota", "billing_hard_limit_reached", "billing_error":
                return .quotaExceeded
            case "token_expired", "expired_token", "expired_api_key", "invalid_token_expired":
                return .authExpired
            case "invalid_api_key", "authentication_error", "invalid_authentication", "unauthorized":
                return .authUserInvalid
            case "permission_error", "permission_denied", "unsupported_country_region_territory":
                return .entitlementRequired
            case "not_found_error", "model_not_found":
                return .modelUnavailable
            case "rate_limit_error", "rate_limit_exceeded", "requests", "tokens":
                return .rateLimited
            case "overloaded_error", "server_overloaded", "service_unavailable", "unavailable_error":
                return .serviceUnavailable
            case "api_error", "server_error", "internal_error", "internal_server_error":
                return .internalError
            case "timeout_error":
                return .network
            case "invalid_request_error", "request_too_large", "invalid_request", "bad_request":
                return .badRequest
            default:
                continue
            }
        }
        return nil
    }

    static func safeDescription(_ code: ProviderErrorCode, status: Int?) -> String {
        let sentence: String
        switch code {
        case .authExpired: sentence = "The provider credential has expired."
        case .authUserInvalid: sentence = "The provider rejected the credential."
        case .entitlementRequired: sentence = "The credential is not allowed to use this model or feature."
        case .quotaExceeded: sentence = "The provider account has run out of quota or credit."
        case .rateLimited: sentence = "The provider is rate limiting requests."
        case .modelUnavailable: sentence = "The model or endpoint was not found at the provider."
        case .providerError: sentence = "The model provider returned an unexpected error."
        case .providerUnavailable: sentence = "The model provider could not be reached through its gateway."
        case .serviceUnavailable: sentence = "The model provider is overloaded or temporarily unavailable."
        case .internalError: sentence = "The model provider had an internal error."
        case .streamTruncated: sentence = "The provider's response stream ended before it was complete."
        case .badRequest: sentence = "The provider rejected the request as invalid."
        case .contextLengthExceeded: sentence = "The conversation is longer than the model's context window."
        case .contentFiltered: sentence = "The provider's content filter blocked the request or response."
        case .network: sentence = "The connection to the model provider failed."
        case .cassetteMiss: sentence = "The model cassette has no recorded answer for this request."
        }
        if let status { return "\(sentence) (HTTP \(status))" }
        return sentence
    }

    // MARK: - Retry hints

    /// `x-should-retry: true|false` (OpenAI and Anthropic send it), else nil.
    static func shouldRetry(headers: [String: String]) -> Bool? {
        for (k, v) in headers where k.lowercased() == "x-should-retry" {
            switch v.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true": return true
            case "false": return false
            default: return nil
            }
        }
        return nil
    }

    /// `retry-after-ms` (milliseconds) wins over `retry-after` (delta-seconds or
    /// an HTTP date). Negative or unparseable values are ignored; a date in the
    /// past gives 0.
    static func retryAfterSeconds(headers: [String: String], now: Date = Date()) -> Double? {
        var lower: [String: String] = [:]
        for (k, v) in headers { lower[k.lowercased()] = v.trimmingCharacters(in: .whitespaces) }
        if let ms = lower["retry-after-ms"].flatMap(Double.init), ms.isFinite, ms >= 0 {
            return ms / 1000
        }
        guard let value = lower["retry-after"] else { return nil }
        if let seconds = Double(value) {
            return seconds.isFinite && seconds >= 0 ? seconds : nil
        }
        guard let date = parseHTTPDate(value) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    /// IMF-fixdate (RFC 9110), plus the obsolete RFC 850 and asctime forms it
    /// still requires recipients to accept.
    static func parseHTTPDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return date }
        }
        return nil
    }

    // MARK: - Secrets

    /// Removes the given secrets and anything shaped like a provider API key.
    /// OpenAI echoes a masked key in 401 messages; other servers may echo it whole.
    static func scrub(_ text: String, secrets: [String]) -> String {
        var out = String(text.prefix(maximumMessageLength))
        for secret in secrets where secret.count >= 4 {
            out = out.replacingOccurrences(of: secret, with: "[REDACTED]")
        }
        return redactKeyLikeTokens(out)
    }

    /// Replaces tokens starting `sk-` (OpenAI, Anthropic `sk-ant-`, OpenRouter
    /// `sk-or-`) that are long enough to be a key or a recognisable part of one.
    static func redactKeyLikeTokens(_ text: String) -> String {
        guard text.contains("sk-") else { return text }
        var result = ""
        var rest = Substring(text)
        while let range = rest.range(of: "sk-") {
            let boundaryOK = range.lowerBound == rest.startIndex
                || !isKeyCharacter(rest[rest.index(before: range.lowerBound)])
            result += rest[..<range.lowerBound]
            var end = range.upperBound
            while end < rest.endIndex, isKeyCharacter(rest[end]) || rest[end] == "*" || rest[end] == "." { end = rest.index(after: end) }
            let token = rest[range.lowerBound..<end]
            if boundaryOK && token.count >= 8 {
                result += "[REDACTED]"
            } else {
                result += token
            }
            rest = rest[end...]
        }
        result += rest
        return result
    }

    private static func isKeyCharacter(_ c: Character) -> Bool {
        c.isASCII && (c.isLetter || c.isNumber || c == "-" || c == "_")
    }
}

/// The fields we read from both error shapes: OpenAI `{"error":{"message","type","code"}}`
/// (`code` string, integer or null) and Anthropic `{"type":"error","error":{"type","message"}}`.
struct ErrorBody {
    var type: String?
    var code: String?
    var message: String?

    init?(parsing body: [UInt8]) {
        guard let value = try? JSONValue.parse(body) else { return nil }
        self.init(value)
    }

    init?(_ value: JSONValue) {
        // Some servers wrap the error object; others (older llama.cpp, Ollama) send a bare string.
        let error = value["error"] ?? value
        if let text = error.stringValue {
            message = text
            return
        }
        guard error.objectValue != nil else { return nil }
        type = error["type"]?.stringValue
        switch error["code"] {
        case .string(let s): code = s
        case .int(let i): code = String(i)
        default: code = nil
        }
        message = error["message"]?.stringValue
        if type == nil, code == nil, message == nil { return nil }
    }

    /// Anthropic has no context-length code; its 400 says "prompt is too long".
    var mentionsContextLength: Bool {
        guard let m = message?.lowercased() else { return false }
        return m.contains("prompt is too long") || m.contains("maximum context length")
            || m.contains("context window") && m.contains("exceed")
    }
}
