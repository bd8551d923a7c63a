import Foundation
import Synchronization
import Testing

@testable import AgentRPC

/// The replacements in Sources/AgentRPC/Portability/ for what the binary used from
/// Foundation, each compared with the Foundation call it replaces (the tests may keep
/// Foundation; the binary must not load it).
@Suite struct PortabilityTests {
    @Test func theWhitespaceSetsAreFoundationsForEveryScalar() {
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            #expect(scalar.isFoundationWhitespace == CharacterSet.whitespaces.contains(scalar), "U+\(String(value, radix: 16))")
            #expect(scalar.isFoundationWhitespaceOrNewline == CharacterSet.whitespacesAndNewlines.contains(scalar), "U+\(String(value, radix: 16))")
        }
    }

    static let samples = [
        "", " ", "\t \n", "  a b  ", "\r\n x\r\n", "\u{200B}x\u{3000}", "\u{85}y\u{2028}", "e\u{301} ", " \u{301}",
        "a\u{A0}", "\u{1F600} \n", "\n\n\u{0B}\u{0C}",
    ]

    @Test(arguments: samples) func trimmingIsFoundations(text: String) {
        #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespaces))
        #expect(text.trimmingWhitespaceAndNewlines() == text.trimmingCharacters(in: .whitespacesAndNewlines))
        let sub = ("<" + text + ">").dropFirst().dropLast()
        #expect(sub.trimmingWhitespaceAndNewlines() == sub.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Replacing and searching agree with Foundation on strings made of the pieces where
    /// the standard library's grapheme-based search differs (CR LF) or Foundation's
    /// composed-character rule applies (combining marks, joiners).
    @Test func replacingAndSearchingAreFoundationsOnTheTrickyPieces() {
        let pieces = ["a", "/", "~", "0", "1", "\n", "\r", "e", "\u{301}", "\u{E9}", "\u{200D}", "\u{1F469}", "{", "}", " "]
        let targets = ["\n", "/", "~", "~0", "~1", "{{", "}}", "e", "a/", "\r\n"]
        var generator = SplitMix(seed: 35)
        for _ in 0..<4000 {
            let text = (0..<Int(generator.next() % 7)).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined()
            for target in targets {
                #expect(text.replacingScalars(of: target, with: "<>") == text.replacingOccurrences(of: target, with: "<>"), "\(Array(text.unicodeScalars)) \(target.debugDescription)")
                let ours = text.scalarRange(of: target).map { text.distance(from: text.startIndex, to: $0.lowerBound) }
                let theirs = text.range(of: target).map { text.distance(from: text.startIndex, to: $0.lowerBound) }
                #expect(ours == theirs, "\(Array(text.unicodeScalars)) \(target.debugDescription)")
            }
        }
    }

    @Test func cFormatIsStringFormat() {
        for value in [0, 0.05, 0.15, 1.25, 2.5, 12.345678, 1e-7, 123_456_789.123, -3.75, .infinity, .nan] {
            for format in ["%.1f", "%.0f", "%.6g", "$%.2f", "$%.4f"] {
                #expect(String(cFormat: format, value) == String(format: format, value))
            }
        }
        #expect(String(cFormat: "%.3f", 1e300).count > 64)
        #expect(String(cFormat: "%.3f", 1e300) == String(format: "%.3f", 1e300))
    }

    @Test func fileDescriptorOutputWritesEverythingAndReportsAClosedPipe() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let text = String(repeating: "é", count: 10_000)
        #expect(FileDescriptorOutput.write(fds[1], Array(text.utf8)))
        close(fds[1])
        let read = try #require(try FileHandle(fileDescriptor: fds[0], closeOnDealloc: true).readToEnd())
        #expect(String(decoding: read, as: UTF8.self) == text)
        var closed: [Int32] = [0, 0]
        #expect(pipe(&closed) == 0)
        close(closed[0])
        let previous = signal(SIGPIPE, SIG_IGN)
        defer { signal(SIGPIPE, previous) }
        #expect(!FileDescriptorOutput.write(closed[1], Array("x".utf8)))
        close(closed[1])
    }

    /// A child is the leader of a process group of its own (as `Process` made it), so
    /// the terminal's Ctrl-C does not reach it; a signal's end is told from an exit.
    @Test func aChildLeadsItsOwnProcessGroupAndItsEndIsTold() throws {
        let own = try SpawnedProcess.output(
            "/bin/sh", arguments: ["-c", "read _ _ _ _ group _ < /proc/$$/stat; [ \"$group\" = \"$$\" ] && echo own"], environment: [:])
        #expect(own.status == 0)
        #expect(String(decoding: own.output, as: UTF8.self) == "own\n")

        let killed = try SpawnedProcess.run("/bin/sh", arguments: ["-c", "kill -TERM $$"], environment: [:])
        #expect(killed.waitForTermination() == SIGTERM)
        #expect(killed.terminatedBySignal)
        let exited = try SpawnedProcess.run("/bin/sh", arguments: ["-c", "exit 15"], environment: [:])
        #expect(exited.waitForTermination() == 15)
        #expect(!exited.terminatedBySignal)
    }

    @Test func aThreadRunsItsBodyUnderItsKernelName() async throws {
        let name = Mutex<String?>(nil)
        let done = ConditionLock()
        try OSThread.start(name: "agentrpc.portability-test", stackSize: 256 * 1024) {
            let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
            done.lock()
            name.withLock { $0 = comm.trimmingCharacters(in: .newlines) }
            done.signal()
            done.unlock()
        }
        done.lock()
        let deadline = Date(timeIntervalSinceNow: 30)
        while name.withLock({ $0 }) == nil && done.wait(until: deadline) {}
        done.unlock()
        #expect(name.withLock { $0 } == "agentrpc.portab")
    }

    @Test func aTimedWaitEndsAtItsDeadlineAndASignalEndsItEarly() throws {
        let condition = ConditionLock()
        condition.lock()
        let start = Date()
        #expect(!condition.wait(until: Date(timeIntervalSinceNow: 0.05)))
        #expect(Date().timeIntervalSince(start) >= 0.049)
        #expect(!condition.wait(until: Date(timeIntervalSinceNow: -1)))
        condition.unlock()

        let flag = Mutex(false)
        try OSThread.start(name: "signaller") {
            condition.lock()
            flag.withLock { $0 = true }
            condition.broadcast()
            condition.unlock()
        }
        condition.lock()
        let deadline = Date(timeIntervalSinceNow: 30)
        while !flag.withLock({ $0 }) && condition.wait(until: deadline) {}
        condition.unlock()
        #expect(flag.withLock { $0 })
    }
}

