import AgentRPCProtocol
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
import Synchronization

/// Settings the command line hands to the server.
public struct ServerOptions: Sendable {
    public var maxMessageBytes: Int = 16 * 1024 * 1024
    public var logLevel: LogLevel = .off
    /// Where every provider request is appended as one JSON line (`--dump-requests`).
    public var dumpRequestsPath: String?
    /// Where the front end (`agentrpc serve`, `agentrpc acp`) records the conversation
    /// as a replayable transcript (`--record`); it hands the server its `recorder`.
    package var recordPath: String?
    /// Observes the conversation to record it (the recording tools' `TranscriptRecorder`).
    package var recorder: (any ConnectionRecorder)?
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
    /// Records or replays every session's model traffic (`--model-cassette`,
    /// docs/testing.md); wins over agentrpc.json's `modelCassette`.
    public var modelCassette: ModelCassetteConfig?
    /// Whether SIGTERM, SIGINT and SIGHUP end the server like the end of input
    /// (the `agentrpc` binary); a library host keeps its own signal handling.
    public var handleTerminationSignals = false
    /// How long the server waits at the end (end of input, `exit`, a signal)
    /// for running turns to stop and roll back (a `tool/undo` the client must
    /// answer) before it exits regardless.
    public var shutdownGraceSeconds: Double = 10
    /// How long the server waits at the end for a slow client to read what is
    /// already queued (answers included) before it exits regardless.
    public var flushTimeoutSeconds: Double = 10
    /// Whether the process ends itself (`_exit`, status 124, `ExitWatchdog`)
    /// when its exit overruns `exitBoundSeconds`, whatever is stuck: the
    /// `agentrpc` binary's. Off for a library host: its process is not the
    /// server's to end.
    public var exitWatchdog = false
    /// The most the whole exit may take, from its start (the end of input is
    /// read, `exit` is read, a signal arrives) to the end of the process. By
    /// default the two waits above plus `exitSlackSeconds`; a test sets a small one.
    public var exitBoundSeconds: Double {
        get { exitBoundOverride ?? shutdownGraceSeconds + flushTimeoutSeconds + Self.exitSlackSeconds }
        set { exitBoundOverride = newValue }
    }
    private var exitBoundOverride: Double?
    /// What the exit does besides its two bounded waits: stopping MCP servers
    /// (one that ignores its closed input and SIGTERM takes 2 × 2 s before
    /// SIGKILL, all at once), closing journals, waiting for the last answers
    /// (at least 0.5 s). 10 s covers them with room to spare, so only an exit
    /// that is stuck, never one that is merely slow, is cut short.
    public static let exitSlackSeconds: Double = 10
    public var environment: [String: String] = ProcessEnvironment.current()

    public init() {}
}

/// The agentrpc server: lifecycle rules around the dispatcher and the engine.
public final class Server: Sendable {
    public let options: ServerOptions
    let connection: Connection
    let logger: Logger
    let dispatcher: Dispatcher
    let engine: Engine
    /// Lifecycle, exit and signal state, shared with the method handlers.
    private let shared = ServerState()
    private let recorder: (any ConnectionRecorder)?
    /// Ends the process if the exit overruns `options.exitBoundSeconds` (nil: a library host).
    private let watchdog: ExitWatchdog?

    enum Lifecycle: Sendable, Equatable {
        case awaitingInitialize
        case running
        case shutDown
    }

