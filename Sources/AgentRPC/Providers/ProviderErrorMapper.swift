import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if !os(Linux)
import Foundation
#endif

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
        #if !os(Linux)
        // URLSessionTransport's failures (not built on Linux).
        if let urlError = error as? URLError { detail = "URLError \(urlError.code.rawValue)" }
        #endif
        if let plain = error as? HTTPTransportError {
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
            switch v.trimmingWhitespace().lowercased() {
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
        for (k, v) in headers { lower[k.lowercased()] = v.trimmingWhitespace() }
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
    /// still requires recipients to accept: "Sun, 06 Nov 1994 08:49:37 GMT",
    /// "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994" (all GMT).
    /// As the `DateFormatter` it replaces (ProviderErrorMapperTests compare them):
    /// names in any case, the weekday not checked against the date, a two-digit
    /// year taken from 1950 to 2049 (Foundation's default `twoDigitStartDate`).
    static func parseHTTPDate(_ text: String) -> Date? {
        var scanner = HTTPDateScanner(text)
        return scanner.imfFixdate() ?? scanner.rfc850() ?? scanner.asctime()
    }

    // MARK: - Secrets

    /// Removes the given secrets and anything shaped like a provider API key.
    /// OpenAI echoes a masked key in 401 messages; other servers may echo it whole.
    static func scrub(_ text: String, secrets: [String]) -> String {
        var out = String(text.prefix(maximumMessageLength))
        for secret in secrets where secret.count >= 4 {
            out = out.replacingScalars(of: secret, with: "[REDACTED]")
        }
        return redactKeyLikeTokens(out)
    }

    /// Replaces tokens starting `sk-` (OpenAI, Anthropic `sk-ant-`, OpenRouter
    /// `sk-or-`) that are long enough to be a key or a recognisable part of one.
    static func redactKeyLikeTokens(_ text: String) -> String {
        guard text.containsScalars("sk-") else { return text }
        var result = ""
        var rest = Substring(text)
        while let range = rest.scalarRange(of: "sk-") {
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
        return m.containsScalars("prompt is too long") || m.containsScalars("maximum context length")
            || m.containsScalars("context window") && m.containsScalars("exceed")
    }
}

/// Reads the three HTTP date forms field by field; each form starts again from the
/// beginning of the text.
private struct HTTPDateScanner {
    private let bytes: [UInt8]
    private var at = 0

    init(_ text: String) { bytes = Array(text.utf8) }

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let shortDays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    private static let longDays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    /// "Sun, 06 Nov 1994 08:49:37 GMT"
    mutating func imfFixdate() -> Date? {
        at = 0
        guard word(Self.shortDays) != nil, afterWeekday(), let day = number(1...2), spaces(), let month = word(Self.months),
              spaces(), let year = number(4...4), spaces(), let time = clock(), spaces(), zone(), atEnd() else { return nil }
        return Self.date(year: year, month: month + 1, day: day, time)
    }

    /// "Sunday, 06-Nov-94 08:49:37 GMT"
    mutating func rfc850() -> Date? {
        at = 0
        guard word(Self.longDays) != nil, afterWeekday(), let day = number(1...2), literal("-"), let month = word(Self.months),
              literal("-"), let shortYear = number(2...2), spaces(), let time = clock(), spaces(), zone(), atEnd() else { return nil }
        return Self.date(year: shortYear < 50 ? 2000 + shortYear : 1900 + shortYear, month: month + 1, day: day, time)
    }

    /// "Sun Nov  6 08:49:37 1994"
    mutating func asctime() -> Date? {
        at = 0
        guard word(Self.shortDays) != nil, spaces(), let month = word(Self.months), spaces(), let day = number(1...2), spaces(),
              let time = clock(), spaces(), let year = number(4...4), atEnd() else { return nil }
        return Self.date(year: year, month: month + 1, day: day, time)
    }

    private mutating func word(_ names: [String]) -> Int? {
        for (index, name) in names.enumerated() {
            let end = at + name.utf8.count
            guard end <= bytes.count else { continue }
            let lowered = bytes[at..<end].map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
            if lowered.elementsEqual(name.utf8) {
                at = end
                return index
            }
        }
        return nil
    }

    private mutating func literal(_ text: String) -> Bool {
        let end = at + text.utf8.count
        guard end <= bytes.count, bytes[at..<end].elementsEqual(text.utf8) else { return false }
        at = end
        return true
    }

    /// The comma after a weekday, which DateFormatter's lenient parsing lets go
    /// ("Sun 06 Nov …"), and the spaces after it, which it does not.
    private mutating func afterWeekday() -> Bool {
        _ = literal(",")
        return spaces()
    }

    /// One or more spaces.
    private mutating func spaces() -> Bool {
        let start = at
        while at < bytes.count, bytes[at] == 0x20 { at += 1 }
        return at > start
    }

    private mutating func number(_ digits: ClosedRange<Int>) -> Int? {
        var value = 0
        var count = 0
        while at < bytes.count, count < digits.upperBound, bytes[at] >= 0x30, bytes[at] <= 0x39 {
            value = value * 10 + Int(bytes[at] - 0x30)
            at += 1
            count += 1
        }
        return digits.contains(count) ? value : nil
    }

    private mutating func clock() -> (hour: Int, minute: Int, second: Int)? {
        guard let hour = number(2...2), literal(":"), let minute = number(2...2), literal(":"), let second = number(2...2),
              hour < 24, minute < 60, second < 61 else { return nil }
        return (hour, minute, second)
    }

    private mutating func zone() -> Bool { literal("GMT") || literal("UTC") }

    private func atEnd() -> Bool { at == bytes.count }

    private static func date(year: Int, month: Int, day: Int, _ time: (hour: Int, minute: Int, second: Int)) -> Date? {
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        let days = daysFromEpoch(year: year, month: month, day: day)
        return Date(timeIntervalSince1970: Double(days * 86_400 + time.hour * 3_600 + time.minute * 60 + time.second))
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to the given day of the proleptic Gregorian calendar.
    private static func daysFromEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
