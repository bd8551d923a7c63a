import AgentRPCProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Numbers each measurement hands to the report.
struct DeltaFigures {
    var deltasPerRun: Int
    /// `deltas` the provider streamed; `events` the `textDelta` events that
    /// carried them (fewer when the client fell behind and deltas were merged).
    var runs: [(deltas: Int, events: Int, nanos: UInt64, serverCPUNanos: UInt64)]
    /// Events over deltas, all runs together: 1 when none was merged.
    var eventsPerDelta: Double {
        Double(runs.map(\.events).reduce(0, +)) / Double(max(1, runs.map(\.deltas).reduce(0, +)))
    }
    /// Server CPU time per delta, all runs together.
    var serverCPUNanosPerDelta: Double {
        Double(runs.map(\.serverCPUNanos).reduce(0, +)) / Double(runs.map(\.deltas).reduce(0, +))
    }
    var perSecond: [Double] { runs.map { Double($0.deltas) / $0.nanos.seconds } }
    var medianPerSecond: Double { perSecond.sorted()[perSecond.count / 2] }
}

struct ToolFigures {
    /// Client-observed server time per tool round trip: from the client's write of
    /// a `tool/call` answer returning to its read of the next `tool/call`.
    var gaps: Samples
    /// The client's own work (handling event lines) inside those gaps, summed per gap.
    var clientInGap: Samples
    /// Wall time per round trip, client work included.
    var wallPerRoundTripNanos: Double
    var roundTrips: Int
    var turns: Int
    /// Server CPU time of the tool turns, and of as many text-only turns in
    /// sessions of the same shape: the difference is what the round trips cost.
    var toolTurnsCPUNanos: UInt64
    var baselineTurnsCPUNanos: UInt64
    var serverCPUNanosPerRoundTrip: Double {
        (Double(toolTurnsCPUNanos) - Double(baselineTurnsCPUNanos)) / Double(roundTrips)
    }
}

struct LongTurnFigures {
    var roundTrips: Int
    var firstGaps: Samples
    var lastGaps: Samples
    var allGaps: Samples
    var turnNanos: UInt64
    var serverCPUNanos: UInt64
}

struct TurnFigures {
    var turns: Int
    var totalNanos: UInt64
    var latencies: [UInt64]
    var serverCPUNanos: UInt64
    var serverCPUNanosPerTurn: Double { Double(serverCPUNanos) / Double(turns) }
    var perSecond: Double { Double(turns) / totalNanos.seconds }
    var firstLatencies: Samples { Samples(Array(latencies.prefix(100))) }
    var lastLatencies: Samples { Samples(Array(latencies.suffix(100))) }
}

struct SlowReaderFigures {
    var deltas: Int
    var events: Int
    var rssBeforeKiB: Int
    var peakKiB: Int
}

struct SessionMemoryFigures {
    var sessions: Int
    var rssAfterInitializeKiB: Int
    var rssAfterSessionsKiB: Int
    var peakAfterSessionsKiB: Int
    var perSessionKiB: Double { Double(rssAfterSessionsKiB - rssAfterInitializeKiB) / Double(sessions) }
}

struct ColdStartFigures {
    var startups: Samples
    var idlePeakKiB: [Int]
    var idleRSSKiB: [Int]
    var idleAnonKiB: [Int]
    var medianIdleAnonKiB: Int { idleAnonKiB.sorted()[idleAnonKiB.count / 2] }
    var medianIdlePeakKiB: Int { idlePeakKiB.sorted()[idlePeakKiB.count / 2] }
    var medianIdleRSSKiB: Int { idleRSSKiB.sorted()[idleRSSKiB.count / 2] }
}

/// The five measurements. Each starts its own server so one cannot warm up or
/// bloat the next.
struct Measurements {
    let binary: String
    /// A private directory: each server gets a fresh store under it (never the
    /// user's), unless it runs `--ephemeral`.
    let scratch: String

    /// Store arguments for one server: a fresh directory, or none at all.
    func storeArguments(ephemeral: Bool) -> [String] {
        ephemeral ? ["--ephemeral"] : ["--store", scratch + "/store-\(UInt64.random(in: 0...UInt64.max))"]
    }

    func start(ephemeral: Bool = false, store: String? = nil, environment: [String: String] = [:]) throws -> ServerProcess {
        let storeArgs = store.map { ["--store", $0] } ?? storeArguments(ephemeral: ephemeral)
        let server = try ServerProcess(binary: binary, arguments: ["--log-level", "off"] + storeArgs, environment: environment)
        try server.initialize()
        return server
    }

    /// Request ids for one server; 1 was `initialize`.
    final class IDs {
        var next = 2
        func take() -> Int {
            defer { next += 1 }
            return next
        }
    }