    /// `ownsDescriptors`: the server closes `inputFD` once it has read to its
    /// end, and `outputFD` once it has written its last frame (for descriptors
    /// made for it, such as one end of a pipe: closed by their maker while the
    /// server still reads or writes, their numbers could name another file).
    public init(options: ServerOptions, inputFD: Int32 = 0, outputFD: Int32 = 1, ownsDescriptors: Bool = false) throws {
        // A client that closed its end must surface as a write error, never kill us.
        signal(SIGPIPE, SIG_IGN)
        self.options = options
        let logger = Logger(level: options.logLevel)
        self.logger = logger
        FileLimit.raiseSoftLimit(logger: logger)
        let recorder = options.recorder
        self.recorder = recorder
        let watchdog = options.exitWatchdog ? try ExitWatchdog(boundSeconds: options.exitBoundSeconds) : nil
        self.watchdog = watchdog
        var endOfInput: (@Sendable () -> Void)?
        if let watchdog { endOfInput = { watchdog.arm(.endOfInput) } }
        let connection = try Connection(
            inputFD: inputFD, outputFD: outputFD, maxMessageBytes: options.maxMessageBytes, logger: logger, recorder: recorder,
            endOfInput: endOfInput, killSwitch: try TestKillSwitch.from(environment: options.environment, variable: "AGENTRPC_TEST_KILL_AT_FRAME"),
            ownsDescriptors: ownsDescriptors)
        self.connection = connection
        let shared = self.shared
        self.dispatcher = Dispatcher(connection: connection, logger: logger) { method in
            // Each method declares when it is accepted (`RPCMethod.lifecycle`). A name
            // nobody declares is treated like most methods, and then not found; `$/`
            // names are protocol plumbing, never refused for shutting down.
            let accepted = MethodRegistry.lifecycle(of: method)
                ?? MethodLifecycle(beforeInitialize: false, whileRunning: true, afterShutdown: method.hasPrefix("$/"))
            switch shared.lifecycle.withLock({ $0 }) {
            case .awaitingInitialize:
                if accepted.beforeInitialize { return nil }
                return RPCError(.notInitialized, "the first request must be 'initialize'")
            case .running:
                if accepted.whileRunning { return nil }
                return RPCError(.invalidRequest, "'\(method)' was already received")
            case .shutDown:
                // After shutdown, reads still work; anything that starts work is refused.
                if accepted.afterShutdown { return nil }
                return RPCError(.invalidRequest, "the server is shutting down")
            }
        }
        let engine = try Engine(options: options, connection: connection, logger: logger)
        self.engine = engine
        // A progress report the client sent before its call's answer must reach
        // the session before that answer does, and answers are settled on the
        // reader: so is the report.
        connection.handleInOrder(ToolProgressNotification.name) { raw in
            guard let params = try? decodeParams(raw, as: ToolProgressNotification.Params.self, strictKeys: false,
                                                 errorKindForField: { _ in .invalidParams }) else { return }
            engine.reportToolProgress(params)
        }
        dispatcher.install(buildMethodTable())
    }

