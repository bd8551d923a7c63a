import Synchronization

/// A mutex-guarded value with reference semantics, so closures can share it
/// (a `Mutex` itself cannot be copied into a closure).
final class LockedValue<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R: Sendable>(_ body: (inout sending Value) throws -> sending R) rethrows -> sending R { try mutex.withLock(body) }
    var value: Value { mutex.withLock { $0 } }
}
