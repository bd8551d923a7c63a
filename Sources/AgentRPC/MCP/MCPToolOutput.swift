import AgentRPCProtocol

/// Turns a `tools/call` result into what the model sees. Text-only results
/// become one string; anything else (images, resources, links, structured
/// content) an object. Binary payloads are described, not inlined: a model
/// reads tool output as text, where base64 is only cost.
enum MCPToolOutput {
    static func outcome(of result: JSONValue) -> (ToolOutcome, JSONValue) {
        let isError = result["isError"]?.boolValue == true
        let blocks = result["content"]?.arrayValue ?? []
        let structured = result["structuredContent"]
        var texts: [String] = []
        var mapped: [JSONValue] = []
        var onlyText = true
        for block in blocks {
            if block["type"]?.stringValue == "text" {
                texts.append(block["text"]?.stringValue ?? "")
            } else {
                onlyText = false
            }
            // Images and audio stay whole: the tool stage takes them out (`ToolMedia`).
            mapped.append(MediaContent(block: block) != nil ? block : shown(block))
        }
        let content: JSONValue
        if let structured, !structured.isNull {
            // The structured value is what the tool means; the text blocks usually repeat it.
            // Text blocks beside it are its serialization (the spec asks servers to add one).
            content = onlyText ? structured : ["structuredContent": structured, "content": .array(mapped)]
        } else if onlyText {
            content = .string(texts.joined(separator: "\n"))
        } else {
            content = .array(mapped)
        }
        return (isError ? .failed : .ok, cutKeepingMedia(content))
    }

    /// `cut`, with the images and audio clips of a content array (or of its
    /// `content` member) measured as their notes and kept whole beside the cut
    /// text: their bytes are not what the limit is for.
    static func cutKeepingMedia(_ content: JSONValue) -> JSONValue {
        let (shownContent, media) = ToolMedia.split(content)
        if media.isEmpty { return cut(content) }
        let kept = cut(shownContent)
        if kept == shownContent { return content }
        return .array([kept] + media.map(\.json))
    }

    /// One content block as the model and the client see it: binary data
    /// described (`"N bytes of base64 image data not shown"`), not inlined.
    static func shown(_ block: JSONValue) -> JSONValue {
        let type = block["type"]?.stringValue ?? ""
        switch type {
        case "text":
            return ["type": "text", "text": .string(block["text"]?.stringValue ?? "")]
        case "image", "audio":
            let size = block["data"]?.stringValue?.utf8.count ?? 0
            return [
                "type": .string(type), "mimeType": block["mimeType"] ?? .null,
                "note": .string("\(size) bytes of base64 \(type) data not shown"),
            ]
        case "resource":
            var resource = block["resource"]?.objectValue ?? [:]
            if let blob = resource["blob"]?.stringValue {
                resource["blob"] = .string("\(blob.utf8.count) bytes of base64 data not shown")
            }
            return ["type": "resource", "resource": .object(resource)]
        case "resource_link":
            var link: [String: JSONValue] = ["type": "resource_link"]
            for key in ["uri", "name", "title", "description", "mimeType", "size"] { if let v = block[key] { link[key] = v } }
            return .object(link)
        default:
            return block
        }
    }

    /// A `resources/read` result: one text content is its text; several, or
    /// binary ones (described, not inlined), an array of `{uri, mimeType?, text | blob}`.
    static func resource(of result: JSONValue) -> (ToolOutcome, JSONValue) {
        let contents = result["contents"]?.arrayValue ?? []
        if contents.count == 1, let text = contents[0]["text"]?.stringValue { return (.ok, cut(.string(text))) }
        let mapped: [JSONValue] = contents.map { item in
            var out: [String: JSONValue] = [:]
            for key in ["uri", "mimeType", "text"] { if let v = item[key] { out[key] = v } }
            if let blob = item["blob"]?.stringValue { out["blob"] = .string("\(blob.utf8.count) bytes of base64 data not shown") }
            return .object(out)
        }
        return (.ok, cut(.array(mapped)))
    }

    /// Output over `MCPBounds.maxToolOutputBytes` becomes its cut text with a note.
    static func cut(_ content: JSONValue, limit: Int = MCPBounds.maxToolOutputBytes) -> JSONValue {
        let text: String
        if case .string(let s) = content {
            guard s.utf8.count > limit else { return content }
            text = s
        } else {
            let serialized = content.serializedString()
            guard serialized.utf8.count > limit else { return content }
            text = serialized
        }
        let total = text.utf8.count
        // A character split at the cut decodes as U+FFFD; that is the only change.
        let kept = String(decoding: text.utf8.prefix(limit), as: UTF8.self)
        return .string(kept + "\n[output cut: \(limit) of \(total) bytes shown]")
    }
}
