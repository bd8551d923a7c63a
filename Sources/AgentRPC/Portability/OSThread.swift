#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Foundation
#endif

/// A dedicated operating-system thread, started on pthreads so the binary needs no
/// Foundation `Thread` (whose module loads ICU at start-up on Linux).
package enum OSThread {
    /// The longest name the Linux kernel keeps for a thread (`comm`: 16 bytes with the NUL).
    package static let maxNameBytes = 15

    /// Why the system refused a thread (`pthread_create`'s error: EAGAIN when the
    /// process or user is at its thread limit, ENOMEM).
    package struct StartError: Error, Equatable, CustomStringConvertible {
        package var name: String
        package var code: Int32
        package var description: String { "cannot start the thread '\(name)': \(String(cString: strerror(code)))" }
    }

    /// `AGENTRPC_TEST_REFUSE_THREAD=NAME` (docs/testing.md): threads whose name begins
    /// with NAME are refused with EAGAIN, as a process at its thread limit would see,
    /// so the tests reach every caller's answer to a refused thread.
    private static let refusedPrefix: String? = {
        guard let value = getenv("AGENTRPC_TEST_REFUSE_THREAD") else { return nil }
        let prefix = String(cString: value)
        return prefix.isEmpty ? nil : prefix
    }()

    /// Runs `body` on a new detached thread named `name` (cut to `maxNameBytes` bytes,
    /// the kernel's limit: a longer name would be refused whole). `stackSize` nil keeps
    /// the system's default. Throws when the system refused the thread; then `body`
    /// never runs, and every caller decides what that means for its work (nothing
    /// may wait for a thread that never started).
    package static func start(name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) throws(StartError) {
        if let refusedPrefix, name.hasPrefix(refusedPrefix) { throw StartError(name: name, code: EAGAIN) }
        #if canImport(Glibc) || canImport(Musl)
        let kernelName = String(decoding: name.utf8.prefix(maxNameBytes), as: UTF8.self)
        let start = Start(name: kernelName, body: body)
        let attributes = UnsafeMutablePointer<pthread_attr_t>.allocate(capacity: 1)
        defer { attributes.deallocate() }
        let initialized = pthread_attr_init(attributes)
        guard initialized == 0 else { throw StartError(name: name, code: initialized) }
        defer { pthread_attr_destroy(attributes) }
        _ = pthread_attr_setdetachstate(attributes, Int32(PTHREAD_CREATE_DETACHED))
        if let stackSize { _ = pthread_attr_setstacksize(attributes, max(stackSize, Int(PTHREAD_STACK_MIN))) }
        let thread = UnsafeMutablePointer<pthread_t>.allocate(capacity: 1)
        defer { thread.deallocate() }
        let context = Unmanaged.passRetained(start).toOpaque()
        let result = pthread_create(thread, attributes, { context in
            guard let context else { return nil }
            let start = Unmanaged<Start>.fromOpaque(context).takeRetainedValue()
            start.nameThisThread()
            start.body()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Start>.fromOpaque(context).release()
            throw StartError(name: name, code: result)
        }
        #else
        let thread = Thread(block: body)
        thread.name = name
        if let stackSize { thread.stackSize = stackSize }
        thread.start()
        #endif
    }

    #if canImport(Glibc) || canImport(Musl)
    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }

        /// The kernel's name of the calling thread (ps, top, /proc): written where the
        /// kernel keeps it, as the C library's `pthread_setname_np` (not exported to Swift
        /// here) does.
        func nameThisThread() {
            let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { return }
            _ = FileDescriptorOutput.write(fd, Array(name.utf8))
            close(fd)
        }
    }
    #endif
}
