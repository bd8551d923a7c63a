import AgentRPCProtocol

/// What a session's selectors offer, the same for every session of this
/// process: the models, and the profiles of `acp.session.profiles` when they
/// have a selector.
struct OptionCatalog: Sendable {
    struct Model: Sendable {
        var name: String
        var description: String?
    }
    struct Profiles: Sendable {
        /// The session property that selects the profile.
        var selector: String
        var cases: [String]
        var descriptions: [String: String]
    }
    var models: [Model]
    var profiles: Profiles?

    /// The config option ids, declared once.
    static let modeOption = "mode"
    static let modelOption = "model"
    static let profileOption = "profile"
}

extension ACPSession {
    /// `modes` of the session's answers: the permission modes.
    var modesJSON: JSONValue {
        [
            "currentModeId": .string(permissionMode.rawValue),
            "availableModes": .array(PermissionMode.allCases.map { mode in
                ["id": .string(mode.rawValue), "name": .string(mode.name), "description": .string(mode.description)]
            }),
        ]
    }

    /// `configOptions`: the permission mode (kept in step with `modes`), the
    /// model, and the configured profiles when there are any, in that order.
    var configOptionsJSON: JSONValue {
        var options: [JSONValue] = [
            Self.select(OptionCatalog.modeOption, name: "Mode", category: "mode", current: permissionMode.rawValue,
                        values: PermissionMode.allCases.map { ($0.rawValue, $0.name, $0.description) }),
        ]
        var models = catalog.models.map { ($0.name, $0.name, $0.description) }
        let currentModel = model ?? catalog.models.first?.name ?? ""
        if !models.contains(where: { $0.0 == currentModel }) { models.append((currentModel, currentModel, nil)) }
        options.append(Self.select(OptionCatalog.modelOption, name: "Model", category: "model", current: currentModel, values: models))
        if let profiles = catalog.profiles {
            options.append(Self.select(OptionCatalog.profileOption, name: "Profile", category: nil,
                                       current: profile ?? profiles.cases.first ?? "",
                                       values: profiles.cases.map { ($0, $0, profiles.descriptions[$0]) }))
        }
        return .array(options)
    }

    private static func select(_ id: String, name: String, category: String?, current: String, values: [(String, String, String?)]) -> JSONValue {
        var option: [String: JSONValue] = [
            "id": .string(id), "name": .string(name), "type": "select", "currentValue": .string(current),
            "options": .array(values.map { value, name, description in
                var o: [String: JSONValue] = ["value": .string(value), "name": .string(name)]
                if let description { o["description"] = .string(description) }
                return .object(o)
            }),
        ]
        if let category { option["category"] = .string(category) }
        return .object(option)
    }
}