    /// Serves until the client goes away or sends `exit`; returns the exit code.
    public func run() async -> Int32 {
        do {
            try connection.start()
        } catch {
            // Nothing was read, so nothing was started: said whatever the log level.
            FileDescriptorOutput.standardError("agentrpc: \(error)\n")
            await engine.closeAll()
            logger.flush()
            return Self.refusedThreadStatus
        }
        let exitSignal = AsyncStream.makeStream(of: Void.self)
        shared.exitWatcher.withLock { $0 = exitSignal.continuation }
        let dispatcher = self.dispatcher
        // Installed once `exit` can be signalled, so an early signal is not lost.
        if options.handleTerminationSignals { installSignalHandlers() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await dispatcher.run() }
            group.addTask { for await _ in exitSignal.stream { return } }
            await group.next()
            group.cancelAll()
        }
        // End of input, `exit` or a signal: nothing read from now on starts;
        // every turn is cancelled (they roll back), answered, and flushed.
        dispatcher.stop()
        let clean = shared.exitRequested.withLock { $0 }
        let engine = self.engine
        let cause = shared.stopCause.withLock { $0 } ?? (clean == nil ? "the client closed its input" : "exit")
        // Already armed by whatever started the exit (the reader thread, the signal
        // handler, `exit`); this only covers an end the dispatcher found by itself.
        watchdog?.arm(clean == nil ? .endOfInput : .exit)
        logger.info("shutting down: \(cause)")
        watchdog?.reached(.stoppingTurns)
        let deadline = ContinuousClock.now.advanced(by: .seconds(options.shutdownGraceSeconds))
        if await !Self.finishes(by: deadline, { await engine.shutdownAll(reason: cause) }) {
            logger.warning("turns still running after \(options.shutdownGraceSeconds) s; exiting without them")
        }
        watchdog?.reached(.closingSessions)
        if watchdog != nil, ExitWatchdog.hangsForTests(options.environment) {
            logger.info("AGENTRPC_TEST_HANG_AT_EXIT=1: this exit hangs for good (a test of the exit watchdog)")
            ExitWatchdog.hangForTests()
        }
        // Whatever was committed is made durable and every journal's lock released.
        await engine.closeAll()
        watchdog?.reached(.answering)
        dispatcher.cancelAll()
        let left = ContinuousClock.now.duration(to: deadline)
        await dispatcher.waitForIdle(timeoutSeconds: max(0.5, Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18))
        watchdog?.reached(.flushing)
        engine.tracer.close()
        connection.flush(timeoutSeconds: options.flushTimeoutSeconds)
        watchdog?.reached(.exiting)
        logger.info("output queue peak \(connection.peakOutputQueueBytes) bytes (bound \(connection.outputQueueBytes))")
        recorder?.serverExiting(code: clean ?? 0)
        logger.flush()
        // The watchdog stays armed: it also bounds what the process does after this returns.
        return clean ?? 0
    }

    /// The exit status when the system refuses a thread the server needs for its
    /// whole life (the input reader, the output writer, the deadline watcher, the
    /// exit watchdog): the server does not start (docs/protocol.md, "Ending").
    public static let refusedThreadStatus: Int32 = 1

    /// Runs `work` and waits for it until `deadline`; true if it finished. Work
    /// that overruns is left running (the process is about to exit).
    static func finishes(by deadline: ContinuousClock.Instant, _ work: @escaping @Sendable () async -> Void) async -> Bool {
        // The first of the two answers is kept; the stream drops the other.
        let (answers, answer) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingOldest(1))
        Task {
            await work()
            answer.yield(true)
        }
        Task {
            try? await Task.sleep(until: deadline, clock: .continuous)
            answer.yield(false)
        }
        for await finished in answers { return finished }
        return false
    }

    /// SIGTERM, SIGINT and SIGHUP end the server as the end of input does
    /// (docs/protocol.md §2); a second one ends the process at once.
    private func installSignalHandlers() {
        for number in [SIGTERM, SIGINT, SIGHUP] {
            let source = SignalSource(number) { [weak self] count in self?.received(signal: number, count: count) }
            shared.signalSources.withLock { $0.append(source) }
        }
    }

    private func received(signal number: Int32, count: Int) {
        let total = shared.signalsReceived.withLock { n -> Int in
            n += count
            return n
        }
        if total > 1 {
            // Asked twice: no more waiting. 128 + N is how shells report a death by signal N.
            _exit(128 + number)
        }
        // First, before anything here can wait: the exit is bounded from now on.
        watchdog?.arm(.signal(number))
        logger.info("received signal \(number)")
        // Nothing after the signal starts, as after the end of input.
        dispatcher.stop()
        shared.stopCause.withLock { $0 = "signal \(number)" }
        shared.exitWatcher.withLock { $0?.finish() }
    }

    private func buildMethodTable() -> MethodTable {
        var table = MethodTable.Builder()
        let engine = self.engine
        let options = self.options
        let shared = self.shared
        let watchdog = self.watchdog

        table.on(InitializeRequest.self) { params, _ in
            guard params.protocolVersion >= 1 else {
                throw RPCError.invalidParams("protocolVersion \(params.protocolVersion) is not supported; this server speaks 1", field: "protocolVersion")
            }
            await engine.setClient(capabilities: params.capabilities ?? ClientCapabilities(), info: params.clientInfo)
            shared.lifecycle.withLock { $0 = .running }
            // Version negotiation: we answer with the highest version we both speak.
            return .now(InitializeResult(
                protocolVersion: min(params.protocolVersion, InitializeRequest.protocolVersion),
                serverInfo: ServerInfo(name: "agentrpc", version: Server.version),
                capabilities: ServerCapabilities(
                    providers: Engine.providerNames, store: engine.storeLocation != nil, storeDirectory: engine.storeLocation,
                    maxMessageBytes: options.maxMessageBytes)))
        }
        table.on(ShutdownRequest.self) { _, _ in
            shared.lifecycle.withLock { $0 = .shutDown }
            return .later {
                await engine.shutdownAll(reason: "shutdown")
                try await engine.syncAll()
                return NullResult()
            }
        }
        let dispatcher = self.dispatcher
        table.onNotification(ExitNotification.self) { _ in
            // Before anything else: what the client wrote after `exit` must not start.
            dispatcher.stop()
            watchdog?.arm(.exit)
            let code: Int32 = shared.lifecycle.withLock { $0 } == .shutDown ? 0 : 1
            shared.exitRequested.withLock { $0 = code }
            shared.exitWatcher.withLock { $0?.finish() }
        }
        engine.register(into: &table)
        return table.build()
    }
}

/// The server's mutable state. A class, so that the method handlers (closures)
/// can share it: a `Mutex` itself cannot be captured.
final class ServerState: Sendable {
    let lifecycle = Mutex(Server.Lifecycle.awaitingInitialize)
    /// Set by the `exit` notification: the code to exit with.
    let exitRequested = Mutex<Int32?>(nil)
    let exitWatcher = Mutex<AsyncStream<Void>.Continuation?>(nil)
    /// Why the server stops, when not end of input or `exit` (a signal).
    let stopCause = Mutex<String?>(nil)
    let signalSources = Mutex<[SignalSource]>([])
    let signalsReceived = Mutex(0)
}
