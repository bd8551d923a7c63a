import AgentRPC
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

/// `agentrpc chat`: an interactive terminal conversation for a person. It
/// starts this same binary as `agentrpc serve` and talks to it as an ordinary
/// JSON-RPC client, so it exercises exactly what every other client gets.
package enum ChatCommand {
    static let usage = "usage: agentrpc chat [--model NAME | --local] [--config FILE] [--session FILE] [--resume [ID]] [--store DIR] "
        + CassetteCommandLine.usage

    /// What the command line asked for.
    struct Options: Equatable {
        var model: String?
        var configPath: String?
        var sessionPath: String?
        /// `--local`: start the repository's local model for this chat.
        var local = false
        /// `--resume [ID]`: continue a stored session; "" (no id) lists the recent ones to pick from.
        var resume: String?
        /// `--store DIR`: where sessions are kept (the server's default otherwise).
        var storePath: String?
        /// Passed on to the server (docs/testing.md).
        var cassette = CassetteCommandLine()
    }

    /// Parses `chat`'s arguments; the error is a message for the person.
    static func parse(_ arguments: [String]) -> Result<Options, ChatUsageError> {
        var options = Options()
        let given: [(name: String, value: String?)]
        switch CommandLineOptions.scan(
            resumeValued(arguments), flags: ["--local"], valued: CassetteCommandLine.options.union(["--model", "--config", "--session", "--resume", "--store"])) {
        case .success(let scanned): given = scanned
        case .failure(let problem): return .failure(ChatUsageError(message: problem.message))
        }
        for (name, value) in given {
            if name == "--local" {
                options.local = true
                continue
            }
            switch name {
            case "--model": options.model = value
            case "--config": options.configPath = value
            case "--session": options.sessionPath = value
            case "--resume": options.resume = value
            case "--store": options.storePath = value
            default:
                if let problem = options.cassette.take(name, value ?? "") { return .failure(ChatUsageError(message: problem)) }
            }
        }
        if case .failure(let error) = options.cassette.config() { return .failure(ChatUsageError(message: error.message)) }
        if options.local && options.model != nil {
            return .failure(ChatUsageError(message: "--local and --model name different models; give one"))
        }
        if options.resume != nil && (options.local || options.model != nil || options.sessionPath != nil) {
            return .failure(ChatUsageError(message: "--resume continues a stored conversation with its own model and configuration; "
                + "--model, --local and --session start a new one"))
        }
        return .success(options)
    }

    /// `--resume` takes its id only when one follows (`--resume ID`, `--resume=ID`);
    /// alone it is `--resume=` (pick from a list), so the scan needs no optional values.
    static func resumeValued(_ arguments: [String]) -> [String] {
        var out: [String] = []
        var i = 0
        while i < arguments.count {
            let argument = arguments[i]
            i += 1
            guard argument == "--resume" else {
                out.append(argument)
                continue
            }
            if i < arguments.count, !arguments[i].hasPrefix("--") {
                out.append("--resume=" + arguments[i])
                i += 1
            } else {
                out.append("--resume=")
            }
        }
        return out
    }

    /// Which model the chat talks to, and how the banner describes it.
    struct ModelChoice {
        var reference: ModelReference
        var isDemo: Bool
        var banner: String
    }

    /// `--model` wins, then the session file's model, then the config file's
    /// `defaultModel` (or a model an API key in the environment brings); with
    /// none of them, the offline demo script.
    static func chooseModel(options: Options, session: SessionConfig, environment: [String: String]) throws -> ModelChoice {
        let catalog = try ModelCatalog.load(explicitPath: options.configPath, environment: environment)
        // The models an API key in the environment brings, to say where a model came from.
        let fromEnvironment = ModelCatalog.withEnvironmentDefaults(
            ModelCatalog(models: [:], defaultModel: nil, sourcePath: nil, environment: environment)).models
        func describe(_ name: String, _ config: ModelConfig) -> String {
            let origin = catalog.sourcePath.map { fromEnvironment[name] == config ? "the environment" : $0 } ?? "the environment"
            var text = "Model: \(name) (\(config.provider.rawValue)\(config.model.map { " \($0)" } ?? "")) from \(origin)."
            if !config.provider.isLanguageModel {
                text += " It is the scripted provider: a fixed script, not a language model."
            }
            return text
        }
        if let name = options.model {
            let config = try catalog.resolve(.named(name), field: "--model")
            return ModelChoice(reference: .named(name), isDemo: false, banner: describe(name, config))
        }
        if let reference = session.model {
            let config = try catalog.resolve(reference, field: "model")
            if case .named(let name) = reference { return ModelChoice(reference: reference, isDemo: false, banner: describe(name, config)) }
            var banner = "Model: inline \(config.provider.rawValue)\(config.model.map { " \($0)" } ?? "") from the session file."
            if !config.provider.isLanguageModel { banner += " It is the scripted provider: a fixed script, not a language model." }
            return ModelChoice(reference: reference, isDemo: false, banner: banner)
        }
        if let name = catalog.defaultModel, let config = catalog.models[name] {
            return ModelChoice(reference: .named(name), isDemo: false, banner: describe(name, config))
        }
        return ModelChoice(reference: .inline(ChatDemoScript.model), isDemo: true, banner: ChatDemoScript.banner)
    }

    /// The session the chat creates: the session file's (if any) with the
    /// chosen model and the chat's built-in tools added.
    static func sessionConfig(base: SessionConfig, model: ModelReference) -> SessionConfig {
        var config = base
        config.model = model
        let taken = Set((config.tools ?? []).map(\.name))
        config.tools = (config.tools ?? []) + ChatToolbox.specs.filter { !taken.contains($0.name) }
        // A person's conversation is kept (`agentrpc chat --resume` continues it) unless the session file says `store: false`.
        if config.store == nil { config.store = true }
        return config
    }

    static func loadSessionFile(_ path: String) throws -> SessionConfig {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ChatUsageError(message: "cannot read the session file \(path)")
        }
        do {
            return try JSONValue.parse(Array(data)).decode(as: SessionConfig.self)
        } catch {
            throw ChatUsageError(message: "the session file \(path) is not a valid session configuration: \(error)")
        }
    }

    /// Runs the chat on this process's terminal (or pipes): `write` prints to
    /// stdout; problems before the chat starts go to stderr. Returns the exit
    /// status: 0 after `/exit` or Ctrl-D, 1 when the server failed, 2 for a usage error.
    package static func runCommandLine(arguments: [String], executable: String, write: @escaping (String) -> Void) -> Int32 {
        let environment = ProcessEnvironment.current()
        let options: Options
        switch parse(arguments) {
        case .success(let parsed): options = parsed
        case .failure(let error):
            complain("\(error.message)\n\(usage)")
            return 2
        }
        var localModel: ChatLocalModel?
        // Whatever happens after this point, a model server started for the chat stops with it.
        defer { localModel?.stop() }
        let banner: String
        var isDemo = false
        var session = SessionConfig()
        do {
            if options.resume != nil {
                // The stored session has its model and configuration.
                banner = "Resuming a stored conversation."
            } else {
                let base = try options.sessionPath.map(loadSessionFile) ?? SessionConfig()
                let choice: ModelChoice
                if options.local {
                    guard let script = ChatLocalModel.locateScript(executable: executable, environment: environment) else {
                        throw ChatUsageError(message: "--local needs scripts/local-model: run this binary from its checkout "
                            + "(.build/debug/agentrpc) or set AGENTRPC_LOCAL_MODEL_SCRIPT to the script's path")
                    }
                    let model = try ChatLocalModel.start(script: script, environment: environment) { write($0 + "\n") }
                    localModel = model
                    choice = ModelChoice(reference: .inline(model.config), isDemo: false, banner: model.banner)
                } else {
                    choice = try chooseModel(options: options, session: base, environment: environment)
                }
                banner = choice.banner
                isDemo = choice.isDemo
                session = sessionConfig(base: base, model: choice.reference)
            }
        } catch let error as ChatLocalModelError {
            complain(error.message)
            return 1
        } catch let error as ChatUsageError {
            complain(error.message)
            return 2
        } catch let error as RPCError {
            complain(error.message)
            return 2
        } catch {
            complain("\(error)")
            return 2
        }

        let output = ChatTerminalOutput(styled: wantsStyle(environment), sink: write)
        output.line("agentrpc chat \(Server.version)")
        output.line(banner)
        output.note("Type a message and press Enter. /help lists the commands; Ctrl-C cancels a running turn; Ctrl-D or /exit leaves.")

        var serverArguments = ["serve"]
        if let path = options.configPath { serverArguments += ["--config", path] }
        if let path = options.storePath { serverArguments += ["--store", path] }
        serverArguments += options.cassette.serverArguments
        let server = TranscriptServerProcess(executable: executable, arguments: serverArguments, environment: environment, framing: .newline)
        do {
            try server.start()
        } catch {
            complain("cannot start the server \(executable): \(error)")
            return 1
        }
        let inbox = ChatInbox()
        let interrupts = ChatInputSources.catchInterrupts(into: inbox)
        defer { interrupts.cancel() }
        do throws(OSThread.StartError) {
            try ChatInputSources.startForwarding(server, into: inbox)
            try ChatInputSources.startReadingLines(from: STDIN_FILENO, into: inbox)
        } catch {
            complain("\(error)")
            server.stop()
            return 1
        }

        let setup = ChatConversation.Setup(session: session, isDemo: isDemo, echoInput: isatty(STDIN_FILENO) == 0, resume: options.resume)
        return ChatConversation(setup: setup, server: server, inbox: inbox, output: output).run()
    }

    /// Styles only for a terminal, and never when the person opted out (NO_COLOR, TERM=dumb).
    static func wantsStyle(_ environment: [String: String]) -> Bool {
        isatty(STDOUT_FILENO) != 0 && environment["NO_COLOR"] == nil && environment["TERM"] != "dumb"
    }

    private static func complain(_ message: String) {
        FileDescriptorOutput.standardError("agentrpc chat: \(message)\n")
    }
}

/// A problem with what the person asked for on the command line.
struct ChatUsageError: Error {
    var message: String
}
