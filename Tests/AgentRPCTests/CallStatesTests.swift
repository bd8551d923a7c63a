import AgentRPCProtocol
import Foundation
import Testing

@testable import AgentRPC

/// Where each call of a turn cut by a crash stood (`OpenTurn.callStates`),
/// from its entries and its `callSent` records.
@Suite struct CallStatesTests {
    private static func calls(_ ids: [String]) -> TranscriptContent {
        .toolCalls(calls: ids.map { ToolCallRecord(callId: $0, name: "step", arguments: [:]) }, profile: nil, text: nil)
    }

    private static func output(_ id: String) -> TranscriptContent {
        .toolOutput(callId: id, name: "step", outcome: .ok, content: "done", profile: nil, approvedArguments: nil)
    }

    private static func states(_ t: Transcript) -> [String] {
        (t.openTurn?.callStates(in: t.entries) ?? []).map { "\($0.call.callId):\($0.state.rawValue)" }
    }

    @Test func eachCallIsCompletedInDoubtOrNotSent() throws {
        var t = Transcript(properties: [:])
        let turn = try t.beginTurn { "t-\($0)" }
        _ = try t.append(.prompt(text: "go", images: nil), turn: turn)
        _ = try t.append(Self.calls(["a", "b", "c"]), turn: turn)
        #expect(Self.states(t) == ["a:notSent", "b:notSent", "c:notSent"])
        try t.recordCallSent("a", turn: turn)
        _ = try t.append(Self.output("a"), turn: turn)
        try t.recordCallSent("b", turn: turn)
        #expect(Self.states(t) == ["a:completed", "b:inDoubt", "c:notSent"])
    }

    @Test func aLaterRoundTripThatReusesCallIdsStartsAfresh() throws {
        var t = Transcript(properties: [:])
        let turn = try t.beginTurn { "t-\($0)" }
        _ = try t.append(Self.calls(["call_0"]), turn: turn)
        try t.recordCallSent("call_0", turn: turn)
        _ = try t.append(Self.output("call_0"), turn: turn)
        // The model's next round trip names its call call_0 again: not sent yet.
        _ = try t.append(Self.calls(["call_0"]), turn: turn)
        #expect(Self.states(t) == ["call_0:notSent"])
        try t.recordCallSent("call_0", turn: turn)
        #expect(Self.states(t) == ["call_0:inDoubt"])
    }

    @Test func aCallSentInATurnThatIsNotRunningDoesNotReplay() throws {
        var t = Transcript(properties: [:])
        #expect(throws: ReplayMismatch.self) { try t.replay(.callSent(turnId: "t-9", callId: "a"), at: Date()) }
    }
}

/// What a parked turn needs survives a snapshot (a compaction or an unload
/// with many records): its sends, answered round trips and usage, and the
/// scripted models' places.
@Suite struct ParkedTurnSnapshotTests {
    @Test func aSnapshotKeepsTheOpenTurnsProgress() throws {
        var t = Transcript(properties: [:])
        let turn = try t.beginTurn { "t-\($0)" }
        _ = try t.append(.prompt(text: "go", images: nil), turn: turn)
        _ = try t.appendAnswer(
            [.toolCalls(calls: [ToolCallRecord(callId: "a", name: "step", arguments: [:])], profile: nil, text: nil)], turn: turn,
            answered: .roundTripAnswered(turnId: turn, roundTrip: 1, usage: Usage(inputTokens: 3), positions: ["inline-x": 1]))
        try t.recordCallSent("a", turn: turn, attempt: 2, arguments: ["edited": true])
        let line = try JournalCodec.snapshotLine(t, at: Date(timeIntervalSince1970: 1))
        guard case .snapshot(let loaded) = try JournalCodec.decodeRecord(Array(line.dropLast())) else {
            Issue.record("not a snapshot")
            return
        }
        #expect(loaded.openTurn?.id == turn && loaded.openTurn?.countBefore == 0)
        #expect(loaded.openTurn?.sends["a"] == CallSends(count: 2, arguments: ["edited": true]))
        #expect(loaded.openTurn?.answeredRoundTrips == 1 && loaded.openTurn?.usage == Usage(inputTokens: 3))
        #expect(loaded.modelPositions == ["inline-x": 1])
    }

