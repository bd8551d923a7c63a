import Foundation
import Synchronization
import Testing

@testable import AgentRPC

/// The session index's `flock` is waited for within a bound: another process that
/// stops while holding it (a suspended `agentrpc chat` on the same store) must not
/// stop this one's turns, whose syncs append to the index.
@Suite struct SessionIndexLockTests {
    @Test func anAppendGivesUpOnAFileLockedByAnotherHolder() async throws {
        let directory = NSTemporaryDirectory() + "agentrpc-index-lock-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let index = SessionIndex(directory: directory, logger: Logger(level: .off), readJournal: { _ in nil })
        index.refresh()
        // Another open file description, as another process's: its exclusive lock
        // conflicts with the index's own shared one.
        let holder = open(directory + "/" + SessionIndex.fileName, O_RDONLY | O_CLOEXEC)
        #expect(holder >= 0)
        defer { close(holder) }
        #expect(flock(holder, LOCK_EX) == 0)

        // The append runs on a thread of its own; a second thread lets go of the lock
        // after 30 s in any case, so that a waiting append cannot hang the test.
        let released = Mutex(false)
        let returnedWhileLocked = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            Thread {
                index.remove("s-gone")
                done.resume(returning: !released.withLock { $0 })
            }.start()
            Thread {
                var left = 30_000
                while left > 0 && !released.withLock({ $0 }) {
                    usleep(10_000)
                    left -= 10
                }
                released.withLock { $0 = true }
                _ = flock(holder, LOCK_UN)
            }.start()
        }
        #expect(returnedWhileLocked, "the append waited for the lock instead of giving up after \(SessionIndex.lockWaitSeconds) s")
        released.withLock { $0 = true }
        _ = flock(holder, LOCK_UN)
        // Unlocked, the index is written again.
        let before = try FileManager.default.attributesOfItem(atPath: directory + "/" + SessionIndex.fileName)[.size] as? Int
        index.remove("s-gone-too")
        let after = try FileManager.default.attributesOfItem(atPath: directory + "/" + SessionIndex.fileName)[.size] as? Int
        #expect((after ?? 0) > (before ?? 0))
    }
}
