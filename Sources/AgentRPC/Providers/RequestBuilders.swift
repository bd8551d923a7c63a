import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// What the providers' request builders share. Each builder lives in its
// provider's folder (`OpenAI/OpenAIRequestBuilder.swift`, …).

/// A request body ready to send, with the schema changes made to produce it.
/// The body never contains credentials, so it is what `--dump-requests` prints.
package struct BuiltRequestBody: Sendable, Hashable {
    package var body: JSONValue
    var warnings: [SchemaWarning]
}

/// Keys that request extras (`GenerationOptions.extra`) may not replace: they
/// carry the conversation and the streaming contract the decoders rely on.
let protectedBodyKeys: Set<String> = ["model", "messages", "stream", "stream_options", "system", "tools"]

func mergeExtras(_ extra: [String: JSONValue], into body: inout [String: JSONValue]) {
    for (key, value) in extra where !protectedBodyKeys.contains(key) {
        body[key] = value
    }
}

func base64(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString()
}

extension ModelImage {
    /// The image as one URL: a `data:` URL for bytes; both OpenAI APIs take this form.
    var urlString: String {
        switch self {
        case .data(let bytes, let mimeType): "data:\(mimeType);base64,\(base64(bytes))"
        case .url(let url): url
        }
    }
}

// MARK: - Anthropic Messages

/// The role of an Anthropic message; the shared body encoding
/// (`SerializedMessages`) keeps the role of the message still open.
enum AnthropicRole: String, Sendable {
    case user, assistant

    /// What ends a message of this role after its content blocks: `],"role":"…"}`.
    var closingBytes: [UInt8] {
        switch self {
        case .user: Self.userClosing
        case .assistant: Self.assistantClosing
        }
    }

    private static let userClosing = closing(.user)
    private static let assistantClosing = closing(.assistant)
    private static func closing(_ role: AnthropicRole) -> [UInt8] {
        var bytes = Array(#"],"role":"#.utf8)
        JSONValue.string(role.rawValue).serialize(into: &bytes)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }
}