    func createSession(_ server: ServerProcess, _ ids: IDs, config: JSONValue) throws -> String {
        let id = ids.take()
        try server.sendRequest(id: id, method: "session/create", params: config)
        guard let sid = try server.awaitResult(id: id)["sessionId"]?.stringValue else {
            throw BenchError("session/create answered without a sessionId")
        }
        return sid
    }

    static func scripted(_ items: [JSONValue]) -> JSONValue {
        ["provider": "scripted", "script": .array(items)]
    }

    // MARK: 1. Streamed text deltas

    /// One turn whose single round trip streams `count` one-token deltas, timed
    /// from writing `session/send` to reading its answer; counts `textDelta` events.
    func textDeltas(count: Int, runs: Int, ephemeral: Bool = false) throws -> DeltaFigures {
        let server = try start(ephemeral: ephemeral)
        defer { server.finish() }
        let ids = IDs()
        let tokens = JSONValue.array((0..<count).map { .string(" t\($0 % 10)") })
        var results: [(Int, Int, UInt64, UInt64)] = []
        for _ in 0..<runs {
            // A fresh session per run, so every run streams into an empty transcript.
            let sid = try createSession(server, ids, config: ["model": Self.scripted([["text": tokens]])])
            let id = ids.take()
            var seen = 0
            let cpu0 = try server.cpuNanos()
            let t0 = nowNanos()
            try server.sendRequest(id: id, method: "session/send", params: ["sessionId": .string(sid), "input": "go"])
            let result = try server.awaitResult(id: id) { line in
                if LineKind.isTextDelta(line) { seen += 1 }
            }
            let t1 = nowNanos()
            let cpu1 = try server.cpuNanos()
            // A client that falls more than the output queue's bound behind gets
            // merged deltas (fewer events, the same text): counted, reported, and
            // the text checked whole.
            guard result["message"]?["text"]?.stringValue?.utf8.count == 3 * count, seen <= count else {
                throw BenchError("the turn's answer is not the \(count) deltas' text (\(seen) textDelta events)")
            }
            results.append((count, seen, t1 - t0, cpu1 - cpu0))
        }
        return DeltaFigures(deltasPerRun: count, runs: results)
    }

    // MARK: Slow reader

    /// One `count`-delta turn during which the client reads nothing for
    /// `pauseSeconds`, then reads up to the answer: the server's peak RSS
    /// (VmHWM) against its RSS before the turn, and how many `textDelta`
    /// events carried the text (fewer than `count` when deltas were merged).
    func slowReader(count: Int, pauseSeconds: Double) throws -> SlowReaderFigures {
        let server = try start()
        defer { server.finish() }
        let ids = IDs()
        let tokens = JSONValue.array((0..<count).map { .string(" t\($0 % 10)") })
        let sid = try createSession(server, ids, config: ["model": Self.scripted([["text": tokens]])])
        let before = try server.memory()
        let id = ids.take()
        try server.sendRequest(id: id, method: "session/send", params: ["sessionId": .string(sid), "input": "go"])
        usleep(UInt32(pauseSeconds * 1_000_000))
        var events = 0
        let result = try server.awaitResult(id: id) { line in
            if LineKind.isTextDelta(line) { events += 1 }
        }
        guard result["message"]?["text"]?.stringValue?.utf8.count == 3 * count else { throw BenchError("the answer is not the whole text") }
        let after = try server.memory()
        return SlowReaderFigures(deltas: count, events: events, rssBeforeKiB: before.rssKiB, peakKiB: after.peakKiB)
    }

    // MARK: 2. Tool round trips

    /// A session with one tool whose script makes `roundTrips` calls, one per round
    /// trip, then answers "done" (with `roundTrips` 0: only the answer).
    private static func toolSession(roundTrips: Int) -> JSONValue {
        let calls: [JSONValue] = (0..<roundTrips).map { i in ["toolCalls": [["name": "echo", "arguments": ["i": .int(i)]]]] }
        return [
            "model": scripted(calls + [["text": ["done"]]]),
            "tools": [[
                "name": "echo", "description": "Returns its input.",
                "inputSchema": ["type": "object", "properties": ["i": ["type": "integer"]], "required": ["i"]],
            ]],
            "limits": ["maxToolCalls": .int(max(1, roundTrips)), "maxRoundTrips": .int(roundTrips + 1)],
        ]
    }

    private struct ToolTurn {
        var gaps: [UInt64] = []
        var clientInGap: [UInt64] = []
        var firstCallSeen: UInt64 = 0
        var lastCallSeen: UInt64 = 0
        var calls = 0
        var turnNanos: UInt64 = 0
        var serverCPUNanos: UInt64 = 0
    }

