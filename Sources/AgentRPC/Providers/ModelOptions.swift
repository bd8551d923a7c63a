import AgentRPCProtocol

/// One generation option that was not sent as given, and why
/// (docs/protocol.md, "Model options"). Clients see it as a
/// `contextDiagnostics` entry with `source: "modelOptions"`.
struct OptionWarning: Sendable, Hashable {
    /// The option's key as the user wrote it (`seed`, `temperature`, `top_p`, ...).
    var key: String
    var message: String

    init(key: String, message: String) {
        self.key = key
        self.message = message
    }

    static let diagnosticSource = "modelOptions"

    var diagnostic: ContextDiagnostic {
        ContextDiagnostic(source: Self.diagnosticSource, message: "options.\(key): \(message)")
    }
}

/// A model's `options` (agentrpc.json `models.NAME.options`, or an inline
/// model's), read once when its provider is made (docs/protocol.md, "Model
/// options"). Three kinds of key:
/// * agentrpc's own settings (`streamTools`, ...), read here and never sent;
/// * the common generation options, the model's defaults: a send's or a
///   profile's options override them, and each provider spells them its way;
/// * every other key, passed through into the request body as written.
/// A value that cannot be used is a warning and is not sent; nothing here
/// ever throws, so a bad option never stops a model from answering.
struct ModelOptions: Sendable, Hashable {
    var temperature: Double?
    var maxOutputTokens: Int?
    var topP: Double?
    /// A string or an array of strings, as written.
    var stop: JSONValue?
    var seed: Int?
    var reasoningLevel: String?
    /// agentrpc's settings this provider reads, values already checked.
    var settings: [String: JSONValue] = [:]
    /// Keys sent as written, below everything agentrpc sets itself.
    var passThrough: [String: JSONValue] = [:]
    /// Values that could not be read; none of them is sent.
    var warnings: [OptionWarning] = []

    /// The most output tokens any request may ask for (2^31 − 1): the APIs take
    /// 32-bit counts, and the thinking budget arithmetic stays far from overflow.
    static let maximumOutputTokens = Int(Int32.max)

    /// agentrpc's own settings, the providers that read them, and the type each
    /// takes: gathered from the providers' declarations (`ProviderDefinition.settings`).
    static let settingKinds: [String: (providers: Set<ProviderKind>, check: @Sendable (JSONValue) -> Bool, expected: String)] = {
        var kinds: [String: (providers: Set<ProviderKind>, check: @Sendable (JSONValue) -> Bool, expected: String)] = [:]
        for definition in ProviderFactory.definitions {
            for (key, setting) in definition.settings {
                kinds[key, default: ([], setting.check, setting.expected)].providers.insert(definition.kind)
            }
        }
        return kinds
    }()

    init() {}

    /// Reads `options` for a model of `provider`; `protectedKeys` are the body
    /// members that carry the conversation and the streaming contract, which
    /// no option may replace.
    init(_ options: [String: JSONValue], provider: ProviderKind, protectedKeys: Set<String>) {
        for (key, value) in options.sorted(by: { $0.key < $1.key }) {
            // An explicit null means "not set" (`reasoningSummary: null` means no summary).
            if value == .null && key != "reasoningSummary" { continue }
            func warn(_ message: String) { warnings.append(OptionWarning(key: key, message: message)) }
            switch key {
            case "temperature":
                if let n = value.numberValue { temperature = n } else { warn("must be a number; not sent") }
            case "topP":
                if let n = value.numberValue { topP = n } else { warn("must be a number; not sent") }
            case "maxOutputTokens":
                if let n = value.intValue { maxOutputTokens = n } else { warn("must be an integer; not sent") }
            case "seed":
                if let n = value.intValue { seed = n } else { warn("must be an integer; not sent") }
            case "stop":
                if Self.isStop(value) { stop = value } else { warn("must be a string or an array of strings; not sent") }
            case "reasoningLevel", "reasoningEffort":
                guard let s = value.stringValue else { warn("must be a string; not sent"); continue }
                // `reasoningLevel` is the name profiles and sends use; it wins when both are given.
                if key == "reasoningLevel" || reasoningLevel == nil { reasoningLevel = s }
            default:
                if let kind = Self.settingKinds[key] {
                    if !kind.providers.contains(provider) {
                        let readers = kind.providers.map(\.rawValue).sorted().joined(separator: ", ")
                        warn("a setting of the \(readers) provider only; ignored for \(provider.rawValue)")
                    } else if kind.check(value) {
                        settings[key] = value
                    } else {
                        warn("must be \(kind.expected); the default is used")
                    }
                } else if protectedKeys.contains(key) {
                    warn("agentrpc writes \(key) itself; not sent")
                } else {
                    passThrough[key] = value
                }
            }
        }
    }

