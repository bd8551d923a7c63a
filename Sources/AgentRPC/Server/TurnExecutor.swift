#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The task executor a turn's task prefers (`Task(executorPreference:)`):
/// it takes the thread hand-offs out of a tool round trip.
///
/// On the global pool a round trip crossed four threads: the reader thread
/// settled the `tool/call` answer and woke a pool thread for the turn's
/// continuation, and every frame the turn then queued could wake the writer
/// thread again (measured: ~12 futex calls and 8 context switches per round
/// trip, half the server's CPU). With this executor:
/// - the jobs run in *batches* on one thread: a job enqueued while a batch
///   runs on the calling thread (the turn hopping between the session actor
///   and nonisolated code, which a task executor does as a job each time) runs
///   next on that thread, after the current job returns, instead of waking a
///   pool thread; one such job at a time, the rest go to the pool, so a task
///   group's children still run side by side;
/// - the frames a batch queues wake the writer thread once, when the batch
///   ends (`deferWake`): nothing is written later than the end of the batch
///   that queued it, nor later than 64 KiB of output (`ByteSinkThread`);
/// - the continuation of an answer runs on the reader thread that settled it
///   (`runningAnswers`), never nested in another job there, at most
///   `inlineJobs` jobs long, after which the rest of the batch moves to the
///   pool: the reader reads on after a round trip's work, which ends at the
///   turn's next suspension (its next `tool/call`, or a wait for the model).
///   While it runs, input is not read: a cancel waits for the turn's next
///   suspension, as it would for the session actor anyway. Nothing a turn's
///   job does waits synchronously for input (all client questions are
///   requests awaited as continuations).
/// Frames queued by any thread outside a batch wake the writer as before.
@available(macOS 15.0, *)
final class TurnExecutor: TaskExecutor {
    static let shared = TurnExecutor()

    /// The longest batch the reader thread runs before it hands the rest to the pool.
    static let inlineJobs = 16

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        if let state = BatchThread.current {
            if state.running {
                if state.next == nil {
                    state.next = job
                    return
                }
            } else if state.answering {
                return runBatch(job, on: state, limit: Self.inlineJobs)
            }
        }
        Dispatching.async { [self] in runBatch(job, on: BatchThread.make(), limit: nil) }
    }

    /// Runs `first` and every job it enqueues on this thread, then wakes the
    /// writers the batch queued frames for. `limit` nil: no limit.
    private func runBatch(_ first: UnownedJob, on state: BatchThread, limit: Int?) {
        state.running = true
        let executor = asUnownedTaskExecutor()
        var job: UnownedJob? = first
        var ran = 0
        while let current = job {
            current.runSynchronously(on: executor)
            ran += 1
            job = state.next
            state.next = nil
            if let next = job, let limit, ran >= limit {
                Dispatching.async { [self] in runBatch(next, on: BatchThread.make(), limit: nil) }
                job = nil
            }
        }
        state.running = false
        state.wakeDeferred()
    }

    /// Runs `settle` (which resumes an answer's continuation) with this thread
    /// marked, so that a turn's continuation enqueued by it runs here at once.
    static func runningAnswers(_ settle: () -> Void) {
        let state = BatchThread.make()
        // Never nested: a reader thread that is itself running a batch (it cannot,
        // but a future caller might) leaves the continuation to the pool.
        guard !state.running else { return settle() }
        state.answering = true
        settle()
        state.answering = false
    }
}

/// What a thread running the batches of `TurnExecutor` keeps: its own, read
/// and written only by that thread (a pthread key), so it takes no lock.
final class BatchThread {
    /// A batch is running on this thread.
    fileprivate(set) var running = false
    /// The reader thread settles answers: a turn's job enqueued now runs here.
    fileprivate(set) var answering = false
    /// The job to run on this thread when the current one returns.
    fileprivate var next: UnownedJob?
    /// Sinks whose writer was not woken for frames this batch queued.
    private var deferred: [ByteSinkThread] = []

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        // The state of a thread that ends is released with it.
        _ = pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            Unmanaged<BatchThread>.fromOpaque(pointer).release()
        }
        return key
    }()

    /// This thread's state, nil on a thread that never ran a batch nor settled an answer.
    static var current: BatchThread? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        return Unmanaged<BatchThread>.fromOpaque(pointer).takeUnretainedValue()
    }

    static func make() -> BatchThread {
        if let current { return current }
        let state = BatchThread()
        _ = pthread_setspecific(key, Unmanaged.passRetained(state).toOpaque())
        return state
    }

    /// The calling thread's state while it runs a batch, else nil.
    static var running: BatchThread? {
        guard let state = current, state.running else { return nil }
        return state
    }

    /// Has the running batch wake `sink` when it ends (`ByteSinkThread`, for the
    /// first frame it did not wake its writer for).
    func deferWake(of sink: ByteSinkThread) {
        deferred.append(sink)
    }

    fileprivate func wakeDeferred() {
        guard !deferred.isEmpty else { return }
        let sinks = deferred
        deferred.removeAll(keepingCapacity: true)
        for sink in sinks { sink.wakeIfDeferred() }
    }
}