    /// A `session/generate` turn of a session that parks says so in its
    /// journal (`turnMode`), in its records and in a snapshot, so a loaded
    /// session recovers it rather than parking it; a mode it does not know is refused.
    @Test func aGenerateTurnsModeSurvivesItsRecordsAndASnapshot() throws {
        var t = Transcript(properties: [:])
        let turn = try t.beginTurn(mode: .generate) { "t-\($0)" }
        #expect(t.openTurn?.mode == .generate)
        let at = Date(timeIntervalSince1970: 1)
        guard case .change(let change, _) = try JournalCodec.decodeRecord(Array(try JournalCodec.line(for: .turnMode(turnId: turn, mode: .generate), at: at).dropLast())) else {
            Issue.record("not a change")
            return
        }
        #expect(change == .turnMode(turnId: turn, mode: .generate))
        var replayed = Transcript(properties: [:])
        try replayed.replay(.turnStarted(turnId: turn, number: 1), at: at)
        try replayed.replay(change, at: at)
        #expect(replayed.openTurn?.mode == .generate)
        guard case .snapshot(let loaded) = try JournalCodec.decodeRecord(Array(try JournalCodec.snapshotLine(t, at: at).dropLast())) else {
            Issue.record("not a snapshot")
            return
        }
        #expect(loaded.openTurn?.mode == .generate)
        #expect(throws: JournalRecordError.self) {
            try JournalCodec.decodeRecord(Array(#"{"type":"turnMode","at":1,"turnId":"t-1","mode":"chat"}"#.utf8))
        }
        // A chat turn writes no mode.
        var chat = Transcript(properties: [:])
        _ = try chat.beginTurn { "t-\($0)" }
        #expect(chat.openTurn?.mode == nil)
    }

    /// A client hook asked and not answered (`hookAsked` without its
    /// `hookAnswered`) is the open turn's `pendingHook`, in records and in a
    /// snapshot; its answer clears it.
    @Test func aPendingHookSurvivesItsRecordsAndASnapshot() throws {
        var t = Transcript(properties: [:])
        let turn = try t.beginTurn { "t-\($0)" }
        let hook = PendingHook(hook: .onResponse, profile: "main", payload: ["text": "done", "entryId": "e2"])
        try t.recordHookAsked(hook, turn: turn)
        #expect(t.openTurn?.pendingHook == hook)
        let at = Date(timeIntervalSince1970: 1)
        guard case .snapshot(let loaded) = try JournalCodec.decodeRecord(Array(try JournalCodec.snapshotLine(t, at: at).dropLast())) else {
            Issue.record("not a snapshot")
            return
        }
        #expect(loaded.openTurn?.pendingHook == hook)
        var replayed = Transcript(properties: [:])
        for change: TranscriptChange in [.turnStarted(turnId: turn, number: 1), .hookAsked(turnId: turn, hook)] {
            guard case .change(let read, _) = try JournalCodec.decodeRecord(Array(try JournalCodec.line(for: change, at: at).dropLast())) else {
                Issue.record("not a change")
                return
            }
            try replayed.replay(read, at: at)
        }
        #expect(replayed.openTurn?.pendingHook == hook)
        try t.recordHookAnswered(turn: turn)
        #expect(t.openTurn?.pendingHook == nil)
        #expect(throws: JournalRecordError.self) {
            try JournalCodec.decodeRecord(Array(#"{"type":"hookAsked","at":1,"turnId":"t-1","hook":{"hook":"onNothing","profile":"p","payload":{}}}"#.utf8))
        }
    }
}
