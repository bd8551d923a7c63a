import AgentRPCProtocol

/// Translates what the engine reports (`session/event`, transcript entries)
/// into ACP `session/update` payloads. Events the editor has no use for
/// (entries announced, requests started, hooks) translate to nothing.
enum ACPUpdates {
    /// The updates one live event becomes.
    static func updates(for event: JSONValue, session: ACPSession) -> [JSONValue] {
        switch event["type"]?.stringValue {
        case "textDelta":
            guard let delta = event["delta"]?.stringValue, !delta.isEmpty else { return [] }
            return [chunk("agent_message_chunk", delta)]
        case "reasoningDelta":
            guard let delta = event["delta"]?.stringValue, !delta.isEmpty else { return [] }
            return [chunk("agent_thought_chunk", delta)]
        case "toolCallStarted":
            session.roundTripEnded()
            guard let callId = event["callId"]?.stringValue, let name = event["name"]?.stringValue else { return [] }
            session.callStarted(callId)
            return [toolCall(callId: callId, name: name, arguments: event["arguments"] ?? .object([:]), cwd: session.cwd)]
        case "toolCallFinished":
            guard let callId = event["callId"]?.stringValue else { return [] }
            session.callFinished(callId)
            let content = event["content"] ?? .null
            return [finished(
                callId: callId, outcome: event["outcome"]?.stringValue ?? "failed", content: content, display: session.display(callId: callId),
                media: event["media"]?.arrayValue ?? [])]
        case "toolProgress":
            // A server's (or client tool's) progress report: the call is running, and says how far it is.
            guard let callId = event["callId"]?.stringValue, session.isOpen(callId), let progress = event["progress"]?.numberValue else { return [] }
            let text = event["message"]?.stringValue ?? progressText(progress, total: event["total"]?.numberValue)
            return [[
                "sessionUpdate": "tool_call_update", "toolCallId": .string(callId), "status": "in_progress",
                "content": .array(session.display(callId: callId) + [["type": "content", "content": ["type": "text", "text": .string(text)]]]),
            ]]
        case "requestStarted":
            session.requestStarted(contextWindow: event["contextWindowTokens"]?.intValue)
            return []
        case "usage":
            // Side requests (router, summary, consult) are paid for too: every price counts in the cost.
            let cost = session.addCost(event["costUSD"]?.numberValue)
            // The engine's reading of what the model had in context: input with the cache's reads and writes, plus output.
            guard let size = session.roundTripWindow, let used = event["contextTokens"]?.intValue else { return [] }
            return usageUpdate(used: used, size: size, costUSD: cost)
        case "contextCompacted":
            // The meter drops at once, not at the next round trip.
            guard let size = session.lastWindow, let used = event["tokensAfter"]?.intValue else { return [] }
            return usageUpdate(used: used, size: size, costUSD: session.costUSD)
        case "turnEnded":
            session.roundTripEnded()
            return []
        case "planUpdated":
            guard let entries = event["entries"] else { return [] }
            return [plan(entries)]
        case "profileActivated":
            // A profile change the engine made itself (handoff, router) is news to the editor's profile selector.
            guard let profile = event["profile"]?.stringValue, session.setProfile(profile), session.catalog.profiles != nil else { return [] }
            return [["sessionUpdate": "config_option_update", "configOptions": session.configOptionsJSON]]
        default:
            return []
        }
    }

    /// "3 of 10" (or "3" without a total), whole numbers without a fraction.
    static func progressText(_ progress: Double, total: Double?) -> String {
        func shown(_ n: Double) -> String {
            n.rounded() == n && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        }
        return total.map { "\(shown(progress)) of \(shown($0))" } ?? shown(progress)
    }

    /// ACP's context meter: `used` of `size` tokens, and the session's cost so
    /// far when its model is priced; nothing for figures ACP cannot carry.
    static func usageUpdate(used: Int, size: Int, costUSD: Double?) -> [JSONValue] {
        guard used >= 0, size > 0 else { return [] }
        var update: [String: JSONValue] = ["sessionUpdate": "usage_update", "used": .int(used), "size": .int(size)]
        if let costUSD { update["cost"] = ["amount": .double(costUSD), "currency": "USD"] }
        return [.object(update)]
    }

    /// How a replayed summary entry begins.
    static let summaryHeading = "The conversation before this point, as compacted: "