/// A small deterministic generator, so a failing case can be reproduced.
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_133A_EB09
        return z ^ (z >> 31)
    }
}

extension PortabilityTests {
    static let paths = [
        "", "/", "//", "a", "a/", "/a", "/a/", "/a/b", "/a/b/", "a/b", "a//b", "//a//b//", "/a/b.txt", "b.tar.gz", ".profile",
        "/x/.profile", "a.", "/a./", "..", "/a/..", ".", "./a", "dir.d/file", "file.PNG", "/tmp/x y.jpeg", "a/b/c.d/",
    ]

    @Test(arguments: paths) func pathMethodsAreNSStrings(path: String) {
        let ns = path as NSString
        // Foundation on Linux traps on a path without a "/" but trailing ones ("a", "a/"):
        // NSString's documented answer there is "".
        let hasDirectory = path.reversed().drop { $0 == "/" }.contains("/") || path.allSatisfy { $0 == "/" }
        #expect(path.deletingLastPathComponent == (hasDirectory ? ns.deletingLastPathComponent : ""))
        #expect(path.lastPathComponent == ns.lastPathComponent)
        #expect(path.pathExtension == ns.pathExtension)
        for component in ["", "b", "/b", "b/", "c.json", "//d", "c//e"] {
            #expect(path.appendingPathComponent(component) == ns.appendingPathComponent(component), "\(path.debugDescription) + \(component.debugDescription)")
        }
    }
}

extension PortabilityTests {
    @Test(arguments: ["", "a", "/$defs/A", "%", "%4", "%zz", "%4g", "%41", "%c3%A9", "%C3", "%FF", "%00x", "a%2Fb", "é%20", "%%41", "~1%7E0"])
    func percentDecodingIsFoundations(text: String) {
        #expect(text.percentDecoded == text.removingPercentEncoding)
    }
}

extension PortabilityTests {
    /// Read from `environ`'s bytes, the environment is what ProcessInfo gives.
    @Test func theEnvironmentIsProcessInfos() {
        #expect(ProcessEnvironment.current() == ProcessInfo.processInfo.environment)
    }

    /// Through the binary, with entries `setenv` never makes: the last of two
    /// `AGENTRPC_LOG`s is the one read (the first names no level: read, it stops the
    /// server with status 2, as it alone does), and an entry without `=`, one with an
    /// empty name and one that is not UTF-8 are taken without harm.
    @Test func theServerReadsTheLastOfTwoEntriesOfOneName() throws {
        guard let server = CommittedTranscriptTests.builtServer else {
            Issue.record("cannot find the built agentrpc binary next to the tests")
            return
        }
        func status(_ environment: [[UInt8]]) throws -> Int32 {
            let arguments = [server, "serve", "--ephemeral"].map { $0.withCString { strdup($0) } } + [nil]
            let entries = environment.map { bytes in bytes.withUnsafeBufferPointer { raw in
                raw.withMemoryRebound(to: CChar.self) { chars in strndup(chars.baseAddress!, chars.count) }
            } } + [nil]
            defer { (arguments + entries).forEach { free($0) } }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            for fd in Int32(0)...2 { posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0) }
            var pid: pid_t = 0
            let spawned = posix_spawn(&pid, server, &actions, nil, arguments, entries)
            try #require(spawned == 0)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            return (status >> 8) & 0xFF
        }
        let odd: [[UInt8]] = [Array("NOEQUALS".utf8), Array("=empty-name".utf8), [0x42, 0x3D, 0xFF, 0xFE]]
        #expect(try status([Array("AGENTRPC_LOG=bogus".utf8)] + odd) == 2)
        #expect(try status([Array("AGENTRPC_LOG=bogus".utf8), Array("AGENTRPC_LOG=off".utf8)] + odd) == 0)
        // Split at the `=` byte, as `getenv` reads it: a value that starts with a combining
        // mark is read (ProcessInfo drops the entry, its `=` being part of a larger character).
        #expect(try status([Array("AGENTRPC_LOG=\u{301}off".utf8)]) == 2)
    }
}
