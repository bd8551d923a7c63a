import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

@Suite struct SchemaDriftTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func committedSchemaMatchesTheSwiftTypes() throws {
        let dir = Self.packageRoot.appendingPathComponent("schema")
        let docs = try SchemaExport.documents()
        var drift: [String] = []
        for (name, doc) in docs.sorted(by: { $0.key < $1.key }) {
            let committed = try? String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)
            if committed != SchemaExport.render(doc) { drift.append(name) }
        }
        let files = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        for f in files where f.hasSuffix(".json") && docs[f] == nil { drift.append("\(f) (stale)") }
        #expect(drift.isEmpty, "schema/ has drifted from the Swift types: \(drift.joined(separator: ", ")). Regenerate it with: swift build && .build/debug/agentrpc schema --out schema")
    }

    @Test func registryHasNoDuplicatesAndEveryRequestIsServed() throws {
        #expect(MethodRegistry.duplicateNames().isEmpty)
    }
}
