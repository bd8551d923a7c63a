import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// The reference tables of docs/protocol.md §16 are checked against the
/// registries they describe, so a declared event or method cannot go undocumented.
@Suite struct ReferenceTableTests {
    static let protocolDoc = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/protocol.md")

    /// The rows of the markdown table that follows the line starting with `heading`.
    static func tableRows(after heading: String) throws -> [[String]] {
        let text = try String(contentsOf: protocolDoc, encoding: .utf8)
        let lines = text.components(separatedBy: "\n")
        guard let start = lines.firstIndex(where: { $0.hasPrefix(heading) }) else { return [] }
        var rows: [[String]] = []
        var inTable = false
        for line in lines[(start + 1)...] {
            if line.hasPrefix("|") {
                inTable = true
                let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                rows.append(cells.map { $0.trimmingCharacters(in: .whitespaces) })
            } else if inTable {
                break
            }
        }
        // Header and separator.
        return Array(rows.dropFirst(2))
    }

    /// `a, b?, c: [{x, y}]` → [("a", false), ("b", true), ("c", false)]: the top-level names.
    static func fieldNames(_ cell: String) -> [(name: String, optional: Bool)] {
        var parts: [String] = []
        var depth = 0
        var current = ""
        for c in cell.replacingOccurrences(of: "`", with: "").replacingOccurrences(of: "\\|", with: ",") {
            if "[{(".contains(c) { depth += 1 }
            if "]})".contains(c) { depth -= 1 }
            if c == ",", depth == 0 {
                parts.append(current)
                current = ""
            } else {
                current.append(c)
            }
        }
        parts.append(current)
        return parts.compactMap { part in
            let trimmed = part.trimmingCharacters(in: .whitespaces)
            let name = String(trimmed.prefix { $0.isLetter || $0.isNumber })
            guard !name.isEmpty else { return nil }
            return (name, trimmed.dropFirst(name.count).hasPrefix("?"))
        }
    }

    @Test func eventTableListsEveryRegisteredEventWithItsFields() throws {
        let rows = try Self.tableRows(after: "Events (`session/event` → `event.type`)")
        let documented = Dictionary(rows.map { ($0[0].replacingOccurrences(of: "`", with: ""), $0[1]) }, uniquingKeysWith: { a, _ in a })
        #expect(rows.count == documented.count, "an event is listed twice")
        #expect(Set(documented.keys) == Set(SessionEvent.registry.map { $0.type }), "docs/protocol.md §16 lists other events than SessionEvent.registry")
        let schema = try JSONSchemaGenerator.schema(for: SessionEvent.self)
        for alternative in schema["oneOf"]?.arrayValue ?? [] {
            guard let type = alternative["properties"]?["type"]?["const"]?.stringValue, let cell = documented[type] else { continue }
            let required = Set((alternative["required"]?.arrayValue ?? []).compactMap(\.stringValue))
            let expected = (alternative["properties"]?.objectValue ?? [:]).keys.filter { $0 != "type" }
                .map { "\($0)\(required.contains($0) ? "" : "?")" }.sorted()
            let listed = Self.fieldNames(cell).map { "\($0.name)\($0.optional ? "?" : "")" }.sorted()
            #expect(listed == expected, "docs/protocol.md §16, event `\(type)`: fields \(listed), the payload type has \(expected)")
        }
    }

    /// `{sessionId, input, options?}` → its names; `–` → none; nil for a type name (`TurnResult`) or `null`.
    static func documentedFields(_ cell: String) -> [String]? {
        let text = cell.replacingOccurrences(of: "`", with: "")
        if text == "–" { return [] }
        guard text.hasPrefix("{"), text.hasSuffix("}") else { return nil }
        return fieldNames(String(text.dropFirst().dropLast())).map { "\($0.name)\($0.optional ? "?" : "")" }.sorted()
    }

    /// The fields of a generated schema document's root object, `?` marking optional ones.
    static func schemaFields(_ document: JSONValue?) -> [String] {
        guard var root = document else { return [] }
        if let ref = root["$ref"]?.stringValue, let name = ref.split(separator: "/").last {
            root = document?["$defs"]?[String(name)] ?? [:]
        }
        let required = Set((root["required"]?.arrayValue ?? []).compactMap(\.stringValue))
        return (root["properties"]?.objectValue ?? [:]).keys.map { "\($0)\(required.contains($0) ? "" : "?")" }.sorted()
    }

    @Test func methodTablesListEveryDeclaredMethodWithItsFields() throws {
        let documents = try SchemaExport.documents()
        for (heading, direction) in [("Client → server", MethodDirection.clientToServer), ("Server → client", .serverToClient)] {
            let rows = try Self.tableRows(after: heading)
            var documented: [String] = []
            for row in rows {
                let name = row[0].split(separator: "`", omittingEmptySubsequences: false).dropFirst().first.map(String.init) ?? row[0]
                documented.append(name)
                let isNotification = row[0].contains("(notification")
                let base = SchemaExport.fileBase(name)
                let paramsFile = isNotification && documents["\(base).notification.params.json"] != nil ? "\(base).notification.params.json" : "\(base).params.json"
                if let listed = Self.documentedFields(row[1]) {
                    #expect(listed == Self.schemaFields(documents[paramsFile]), "docs/protocol.md §16, `\(name)` params: \(listed), the schema has \(Self.schemaFields(documents[paramsFile]))")
                }
                if !isNotification, let listed = Self.documentedFields(row[2]) {
                    let result = documents["\(base).result.json"]
                    #expect(listed == Self.schemaFields(result), "docs/protocol.md §16, `\(name)` result: \(listed), the schema has \(Self.schemaFields(result))")
                }
            }
            let declared = MethodRegistry.requests.filter { $0.direction == direction }.map { $0.name }
                + MethodRegistry.notifications.filter { $0.direction == direction }.map { $0.name }
            #expect(Set(documented) == Set(declared), "docs/protocol.md §16 (\(heading)) lists \(documented.sorted()), MethodRegistry declares \(Set(declared).sorted())")
        }
    }
}
