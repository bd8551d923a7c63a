import AgentRPC
import Synchronization
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

/// `agentrpc chat --local`: the repository's local model (`scripts/local-model`,
/// llama-cpp-python's OpenAI-compatible server), started for this chat on a free
/// port and stopped when the chat ends. The script says which model it serves
/// and how to reach it (`model-config PORT`), so that is declared in one place.
package final class ChatLocalModel {
    /// The inline model the chat's session uses.
    package let config: ModelConfig
    /// What the banner says about it.
    package let banner: String
    private let server: SpawnedProcess
    private let logPath: String

    /// The longest wait for the model server to accept connections (loading a
    /// small GGUF file takes seconds; a machine busy compiling takes longer).
    static let startTimeoutSeconds = 180.0

    private init(config: ModelConfig, banner: String, server: SpawnedProcess, logPath: String) {
        self.config = config
        self.banner = banner
        self.server = server
        self.logPath = logPath
    }

    /// `scripts/local-model`: env `AGENTRPC_LOCAL_MODEL_SCRIPT`, else found by
    /// walking up from this executable (`.build/debug/agentrpc` in a checkout),
    /// else from the working directory.
    package static func locateScript(executable: String, environment: [String: String]) -> String? {
        if let path = environment["AGENTRPC_LOCAL_MODEL_SCRIPT"], !path.isEmpty { return path }
        let starts = [
            URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent(),
            URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
        ]
        for start in starts {
            var directory = start
            // Bounded: a path has finitely many parents, but say so.
            for _ in 0..<64 {
                let candidate = directory.appendingPathComponent("scripts/local-model").path
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
                let parent = directory.deletingLastPathComponent()
                if parent.path == directory.path { break }
                directory = parent
            }
        }
        return nil
    }

    /// Whether the local model is installed (`scripts/local-model status`).
    static func isInstalled(script: String, environment: [String: String]) -> Bool {
        (try? run(script, ["status"], environment: environment, capture: true).status) == 0
    }

    /// Installs the model if needed (its progress shown), starts its server and
    /// waits until it accepts connections. `say` prints a line for the person.
    package static func start(script: String, environment: [String: String], say: (String) -> Void) throws -> ChatLocalModel {
        if !isInstalled(script: script, environment: environment) {
            say("The local model is not installed yet: installing it now (once; several minutes).")
            let install = try run(script, ["install"], environment: environment, capture: false)
            guard install.status == 0 else {
                throw ChatLocalModelError(message: "the local model could not be installed (\(script) install exited \(install.status))")
            }
        }
        let port = try freePort()
        let configRun = try run(script, ["model-config", String(port)], environment: environment, capture: true)
        let config: ModelConfig
        do {
            guard configRun.status == 0 else { throw ChatLocalModelError(message: "exit status \(configRun.status)") }
            config = try JSONValue.parse(Array(configRun.output.utf8)).decode(as: ModelConfig.self)
        } catch {
            throw ChatLocalModelError(message: "\(script) model-config gave no usable model configuration: \(error)")
        }
        let describeRun = try run(script, ["describe"], environment: environment, capture: true)
        let name = describeRun.output.trimmingWhitespaceAndNewlines()

        let logPath = FileManager.default.temporaryDirectory.path.appendingPathComponent("agentrpc-local-model-\(getpid())-\(port).log")
        let log = open(logPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
        guard log >= 0 else {
            throw ChatLocalModelError(message: "cannot write the model server's log \(logPath)")
        }
        defer { close(log) }
        let server: SpawnedProcess
        do {
            server = try SpawnedProcess.run(
                script, arguments: ["serve", String(port)], environment: environment,
                standardInput: .null, standardOutput: .descriptor(log), standardError: .descriptor(log))
        } catch {
            throw ChatLocalModelError(message: "cannot start \(script) serve: \(error)")
        }
        let model = ChatLocalModel(
            config: config,
            banner: "Model: the local model\(name.isEmpty ? "" : " \(name)") on 127.0.0.1:\(port), "
                + "started for this chat and stopped when it ends. A tiny model: expect odd answers.",
            server: server, logPath: logPath)
        say("Starting the local model server on 127.0.0.1:\(port)…")
        let started = Date()
        while !acceptsConnections(port: port) {
            guard server.isRunning else {
                let tail = model.logTail()
                model.stop()
                throw ChatLocalModelError(message: "the local model server exited (status \(server.terminationStatus ?? -1)):\n\(tail)")
            }
            guard Date().timeIntervalSince(started) < startTimeoutSeconds else {
                model.stop()
                throw ChatLocalModelError(message: "the local model server did not start within \(Int(startTimeoutSeconds)) s (log: \(logPath))")
            }
            // Waiting for another process to open its port: there is nothing to block on.
            usleep(200_000)
        }
        say("The local model server is ready (\(Int(Date().timeIntervalSince(started).rounded())) s).")
        return model
    }

    /// The model server's pid (the script execs it).
    package var processIdentifier: Int32 { server.processIdentifier }

    /// Stops the model server: SIGTERM, then SIGKILL if it has not exited after 5 s.
    package func stop(graceSeconds: Double = 5) {
        guard server.isRunning else { return }
        server.signal(SIGTERM)
        let deadline = Date().addingTimeInterval(graceSeconds)
        while server.isRunning && Date() < deadline { usleep(50_000) }
        if server.isRunning { server.signal(SIGKILL) }
        server.waitUntilExit()
        try? FileManager.default.removeItem(atPath: logPath)
    }

    private func logTail() -> String {
        guard let data = FileManager.default.contents(atPath: logPath) else { return "" }
        return String(decoding: data.suffix(2000), as: UTF8.self)
    }

    /// Runs the script to completion; `capture` collects stdout, otherwise it is the person's terminal.
    private static func run(_ script: String, _ arguments: [String], environment: [String: String], capture: Bool) throws -> (status: Int32, output: String) {
        do {
            if capture {
                let run = try SpawnedProcess.output(script, arguments: arguments, environment: environment)
                return (run.status, String(decoding: run.output, as: UTF8.self))
            }
            let process = try SpawnedProcess.run(script, arguments: arguments, environment: environment, standardInput: .null)
            return (process.waitUntilExit(), "")
        } catch {
            throw ChatLocalModelError(message: "cannot run \(script) \(arguments.joined(separator: " ")): \(error)")
        }
    }

    /// A port the kernel says is free now (bound to port 0, then released).
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ChatLocalModelError(message: "cannot open a socket to find a free port") }
        defer { close(fd) }
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, named == 0 else { throw ChatLocalModelError(message: "cannot find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func acceptsConnections(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(clamping: port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        return address
    }
}

/// The local model could not be installed or started (exit status 1, not a usage error).
package struct ChatLocalModelError: Error {
    package var message: String
}

/// The local model of `agentrpc chat --local`, for another front end that
/// wants the same default: started only when it is already installed, never
/// installed on the way (that takes minutes, and an editor waits for an answer).
package final class LocalModelServer: Sendable {
    private let model: Mutex<ChatLocalModel?>
    /// The inline model configuration to give `session/create`.
    package let modelConfig: JSONValue
    /// A line describing it.
    package let description: String

    private init(model: sending ChatLocalModel?, config: JSONValue, description: String) {
        self.model = Mutex(model)
        self.modelConfig = config
        self.description = description
    }

    /// Starts the installed local model (nil when there is no checkout script or
    /// it is not installed); its progress lines go to `logger`.
    package static func startIfInstalled(executable: String, environment: [String: String], logger: Logger) throws -> LocalModelServer? {
        guard let script = ChatLocalModel.locateScript(executable: executable, environment: environment),
              ChatLocalModel.isInstalled(script: script, environment: environment) else { return nil }
        let model: ChatLocalModel
        do {
            model = try ChatLocalModel.start(script: script, environment: environment) { logger.info($0) }
        } catch let error as ChatLocalModelError {
            throw RPCError.internalError(error.message)
        }
        let config: JSONValue
        do {
            config = try JSONValue(encoding: model.config)
        } catch {
            model.stop()
            throw error
        }
        let banner = model.banner
        return LocalModelServer(model: model, config: config, description: banner)
    }

    /// The model server's pid, while it runs.
    package var processIdentifier: Int32? { model.withLock { $0?.processIdentifier } }

    /// Stops the model server: SIGTERM, then SIGKILL after `graceSeconds`
    /// (an editor gives its agent little time once it closed the pipe).
    package func stop(graceSeconds: Double = 0.5) {
        model.withLock { m in
            m?.stop(graceSeconds: graceSeconds)
            m = nil
        }
    }
}
