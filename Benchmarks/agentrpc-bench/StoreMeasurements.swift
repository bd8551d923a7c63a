import AgentRPCProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

struct StoreListFigures {
    var sessions: Int
    var pageSize: Int
    /// The first `session/list` of a fresh server: no summary is cached yet.
    var firstPageNanos: UInt64
    /// The same page again (summaries cached beside the journals).
    var warmPageNanos: UInt64
    /// The last page, reached through the cursors.
    var lastPageNanos: UInt64
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
    /// `sessions` stored sessions of one turn each, then `session/list` (default
    /// page) timed in a fresh server.
    func storeList(sessions: Int, pageSize: Int = 100) throws -> StoreListFigures {
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
        let server = try start(store: store)
        defer { server.finish() }
        let ids = IDs()
        func list(_ params: JSONValue) throws -> (UInt64, JSONValue) {
            let id = ids.take()
            let t0 = nowNanos()
            try server.sendRequest(id: id, method: "session/list", params: params)
            let result = try server.awaitResult(id: id)
            return (nowNanos() - t0, result)
        }
        let (first, firstResult) = try list(["limit": .int(pageSize)])
        guard firstResult["data"]?.arrayValue?.count == min(pageSize, sessions) else { throw BenchError("session/list answered a short page: \(firstResult)") }
        let (warm, _) = try list(["limit": .int(pageSize)])
        var cursor = firstResult["nextCursor"]
        var last: UInt64 = 0
        while let c = cursor, c != .null {
            let (t, r) = try list(["limit": .int(pageSize), "cursor": c])
            last = t
            cursor = r["nextCursor"]
        }
        return StoreListFigures(sessions: sessions, pageSize: pageSize, firstPageNanos: first, warmPageNanos: warm, lastPageNanos: last)
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
            let cpu0 = try server.cpuNanos()
            let t0 = nowNanos()
            try server.sendRequest(id: 2, method: "session/resume", params: ["sessionId": .string(id)])
            let result = try server.awaitResult(id: 2)
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