    /// Runs one turn of tool round trips, answering every `tool/call` at once.
    private func toolTurn(_ server: ServerProcess, _ ids: IDs, sessionId: String, expectedCalls: Int) throws -> ToolTurn {
        var turn = ToolTurn()
        let sendID = ids.take()
        let cpu0 = try server.cpuNanos()
        let t0 = nowNanos()
        try server.sendRequest(id: sendID, method: "session/send", params: ["sessionId": .string(sessionId), "input": "go"])
        var answeredAt: UInt64? = nil
        var clientWork: UInt64 = 0
        loop: while true {
            enum Line { case event, toolCall(JSONValue), answer(JSONValue), other }
            let read: Line? = try server.withNextLine { line in
                let seenAt = nowNanos()
                if LineKind.isEvent(line) {
                    clientWork += nowNanos() - seenAt
                    return .event
                }
                let message = try JSONValue.parse(line)
                if LineKind.isToolCall(line), let id = message["id"] {
                    if let answeredAt { turn.gaps.append(seenAt - answeredAt) }
                    if turn.calls == 0 { turn.firstCallSeen = seenAt }
                    turn.lastCallSeen = seenAt
                    return .toolCall(id)
                }
                if message["method"] == nil, message["id"] == .int(sendID) { return .answer(message) }
                return .other
            }
            switch read {
            case nil:
                throw BenchError("the server closed its output during a tool turn")
            case .event, .other:
                continue
            case .toolCall(let id):
                turn.calls += 1
                let message: JSONValue = ["jsonrpc": "2.0", "id": id, "result": ["outcome": "ok", "content": "ok"]]
                var answer = message.serialized()
                answer.append(0x0A)
                if answeredAt != nil { turn.clientInGap.append(clientWork) }
                clientWork = 0
                // Stamped before the write: on a busy machine the kernel often runs
                // the woken server inside our write(2), so the server's work can
                // happen before write returns.
                answeredAt = nowNanos()
                try server.write(answer)
            case .answer(let message):
                if let error = message["error"] { throw BenchError("tool turn failed: \(error)") }
                turn.turnNanos = nowNanos() - t0
                turn.serverCPUNanos = try server.cpuNanos() - cpu0
                break loop
            }
        }
        guard turn.calls == expectedCalls else { throw BenchError("expected \(expectedCalls) tool calls, got \(turn.calls)") }
        return turn
    }

    /// `turns` turns of `roundTripsPerTurn` tool round trips each, every turn in a
    /// fresh session (a history as short as a real turn's).
    func toolRoundTrips(turns: Int, roundTripsPerTurn: Int) throws -> ToolFigures {
        let server = try start()
        defer { server.finish() }
        let ids = IDs()
        var gaps: [UInt64] = []
        var clientInGap: [UInt64] = []
        var wall: [Double] = []
        var toolCPU: UInt64 = 0
        var baselineCPU: UInt64 = 0
        for _ in 0..<turns {
            let baseline = try createSession(server, ids, config: Self.toolSession(roundTrips: 0))
            baselineCPU += try toolTurn(server, ids, sessionId: baseline, expectedCalls: 0).serverCPUNanos
            let sid = try createSession(server, ids, config: Self.toolSession(roundTrips: roundTripsPerTurn))
            let t = try toolTurn(server, ids, sessionId: sid, expectedCalls: roundTripsPerTurn)
            toolCPU += t.serverCPUNanos
            gaps += t.gaps
            clientInGap += t.clientInGap
            if t.calls > 1 { wall.append(Double(t.lastCallSeen - t.firstCallSeen) / Double(t.calls - 1)) }
        }
        return ToolFigures(
            gaps: Samples(gaps), clientInGap: Samples(clientInGap),
            wallPerRoundTripNanos: wall.isEmpty ? 0 : wall.reduce(0, +) / Double(wall.count),
            roundTrips: turns * roundTripsPerTurn, turns: turns,
            toolTurnsCPUNanos: toolCPU, baselineTurnsCPUNanos: baselineCPU)
    }

    /// One turn of `roundTrips` tool round trips: how the cost grows with the turn's history.
    func longToolTurn(roundTrips: Int) throws -> LongTurnFigures {
        let server = try start()
        defer { server.finish() }
        let ids = IDs()
        return try longTurn(server, ids, config: Self.toolSession(roundTrips: roundTrips), roundTrips: roundTrips)
    }

