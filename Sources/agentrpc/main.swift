// Entry point: argument handling and wiring only. The server lives in AgentRPC.
import AgentRPC
import AgentRPCACP
import AgentTools
import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// Built when asked for (a global `let` here would be built at every start, two
/// `ServerOptions` with it).
var usage: String { """
    agentrpc \(Server.version) — a language-agnostic agent server speaking JSON-RPC 2.0 on stdio.

    USAGE
      agentrpc [serve] [options]     Serve one client on stdin/stdout (the default).
      agentrpc schema --out DIR      Write the JSON Schema of every method, notification and error.
      agentrpc replay FILE|DIR...    Replay recorded transcripts against this binary.
      agentrpc chat [options]        Talk with a model in the terminal (an offline demo without one).
      agentrpc sessions SUBCOMMAND   Stored sessions: list, show, delete, prune, export, import
                                     (agentrpc sessions --help).
      agentrpc acp [options]         Serve an editor over the Agent Client Protocol (docs/acp.md).
      agentrpc --version | --help

    SERVE OPTIONS
      --max-message-bytes N   Largest frame accepted, in bytes (default 16777216). A larger frame is
                              skipped and answered with -32600 messageTooLarge.
      --log-level LEVEL       off | error | warning | info | debug | trace (default off; also env
                              AGENTRPC_LOG). Logs go to stderr only; stdout carries protocol frames.
      --config PATH           Model configuration file (default: env AGENTRPC_CONFIG, else
                              ./agentrpc.json): {"models": {NAME: {...}}, "defaultModel": NAME}.
      --dump-requests FILE    Append every request sent to a model provider to FILE, one JSON line
                              each (instructions, messages, tools, options; never API keys).
      --record FILE           Record this conversation as a replayable transcript (see
                              docs/transcripts.md).
      --trace-file FILE       Append every finished span (chat.turn, router.classify, agent.<profile>,
                              llm.completion, tool.<name>) to FILE as OTLP/JSON lines.
      --trace-payloads        Include prompts, completions, tool arguments and outputs in spans
                              (left out by default).
      --client-timeout S      Default timeout in seconds for requests the server sends to the client
                              when no limit of the session applies (default 300).
      --max-sessions N        Most loaded sessions at once (default 10000); more is -32001 overloaded.
      --store DIR             Keep sessions in DIR, one journal each (default $XDG_STATE_HOME/agentrpc/
                              sessions, else ~/.local/state/agentrpc/sessions). See docs/protocol.md,
                              "Durable sessions".
      --ephemeral             Keep no sessions on disk: they end with this process.
      --model-cassette FILE   Record or replay every model provider's HTTP traffic in FILE (see
                              docs/testing.md).
      --cassette-mode MODE    record | replay | auto (default replay: nothing goes to the network;
                              auto replays what FILE holds and records what it lacks).
      --cassette-pace PACE    fast | recorded (default fast): how replayed responses arrive.

    SCHEMA OPTIONS
      --out DIR               Directory to write into (created if missing; stale .json files removed).

    CHAT OPTIONS
      --model NAME            A model from the config file (default: its defaultModel; with none, the
                              built-in offline scripted demo, which is not a language model).
      --local                 The repository's local model (scripts/local-model): installed if needed,
                              its server started on a free port for this chat and stopped after it.
      --config PATH           Model configuration file, as for serve (passed on to the server).
      --session FILE          A session configuration (JSON, as for session/create) to start from:
                              instructions, profiles, limits... The chat adds its own tools.
      --model-cassette FILE, --cassette-mode MODE, --cassette-pace PACE   As for serve.

    ACP OPTIONS
      --config PATH           Model configuration file, as for serve; its "acp" section configures the
                              front end (model, instructions, tools, permissions, session).
      --store DIR | --ephemeral   Where sessions are kept, as for serve.
      --model NAME            The model new sessions start with (default: acp.model, else defaultModel,
                              else a model an API key in the environment brings, else the installed
                              local model).
      --log-level LEVEL       As for serve (stderr only).
      --record FILE           Record the ACP conversation as a replayable transcript.
      --model-cassette FILE, --cassette-mode MODE, --cassette-pace PACE   As for serve.

    REPLAY OPTIONS
      --timeout S             Seconds to wait for each expected message (default 5).
      --verbose               Print every step.
      --model-cassette FILE   Answer every model request from this cassette (the server runs with
                              --cassette-mode replay): protocol and model both offline.
      --cassette-pace PACE    fast | recorded, as for serve.

    Exit status: 0 on a clean exit (end of input, or shutdown then exit), 1 for exit without
    shutdown, 2 for a usage error, 128 + N for a second signal N, 124 when the exit did not finish
    within its bound (\(Int(ServerOptions().exitBoundSeconds)) s; acp \(Int(ACPCommand.exitBoundSeconds(ServerOptions()))) s): something was stuck, said on stderr.
    """ }

