import AgentRPCProtocol

extension ModelUsage {
    /// The largest token count one report is believed: a thousand times the
    /// largest context window there is, and far below anything a sum could
    /// overflow on. A model endpoint is input like any other (docs/protocol.md,
    /// "Every limit and its default").
    static let largestBelievableTokenCount = 1_000_000_000_000

    /// This report with every count that is negative or above
    /// `largestBelievableTokenCount` dropped (0 for input and output, absent for
    /// the others), and the names and values of what was dropped.
    func sanitized() -> (usage: ModelUsage, rejected: [String]) {
        var rejected: [String] = []
        func believable(_ name: String, _ value: Int?) -> Int? {
            guard let value else { return nil }
            if (0...Self.largestBelievableTokenCount).contains(value) { return value }
            rejected.append("\(name)=\(value)")
            return nil
        }
        let usage = ModelUsage(
            inputTokens: believable("inputTokens", inputTokens) ?? 0,
            outputTokens: believable("outputTokens", outputTokens) ?? 0,
            cachedInputTokens: believable("cachedInputTokens", cachedInputTokens),
            cacheCreationInputTokens: believable("cacheCreationInputTokens", cacheCreationInputTokens),
            reasoningTokens: believable("reasoningTokens", reasoningTokens), cacheCountedApart: cacheCountedApart)
        return (usage, rejected)
    }
}

extension TurnRunner {
    /// A provider's usage report with unbelievable counts dropped, and a log line
    /// naming them: such a report is never summed or passed on.
    func believableUsage(_ reported: ModelUsage, session: isolated AgentSession) -> ModelUsage {
        let (usage, rejected) = reported.sanitized()
        if !rejected.isEmpty {
            session.context.logger.warning("session \(session.id): ignored unbelievable usage from the model (\(rejected.joined(separator: ", ")); counts must be 0...\(ModelUsage.largestBelievableTokenCount))")
        }
        return usage
    }
}
