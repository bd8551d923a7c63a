// libdispatch through its C interface. The Swift overlay (`import Dispatch`) is one
// more library for every start to load and bind (libswiftDispatch.so: ~0.17 ms of a
// 5 ms cold start, Benchmarks/README.md "Session 13"), for the three things the
// package asks of libdispatch, which the Swift concurrency runtime loads anyway.
#if canImport(CDispatch)
import CDispatch
import CDispatchSignal
#else
import Dispatch
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A closure carried through a C context pointer.
private final class Work: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

package enum Dispatching {
    /// Runs `body` on a global concurrent queue: the default one, or the
    /// utility one (`DispatchQueue.global(qos: .utility)`) for background upkeep.
    package static func async(utility: Bool = false, _ body: @escaping @Sendable () -> Void) {
        #if canImport(CDispatch)
        let queue = dispatch_get_global_queue(utility ? Int(DISPATCH_QUEUE_PRIORITY_LOW) : Int(DISPATCH_QUEUE_PRIORITY_DEFAULT), 0)
        dispatch_async_f(queue, Unmanaged.passRetained(Work(body)).toOpaque()) { context in
            guard let context else { return }
            Unmanaged<Work>.fromOpaque(context).takeRetainedValue().body()
        }
        #else
        DispatchQueue.global(qos: utility ? .utility : .default).async(execute: body)
        #endif
    }

    /// Nanoseconds of the monotonic clock (what `DispatchTime.now().uptimeNanoseconds` read).
    package static func monotonicNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
    }
}

/// Delivers one signal to a handler on a global queue instead of its default
/// action (which would end the process mid-write): a libdispatch signal source.
/// The handler gets how many arrived since its last call (several may coalesce).
/// Stops at `cancel()` or deinit.
package final class SignalSource: @unchecked Sendable {
    #if canImport(CDispatch)
    // @unchecked: `source` is set at init and only cancelled after (which
    // libdispatch allows from any thread); libdispatch serialises the handler, and
    // the context is freed by the cancel handler, which runs after the last event
    // handler.
    private let source: dispatch_source_t

    private final class Context {
        let handler: @Sendable (Int) -> Void
        let source: dispatch_source_t
        init(_ handler: @escaping @Sendable (Int) -> Void, _ source: dispatch_source_t) {
            self.handler = handler
            self.source = source
        }
    }

    package init(_ number: Int32, handler: @escaping @Sendable (Int) -> Void) {
        signal(number, SIG_IGN)
        // `DISPATCH_SOURCE_TYPE_SIGNAL`, which Swift cannot import (CDispatchSignal).
        let type = OpaquePointer(agentrpc_dispatch_source_type_signal())
        let source = dispatch_source_create(type, UInt(number), 0, dispatch_get_global_queue(Int(DISPATCH_QUEUE_PRIORITY_DEFAULT), 0))
        let object = dispatch_object_t(_ds: source)
        dispatch_set_context(object, Unmanaged.passRetained(Context(handler, source)).toOpaque())
        dispatch_source_set_event_handler_f(source) { raw in
            guard let raw else { return }
            let context = Unmanaged<Context>.fromOpaque(raw).takeUnretainedValue()
            context.handler(max(1, Int(clamping: dispatch_source_get_data(context.source))))
        }
        // The source object itself stays allocated after its cancel (Swift cannot call
        // `dispatch_release`; the overlay frees its sources through a shim of its own):
        // one small object for each signal watched, three a process at most (each entry
        // point watches TERM, INT and HUP once).
        dispatch_source_set_cancel_handler_f(source) { raw in
            guard let raw else { return }
            Unmanaged<Context>.fromOpaque(raw).release()
        }
        dispatch_resume(object)
        self.source = source
    }

    /// Stops delivering (the signal stays ignored); again, or at deinit, does nothing more.
    package func cancel() {
        dispatch_source_cancel(source)
    }
    #else
    private let source: any DispatchSourceSignal

    package init(_ number: Int32, handler: @escaping @Sendable (Int) -> Void) {
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler { handler(max(1, Int(source.data))) }
        source.resume()
        self.source = source
    }

    package func cancel() { source.cancel() }
    #endif

    deinit { cancel() }
}