/// This executable's path, as Foundation's `Bundle.main.executablePath` gives it on
/// Linux: the kernel's link to it, links resolved. Nil when /proc is not mounted.
func executablePath() -> String? {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard n > 0 else { return nil }
    return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func fail(_ message: String) -> Never {
    FileDescriptorOutput.standardError("agentrpc: \(message)\nRun 'agentrpc --help' for usage.\n")
    exit(2)
}

/// A subcommand's options and positional arguments, read by `CommandLineOptions`
/// (`--name value`, `--name=value`, flags; `--flag=value` is refused). Names are kept without their `--`.
struct Arguments {
    var positional: [String]
    var values: [String: String]
    var flags: Set<String>

    init(_ args: ArraySlice<String>, valued: Set<String>, flags allowedFlags: Set<String>) {
        func dashed(_ names: Set<String>) -> Set<String> { Set(names.map { "--" + $0 }) }
        switch CommandLineOptions.scanWithPositionals(Array(args), flags: dashed(allowedFlags), valued: dashed(valued), ) {
        case .success(let scanned):
            positional = scanned.positionals
            values = Dictionary(uniqueKeysWithValues: scanned.values.map { (String($0.key.dropFirst(2)), $0.value) })
            flags = Set(scanned.flags.map { String($0.dropFirst(2)) })
        case .failure(let problem):
            fail(problem.message)
        }
    }
}

/// The model cassette options of serve (docs/testing.md).
let cassetteOptions = Set(CassetteCommandLine.options.map { String($0.dropFirst(2)) })

func modelCassette(_ args: Arguments) -> ModelCassetteConfig? {
    var cassette = CassetteCommandLine()
    for name in cassetteOptions.sorted() {
        if let value = args.values[name], let problem = cassette.take("--" + name, value) { fail(problem) }
    }
    switch cassette.config() {
    case .success(let config): return config
    case .failure(let error): fail(error.message)
    }
}

var argv = CommandLine.arguments.dropFirst()
// `agentrpc sessions --help` is the subcommand's own.
if (argv.contains("--help") || argv.contains("-h")) && argv.first != "sessions" {
    print(usage)
    exit(0)
}
if argv.contains("--version") {
    print("agentrpc \(Server.version)")
    exit(0)
}

let command = argv.first.flatMap { $0.hasPrefix("-") ? nil : $0 } ?? "serve"
if argv.first == command { argv = argv.dropFirst() }

switch command {
case "serve":
    let args = Arguments(argv, valued: Set(["max-message-bytes", "log-level", "config", "dump-requests", "record", "client-timeout", "max-sessions", "trace-file", "store"]).union(cassetteOptions), flags: ["trace-payloads", "ephemeral"])
    if let extra = args.positional.first { fail("unexpected argument '\(extra)'") }
    var options = ServerOptions()
    if let v = args.values["max-message-bytes"] {
        guard let n = Int(v), n > 0 else { fail("--max-message-bytes needs a positive integer") }
        options.maxMessageBytes = n
    }
    if let name = args.values["log-level"] ?? ProcessEnvironment.current()["AGENTRPC_LOG"] {
        guard let level = LogLevel(name: name) else { fail("unknown log level '\(name)'") }
        options.logLevel = level
    }
    options.configPath = args.values["config"]
    options.dumpRequestsPath = args.values["dump-requests"]
    options.recordPath = args.values["record"]
    options.traceFilePath = args.values["trace-file"]
    options.tracePayloads = args.flags.contains("trace-payloads")
    if let v = args.values["client-timeout"] {
        guard let s = Double(v), DurationBounds.positiveSeconds.contains(s) else { fail("--client-timeout \(DurationBounds.positiveSeconds.requirement)") }
        options.clientRequestTimeoutSeconds = s
    }
    if let v = args.values["max-sessions"] {
        guard let n = Int(v), n > 0 else { fail("--max-sessions needs a positive integer") }
        options.maxSessions = n
    }
    options.storeDirectory = args.values["store"]
    options.ephemeral = args.flags.contains("ephemeral")
    if options.ephemeral && options.storeDirectory != nil { fail("--store and --ephemeral exclude each other") }
    if let dir = options.storeDirectory, dir.isEmpty { fail("--store needs a directory") }
    options.modelCassette = modelCassette(args)
    // A closed stdout must surface as a write error, not kill the process.
    signal(SIGPIPE, SIG_IGN)
    options.handleTerminationSignals = true
    // This process is the server's: an exit that overruns its bound ends it (status 124).
    options.exitWatchdog = true
    switch ExitWatchdog.testBound(in: options.environment) {
    case .success(let bound): if let bound { options.exitBoundSeconds = bound }
    case .failure(let problem): fail(problem.message)
    }
    let server: Server
    do {
        if let path = options.recordPath { options.recorder = try TranscriptRecorder.serving(options, at: path) }
        server = try Server(options: options)
    } catch let error as OSThread.StartError {
        FileDescriptorOutput.standardError("agentrpc: \(error)\n")
        exit(Server.refusedThreadStatus)
    } catch {
        fail("\(error)")
    }
    let code = await server.run()
    exit(code)

case "schema":
    let args = Arguments(argv, valued: ["out"], flags: [])
    guard let out = args.values["out"] else { fail("schema needs --out DIR") }
    do {
        try SchemaExport.write(to: out)
    } catch {
        fail("could not write the schema: \(error)")
    }

case "replay":
    let executable = executablePath() ?? CommandLine.arguments[0]
    let code = await TranscriptReplayer.runCommandLine(arguments: Array(argv), executable: executable) { line in
        FileDescriptorOutput.standardOutput(line + "\n")
    }
    exit(code)

case "chat":
    let executable = executablePath() ?? CommandLine.arguments[0]
    let code = ChatCommand.runCommandLine(arguments: Array(argv), executable: executable) { text in
        FileDescriptorOutput.standardOutput(text)
    }
    exit(code)

case "acp":
    let executable = executablePath() ?? CommandLine.arguments[0]
    exit(await ACPCommand.runCommandLine(arguments: Array(argv), executable: executable))

case "sessions":
    exit(SessionsCommand.runCommandLine(
        arguments: Array(argv), output: { print($0) },
        errors: { FileDescriptorOutput.standardError($0 + "\n") }))

default:
    fail("unknown command '\(command)'")
}
