// agentrpc-bench: starts the release server as a subprocess, drives it over real
// pipes and prints what it measured — a table, then one JSON line. It asserts
// nothing; Benchmarks/README.md explains each number and the targets.
import AgentRPCProtocol
import Foundation

#if canImport(Glibc)
import Glibc
#endif

let usage = """
    USAGE: agentrpc-bench [options]

      --binary PATH          server to measure (default .build/release/agentrpc)
      --only LIST            comma-separated subset of: deltas,tools,turns,sessions,coldstart,encode,bodies,http,httpturn,store,slowreader
      --idle-seconds N       http: seconds the slow fake model streams (one chunk a second; default 8)
      --http-deltas N        http: deltas per streamed turn, per provider (default 20000)
      --http-requests N      http: one-delta turns for the connection figures (default 21)
      --deltas N             text deltas in the streaming turn (default 100000)
      --delta-runs N         streaming turns with the store on and as many off, alternately, each in a fresh server (default 5)
      --tool-turns N         turns in the tool benchmark, each in a fresh session (default 100)
      --tool-round-trips N   tool round trips per such turn (default 20)
      --long-round-trips N   tool round trips in the single long turn (default 2000)
      --turns N              sequential one-delta turns (default 2000)
      --turns-per-session N  of those, per session (default 20; all of them also run in one session)
      --sessions N           idle sessions for the memory figure (default 1000)
      --spawns N             cold starts (default 20)
      --encode-events N      events for the in-process encoding figure (default 500000)
      --slow-pause S         seconds the slow reader reads nothing during its 100000-delta turn (default 3)
      --stored-sessions N    stored sessions for the session/list figures (default 100000)
      --resume-entries N     entries of the stored session for the resume figure (default 10000)
      --resume-runs N        resumes, each in a fresh server (default 5)

    Every server gets a fresh store in a private temporary directory (removed at
    the end); deltas and turns are measured with the store on and with --ephemeral.
    """

struct Options {
    var binary = ".build/release/agentrpc"
    var only: Set<String> = ["deltas", "tools", "turns", "sessions", "coldstart", "encode", "bodies", "http", "httpturn", "store", "slowreader"]
    var deltas = 100_000
    var deltaRuns = 5
    var toolTurns = 100
    var toolRoundTrips = 20
    var longRoundTrips = 2000
    var turns = 2000
    var turnsPerSession = 20
    var sessions = 1000
    var spawns = 20
    var encodeEvents = 500_000
    var storedSessions = 100_000
    var resumeEntries = 10_000
    var resumeRuns = 5
    var idleSeconds = 8
    var httpDeltas = 20_000
    var httpRequests = 21
    var slowPauseSeconds = 3.0
}

func parseOptions(_ args: [String]) -> Options {
    var options = Options()
    var it = args.makeIterator()
    func value(_ name: String) -> String {
        guard let v = it.next() else { exitWithUsage("\(name) needs a value") }
        return v
    }
    func count(_ name: String) -> Int {
        guard let n = Int(value(name)), n > 0 else { exitWithUsage("\(name) needs a positive integer") }
        return n
    }
    while let arg = it.next() {
        switch arg {
        case "--binary": options.binary = value(arg)
        case "--only": options.only = Set(value(arg).split(separator: ",").map(String.init))
        case "--deltas": options.deltas = count(arg)
        case "--delta-runs": options.deltaRuns = count(arg)
        case "--tool-turns": options.toolTurns = count(arg)
        case "--tool-round-trips": options.toolRoundTrips = max(2, count(arg))
        case "--long-round-trips": options.longRoundTrips = max(2, count(arg))
        case "--turns": options.turns = count(arg)
        case "--turns-per-session": options.turnsPerSession = count(arg)
        case "--sessions": options.sessions = count(arg)
        case "--spawns": options.spawns = count(arg)
        case "--encode-events": options.encodeEvents = count(arg)
        case "--stored-sessions": options.storedSessions = count(arg)
        case "--resume-entries": options.resumeEntries = max(2, count(arg))
        case "--resume-runs": options.resumeRuns = count(arg)
        case "--idle-seconds": options.idleSeconds = count(arg)
        case "--http-deltas": options.httpDeltas = count(arg)
        case "--http-requests": options.httpRequests = max(2, count(arg))
        case "--slow-pause":
            guard let seconds = Double(value(arg)), seconds >= 0, seconds <= 600 else { exitWithUsage("--slow-pause needs seconds from 0 to 600") }
            options.slowPauseSeconds = seconds
        case "--help", "-h":
            print(usage)
            exit(0)
        default: exitWithUsage("unknown argument \(arg)")
        }
    }
    return options
}

