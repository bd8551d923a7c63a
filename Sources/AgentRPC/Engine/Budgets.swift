import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where a token or cost limit applies: one turn (`limits`, `options.limits`)
/// or the session's whole life (`budget`).
enum BudgetScope: String, Sendable {
    case turn
    case session

    /// Where the limit is configured, for messages and `data.field`.
    var field: String { self == .turn ? "limits" : "budget" }
}

/// One of the four limits of a `Budget`, and how much of it a `Usage` uses.
enum BudgetMeasure: String, CaseIterable, Sendable {
    case maxInputTokens, maxOutputTokens, maxTotalTokens, maxCostUSD

    func limit(in budget: Budget) -> Double? {
        switch self {
        case .maxInputTokens: return budget.maxInputTokens.map(Double.init)
        case .maxOutputTokens: return budget.maxOutputTokens.map(Double.init)
        case .maxTotalTokens: return budget.maxTotalTokens.map(Double.init)
        case .maxCostUSD: return budget.maxCostUSD
        }
    }

    /// Tokens as the provider reported them (`inputTokens`, `outputTokens`,
    /// their sum); the cost as priced.
    func used(_ usage: Usage) -> Double {
        switch self {
        case .maxInputTokens: return Double(usage.inputTokens ?? 0)
        case .maxOutputTokens: return Double(usage.outputTokens ?? 0)
        case .maxTotalTokens: return Double(usage.inputTokens ?? 0) + Double(usage.outputTokens ?? 0)
        case .maxCostUSD: return usage.costUSD ?? 0
        }
    }

    var what: String {
        switch self {
        case .maxInputTokens: return "input tokens"
        case .maxOutputTokens: return "output tokens"
        case .maxTotalTokens: return "tokens"
        case .maxCostUSD: return "US dollars"
        }
    }

    /// A figure as the wire carries it: tokens as integers, dollars as numbers.
    func json(_ value: Double) -> JSONValue {
        guard self != .maxCostUSD, value.isFinite, abs(value) < 9e15 else { return .double(value) }
        return .int(Int(value))
    }
}

enum BudgetCheck {
    /// The first limit of `budget` that `used` passes: before a request, one
    /// already reached (the request would pass it); as usage arrives, one passed.
    static func exceeded(_ budget: Budget, used: Usage, scope: BudgetScope, beforeRequest: Bool) -> RPCError? {
        for measure in BudgetMeasure.allCases {
            guard let limit = measure.limit(in: budget) else { continue }
            let figure = measure.used(used)
            guard beforeRequest ? figure >= limit : figure > limit else { continue }
            let whose = scope == .turn ? "the turn" : "the session"
            let message = beforeRequest
                ? "\(whose) has used \(format(figure, measure)) \(measure.what) of its limit of \(format(limit, measure)) (\(scope.field).\(measure.rawValue)); no further model request is made"
                : "\(whose) used \(format(figure, measure)) \(measure.what), more than its limit of \(format(limit, measure)) (\(scope.field).\(measure.rawValue))"
            return RPCError(.budgetExceeded, message, data: [
                "limit": measure.json(limit), "used": measure.json(figure), "scope": .string(scope.rawValue), "name": .string(measure.rawValue),
            ])
        }
        return nil
    }

    private static func format(_ value: Double, _ measure: BudgetMeasure) -> String {
        if measure == .maxCostUSD { return String(cFormat: "%.6g", value) }
        return value.isFinite && abs(value) < 9e15 ? String(Int(value)) : String(value)
    }
}

extension TurnRunner {
    /// The session's budget and the turn's token and cost limits, checked
    /// against what was used: the session's totals and this turn's usage, plus
    /// `pending`, the report of the request streaming now. Before a request
    /// (`pending` nil) a limit already reached stops it; as usage arrives a
    /// limit passed ends the turn. A cost limit needs the model's pricing: a
    /// request to a model without one is refused before it is sent.
    func checkBudgets(pending: Usage? = nil, provider: any ModelProvider, session: isolated AgentSession) throws {
        let sessionBudget = session.config.budget ?? Budget()
        let turnBudget = turn.limits.budget
        if pending == nil, provider.capabilities.pricing == nil {
            for (budget, scope) in [(turnBudget, BudgetScope.turn), (sessionBudget, .session)] where budget.maxCostUSD != nil {
                throw RPCError.invalidConfiguration(
                    "\(scope.field).maxCostUSD needs the model's pricing, and the model of this request has none", field: "\(scope.field).maxCostUSD")
            }
        }
        var turnUsed = turn.usage
        if let pending { turnUsed.add(pending) }
        var sessionUsed = session.transcript.usageTotals
        sessionUsed.add(turnUsed)
        if let error = BudgetCheck.exceeded(turnBudget, used: turnUsed, scope: .turn, beforeRequest: pending == nil)
            ?? BudgetCheck.exceeded(sessionBudget, used: sessionUsed, scope: .session, beforeRequest: pending == nil)
        {
            throw error
        }
    }
}
