import AgentRPCProtocol

extension TurnRunner {
    /// Generation options a provider could not take are warnings, never silence
    /// (docs/protocol.md, "Model options"): each goes to the client once per turn as
    /// a `contextDiagnostics` entry (source `modelOptions`), kept in
    /// `lastContextDiagnostics` (`contextDiagnostics`) like the turn's other diagnostics.
    func reportOptionWarnings(_ warnings: [OptionWarning], session: isolated AgentSession) {
        let fresh = warnings.filter { turn.reportedOptionWarnings.insert($0).inserted }
        guard !fresh.isEmpty else { return }
        let diagnostics = fresh.map(\.diagnostic)
        contextDiagnostics += diagnostics
        session.emit(.contextDiagnostics(diagnostics), turn: turn.id)
    }
}
