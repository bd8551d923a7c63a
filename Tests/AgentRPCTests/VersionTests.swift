import Foundation
import Testing
@testable import AgentRPC

/// The version is declared once, in the repository's `VERSION` file; the
/// server's copy (`agentrpc --version`, `serverInfo.version`) must agree with it.
/// `scripts/version --check` checks the clients' copies the same way.
@Suite struct VersionTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func serverVersionIsTheVersionFile() throws {
        let declared = try String(contentsOf: Self.packageRoot.appendingPathComponent("VERSION"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!declared.isEmpty)
        #expect(Server.version == declared, "VERSION says \(declared), Server.version \(Server.version): run scripts/version \(declared)")
    }
}