    static func isStop(_ value: JSONValue) -> Bool {
        if value.stringValue != nil { return true }
        guard let items = value.arrayValue else { return false }
        return items.allSatisfy { $0.stringValue != nil }
    }

    /// The options one request goes out with: the request's (a send's, a
    /// profile's) over the model's, each checked against what `provider` takes.
    /// A value it cannot take is left out, with a warning.
    func resolved(_ request: GenerationOptions, provider: ProviderKind, supportsReasoning: Bool) -> ResolvedGenerationOptions {
        var out = ResolvedGenerationOptions()
        func warn(_ key: String, _ message: String) { out.warnings.append(OptionWarning(key: key, message: message)) }
        let name = provider.rawValue

        let rules = ProviderFactory.definition(for: provider)?.optionRules ?? GenerationOptionRules()

        if let n = request.maxOutputTokens ?? maxOutputTokens {
            if (1...Self.maximumOutputTokens).contains(n) {
                out.maxOutputTokens = n
            } else {
                warn("maxOutputTokens", "\(n) is not between 1 and \(Self.maximumOutputTokens); \(rules.outOfRangeMaxOutputTokens)")
            }
        }
        let temperatureRange = rules.temperatureRange
        if let t = request.temperature ?? temperature {
            if temperatureRange.contains(t) {
                out.temperature = t
            } else {
                warn("temperature", "\(t) is outside \(name)'s range \(temperatureRange.lowerBound)…\(temperatureRange.upperBound); not sent")
            }
        }
        if let p = topP {
            if (0...1).contains(p) { out.topP = p } else { warn("topP", "\(p) is outside 0…1; not sent") }
        }
        if let stop {
            if let refusal = rules.stopRefusal {
                warn("stop", refusal)
            } else {
                out.stop = stop
            }
        }
        if let seed {
            if rules.takesSeed { out.seed = seed } else { warn("seed", "\(name) takes no seed; not sent") }
        }
        if let level = request.reasoningLevel ?? reasoningLevel, !level.isEmpty {
            if let reasoning = rules.reasoning {
                reasoning(level, supportsReasoning, &out)
            } else {
                out.reasoningLevel = level
            }
        }
        return out
    }
}

/// The common generation options of one request, as one provider takes them.
struct ResolvedGenerationOptions {
    var temperature: Double?
    var maxOutputTokens: Int?
    var topP: Double?
    var stop: JSONValue?
    var seed: Int?
    var reasoningLevel: String?
    var warnings: [OptionWarning] = []
}

extension HTTPProviderConfiguration {
    /// The model's options under `request`'s, for `provider`.
    func generationOptions(_ request: GenerationOptions, provider: ProviderKind) -> ResolvedGenerationOptions {
        modelOptions.resolved(request, provider: provider, supportsReasoning: capabilities.supportsReasoning)
    }

    /// Everything wrong with the options `request` goes out with: the model's
    /// unreadable values first, then what this provider cannot take.
    func optionWarnings(_ request: GenerationOptions, provider: ProviderKind) -> [OptionWarning] {
        modelOptions.warnings + generationOptions(request, provider: provider).warnings
    }
}

/// Adds the model's pass-through options to a body, under every member already in it.
func mergePassThrough(_ options: ModelOptions, into body: inout [String: JSONValue]) {
    for (key, value) in options.passThrough where body[key] == nil {
        body[key] = value
    }
}
