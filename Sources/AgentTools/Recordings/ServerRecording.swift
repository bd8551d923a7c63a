import AgentRPC
import AgentRPCProtocol

// How a server's connection is recorded (`agentrpc serve --record`): the
// library's `Connection` reports every frame to a `ConnectionRecorder`.
extension TranscriptRecorder: ConnectionRecorder {
    package func framingDetected(_ framing: Framing) { connectionFraming(framing) }
    package func clientSent(frame: IncomingFrame, raw: [UInt8]) {
        // The recorder wants what the client wrote: parse it again as plain JSON.
        if let value = try? JSONValue.parse(raw) {
            clientSent(value)
        } else {
            serverReadMalformed(raw)
        }
    }
    package func inputClosed() { clientClosedInput() }

    /// The recorder of `agentrpc serve --record PATH` for a server with `options`.
    package static func serving(_ options: ServerOptions, at path: String) throws -> TranscriptRecorder {
        // Record the options that change behaviour, so a replay runs the same server.
        var args: [String] = []
        if options.maxMessageBytes != ServerOptions().maxMessageBytes { args += ["--max-message-bytes", String(options.maxMessageBytes)] }
        if let c = options.configPath { args += ["--config", c] }
        // Where the store is differs per machine; a replay gets a fresh one. Its absence does not.
        if options.ephemeral { args += ["--ephemeral"] }
        return try TranscriptRecorder(fileAt: path, description: "recorded by agentrpc \(Server.version)", args: args)
    }
}
