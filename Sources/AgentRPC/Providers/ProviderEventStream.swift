import Synchronization

/// The events of one provider request, from the provider's producer (the
/// HTTP transport's thread, the scripted provider) to the turn that consumes
/// them: what `AsyncThrowingStream<ProviderEvent, any Error>` was here, made
/// for the rate of text deltas.
///
/// * The consumer takes every event buffered at once (`nextBatch`), so a
///   burst costs one lock and at most one suspension, not one per event; the
///   iterator hands them out one by one from its own copy.
/// * The iterator runs on the caller's actor (`next(isolation:)`), so
///   iterating on the session actor does not hop to another executor and back
///   per event; it lets the actor go once every `eventsPerYield` events, so a
///   long burst does not keep everything else waiting for the session out.
/// * A concrete type of this module: no generic type of the standard library
///   is instantiated at run time per event (its metadata lookups were a
///   quarter of the server's CPU per delta).
///
/// Semantics as `AsyncThrowingStream` with an unbounded buffer: events come
/// out in order, then the end or the failure; cancelling the consuming task
/// while it waits, or dropping the stream before its end, calls the
/// producer's `onTermination` with `.cancelled` (the request is abandoned),
/// and events buffered before that are still delivered.
package final class ProviderEventStream: AsyncSequence, Sendable {
    package typealias Element = ProviderEvent
    package typealias Failure = any Error

    /// How the stream ended, for the producer's `onTermination`.
    package enum Termination: Sendable {
        case finished
        case cancelled
    }

    /// The producer's side.
    package struct Continuation: Sendable {
        fileprivate let storage: Storage

        /// Buffers an event for the consumer; dropped after the stream ended.
        package func yield(_ event: ProviderEvent) { storage.yield(contentsOf: [event]) }

        /// Buffers events in order: a waiting consumer is woken once for all of them.
        package func yield(contentsOf events: [ProviderEvent]) { storage.yield(contentsOf: events) }

        /// Ends the stream after the events buffered so far; nil is a normal end.
        package func finish(throwing error: (any Error)? = nil) { storage.finish(error) }

        /// Called once, when the stream ends or the consumer gives up on it
        /// (never under the stream's lock, and after this is set).
        package var onTermination: (@Sendable (Termination) -> Void)? {
            get { storage.state.withLock { $0.onTermination } }
            nonmutating set { storage.setOnTermination(newValue) }
        }
    }

    private let storage: Storage

    /// A consumer on an actor (the session) gives it up for a moment after
    /// this many events in a row: a burst (a scripted item of 40,000
    /// deltas, a large read) would otherwise hold the actor to its end,
    /// and what waits for it (the abort at end of input, `session/cancel`,
    /// `getState`) only got in once the turn was over. One hop per this
    /// many events, where `AsyncThrowingStream` hopped once per event.
    package static let eventsPerYield = 256

    private init(storage: Storage) { self.storage = storage }

    /// Dropped by its consumer before the end: the producer is told, so an
    /// HTTP request nobody reads is abandoned.
    deinit { storage.cancel() }

    /// A stream and its producer's side.
    package static func makeStream() -> (stream: ProviderEventStream, continuation: Continuation) {
        let storage = Storage()
        return (ProviderEventStream(storage: storage), Continuation(storage: storage))
    }

    /// A stream fed by `build`, run at once (as `AsyncThrowingStream.init(_:build:)`).
    package convenience init(_ build: (Continuation) -> Void) {
        let storage = Storage()
        self.init(storage: storage)
        build(Continuation(storage: storage))
    }

    /// Every event buffered now, waiting for one if there is none; nil at the
    /// end. A failure is thrown after the events that came before it. Runs on
    /// the caller's executor: a batch that is ready costs no executor check
    /// (an isolated parameter made two a call, one a round trip's `stream`
    /// pays twice).
    nonisolated(nonsending) package func nextBatch() async throws -> [ProviderEvent]? {
        if let ready = try storage.take() { return ready }
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (waiter: UnsafeContinuation<[ProviderEvent]?, any Error>) in
                storage.wait(waiter)
            }
        } onCancel: {
            storage.cancel()
        }
    }

    package struct AsyncIterator: AsyncIteratorProtocol {
        package typealias Element = ProviderEvent
        package typealias Failure = any Error

        fileprivate let stream: ProviderEventStream
        private var batch: [ProviderEvent] = []
        private var index = 0
        /// Events handed out since the consumer last let its actor go.
        private var sinceYield = 0

        fileprivate init(stream: ProviderEventStream) { self.stream = stream }

        package mutating func next(isolation actor: isolated (any Actor)?) async throws(any Error) -> ProviderEvent? {
            if index == batch.count {
                guard let next = try await stream.nextBatch() else { return nil }
                batch = next
                index = 0
            }
            sinceYield += 1
            if sinceYield >= ProviderEventStream.eventsPerYield {
                sinceYield = 0
                await Task.yield()
            }
            defer { index += 1 }
            return batch[index]
        }

        package mutating func next() async throws -> ProviderEvent? { try await next(isolation: nil) }
    }

    package func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }
}

