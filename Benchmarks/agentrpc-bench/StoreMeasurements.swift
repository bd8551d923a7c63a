import AgentRPCProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

struct StoreListFigures {
    var sessions: Int
    var pageSize: Int
    /// The first `session/list` of a fresh server on a store without an index:
    /// it is rebuilt from every journal.
    var rebuildNanos: UInt64
    /// The first `session/list` of another fresh server, the index present: it
    /// is read and every journal `stat`ed against it.
    var coldNanos: UInt64
    /// Then the first page, the 50th page (through the cursors) and the last
    /// page, each asked `repeats` times: medians.
    var firstPage: Samples
    var fiftiethPage: Samples
    var lastPage: Samples
}

struct ResumeFigures {
    var entries: Int
    var journalBytes: Int
    /// `session/resume` of the journal as written record by record (as after a
    /// crash), one per run, each in a fresh server.
    var resumes: Samples
    /// The server's CPU time (all threads) for each of those resumes.
    var resumeCPU: Samples
    /// The same session resumed again in a fresh server after the first one
    /// closed it cleanly (and so rewrote it as a snapshot).
    var resumesAfterClose: Samples
    var resumeAfterCloseCPU: Samples
    /// The journal's size after that close.
    var closedJournalBytes: Int
}

/// The store's measurements: journals are written here directly in the
/// documented format (docs/protocol.md, "Durable sessions"), so that making
/// 10,000 sessions does not take 10,000 fsyncs.
extension Measurements {
    /// `sessions` stored sessions of one turn each, then `session/list` (pages
    /// of `pageSize`) timed in fresh servers: the first without an index, the
    /// second with it; then the first, 50th and last pages `repeats` times.
    func storeList(sessions: Int, pageSize: Int = 100, repeats: Int = 21) throws -> StoreListFigures {
        let store = scratch + "/list-store"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let base = Int(Date().timeIntervalSince1970 * 1000) - sessions * 1000
        for i in 0..<sessions {
            let id = String(format: "s-bench%07d", i)
            let at = base + i * 1000
            var lines: [JSONValue] = [
                ["type": "session", "format": 1, "sessionId": .string(id), "createdAt": .int(at), "config": ["model": ["provider": "scripted", "script": [["text": ["ok"]]]]]],
            ]
            lines += Self.turnLines(turn: 1, sessionID: id, firstEntry: 1, at: at, prompt: "Conversation number \(i): what is on the list today?")
            try Self.write(lines, to: store + "/\(id).jsonl")
        }
        let ids = IDs()
        func list(_ server: ServerProcess, _ params: JSONValue) throws -> (UInt64, JSONValue) {
            let id = ids.take()
            let t0 = nowNanos()
            try server.sendRequest(id: id, method: "session/list", params: params)
            let result = try server.awaitResult(id: id)
            return (nowNanos() - t0, result)
        }
        let rebuild: UInt64
        do {
            let server = try start(store: store)
            defer { server.finish() }
            let (t, result) = try list(server, ["limit": .int(pageSize)])
            guard result["data"]?.arrayValue?.count == min(pageSize, sessions) else { throw BenchError("session/list answered a short page: \(result)") }
            rebuild = t
        }
        let server = try start(store: store)
        defer { server.finish() }
        let (cold, firstResult) = try list(server, ["limit": .int(pageSize)])
        // The cursors of every page, walked once.
        var cursors: [JSONValue] = []
        var cursor = firstResult["nextCursor"]
        while let c = cursor, c != .null {
            cursors.append(c)
            let (_, r) = try list(server, ["limit": .int(pageSize), "cursor": c])
            cursor = r["nextCursor"]
        }
        guard cursors.count >= 49 else { throw BenchError("fewer than 50 pages: \(cursors.count + 1)") }
        var first: [UInt64] = []
        var fiftieth: [UInt64] = []
        var last: [UInt64] = []
        for _ in 0..<repeats {
            first.append(try list(server, ["limit": .int(pageSize)]).0)
            fiftieth.append(try list(server, ["limit": .int(pageSize), "cursor": cursors[48]]).0)
            if let c = cursors.last { last.append(try list(server, ["limit": .int(pageSize), "cursor": c]).0) }
        }
        return StoreListFigures(
            sessions: sessions, pageSize: pageSize, rebuildNanos: rebuild, coldNanos: cold, firstPage: Samples(first),
            fiftiethPage: Samples(fiftieth), lastPage: Samples(last))
    }

