import AgentRPCProtocol
import Foundation

/// Streamable HTTP (not yet wired): creating one fails, and the server is reported failed.
final class MCPHTTPTransport: MCPTransport {
    init(spec: MCPServerSpec, environment: [String: String], inbox: MCPInbox, logger: Logger) throws {
        throw MCPTransportError(description: "the streamable HTTP transport is not available in this build")
    }
    func send(_ message: JSONValue) async throws {}
    func close() async {}
    var stderrTail: [String] { [] }
    func negotiated(protocolVersion: String) {}
}
