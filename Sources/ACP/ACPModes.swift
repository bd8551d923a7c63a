import AgentRPCProtocol

/// The permission modes every ACP session offers (as ACP session modes and as
/// the `mode` config option, kept in step), stored with the session.
enum PermissionMode: String, CaseIterable, Sendable {
    case ask
    case autoEdit = "auto-edit"
    case readOnly = "read-only"
    case fullAccess = "full-access"

    static let `default` = PermissionMode.ask

    var name: String {
        switch self {
        case .ask: "Ask"
        case .autoEdit: "Auto-edit"
        case .readOnly: "Read-only"
        case .fullAccess: "Full access"
        }
    }

    var description: String {
        switch self {
        case .ask: "Edits and commands ask before they run"
        case .autoEdit: "Edits run without asking; commands ask"
        case .readOnly: "Only tools that read are offered: nothing is changed"
        case .fullAccess: "Nothing asks"
        }
    }

    /// Whether a call the engine asks about runs without asking the user.
    func approvesWithoutAsking(_ tool: String) -> Bool {
        switch self {
        case .fullAccess: true
        case .autoEdit: BuiltinTool(rawValue: tool)?.isEdit == true
        case .ask, .readOnly: false
        }
    }

    /// `session/send` options of a prompt in this mode.
    var turnOptions: [String: JSONValue] { self == .readOnly ? ["readOnly": true] : [:] }
}

/// The session properties where the front end keeps what it is told to
/// remember, so a `session/load` or `session/resume`, in this process or
/// another, keeps it. Declared once: read at load, written when it changes.
enum ACPProperty {
    /// The model chosen with `session/set_config_option {configId: "model"}` (or `session/set_model`).
    static let model = "acpModel"
    /// The permission mode (`PermissionMode`).
    static let mode = "acpMode"
    /// The user's standing choices: `{"allow": [tool], "reject": [tool]}` (`allow_always`, `reject_always`).
    static let permissions = "acpPermissions"
}

/// The tools the user allowed or rejected for the rest of the session.
struct StandingChoices: Sendable, Equatable {
    var allow: Set<String> = []
    var reject: Set<String> = []

    init() {}

    init(_ value: JSONValue?) {
        allow = Set((value?["allow"]?.arrayValue ?? []).compactMap(\.stringValue))
        reject = Set((value?["reject"]?.arrayValue ?? []).compactMap(\.stringValue))
    }

    var json: JSONValue {
        ["allow": .array(allow.sorted().map(JSONValue.string)), "reject": .array(reject.sorted().map(JSONValue.string))]
    }
}