extension ProviderEventStream {
    fileprivate struct State {
        var buffer: [ProviderEvent] = []
        /// Set once the producer finished (`.success` for a normal end) or the consumer gave up.
        var end: Result<Void, any Error>?
        /// The failure has been thrown; what follows is nil.
        var endDelivered = false
        var waiter: UnsafeContinuation<[ProviderEvent]?, any Error>?
        package var onTermination: (@Sendable (Termination) -> Void)?
        /// `onTermination` was called (or is being called).
        var terminated = false
    }

    /// Shared by the stream, its iterators and the producer's continuation.
    /// Every touch of `state` is under its lock; continuations and the
    /// termination handler run after it is released.
    fileprivate final class Storage: Sendable {
        let state = Mutex(State())

        func yield(contentsOf events: [ProviderEvent]) {
            guard !events.isEmpty else { return }
            let waiter = state.withLock { s -> UnsafeContinuation<[ProviderEvent]?, any Error>? in
                guard s.end == nil else { return nil }
                guard let waiter = s.waiter else {
                    // An empty buffer takes the producer's array itself: its
                    // events are not copied one by one (and destroyed twice).
                    if s.buffer.isEmpty { s.buffer = events } else { s.buffer.append(contentsOf: events) }
                    return nil
                }
                s.waiter = nil
                return waiter
            }
            waiter?.resume(returning: events)
        }

        func finish(_ error: (any Error)?) {
            let (waiter, handler, result) = state.withLock { s -> (UnsafeContinuation<[ProviderEvent]?, any Error>?, (@Sendable (Termination) -> Void)?, Result<[ProviderEvent]?, any Error>?) in
                guard s.end == nil else { return (nil, nil, nil) }
                s.end = error.map { .failure($0) } ?? .success(())
                let handler = takeHandler(&s)
                guard let waiter = s.waiter else { return (nil, handler, nil) }
                s.waiter = nil
                // Nothing was buffered (a waiter only waits on an empty buffer).
                s.endDelivered = true
                return (waiter, handler, error.map { .failure($0) } ?? .success(nil))
            }
            handler?(.finished)
            if let waiter, let result { waiter.resume(with: result) }
        }

        /// The consumer gives up: the producer is told, a waiting consumer gets
        /// the end. Buffered events are still delivered.
        func cancel() {
            let (waiter, handler) = state.withLock { s -> (UnsafeContinuation<[ProviderEvent]?, any Error>?, (@Sendable (Termination) -> Void)?) in
                let handler = takeHandler(&s)
                if s.end == nil { s.end = .success(()) }
                let waiter = s.waiter
                s.waiter = nil
                if waiter != nil { s.endDelivered = true }
                return (waiter, handler)
            }
            handler?(.cancelled)
            waiter?.resume(returning: nil)
        }

        func setOnTermination(_ handler: (@Sendable (Termination) -> Void)?) {
            // Set after the end (a producer that finished synchronously): it
            // would never be called, as with `AsyncThrowingStream`.
            state.withLock { s in
                if !s.terminated { s.onTermination = handler }
            }
        }

        /// The buffered events, the end, or nil when the consumer must wait.
        func take() throws -> [ProviderEvent]?? {
            try state.withLock { s in Self.takeLocked(&s) }?.get()
        }

        /// Parks the consumer, unless something arrived since `take`.
        func wait(_ waiter: UnsafeContinuation<[ProviderEvent]?, any Error>) {
            let ready = state.withLock { s -> Result<[ProviderEvent]?, any Error>? in
                if let ready = Self.takeLocked(&s) { return ready }
                s.waiter = waiter
                return nil
            }
            if let ready { waiter.resume(with: ready) }
        }

        /// What the consumer gets now: the buffered events, else the end (the
        /// failure once, then nil), else nil when it must wait.
        private static func takeLocked(_ s: inout State) -> Result<[ProviderEvent]?, any Error>? {
            if !s.buffer.isEmpty {
                defer { s.buffer = [] }
                return .success(s.buffer)
            }
            guard let end = s.end else { return nil }
            if s.endDelivered { return .success(nil) }
            s.endDelivered = true
            return end.map { nil }
        }

        private func takeHandler(_ s: inout State) -> (@Sendable (Termination) -> Void)? {
            guard !s.terminated else { return nil }
            s.terminated = true
            defer { s.onTermination = nil }
            return s.onTermination
        }
    }
}
