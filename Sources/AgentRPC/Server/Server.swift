import AgentRPCProtocol
import Foundation
import Synchronization

/// Settings the command line hands to the server.
public struct ServerOptions: Sendable {
    public var maxMessageBytes: Int = 16 * 1024 * 1024
    public var logLevel: LogLevel = .off
    /// Where every provider request is appended as one JSON line (`--dump-requests`).
    public var dumpRequestsPath: String?
    /// Where the conversation is recorded as a replayable transcript (`--record`).
    public var recordPath: String?
    /// The model configuration file (`--config`, `AGENTRPC_CONFIG`, `./agentrpc.json`).
    public var configPath: String?
    /// Default for timeouts of server→client requests that have no limit of their own.
    public var clientRequestTimeoutSeconds: Double = 300
    /// Where finished spans go as OTLP/JSON lines (`--trace-file`).
    public var traceFilePath: String?
    /// Whether spans carry prompts, arguments and outputs (`--trace-payloads`).
    public var tracePayloads = false
    /// At most this many loaded sessions; more is `overloaded`.
    public var maxSessions: Int = 10_000
    /// Where sessions are stored (`--store`); nil: the default directory
    /// (`JournalStore.defaultDirectory`).
    public var storeDirectory: String?
    /// No store at all (`--ephemeral`): sessions live only in this process.
    public var ephemeral = false
    public var environment: [String: String] = ProcessInfo.processInfo.environment

    public init() {}
}

/// The agentrpc server: lifecycle rules around the dispatcher and the engine.
public final class Server: Sendable {
    public static let version = "0.1.0"

    public let options: ServerOptions
    let connection: Connection
    let logger: Logger
    let dispatcher: Dispatcher
    let engine: Engine
    private let lifecycle = LockedValue(Lifecycle.awaitingInitialize)
    /// Set by the `exit` notification: the code to exit with.
    private let exitRequested = LockedValue<Int32?>(nil)
    private let recorder: TranscriptRecorder?

    enum Lifecycle: Sendable, Equatable {
        case awaitingInitialize
        case running
        case shutDown
    }

    public init(options: ServerOptions, inputFD: Int32 = 0, outputFD: Int32 = 1) throws {
        // A client that closed its end must surface as a write error, never kill us.
        signal(SIGPIPE, SIG_IGN)
        self.options = options
        let logger = Logger(level: options.logLevel)
        self.logger = logger
        var recorder: TranscriptRecorder? = nil
        if let path = options.recordPath {
            // Record the options that change behaviour, so a replay runs the same server.
            var args: [String] = []
            if options.maxMessageBytes != ServerOptions().maxMessageBytes { args += ["--max-message-bytes", String(options.maxMessageBytes)] }
            if let c = options.configPath { args += ["--config", c] }
            // Where the store is differs per machine; a replay gets a fresh one. Its absence does not.
            if options.ephemeral { args += ["--ephemeral"] }
            recorder = try TranscriptRecorder(fileAt: path, description: "recorded by agentrpc \(Server.version)", args: args)
        }
        self.recorder = recorder
        let connection = Connection(inputFD: inputFD, outputFD: outputFD, maxMessageBytes: options.maxMessageBytes, logger: logger, recorder: recorder)
        self.connection = connection
        let lifecycle = self.lifecycle
        self.dispatcher = Dispatcher(connection: connection, logger: logger) { method in
            switch lifecycle.withLock({ $0 }) {
            case .awaitingInitialize:
                if method == InitializeRequest.name || method == ExitNotification.name { return nil }
                return RPCError(.notInitialized, "the first request must be 'initialize'")
            case .running:
                if method == InitializeRequest.name {
                    return RPCError(.invalidRequest, "'initialize' was already received")
                }
                return nil
            case .shutDown:
                if method == ExitNotification.name || method.hasPrefix("$/") { return nil }
                // After shutdown, reads still work; anything that starts work is refused.
                let allowed: Set<String> = [
                    "session/getState", "session/getTranscript", "session/list", "session/close", ShutdownRequest.name,
                ]
                if allowed.contains(method) { return nil }
                return RPCError(.invalidRequest, "the server is shutting down")
            }
        }
        self.engine = try Engine(options: options, connection: connection, logger: logger)
        dispatcher.install(buildMethodTable())
    }

    /// Serves until the client goes away or sends `exit`; returns the exit code.
    public func run() async -> Int32 {
        connection.start()
        let exitSignal = AsyncStream.makeStream(of: Void.self)
        let exitWatcher = self.exitWatcher
        exitWatcher.withLock { $0 = exitSignal.continuation }
        let dispatcher = self.dispatcher
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await dispatcher.run() }
            group.addTask { for await _ in exitSignal.stream { return } }
            await group.next()
            group.cancelAll()
        }
        // End of input, or `exit`: cancel every turn (they roll back), then leave.
        let clean = exitRequested.withLock { $0 }
        await engine.shutdownAll(reason: clean == nil ? "the client closed its input" : "exit")
        await engine.closeAll()
        dispatcher.cancelAll()
        await dispatcher.waitForIdle(timeoutSeconds: 0.5)
        engine.tracer.close()
        connection.flush(timeoutSeconds: 0.3)
        recorder?.serverExiting(code: clean ?? 0)
        logger.flush()
        return clean ?? 0
    }

    private let exitWatcher = LockedValue<AsyncStream<Void>.Continuation?>(nil)

    private func buildMethodTable() -> MethodTable {
        var table = MethodTable.Builder()
        let engine = self.engine
        let options = self.options
        let lifecycle = self.lifecycle

        table.on(InitializeRequest.self) { params, _ in
            guard params.protocolVersion >= 1 else {
                throw RPCError.invalidParams("protocolVersion \(params.protocolVersion) is not supported; this server speaks 1", field: "protocolVersion")
            }
            await engine.setClient(capabilities: params.capabilities ?? ClientCapabilities(), info: params.clientInfo)
            lifecycle.withLock { $0 = .running }
            // Version negotiation: we answer with the highest version we both speak.
            return .now(InitializeResult(
                protocolVersion: min(params.protocolVersion, InitializeRequest.protocolVersion),
                serverInfo: ServerInfo(name: "agentrpc", version: Server.version),
                capabilities: ServerCapabilities(
                    providers: Engine.providerNames, store: engine.storeLocation != nil, storeDirectory: engine.storeLocation,
                    maxMessageBytes: options.maxMessageBytes)))
        }
        table.on(ShutdownRequest.self) { _, _ in
            lifecycle.withLock { $0 = .shutDown }
            return .later {
                await engine.shutdownAll(reason: "shutdown")
                try await engine.syncAll()
                return NullResult()
            }
        }
        let exitRequested = self.exitRequested
        let exitWatcher = self.exitWatcher
        table.onNotification(ExitNotification.self) { _ in
            let code: Int32 = lifecycle.withLock { $0 } == .shutDown ? 0 : 1
            exitRequested.withLock { $0 = code }
            exitWatcher.withLock { $0?.finish() }
        }
        engine.register(into: &table)
        return table.build()
    }
}
