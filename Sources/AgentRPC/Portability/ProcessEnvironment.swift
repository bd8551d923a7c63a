#if canImport(Glibc)
// `__environ`, a C global: only read here, and nothing in the package writes it (no `setenv`).
@preconcurrency import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The process's environment variables, read once per call from `environ`.
package enum ProcessEnvironment {
    /// What `ProcessInfo.processInfo.environment` gives: each `NAME=value` entry
    /// split at its first `=` (entries without one left out, the last of
    /// duplicate names kept, bytes that are not UTF-8 repaired), but split on the
    /// bytes: FoundationEssentials splits each entry's `Character`s, ~40,000
    /// instructions an entry, 1.5 M of a server's 12.5 M to its first answer.
    /// One difference, on purpose: a value that starts with a combining mark is
    /// kept as `getenv` sees it (Foundation drops the entry, its `=` being part of
    /// a larger character). Not safe against a concurrent `setenv`, which nothing
    /// in the package calls.
    package static func current() -> [String: String] {
        #if canImport(Glibc)
        // `__environ`, which imports as an optional: `clearenv` leaves it null, which
        // the overlay's non-optional `environ` cannot hold.
        guard let entries = __environ else { return [:] }
        var count = 0
        while entries[count] != nil { count += 1 }
        var variables = [String: String](minimumCapacity: count)
        for index in 0..<count {
            guard let entry = entries[index] else { continue }
            let bytes = UnsafeRawBufferPointer(start: entry, count: strlen(entry)).bindMemory(to: UInt8.self)
            guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")) else { continue }
            variables[String(decoding: bytes[..<equals], as: UTF8.self)] =
                String(decoding: bytes[(equals + 1)...], as: UTF8.self)
        }
        return variables
        #else
        return ProcessEnvironment.current()
        #endif
    }
}
