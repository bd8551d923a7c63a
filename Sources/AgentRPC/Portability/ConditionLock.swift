#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

#if canImport(Glibc) || canImport(Musl)
/// A mutex with a condition variable, as Foundation's `NSCondition` (same methods), on
/// pthreads so the binary needs no Foundation. Timed waits run on the monotonic clock:
/// a wall-clock step cannot lengthen or shorten them.
package final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init() {
        mutex.initialize(to: pthread_mutex_t())
        condition.initialize(to: pthread_cond_t())
        _ = pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        _ = pthread_condattr_init(&attributes)
        _ = pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        _ = pthread_cond_init(condition, &attributes)
        _ = pthread_condattr_destroy(&attributes)
    }

    deinit {
        _ = pthread_cond_destroy(condition)
        _ = pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func lock() { _ = pthread_mutex_lock(mutex) }
    package func unlock() { _ = pthread_mutex_unlock(mutex) }
    package func signal() { _ = pthread_cond_signal(condition) }
    package func broadcast() { _ = pthread_cond_broadcast(condition) }

    /// Waits (the lock held) until signalled; wakes spuriously too, as any condition.
    package func wait() { _ = pthread_cond_wait(condition, mutex) }

    /// Waits (the lock held) until signalled or `deadline`; false when the deadline passed.
    @discardableResult
    package func wait(until deadline: Date) -> Bool {
        let remaining = deadline.timeIntervalSinceNow
        guard remaining > 0 else { return false }
        var now = timespec()
        _ = clock_gettime(CLOCK_MONOTONIC, &now)
        // Clamped so that no deadline, however far, overflows the seconds.
        let wait = min(remaining, 1e9)
        let whole = Int(wait)
        var nanoseconds = Int(now.tv_nsec) + Int((wait - Double(whole)) * 1e9)
        var seconds = Int(now.tv_sec) + whole
        if nanoseconds >= 1_000_000_000 {
            nanoseconds -= 1_000_000_000
            seconds += 1
        }
        var until = timespec(tv_sec: seconds, tv_nsec: nanoseconds)
        return pthread_cond_timedwait(condition, mutex, &until) == 0
    }
}
#else
/// Darwin keeps Foundation: its `NSCondition` has the same methods.
package typealias ConditionLock = NSCondition
#endif