    /// The updates that replay one entry of a stored conversation
    /// (`session/load`), as the live turn showed it. `media`: a tool output's
    /// images and audio (`session/getMedia` of each of its `media`), sent as
    /// the live `tool_call_update` sent them.
    static func replay(entry: JSONValue, cwd: String, media: [JSONValue] = []) -> [JSONValue] {
        var updates: [JSONValue] = []
        switch entry["type"]?.stringValue {
        case "prompt":
            if let text = entry["text"]?.stringValue, !text.isEmpty { updates.append(chunk("user_message_chunk", text)) }
            for image in entry["images"]?.arrayValue ?? [] {
                // Images the prompt carried inline come back as they were sent.
                guard let data = image["data"]?.stringValue, let mime = image["mimeType"]?.stringValue else { continue }
                updates.append(["sessionUpdate": "user_message_chunk", "content": ["type": "image", "data": .string(data), "mimeType": .string(mime)]])
            }
        case "summary":
            // What a compaction left of the conversation before it: shown, so the replay does not start mid-way.
            if let text = entry["text"]?.stringValue, !text.isEmpty { updates.append(chunk("agent_message_chunk", summaryHeading + text + "\n\n")) }
        case "reasoning":
            if let text = entry["text"]?.stringValue, !text.isEmpty { updates.append(chunk("agent_thought_chunk", text)) }
        case "response":
            if let text = entry["text"]?.stringValue, !text.isEmpty { updates.append(chunk("agent_message_chunk", text)) }
        case "toolCalls":
            if let text = entry["text"]?.stringValue, !text.isEmpty { updates.append(chunk("agent_message_chunk", text)) }
            for call in entry["calls"]?.arrayValue ?? [] {
                guard let callId = call["callId"]?.stringValue, let name = call["name"]?.stringValue else { continue }
                updates.append(toolCall(callId: callId, name: name, arguments: call["arguments"] ?? .object([:]), cwd: cwd))
            }
        case "toolOutput":
            guard let callId = entry["callId"]?.stringValue else { break }
            updates.append(finished(
                callId: callId, outcome: entry["outcome"]?.stringValue ?? "failed", content: entry["content"] ?? .null, display: [], media: media))
        default:
            break
        }
        return updates
    }

    /// An ACP `plan` update: the whole plan, which the editor shows in place of the last.
    static func plan(_ entries: JSONValue) -> JSONValue {
        ["sessionUpdate": "plan", "entries": entries]
    }

    /// The `session/update` params of an `available_commands_update`.
    static func availableCommands(_ commands: JSONValue, session: String) -> JSONValue {
        ["sessionId": .string(session), "update": ["sessionUpdate": "available_commands_update", "availableCommands": commands]]
    }

    static func chunk(_ kind: String, _ text: String) -> JSONValue {
        ["sessionUpdate": .string(kind), "content": ["type": "text", "text": .string(text)]]
    }

    static func toolCall(callId: String, name: String, arguments: JSONValue, cwd: String) -> JSONValue {
        let view = ToolCallView(name: name, arguments: arguments, cwd: cwd)
        var update: [String: JSONValue] = [
            "sessionUpdate": "tool_call", "toolCallId": .string(callId), "title": .string(view.title),
            "kind": .string(view.kind), "status": "pending", "rawInput": arguments,
        ]
        if !view.locations.isEmpty { update["locations"] = .array(view.locations) }
        return .object(update)
    }

    /// A call's last update: `completed` for an `ok` output, `failed` for the
    /// others (failed, denied, conflict), with what the editor showed while it
    /// ran and the output as text.
    /// `media`: the images and audio the tool returned (`toolCallFinished.media`),
    /// each an ACP `image` or `audio` content block after the text.
    static func finished(callId: String, outcome: String, content: JSONValue, display: [JSONValue], media: [JSONValue] = []) -> JSONValue {
        let text = content.stringValue ?? content.serializedString()
        var items = display
        if !text.isEmpty { items.append(["type": "content", "content": ["type": "text", "text": .string(text)]]) }
        for block in media {
            guard let media = MediaContent(block: block) else { continue }
            items.append(["type": "content", "content": ["type": .string(media.type.rawValue), "data": .string(media.data), "mimeType": .string(media.mimeType)]])
        }
        return [
            "sessionUpdate": "tool_call_update", "toolCallId": .string(callId),
            "status": outcome == "ok" ? "completed" : "failed", "content": .array(items), "rawOutput": rawOutput(content),
        ]
    }

    /// A call's output as `rawOutput`: always an object, as the clients people use
    /// require (Toad refuses an update whose `rawOutput` is not a dict). An object
    /// output goes as it is; text and anything else as `{"output": ...}`.
    static func rawOutput(_ content: JSONValue) -> JSONValue {
        if case .object = content { return content }
        return ["output": content]
    }
}
