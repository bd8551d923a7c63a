import AgentRPC
import AgentRPCProtocol
import AgentTools
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `agentrpc acp`: the Agent Client Protocol (version 1, newline-delimited
/// JSON-RPC on stdin/stdout) in front of the same engine, store, configuration
/// file and providers as `agentrpc serve` (docs/acp.md).
public enum ACPCommand {
    public static let usage = "usage: agentrpc acp [--config FILE] [--store DIR | --ephemeral] [--model NAME] [--log-level LEVEL] [--record FILE] [--dump-requests FILE] " + CassetteCommandLine.usage

    /// What the command line asked for.
    struct Options {
        var server = ServerOptions()
        var model: String?
    }

    /// Parses `acp`'s arguments; the error is a message for the person.
    static func parse(_ arguments: [String], environment: [String: String]) -> Result<Options, ACPUsageError> {
        var options = Options()
        options.server.environment = environment
        var cassette = CassetteCommandLine()
        let given: [(name: String, value: String?)]
        switch CommandLineOptions.scan(
            arguments, flags: ["--ephemeral"],
            valued: CassetteCommandLine.options.union(["--config", "--store", "--model", "--log-level", "--record", "--max-message-bytes", "--dump-requests"])) {
        case .success(let scanned): given = scanned
        case .failure(let problem): return .failure(ACPUsageError(message: problem.message))
        }
        for (name, value) in given {
            guard let v = value else {
                options.server.ephemeral = true
                continue
            }
            switch name {
            case "--config": options.server.configPath = v
            case "--store":
                guard !v.isEmpty else { return .failure(ACPUsageError(message: "--store needs a directory")) }
                options.server.storeDirectory = v
            case "--model": options.model = v
            case "--record": options.server.recordPath = v
            case "--dump-requests": options.server.dumpRequestsPath = v
            case _ where CassetteCommandLine.options.contains(name):
                if let problem = cassette.take(name, v) { return .failure(ACPUsageError(message: problem)) }
            case "--max-message-bytes":
                guard let n = Int(v), n > 0 else { return .failure(ACPUsageError(message: "--max-message-bytes needs a positive integer")) }
                options.server.maxMessageBytes = n
            default:
                guard let level = LogLevel(name: v) else { return .failure(ACPUsageError(message: "unknown log level '\(v)'")) }
                options.server.logLevel = level
            }
        }
        if options.server.logLevel == .off, let name = environment["AGENTRPC_LOG"], let level = LogLevel(name: name) {
            options.server.logLevel = level
        }
        switch cassette.config() {
        case .success(let config): options.server.modelCassette = config
        case .failure(let error): return .failure(ACPUsageError(message: error.message))
        }
        if options.server.ephemeral && options.server.storeDirectory != nil {
            return .failure(ACPUsageError(message: "--store and --ephemeral exclude each other"))
        }
        return .success(options)
    }

    /// Serves one editor on stdin/stdout until it closes its end; returns the
    /// exit status (0; 2 for a usage or configuration error, said on stderr).
    public static func runCommandLine(arguments: [String], executable: String) async -> Int32 {
        let environment = ProcessEnvironment.current()
        let options: Options
        switch parse(arguments, environment: environment) {
        case .success(let parsed): options = parsed
        case .failure(let error):
            complain("\(error.message)\n\(usage)")
            return 2
        }
        // A closed stdout must surface as a write error, not kill the process.
        signal(SIGPIPE, SIG_IGN)
        let logger = Logger(level: options.server.logLevel)
        var recorder: TranscriptRecorder?
        if let path = options.server.recordPath {
            var args: [String] = []
            if let c = options.server.configPath { args += ["--config", c] }
            if let m = options.model { args += ["--model", m] }
            if options.server.ephemeral { args += ["--ephemeral"] }
            do {
                recorder = try TranscriptRecorder(fileAt: path, description: "recorded by agentrpc acp \(Server.version)", command: "acp", args: args)
            } catch {
                complain("cannot write the transcript \(path): \(error.localizedDescriptionLikeFoundation)")
                return 2
            }
        }
        // This process is the editor's child and ours: an exit that overruns its bound
        // ends it (status 124, docs/acp.md).
        let exitBound: Double
        switch ExitWatchdog.testBound(in: environment) {
        case .success(let bound): exitBound = bound ?? exitBoundSeconds(options.server)
        case .failure(let problem):
            complain(problem.message)
            return 2
        }
        let watchdog: ExitWatchdog
        let editor: Connection
        do {
            watchdog = try ExitWatchdog(boundSeconds: exitBound)
            editor = try Connection(
                inputFD: 0, outputFD: 1, maxMessageBytes: options.server.maxMessageBytes, logger: logger, framing: .newline,
                recorder: recorder, cancelRequestMethod: "$/cancel_request", endOfInput: { watchdog.arm(.endOfInput) })
        } catch {
            complain("\(error)")
            return Server.refusedThreadStatus
        }
        let sessions = ACPSessions()
        let agent: ACPAgent
        do {
            // The engine runs in this process and is spoken to in agentrpc's own protocol.
            let client = EngineClient(editor: editor, sessions: sessions, logger: logger)
            let engine = try await EmbeddedServer(
                options: options.server, channel: client, logger: logger,
                // Forms of MCP servers go to an editor that shows them (elicitation.form); the
                // engine starts before the editor says whether it does, so the others refuse each.
                client: ClientCapabilities(tools: true, confirmations: .request, hooks: false, contextSources: false, elicitation: true),
                clientInfo: ClientInfo(name: "agentrpc acp", version: Server.version))
            client.attach(engine)
            let configuration = try ACPConfiguration(section: engine.acpSection)
            if let name = options.model ?? configuration.model, !engine.modelNames.contains(name) {
                throw RPCError.invalidConfiguration("no model named '\(name)'" + (engine.configPath.map { " in \($0)" } ?? " (no agentrpc.json was found)")
                    + (engine.modelNames.isEmpty ? "" : "; known models: \(engine.modelNames.joined(separator: ", "))"))
            }
            agent = ACPAgent(editor: editor, engine: engine, sessions: sessions, configuration: configuration, logger: logger,
                             modelOverride: options.model, executable: executable, environment: environment,
                             shutdownGraceSeconds: options.server.shutdownGraceSeconds, watchdog: watchdog)
        } catch let error as RPCError {
            complain(error.message)
            return 2
        } catch {
            complain("\(error)")
            return 2
        }
        let signals = agent.installSignalHandlers()
        do {
            try editor.start()
        } catch {
            // Nothing was read from the editor; the engine started (its MCP servers may run): stop it.
            complain("\(error)")
            await agent.finish()
            logger.flush()
            withExtendedLifetime(signals) {}
            return Server.refusedThreadStatus
        }
        await agent.run()
        watchdog.arm(.endOfInput)
        logger.info("the editor closed its input; shutting down")
        watchdog.reached(.stoppingTurns)
        if ExitWatchdog.hangsForTests(environment) {
            logger.info("AGENTRPC_TEST_HANG_AT_EXIT=1: this exit hangs for good (a test of the exit watchdog)")
            ExitWatchdog.hangForTests()
        }
        await agent.finish()
        watchdog.reached(.flushing)
        editor.flush(timeoutSeconds: options.server.flushTimeoutSeconds)
        watchdog.reached(.exiting)
        recorder?.serverExiting(code: 0)
        logger.flush()
        withExtendedLifetime(signals) {}
        return 0
    }

    /// The most the whole exit may take: serve's bound plus the wait for the
    /// last answers, which serve does not have.
    package static func exitBoundSeconds(_ server: ServerOptions) -> Double {
        server.exitBoundSeconds + ACPAgent.requestsGraceSeconds
    }

    private static func complain(_ message: String) {
        FileDescriptorOutput.standardError("agentrpc acp: \(message)\n")
    }
}

/// A problem with the command line.
struct ACPUsageError: Error {
    var message: String
}