    /// Runs one long tool turn in a new session and takes the gaps of its first and last 100 round trips.
    private func longTurn(_ server: ServerProcess, _ ids: IDs, config: JSONValue, roundTrips: Int) throws -> LongTurnFigures {
        let sid = try createSession(server, ids, config: config)
        let t = try toolTurn(server, ids, sessionId: sid, expectedCalls: roundTrips)
        let window = min(100, t.gaps.count)
        return LongTurnFigures(
            roundTrips: roundTrips, firstGaps: Samples(Array(t.gaps.prefix(window))),
            lastGaps: Samples(Array(t.gaps.suffix(window))), allGaps: Samples(t.gaps), turnNanos: t.turnNanos,
            serverCPUNanos: t.serverCPUNanos)
    }

    /// One turn of `roundTrips` tool round trips against the fake HTTP model
    /// server speaking `provider`'s API: every round trip sends the whole
    /// history over HTTP, so this shows what of that still grows with the turn.
    func longHTTPToolTurn(roundTrips: Int, provider: String) throws -> LongTurnFigures {
        let fake = try FakeModelServer()
        let server = try start()
        defer { server.finish() }
        let ids = IDs()
        guard case .object(var config) = Self.toolSession(roundTrips: roundTrips) else { throw BenchError("bad tool session") }
        config["model"] = ["provider": .string(provider), "model": "bench", "baseURL": .string(fake.baseURL("tools\(roundTrips)"))]
        return try longTurn(server, ids, config: .object(config), roundTrips: roundTrips)
    }

    // MARK: 3. Turns per second

    /// `turns` sequential one-delta turns, `perSession` in each session (all
    /// sessions are created first, untimed), each send waiting for the previous answer.
    func turnsPerSecond(turns: Int, perSession: Int, ephemeral: Bool = false) throws -> TurnFigures {
        let server = try start(ephemeral: ephemeral)
        defer { server.finish() }
        let ids = IDs()
        var sessions: [String] = []
        var remaining = turns
        while remaining > 0 {
            let count = min(perSession, remaining)
            let items = [JSONValue](repeating: ["text": ["ok"]], count: count)
            sessions += [String](repeating: try createSession(server, ids, config: ["model": Self.scripted(items)]), count: count)
            remaining -= count
        }
        var latencies: [UInt64] = []
        latencies.reserveCapacity(turns)
        let cpu0 = try server.cpuNanos()
        let t0 = nowNanos()
        for sid in sessions {
            let id = ids.take()
            let start = nowNanos()
            try server.sendRequest(id: id, method: "session/send", params: ["sessionId": .string(sid), "input": "hi"])
            try server.awaitResult(id: id)
            latencies.append(nowNanos() - start)
        }
        let total = nowNanos() - t0
        return TurnFigures(turns: turns, totalNanos: total, latencies: latencies, serverCPUNanos: try server.cpuNanos() - cpu0)
    }

    // MARK: 4. Idle sessions

    /// RSS after `initialize`, then after creating `sessions` idle sessions
    /// (pipelined in chunks of 100 requests).
    func idleSessions(_ sessions: Int) throws -> SessionMemoryFigures {
        let server = try start()
        defer { server.finish() }
        let ids = IDs()
        let before = try server.memory()
        let config: JSONValue = [
            "model": Self.scripted([["text": ["Hello", " there"]]]),
            "instructions": "You are a helpful assistant.",
        ]
        var created = 0
        while created < sessions {
            let chunk = min(100, sessions - created)
            var pending: [Int] = []
            for _ in 0..<chunk {
                let id = ids.take()
                pending.append(id)
                try server.sendRequest(id: id, method: "session/create", params: config)
            }
            for id in pending { try server.awaitResult(id: id) }
            created += chunk
        }
        let after = try server.memory()
        return SessionMemoryFigures(
            sessions: sessions, rssAfterInitializeKiB: before.rssKiB,
            rssAfterSessionsKiB: after.rssKiB, peakAfterSessionsKiB: after.peakKiB)
    }

    // MARK: 5. Cold start

    /// From `posix_spawn` to reading the `initialize` answer, `spawns` times; and
    /// the idle server's peak RSS right after.
    func coldStart(spawns: Int) throws -> ColdStartFigures {
        var times: [UInt64] = []
        var peaks: [Int] = []
        var rss: [Int] = []
        var anon: [Int] = []
        for _ in 0..<spawns {
            let t0 = nowNanos()
            let server = try ServerProcess(binary: binary, arguments: ["--log-level", "off"] + storeArguments(ephemeral: false))
            try server.initialize()
            times.append(nowNanos() - t0)
            let m = try server.memory()
            peaks.append(m.peakKiB)
            rss.append(m.rssKiB)
            anon.append(m.anonKiB)
            let status = server.finish()
            if status != 0 { throw BenchError("the server exited with status \(status) at end of input") }
        }
        return ColdStartFigures(startups: Samples(times), idlePeakKiB: peaks, idleRSSKiB: rss, idleAnonKiB: anon)
    }
}
