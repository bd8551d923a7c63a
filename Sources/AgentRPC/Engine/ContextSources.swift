import AgentRPCProtocol

/// The context sources a turn refreshes before it starts (`contextSources`).
extension TurnRunner {
    /// Asks the client for fresh context values; failures become diagnostics and
    /// the last good value stays.
    func refreshContextSources(session: isolated AgentSession) async {
        let sources = session.config.contextSources ?? []
        guard !sources.isEmpty else {
            contextDiagnostics = []
            return
        }
        var diagnostics: [ContextDiagnostic] = []
        if session.context.clientCapabilities.contextSources != true {
            diagnostics = sources.map { ContextDiagnostic(source: $0.name, message: "the client did not declare the contextSources capability") }
        } else {
            let params = ContextRefreshParams(sessionId: session.id, turnId: turn.id, sources: sources.map(\.name))
            do {
                let raw = try await session.context.channel.request(ContextRefreshRequest.name, try JSONValue(encoding: params), timeout: min(session.context.options.clientRequestTimeoutSeconds, 30, turn.limits.wallClockSeconds))
                let result = try raw.decode(as: ContextRefreshResult.self)
                for source in sources {
                    if let value = result.values[source.name] {
                        session.caches.contextValues[source.name] = value
                    } else {
                        diagnostics.append(ContextDiagnostic(source: source.name, message: "the client returned no value; the last good value is used"))
                    }
                }
            } catch is CancellationError {
                // The turn is being stopped: that is not a failure of the sources.
                return
            } catch {
                let why: String
                switch error {
                case OutgoingRequestError.timedOut(let s): why = "no answer within \(s) seconds"
                case OutgoingRequestError.rpc(let e): why = "the client failed: \(e.message)"
                default: why = "\(error)"
                }
                diagnostics = sources.map { ContextDiagnostic(source: $0.name, message: "\(why); the last good value is used") }
            }
        }
        contextDiagnostics = diagnostics
        if !diagnostics.isEmpty { session.emit(.contextDiagnostics(diagnostics), turn: turn.id) }
    }
}