func exitWithUsage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("agentrpc-bench: \(message)\n\(usage)\n".utf8))
    exit(2)
}

/// One row of the table.
struct Row {
    var label: String
    var value: String
    var target: String = ""
    var verdict: String = ""
}

func verdict(_ met: Bool) -> String { met ? "met" : "MISSED" }

let options = parseOptions(Array(CommandLine.arguments.dropFirst()))
if !options.only.subtracting(["encode", "bodies"]).isEmpty, !FileManager.default.isExecutableFile(atPath: options.binary) {
    exitWithUsage("no executable at \(options.binary); run `swift build -c release` first")
}
let scratch = (NSTemporaryDirectory() as NSString).appendingPathComponent("agentrpc-bench-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
try? FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: scratch) }
let bench = Measurements(binary: options.binary, scratch: scratch)
var rows: [Row] = []
var json: [String: JSONValue] = [
    "binary": .string(options.binary),
    "cpus": .int(ProcessInfo.processInfo.activeProcessorCount),
]

func progress(_ text: String) {
    FileHandle.standardError.write(Data("… \(text)\n".utf8))
}

do {
    if options.only.contains("deltas") {
        progress("streaming \(options.deltas) text deltas × \(options.deltaRuns), store on and --ephemeral alternately")
        // One run at a time, alternating (and alternating which goes first), so that
        // what else the machine does falls on both alike.
        var d = DeltaFigures(deltasPerRun: options.deltas, runs: [])
        var off = DeltaFigures(deltasPerRun: options.deltas, runs: [])
        for run in 0..<max(options.deltaRuns, 1) {
            for ephemeral in run % 2 == 0 ? [false, true] : [true, false] {
                let figures = try bench.textDeltas(count: options.deltas, runs: 1, ephemeral: ephemeral)
                if ephemeral { off.runs += figures.runs } else { d.runs += figures.runs }
            }
        }
        let rate = d.medianPerSecond
        let ratio = rate / off.medianPerSecond
        rows.append(Row(label: "1  text deltas per second (median of \(d.runs.count) turns, store on)", value: "\(rate.grouped)/s", target: "≥ 200,000/s", verdict: verdict(rate >= 200_000)))
        rows.append(Row(label: "   runs", value: d.perSecond.map { "\($0.grouped)" }.joined(separator: ", ")))
        rows.append(Row(label: "   with --ephemeral (runs)", value: "\(off.medianPerSecond.grouped)/s (\(off.perSecond.map { "\($0.grouped)" }.joined(separator: ", ")))"))
        rows.append(Row(label: "   store on / off", value: "\((ratio * 100).fixed(1)) %", target: "≥ 95 %", verdict: verdict(ratio >= 0.95)))
        rows.append(Row(label: "   server CPU per delta (all threads), store on / off", value: "\((d.serverCPUNanosPerDelta / 1000).fixed(2)) / \((off.serverCPUNanosPerDelta / 1000).fixed(2)) µs"))
        // Below 100 % the client fell behind and the server merged deltas (fewer, larger events).
        rows.append(Row(label: "   textDelta events per delta, store on / off", value: "\((d.eventsPerDelta * 100).fixed(1)) / \((off.eventsPerDelta * 100).fixed(1)) %"))
        json["textDeltaEventsPerDelta"] = .double(d.eventsPerDelta.rounded(places: 4))
        json["textDeltaServerCPUMicros"] = .double((d.serverCPUNanosPerDelta / 1000).rounded(places: 3))
        json["textDeltaServerCPUMicrosEphemeral"] = .double((off.serverCPUNanosPerDelta / 1000).rounded(places: 3))
        json["textDeltasPerSecond"] = .double(rate.rounded())
        json["textDeltasPerSecondEphemeral"] = .double(off.medianPerSecond.rounded())
        json["textDeltasPerSecondRuns"] = .array(d.perSecond.map { .double($0.rounded()) })
        json["textDeltasPerTurn"] = .int(d.deltasPerRun)
    }

    if options.only.contains("slowreader") {
        progress("a client that reads nothing for \(options.slowPauseSeconds) s during a \(options.deltas)-delta turn")
        let r = try bench.slowReader(count: options.deltas, pauseSeconds: options.slowPauseSeconds)
        let growthMiB = Double(r.peakKiB - r.rssBeforeKiB) / 1024
        rows.append(Row(label: "   slow reader: peak RSS above the idle server (\(options.deltas) deltas)", value: "\(growthMiB.fixed(1)) MiB"))
        rows.append(Row(label: "   slow reader: textDelta events carrying them", value: "\(r.events)"))
        json["slowReaderPeakRSSKiB"] = .int(r.peakKiB)
        json["slowReaderRSSBeforeKiB"] = .int(r.rssBeforeKiB)
        json["slowReaderTextDeltaEvents"] = .int(r.events)
    }

    if options.only.contains("tools") {
        progress("\(options.toolTurns) turns × \(options.toolRoundTrips) tool round trips")
        let t = try bench.toolRoundTrips(turns: options.toolTurns, roundTripsPerTurn: options.toolRoundTrips)
        let median = t.gaps.median.micros
        rows.append(Row(label: "2  tool round trip, server side (median gap, \(options.toolRoundTrips)-call turns)", value: "\(median.fixed(1)) µs", target: "< 100 µs", verdict: verdict(median < 100)))
        rows.append(Row(label: "   gap p10 / p90 / mean", value: "\(t.gaps.percentile(10).micros.fixed(1)) / \(t.gaps.percentile(90).micros.fixed(1)) / \((t.gaps.mean / 1000).fixed(1)) µs"))
        rows.append(Row(label: "   client work inside the gap (median)", value: "\(t.clientInGap.median.micros.fixed(2)) µs"))
        rows.append(Row(label: "   wall time per round trip, client included", value: "\((t.wallPerRoundTripNanos / 1000).fixed(1)) µs"))
        rows.append(Row(label: "   server CPU per round trip (minus text-only turns)", value: "\((t.serverCPUNanosPerRoundTrip / 1000).fixed(1)) µs"))
        json["toolRoundTripServerCPUMicros"] = .double((t.serverCPUNanosPerRoundTrip / 1000).rounded(places: 1))
        json["toolRoundTripServerMicros"] = .double(median.rounded(places: 1))
        json["toolRoundTripServerMicrosP90"] = .double(t.gaps.percentile(90).micros.rounded(places: 1))
        json["toolRoundTripServerMicrosMean"] = .double((t.gaps.mean / 1000).rounded(places: 1))
        json["toolRoundTripWallMicros"] = .double((t.wallPerRoundTripNanos / 1000).rounded(places: 1))
        json["toolRoundTripClientMicros"] = .double(t.clientInGap.median.micros.rounded(places: 2))
        json["toolRoundTrips"] = .int(t.roundTrips)

        progress("one turn of \(options.longRoundTrips) tool round trips")
        let l = try bench.longToolTurn(roundTrips: options.longRoundTrips)
        rows.append(Row(label: "   one \(l.roundTrips)-call turn: median gap, first / last 100", value: "\(l.firstGaps.median.micros.fixed(1)) / \(l.lastGaps.median.micros.fixed(1)) µs"))
        rows.append(Row(label: "   one \(l.roundTrips)-call turn: mean gap, whole turn", value: "\((l.allGaps.mean / 1000).fixed(1)) µs"))
        json["longTurnRoundTrips"] = .int(l.roundTrips)
        json["longTurnGapMicrosFirst100"] = .double(l.firstGaps.median.micros.rounded(places: 1))
        json["longTurnGapMicrosLast100"] = .double(l.lastGaps.median.micros.rounded(places: 1))
        json["longTurnGapMicrosMean"] = .double((l.allGaps.mean / 1000).rounded(places: 1))
        json["longTurnSeconds"] = .double(l.turnNanos.seconds.rounded(places: 3))
        json["longTurnServerCPUSeconds"] = .double(l.serverCPUNanos.seconds.rounded(places: 3))
        rows.append(Row(label: "   one \(l.roundTrips)-call turn: wall / server CPU", value: "\(l.turnNanos.seconds.fixed(2)) / \(l.serverCPUNanos.seconds.fixed(2)) s"))
    }

    if options.only.contains("turns") {
        progress("\(options.turns) sequential one-delta turns, \(options.turnsPerSession) per session, store on")
        let t = try bench.turnsPerSecond(turns: options.turns, perSession: options.turnsPerSession)
        progress("the same with --ephemeral")
        let tOff = try bench.turnsPerSecond(turns: options.turns, perSession: options.turnsPerSession, ephemeral: true)
        rows.append(Row(label: "3  one-delta turns per second (\(t.turns / options.turnsPerSession) sessions × \(options.turnsPerSession)), store on", value: "\(t.perSecond.grouped)/s"))
        rows.append(Row(label: "   the same with --ephemeral", value: "\(tOff.perSecond.grouped)/s"))
        rows.append(Row(label: "   turn latency median / p90, store on", value: "\(Samples(t.latencies).median.micros.fixed(0)) / \(Samples(t.latencies).percentile(90).micros.fixed(0)) µs"))
        rows.append(Row(label: "   turn latency median / p90, --ephemeral", value: "\(Samples(tOff.latencies).median.micros.fixed(0)) / \(Samples(tOff.latencies).percentile(90).micros.fixed(0)) µs"))
        rows.append(Row(label: "   server CPU per turn, store on / off", value: "\((t.serverCPUNanosPerTurn / 1000).fixed(1)) / \((tOff.serverCPUNanosPerTurn / 1000).fixed(1)) µs"))
        json["turnsPerSecond"] = .double(t.perSecond.rounded())
        json["turnsPerSecondEphemeral"] = .double(tOff.perSecond.rounded())
        json["turnsPerSession"] = .int(options.turnsPerSession)
        json["turnLatencyMicros"] = .double(Samples(t.latencies).median.micros.rounded(places: 1))
        json["turnLatencyMicrosEphemeral"] = .double(Samples(tOff.latencies).median.micros.rounded(places: 1))
        json["turnServerCPUMicros"] = .double((t.serverCPUNanosPerTurn / 1000).rounded(places: 1))
        json["turnServerCPUMicrosEphemeral"] = .double((tOff.serverCPUNanosPerTurn / 1000).rounded(places: 1))

        progress("\(options.turns) sequential one-delta turns in one session")
        let one = try bench.turnsPerSecond(turns: options.turns, perSession: options.turns)
        rows.append(Row(label: "   all \(one.turns) in one session: turns per second", value: "\(one.perSecond.grouped)/s"))
        rows.append(Row(label: "   all in one session: latency median, first / last 100", value: "\(one.firstLatencies.median.micros.fixed(0)) / \(one.lastLatencies.median.micros.fixed(0)) µs"))
        json["oneSessionTurnsPerSecond"] = .double(one.perSecond.rounded())
        json["oneSessionTurnLatencyMicrosFirst100"] = .double(one.firstLatencies.median.micros.rounded(places: 1))
        json["oneSessionTurnLatencyMicrosLast100"] = .double(one.lastLatencies.median.micros.rounded(places: 1))
    }

    if options.only.contains("sessions") {
        progress("\(options.sessions) idle sessions")
        let s = try bench.idleSessions(options.sessions)
        rows.append(Row(label: "4  RSS per idle session (\(s.sessions) sessions)", value: "\(s.perSessionKiB.fixed(1)) KiB", target: "< 20 KB", verdict: verdict(s.perSessionKiB * 1024 < 20_000)))
        rows.append(Row(label: "   RSS after initialize → after sessions", value: "\(s.rssAfterInitializeKiB) → \(s.rssAfterSessionsKiB) KiB"))
        rows.append(Row(label: "   peak RSS (VmHWM) after sessions", value: "\(s.peakAfterSessionsKiB) KiB"))
        json["idleSessions"] = .int(s.sessions)
        json["perSessionKiB"] = .double(s.perSessionKiB.rounded(places: 2))
        json["rssAfterInitializeKiB"] = .int(s.rssAfterInitializeKiB)
        json["rssAfterSessionsKiB"] = .int(s.rssAfterSessionsKiB)
        json["peakAfterSessionsKiB"] = .int(s.peakAfterSessionsKiB)
    }

    if options.only.contains("coldstart") {
        progress("\(options.spawns) cold starts")
        let c = try bench.coldStart(spawns: options.spawns)
        rows.append(Row(label: "5  cold start to the initialize answer (median of \(c.startups.count))", value: "\(c.startups.median.millis.fixed(2)) ms"))
        rows.append(Row(label: "   min / max", value: "\(c.startups.min.millis.fixed(2)) / \(c.startups.max.millis.fixed(2)) ms"))
        rows.append(Row(label: "   idle server peak RSS (VmHWM) / RSS / anonymous part", value: "\(c.medianIdlePeakKiB) / \(c.medianIdleRSSKiB) / \(c.medianIdleAnonKiB) KiB"))
        json["coldStartMillis"] = .double(c.startups.median.millis.rounded(places: 2))
        json["coldStartMillisMin"] = .double(c.startups.min.millis.rounded(places: 2))
        json["idlePeakRSSKiB"] = .int(c.medianIdlePeakKiB)
        json["idleRSSKiB"] = .int(c.medianIdleRSSKiB)
        json["idleAnonRSSKiB"] = .int(c.medianIdleAnonKiB)
    }

    if options.only.contains("http") {
        progress("HTTP providers against a local fake model server")
        let h = try bench.httpProviders(idleSeconds: options.idleSeconds, deltas: options.httpDeltas, runs: 3, requests: options.httpRequests)
        rows.append(Row(label: "7  idle stream (1 chunk/s over http): server CPU / wall", value: "\(h.idleCPUSeconds.fixed(3)) / \(h.idleWallSeconds.fixed(1)) s = \(h.idleCPUPercent.fixed(2)) %", target: "< 2 % of a core", verdict: verdict(h.idleCPUPercent < 2)))
        let openai = (h.cpuNanosPerDelta["openai"] ?? 0) / 1000
        let anthropic = (h.cpuNanosPerDelta["anthropic"] ?? 0) / 1000
        rows.append(Row(label: "   server CPU per delta over HTTP: OpenAI / Anthropic", value: "\(openai.fixed(2)) / \(anthropic.fixed(2)) µs", target: "OpenAI ≤ 1.2 × Anthropic", verdict: verdict(openai <= anthropic * 1.2)))
        let responses = (h.cpuNanosPerDelta["openai-responses"] ?? 0) / 1000
        rows.append(Row(label: "   server CPU per delta over HTTP: OpenAI Responses", value: "\(responses.fixed(2)) µs"))
        json["httpDeltaCPUMicrosOpenAIResponses"] = .double(responses.rounded(places: 3))
        rows.append(Row(label: "   connections opened for \(h.requests) requests", value: "\(h.connections)"))
        rows.append(Row(label: "   one-delta turn, median: kept-alive / new connection each", value: "\((Double(h.keepAliveTurnNanos) / 1000).fixed(0)) / \((Double(h.freshConnectionTurnNanos) / 1000).fixed(0)) µs"))
        json["httpIdleCPUPercent"] = .double(h.idleCPUPercent.rounded(places: 3))
        json["httpIdleCPUSeconds"] = .double(h.idleCPUSeconds.rounded(places: 3))
        json["httpDeltaCPUMicrosOpenAI"] = .double(openai.rounded(places: 3))
        json["httpDeltaCPUMicrosAnthropic"] = .double(anthropic.rounded(places: 3))
        json["httpConnections"] = .int(h.connections)
        json["httpRequests"] = .int(h.requests)
        json["httpTurnMicrosKeepAlive"] = .double((Double(h.keepAliveTurnNanos) / 1000).rounded(places: 1))
        json["httpTurnMicrosNewConnection"] = .double((Double(h.freshConnectionTurnNanos) / 1000).rounded(places: 1))

        progress("the same over https (TLS with a self-signed certificate)")
        let s = try bench.httpsProviders(idleSeconds: options.idleSeconds, deltas: options.httpDeltas, runs: 3)
        rows.append(Row(label: "   idle stream (1 chunk/s over https, new connection): server CPU / wall", value: "\(s.idleCPUSeconds.fixed(3)) / \(s.idleWallSeconds.fixed(1)) s = \(s.idleCPUPercent.fixed(2)) %", target: "< 2 % of a core", verdict: verdict(s.idleCPUPercent < 2)))
        rows.append(Row(label: "   server CPU per delta over https: OpenAI", value: "\((s.cpuNanosPerDelta / 1000).fixed(2)) µs"))
        json["httpsIdleCPUPercent"] = .double(s.idleCPUPercent.rounded(places: 3))
        json["httpsIdleCPUSeconds"] = .double(s.idleCPUSeconds.rounded(places: 3))
        json["httpsDeltaCPUMicrosOpenAI"] = .double((s.cpuNanosPerDelta / 1000).rounded(places: 3))
    }

    if options.only.contains("store") {
        progress("session/list over \(options.storedSessions) stored sessions")
        let l = try bench.storeList(sessions: options.storedSessions)
        rows.append(Row(label: "8  session/list over \(l.sessions) stored sessions, page of \(l.pageSize): first page (median of \(l.firstPage.count))", value: "\(l.firstPage.median.millis.fixed(2)) ms", target: "< 5 ms", verdict: verdict(l.firstPage.median.millis < 5)))
        rows.append(Row(label: "   the 50th page (median)", value: "\(l.fiftiethPage.median.millis.fixed(2)) ms", target: "< 5 ms", verdict: verdict(l.fiftiethPage.median.millis < 5)))
        rows.append(Row(label: "   the last page (median)", value: "\(l.lastPage.median.millis.fixed(2)) ms"))
        rows.append(Row(label: "   first list of a fresh server: index rebuilt / index read and checked", value: "\(l.rebuildNanos.millis.fixed(0)) / \(l.coldNanos.millis.fixed(0)) ms"))
        json["storedSessions"] = .int(l.sessions)
        json["listFirstPageMillis"] = .double(l.firstPage.median.millis.rounded(places: 3))
        json["list50thPageMillis"] = .double(l.fiftiethPage.median.millis.rounded(places: 3))
        json["listLastPageMillis"] = .double(l.lastPage.median.millis.rounded(places: 3))
        json["listRebuildMillis"] = .double(l.rebuildNanos.millis.rounded(places: 1))
        json["listColdMillis"] = .double(l.coldNanos.millis.rounded(places: 1))

        progress("session/resume of a stored session of \(options.resumeEntries) entries × \(options.resumeRuns)")
        let r = try bench.resumeLarge(entries: options.resumeEntries, runs: options.resumeRuns)
        rows.append(Row(label: "9  session/resume, \(r.entries) entries, every record replayed (\(r.journalBytes / 1024) KiB journal, median of \(r.resumes.count))", value: "\(r.resumes.median.millis.fixed(1)) ms", target: "< 50 ms", verdict: verdict(r.resumes.median.millis < 50)))
        rows.append(Row(label: "   min / max; server CPU median", value: "\(r.resumes.min.millis.fixed(1)) / \(r.resumes.max.millis.fixed(1)); \(r.resumeCPU.median.millis.fixed(1)) ms"))
        // Issue 21's target for a journal as a crash leaves it, judged on the server's CPU (the wall time adds the machine's scheduling).
        rows.append(Row(label: "   server CPU median (issue 21: 10,000 entries as a crash leaves them)", value: "\(r.resumeCPU.median.millis.fixed(1)) ms", target: "< 10 ms", verdict: verdict(r.resumeCPU.median.millis < 10)))
        rows.append(Row(label: "   after a clean close (snapshot, \(r.closedJournalBytes / 1024) KiB journal), median", value: "\(r.resumesAfterClose.median.millis.fixed(1)) ms", target: "< 50 ms", verdict: verdict(r.resumesAfterClose.median.millis < 50)))
        rows.append(Row(label: "   min / max; server CPU median", value: "\(r.resumesAfterClose.min.millis.fixed(1)) / \(r.resumesAfterClose.max.millis.fixed(1)); \(r.resumeAfterCloseCPU.median.millis.fixed(1)) ms"))
        json["resumeEntries"] = .int(r.entries)
        json["resumeMillis"] = .double(r.resumes.median.millis.rounded(places: 2))
        json["resumeServerCPUMillis"] = .double(r.resumeCPU.median.millis.rounded(places: 2))
        json["resumeAfterCloseMillis"] = .double(r.resumesAfterClose.median.millis.rounded(places: 2))
        json["resumeAfterCloseServerCPUMillis"] = .double(r.resumeAfterCloseCPU.median.millis.rounded(places: 2))

        progress("a journal opened and closed, as once per turn")
        let oc = try bench.journalOpenClose()
        rows.append(Row(label: "   journal open + close per turn: wall / CPU (median of 5 × 100,000); a line's write + fsync", value: "\((oc.wall / 1000).fixed(2)) / \((oc.cpu / 1000).fixed(2)) µs; \((oc.fsync / 1000).fixed(0)) µs"))
        json["journalOpenCloseMicros"] = .double((oc.wall / 1000).rounded(places: 3))
        json["journalOpenCloseCPUMicros"] = .double((oc.cpu / 1000).rounded(places: 3))
        json["journalWriteFsyncMicros"] = .double((oc.fsync / 1000).rounded(places: 1))
    }

    if options.only.contains("encode") {
        progress("encoding \(options.encodeEvents) textDelta events in process")
        let e = try measureEventEncoding(events: options.encodeEvents)
        rows.append(Row(label: "6  in process: one textDelta event, emitting thread CPU", value: "\((e.callerCPUNanosPerEvent / 1000).fixed(2)) µs"))
        json["eventEncodeCPUMicros"] = .double((e.callerCPUNanosPerEvent / 1000).rounded(places: 3))
    }

    if options.only.contains("httpturn") {
        for (provider, label) in [("openai", "OpenAI chat"), ("anthropic", "Anthropic"), ("openai-responses", "Responses")] {
            progress("one turn of \(options.longRoundTrips) tool round trips over HTTP (\(provider), local fake model)")
            let l = try bench.longHTTPToolTurn(roundTrips: options.longRoundTrips, provider: provider)
            rows.append(Row(
                label: "10 one \(l.roundTrips)-call turn over HTTP, \(label): median gap, first / last 100; server CPU",
                value: "\(l.firstGaps.median.micros.fixed(0)) / \(l.lastGaps.median.micros.fixed(0)) µs; \(l.serverCPUNanos.seconds.fixed(2)) s",
                target: "last ≤ 1.5 × first", verdict: verdict(l.lastGaps.median <= l.firstGaps.median * 3 / 2)))
            let key = provider == "openai" ? "OpenAI" : provider == "anthropic" ? "Anthropic" : "Responses"
            json["httpLongTurnGapMicrosFirst100\(key)"] = .double(l.firstGaps.median.micros.rounded(places: 1))
            json["httpLongTurnGapMicrosLast100\(key)"] = .double(l.lastGaps.median.micros.rounded(places: 1))
            json["httpLongTurnServerCPUSeconds\(key)"] = .double(l.serverCPUNanos.seconds.rounded(places: 3))
        }
    }

    if options.only.contains("bodies") {
        progress("building HTTP request bodies for a turn of \(options.longRoundTrips) tool round trips, in process")
        let b = measureRequestBodies(roundTrips: options.longRoundTrips, repeats: 20)
        rows.append(Row(
            label: "10 HTTP body of \(b.messages) messages (\(b.bodyBytes / 1024) KiB), as sent after the previous round trip: OpenAI / Anthropic / Responses",
            value: "\(Int(b.incremental.openAI)) / \(Int(b.incremental.anthropic)) / \(Int(b.incremental.responses)) µs"))
        rows.append(Row(
            label: "   built whole and serialized (--dump-requests): OpenAI / Anthropic / Responses",
            value: "\(Int(b.whole.openAI)) / \(Int(b.whole.anthropic)) / \(Int(b.whole.responses)) µs"))
        json["requestBodyMessages"] = .int(b.messages)
        json["requestBodyOpenAIMicros"] = .double(b.incremental.openAI.rounded(places: 1))
        json["requestBodyAnthropicMicros"] = .double(b.incremental.anthropic.rounded(places: 1))
        json["requestBodyResponsesMicros"] = .double(b.incremental.responses.rounded(places: 1))
        json["requestBodyWholeOpenAIMicros"] = .double(b.whole.openAI.rounded(places: 1))
        json["requestBodyWholeAnthropicMicros"] = .double(b.whole.anthropic.rounded(places: 1))
        json["requestBodyWholeResponsesMicros"] = .double(b.whole.responses.rounded(places: 1))
    }
} catch {
    FileHandle.standardError.write(Data("agentrpc-bench: \(error)\n".utf8))
    exit(1)
}

let labelWidth = rows.map(\.label.count).max() ?? 0
let valueWidth = rows.map(\.value.count).max() ?? 0
print("agentrpc benchmarks — \(options.binary), \(ProcessInfo.processInfo.activeProcessorCount) CPUs")
for r in rows {
    let label = r.label.padding(toLength: labelWidth, withPad: " ", startingAt: 0)
    let value = String(repeating: " ", count: valueWidth - r.value.count) + r.value
    let tail = r.target.isEmpty ? "" : "   target \(r.target): \(r.verdict)"
    print("\(label)  \(value)\(tail)")
}
print(JSONValue.object(json).serializedString())
