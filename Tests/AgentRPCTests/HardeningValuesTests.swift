import AgentRPCProtocol
import Foundation
import Testing
@testable import AgentRPC

/// Runs the built `agentrpc` with `arguments` and `input` on stdin; nil when it
/// did not exit within `timeout` seconds (it is then killed).
func runBuiltServer(_ arguments: [String], input: String = "", timeout: Double = 10) throws -> (status: Int32, stdout: String, stderr: String)? {
    guard let path = CommittedTranscriptTests.builtServer else { throw CancellationError() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    process.standardError = stderr
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    try process.run()
    stdin.fileHandleForWriting.write(Data(input.utf8))
    try stdin.fileHandleForWriting.close()
    // Read both pipes to the end on their own threads so a full pipe cannot stall the child.
    let out = LockedBox(Data()), err = LockedBox(Data())
    let readers = DispatchGroup()
    DispatchQueue.global().async(group: readers) { out.set(stdout.fileHandleForReading.readDataToEndOfFile()) }
    DispatchQueue.global().async(group: readers) { err.set(stderr.fileHandleForReading.readDataToEndOfFile()) }
    if exited.wait(timeout: .now() + timeout) == .timedOut {
        process.terminate()
        _ = exited.wait(timeout: .now() + 5)
        return nil
    }
    _ = readers.wait(timeout: .now() + 5)
    return (process.terminationStatus, String(decoding: out.get(), as: UTF8.self), String(decoding: err.get(), as: UTF8.self))
}

final class LockedBox<T: Sendable>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: T
    init(_ value: T) { self.value = value }
    func set(_ v: T) { lock.withLock { value = v } }
    func get() -> T { lock.withLock { value } }
}

@Suite struct DurationBoundsTests {
    @Test func clampedConversionsNeverTrap() {
        let max = Duration.seconds(Int64(DurationBounds.maximumSeconds))
        #expect(Duration.clampedSeconds(1e300) == max)
        #expect(Duration.clampedSeconds(1.7e20) == max)
        #expect(Duration.clampedSeconds(.infinity) == max)
        #expect(Duration.clampedSeconds(.nan) == .zero)
        #expect(Duration.clampedSeconds(-5) == .zero)
        #expect(Duration.clampedSeconds(1.5) == .milliseconds(1500))
        #expect(Duration.clampedMilliseconds(.max) == max)
        #expect(Duration.clampedMilliseconds(.min) == .zero)
        #expect(Duration.milliseconds(2500).secondsValue == 2.5)
        #expect(Int(saturating: 1e300) == .max)
        #expect(Int(saturating: -1e300) == .min)
        #expect(Int(saturating: .nan) == 0)
        #expect(Int(saturating: -2.9) == -2)
    }

    @Test func boundsSayWhatTheyAccept() {
        let positive = DurationBounds.positiveSeconds
        #expect(!positive.contains(0.0))
        #expect(positive.contains(0.001))
        #expect(positive.contains(DurationBounds.maximumSeconds))
        #expect(!positive.contains(DurationBounds.maximumSeconds.nextUp))
        #expect(!positive.contains(Double.nan))
        #expect(DurationBounds.nonNegativeSeconds.contains(0.0))
        #expect(positive.requirement == "must be > 0 and <= 2592000 seconds")
        #expect(positive.schemaKeywords == ["exclusiveMinimum": 0, "maximum": 2592000])
    }

    /// The generated schema carries each declared range, so clients can check before sending.
    @Test func schemaStatesTheRanges() throws {
        let schema = try JSONSchemaGenerator.schema(for: SessionConfig.self)
        let defs = schema["$defs"]
        for key in ["wallClockSeconds", "toolTimeoutSeconds", "confirmationTimeoutSeconds"] {
            #expect(defs?["Limits"]?["properties"]?[key]?["maximum"] == 2592000)
            #expect(defs?["Limits"]?["properties"]?[key]?["exclusiveMinimum"] == 0)
        }
        #expect(defs?["ModelConfig"]?["properties"]?["timeoutSeconds"]?["maximum"] == 2592000)
        #expect(defs?["ScriptItem"]?["properties"]?["delayMs"]?["maximum"] == 2592000000)
        #expect(defs?["ScriptError"]?["properties"]?["afterSeconds"]?["minimum"] == 0)
    }