    /// One stored session of `entries` entries (prompt/response pairs), then
    /// `session/resume` timed, `runs` times: each run writes the journal afresh,
    /// resumes it in a fresh server (which replays every record), ends that
    /// server cleanly (which rewrites the journal as a snapshot at close), and
    /// resumes it again in another fresh server.
    func resumeLarge(entries: Int, runs: Int) throws -> ResumeFigures {
        let store = scratch + "/resume-store"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let id = "s-benchresume"
        let at = Int(Date().timeIntervalSince1970 * 1000)
        var lines: [JSONValue] = [
            ["type": "session", "format": 1, "sessionId": .string(id), "createdAt": .int(at), "config": ["model": ["provider": "scripted", "script": [["text": ["ok"]]]]]],
        ]
        for turn in 0..<(entries / 2) {
            lines += Self.turnLines(turn: turn + 1, sessionID: id, firstEntry: turn * 2 + 1, at: at, prompt: "Question \(turn): how does the journal hold up with a long history?")
        }
        let path = store + "/\(id).jsonl"
        func size() -> Int { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
        /// One resume in a fresh server: wall time and server CPU time.
        func resume() throws -> (UInt64, UInt64) {
            let server = try start(store: store)
            // A server checks its store's index at start, on a background
            // thread, and so reads a journal written after the index (as this
            // one is) once; a resume meanwhile shares that read. A list waits
            // for the check, so what is timed below is the resume's own read
            // of the journal, whole, in either binary.
            try server.sendRequest(id: 2, method: "session/list", params: ["limit": 1])
            _ = try server.awaitResult(id: 2)
            let cpu0 = try server.cpuNanos()
            let t0 = nowNanos()
            try server.sendRequest(id: 3, method: "session/resume", params: ["sessionId": .string(id)])
            let result = try server.awaitResult(id: 3)
            let wall = nowNanos() - t0
            let cpu = try server.cpuNanos() - cpu0
            guard result["revision"]?.intValue == entries / 2 * 2 else { throw BenchError("resume answered \(result)") }
            if server.finish() != 0 { throw BenchError("the server exited badly after resume") }
            return (wall, cpu)
        }
        var raw: [(UInt64, UInt64)] = []
        var closed: [(UInt64, UInt64)] = []
        var rawBytes = 0
        var closedBytes = 0
        for _ in 0..<runs {
            try Self.write(lines, to: path)
            rawBytes = size()
            raw.append(try resume())
            closedBytes = size()
            closed.append(try resume())
        }
        return ResumeFigures(
            entries: entries / 2 * 2, journalBytes: rawBytes, resumes: Samples(raw.map(\.0)), resumeCPU: Samples(raw.map(\.1)),
            resumesAfterClose: Samples(closed.map(\.0)), resumeAfterCloseCPU: Samples(closed.map(\.1)), closedJournalBytes: closedBytes)
    }

    /// What a turn's journal costs beside its records: the server opens the
    /// journal (`O_WRONLY | O_APPEND`) at the turn's first record and closes it
    /// after the turn's `fsync`. Measured here in the bench process, on a
    /// journal in the same scratch directory: one `open` + `close` pair (median
    /// of `rounds` rounds of `pairs`), and one one-line `write` + `fsync`, what
    /// every turn already pays. Returns nanoseconds: (pair wall, pair thread
    /// CPU, write + fsync wall).
    func journalOpenClose(pairs: Int = 100_000, rounds: Int = 5, syncs: Int = 200) throws -> (wall: Double, cpu: Double, fsync: Double) {
        let path = scratch + "/open-close.jsonl"
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BenchError("cannot create \(path)") }
        defer { unlink(path) }
        var walls: [Double] = []
        var cpus: [Double] = []
        for _ in 0..<rounds {
            let w0 = nowNanos()
            let c0 = threadCPUNanos()
            for _ in 0..<pairs {
                let f = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
                guard f >= 0 else { throw BenchError("cannot open \(path)") }
                close(f)
            }
            cpus.append(Double(threadCPUNanos() - c0) / Double(pairs))
            walls.append(Double(nowNanos() - w0) / Double(pairs))
        }
        let line = Array(#"{"type":"turnStarted","at":1,"turnId":"t-1","number":1}"#.utf8) + [0x0A]
        let s0 = nowNanos()
        for _ in 0..<syncs {
            _ = line.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            fsync(fd)
        }
        let sync = Double(nowNanos() - s0) / Double(syncs)
        close(fd)
        return (walls.sorted()[rounds / 2], cpus.sorted()[rounds / 2], sync)
    }

    /// One completed turn as journal lines: start, prompt, response, end.
    private static func turnLines(turn: Int, sessionID: String, firstEntry: Int, at: Int, prompt: String) -> [JSONValue] {
        let turnID = JSONValue.string("t-\(sessionID.dropFirst(2).prefix(8))-\(turn)")
        return [
            ["type": "turnStarted", "at": .int(at), "turnId": turnID, "number": .int(turn)],
            ["type": "entryAppended", "at": .int(at), "nextEntry": .int(firstEntry + 1),
             "entry": ["id": .string("e\(firstEntry)"), "turnId": turnID, "type": "prompt", "text": .string(prompt)]],
            ["type": "entryAppended", "at": .int(at), "nextEntry": .int(firstEntry + 2),
             "entry": ["id": .string("e\(firstEntry + 1)"), "turnId": turnID, "type": "response", "profile": "default", "text": "An answer of a few words, as a model would give."]],
            ["type": "turnEnded", "at": .int(at), "turnId": turnID, "status": "completed", "stopReason": "completed", "undo": "none",
             "usage": ["inputTokens": 12, "outputTokens": 10]],
        ]
    }

    private static func write(_ lines: [JSONValue], to path: String) throws {
        unlink(path)
        var bytes: [UInt8] = []
        for line in lines {
            line.serialize(into: &bytes)
            bytes.append(0x0A)
        }
        guard FileManager.default.createFile(atPath: path, contents: Data(bytes), attributes: [.posixPermissions: 0o600]) else {
            throw BenchError("cannot write \(path)")
        }
    }
}
