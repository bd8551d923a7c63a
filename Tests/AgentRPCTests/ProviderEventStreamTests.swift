import Synchronization
import Testing
@testable import AgentRPC

/// `ProviderEventStream` keeps what the turn relied on from
/// `AsyncThrowingStream`: order, the failure after the events before it, and
/// the producer told when the consumer gives up.
@Suite struct ProviderEventStreamTests {
    private static func collect(_ stream: ProviderEventStream) async -> (events: [ProviderEvent], error: (any Error)?) {
        var events: [ProviderEvent] = []
        do {
            for try await event in stream { events.append(event) }
            return (events, nil)
        } catch {
            return (events, error)
        }
    }

    private struct Boom: Error, Equatable {}

    @Test func eventsComeInOrderThenTheEnd() async {
        let (stream, continuation) = ProviderEventStream.makeStream()
        continuation.yield(.textDelta("a"))
        continuation.yield(contentsOf: [.textDelta("b"), .textDelta("c")])
        continuation.finish()
        // After the end nothing more is taken.
        continuation.yield(.textDelta("late"))
        let result = await Self.collect(stream)
        #expect(result.events == [.textDelta("a"), .textDelta("b"), .textDelta("c")])
        #expect(result.error == nil)
    }

    @Test func aFailureComesAfterTheEventsBeforeItAndOnce() async throws {
        let (stream, continuation) = ProviderEventStream.makeStream()
        continuation.yield(.textDelta("a"))
        continuation.finish(throwing: Boom())
        let batch = try await stream.nextBatch()
        #expect(batch == [.textDelta("a")])
        await #expect(throws: Boom.self) { try await stream.nextBatch() }
        #expect(try await stream.nextBatch() == nil)
    }

    @Test func aBurstIsOneBatch() async throws {
        let (stream, continuation) = ProviderEventStream.makeStream()
        continuation.yield(contentsOf: (0..<100).map { .textDelta("\($0)") })
        continuation.yield(.end(.endTurn))
        #expect(try await stream.nextBatch()?.count == 101)
    }

    @Test func aWaitingConsumerIsWokenByTheProducer() async {
        let (stream, continuation) = ProviderEventStream.makeStream()
        let consumer = Task { await Self.collect(stream) }
        // From another task, whenever it runs: before or after the consumer waits.
        Task {
            continuation.yield(.textDelta("x"))
            continuation.yield(.end(.endTurn))
            continuation.finish()
        }
        let result = await consumer.value
        #expect(result.events == [.textDelta("x"), .end(.endTurn)])
        #expect(result.error == nil)
    }

    @Test func finishingTellsTheProducerFinished() {
        let (stream, continuation) = ProviderEventStream.makeStream()
        let seen = Mutex<[ProviderEventStream.Termination]>([])
        continuation.onTermination = { termination in seen.withLock { $0.append(termination) } }
        withExtendedLifetime(stream) {
            continuation.finish()
            continuation.finish(throwing: Boom())
        }
        #expect(seen.withLock { $0 } == [.finished])
    }

    @Test func cancellingTheWaitingConsumerTellsTheProducerAndEndsQuietly() async {
        let (stream, continuation) = ProviderEventStream.makeStream()
        let (told, tell) = AsyncStream.makeStream(of: ProviderEventStream.Termination.self)
        continuation.onTermination = { termination in
            tell.yield(termination)
            tell.finish()
        }
        let consumer = Task { await Self.collect(stream) }
        consumer.cancel()
        let result = await consumer.value
        #expect(result.events.isEmpty)
        #expect(result.error == nil)
        var terminations: [ProviderEventStream.Termination] = []
        for await termination in told { terminations.append(termination) }
        #expect(terminations == [.cancelled])
    }

    @Test func droppingTheStreamBeforeItsEndTellsTheProducer() {
        let seen = Mutex<[ProviderEventStream.Termination]>([])
        var continuation: ProviderEventStream.Continuation?
        do {
            let made = ProviderEventStream.makeStream()
            continuation = made.continuation
            made.continuation.onTermination = { termination in seen.withLock { $0.append(termination) } }
            made.continuation.yield(.textDelta("never read"))
        }
        #expect(seen.withLock { $0 } == [.cancelled])
        // The producer may go on yielding: it is dropped.
        continuation?.yield(.textDelta("more"))
        continuation?.finish()
        #expect(seen.withLock { $0 } == [.cancelled])
    }
}

/// A burst consumed on an actor lets that actor's other work in before its
/// end (the abort at end of input got in only after a 40,000-delta turn had
/// finished: SlowReaderTests.aTurnWhoseHeldTextReachesTheBoundWaitsForTheClient).
@Suite struct ProviderEventStreamActorTests {
    actor Consumer {
        private(set) var marked = false
        func mark() { marked = true }

        /// Consumes `stream`, enqueueing `mark` on this actor at the first
        /// event; returns how many events were handed out before it ran.
        func consume(_ stream: ProviderEventStream) async throws -> Int? {
            var count = 0
            var markedAt: Int?
            for try await _ in stream {
                if count == 0 { Task { self.mark() } }
                if marked, markedAt == nil { markedAt = count }
                count += 1
            }
            return markedAt
        }
    }

    @Test func aLongBurstLetsTheActorGo() async throws {
        let (stream, continuation) = ProviderEventStream.makeStream()
        let total = 4 * ProviderEventStream.eventsPerYield
        continuation.yield(contentsOf: (0..<total).map { .textDelta("\($0)") })
        continuation.finish()
        let markedAt = try await Consumer().consume(stream)
        // Without giving the actor up, the mark ran only after the last event.
        let at = try #require(markedAt, "the actor's other work ran only after the burst")
        #expect(at <= ProviderEventStream.eventsPerYield)
    }
}