    @Test func clientTimeoutFlagOutOfRangeIsRefused() throws {
        for value in ["1e300", "0", "-1", "nan", "2592001"] {
            let run = try #require(try runBuiltServer(["serve", "--client-timeout", value]))
            #expect(run.status == 2)
            #expect(run.stderr.contains("--client-timeout must be > 0 and <= 2592000 seconds"))
        }
        let ok = try #require(try runBuiltServer(["serve", "--client-timeout", "2592000"]))
        #expect(ok.status == 0)
    }

    @Test func configFileDurationOutOfRangeNamesTheField() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("agentrpc-dur-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("agentrpc.json")
        try Data(#"{"models": {"slow": {"provider": "openai", "model": "m", "timeoutSeconds": 1e300}}}"#.utf8).write(to: config)
        let run = try #require(try runBuiltServer(["serve", "--config", config.path]))
        #expect(run.status == 2)
        #expect(run.stderr.contains("models.slow.timeoutSeconds: must be > 0 and <= 2592000 seconds"))
    }
}

@Suite struct UsageSanityTests {
    @Test func sumsSaturate() {
        #expect(Int.max.addingSaturating(1) == .max)
        #expect(Int.min.addingSaturating(-1) == .min)
        #expect(40.addingSaturating(2) == 42)
    }

    @Test func unbelievableCountsAreDroppedAndNamed() {
        let raw = ModelUsage(inputTokens: .max, outputTokens: -1, cachedInputTokens: 5, cacheCreationInputTokens: -3, reasoningTokens: 1_000_000_000_001)
        let (usage, rejected) = raw.sanitized()
        #expect(usage == ModelUsage(inputTokens: 0, outputTokens: 0, cachedInputTokens: 5))
        #expect(rejected == ["inputTokens=9223372036854775807", "outputTokens=-1", "cacheCreationInputTokens=-3", "reasoningTokens=1000000000001"])
        let fine = ModelUsage(inputTokens: ModelUsage.largestBelievableTokenCount, outputTokens: 0)
        #expect(fine.sanitized().rejected.isEmpty)
    }
}

@Suite struct BoundedRegexTests {
    static let pathological = String(repeating: "a", count: 29) + "!"

    @Test func catastrophicBacktrackingIsStoppedByTheBudget() throws {
        let regex = try BoundedRegex("(a+)+$")
        #expect(throws: RegexBudgetExceeded(pattern: "(a+)+$")) { try regex.firstMatch(in: Self.pathological) }
        #expect(throws: RegexBudgetExceeded(pattern: "(a+)+$")) { try regex.replacingMatches(in: Self.pathological, withLiteral: "x") }
    }

    @Test func ordinaryMatchesAndLiteralReplacement() throws {
        let regex = try BoundedRegex(#"\d{4}"#)
        #expect(try regex.firstMatch(in: "pin 1234"))
        #expect(try !regex.firstMatch(in: "pin 12"))
        #expect(try regex.replacingMatches(in: "1234 and 5678 é", withLiteral: "[$0]") == "[$0] and [$0] é")
    }

    /// A cancelled caller stops the match on the worker at its first progress
    /// check (cancelled before the call, so the test does not race the budget).
    @Test func cancellingTheCallerStopsTheMatch() async throws {
        let regex = try BoundedRegex("(a+)+$")
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await RegexWorkers.run { () -> Result<Bool, RegexBudgetExceeded> in
                do throws(RegexBudgetExceeded) { return .success(try regex.firstMatch(in: Self.pathological)) } catch { return .failure(error) }
            }
        }
        let result = await task.value
        #expect(throws: RegexBudgetExceeded(pattern: "(a+)+$", cancelled: true)) { try result.get() }
    }

    @Test func schemaPatternsRunPastTheirBudgetAreViolations() throws {
        let validator = try JSONSchemaValidator(schema: ["type": "string", "pattern": "^(a+)+$"])
        #expect(validator.usesPatterns)
        let violations = validator.validate(.string(Self.pathological))
        #expect(violations.map(\.message) == ["matching the pattern `^(a+)+$` took longer than its budget of 250 ms"])
        #expect(try !JSONSchemaValidator(schema: ["type": "string"]).usesPatterns)
    }
}
