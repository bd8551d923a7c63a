#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where `JournalCodec.load` takes a journal's lines from, one at a time.
protocol JournalLineSource {
    /// The next line without its newline, valid until the next call; nil when
    /// no whole line is left.
    mutating func next() throws -> UnsafeBufferPointer<UInt8>?
    /// The bytes of the lines returned so far, their newlines included.
    var consumed: Int { get }
    /// Once `next` has returned nil: the bytes after the last newline (a line
    /// a crash cut short).
    var rest: Int { get }
}

/// The lines of a journal already in memory.
struct JournalBufferLines: JournalLineSource {
    private let buffer: UnsafeBufferPointer<UInt8>
    private(set) var consumed = 0

    init(_ buffer: UnsafeBufferPointer<UInt8>) {
        self.buffer = buffer
    }

    var rest: Int { buffer.count - consumed }

    mutating func next() throws -> UnsafeBufferPointer<UInt8>? {
        guard let base = buffer.baseAddress, consumed < buffer.count,
            let found = memchr(base + consumed, 0x0A, buffer.count - consumed)
        else { return nil }
        let end = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        let line = UnsafeBufferPointer(rebasing: buffer[consumed..<end])
        consumed = end + 1
        return line
    }
}

/// The lines of a journal file, read through one buffer that is reused from
/// line to line and grows only for a line longer than it.
///
/// Why not the whole file in one array, as before: every page of a fresh
/// file-sized buffer is a page fault when `read` first writes it, and on the
/// 2-vCPU VM those faults, with the copy into cold memory, were about a fifth
/// of resuming a 10,000-entry journal (3.2 MB). A buffer of this size is
/// faulted in once and stays in the cache.
///
/// A line longer than the buffer (a snapshot holds the whole transcript) makes
/// it grow at once to the rest of the file as `fstat` gave it, not by
/// doubling: doubling up to a 1.3 MB line wrote 4 MB of fresh pages and
/// copied the line's start at every step, where this costs what reading the
/// whole file cost before.
struct JournalFileLines: JournalLineSource {
    /// A `read` that failed, with its `errno`.
    struct ReadFailure: Error {
        var code: Int32
    }

    static let initialCapacity = 64 * 1024

    private let fd: Int32
    /// The file's size when it was opened (0: unknown, as for a pipe).
    private let expectedSize: Int
    private var buffer: UnsafeMutableBufferPointer<UInt8>
    /// The unread part of the buffer is `start..<end`; no newline is in `start..<searched`.
    private var start = 0
    private var end = 0
    private var searched = 0
    private var atEnd = false
    private(set) var consumed = 0

    /// Reads `fd` from where it is; `release()` frees the buffer (the caller owns `fd`).
    init(fd: Int32, expectedSize: Int = 0) {
        self.fd = fd
        self.expectedSize = max(expectedSize, 0)
        buffer = .allocate(capacity: Self.initialCapacity)
    }

    mutating func release() {
        buffer.deallocate()
        buffer = UnsafeMutableBufferPointer(start: nil, count: 0)
    }

    var rest: Int { end - start }

    mutating func next() throws -> UnsafeBufferPointer<UInt8>? {
        while true {
            if let base = buffer.baseAddress, searched < end,
                let found = memchr(base + searched, 0x0A, end - searched)
            {
                let newline = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                let line = UnsafeBufferPointer(start: base + start, count: newline - start)
                consumed += newline + 1 - start
                start = newline + 1
                searched = start
                return line
            }
            searched = end
            if atEnd { return nil }
            try fill()
        }
    }

    /// Moves the unread part to the front (growing the buffer when that part
    /// fills it) and reads once more after it; `atEnd` at the end of the file.
    private mutating func fill() throws {
        let unread = end - start
        if start > 0, let base = buffer.baseAddress {
            if unread > 0 { memmove(base, base + start, unread) }
            start = 0
            end = unread
            searched = unread
        }
        if end == buffer.count {
            let (doubled, overflow) = buffer.count.multipliedReportingOverflow(by: 2)
            guard !overflow else { throw ReadFailure(code: ENOMEM) }
            // The rest of the file, and one byte to see its end in the same read.
            let rest = expectedSize > consumed ? expectedSize - consumed + 1 : 0
            let larger = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(doubled, rest))
            if let from = buffer.baseAddress, let to = larger.baseAddress { memcpy(to, from, end) }
            buffer.deallocate()
            buffer = larger
        }
        guard let base = buffer.baseAddress else { throw ReadFailure(code: ENOMEM) }
        while true {
            let n = read(fd, base + end, buffer.count - end)
            if n > 0 {
                end += n
                return
            }
            if n == 0 {
                atEnd = true
                return
            }
            if errno != EINTR { throw ReadFailure(code: errno) }
        }
    }
}
