import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// Each provider kind is declared once (`ProviderFactory.definitions`), in its
/// own folder, and no provider's folder uses another provider's types.
@Suite struct ProviderRegistryTests {
    @Test func everyKindHasExactlyOneDefinition() {
        let kinds = ProviderFactory.definitions.map { $0.kind }
        #expect(kinds.count == Set(kinds).count, "a provider kind is declared twice: \(kinds)")
        let missing = ProviderKind.allCases.filter { ProviderFactory.definition(for: $0) == nil }
        #expect(missing.isEmpty, "provider kinds without a ProviderDefinition: \(missing)")
    }

    @Test func environmentModelsComeFromTheDefinitions() {
        let catalog = ModelCatalog.withEnvironmentDefaults(ModelCatalog(
            models: [:], defaultModel: nil, sourcePath: nil,
            environment: ["OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "ANTHROPIC_MODEL": "claude-x"]))
        #expect(catalog.models["openai"] == ModelConfig(provider: .openai, model: "gpt-4o-mini"))
        #expect(catalog.models["anthropic"] == ModelConfig(provider: .anthropic, model: "claude-x"))
        #expect(catalog.defaultModel == "openai")
    }

    @Test func noProviderFolderUsesAnotherProvidersTypes() throws {
        let providers = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/AgentRPC/Providers")
        let fm = FileManager.default
        let folders = try fm.contentsOfDirectory(atPath: providers.path).filter { name in
            var isDirectory: ObjCBool = false
            return fm.fileExists(atPath: providers.appendingPathComponent(name).path, isDirectory: &isDirectory) && isDirectory.boolValue
        }
        #expect(folders.count >= ProviderFactory.definitions.count)
        var sources: [String: String] = [:]
        var declared: [String: Set<String>] = [:]
        let declaration = try Regex(#"(?:struct|enum|class|actor|protocol)\s+([A-Z][A-Za-z0-9_]*)"#)
        for folder in folders {
            let dir = providers.appendingPathComponent(folder)
            var text = ""
            for file in try fm.contentsOfDirectory(atPath: dir.path) where file.hasSuffix(".swift") {
                text += try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8) + "\n"
            }
            sources[folder] = text
            declared[folder] = Set(text.matches(of: declaration).compactMap { $0.output[1].substring.map(String.init) })
        }
        for (folder, text) in sources {
            for (other, names) in declared where other != folder {
                // A name the folder declares too is its own (nested) type.
                for name in names.subtracting(declared[folder] ?? []) {
                    let use = try Regex("\\b\(name)\\b")
                    let found = text.firstMatch(of: use) != nil
                    #expect(!found, "Providers/\(folder) uses \(name), declared in Providers/\(other)")
                }
            }
        }
    }
}
