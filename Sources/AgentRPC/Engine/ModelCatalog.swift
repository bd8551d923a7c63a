import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Named models from `agentrpc.json` (docs/protocol.md §15): `{"models": {"name": ModelConfig}, "defaultModel": "name"}`.
/// Looked up at `--config PATH`, else `$AGENTRPC_CONFIG`, else `./agentrpc.json`.
package struct ModelCatalog: Sendable {
    package var models: [String: ModelConfig]
    package var defaultModel: String?
    package var sourcePath: String?
    package var environment: [String: String]
    /// The file's `acp` section, read by `agentrpc acp` (docs/acp.md); the engine ignores it.
    var acp: JSONValue? = nil
    /// The file's `store` section: retention of stored sessions.
    var store: StoreRetention? = nil
    /// Named MCP servers (`"mcpServers": {"name": {...}}`) sessions and profiles refer to.
    var mcpServers: [String: MCPServerSpec] = [:]
    /// The file's `modelCassette`: records or replays every session's model traffic.
    var modelCassette: ModelCassetteConfig? = nil

    struct File: Codable, Sendable {
        var models: [String: ModelConfig]?
        var defaultModel: String?
        var acp: JSONValue?
        var store: StoreRetention?
        /// Each value is an `MCPServerSpec` whose `name` defaults to its key; keys
        /// of other MCP clients are accepted (`MCPServerSpec.ignoredKeys`).
        var mcpServers: [String: JSONValue]?
        var modelCassette: ModelCassetteConfig?
    }

    package static func load(explicitPath: String?, environment: [String: String]) throws -> ModelCatalog {
        let candidates: [(String, Bool)] = [
            explicitPath.map { ($0, true) },
            environment["AGENTRPC_CONFIG"].map { ($0, true) },
            ("agentrpc.json", false),
        ].compactMap { $0 }
        for (path, required) in candidates {
            guard FileManager.default.fileExists(atPath: path) else {
                if required { throw RPCError.invalidConfiguration("config file \(path) does not exist") }
                continue
            }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw RPCError.invalidConfiguration("config file \(path) cannot be read")
            }
            let file: File
            do {
                file = try JSONValue.parse(Array(data)).decode(as: File.self, rejectUnknownKeys: true)
            } catch let failure as JSONDecodingFailure {
                throw RPCError.invalidConfiguration("\(path): \(failure)", field: failure.path)
            } catch {
                throw RPCError.invalidConfiguration("\(path) is not valid JSON: \(error)")
            }
            // The same checks as an inline model, so a duration out of range is named here
            // rather than trapping a clock later.
            for (name, model) in (file.models ?? [:]).sorted(by: { $0.key < $1.key }) {
                if let problem = SessionConfig(model: .inline(model)).validate().first {
                    let field = "models.\(name)" + problem.path.dropFirst("model".count)
                    throw RPCError.invalidConfiguration("\(path): \(field): \(problem.message)", field: field)
                }
            }
            if let d = file.defaultModel, file.models?[d] == nil {
                throw RPCError.invalidConfiguration("\(path): defaultModel '\(d)' is not among the models", field: "defaultModel")
            }
            if let problem = file.store?.problem {
                throw RPCError.invalidConfiguration("\(path): \(problem.field): \(problem.message)", field: problem.field)
            }
            var servers: [String: MCPServerSpec] = [:]
            for (name, raw) in (file.mcpServers ?? [:]).sorted(by: { $0.key < $1.key }) {
                var object = raw.objectValue ?? [:]
                if object["name"] == nil { object["name"] = .string(name) }
                do {
                    // Other clients' keys (`timeout`, `envFile`, ...) are warnings, not errors.
                    guard case .inline(let spec) = try JSONValue.object(object).decode(as: MCPServerEntry.self, rejectUnknownKeys: true) else {
                        throw RPCError.invalidConfiguration("\(path): mcpServers.\(name) is not an object", field: "mcpServers.\(name)")
                    }
                    let problems = (spec.name == name ? [] : [ConfigProblem(path: ".name", message: "must be '\(name)', the key it is under")])
                        + spec.problems(at: "")
                    if let problem = problems.first {
                        throw RPCError.invalidConfiguration("\(path): mcpServers.\(name)\(problem.path): \(problem.message)", field: "mcpServers.\(name)\(problem.path)")
                    }
                    servers[name] = spec
                } catch let failure as JSONDecodingFailure {
                    throw RPCError.invalidConfiguration("\(path): mcpServers.\(name): \(failure)", field: "mcpServers.\(name)")
                }
            }
            var catalog = ModelCatalog(models: file.models ?? [:], defaultModel: file.defaultModel, sourcePath: path, environment: environment, acp: file.acp, store: file.store)
            catalog.mcpServers = servers
            catalog.modelCassette = file.modelCassette
            return withEnvironmentDefaults(catalog)
        }
        return withEnvironmentDefaults(ModelCatalog(models: [:], defaultModel: nil, sourcePath: nil, environment: environment))
    }

    /// Environment defaults: each provider may bring a model when its API key is
    /// in the environment (`ProviderDefinition.environmentModel`: `openai` with
    /// `OPENAI_API_KEY`, `anthropic` with `ANTHROPIC_API_KEY`). Names in the file
    /// win; the first available becomes the default model when the file names none.
    package static func withEnvironmentDefaults(_ catalog: ModelCatalog) -> ModelCatalog {
        var c = catalog
        var added: [String] = []
        for definition in ProviderFactory.definitions {
            guard let (name, config) = definition.environmentModel(c.environment), c.models[name] == nil else { continue }
            c.models[name] = config
            added.append(name)
        }
        if c.defaultModel == nil { c.defaultModel = added.first }
        return c
    }

    /// The configuration a reference names; `field` says where the reference was.
    package func resolve(_ reference: ModelReference, field: String) throws -> ModelConfig {
        switch reference {
        case .inline(let config):
            return config
        case .named(let name):
            guard let config = models[name] else {
                let known = models.keys.sorted()
                let where_ = sourcePath.map { "in \($0)" } ?? "(no agentrpc.json was found)"
                throw RPCError.invalidConfiguration(
                    "no model named '\(name)' \(where_)" + (known.isEmpty ? "" : "; known models: \(known.joined(separator: ", "))"),
                    field: field)
            }
            return config
        }
    }

    /// The reference a turn uses when neither the call nor the profile names one.
    var defaultReference: ModelReference? { defaultModel.map { .named($0) } }
}

extension ModelCatalog {
    /// A catalog of `models` alone (the chat starts from the environment's defaults).
    package init(models: [String: ModelConfig], defaultModel: String?, sourcePath: String?, environment: [String: String]) {
        self.models = models
        self.defaultModel = defaultModel
        self.sourcePath = sourcePath
        self.environment = environment
    }
}
